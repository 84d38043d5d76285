//! History retention on the store (`history` in the config, issue 44
//! item 2): which of a thread's events a pass prunes ([`select`]), and one
//! bounded batch of it on the writer ([`Writer::prune_batch`]).
//!
//! What must stay true:
//! - a batch is one short writer step (at most [`BATCH_EVENTS`] rows of
//!   one thread), so the writer serves turns between batches; the driver
//!   (`crate::retention`) yields between them;
//! - a thread with a queued, claimed or fenced turn is never touched (the
//!   check runs inside the batch, on the writer);
//! - a pruned event becomes a tombstone (`super::tombstone`) whose `at` is
//!   the `seq` of the `history_pruned` receipt journaled in the same
//!   transaction, so `journal verify` checks the chain across the cut and
//!   a crash leaves the old state or the new;
//! - receipts (`thread_deleted`, `history_pruned`) are never pruned, and
//!   `metadata-only` threads are never candidates (their rows hold no
//!   content, only the ordering the spec requires).

use lapis_protocol::{HistoryPruned, Payload};
use rusqlite::{OptionalExtension, params};

use crate::domain::{Actor, StoreError, StoreResult};

use self::steps::Steps;
use super::handle::Store;
use super::tombstone::{Digest256, KIND};
use super::writer::Writer;

pub(crate) mod steps;
pub(crate) mod summary;
#[cfg(test)]
mod tests;

/// Rows one batch tombstones at most.
pub(crate) const BATCH_EVENTS: usize = 256;

/// Kinds a pass never prunes (receipts), and tombstones.
const KEPT: &str = "('tombstone', 'history_pruned', 'thread_deleted')";

/// The limits a pass applies to one thread.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Events with `at` before this (ms since the epoch) are pruned.
    pub(crate) cutoff: Option<i64>,
    /// Live events a thread keeps at most.
    pub(crate) max_events: Option<u64>,
    /// Live payload bytes a thread keeps at most.
    pub(crate) max_bytes: Option<u64>,
}

/// A thread a pass looks at: its live (prunable) events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Candidate {
    /// The thread.
    pub(crate) thread: String,
    /// Its workspace (whose policy applies).
    pub(crate) workspace: String,
    /// Its last change (ms).
    pub(crate) updated_at: i64,
    /// Live events.
    pub(crate) events: u64,
    /// Their payload bytes.
    pub(crate) bytes: u64,
    /// The oldest live event's `at` (0 when none).
    pub(crate) oldest_at: i64,
    /// Its `thread_seq`: live events begin here ([`summary`]).
    pub(crate) live_from: i64,
    /// The summary's `through_seq`: a batch prunes only rows it counted.
    pub(crate) through: i64,
}

/// One oldest live event, as [`select`] sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Oldest {
    /// Its `seq`.
    pub(crate) seq: i64,
    /// When.
    pub(crate) at: i64,
    /// Payload bytes.
    pub(crate) bytes: u64,
}

impl Limits {
    /// Whether `c` breaks any limit now (so a pass visits it), or is an
    /// empty thread idle past the age limit (so the pass deletes it).
    pub(crate) fn visits(&self, c: &Candidate) -> bool {
        self.max_events.is_some_and(|m| c.events > m)
            || self.max_bytes.is_some_and(|m| c.bytes > m)
            || self
                .cutoff
                .is_some_and(|cut| (c.events > 0 && c.oldest_at < cut) || c.updated_at < cut)
    }
}

/// How many of `oldest` (a thread's oldest live events, in order) to prune,
/// with the limits that asked for it (config names): the longest prefix in
/// which each event is past the age cutoff, or is one the thread has too
/// many of (`events` live now) or too many bytes of (`bytes` now).
pub(crate) fn select(
    limits: &Limits,
    events: u64,
    bytes: u64,
    oldest: &[Oldest],
) -> (usize, Vec<&'static str>) {
    let (mut n, mut b) = (events, bytes);
    let mut why = Vec::new();
    let mut take = 0;
    for row in oldest {
        let aged = limits.cutoff.is_some_and(|c| row.at < c);
        let many = limits.max_events.is_some_and(|m| n > m);
        let big = limits.max_bytes.is_some_and(|m| b > m);
        if !(aged || many || big) {
            break;
        }
        for (hit, name) in [
            (aged, "maxAgeDays"),
            (many, "maxEventsPerThread"),
            (big, "maxBytesPerThread"),
        ] {
            if hit && !why.contains(&name) {
                why.push(name);
            }
        }
        take += 1;
        n = n.saturating_sub(1);
        b = b.saturating_sub(row.bytes);
    }
    (take, why)
}

