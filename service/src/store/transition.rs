//! The one function that applies a table transition inside a transaction
//! (command receipts are in `receipts`).

use lapis_protocol::{Payload, StateChange};
use rusqlite::{Connection, params};

use crate::domain::{StoreError, StoreResult, Turn, TurnEvent, next_state};

use super::journal::{Journal, JournalTx};

/// Apply `event` to `row` inside a transaction: update the row, journal the
/// change. Returns the updated turn, or `None` when the table refuses.
///
/// No state but `queued` keeps a raw prompt: every transition clears
/// `turns.prompt` in the same UPDATE (the claim has read it first; the
/// redacted `user_message` event is the record, see `super::integrity`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn stage_transition(
    tx: &Connection,
    journal: &Journal,
    stage: &mut JournalTx,
    now: i64,
    row: &Turn,
    event: TurnEvent,
    outcome: Option<&str>,
    recovered: bool,
) -> StoreResult<Option<Turn>> {
    let Some(to) = next_state(row.state, event) else {
        return Ok(None);
    };
    // The timestamp this event sets: its column, and the same field of the
    // in-memory row returned below.
    let (column, stamp): (&str, fn(&mut Turn) -> &mut Option<i64>) = match event {
        TurnEvent::Claim => ("prepared_at", |t| &mut t.prepared_at),
        TurnEvent::Dispatch => ("dispatched_at", |t| &mut t.dispatched_at),
        TurnEvent::Start => ("started_at", |t| &mut t.started_at),
        TurnEvent::ResolveFailed | TurnEvent::ResolveCancelled => {
            ("resolved_at", |t| &mut t.resolved_at)
        }
        _ => ("finished_at", |t| &mut t.finished_at),
    };
    let changed = tx
        .prepare_cached(&format!(
            "UPDATE turns SET state = ?1, outcome = coalesce(?2, outcome), updated_at = ?3, \
             {column} = ?3, prompt = NULL WHERE id = ?4 AND state = ?5"
        ))?
        .execute(params![
            to.as_str(),
            outcome,
            now,
            row.id,
            row.state.as_str()
        ])?;
    if changed != 1 {
        return Err(StoreError::conflict("turn changed concurrently"));
    }
    // Served by the partial index on unsettled turns (schema 11): its
    // condition is repeated here literally, as SQLite needs to use it.
    let workspace_idle = to.is_terminal()
        && tx
            .prepare_cached(
                "SELECT NOT EXISTS (SELECT 1 FROM turns WHERE workspace_id = ?1 AND id != ?2 \
                 AND state NOT IN ('completed', 'failed', 'cancelled'))",
            )?
            .query_row(params![row.workspace_id, row.id], |r| r.get::<_, bool>(0))?;
    let change = Payload::TurnState(StateChange {
        from: row.state,
        to,
        event,
        outcome: outcome.map(str::to_owned),
        recovered,
        workspace_idle,
    });
    journal.append(tx, stage, &row.thread_id, Some(&row.id), now, change)?;
    if to.is_terminal() || to.is_fenced() {
        super::inbox::abandon(tx, &row.id, to, outcome, now)?;
    }
    // The row as the UPDATE above left it, without reading it back: the
    // caller read `row` in this transaction, and only these columns changed.
    let mut after = row.clone();
    after.state = to;
    if let Some(code) = outcome {
        after.outcome = Some(code.to_owned());
    }
    after.updated_at = now;
    *stamp(&mut after) = Some(now);
    Ok(Some(after))
}
