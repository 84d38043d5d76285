//! The store's side of an application tool call's at-most-once path
//! (`tools::call`): whether a mutating call may still be invoked, and the
//! unknown tool effects a crash left.

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

impl super::Store {
    /// The unknown tool effects of `turn`, or of every turn (`None`).
    pub(crate) async fn unknown_tool_effects(
        &self,
        turn: Option<&str>,
    ) -> StoreResult<Vec<lapis_protocol::UnknownToolEffect>> {
        let turn = turn.map(str::to_owned);
        self.read(move |c, m| super::read::unknown_tool_effects(c, m, turn.as_deref()))
            .await
    }

    /// Whether `turn` may still invoke a mutating application tool: it
    /// runs past its dispatch boundary and no cancel (owner's, deadline,
    /// budget) is pending. One step on the writer reads the turn and
    /// decides, after every request sent before it (`tools::call` asks
    /// right before `tools.invoke`, after `capture.begin` answered).
    pub(crate) async fn may_invoke(&self, turn: &str) -> StoreResult<bool> {
        let turn = turn.to_owned();
        self.op(move |w| w.may_invoke(&turn)).await
    }
}