/// What one batch did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Batch {
    /// Tombstoned `events` (`bytes` of payload) under the receipt at `seq`.
    Pruned {
        /// Events.
        events: u64,
        /// Bytes.
        bytes: u64,
        /// The receipt's `seq`.
        seq: u64,
        /// Where the thread's live events begin now (`thread_seq`).
        live_from: i64,
    },
    /// Deleted the (empty, idle) thread whole.
    Deleted,
    /// A turn is queued, running or fenced: left alone.
    Busy,
    /// Nothing to do (any more).
    Nothing,
}

impl Store {
    /// One batch of a pass over `c` (see the module docs); `c`'s counts
    /// are the summary's through `c.through`, and the batch prunes only
    /// rows at or before it.
    #[cfg(test)]
    pub(crate) async fn prune_batch(
        &self,
        c: &Candidate,
        limits: Limits,
        pass_started: i64,
    ) -> StoreResult<Batch> {
        Ok(self.prune_batch_counted(c, limits, pass_started).await?.0)
    }

    /// [`Store::prune_batch`], with what its statements cost SQLite
    /// ([`steps`]: the same however long the thread).
    pub(crate) async fn prune_batch_counted(
        &self,
        c: &Candidate,
        limits: Limits,
        pass_started: i64,
    ) -> StoreResult<(Batch, Steps)> {
        let c = c.clone();
        self.op(move |w| {
            steps::sweep(&w.conn);
            let batch = w.prune_batch(&c, &limits, pass_started)?;
            Ok((batch, steps::sweep(&w.conn)))
        })
        .await
    }

    /// After a pass: give freed pages back (`super::compact`), between
    /// writer batches.
    pub(crate) async fn history_compact(&self) -> StoreResult<()> {
        self.op(|w| {
            w.compact = true;
            Ok(())
        })
        .await
    }
}

