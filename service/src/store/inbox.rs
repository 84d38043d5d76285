//! The durable permission inbox: one row per journaled permission request
//! (table `permission_requests`, schema version 11).
//!
//! What must stay true:
//! - a row is inserted in the very transaction that journals its
//!   `permission_requested` event, and settled in the one that journals
//!   the matching `permission_decided` (both from the writer's append path,
//!   [`on_event`]), so the inbox and the journal never disagree about
//!   whether a request is pending;
//! - a turn that leaves flight (terminal or fenced) settles whatever of it
//!   is still pending as [`Settlement::Abandoned`] with the turn's fate, in
//!   the transition's transaction ([`abandon`], called by
//!   `transition::stage_transition`; recovery at open goes through it), so
//!   no row stays pending past its turn, across restarts either. The
//!   writer skips the look for a turn it tracks that journaled no request
//!   (`LiveTurn::asked`: rows are only ever inserted by [`on_event`], on
//!   the append path that sets it);
//! - a metadata-only thread's row keeps no content: the tool call is
//!   reduced to its id and kind (the options stay: their ids are what an
//!   answer names).
//!
//! Who may answer is decided by the server (any application of the
//! thread's principal with `permissions:respond`); delivery to the waiting
//! runner is the engine broker's, which the inbox never replaces: the row
//! is the record, the broker the live channel.

use lapis_protocol::{
    Answerer, Invocation, PendingRequest, PermissionDecided, PermissionOption, PermissionRequested,
    Settlement,
};
use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::domain::{EventKind, JournalEvent, Retention, StoreError, StoreResult, TurnState};

/// How a settled request ended (an answer to it is `conflict` naming this).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Settled {
    /// How.
    pub(crate) settlement: Settlement,
    /// The answer given (an option id, or `cancelled`); none when abandoned.
    pub(crate) answer: Option<String>,
    /// Who answered, for [`Settlement::Answered`].
    pub(crate) answered_by: Option<Answerer>,
    /// For [`Settlement::Abandoned`]: the turn's state (and outcome code).
    pub(crate) fate: Option<String>,
    /// When (ms since the epoch).
    pub(crate) at: i64,
}

impl Settled {
    /// One line naming how it was settled (content-free: ids and codes).
    pub(crate) fn describe(&self) -> String {
        let mut s = self.settlement.as_str().to_owned();
        if let Some(by) = &self.answered_by {
            s.push_str(&format!(" by application `{}`", by.application));
        }
        if let Some(a) = &self.answer {
            s.push_str(&format!(" with `{a}`"));
        }
        if let Some(f) = &self.fate {
            s.push_str(&format!(" (turn {f})"));
        }
        s.push_str(&format!(" at {}", lapis_protocol::time::format_ms(self.at)));
        s
    }
}

/// One inbox row: the request as listed, and its settlement once settled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InboxEntry {
    /// The request.
    pub(crate) request: PendingRequest,
    /// `None` while pending.
    pub(crate) settled: Option<Settled>,
}

/// What `status` shows of the inbox.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct InboxStatus {
    /// Pending requests.
    pub(crate) pending: u64,
    /// The oldest pending one: (turn id, request id, requested at).
    pub(crate) oldest: Option<(String, String, i64)>,
}

/// Keeps the inbox in step with a just-staged, non-late journal event of
/// `turn` (see the module docs); other kinds cost nothing.
pub(super) fn on_event(tx: &Connection, event: &JournalEvent, now: i64) -> StoreResult<()> {
    let (Some(turn), Some(value)) = (event.turn_id.as_deref(), event.payload.as_ref()) else {
        return Ok(());
    };
    match event.kind {
        EventKind::PermissionRequested => {
            let r: PermissionRequested = serde_json::from_value(value.clone())
                .map_err(|_| StoreError::invalid("permission_requested payload"))?;
            open(tx, turn, &event.thread_id, event.seq, &r, now)
        }
        EventKind::PermissionDecided => {
            let d: PermissionDecided = serde_json::from_value(value.clone())
                .map_err(|_| StoreError::invalid("permission_decided payload"))?;
            settle(tx, turn, event.seq, &d, now)
        }
        _ => Ok(()),
    }
}

