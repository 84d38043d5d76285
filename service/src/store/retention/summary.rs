//! Retention's per-thread summary (schema 21): what a pass needs of each
//! thread (live events, their bytes, the oldest's time, where they begin)
//! without reading the journal each pass.
//!
//! What must stay true:
//! - `history_summary` sums the live (not [`KEPT`]) events of each thread
//!   with `seq <= history_state.through_seq`, exactly; [`Writer::refresh_step`]
//!   adds the events after it in bounded `seq` ranges (a range of the
//!   primary key: no scan of older rows), on the writer, so nothing
//!   commits between the read and the sum;
//! - a batch (`super::Writer::prune_batch`) prunes only rows the summary
//!   counted (`seq <= through`) and takes them off it in its transaction,
//!   so a crash leaves the summary and the journal agreeing;
//! - a pass reads candidates a page of threads at a time (keyset on the
//!   thread id), so its reads are bounded by the threads, not the history;
//! - before a thread's `live_from` lie only tombstones and receipts
//!   (`history_pruned`, `thread_deleted`; partial index `events_receipts`),
//!   so a thread's replay page starts there and reads the receipts from
//!   the index, never the tombstones of pruned history;
//! - the last pass is kept in `history_state.last_pass` (JSON of
//!   [`HistoryPass`]), so `status` shows it after a restart.

use lapis_protocol::HistoryPass;
use rusqlite::{OptionalExtension, params};

use crate::domain::{StoreError, StoreResult};

use super::super::handle::Store;
use super::super::writer::Writer;
use super::{Candidate, KEPT};

/// Events one refresh step reads at most (one short writer step).
pub(crate) const REFRESH_EVENTS: i64 = 16_384;

/// Threads one candidate page holds at most.
pub(crate) const PAGE_THREADS: usize = 512;

impl Store {
    /// Brings the summary up to the journal's end, one bounded writer step
    /// at a time; returns the events it read.
    pub(crate) async fn history_refresh(&self) -> StoreResult<u64> {
        let mut read = 0;
        loop {
            let (n, done) = self.op(|w| w.refresh_step(REFRESH_EVENTS)).await?;
            read += n;
            if done {
                return Ok(read);
            }
            tokio::task::yield_now().await;
        }
    }

    /// The live `full` threads after `after` (by id), at most `limit`,
    /// with their summaries (a read: never on the writer).
    pub(crate) async fn history_candidates_page(
        &self,
        after: Option<String>,
        limit: usize,
    ) -> StoreResult<Vec<Candidate>> {
        self.read(move |c, _| {
            let mut stmt = c.prepare_cached(
                "SELECT t.id, t.workspace_id, t.updated_at, coalesce(s.events, 0), \
                 coalesce(s.bytes, 0), coalesce(s.oldest_at, 0), coalesce(s.live_from, 0), \
                 (SELECT through_seq FROM history_state WHERE id = 1) \
                 FROM threads t LEFT JOIN history_summary s ON s.thread_id = t.id \
                 WHERE t.deleted_at IS NULL AND t.retention = 'full' AND t.id > ?1 \
                 ORDER BY t.id LIMIT ?2",
            )?;
            let rows = stmt.query_map(params![after.unwrap_or_default(), limit as i64], |r| {
                Ok(Candidate {
                    thread: r.get(0)?,
                    workspace: r.get(1)?,
                    updated_at: r.get(2)?,
                    events: r.get::<_, i64>(3)?.max(0) as u64,
                    bytes: r.get::<_, i64>(4)?.max(0) as u64,
                    oldest_at: r.get(5)?,
                    live_from: r.get(6)?,
                    through: r.get::<_, Option<i64>>(7)?.unwrap_or(0),
                })
            })?;
            rows.collect::<Result<_, _>>()
                .map_err(StoreError::from_sqlite)
        })
        .await
    }

    /// Every candidate, the summary brought up to date first (tests; a
    /// pass pages through [`Store::history_candidates_page`]).
    #[cfg(test)]
    pub(crate) async fn history_candidates(&self) -> StoreResult<Vec<Candidate>> {
        self.history_refresh().await?;
        let mut out: Vec<Candidate> = Vec::new();
        loop {
            let after = out.last().map(|c| c.thread.clone());
            let page = self.history_candidates_page(after, PAGE_THREADS).await?;
            let last = page.len() < PAGE_THREADS;
            out.extend(page);
            if last {
                return Ok(out);
            }
        }
    }

