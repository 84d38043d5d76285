//! [`Store`]: the cloneable async handle (see the module docs of `store`).

use std::future::Future;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use serde_json::Value;
use tokio::sync::{Notify, broadcast, oneshot};

use crate::domain::{
    Actor, AuthSession, Claim, EventKind, JournalEvent, NewAuthSession, NewThread, Receipt,
    ReplayPage, ReplayScope, ResolveAs, StoreError, StoreResult, StoreStatus, SubmitTurn, Thread,
    ThreadPatch, ThreadSnapshot, TransitionOutcome, Turn, TurnEnd, TurnEvent, Workspace,
};

use super::ids::{Clock, system_clock};
use super::journal::{Journal, MemoryPayloads, SharedPayloads};
use super::lock::InstanceLock;
use super::read::{self, ThreadFilter, TurnFilter};
use super::recovery::Recovered;
use super::scheduler::Scheduler;
use super::validate::{ValidationReport, validate};
use super::writer::{AppendReq, Cmd, Shared, Writer, WriterLimits};
use super::{replay, schema};

/// How to open a store. Build with [`StoreOptions::new`] and adjust fields.
#[derive(Clone)]
pub struct StoreOptions {
    /// The controller home (created 0700 if missing); holds the db and the lock.
    pub home: PathBuf,
    /// Bound on queued turns (`queue_full` beyond it).
    pub queue_capacity: usize,
    /// Most events committed by one group commit.
    pub group_commit_max: usize,
    /// Longest extra wait for more streamed events once a batch started.
    pub group_commit_linger: Duration,
    /// Capacity of the committed-event broadcast (a slower subscriber lags).
    pub broadcast_capacity: usize,
    /// Events in a thread snapshot's tail.
    pub snapshot_tail: usize,
    /// Turns in a thread snapshot.
    pub snapshot_turns: usize,
    /// Largest replay / list page.
    pub page_max: usize,
    /// Metadata-only payloads kept in memory (oldest evicted first).
    pub memory_payload_capacity: usize,
    /// Time source (ms since epoch).
    pub clock: Clock,
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
            broadcast_capacity: 4096,
            snapshot_tail: 64,
            snapshot_turns: 16,
            page_max: 1000,
            memory_payload_capacity: 100_000,
            clock: system_clock(),
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

/// A streamed append in flight: await it for the committed event, or drop it
/// (the event is still committed, in order, within the group-commit bound).
#[derive(Debug)]
pub struct PendingAppend {
    rx: Result<oneshot::Receiver<StoreResult<Arc<JournalEvent>>>, ()>,
}

impl Future for PendingAppend {
    type Output = StoreResult<Arc<JournalEvent>>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.get_mut().rx {
            Err(()) => Poll::Ready(Err(StoreError::Closed)),
            Ok(rx) => Pin::new(rx)
                .poll(cx)
                .map(|r| r.unwrap_or(Err(StoreError::Closed))),
        }
    }
}

