//! Journal replay pages and thread snapshots (read side).

use std::collections::HashMap;
use std::sync::LazyLock;

use rusqlite::{Connection, params};

use crate::domain::{
    JournalEvent, ReplayPage, ReplayScope, StoreError, StoreResult, ThreadSnapshot,
};

use super::journal::MemoryPayloads;
use super::read::{self, EVENT_COLS, TurnFilter};

/// The owner scope's page: the events walked in `seq` order from the
/// cursor, each joined to its thread (`CROSS JOIN` fixes that order: with
/// `threads_listed` on `(principal, …)`, schema 22, SQLite chose to walk
/// the owner's threads and sort every event they hold, so a page cost
/// grew with the owner's history — 17.5 ms at 10k events, 159 ms at 1M).
/// What must stay true: no sort, the page reads about `limit` rows at any
/// history size (`store::tests::owner_page`).
pub(super) static OWNER_PAGE: LazyLock<String> = LazyLock::new(|| {
    let cols: Vec<String> = EVENT_COLS.split(", ").map(|c| format!("e.{c}")).collect();
    format!(
        "SELECT {} FROM events e CROSS JOIN threads t ON t.id = e.thread_id \
         WHERE e.seq > ?1 AND e.kind != 'tombstone' AND t.principal = ?2 \
         AND (?3 IS NULL OR t.application = ?3) ORDER BY e.seq LIMIT ?4",
        cols.join(", ")
    )
});

/// One page of events after `after` (exclusive), at most `limit`.
///
/// Thread scope pages by `thread_seq` and fails `transcript_unavailable` at
/// the first event whose payload is gone, rather than return a partial
/// history; owner scope pages by `seq` and flags such events instead (one
/// metadata-only thread must not hide every other thread's history).
pub(super) fn replay(
    conn: &Connection,
    memory: &MemoryPayloads,
    scope: &ReplayScope,
    after: u64,
    limit: usize,
) -> StoreResult<ReplayPage> {
    page(conn, memory, scope, after, limit, true)
}

/// A thread-scope page whose events with content gone are flagged rather
/// than failing the page, with the canonical hash recorded for each of
/// them (where one was and its row's chain link covers it:
/// `super::restore::chained_hashes`, so a row journaled before chain
/// version 2 offers none and its content is never shown): for a thread
/// whose transcript store can complete them
/// ([`crate::tools::transcript::fetch`]).
pub(super) fn replay_flagged(
    conn: &Connection,
    memory: &MemoryPayloads,
    thread: &str,
    after: u64,
    limit: usize,
) -> StoreResult<(ReplayPage, HashMap<u64, String>)> {
    let scope = ReplayScope::Thread(thread.to_owned());
    let page = page(conn, memory, &scope, after, limit, false)?;
    let gone: Vec<JournalEvent> = page
        .events
        .iter()
        .filter(|e| e.payload_unavailable)
        .cloned()
        .collect();
    let hashes = if gone.is_empty() {
        HashMap::new()
    } else {
        super::restore::chained_hashes(conn, thread, &gone)?
    };
    Ok((page, hashes))
}

fn page(
    conn: &Connection,
    memory: &MemoryPayloads,
    scope: &ReplayScope,
    after: u64,
    limit: usize,
    strict: bool,
) -> StoreResult<ReplayPage> {
    let fetch = limit as i64 + 1;
    let mut events: Vec<JournalEvent> = match scope {
        ReplayScope::Thread(thread) => {
            if read::thread(conn, thread)?.is_none() {
                return Err(StoreError::not_found("thread", thread));
            }
            // Before where the thread's live events begin (retention's
            // summary) only tombstones and receipts lie: the receipts come
            // from their own index, so a page never reads the tombstones
            // of pruned history.
            let mut stmt = conn.prepare_cached(&format!(
                "WITH cut(at) AS (SELECT coalesce((SELECT live_from FROM history_summary \
                 WHERE thread_id = ?1), 0)) \
                 SELECT {EVENT_COLS} FROM events WHERE thread_id = ?1 AND thread_seq > ?2 \
                 AND thread_seq < (SELECT at FROM cut) \
                 AND kind IN ('history_pruned', 'thread_deleted') \
                 UNION ALL \
                 SELECT {EVENT_COLS} FROM events WHERE thread_id = ?1 \
                 AND thread_seq > max(?2, (SELECT at FROM cut) - 1) \
                 AND kind != 'tombstone' ORDER BY thread_seq LIMIT ?3"
            ))?;
            let rows = stmt.query_map(params![thread, after as i64, fetch], |r| {
                read::event_row(r, memory)
            })?;
            rows.collect::<Result<_, _>>().map_err(read::unwrap_err)?
        }
        ReplayScope::Owner {
            principal,
            application,
        } => {
            let mut stmt = conn.prepare_cached(&OWNER_PAGE)?;
            let rows = stmt
                .query_map(params![after as i64, principal, application, fetch], |r| {
                    read::event_row(r, memory)
                })?;
            rows.collect::<Result<_, _>>().map_err(read::unwrap_err)?
        }
    };
    let more = events.len() > limit;
    events.truncate(limit);
    if let (true, ReplayScope::Thread(thread), Some(e)) =
        (strict, scope, events.iter().find(|e| e.payload_unavailable))
    {
        return Err(StoreError::TranscriptUnavailable {
            thread: thread.clone(),
            seq: e.thread_seq,
        });
    }
    let next_after = match (scope, events.last()) {
        (ReplayScope::Thread(_), Some(e)) => e.thread_seq,
        (ReplayScope::Owner { .. }, Some(e)) => e.seq,
        (_, None) => after,
    };
    Ok(ReplayPage {
        events,
        next_after,
        more,
    })
}

/// A thread with its last `tail` events and its `turns` most recent turns.
pub(super) fn snapshot(
    conn: &Connection,
    memory: &MemoryPayloads,
    thread_id: &str,
    tail: usize,
    turns: usize,
) -> StoreResult<ThreadSnapshot> {
    let thread =
        read::thread(conn, thread_id)?.ok_or_else(|| StoreError::not_found("thread", thread_id))?;
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {EVENT_COLS} FROM events WHERE thread_id = ?1 AND kind != 'tombstone' \
         ORDER BY thread_seq DESC LIMIT ?2"
    ))?;
    let rows = stmt.query_map(params![thread_id, tail as i64], |r| {
        read::event_row(r, memory)
    })?;
    let mut events: Vec<JournalEvent> = rows.collect::<Result<_, _>>().map_err(read::unwrap_err)?;
    events.reverse();
    let last_thread_seq = events.last().map_or(0, |e| e.thread_seq);
    let truncated = events.first().is_some_and(|e| e.thread_seq > 1);
    let filter = TurnFilter {
        thread_id: Some(thread_id.to_owned()),
        ..Default::default()
    };
    let recent_turns = read::turns(conn, &filter, turns)?;
    let usage = super::usage::totals(
        conn,
        &super::usage::UsageScope {
            thread_id: Some(thread_id.to_owned()),
            ..Default::default()
        },
    )?;
    Ok(ThreadSnapshot {
        usage,
        thread,
        recent_turns,
        tail: events,
        truncated,
        last_thread_seq,
        awaiting_input: false,
    })
}
