//! [`Store`]: the cloneable async handle (see the module docs of `store`).

use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use tokio::sync::{broadcast, oneshot};

use crate::domain::{Clock, JournalEvent, StoreError, StoreResult, StoreStatus, SystemClock};

use super::home;
use super::journal::{Journal, MemoryPayloads, SharedPayloads};
use super::lock::InstanceLock;
use super::recovery::Recovered;
use super::scheduler::Scheduler;
use super::schema;
use super::validate::{ValidationReport, validate};
use super::writer::{Cmd, Op, OpMode, ParkedClaim, Publisher, Reply, Shared, Writer, WriterLimits};

/// How to open a store. Build with [`StoreOptions::new`] and adjust fields.
#[derive(Clone)]
pub struct StoreOptions {
    /// The controller home (created 0700 if missing); holds the db and the lock.
    pub(crate) home: PathBuf,
    /// Bound on queued turns (`queue_full` beyond it).
    pub queue_capacity: usize,
    /// Most events committed by one group commit.
    pub(crate) group_commit_max: usize,
    /// Longest extra wait for more streamed events once a batch started.
    pub group_commit_linger: Duration,
    /// Longest wait for more requests once a batch holds a claim or a
    /// turn's `running` mark (answered or not awaited before the commit),
    /// so the dispatch boundary or the turn's output and outcome that follow
    /// share its commit. A request someone waits for ends the wait at once,
    /// so it never delays an answer; it only bounds how late a claim alone
    /// (a cold agent start) or the first output of a long turn is published.
    pub deferred_linger: Duration,
    /// Capacity of the committed-event broadcast (a slower subscriber lags).
    pub(crate) broadcast_capacity: usize,
    /// Events in a thread snapshot's tail.
    pub(crate) snapshot_tail: usize,
    /// Turns in a thread snapshot.
    pub(crate) snapshot_turns: usize,
    /// Largest replay / list page.
    pub(crate) page_max: usize,
    /// Metadata-only payloads kept in memory (oldest evicted first).
    pub(crate) memory_payload_capacity: usize,
    /// Time source (ms since epoch).
    pub(crate) clock: Arc<dyn Clock>,
    /// When the retained events are checked (`serve`: after open, see
    /// [`super::history`]).
    pub history: super::validate::HistoryCheck,
}

impl std::fmt::Debug for StoreOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreOptions")
            .field("home", &self.home)
            .field("queue_capacity", &self.queue_capacity)
            .field("group_commit_max", &self.group_commit_max)
            .field("group_commit_linger", &self.group_commit_linger)
            .finish_non_exhaustive()
    }
}

impl StoreOptions {
    /// Defaults for a controller home.
    pub fn new(home: impl Into<PathBuf>) -> Self {
        StoreOptions {
            home: home.into(),
            queue_capacity: 1024,
            group_commit_max: 8192,
            group_commit_linger: Duration::ZERO,
            deferred_linger: Duration::from_millis(5),
            broadcast_capacity: 4096,
            snapshot_tail: 64,
            snapshot_turns: 16,
            page_max: 1000,
            memory_payload_capacity: 100_000,
            clock: Arc::new(SystemClock),
            history: super::validate::HistoryCheck::AtOpen,
        }
    }
}

/// What happened at open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenReport {
    /// Rows validated.
    pub validated: ValidationReport,
    /// Turns settled by recovery.
    pub recovered: Vec<Recovered>,
    /// Wall time of open (lock, validation, recovery).
    pub elapsed: Duration,
}

/// The controller core's handle. Cheap to clone; see the module docs.
#[derive(Clone, Debug)]
pub struct Store {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Requests to the writer.
    cmd: mpsc::Sender<Cmd>,
    /// The writer thread, joined on drop.
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Broadcast, notify and status mirror.
    shared: Arc<Shared>,
    /// Metadata-only payloads (read by replays).
    memory: SharedPayloads,
    /// Idle read connections.
    readers: Mutex<Vec<Connection>>,
    /// Database path, for new read connections.
    db: PathBuf,
    /// Options the store was opened with.
    options: StoreOptions,
    /// Open report.
    report: OpenReport,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Readers close first so the writer's connection is the last one:
        // SQLite then checkpoints and removes the WAL on a clean close.
        self.readers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        let _ = self.cmd.send(Cmd::Shutdown);
        if let Some(t) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = t.join();
        }
    }
}