impl Store {
    /// Open (blocking): lock, open, validate, recover, start the writer.
    pub fn open(options: StoreOptions) -> StoreResult<Store> {
        let started = Instant::now();
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&options.home)
            .map_err(|e| StoreError::io(format!("cannot create {}", options.home.display()), e))?;
        let lock = InstanceLock::acquire(&options.home)?;
        let db = options.home.join(schema::DB_FILE);
        let conn = schema::open_writer(&db)?;
        let validated = validate(&conn)?;
        let (events, _) = broadcast::channel(options.broadcast_capacity.max(1));
        let shared = Arc::new(Shared {
            events,
            runnable: Notify::new(),
            status: Mutex::new(StoreStatus {
                queue_depth: 0,
                queue_capacity: options.queue_capacity,
                running_workspaces: vec![],
                fenced_workspaces: vec![],
            }),
            commits: Default::default(),
        });
        let memory: SharedPayloads = Arc::new(Mutex::new(MemoryPayloads::new(
            options.memory_payload_capacity,
        )));
        let mut writer = Writer {
            conn,
            journal: Journal {
                last_seq: 0,
                threads: Default::default(),
                memory: Arc::clone(&memory),
            },
            sched: Scheduler::new(options.queue_capacity),
            live: Default::default(),
            last_queue_seq: 0,
            clock: Arc::clone(&options.clock),
            shared: Arc::clone(&shared),
            limits: WriterLimits {
                group_commit_max: options.group_commit_max.max(1),
                group_commit_linger: options.group_commit_linger,
            },
            outbox: Vec::new(),
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

    /// What open validated and recovered.
    pub fn open_report(&self) -> &OpenReport {
        &self.inner.report
    }

    /// Options in effect.
    pub fn options(&self) -> &StoreOptions {
        &self.inner.options
    }

    /// Stop the writer after queued requests and wait for it (releases the
    /// lock once every clone is gone).
    pub async fn close(self) {
        let _ = self.inner.cmd.send(Cmd::Shutdown);
        let inner = self.inner;
        let _ = tokio::task::spawn_blocking(move || drop(inner)).await;
    }

    /// Transactions committed so far (each is one fsync); for tests and metrics.
    pub fn commit_count(&self) -> u64 {
        self.inner
            .shared
            .commits
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Run `f` on the writer; publish its events after commit, then reply.
    pub(crate) async fn op<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Writer) -> StoreResult<T> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let job = Box::new(move |w: &mut Writer| {
            let result = f(w);
            w.flush_outbox();
            let _ = tx.send(result);
        });
        self.inner
            .cmd
            .send(Cmd::Op(job))
            .map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// Run a read on a pooled read connection, on the blocking pool.
    async fn read<T, F>(&self, f: F) -> StoreResult<T>
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
            let result = {
                let mem = inner.memory.lock().unwrap_or_else(|p| p.into_inner());
                f(&conn, &mem)
            };
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

    fn limit(&self, requested: usize) -> usize {
        let max = self.inner.options.page_max.max(1);
        if requested == 0 {
            max
        } else {
            requested.min(max)
        }
    }

    // ---- workspaces -------------------------------------------------------

    /// Register a workspace. `path` is canonicalised (it must exist); a second
    /// id for one canonical path fails `workspace_alias`; the same id and path
    /// again returns the existing record with `replayed: true`.
    pub async fn add_workspace(&self, id: &str, path: &Path) -> StoreResult<Receipt<Workspace>> {
        let canonical = std::fs::canonicalize(path)
            .map_err(|_| StoreError::invalid("workspace path does not exist"))?;
        if !canonical.is_dir() {
            return Err(StoreError::invalid("workspace path is not a directory"));
        }
        let canonical = canonical
            .to_str()
            .ok_or_else(|| StoreError::invalid("workspace path is not UTF-8"))?
            .to_owned();
        let id = id.to_owned();
        self.op(move |w| w.add_workspace(&id, &canonical)).await
    }

    /// Every workspace, by id.
    pub async fn list_workspaces(&self) -> StoreResult<Vec<Workspace>> {
        self.read(|c, _| read::workspaces(c)).await
    }

    /// One workspace.
    pub async fn get_workspace(&self, id: &str) -> StoreResult<Workspace> {
        let id = id.to_owned();
        self.read(move |c, _| {
            read::workspace(c, &id)?.ok_or_else(|| StoreError::not_found("workspace", id))
        })
        .await
    }

    // ---- threads ----------------------------------------------------------

    /// Create a thread owned by `actor` (principal and application stamped).
    pub async fn create_thread(
        &self,
        actor: &Actor,
        input: NewThread,
    ) -> StoreResult<Receipt<Thread>> {
        let actor = actor.clone();
        self.op(move |w| w.create_thread(&actor, input)).await
    }

    /// One thread (`not_found` if absent; the caller checks ownership).
    pub async fn get_thread(&self, id: &str) -> StoreResult<Thread> {
        let id = id.to_owned();
        self.read(move |c, _| {
            read::thread(c, &id)?.ok_or_else(|| StoreError::not_found("thread", id))
        })
        .await
    }

    /// Threads matching the filter, newest first, bounded by the page size.
    pub async fn list_threads(&self, filter: ThreadFilter) -> StoreResult<Vec<Thread>> {
        let limit = self.limit(filter.limit);
        self.read(move |c, _| read::threads(c, &filter, limit))
            .await
    }

    /// Reconfigure a thread; `conflict` on a stale version or an active turn.
    pub async fn configure_thread(
        &self,
        actor: &Actor,
        id: &str,
        expected_version: u64,
        patch: ThreadPatch,
    ) -> StoreResult<Thread> {
        let (actor, id) = (actor.clone(), id.to_owned());
        self.op(move |w| w.configure_thread(&actor, &id, expected_version, patch))
            .await
    }

    // ---- turns ------------------------------------------------------------

    /// Accept a turn into its workspace's queue (idempotent by command id).
    pub async fn submit_turn(
        &self,
        actor: &Actor,
        input: SubmitTurn,
    ) -> StoreResult<Receipt<Turn>> {
        let actor = actor.clone();
        self.op(move |w| w.submit_turn(&actor, input)).await
    }

    /// One turn.
    pub async fn get_turn(&self, id: &str) -> StoreResult<Turn> {
        let id = id.to_owned();
        self.read(move |c, _| read::turn(c, &id)?.ok_or_else(|| StoreError::not_found("turn", id)))
            .await
    }

    /// Turns matching the filter, newest first, bounded by the page size.
    pub async fn list_turns(&self, filter: TurnFilter) -> StoreResult<Vec<Turn>> {
        let limit = self.limit(filter.limit);
        self.read(move |c, _| read::turns(c, &filter, limit)).await
    }

    /// Cancel: a queued turn becomes `cancelled` at once; a turn in flight
    /// gets its durable cancel flag (the runner's [`Claim::cancel`] flips);
    /// other states are returned unchanged.
    pub async fn request_cancel(&self, actor: &Actor, turn: &str) -> StoreResult<Turn> {
        let (actor, turn) = (actor.clone(), turn.to_owned());
        self.op(move |w| w.request_cancel(&actor, &turn)).await
    }

    /// Resolve a `submission_unknown`/`interrupted` turn as failed or
    /// cancelled. Refused (`invalid_request`) without `confirmed_stopped`,
    /// `conflict` for a turn that is not fenced. Writes an audit row and a
    /// `turn_resolved` event, releases the fence, never re-dispatches.
    pub async fn resolve_turn(
        &self,
        actor: &Actor,
        turn: &str,
        as_: ResolveAs,
        confirmed_stopped: bool,
    ) -> StoreResult<Turn> {
        let (actor, turn) = (actor.clone(), turn.to_owned());
        self.op(move |w| w.resolve_turn(&actor, &turn, as_, confirmed_stopped))
            .await
    }

    // ---- runner -----------------------------------------------------------

    /// Claim the next runnable turn now, if any.
    pub async fn try_claim(&self) -> StoreResult<Option<Claim>> {
        self.op(|w| w.claim()).await
    }

    /// Wait for and claim the next runnable turn (one per workspace, FIFO
    /// inside a workspace, first-fit across, fenced workspaces skipped).
    pub async fn next_runnable(&self) -> StoreResult<Claim> {
        loop {
            let notified = self.inner.shared.runnable.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(claim) = self.try_claim().await? {
                return Ok(claim);
            }
            notified.await;
        }
    }

    /// Persist the dispatch boundary (durable when this returns `Ok`). Fails
    /// `conflict` unless the turn is `preparing` with no pending cancel; then
    /// the prompt must not be written.
    pub async fn mark_dispatched(&self, turn: &str) -> StoreResult<Turn> {
        let turn = turn.to_owned();
        self.op(move |w| w.mark_dispatched(&turn)).await
    }

    /// The agent started on the prompt (`dispatched → running`).
    pub async fn mark_running(&self, turn: &str) -> StoreResult<TransitionOutcome> {
        let turn = turn.to_owned();
        self.op(move |w| w.transition(&turn, TurnEvent::Start, None, false))
            .await
    }

    /// End a turn. A change the table refuses (e.g. a duplicate completion) is
    /// journaled as an observation and returns `applied: false`.
    pub async fn finish_turn(&self, turn: &str, end: TurnEnd) -> StoreResult<TransitionOutcome> {
        let turn = turn.to_owned();
        self.op(move |w| w.finish_turn(&turn, end)).await
    }

    /// Append an activity event (content kinds only) to a claimed turn.
    /// Group-committed with other appends; after a terminal or fenced state
    /// it is recorded as an `observation` wrapping the late event. Sync: the
    /// request is queued in order before this returns.
    pub fn append_activity(
        &self,
        turn: &str,
        kind: EventKind,
        payload: Option<Value>,
    ) -> PendingAppend {
        let (reply, rx) = oneshot::channel();
        let req = AppendReq {
            turn: turn.to_owned(),
            kind,
            payload,
            reply,
        };
        match self.inner.cmd.send(Cmd::Append(req)) {
            Ok(()) => PendingAppend { rx: Ok(rx) },
            Err(_) => PendingAppend { rx: Err(()) },
        }
    }

    /// Wait until every request sent before this call is committed.
    pub async fn flush(&self) -> StoreResult<()> {
        self.op(|_| Ok(())).await
    }

    // ---- journal ----------------------------------------------------------

    /// Committed events, in `seq` order, from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<JournalEvent>> {
        self.inner.shared.events.subscribe()
    }

