//! The single writer: one thread owning the write connection.
//!
//! Requests arrive on a channel: [`Cmd::Op`] runs one operation,
//! [`Cmd::Append`] is a streamed journal append. Consecutive appends waiting
//! in the channel are committed together — one transaction, one fsync — up to
//! `group_commit_max` events, after waiting at most `group_commit_linger` for
//! more (the bounded delay; 0 = take only what is already queued, so the batch
//! naturally grows while a commit is in flight).
//!
//! Operations are group-committed too, with the appends around them: the
//! requests already queued when the writer picks one up run in order in one
//! outer transaction, each operation inside its own savepoint, so a refused
//! operation rolls back alone while the others commit with one fsync. Every
//! reply of a durable operation waits for that commit — a caller is never
//! told of a write that is not durable (the dispatch boundary in particular)
//! — and if the commit fails, every request of the batch is answered with an
//! error and memory is rebuilt from the database.
//!
//! Some requests let a batch wait (up to `deferred_linger`) for the requests
//! that follow them, so a lone workspace's turn costs two commits (submit +
//! claim + dispatch boundary; running mark + output + outcome) instead of
//! one per step, and a queued turn's claim and boundary share the commit of
//! the outcome before it. The engine's claim is *parked* on the writer
//! ([`ParkedClaim`]) and served inside the batch that made a turn runnable,
//! answered before the commit (losing it in a crash leaves the turn queued,
//! and nothing is written to an agent before the durable boundary); that
//! batch then waits for each claim's boundary (or word that it comes
//! later) even if it holds durable operations. The `running` mark is
//! *detached* (nobody waits for it): a batch holding it waits too, and a
//! durable operation ends that wait at once. Events of an
//! uncommitted batch are never published. Events are published to
//! subscribers only after their commit, then replies are sent: by a
//! publisher thread for a large batch, so the writer starts the next one
//! meanwhile, in commit order either way (see [`publish`]). In-memory
//! state (journal counters, scheduler, live turns) changes only after the
//! matching commit; if a transaction fails it is rebuilt from the database.

use std::collections::HashMap;
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rusqlite::Connection;

use tokio::sync::{broadcast, oneshot, watch};

use crate::domain::{
    Clock, EventKind, JournalEvent, StoreError, StoreResult, StoreStatus, TurnState,
};

use super::journal::{Journal, JournalTx, ReadyPayload};
use super::lock::InstanceLock;
use super::read;
use super::scheduler::Scheduler;

mod append;
mod batch;
mod checkpoint;
mod fault;
#[cfg(test)]
pub(crate) use batch::FAIL_COMMITS;
pub(crate) use checkpoint::AnchorState;
#[cfg(test)]
pub(crate) use fault::{FREE_BYTES, RESUME_FREE_BYTES};
mod publish;
use batch::Batch;
use publish::Published;
pub(super) use publish::Publisher;

/// Sends an operation's answer once its batch's fate is known: `None` when
/// the batch committed, `Some(cause)` when its commit failed (see
/// [`StoreError::batch_cause`]); with the
/// batch's published events.
pub(crate) type Reply = Box<dyn FnOnce(Option<&'static str>, &[Arc<JournalEvent>]) + Send>;

/// An operation: runs on the writer, returns how to answer its caller.
pub(crate) type Op = Box<dyn FnOnce(&mut Writer) -> Reply + Send>;

/// When an operation is answered, and whether its batch may wait for more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpMode {
    /// Answered after its batch's commit; the batch commits as soon as what
    /// is queued has run (the caller is waiting).
    Durable,
    /// Nobody waits for the answer (a turn's `running` mark: losing it in
    /// a crash changes nothing). Its batch may wait up to the deferred
    /// linger for more, so the next durable operation (the turn's outcome)
    /// commits it in the same transaction.
    Detached,
    /// A claimed turn's dispatch boundary: [`OpMode::Durable`], and one of
    /// the boundaries its batch waits for is in (see [`ParkedClaim`]).
    Boundary,
}

/// A request to the writer.
pub(crate) enum Cmd {
    /// Run an operation on the writer.
    Op(Op, OpMode),
    /// A streamed activity append (group-committed).
    Append(AppendReq),
    /// The engine waits for the next runnable turn (see [`ParkedClaim`]).
    Park(ParkedClaim),
    /// A claimed turn's boundary will not follow at once (a cold agent
    /// start, a turn refused before dispatch): its batch stops waiting.
    BoundaryLater,
    /// Stop after the requests already queued before it.
    Shutdown,
}

