//! A writer batch: requests taken in order into one outer transaction, each
//! operation in a savepoint as it arrives, consecutive appends together
//! (see the parent module's docs for what must stay true).

use std::time::Duration;

use crate::domain::StoreError;

use super::{AppendReq, Cmd, OpMode, Reply, Writer, WriterLimits};

/// One batch of requests run in one outer transaction (see the module docs):
/// operations each in a savepoint as they arrive, consecutive appends
/// together.
pub(super) struct Batch {
    /// The outer transaction is open (without it each write commits alone).
    batched: bool,
    /// `total_changes` when the batch began.
    changes_before: u64,
    /// Answers due after the commit.
    replies: Vec<Reply>,
    /// Appends not yet written (written before the next operation runs).
    appends: Vec<AppendReq>,
    /// Requests taken.
    pub(super) len: usize,
    /// It holds an operation someone waits for: take only what is queued.
    durable: bool,
    /// It holds an early or detached operation that wrote something.
    deferred: bool,
    /// Parked claims answered in it whose dispatch boundary (or word that
    /// it comes later) has not arrived: it waits for them (up to the
    /// deferred linger) even if it holds a durable operation (see
    /// [`super::ParkedClaim`]).
    boundaries: usize,
}

impl Batch {
    pub(super) fn begin(w: &mut Writer) -> Batch {
        let batched = w
            .conn
            .prepare_cached("BEGIN IMMEDIATE")
            .and_then(|mut s| s.execute([]))
            .is_ok();
        w.batch_clean = batched.then(|| w.conn.total_changes());
        Batch {
            batched,
            changes_before: w.conn.total_changes(),
            replies: Vec::new(),
            appends: Vec::new(),
            len: 0,
            durable: false,
            deferred: false,
            boundaries: 0,
        }
    }

    /// Runs `cmd` now (appends: with the next operation or at the end).
    pub(super) fn take(&mut self, w: &mut Writer, cmd: Cmd) {
        self.len += 1;
        match cmd {
            Cmd::Append(a) => self.appends.push(a),
            Cmd::Op(op, mode) => {
                self.write_appends(w);
                if mode == OpMode::Boundary {
                    self.boundaries = self.boundaries.saturating_sub(1);
                }
                let before = w.conn.total_changes();
                let reply = op(w);
                match mode {
                    OpMode::Durable | OpMode::Boundary => {
                        self.durable = true;
                        self.replies.push(reply);
                    }
                    OpMode::Detached => self.replies.push(reply),
                }
                let durable = matches!(mode, OpMode::Durable | OpMode::Boundary);
                if !durable && w.conn.total_changes() != before {
                    self.deferred = true;
                }
                self.serve_parked(w);
            }
            Cmd::Park(claim) => {
                w.parked.push_back(claim);
                self.serve_parked(w);
            }
            Cmd::BoundaryLater => self.boundaries = self.boundaries.saturating_sub(1),
            Cmd::Shutdown => {}
        }
    }

    /// Answers parked claims while turns are runnable, in this batch.
    fn serve_parked(&mut self, w: &mut Writer) {
        while let Some(parked) = w.parked.pop_front() {
            if parked.reply.is_closed() {
                // The engine stopped waiting; claiming now would strand
                // the turn in `preparing`.
                continue;
            }
            let before = w.conn.total_changes();
            match w.claim(&parked.prepare) {
                Ok(Some(claim)) => {
                    self.deferred = true;
                    self.boundaries += 1;
                    let _ = parked.reply.send(Ok(claim));
                }
                Ok(None) => {
                    let wrote = w.conn.total_changes() != before;
                    w.parked.push_front(parked);
                    if !wrote {
                        return;
                    }
                    // A turn refused at claim (a continuation that no longer
                    // qualifies, an input edited at rest) settled:
                    // another may be runnable.
                    self.deferred = true;
                }
                Err(e) => {
                    let _ = parked.reply.send(Err(e));
                }
            }
        }
    }

    fn write_appends(&mut self, w: &mut Writer) {
        if !self.appends.is_empty() {
            let appends = std::mem::take(&mut self.appends);
            self.replies.push(w.append_batch(appends));
        }
    }

    /// How long the batch may wait for more requests, from what it holds.
    pub(super) fn linger(&self, limits: &WriterLimits) -> Duration {
        if self.boundaries > 0 {
            limits.deferred_linger.max(limits.group_commit_linger)
        } else if self.durable {
            Duration::ZERO
        } else if self.deferred {
            limits.deferred_linger.max(limits.group_commit_linger)
        } else {
            limits.group_commit_linger
        }
    }

    /// Commits, publishes the events and answers.
    pub(super) fn finish(mut self, w: &mut Writer) {
        self.write_appends(w);
        // Still open: a failed first write reopens it (see `Writer::write`),
        // and if that failed the later writes committed alone.
        let open = self.batched && !w.conn.is_autocommit();
        // Nothing written since it was (re)opened.
        let clean = w.batch_clean == Some(w.conn.total_changes());
        w.batch_clean = None;
        let failed = if open {
            let wrote = w.conn.total_changes() != self.changes_before && !clean;
            let commit = match injected_commit_fault() {
                Some(e) => Err(e),
                None => w
                    .conn
                    .prepare_cached("COMMIT")
                    .and_then(|mut s| s.execute([]).map(|_| ())),
            };
            match commit {
                Ok(()) => {
                    // A batch that changed nothing writes no WAL frame and
                    // costs no fsync; it is not counted as a commit.
                    if wrote {
                        w.shared.committed();
                        w.storage_recovered();
                    }
                    None
                }
                Err(e) => {
                    let e = StoreError::from_sqlite(e);
                    w.note_storage(&e);
                    let code = e.batch_cause();
                    let _ = w.conn.execute_batch("ROLLBACK");
                    // Nothing of the batch happened: drop its events and
                    // rebuild memory from what is committed.
                    w.outbox.clear();
                    let _ = w.reload();
                    Some(code)
                }
            }
        } else {
            None
        };
        // Counted before anyone is answered, so a caller reading the
        // counters after its reply sees this batch's statements and pages.
        let counters = &w.shared.counters;
        counters.set_writer(super::super::counters::on_this_thread());
        counters.add_pages(super::super::counters::drain_pages(&w.conn));
        w.publish(failed, self.replies);
    }
}

#[cfg(test)]
thread_local! {
    /// Tests: how many of the next batch commits on this thread (the
    /// writer's: set it from inside an operation) fail as a full disk does
    /// (`SQLITE_FULL` at `COMMIT`, the whole batch rolled back).
    pub(crate) static FAIL_COMMITS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// The commit error a test asked for, if any.
#[cfg(test)]
fn injected_commit_fault() -> Option<rusqlite::Error> {
    FAIL_COMMITS.with(|n| {
        let left = n.get();
        (left > 0).then(|| {
            n.set(left - 1);
            rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL),
                Some("database or disk is full".into()),
            )
        })
    })
}

#[cfg(not(test))]
fn injected_commit_fault() -> Option<rusqlite::Error> {
    None
}