    /// One page after `after` (exclusive); `limit` 0 = page maximum.
    pub async fn replay(
        &self,
        scope: ReplayScope,
        after: u64,
        limit: usize,
    ) -> StoreResult<ReplayPage> {
        let limit = self.limit(limit);
        self.read(move |c, m| replay::replay(c, m, &scope, after, limit))
            .await
    }

    /// A thread, its recent turns and a bounded tail (`truncated` when older events exist).
    pub async fn thread_snapshot(&self, thread: &str) -> StoreResult<ThreadSnapshot> {
        let thread = thread.to_owned();
        let (tail, turns) = (
            self.inner.options.snapshot_tail,
            self.inner.options.snapshot_turns,
        );
        self.read(move |c, m| replay::snapshot(c, m, &thread, tail, turns))
            .await
    }

    // ---- status -----------------------------------------------------------

    /// Queue depth and capacity, running and fenced workspaces (as of the last commit).
    pub fn status(&self) -> StoreStatus {
        self.inner
            .shared
            .status
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    // ---- auth sessions ----------------------------------------------------

    /// Store a new session (the caller made the bearer; pass its SHA-256 hex).
    pub async fn issue_session(&self, input: NewAuthSession) -> StoreResult<AuthSession> {
        self.op(move |w| w.issue_session(input)).await
    }

    /// The newest unrevoked session of a credential (the caller checks expiry).
    pub async fn find_session_by_credential(
        &self,
        credential: &str,
    ) -> StoreResult<Option<AuthSession>> {
        let credential = credential.to_owned();
        self.read(move |c, _| read::session_by_credential(c, &credential))
            .await
    }

    /// The session with this bearer hash, revoked or not (the caller checks).
    pub async fn find_session_by_bearer_hash(
        &self,
        sha256_hex: &str,
    ) -> StoreResult<Option<AuthSession>> {
        let h = sha256_hex.to_owned();
        self.read(move |c, _| read::session_by_bearer(c, &h)).await
    }

    /// Revoke a session (idempotent).
    pub async fn revoke_session(&self, id: &str) -> StoreResult<AuthSession> {
        let id = id.to_owned();
        self.op(move |w| w.revoke_session(&id)).await
    }
}
