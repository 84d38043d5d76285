//! The store's side of an application tool call's at-most-once path
//! (`tools::call`): whether a mutating call may still be invoked.

use super::writer::Writer;
use crate::domain::StoreResult;

impl Writer {
    /// Whether `turn` may still invoke a mutating tool now: it is past its
    /// dispatch boundary with no outcome and no cancel is pending (an
    /// owner's cancel, a deadline or a budget ceiling all set the durable
    /// cancel flag first). Decided here, on the writer, from the row as
    /// every request queued before this one left it, so a cancel that was
    /// acknowledged before this call is always seen.
    pub(super) fn may_invoke(&self, turn: &str) -> StoreResult<bool> {
        let row = self.turn_or_404(turn)?;
        Ok(row.state.is_past_dispatch() && !row.cancel_requested)
    }
}