    /// Keeps `pass` as the last one (`status` after a restart).
    pub(crate) async fn history_save_pass(&self, pass: &HistoryPass) -> StoreResult<()> {
        let json = serde_json::to_string(pass).map_err(|e| StoreError::invalid(e.to_string()))?;
        self.op(move |w| {
            w.write(|tx, _, _, _| {
                tx.prepare_cached("UPDATE history_state SET last_pass = ?1 WHERE id = 1")?
                    .execute([&json])?;
                Ok(())
            })
        })
        .await
    }

    /// The last pass kept, if any (one that does not read back is none:
    /// it is a figure for `status`, nothing depends on it).
    pub(crate) async fn history_last_pass(&self) -> StoreResult<Option<HistoryPass>> {
        self.read(|c, _| {
            let json: Option<String> = c
                .query_row(
                    "SELECT last_pass FROM history_state WHERE id = 1",
                    [],
                    |r| r.get(0),
                )
                .optional()?
                .flatten();
            Ok(json.and_then(|j| serde_json::from_str(&j).ok()))
        })
        .await
    }
}

impl Writer {
    /// Adds the live events of the next `seq` range (at most `step` rows)
    /// to the summary: `(events read, caught up)`.
    fn refresh_step(&mut self, step: i64) -> StoreResult<(u64, bool)> {
        self.write(|tx, _, _, _| {
            let (through, end): (i64, i64) = tx
                .prepare_cached(
                    "SELECT through_seq, (SELECT coalesce(max(seq), 0) FROM events) \
                     FROM history_state WHERE id = 1",
                )?
                .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            let hi = end.min(through.saturating_add(step));
            if hi <= through {
                return Ok((0, true));
            }
            tx.prepare_cached(&format!(
                "INSERT INTO history_summary (thread_id, events, bytes, oldest_at, live_from) \
                 SELECT thread_id, count(*), coalesce(sum(length(payload)), 0), min(at), \
                 min(thread_seq) FROM events WHERE seq > ?1 AND seq <= ?2 AND kind NOT IN {KEPT} \
                 GROUP BY thread_id \
                 ON CONFLICT (thread_id) DO UPDATE SET \
                 oldest_at = CASE WHEN events = 0 THEN excluded.oldest_at ELSE oldest_at END, \
                 live_from = CASE WHEN events = 0 THEN excluded.live_from ELSE live_from END, \
                 events = events + excluded.events, bytes = bytes + excluded.bytes"
            ))?
            .execute(params![through, hi])?;
            tx.prepare_cached("UPDATE history_state SET through_seq = ?1 WHERE id = 1")?
                .execute([hi])?;
            Ok(((hi - through) as u64, hi == end))
        })
    }
}

/// After a batch pruned `events` (`bytes`) of `thread` up to `last_thread_seq`:
/// takes them off its summary, and moves its oldest live event to the next
/// one the summary counts (within `through`); returns where live events
/// begin now.
pub(super) fn after_prune(
    tx: &rusqlite::Connection,
    thread: &str,
    through: i64,
    last_thread_seq: i64,
    events: u64,
    bytes: u64,
) -> StoreResult<i64> {
    let next: Option<(i64, i64)> = tx
        .prepare_cached(&format!(
            "SELECT thread_seq, at FROM events WHERE thread_id = ?1 AND thread_seq > ?2 \
             AND seq <= ?3 AND kind NOT IN {KEPT} ORDER BY thread_seq LIMIT 1"
        ))?
        .query_row(params![thread, last_thread_seq, through], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()?;
    let (live_from, oldest_at) = next.unwrap_or((last_thread_seq + 1, 0));
    tx.prepare_cached(
        "UPDATE history_summary SET events = max(events - ?2, 0), bytes = max(bytes - ?3, 0), \
         live_from = ?4, oldest_at = ?5 WHERE thread_id = ?1",
    )?
    .execute(params![
        thread,
        events as i64,
        bytes as i64,
        live_from,
        oldest_at
    ])?;
    Ok(live_from)
}
