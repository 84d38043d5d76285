//! Queries and row mapping, shared by the writer and the read connections.
//!
//! Every function takes a plain `&Connection` (a transaction derefs to one),
//! so the writer sees its own uncommitted rows and readers see the last commit.

use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::domain::{
    AuthSession, EventKind, JournalEvent, StoreError, StoreResult, Thread, Turn, TurnState,
    Workspace,
};
use lapis_protocol::UserMessage;

use super::journal::MemoryPayloads;
pub(super) use super::rows::{
    THREAD_COLS, TURN_COLS, WORKSPACE_COLS, thread_row, turn_row, workspace_row,
};
use super::rows::{thread_cols, turn_cols, workspace_cols};
use lapis_protocol::Scope;

use super::row_error::bad;

/// Turn a mapping error back into the typed error it carries.
pub(super) fn unwrap_err(err: rusqlite::Error) -> StoreError {
    match err {
        rusqlite::Error::FromSqlConversionFailure(i, ty, e) => match e.downcast::<StoreError>() {
            Ok(se) => *se,
            Err(e) => StoreError::Sqlite(rusqlite::Error::FromSqlConversionFailure(i, ty, e)),
        },
        other => StoreError::from_sqlite(other),
    }
}

/// Columns of a session row, in [`session_row`] order.
pub(super) const SESSION_COLS: &str = "id, credential, principal, application, scopes, bearer_sha256, \
     created_at, expires_at, revoked_at";

/// Map a session row.
pub(super) fn session_row(r: &Row<'_>) -> rusqlite::Result<AuthSession> {
    let id: String = r.get(0)?;
    let scopes: String = r.get(4)?;
    let scopes: Vec<String> =
        serde_json::from_str(&scopes).map_err(|_| bad("auth_sessions", &id, "scopes"))?;
    Ok(AuthSession {
        // A scope this build does not know grants nothing.
        scopes: scopes.iter().filter_map(|s| Scope::parse(s)).collect(),
        credential: r.get(1)?,
        principal: r.get(2)?,
        application: r.get(3)?,
        bearer_sha256: r.get(5)?,
        created_at: r.get(6)?,
        expires_at: r.get(7)?,
        revoked_at: r.get(8)?,
        read_only: None,
        id,
    })
}

/// Columns of an event row, in [`event_row`] order.
pub(super) const EVENT_COLS: &str =
    "seq, thread_id, thread_seq, turn_id, kind, at, payload, has_payload";

/// Map an event row; payloads missing from disk are taken from `memory` or
/// flagged `payload_unavailable`.
pub(super) fn event_row(r: &Row<'_>, memory: &MemoryPayloads) -> rusqlite::Result<JournalEvent> {
    let seq = r.get::<_, i64>(0)? as u64;
    let kind: String = r.get(4)?;
    let text: Option<String> = r.get(6)?;
    let has_payload: bool = r.get(7)?;
    let row = || seq.to_string();
    let (payload, payload_unavailable) = match (text, has_payload) {
        (Some(t), _) => (
            Some(serde_json::from_str(&t).map_err(|_| bad("events", &row(), "payload"))?),
            false,
        ),
        (None, true) => match memory.get(seq) {
            Some(v) => (Some(v.clone()), false),
            None => (None, true),
        },
        (None, false) => (None, false),
    };
    Ok(JournalEvent {
        seq,
        thread_id: r.get(1)?,
        thread_seq: r.get::<_, i64>(2)? as u64,
        turn_id: r.get(3)?,
        kind: EventKind::parse(&kind).ok_or_else(|| bad("events", &row(), "kind"))?,
        at: r.get(5)?,
        payload,
        payload_unavailable,
    })
}

/// Every event of one turn, in thread order (a scan of its thread).
pub(super) fn turn_events(
    conn: &Connection,
    memory: &MemoryPayloads,
    thread: &str,
    turn: &str,
) -> StoreResult<Vec<JournalEvent>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {EVENT_COLS} FROM events WHERE thread_id = ?1 AND turn_id = ?2 ORDER BY thread_seq"
    ))?;
    let rows = stmt.query_map(params![thread, turn], |r| event_row(r, memory))?;
    rows.collect::<Result<_, _>>().map_err(unwrap_err)
}

