//! The single writer: one thread owning the write connection.
//!
//! Requests arrive on a channel: [`Cmd::Op`] runs one operation,
//! [`Cmd::Append`] is a streamed journal append. Consecutive appends waiting
//! in the channel are committed together — one transaction, one fsync — up to
//! `group_commit_max` events, after waiting at most `group_commit_linger` for
//! more (the bounded delay; 0 = take only what is already queued, so the batch
//! naturally grows while a commit is in flight).
//!
//! Operations are group-committed too: the operations already queued when
//! the writer picks one up (never waiting for more) run in one outer
//! transaction, each inside its own savepoint, so a refused operation rolls
//! back alone while the others commit with one fsync. Every reply of the
//! batch waits for that commit — a caller is never told of a write that is
//! not durable (the dispatch boundary in particular) — and if the commit
//! fails, every operation of the batch is answered with an error and memory
//! is rebuilt from the database. Events are published to subscribers only
//! after their commit, then replies are sent. In-memory state (journal counters, scheduler, live turns) changes
//! only after the matching commit; if a transaction fails it is rebuilt from
//! the database.

use std::collections::HashMap;
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use serde_json::{Value, json};
use tokio::sync::{Notify, broadcast, oneshot, watch};

use crate::domain::{
    Clock, EventKind, JournalEvent, StoreError, StoreResult, StoreStatus, TurnState,
};

use super::journal::{Journal, JournalTx};
use super::lock::InstanceLock;
use super::read;
use super::scheduler::Scheduler;