fn open(
    tx: &Connection,
    turn: &str,
    thread: &str,
    seq: u64,
    r: &PermissionRequested,
    now: i64,
) -> StoreResult<()> {
    let (workspace, retention): (String, String) = tx
        .prepare_cached("SELECT workspace_id, retention FROM threads WHERE id = ?1")?
        .query_row([thread], |row| Ok((row.get(0)?, row.get(1)?)))?;
    let tool_call = if Retention::parse(&retention) == Some(Retention::MetadataOnly) {
        Invocation {
            id: r.invocation.id.clone(),
            kind: r.invocation.kind.clone(),
            ..Invocation::default()
        }
    } else {
        r.invocation.clone()
    };
    tx.prepare_cached(
        "INSERT INTO permission_requests (turn_id, request_id, thread_id, workspace_id, \
         tool_call, options, requested_at, expires_at, requested_seq) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?
    .execute(params![
        turn,
        r.request_id,
        thread,
        workspace,
        json(&tool_call),
        json(&r.options),
        now,
        r.expires_at.unwrap_or(now),
        seq as i64,
    ])?;
    Ok(())
}

fn settle(
    tx: &Connection,
    turn: &str,
    seq: u64,
    d: &PermissionDecided,
    now: i64,
) -> StoreResult<()> {
    // A decision without a decider is a late answer, filed as an
    // observation: it settles nothing.
    let Some(by) = d.decided_by else {
        return Ok(());
    };
    let answered_by = d.answered_by.as_ref().map(json);
    tx.prepare_cached(
        "UPDATE permission_requests SET settlement = ?3, answer = ?4, answered_by = ?5, \
         settled_at = ?6, settled_seq = ?7 \
         WHERE turn_id = ?1 AND request_id = ?2 AND settlement IS NULL",
    )?
    .execute(params![
        turn,
        d.request_id,
        Settlement::from(by).as_str(),
        d.answer.label(),
        answered_by,
        now,
        seq as i64,
    ])?;
    Ok(())
}

/// Settles every still-pending request of `turn` as abandoned with the
/// turn's fate (it left flight as `to`, with `outcome`).
pub(crate) fn abandon(
    tx: &Connection,
    turn: &str,
    to: TurnState,
    outcome: Option<&str>,
    now: i64,
) -> StoreResult<()> {
    let fate = match outcome {
        Some(code) => format!("{}: {code}", to.as_str()),
        None => to.as_str().to_owned(),
    };
    tx.prepare_cached(
        "UPDATE permission_requests SET settlement = 'abandoned', fate = ?2, settled_at = ?3 \
         WHERE turn_id = ?1 AND settlement IS NULL",
    )?
    .execute(params![turn, fate, now])?;
    Ok(())
}

/// Columns of an inbox row, in [`entry_row`] order.
const COLS: &str = "p.request_id, p.turn_id, p.thread_id, p.workspace_id, t.application, \
     p.tool_call, p.options, p.requested_at, p.expires_at, p.settlement, p.answer, \
     p.answered_by, p.fate, p.settled_at";

fn entry_row(r: &Row<'_>) -> rusqlite::Result<InboxEntry> {
    let turn: String = r.get(1)?;
    let bad = |check: &'static str| {
        rusqlite::Error::FromSqlConversionFailure(
            0,
            rusqlite::types::Type::Text,
            Box::new(StoreError::InvalidRow {
                table: "permission_requests",
                row: turn.clone(),
                check,
            }),
        )
    };
    let tool_call: String = r.get(5)?;
    let options: String = r.get(6)?;
    let tool_call: Invocation = serde_json::from_str(&tool_call).map_err(|_| bad("tool_call"))?;
    let options: Vec<PermissionOption> =
        serde_json::from_str(&options).map_err(|_| bad("options"))?;
    let settlement: Option<String> = r.get(9)?;
    let settled = match settlement {
        None => None,
        Some(s) => {
            let answered_by: Option<String> = r.get(11)?;
            Some(Settled {
                settlement: Settlement::parse(&s).ok_or_else(|| bad("settlement"))?,
                answer: r.get(10)?,
                answered_by: answered_by
                    .map(|a| serde_json::from_str(&a).map_err(|_| bad("answered_by")))
                    .transpose()?,
                fate: r.get(12)?,
                at: r.get::<_, Option<i64>>(13)?.unwrap_or(0),
            })
        }
    };
    Ok(InboxEntry {
        request: PendingRequest {
            id: r.get(0)?,
            turn_id: turn.clone(),
            thread_id: r.get(2)?,
            workspace_id: r.get(3)?,
            application: r.get(4)?,
            requested_at: r.get(7)?,
            tool_call,
            options,
            deadline: r.get(8)?,
        },
        settled,
    })
}

/// Every pending request, oldest first.
pub(super) fn pending(conn: &Connection) -> StoreResult<Vec<InboxEntry>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {COLS} FROM permission_requests p JOIN threads t ON t.id = p.thread_id \
         WHERE p.settlement IS NULL ORDER BY p.requested_at, p.turn_id, p.request_id"
    ))?;
    let rows = stmt.query_map([], entry_row)?;
    rows.map(|r| r.map_err(super::read::unwrap_err)).collect()
}

/// One request, pending or settled.
pub(super) fn get(conn: &Connection, turn: &str, request: &str) -> StoreResult<Option<InboxEntry>> {
    conn.prepare_cached(&format!(
        "SELECT {COLS} FROM permission_requests p JOIN threads t ON t.id = p.thread_id \
         WHERE p.turn_id = ?1 AND p.request_id = ?2"
    ))?
    .query_row([turn, request], entry_row)
    .optional()
    .map_err(super::read::unwrap_err)
}

/// Pending count and the oldest pending request.
pub(super) fn status(conn: &Connection) -> StoreResult<InboxStatus> {
    let pending: i64 = conn
        .prepare_cached("SELECT count(*) FROM permission_requests WHERE settlement IS NULL")?
        .query_row([], |r| r.get(0))?;
    let oldest = conn
        .prepare_cached(
            "SELECT turn_id, request_id, requested_at FROM permission_requests \
             WHERE settlement IS NULL ORDER BY requested_at, turn_id, request_id LIMIT 1",
        )?
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .optional()?;
    Ok(InboxStatus {
        pending: pending as u64,
        oldest,
    })
}

/// A value as the JSON text its column stores.
fn json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}