/// One streamed append.
pub(crate) struct AppendReq {
    /// The turn the activity belongs to.
    pub(crate) turn: String,
    /// Activity kind.
    pub(crate) kind: EventKind,
    /// Payload, already redacted and serialized by the caller.
    pub(crate) payload: Option<ReadyPayload>,
    /// Where the committed event (or the error) goes; may be dropped by the caller.
    pub(crate) reply: oneshot::Sender<StoreResult<Arc<JournalEvent>>>,
}

/// The engine's standing request for the next runnable turn. The writer
/// claims as soon as a turn is runnable — inside the very batch that made it
/// runnable (a submit to a free workspace, the outcome that frees one) — and
/// answers at once, before the commit (only the claim is answered early). The
/// engine parks one claim per free running slot, so one batch can claim a
/// turn in every free workspace. The batch then waits (up to the deferred
/// linger) until each of its claims has its dispatch boundary
/// ([`OpMode::Boundary`], on a warm agent) or [`Cmd::BoundaryLater`], so
/// acceptance, claim and boundary, or one turn's outcome and the next
/// one's boundary, share one commit. Losing the claim in a crash is harmless: nothing is written
/// to an agent before the durable boundary.
pub(crate) struct ParkedClaim {
    /// The provider's facts at the moment of the claim.
    pub(crate) prepare: crate::domain::Preparer,
    /// Where the claim goes; closed when the engine stopped waiting.
    pub(crate) reply: oneshot::Sender<StoreResult<crate::domain::Claim>>,
}

/// The log target of one `trace` line per durable commit (off unless
/// asked for: `LAPIS_LOG=info,lapis_commit=trace`), so a release `serve`
/// can be counted from outside; the tools bench does
/// (`tests/src/bench/tools.rs`).
const COMMIT_LOG_TARGET: &str = "lapis_commit";

/// State shared between the writer and the handles.
#[derive(Debug)]
pub(crate) struct Shared {
    /// Committed events, in `seq` order.
    pub(crate) events: broadcast::Sender<Arc<JournalEvent>>,
    /// Latest status counters.
    pub(crate) status: Mutex<StoreStatus>,
    /// Commits and statements (see [`super::counters`]).
    pub(crate) counters: super::counters::Counters,
    /// Claims parked on the writer after its last batch (tests wait for
    /// the engine's claim to park before counting a turn's work).
    pub(crate) parked: std::sync::atomic::AtomicUsize,
    /// The storage condition that made the last write fail (`disk_full`,
    /// `read_only`, `io_error`), cleared by the next write that commits
    /// (a full disk holds writes until it has room again, see [`fault`]).
    pub(crate) storage_fault: Mutex<Option<&'static str>>,
    /// The check of the retained events (see [`super::history`]): no
    /// claim and no anchor checkpoint before it passed.
    pub(crate) history: super::history::HistoryCell,
}

/// A turn that is not terminal, as the writer tracks it.
#[derive(Debug)]
pub(crate) struct LiveTurn {
    /// Thread id.
    pub(crate) thread: String,
    /// Workspace id.
    pub(crate) workspace: String,
    /// Current state (kept equal to the row's: a transition of a tracked
    /// turn starts from it without reading the row, see `transition`).
    pub(crate) state: TurnState,
    /// Cancel flag, watched by the runner's claim.
    pub(crate) cancel: watch::Sender<bool>,
    /// A streamed append of this turn was refused or failed to write: its
    /// record is incomplete, so [`Writer::finish_turn`] does not let the
    /// reported outcome stand (`journal_write_failed`).
    pub(crate) append_failed: bool,
    /// A permission request of this turn may be in the inbox (one was
    /// journaled, or the turn was restored at open): only then does its
    /// end look for a pending one to settle (`inbox::abandon`).
    pub(crate) asked: bool,
}

/// Tunables the writer needs.
#[derive(Debug, Clone)]
pub(crate) struct WriterLimits {
    /// Most events in one group commit.
    pub(crate) group_commit_max: usize,
    /// Longest wait for more events once a batch has started.
    pub(crate) group_commit_linger: Duration,
    /// Longest wait for more requests once a batch holds an early or
    /// detached operation (see [`OpMode`]); a durable operation ends it.
    pub(crate) deferred_linger: Duration,
}