/// The turn's `workspace_snapshot` records, in journal order.
pub(super) fn turn_snapshots(
    conn: &Connection,
    memory: &MemoryPayloads,
    thread: &str,
    turn: &str,
) -> StoreResult<Vec<lapis_protocol::snapshot::WorkspaceSnapshot>> {
    debug_assert_eq!(EventKind::WorkspaceSnapshot.as_str(), "workspace_snapshot");
    debug_assert_eq!(EventKind::TurnSubmitted.as_str(), "turn_submitted");
    // A turn's events all follow its `turn_submitted` (found through the
    // partial index `events_turn_submitted`), so the thread is read from
    // there on, not from its first event: `turns.get` of a recent turn no
    // longer reads every event of a long thread (its pages were read
    // again at every poll, as a write resets a reader's page cache). A
    // journal without that event reads from the start, as before.
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {EVENT_COLS} FROM events WHERE thread_id = ?1 AND turn_id = ?2 \
         AND kind = 'workspace_snapshot' AND thread_seq >= coalesce(( \
           SELECT thread_seq FROM events INDEXED BY events_turn_submitted \
           WHERE turn_id = ?2 AND kind = 'turn_submitted' AND thread_id = ?1 \
           ORDER BY thread_seq LIMIT 1), 0) \
         ORDER BY thread_seq"
    ))?;
    let rows = stmt.query_map(params![thread, turn], |r| event_row(r, memory))?;
    let events = rows.collect::<Result<Vec<_>, _>>().map_err(unwrap_err)?;
    Ok(events
        .into_iter()
        .filter_map(|e| match e.body() {
            Some(lapis_protocol::Payload::WorkspaceSnapshot(s)) => Some(s),
            _ => None,
        })
        .collect())
}

/// The turn's `user_message` event as its record shows it (none for turns
/// submitted before the event existed).
pub(super) fn user_message(
    conn: &Connection,
    memory: &MemoryPayloads,
    thread: &str,
    turn: &str,
) -> StoreResult<Option<UserMessage>> {
    let event = user_event(conn, memory, thread, turn)?;
    Ok(event.map(|e| UserMessage {
        thread_seq: e.thread_seq,
        text: match e.body() {
            Some(lapis_protocol::Payload::UserMessage(p)) => Some(p.text),
            _ => None,
        },
        payload_unavailable: e.payload_unavailable,
    }))
}

/// The turn's `user_message` event itself.
pub(super) fn user_event(
    conn: &Connection,
    memory: &MemoryPayloads,
    thread: &str,
    turn: &str,
) -> StoreResult<Option<JournalEvent>> {
    // `kind` is a literal so that the partial index `events_user_message`
    // (schema version 7) serves it instead of a scan of the thread.
    debug_assert_eq!(EventKind::UserMessage.as_str(), "user_message");
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {EVENT_COLS} FROM events INDEXED BY events_user_message \
         WHERE turn_id = ?2 AND kind = 'user_message' AND thread_id = ?1 \
         ORDER BY thread_seq LIMIT 1"
    ))?;
    stmt.query_row(params![thread, turn], |r| event_row(r, memory))
        .optional()
        .map_err(unwrap_err)
}

/// The canonical hashes recorded for `thread`'s events `thread_seqs`
/// (schema 17's `event_hash`; absent where none was recorded).
pub(super) fn event_hashes(
    conn: &Connection,
    thread: &str,
    thread_seqs: &[u64],
) -> StoreResult<std::collections::HashMap<u64, String>> {
    let mut stmt = conn
        .prepare_cached("SELECT event_hash FROM events WHERE thread_id = ?1 AND thread_seq = ?2")?;
    let mut out = std::collections::HashMap::new();
    for &n in thread_seqs {
        let hash: Option<String> = stmt
            .query_row(params![thread, n as i64], |r| r.get(0))
            .optional()
            .map_err(unwrap_err)?
            .flatten();
        if let Some(h) = hash {
            out.insert(n, h);
        }
    }
    Ok(out)
}

/// One workspace by id, unless it was removed.
pub(super) fn workspace(conn: &Connection, id: &str) -> StoreResult<Option<Workspace>> {
    conn.prepare_cached(concat!(
        "SELECT ",
        workspace_cols!(),
        " FROM workspaces WHERE id = ?1 AND removed_at IS NULL"
    ))?
    .query_row([id], workspace_row)
    .optional()
    .map_err(unwrap_err)
}

