//! The shared pieces of turn operations: command receipts and the one
//! function that applies a table transition inside a transaction.

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::json;

use crate::domain::{EventKind, StoreError, StoreResult, Turn, TurnEvent, next_state};

use super::journal::{Journal, JournalTx};
use super::read;

/// A stored command receipt.
pub(crate) struct StoredReceipt {
    pub kind: String,
    pub digest: String,
    pub resource_id: String,
}

/// Look up the receipt of `(principal, command_id)`.
pub(crate) fn receipt(
    conn: &rusqlite::Connection,
    principal: &str,
    command_id: &str,
) -> StoreResult<Option<StoredReceipt>> {
    Ok(conn
        .query_row(
            "SELECT kind, digest, resource_id FROM receipts WHERE principal = ?1 AND command_id = ?2",
            [principal, command_id],
            |r| Ok(StoredReceipt { kind: r.get(0)?, digest: r.get(1)?, resource_id: r.get(2)? }),
        )
        .optional()?)
}

/// Check a reused command id: same kind and digest replays, anything else conflicts.
pub(crate) fn check_replay(found: &StoredReceipt, kind: &str, digest: &str) -> StoreResult<()> {
    if found.kind == kind && found.digest == digest {
        Ok(())
    } else {
        Err(StoreError::conflict(
            "command id was already used with different input",
        ))
    }
}

/// Apply `event` to `row` inside a transaction: update the row, journal the
/// change. Returns the updated turn, or `None` when the table refuses.
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
    let column = match event {
        TurnEvent::Claim => "prepared_at",
        TurnEvent::Dispatch => "dispatched_at",
        TurnEvent::Start => "started_at",
        TurnEvent::ResolveFailed | TurnEvent::ResolveCancelled => "resolved_at",
        _ => "finished_at",
    };
    let changed = tx.execute(
        &format!(
            "UPDATE turns SET state = ?1, outcome = coalesce(?2, outcome), updated_at = ?3, \
             {column} = ?3 WHERE id = ?4 AND state = ?5"
        ),
        params![to.as_str(), outcome, now, row.id, row.state.as_str()],
    )?;
    if changed != 1 {
        return Err(StoreError::conflict("turn changed concurrently"));
    }
    let mut payload = json!({ "from": row.state, "to": to, "event": event });
    if let Some(code) = outcome {
        payload["outcome"] = json!(code);
    }
    if recovered {
        payload["recovered"] = json!(true);
    }
    journal.append(
        tx,
        stage,
        &row.thread_id,
        Some(&row.id),
        EventKind::TurnState,
        now,
        Some(payload),
    )?;
    read::turn(tx, &row.id)
}
