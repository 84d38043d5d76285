//! Transitions of the turns the writer tracks, without reading their rows
//! first (issue 39): the writer knows every unsettled turn's thread,
//! workspace and state (`LiveTurn`), so the warm turn's boundary, running
//! mark and end are each one `UPDATE … RETURNING` (see
//! [`stage_live_transition`]).
//!
//! What must stay true: these are shortcuts, never a second set of rules.
//! Whenever one does not apply — the turn is not tracked, the table refuses
//! the event from the state memory holds, or the row is not in that state
//! (or, for the boundary, a cancel was requested) — nothing was written
//! and the caller takes the path that reads the row, as before.

use rusqlite::{Connection, params};

use crate::domain::{SessionBinding, StoreResult, Turn, TurnEvent};

use super::transition::{Head, stage_live_transition};
use super::writer::Writer;

impl Writer {
    /// `event` applied to the tracked turn `id` from the state memory holds,
    /// with `then` run in the same savepoint once it applied; `None` when it
    /// did not apply (see the module docs).
    pub(super) fn live_transition(
        &mut self,
        id: &str,
        event: TurnEvent,
        outcome: Option<&str>,
        session: Option<&str>,
        then: impl FnOnce(&Connection, &Turn) -> StoreResult<()>,
    ) -> StoreResult<Option<Turn>> {
        let Some(live) = self.live.get(id) else {
            return Ok(None);
        };
        let (thread, workspace, from) = (live.thread.clone(), live.workspace.clone(), live.state);
        let head = Head {
            id,
            thread: &thread,
            workspace: &workspace,
            from,
            asked: live.asked,
        };
        let after = self.write(|tx, j, st, now| {
            let after = stage_live_transition(tx, j, st, now, &head, event, outcome, session)?;
            if let Some(turn) = &after {
                then(tx, turn)?;
            }
            Ok(after)
        })?;
        if let Some(turn) = &after {
            self.after_transition(from, turn);
        }
        Ok(after)
    }

    /// The dispatch boundary of a tracked turn, with the native session on
    /// the turn and as its thread's binding (see `mark_dispatched`).
    pub(super) fn live_dispatch(
        &mut self,
        id: &str,
        binding: &SessionBinding,
    ) -> StoreResult<Option<Turn>> {
        let session = Some(binding.session_id.as_str());
        self.live_transition(id, TurnEvent::Dispatch, None, session, |tx, turn| {
            Ok(bind_session(tx, &turn.thread_id, binding)?)
        })
    }
}

/// Records `binding` as the native session of thread `thread_id` (the one
/// statement both dispatch paths run).
pub(super) fn bind_session(
    tx: &rusqlite::Connection,
    thread_id: &str,
    binding: &SessionBinding,
) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "UPDATE threads SET agent_session_id = ?1, agent_fingerprint = ?2, \
         agent_thread_version = ?3 WHERE id = ?4",
    )?
    .execute(params![
        binding.session_id,
        binding.fingerprint,
        binding.thread_version as i64,
        thread_id
    ])?;
    Ok(())
}