/// The writer's state. Field order matters for drop: the connection closes
/// before the instance lock is released.
pub(crate) struct Writer {
    /// The only write connection.
    pub(crate) conn: Connection,
    /// Journal counters and in-memory payloads.
    pub(crate) journal: Journal,
    /// Queues, leases, fences.
    pub(crate) sched: Scheduler,
    /// Every non-terminal turn.
    pub(crate) live: HashMap<String, LiveTurn>,
    /// Last `queue_seq` assigned.
    pub(crate) last_queue_seq: u64,
    /// Time source.
    pub(crate) clock: Arc<dyn Clock>,
    /// Handles' view.
    pub(crate) shared: Arc<Shared>,
    /// Batching limits.
    pub(crate) limits: WriterLimits,
    /// Events committed but not yet published.
    pub(crate) outbox: Vec<JournalEvent>,
    /// Delivers committed batches (events, status, replies) in order.
    pub(crate) publisher: Publisher,
    /// Claim requests waiting for a runnable turn, oldest first.
    pub(crate) parked: std::collections::VecDeque<ParkedClaim>,
    /// The journal anchor's last checkpoint (see [`checkpoint`]).
    pub(crate) anchor: AnchorState,
    /// While a batch's transaction is open: `total_changes` as long as
    /// nothing in it wrote yet (see [`Writer::write`]), `None` otherwise.
    pub(crate) batch_clean: Option<u64>,
    /// A deletion committed: compact after the batch (`super::compact`).
    pub(crate) compact: bool,
    /// Held for the life of the writer.
    pub(crate) _lock: InstanceLock,
}

impl Shared {
    /// Counts one durable commit (one fsync).
    pub(crate) fn committed(&self) {
        let n = self
            .counters
            .commits
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        tracing::trace!(target: COMMIT_LOG_TARGET, commits = n, "store commit");
    }
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("last_seq", &self.journal.last_seq)
            .finish_non_exhaustive()
    }
}

impl Writer {
    /// The writer loop; returns when told to shut down or every handle is gone.
    ///
    /// Requests are taken in order into one batch and run as they arrive,
    /// inside one open transaction: everything already queued, and — while
    /// the batch holds only appends — more for up to `group_commit_linger`,
    /// or while it holds an early or detached operation that wrote something
    /// and no durable one, for up to `deferred_linger`. Then the batch
    /// commits (one fsync), its events are published and its durable
    /// requests answered.
    fn note_parked(&self) {
        self.shared
            .parked
            .store(self.parked.len(), std::sync::atomic::Ordering::Relaxed);
    }

    pub(super) fn run(mut self, rx: Receiver<Cmd>) {
        // What the open wrote (migrations, recovery) is not counted.
        super::counters::drain_pages(&self.conn);
        let mut stash: Option<Cmd> = None;
        loop {
            let first = match stash.take() {
                Some(c) => c,
                // Idle: the anchor checkpoint is due within its interval.
                None => match self.anchor_due_in() {
                    Some(wait) => match rx.recv_timeout(wait) {
                        Ok(c) => c,
                        Err(RecvTimeoutError::Timeout) => {
                            self.checkpoint();
                            continue;
                        }
                        Err(RecvTimeoutError::Disconnected) => break,
                    },
                    None => match rx.recv() {
                        Ok(c) => c,
                        Err(_) => break,
                    },
                },
            };
            if matches!(first, Cmd::Shutdown) {
                break;
            }
            // The engine parks a claim after every turn: with nothing
            // runnable it waits here without a transaction (no statement,
            // no write lock) for the batch that makes a turn runnable.
            let first = match first {
                Cmd::Park(claim) if self.sched.pick().is_none() => {
                    self.parked.push_back(claim);
                    self.note_parked();
                    continue;
                }
                other => other,
            };
            let started = Instant::now();
            let mut batch = Batch::begin(&mut self);
            batch.take(&mut self, first);
            while batch.len < self.limits.group_commit_max {
                let next = match rx.try_recv() {
                    Ok(c) => Ok(c),
                    Err(TryRecvError::Empty) => {
                        let wait = batch.linger(&self.limits);
                        let left = (started + wait).saturating_duration_since(Instant::now());
                        if left.is_zero() {
                            break;
                        }
                        rx.recv_timeout(left)
                    }
                    Err(TryRecvError::Disconnected) => Err(RecvTimeoutError::Disconnected),
                };
                match next {
                    Ok(Cmd::Shutdown) => {
                        stash = Some(Cmd::Shutdown);
                        break;
                    }
                    Ok(c) => batch.take(&mut self, c),
                    Err(_) => break,
                }
            }
            batch.finish(&mut self);
            self.note_parked();
            self.checkpoint_if_due();
            self.compact_if_asked();
        }
        // A clean stop anchors what it committed.
        self.checkpoint();
    }

