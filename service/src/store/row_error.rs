//! The error a stored row that fails a decoding check becomes: one
//! definition for every row reader (threads, turns, events, ports), so a
//! bad row names its table, its id and the check it failed the same way.

use crate::domain::StoreError;

/// `table`'s row `row` failed `check`, as the mapping error rusqlite carries.
pub(super) fn bad(table: &'static str, row: &str, check: &'static str) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(
        0,
        rusqlite::types::Type::Text,
        Box::new(StoreError::InvalidRow {
            table,
            row: row.to_owned(),
            check,
        }),
    )
}