impl Writer {
    fn prune_batch(
        &mut self,
        c: &Candidate,
        limits: &Limits,
        pass_started: i64,
    ) -> StoreResult<Batch> {
        let live: Option<Option<i64>> = self
            .conn
            .prepare_cached("SELECT deleted_at FROM threads WHERE id = ?1 AND retention = 'full'")?
            .query_row([&c.thread], |r| r.get(0))
            .optional()?;
        if !matches!(live, Some(None)) {
            return Ok(Batch::Nothing);
        }
        match self.refuse_busy(&c.thread) {
            Err(StoreError::ThreadBusy { .. } | StoreError::ThreadFenced { .. }) => {
                return Ok(Batch::Busy);
            }
            other => other?,
        }
        let mut oldest = Vec::new();
        let mut hashes = Vec::new();
        let mut thread_seqs = Vec::new();
        {
            // From where the live events begin: the tombstones of earlier
            // passes before it are not read again.
            let mut stmt = self.conn.prepare_cached(&format!(
                "SELECT seq, at, coalesce(length(payload), 0), hash, thread_seq FROM events \
                 WHERE thread_id = ?1 AND thread_seq >= ?2 AND seq <= ?3 AND kind NOT IN {KEPT} \
                 ORDER BY thread_seq LIMIT ?4"
            ))?;
            let mut rows = stmt.query(params![
                c.thread,
                c.live_from,
                c.through,
                BATCH_EVENTS as i64
            ])?;
            while let Some(r) = rows.next()? {
                oldest.push(Oldest {
                    seq: r.get(0)?,
                    at: r.get(1)?,
                    bytes: r.get::<_, i64>(2)? as u64,
                });
                hashes.push(r.get_ref(3)?.as_blob().unwrap_or_default().to_vec());
                thread_seqs.push(r.get::<_, i64>(4)?);
            }
        }
        let (take, why) = select(limits, c.events, c.bytes, &oldest);
        if take == 0 {
            let idle = limits.cutoff.is_some_and(|cut| c.updated_at < cut);
            if oldest.is_empty() && idle && !self.live_after(c)? {
                let actor = Actor::new(RETENTION_PRINCIPAL, RETENTION_APPLICATION);
                self.delete_thread(&actor, None, &c.thread)?;
                return Ok(Batch::Deleted);
            }
            return Ok(Batch::Nothing);
        }
        let rows = &oldest[..take];
        let (first, last) = (rows[0].seq, rows[take - 1].seq);
        let bytes: u64 = rows.iter().map(|r| r.bytes).sum();
        let mut digest = Digest256::new();
        for (row, hash) in rows.iter().zip(&hashes) {
            digest.add(row.seq, hash);
        }
        let limits: Vec<String> = why.into_iter().map(str::to_owned).collect();
        let thread = c.thread.clone();
        let (through, first_thread_seq, last_thread_seq) =
            (c.through, thread_seqs[0], thread_seqs[take - 1]);
        let seq: (u64, i64) = self.write(|tx, journal, stage, now| {
            let receipt = stage.next_seq();
            // Cached, as every statement of a batch is ([`steps`]).
            let changed = tx
                .prepare_cached(&format!(
                    "UPDATE events SET kind = '{KIND}', turn_id = NULL, at = ?4, payload = NULL, \
                 has_payload = 0, event_hash = NULL WHERE thread_id = ?1 \
                 AND thread_seq BETWEEN ?5 AND ?6 \
                 AND seq BETWEEN ?2 AND ?3 AND kind NOT IN {KEPT}"
                ))?
                .execute(
                    // The thread_seq range is the same rows (a thread's seq
                    // and thread_seq grow together) and lets the (thread_id,
                    // thread_seq) index bound the search: without it SQLite
                    // walks every event of the thread on that index to test
                    // `seq`, once per batch — quadratic over a long thread
                    // (a 10M-event thread's prune did not finish in 30 min).
                    params![
                        thread,
                        first,
                        last,
                        receipt as i64,
                        first_thread_seq,
                        last_thread_seq
                    ],
                )?;
            if changed != take {
                return Err(StoreError::invalid("retention batch changed under it"));
            }
            let live_from =
                summary::after_prune(tx, &thread, through, last_thread_seq, take as u64, bytes)?;
            pause("before-commit");
            journal.append(
                tx,
                stage,
                &thread,
                None,
                now,
                Payload::HistoryPruned(HistoryPruned {
                    thread_id: thread.clone(),
                    events: take as u64,
                    bytes,
                    first_seq: first as u64,
                    last_seq: last as u64,
                    digest: digest.hex(),
                    limits,
                    pass_started_at: pass_started,
                    pruned_at: now,
                }),
            )?;
            Ok((receipt, live_from))
        })?;
        Ok(Batch::Pruned {
            events: take as u64,
            bytes,
            seq: seq.0,
            live_from: seq.1,
        })
    }
}

impl Writer {
    /// Whether `c`'s thread has live events the summary has not counted
    /// yet (appended since the pass read it): then it is not empty.
    fn live_after(&self, c: &Candidate) -> StoreResult<bool> {
        Ok(self
            .conn
            .prepare_cached(&format!(
                "SELECT 1 FROM events WHERE thread_id = ?1 AND thread_seq >= ?2 \
                 AND kind NOT IN {KEPT} LIMIT 1"
            ))?
            .query_row(params![c.thread, c.live_from], |_| Ok(()))
            .optional()?
            .is_some())
    }
}

/// The receipt's `by` when a pass deletes a thread whole.
pub(crate) const RETENTION_PRINCIPAL: &str = "controller";
/// See [`RETENTION_PRINCIPAL`].
pub(crate) const RETENTION_APPLICATION: &str = "history-retention";

/// Test hook (`test-support` builds only):
/// `LAPIS_RETENTION_FAULT_PAUSE=<step>` stops a batch at `<step>`
/// (`before-commit`: its tombstones written, not its receipt, inside the
/// transaction) after saying `lapis-fault-pause: retention <step>` on
/// stderr, so a test can kill -9 the controller exactly there.
fn pause(step: &str) {
    #[cfg(feature = "test-support")]
    if std::env::var("LAPIS_RETENTION_FAULT_PAUSE").is_ok_and(|w| w == step) {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "lapis-fault-pause: retention {step}");
        loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
    }
    #[cfg(not(feature = "test-support"))]
    let _ = step;
}