/// One workspace by id, removed or not (`true` when removed).
pub(super) fn workspace_any(conn: &Connection, id: &str) -> StoreResult<Option<(Workspace, bool)>> {
    conn.prepare_cached(&format!(
        "SELECT {WORKSPACE_COLS}, removed_at IS NOT NULL FROM workspaces WHERE id = ?1"
    ))?
    .query_row([id], |r| Ok((workspace_row(r)?, r.get(3)?)))
    .optional()
    .map_err(unwrap_err)
}

/// Every workspace not removed, by id.
pub(super) fn workspaces(conn: &Connection) -> StoreResult<Vec<Workspace>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {WORKSPACE_COLS} FROM workspaces WHERE removed_at IS NULL ORDER BY id"
    ))?;
    let rows = stmt.query_map([], workspace_row)?;
    rows.collect::<Result<_, _>>().map_err(unwrap_err)
}

/// One thread by id.
pub(super) fn thread(conn: &Connection, id: &str) -> StoreResult<Option<Thread>> {
    conn.prepare_cached(concat!(
        "SELECT ",
        thread_cols!(),
        " FROM threads WHERE id = ?1 AND deleted_at IS NULL"
    ))?
    .query_row([id], thread_row)
    .optional()
    .map_err(unwrap_err)
}

/// Filter for `Store::list_threads`; `None` fields match everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ThreadFilter {
    /// Only this principal's threads.
    pub(crate) principal: Option<String>,
    /// Only this application's threads.
    pub(crate) application: Option<String>,
    /// Only threads of this workspace.
    pub(crate) workspace_id: Option<String>,
    /// At most this many (newest first); 0 means the store's page bound.
    pub(crate) limit: usize,
    /// Only threads after this one in the order (`threads.list`'s cursor).
    pub(crate) after: Option<ThreadKey>,
}

/// A thread's place in `threads.list`'s order: newest `created_at`
/// first, then `id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ThreadKey {
    /// Its `created_at` (ms).
    pub(crate) created_at: i64,
    /// Its id.
    pub(crate) id: String,
}

/// Threads matching `f`, newest first, at most `limit`, and whether more
/// follow. Keyset paging on the `threads_listed` index (principal,
/// created_at DESC, id): only the filters given are in the SQL, so the
/// index carries the principal and the cursor, and a page reads its rows
/// (and the ones the other filters skip), never the pages before it.
pub(super) fn threads(
    conn: &Connection,
    f: &ThreadFilter,
    limit: usize,
) -> StoreResult<(Vec<Thread>, bool)> {
    let fetch = limit as i64 + 1;
    let (sql, mut args) = threads_sql(f);
    args.push(&fetch);
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(args.as_slice(), thread_row)?;
    let mut list: Vec<Thread> = rows.collect::<Result<_, _>>().map_err(unwrap_err)?;
    let more = list.len() > limit;
    list.truncate(limit);
    Ok((list, more))
}

/// [`threads`]' SQL for `f` and its arguments but the limit (last).
pub(super) fn threads_sql(f: &ThreadFilter) -> (String, Vec<&dyn rusqlite::ToSql>) {
    let mut sql = format!("SELECT {THREAD_COLS} FROM threads WHERE deleted_at IS NULL");
    let mut args: Vec<&dyn rusqlite::ToSql> = Vec::new();
    for (column, value) in [
        ("principal", &f.principal),
        ("application", &f.application),
        ("workspace_id", &f.workspace_id),
    ] {
        if let Some(v) = value {
            sql.push_str(&format!(" AND {column} = ?"));
            args.push(v);
        }
    }
    if let Some(k) = &f.after {
        // The range bound lets the index start at the cursor; the second
        // term skips the cursor's own `created_at` up to its id.
        sql.push_str(" AND created_at <= ? AND (created_at < ? OR id > ?)");
        args.extend([&k.created_at as &dyn rusqlite::ToSql, &k.created_at, &k.id]);
    }
    sql.push_str(" ORDER BY created_at DESC, id LIMIT ?");
    (sql, args)
}

