//! The one function that applies a table transition inside a transaction
//! (command receipts are in `receipts`).

use lapis_protocol::{Payload, StateChange};
use rusqlite::{Connection, params};

use crate::domain::{StoreError, StoreResult, Turn, TurnEvent, TurnState, next_state};

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
    let to_apply = (event, outcome, None);
    stage_transition_with(tx, journal, stage, now, row, to_apply, recovered)
}

/// [`stage_transition`] of a claim that stores the turn's prepared
/// configuration (`prepared`, its column text) in the same UPDATE; the
/// caller journals it (`super::prepared::stage`).
pub(crate) fn stage_claim(
    tx: &Connection,
    journal: &Journal,
    stage: &mut JournalTx,
    now: i64,
    row: &Turn,
    prepared: &str,
) -> StoreResult<Option<Turn>> {
    let to_apply = (TurnEvent::Claim, None, Some(prepared));
    stage_transition_with(tx, journal, stage, now, row, to_apply, false)
}

/// An event, its outcome, and (a claim's) prepared configuration.
type Apply<'a> = (TurnEvent, Option<&'a str>, Option<&'a str>);

fn stage_transition_with(
    tx: &Connection,
    journal: &Journal,
    stage: &mut JournalTx,
    now: i64,
    row: &Turn,
    (event, outcome, prepared): Apply<'_>,
    recovered: bool,
) -> StoreResult<Option<Turn>> {
    let Some(to) = next_state(row.state, event) else {
        return Ok(None);
    };
    let mut update = tx.prepare_cached(super::hot::transition(event))?;
    let (to_s, from_s) = (to.as_str(), row.state.as_str());
    let changed = if event == TurnEvent::Claim {
        update.execute(params![to_s, outcome, now, row.id, from_s, prepared])?
    } else {
        update.execute(params![to_s, outcome, now, row.id, from_s])?
    };
    if changed != 1 {
        return Err(StoreError::conflict("turn changed concurrently"));
    }
    let head = Head {
        id: &row.id,
        thread: &row.thread_id,
        workspace: &row.workspace_id,
        from: row.state,
        asked: true,
    };
    stage_change(
        tx, journal, stage, now, &head, to, event, outcome, recovered,
    )?;
    // The row as the UPDATE above left it, without reading it back: the
    // caller read `row` in this transaction, and only these columns changed.
    let mut after = row.clone();
    after.state = to;
    if let Some(code) = outcome {
        after.outcome = Some(code.to_owned());
    }
    after.updated_at = now;
    // The timestamp column the event set (see `super::hot::transition`).
    *match event {
        TurnEvent::Claim => &mut after.prepared_at,
        TurnEvent::Dispatch => &mut after.dispatched_at,
        TurnEvent::Start => &mut after.started_at,
        TurnEvent::ResolveFailed | TurnEvent::ResolveCancelled => &mut after.resolved_at,
        _ => &mut after.finished_at,
    } = Some(now);
    Ok(Some(after))
}

/// What a transition needs of its turn besides the row: the writer knows
/// it for every turn it tracks (`LiveTurn`).
pub(crate) struct Head<'a> {
    /// Turn id.
    pub(crate) id: &'a str,
    /// Its thread.
    pub(crate) thread: &'a str,
    /// Its workspace.
    pub(crate) workspace: &'a str,
    /// The state it is in.
    pub(crate) from: TurnState,
    /// It may have pending permission requests (`false` only when the
    /// writer knows it journaled none): leaving flight settles them.
    pub(crate) asked: bool,
}

/// [`stage_transition`] for a turn the writer tracks, without reading its
/// row first: one `UPDATE … RETURNING` (see [`super::hot`]) applies the
/// table's change and returns the row as it left it. `Ok(None)` when the
/// table refuses the event or no row matched (`head.from` is stale, or a
/// dispatch found a cancel requested): nothing changed, and the caller
/// takes the path that reads the row. `session` goes on the turn with
/// the dispatch boundary.
#[allow(clippy::too_many_arguments)]
pub(crate) fn stage_live_transition(
    tx: &Connection,
    journal: &Journal,
    stage: &mut JournalTx,
    now: i64,
    head: &Head<'_>,
    event: TurnEvent,
    outcome: Option<&str>,
    session: Option<&str>,
) -> StoreResult<Option<Turn>> {
    let Some(to) = next_state(head.from, event) else {
        return Ok(None);
    };
    let fromto = (head.from, to);
    let Some(after) =
        super::hot::transition_returning(tx, head.id, fromto, event, outcome, now, session)?
    else {
        return Ok(None);
    };
    stage_change(tx, journal, stage, now, head, to, event, outcome, false)?;
    Ok(Some(after))
}

/// Journals a transition already applied to the row (`head.from` → `to`),
/// and settles the turn's pending permission requests when it leaves
/// flight.
#[allow(clippy::too_many_arguments)]
fn stage_change(
    tx: &Connection,
    journal: &Journal,
    stage: &mut JournalTx,
    now: i64,
    head: &Head<'_>,
    to: TurnState,
    event: TurnEvent,
    outcome: Option<&str>,
    recovered: bool,
) -> StoreResult<()> {
    // Served by the partial index on unsettled turns (schema 11): its
    // condition is repeated here literally, as SQLite needs to use it.
    let workspace_idle = to.is_terminal()
        && tx
            .prepare_cached(
                "SELECT NOT EXISTS (SELECT 1 FROM turns WHERE workspace_id = ?1 AND id != ?2 \
                 AND state NOT IN ('completed', 'failed', 'cancelled'))",
            )?
            .query_row(params![head.workspace, head.id], |r| r.get::<_, bool>(0))?;
    let change = Payload::TurnState(StateChange {
        from: head.from,
        to,
        event,
        outcome: outcome.map(str::to_owned),
        recovered,
        workspace_idle,
    });
    journal.append(tx, stage, head.thread, Some(head.id), now, change)?;
    if head.asked && (to.is_terminal() || to.is_fenced()) {
        super::inbox::abandon(tx, head.id, to, outcome, now)?;
    }
    Ok(())
}