    /// Run `f` atomically with a journal stage: inside an operation batch as
    /// a savepoint of the batch's transaction, otherwise as its own
    /// transaction. On success adopt the stage and queue its events for
    /// publication (after the commit). On error nothing changes in memory;
    /// on a database error the memory state is rebuilt.
    pub(super) fn write<T>(
        &mut self,
        f: impl FnOnce(&Connection, &Journal, &mut JournalTx, i64) -> StoreResult<T>,
    ) -> StoreResult<T> {
        // Nothing is tried while a full disk holds writes (see [`fault`]):
        // the open batch, if any, is left as it was.
        self.held_by_full_disk()?;
        let now = self.clock.now_ms();
        let mut stage = self.journal.begin();
        let in_batch = !self.conn.is_autocommit();
        // The first write of a batch needs no savepoint: nothing before it
        // in the transaction can be lost, so a failure rolls back the whole
        // transaction and opens it again (and its pages need no savepoint
        // sub-journal). Two statements fewer per batch. Anything that opens
        // a savepoint of its own first (`command`) clears `batch_clean`.
        let first = in_batch && self.batch_clean == Some(self.conn.total_changes());
        let result = if first {
            let done = f(&self.conn, &self.journal, &mut stage, now)
                .and_then(|v| self.journal.flush(&self.conn, &mut stage).map(|()| v));
            if done.is_err() {
                let _ = self.conn.execute_batch("ROLLBACK");
                let reopened = self
                    .conn
                    .prepare_cached("BEGIN IMMEDIATE")
                    .and_then(|mut s| s.execute([]))
                    .is_ok();
                self.batch_clean = reopened.then(|| self.conn.total_changes());
            }
            done
        } else if in_batch {
            (|| {
                // Cached: parsing these two statements again for every
                // operation was a measurable part of the writer's CPU.
                self.conn.prepare_cached("SAVEPOINT op")?.execute([])?;
                // Staged rows are inserted before the savepoint ends.
                let done = f(&self.conn, &self.journal, &mut stage, now)
                    .and_then(|v| self.journal.flush(&self.conn, &mut stage).map(|()| v));
                match done {
                    Ok(value) => {
                        self.conn
                            .prepare_cached("RELEASE op")
                            .and_then(|mut s| s.execute([]))
                            .map_err(StoreError::from_sqlite)?;
                        Ok(value)
                    }
                    Err(e) => {
                        let _ = self.conn.execute_batch("ROLLBACK TO op; RELEASE op");
                        Err(e)
                    }
                }
            })()
        } else {
            (|| {
                let tx = self.conn.transaction()?;
                let value = f(&tx, &self.journal, &mut stage, now)?;
                self.journal.flush(&tx, &mut stage)?;
                tx.commit().map_err(StoreError::from_sqlite)?;
                Ok(value)
            })()
        };
        if in_batch && result.is_ok() && self.batch_clean != Some(self.conn.total_changes()) {
            self.batch_clean = None;
        }
        match result {
            Ok(v) => {
                if !in_batch {
                    self.shared.committed();
                    self.storage_recovered();
                }
                let events = self.journal.commit(stage);
                self.outbox.extend(events);
                Ok(v)
            }
            Err(e) => {
                self.note_storage(&e);
                if matches!(e, StoreError::Sqlite(_) | StoreError::Corrupt(_)) {
                    // Best effort: the next request sees the committed truth.
                    let _ = self.reload();
                }
                Err(e)
            }
        }
    }

    /// Publish committed events, refresh the status mirror, wake the
    /// scheduler, then send `replies` (with `failed`, the batch's fate),
    /// after every batch published before (see [`publish`]).
    pub(super) fn publish(&mut self, failed: Option<&'static str>, replies: Vec<Reply>) {
        let batch = Published {
            events: std::mem::take(&mut self.outbox),
            status: StoreStatus {
                queue_depth: self.sched.queued(),
                queue_capacity: self.sched.capacity(),
                running_workspaces: self.sched.running_workspaces(),
                fenced_workspaces: self.sched.fenced_workspaces(),
            },
            failed,
            replies,
        };
        self.publisher.publish(batch);
    }
}