/// One turn by id.
pub(super) fn turn(conn: &Connection, id: &str) -> StoreResult<Option<Turn>> {
    conn.prepare_cached(concat!(
        "SELECT ",
        turn_cols!(),
        " FROM turns WHERE id = ?1"
    ))?
    .query_row([id], turn_row)
    .optional()
    .map_err(unwrap_err)
}

/// Filter for `Store::list_turns`; `None` fields match everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TurnFilter {
    /// Only turns of this thread.
    pub thread_id: Option<String>,
    /// Only turns submitted by this principal.
    pub principal: Option<String>,
    /// Only turns in this state.
    pub state: Option<TurnState>,
    /// At most this many (newest first); 0 means the store's page bound.
    pub limit: usize,
}

/// Turns matching `f`, newest first.
pub(super) fn turns(conn: &Connection, f: &TurnFilter, limit: usize) -> StoreResult<Vec<Turn>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {TURN_COLS} FROM turns WHERE (?1 IS NULL OR thread_id = ?1) \
         AND (?2 IS NULL OR principal = ?2) AND (?3 IS NULL OR state = ?3) \
         ORDER BY queue_seq DESC LIMIT ?4"
    ))?;
    let rows = stmt.query_map(
        params![
            f.thread_id,
            f.principal,
            f.state.map(TurnState::as_str),
            limit as i64
        ],
        turn_row,
    )?;
    rows.collect::<Result<_, _>>().map_err(unwrap_err)
}

/// The newest unrevoked session of a credential.
pub(super) fn session_by_credential(
    conn: &Connection,
    credential: &str,
) -> StoreResult<Option<AuthSession>> {
    conn.query_row(
        &format!(
            "SELECT {SESSION_COLS} FROM auth_sessions WHERE credential = ?1 AND revoked_at IS NULL \
             ORDER BY created_at DESC, id LIMIT 1"
        ),
        [credential],
        session_row,
    )
    .optional()
    .map_err(unwrap_err)
}

/// The session with this bearer hash (revoked or not: the caller decides).
pub(super) fn session_by_bearer(
    conn: &Connection,
    sha256: &str,
) -> StoreResult<Option<AuthSession>> {
    conn.prepare_cached(&format!(
        "SELECT {SESSION_COLS} FROM auth_sessions WHERE bearer_sha256 = ?1"
    ))?
    .query_row([sha256], session_row)
    .optional()
    .map_err(unwrap_err)
}

/// One session by id.
pub(super) fn session(conn: &Connection, id: &str) -> StoreResult<Option<AuthSession>> {
    conn.prepare_cached(&format!(
        "SELECT {SESSION_COLS} FROM auth_sessions WHERE id = ?1"
    ))?
    .query_row([id], session_row)
    .optional()
    .map_err(unwrap_err)
}

/// The unknown tool effects of one turn, or of every turn (`None`, for
/// `status`), in journal order: mutating calls requested without a finish,
/// or finished `effect_unknown`.
pub(super) fn unknown_tool_effects(
    conn: &Connection,
    memory: &MemoryPayloads,
    turn: Option<&str>,
) -> StoreResult<Vec<lapis_protocol::UnknownToolEffect>> {
    // The kinds are literals so that the partial index `events_tool_calls`
    // (schema version 10) serves the query instead of a scan.
    debug_assert_eq!(EventKind::ToolCallRequested.as_str(), "tool_call_requested");
    debug_assert_eq!(EventKind::ToolCallFinished.as_str(), "tool_call_finished");
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {EVENT_COLS} FROM events INDEXED BY events_tool_calls \
         WHERE kind IN ('tool_call_requested', 'tool_call_finished') \
         AND (?1 IS NULL OR turn_id = ?1) ORDER BY seq"
    ))?;
    let events = stmt
        .query_map(params![turn], |r| event_row(r, memory))?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(unwrap_err)?;
    let mut by_turn: Vec<(String, Vec<lapis_protocol::Payload>)> = Vec::new();
    for e in events {
        let (Some(turn), Some(body)) = (e.turn_id.clone(), e.body()) else {
            continue;
        };
        match by_turn.iter_mut().find(|(t, _)| *t == turn) {
            Some((_, list)) => list.push(body),
            None => by_turn.push((turn, vec![body])),
        }
    }
    Ok(by_turn
        .iter()
        .flat_map(|(turn, list)| lapis_protocol::unknown_effects(turn, list))
        .collect())
}