impl Store {
    /// Open (blocking): lock, open, validate, recover, start the writer.
    pub fn open(options: StoreOptions) -> StoreResult<Store> {
        let started = Instant::now();
        home::check_is_home(&options.home)?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&options.home)
            .map_err(|e| StoreError::io(format!("cannot create {}", options.home.display()), e))?;
        let lock = InstanceLock::acquire(&options.home)?;
        home::mark(&options.home)?;
        // A restore a kill interrupted is finished before the database is
        // read (see `backup`).
        super::backup::finish_pending_restore(&options.home)?;
        let db = options.home.join(schema::DB_FILE);
        home::private_files(&options.home, &db)?;
        let (conn, migrated) = super::backup::open_writer(&db)?;
        // Migrated to this version, the database has its anchor (written
        // by the migration that introduced it, before that commit).
        let anchor = super::anchor::require(&db)?;
        let validated = validate(&conn, &db, &anchor, options.history)?;
        if !migrated {
            // The start after a migration's went well: its backup goes.
            super::backup::prune_pre_migration(&db);
        }
        // Pinned before recovery writes: the check reads what open found.
        let history = match options.history {
            super::validate::HistoryCheck::AtOpen => super::history::verified(validated.events),
            super::validate::HistoryCheck::AfterOpen => {
                let pinned = super::history::pin(&db)?;
                super::history::start(pinned, db.clone(), anchor)?
            }
        };
        let (events, _) = broadcast::channel(options.broadcast_capacity.max(1));
        let shared = Arc::new(Shared {
            events,
            status: Mutex::new(StoreStatus {
                queue_depth: 0,
                queue_capacity: options.queue_capacity,
                running_workspaces: vec![],
                fenced_workspaces: vec![],
            }),
            counters: Default::default(),
            parked: Default::default(),
            storage_fault: Mutex::new(None),
            history,
        });
        let memory: SharedPayloads = Arc::new(Mutex::new(MemoryPayloads::new(
            options.memory_payload_capacity,
        )));
        let mut writer = Writer {
            conn,
            journal: Journal {
                last_seq: 0,
                last_hash: super::chain::GENESIS,
                threads: Default::default(),
                memory: Arc::clone(&memory),
            },
            sched: Scheduler::new(options.queue_capacity),
            live: Default::default(),
            parked: Default::default(),
            last_queue_seq: 0,
            clock: Arc::clone(&options.clock),
            shared: Arc::clone(&shared),
            limits: WriterLimits {
                group_commit_max: options.group_commit_max.max(1),
                group_commit_linger: options.group_commit_linger,
                deferred_linger: options.deferred_linger,
            },
            outbox: Vec::new(),
            publisher: Publisher::start(Arc::clone(&shared)),
            anchor: super::writer::AnchorState::new(db.clone(), anchor),
            batch_clean: None,
            compact: false,
            _lock: lock,
        };
        writer.reload()?;
        let recovered = writer.recover()?;
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("lapis-store-writer".into())
            .spawn(move || writer.run(rx))
            .map_err(|e| StoreError::io("cannot start the store writer", e))?;
        let report = OpenReport {
            validated,
            recovered,
            elapsed: started.elapsed(),
        };
        Ok(Store {
            inner: Arc::new(Inner {
                cmd: tx,
                thread: Mutex::new(Some(thread)),
                shared,
                memory,
                readers: Mutex::new(Vec::new()),
                db,
                options,
                report,
            }),
        })
    }

    /// The storage condition (`disk_full`, `read_only`, `io_error`) that
    /// made the last write fail, until a write commits again.
    pub(crate) fn storage_fault(&self) -> Option<&'static str> {
        self.inner.shared.storage_fault()
    }

    /// What open validated and recovered.
    pub fn open_report(&self) -> &OpenReport {
        &self.inner.report
    }

    /// State shared with the writer.
    pub(super) fn shared(&self) -> &Shared {
        &self.inner.shared
    }

    /// Send a request to the writer.
    pub(super) fn send(&self, cmd: Cmd) -> Result<(), StoreError> {
        self.inner.cmd.send(cmd).map_err(|_| StoreError::Closed)
    }

    /// Options in effect.
    pub(crate) fn options(&self) -> &StoreOptions {
        &self.inner.options
    }

    /// Stop the writer after queued requests and wait until it has stopped,
    /// even while other clones live (the engine's tasks may hold some when
    /// `serve` exits): its last anchor checkpoint is written and its
    /// connection closed (SQLite checkpoints the WAL when it is the last
    /// one; pooled readers close first). Later requests on a clone fail
    /// `Closed`; the lock is released with the writer.
    pub async fn close(self) {
        let inner = self.inner;
        let _ = tokio::task::spawn_blocking(move || {
            inner
                .readers
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clear();
            let _ = inner.cmd.send(Cmd::Shutdown);
            let writer = inner
                .thread
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take();
            if let Some(t) = writer {
                let _ = t.join();
            }
            drop(inner);
        })
        .await;
    }

    /// Transactions committed so far (each is one fsync); for tests and metrics.
    #[cfg(any(test, feature = "test-support"))]
    pub fn commit_count(&self) -> u64 {
        self.counts().commits
    }

    /// Claims parked on the writer (see [`ParkedClaim`]): a test waits for
    /// the engine's next claim to park before it counts a turn's work, so
    /// the count does not depend on which batch claimed the turn.
    #[cfg(any(test, feature = "test-support"))]
    pub fn parked_claims(&self) -> usize {
        self.inner
            .shared
            .parked
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Commits and SQL statements so far (see [`super::counters`]): the
    /// turn's hot-path guards, and `status`'s `work` counters.
    pub fn counts(&self) -> lapis_protocol::params::StoreCounts {
        self.inner.shared.counters.read()
    }

    /// Run `f` on the writer; publish its events after commit, then reply.
    pub(super) async fn op<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Writer) -> StoreResult<T> + Send + 'static,
    {
        self.op_with(OpMode::Durable, f).await
    }

    /// Queue `f` on the writer, in order, without waiting for it
    /// ([`OpMode::Detached`]); an error is logged.
    pub(super) fn op_detached<T, F>(&self, what: &'static str, f: F)
    where
        T: Send + 'static,
        F: FnOnce(&mut Writer) -> StoreResult<T> + Send + 'static,
    {
        let job: Op = Box::new(move |w: &mut Writer| -> Reply {
            let result = f(w).err();
            Box::new(
                move |failed: Option<&'static str>, _: &[Arc<JournalEvent>]| {
                    if let Some(code) = result.as_ref().map(StoreError::code).or(failed) {
                        tracing::warn!(code, what, "detached store operation failed");
                    }
                },
            )
        });
        let _ = self.inner.cmd.send(Cmd::Op(job, OpMode::Detached));
    }

    pub(super) async fn op_with<T, F>(&self, mode: OpMode, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Writer) -> StoreResult<T> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let job: Op = Box::new(move |w: &mut Writer| -> Reply {
            let result = f(w);
            Box::new(
                move |failed: Option<&'static str>, _: &[Arc<JournalEvent>]| {
                    let result = match failed {
                        None => result,
                        Some(cause) => Err(StoreError::rolled_back(cause)),
                    };
                    let _ = tx.send(result);
                },
            )
        });
        self.inner
            .cmd
            .send(Cmd::Op(job, mode))
            .map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// Waits on the writer for the next runnable turn (see [`ParkedClaim`]).
    pub(super) async fn park_claim(
        &self,
        prepare: crate::domain::Preparer,
    ) -> StoreResult<crate::domain::Claim> {
        let (reply, rx) = oneshot::channel();
        self.inner
            .cmd
            .send(Cmd::Park(ParkedClaim { prepare, reply }))
            .map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// Ends a batch's wait for a claimed turn's dispatch boundary: the
    /// engine sends it when the boundary will not follow at once (a cold
    /// agent start, a turn refused before dispatch), so the requests in
    /// that batch commit now.
    pub(crate) fn boundary_later(&self) {
        let _ = self.inner.cmd.send(Cmd::BoundaryLater);
    }

    /// Run a read on the writer's connection, in the batch it has open,
    /// answered at once: it sees what the requests queued before it wrote,
    /// committed or not. For the claim path, whose batch may still hold
    /// the previous turn's end (its usage) when the claimed turn reads it;
    /// a pooled reader sees only what committed. It writes nothing and
    /// neither holds its batch open nor hurries its commit.
    pub(super) async fn read_in_batch<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let job: Op = Box::new(move |w: &mut Writer| -> Reply {
            let _ = tx.send(f(&w.conn));
            Box::new(|_: Option<&'static str>, _: &[Arc<JournalEvent>]| {})
        });
        self.inner
            .cmd
            .send(Cmd::Op(job, OpMode::Detached))
            .map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// Run a read on a pooled read connection, on the blocking pool.
    pub(super) async fn read<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection, &MemoryPayloads) -> StoreResult<T> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || {
            let conn = inner
                .readers
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .pop();
            let conn = match conn {
                Some(c) => c,
                None => schema::open_reader(&inner.db)?,
            };
            let before = super::counters::on_this_thread();
            let result = {
                let mem = inner.memory.lock().unwrap_or_else(|p| p.into_inner());
                f(&conn, &mem)
            };
            let ran = super::counters::on_this_thread() - before;
            inner.shared.counters.add_read(ran);
            inner
                .readers
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(conn);
            result
        })
        .await
        .map_err(|_| StoreError::Closed)?
    }

    /// The metadata-only payloads kept in memory (`super::restore` puts
    /// verified ones back).
    pub(super) fn memory(&self) -> &SharedPayloads {
        &self.inner.memory
    }

    pub(super) fn limit(&self, requested: usize) -> usize {
        let max = self.inner.options.page_max.max(1);
        if requested == 0 {
            max
        } else {
            requested.min(max)
        }
    }
}