/// Sends an operation's answer once its batch's fate is known: `None` when
/// the batch committed, `Some(code)` when its commit failed.
pub(crate) type Reply = Box<dyn FnOnce(Option<&'static str>) + Send>;

/// An operation: runs on the writer, returns how to answer its caller.
pub(crate) type Op = Box<dyn FnOnce(&mut Writer) -> Reply + Send>;

/// A request to the writer.
pub(crate) enum Cmd {
    /// Run an operation on the writer (answered after its batch commits).
    Op(Op),
    /// A streamed activity append (group-committed).
    Append(AppendReq),
    /// Stop after the requests already queued before it.
    Shutdown,
}

/// One streamed append.
pub(crate) struct AppendReq {
    /// The turn the activity belongs to.
    pub(crate) turn: String,
    /// Activity kind.
    pub(crate) kind: EventKind,
    /// Payload.
    pub(crate) payload: Option<Value>,
    /// Where the committed event (or the error) goes; may be dropped by the caller.
    pub(crate) reply: oneshot::Sender<StoreResult<Arc<JournalEvent>>>,
}

/// State shared between the writer and the handles.
#[derive(Debug)]
pub(crate) struct Shared {
    /// Committed events, in `seq` order.
    pub(crate) events: broadcast::Sender<Arc<JournalEvent>>,
    /// Woken whenever the scheduler may have a runnable turn.
    pub(crate) runnable: Notify,
    /// Latest status counters.
    pub(crate) status: Mutex<StoreStatus>,
    /// Transactions committed by the writer (each one fsync).
    pub(crate) commits: std::sync::atomic::AtomicU64,
    /// The storage condition that made the last write fail (`disk_full`,
    /// `read_only`, `io_error`), cleared by the next write that commits.
    pub(crate) storage_fault: Mutex<Option<&'static str>>,
}

/// A turn that is not terminal, as the writer tracks it.
#[derive(Debug)]
pub(crate) struct LiveTurn {
    /// Thread id.
    pub(crate) thread: String,
    /// Current state.
    pub(crate) state: TurnState,
    /// Cancel flag, watched by the runner's claim.
    pub(crate) cancel: watch::Sender<bool>,
}

/// Tunables the writer needs.
#[derive(Debug, Clone)]
pub(crate) struct WriterLimits {
    /// Most events in one group commit.
    pub(crate) group_commit_max: usize,
    /// Longest wait for more events once a batch has started.
    pub(crate) group_commit_linger: Duration,
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
    /// Held for the life of the writer.
    pub(crate) _lock: InstanceLock,
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
    pub(super) fn run(mut self, rx: Receiver<Cmd>) {
        let mut stash: Option<Cmd> = None;
        loop {
            let cmd = match stash.take() {
                Some(c) => c,
                None => match rx.recv() {
                    Ok(c) => c,
                    Err(_) => break,
                },
            };
            match cmd {
                Cmd::Shutdown => break,
                Cmd::Op(first) => {
                    let mut ops = vec![first];
                    while ops.len() < self.limits.group_commit_max {
                        match rx.try_recv() {
                            Ok(Cmd::Op(op)) => ops.push(op),
                            Ok(other) => {
                                stash = Some(other);
                                break;
                            }
                            Err(_) => break,
                        }
                    }
                    self.run_ops(ops);
                }
                Cmd::Append(first) => {
                    let mut batch = vec![first];
                    let deadline = Instant::now() + self.limits.group_commit_linger;
                    while batch.len() < self.limits.group_commit_max {
                        let next = match rx.try_recv() {
                            Ok(c) => Ok(c),
                            Err(TryRecvError::Empty) => {
                                let left = deadline.saturating_duration_since(Instant::now());
                                if left.is_zero() {
                                    break;
                                }
                                rx.recv_timeout(left)
                            }
                            Err(TryRecvError::Disconnected) => Err(RecvTimeoutError::Disconnected),
                        };
                        match next {
                            Ok(Cmd::Append(a)) => batch.push(a),
                            Ok(other) => {
                                stash = Some(other);
                                break;
                            }
                            Err(_) => break,
                        }
                    }
                    self.append_batch(batch);
                }
            }
        }
    }

    /// Runs a batch of operations in one outer transaction (see the module
    /// docs), then publishes their events and answers them.
    fn run_ops(&mut self, ops: Vec<Op>) {
        // Without the outer transaction each operation commits on its own.
        let batched = self.conn.execute_batch("BEGIN IMMEDIATE").is_ok();
        let changes_before = self.conn.total_changes();
        let replies: Vec<Reply> = ops.into_iter().map(|op| op(self)).collect();
        let failed = if batched {
            let wrote = self.conn.total_changes() != changes_before;
            match self.conn.execute_batch("COMMIT") {
                Ok(()) => {
                    // A batch that changed nothing writes no WAL frame and
                    // costs no fsync; it is not counted as a commit.
                    if wrote {
                        self.shared
                            .commits
                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        self.storage_recovered();
                    }
                    None
                }
                Err(e) => {
                    let e = StoreError::from_sqlite(e);
                    self.note_storage(&e);
                    let code = e.code();
                    let _ = self.conn.execute_batch("ROLLBACK");
                    // Nothing of the batch happened: drop its events and
                    // rebuild memory from what is committed.
                    self.outbox.clear();
                    let _ = self.reload();
                    Some(code)
                }
            }
        } else {
            None
        };
        self.flush_outbox();
        for reply in replies {
            reply(failed);
        }
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
        let now = self.clock.now_ms();
        let mut stage = self.journal.begin();
        let in_batch = !self.conn.is_autocommit();
        let result = if in_batch {
            (|| {
                self.conn.execute_batch("SAVEPOINT op")?;
                match f(&self.conn, &self.journal, &mut stage, now) {
                    Ok(value) => {
                        self.conn
                            .execute_batch("RELEASE op")
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
                tx.commit().map_err(StoreError::from_sqlite)?;
                Ok(value)
            })()
        };
        match result {
            Ok(v) => {
                if !in_batch {
                    self.shared
                        .commits
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
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

    /// Records a storage condition (disk full, read-only, I/O) that made a
    /// write fail, logging it once when it starts.
    fn note_storage(&self, e: &StoreError) {
        let Some(condition) = e.storage_condition() else {
            return;
        };
        let mut fault = self
            .shared
            .storage_fault
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if fault.is_none() {
            tracing::error!(
                condition,
                "the store cannot write ({condition}); reads continue, writes are refused until it clears"
            );
        }
        *fault = Some(condition);
    }

    /// A write committed: a recorded storage condition has cleared.
    fn storage_recovered(&self) {
        let mut fault = self
            .shared
            .storage_fault
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(condition) = fault.take() {
            tracing::info!(condition, "the store writes again");
        }
    }

    /// Publish committed events, refresh the status mirror, wake the scheduler.
    pub(super) fn flush_outbox(&mut self) -> Vec<Arc<JournalEvent>> {
        let events: Vec<Arc<JournalEvent>> = self.outbox.drain(..).map(Arc::new).collect();
        for e in &events {
            // No subscribers is fine.
            let _ = self.shared.events.send(Arc::clone(e));
        }
        let status = StoreStatus {
            queue_depth: self.sched.queued(),
            queue_capacity: self.sched.capacity(),
            running_workspaces: self.sched.running_workspaces(),
            fenced_workspaces: self.sched.fenced_workspaces(),
        };
        // Wake the scheduler only when something it depends on changed: a
        // claim that found nothing commits no events and changes no counter,
        // and waking on it made an idle engine spin (claim → wake → claim).
        let changed = {
            let mut shared = self.shared.status.lock().unwrap_or_else(|p| p.into_inner());
            let changed = !events.is_empty() || *shared != status;
            *shared = status;
            changed
        };
        if changed {
            self.shared.runnable.notify_waiters();
        }
        events
    }

    /// Commit a batch of streamed appends in one transaction.
    fn append_batch(&mut self, batch: Vec<AppendReq>) {
        // Resolve each turn first (outside the transaction: reads only).
        let mut plans = Vec::with_capacity(batch.len());
        for req in batch {
            let plan = self.plan_append(&req);
            plans.push((req, plan));
        }
        let result = self.write(|tx, journal, stage, now| {
            let mut idx = Vec::with_capacity(plans.len());
            for (req, plan) in plans.iter_mut() {
                match plan {
                    Ok((thread, late)) => {
                        // Moved, not cloned: the payload goes to the event.
                        let payload = req.payload.take();
                        let (kind, payload) = if *late {
                            let late_payload =
                                json!({ "late": req.kind.as_str(), "data": payload });
                            (EventKind::Observation, Some(late_payload))
                        } else {
                            (req.kind, payload)
                        };
                        journal.append(tx, stage, thread, Some(&req.turn), kind, now, payload)?;
                        idx.push(Some(stage.events.len() - 1));
                    }
                    Err(_) => idx.push(None),
                }
            }
            Ok(idx)
        });
        let published = self.flush_outbox();
        match result {
            Ok(idx) => {
                for ((req, plan), i) in plans.into_iter().zip(idx) {
                    let answer = match (plan, i) {
                        (Ok(_), Some(i)) => Ok(Arc::clone(&published[i])),
                        (Err(e), _) => Err(e),
                        (Ok(_), None) => Err(StoreError::Closed),
                    };
                    let _ = req.reply.send(answer);
                }
            }
            Err(e) => {
                let code = e.code();
                for (req, _) in plans {
                    let _ = req.reply.send(Err(StoreError::io(
                        format!("journal batch rolled back ({code})"),
                        std::io::Error::other("group commit failed"),
                    )));
                }
            }
        }
    }

    /// Where an append goes: `(thread, late)`; late appends become observations.
    fn plan_append(&self, req: &AppendReq) -> StoreResult<(String, bool)> {
        if !req.kind.is_activity() {
            return Err(StoreError::invalid("not an activity kind"));
        }
        if let Some(live) = self.live.get(&req.turn) {
            return match live.state {
                TurnState::Queued => Err(StoreError::invalid("turn has not been claimed")),
                s => Ok((live.thread.clone(), s.is_fenced())),
            };
        }
        match read::turn(&self.conn, &req.turn)? {
            Some(t) => Ok((t.thread_id, true)),
            None => Err(StoreError::not_found("turn", req.turn.clone())),
        }
    }
}
