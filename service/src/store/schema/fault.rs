//! The migration fault hook (tests and `test-support` builds).

#[cfg(any(test, feature = "test-support"))]
use crate::domain::StoreError;
use crate::domain::StoreResult;
use std::path::Path;

/// Test hook: a home holding `.test-fail-migration` with a version number
/// fails the migration step to that version (after the steps before it
/// committed), so a test sees a migration fail midway.
#[cfg(any(test, feature = "test-support"))]
pub(super) fn injected_failure(db: &Path, to: i64) -> StoreResult<()> {
    let marker = db.parent().map(|h| h.join(".test-fail-migration"));
    let wanted = marker.and_then(|m| std::fs::read_to_string(m).ok());
    if wanted.is_some_and(|w| w.trim() == to.to_string()) {
        return Err(StoreError::invalid(format!(
            "injected failure of the migration to version {to}"
        )));
    }
    Ok(())
}

#[cfg(not(any(test, feature = "test-support")))]
pub(super) fn injected_failure(_: &Path, _: i64) -> StoreResult<()> {
    Ok(())
}
