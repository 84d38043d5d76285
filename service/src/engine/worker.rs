//! The engine: claims runnable turns from the store and runs each through
//! the ACP runner, one task per turn (the scheduler already guarantees one
//! turn per workspace).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::acp::{
    self, AgentRegistry, CancelSignal, CommandLookup, PermissionAnswer, ProviderSpec, RunnerLimits,
    TurnOutcome, TurnRequest, run_turn,
};
use lapis_protocol::config::EnvFile;

use crate::domain::{Claim, EventKind, StoreError, TurnEnd};
use crate::store::Store;

use super::broker::{AnswerError, PendingPermission, PermissionBroker};
use super::hooks::StoreHooks;

/// Outcome code of turns settled because the controller stopped.
pub const CONTROLLER_SHUTDOWN: &str = "controller_shutdown";

/// What the engine needs besides the store.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Providers by name (validated specs).
    pub providers: BTreeMap<String, ProviderSpec>,
    /// Runner deadlines and bounds.
    pub limits: RunnerLimits,
    /// Where bare provider commands are found.
    pub lookup: CommandLookup,
    /// At shutdown, how long running turns may take to finish on their own
    /// before their agents are killed and the turns settled.
    pub shutdown_grace: Duration,
}

impl EngineConfig {
    /// A config with these providers and default limits.
    pub fn new(providers: BTreeMap<String, ProviderSpec>) -> EngineConfig {
        EngineConfig {
            providers,
            limits: RunnerLimits::default(),
            lookup: CommandLookup::from_env(),
            shutdown_grace: Duration::from_secs(10),
        }
    }

    /// Validates the config's `providers` object (name → definition, the
    /// shape in the config docs) into specs. The server's config module can
    /// pass its parsed providers re-serialized with `serde_json::to_value`.
    pub fn providers_from_json(
        providers: &serde_json::Value,
    ) -> Result<BTreeMap<String, ProviderSpec>, acp::ProviderError> {
        let mut out = BTreeMap::new();
        if let Some(map) = providers.as_object() {
            for (name, def) in map {
                out.insert(name.clone(), ProviderSpec::from_json(name, def)?);
            }
        }
        Ok(out)
    }

    /// Adds the built-in `echo` provider (this binary's `acp-echo`) unless
    /// the config defines its own `echo`.
    pub fn with_builtin_echo(mut self, exe: PathBuf) -> EngineConfig {
        self.providers
            .entry(acp::ECHO_PROVIDER.to_string())
            .or_insert_with(|| ProviderSpec::builtin_echo(exe));
        self
    }
}

/// Why `respond_permission` refused an answer.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// Nothing is pending under that id and the turn is still active.
    #[error(transparent)]
    NotPending(AnswerError),
    /// The turn already ended: the late answer was journaled and changed nothing.
    #[error("turn `{turn_id}` has finished; the answer changes nothing")]
    TurnFinished {
        /// The finished turn.
        turn_id: String,
    },
    /// The option was not offered.
    #[error(transparent)]
    NotOffered(AnswerError),
    /// The store refused or failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl EngineError {
    /// The stable wire code.
    pub fn code(&self) -> &'static str {
        match self {
            EngineError::NotPending(_) => "not_found",
            EngineError::TurnFinished { .. } => "conflict",
            EngineError::NotOffered(_) => "invalid_request",
            EngineError::Store(e) => e.code(),
        }
    }
}

/// Runs turns from the store. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Engine {
    /// The store.
    store: Store,
    /// Limits and lookup (its `providers` are the ones at start).
    config: Arc<EngineConfig>,
    /// The providers turns are claimed with; a config reload replaces them
    /// for later claims (a running turn keeps the spec it was claimed with).
    providers: Arc<std::sync::RwLock<BTreeMap<String, ProviderSpec>>>,
    /// Agent secrets (the env file); a config reload replaces them for
    /// later turns, like the providers.
    secrets: Arc<std::sync::RwLock<EnvFile>>,
    /// Pending permission interactions.
    broker: PermissionBroker,
    /// Running agents' process groups (`<controller home>/agents`).
    registry: AgentRegistry,
}

/// A started engine; [`EngineHandle::shutdown`] stops it.
#[derive(Debug)]
pub struct EngineHandle {
    /// Flips to stop claiming.
    stop: watch::Sender<bool>,
    /// The claim loop (which also drains at shutdown).
    task: tokio::task::JoinHandle<()>,
}

impl EngineHandle {
    /// Stops claiming, lets running turns finish within the shutdown grace,
    /// then kills the remaining agents' process groups and settles their
    /// turns: `submission_unknown` past the boundary, `failed` before it.
    pub async fn shutdown(self) {
        self.stop.send_replace(true);
        let _ = self.task.await;
    }
}

/// Bookkeeping for one running turn task.
struct Live {
    /// The turn.
    turn_id: String,
    /// Whether the boundary was persisted.
    dispatched: Arc<AtomicBool>,
}

impl Engine {
    /// An engine over `store`.
    pub fn new(store: Store, config: EngineConfig) -> Engine {
        let registry = AgentRegistry::of_home(&store.options().home);
        Engine {
            store,
            providers: Arc::new(std::sync::RwLock::new(config.providers.clone())),
            secrets: Arc::new(std::sync::RwLock::new(config.lookup.secrets.clone())),
            config: Arc::new(config),
            broker: PermissionBroker::default(),
            registry,
        }
    }

    fn provider(&self, name: &str) -> Option<ProviderSpec> {
        let providers = self.providers.read().unwrap_or_else(|p| p.into_inner());
        providers.get(name).cloned()
    }

    /// Replaces the providers for turns claimed from now on (config
    /// reload; the caller adds the built-in `echo` as at start).
    pub fn replace_providers(&self, providers: BTreeMap<String, ProviderSpec>) {
        *self.providers.write().unwrap_or_else(|p| p.into_inner()) = providers;
    }

    /// Replaces the agent secrets for turns started from now on (reload).
    pub fn replace_secrets(&self, secrets: EnvFile) {
        *self.secrets.write().unwrap_or_else(|p| p.into_inner()) = secrets;
    }

    /// The lookup a turn launches with: the one at start, with the current
    /// secrets.
    fn lookup(&self) -> CommandLookup {
        let mut lookup = self.config.lookup.clone();
        lookup.secrets = self
            .secrets
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        lookup
    }

    /// Pending permission requests, optionally of one turn.
    pub fn pending_permissions(&self, turn_id: Option<&str>) -> Vec<PendingPermission> {
        self.broker.pending(turn_id)
    }

    /// Answers a pending permission request (`permissions.respond`). The
    /// caller authorizes first (the pending entry names its thread). A
    /// selected option must be one of the offered ids exactly. An answer for
    /// a finished turn is journaled as an observation and refused.
    pub async fn respond_permission(
        &self,
        turn_id: &str,
        request_id: &str,
        answer: PermissionAnswer,
    ) -> Result<(), EngineError> {
        match self.broker.answer(turn_id, request_id, answer.clone()) {
            Ok(()) => Ok(()),
            Err(e @ AnswerError::NotOffered { .. }) => Err(EngineError::NotOffered(e)),
            Err(e @ AnswerError::NotPending { .. }) => {
                let turn = self.store.get_turn(turn_id).await?;
                if turn.state.is_active() {
                    return Err(EngineError::NotPending(e));
                }
                // Recorded as an observation by the store: a late answer
                // never moves a finished turn.
                let payload =
                    serde_json::json!({"late": true, "requestId": request_id, "answer": answer});
                let _ = self
                    .store
                    .append_activity(turn_id, EventKind::PermissionDecided, Some(payload))
                    .await;
                Err(EngineError::TurnFinished {
                    turn_id: turn_id.to_string(),
                })
            }
        }
    }

    /// Starts claiming and running turns on the current tokio runtime.
    /// First kills agents a previous controller left running (their turns
    /// were already settled by the store's recovery at open).
    pub fn start(&self) -> EngineHandle {
        let reaped = self.registry.reap_orphans();
        if !reaped.is_empty() {
            tracing::warn!(
                groups = reaped.len(),
                "killed orphaned agents of a previous controller"
            );
        }
        let (stop, stop_rx) = watch::channel(false);
        let task = tokio::spawn(self.clone().run(stop_rx));
        EngineHandle { stop, task }
    }

    async fn run(self, mut stop: watch::Receiver<bool>) {
        let mut tasks: JoinSet<()> = JoinSet::new();
        let mut live: HashMap<tokio::task::Id, Live> = HashMap::new();
        loop {
            while let Some(done) = tasks.try_join_next_with_id() {
                forget(&mut live, done);
            }
            // Only the stop signal may interrupt a claim: a claim dropped
            // mid-commit would strand its turn in `preparing` until the
            // next open's recovery.
            let claim = tokio::select! {
                claim = self.store.next_runnable() => claim,
                _ = stop.changed() => break,
            };
            match claim {
                Ok(claim) => {
                    let dispatched = Arc::new(AtomicBool::new(false));
                    let turn_id = claim.turn.id.clone();
                    let handle = tasks.spawn(self.clone().run_claim(claim, dispatched.clone()));
                    live.insert(
                        handle.id(),
                        Live {
                            turn_id,
                            dispatched,
                        },
                    );
                }
                Err(StoreError::Closed) => break,
                Err(err) => {
                    tracing::error!(code = err.code(), "claiming a turn failed");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
        let deadline = tokio::time::Instant::now() + self.config.shutdown_grace;
        while !tasks.is_empty() {
            match tokio::time::timeout_at(deadline, tasks.join_next_with_id()).await {
                Ok(Some(done)) => forget(&mut live, done),
                Ok(None) | Err(_) => break,
            }
        }
        // Aborting drops each runner, and with it the agent, whose process
        // group is killed on drop.
        tasks.abort_all();
        while let Some(done) = tasks.join_next_with_id().await {
            forget(&mut live, done);
        }
        for (_, l) in live {
            let end = if l.dispatched.load(Ordering::SeqCst) {
                TurnEnd::Unknown(CONTROLLER_SHUTDOWN.into())
            } else {
                TurnEnd::Failed(CONTROLLER_SHUTDOWN.into())
            };
            if let Err(err) = self.store.finish_turn(&l.turn_id, end).await {
                tracing::error!(turn = %l.turn_id, code = err.code(), "settling a turn at shutdown failed");
            }
        }
    }

    async fn run_claim(self, claim: Claim, dispatched: Arc<AtomicBool>) {
        let turn_id = claim.turn.id.clone();
        let Some(spec) = self.provider(&claim.thread.provider) else {
            self.finish(&turn_id, TurnEnd::Failed("unknown_provider".into()))
                .await;
            return;
        };
        let hooks = Arc::new(StoreHooks::new(
            self.store.clone(),
            turn_id.clone(),
            claim.thread.id.clone(),
            self.broker.clone(),
            dispatched,
        ));
        let mut limits = self.config.limits;
        // A metadata-only thread keeps no agent stderr, not even redacted.
        limits.stderr.keep = claim.thread.retention == crate::domain::Retention::Full;
        let request = TurnRequest {
            spec,
            workspace: PathBuf::from(&claim.workspace.path),
            prompt: claim.prompt,
            approval: claim.thread.approval,
            restricted: claim.thread.restricted,
            limits,
            lookup: self.lookup(),
            registry: Some(self.registry.clone()),
        };
        let cancel = claim.cancel.clone();
        let outcome = run_turn(request, hooks.clone(), CancelSignal::from(claim.cancel)).await;
        let mut end = turn_end(&outcome, *cancel.borrow());
        // Text held back for redaction is journaled before the turn's end,
        // then every streamed append is confirmed.
        let held = hooks.flush_held().await;
        let confirmed = hooks.confirm_streamed().await;
        if held.is_err() || confirmed.is_err() {
            // Some of the agent's output was refused by the store (disk
            // full, …): the outcome the agent reported stands on an
            // incomplete record, so it is the owner's to confirm.
            let code = match (&confirmed, &held) {
                (Err(e), _) => e.code().to_owned(),
                (_, Err(e)) => e.0.clone(),
                _ => String::new(),
            };
            tracing::error!(turn = %turn_id, code = %code, "streamed events were not journaled");
            if hooks.dispatched.load(Ordering::SeqCst) {
                end = TurnEnd::Unknown("journal_write_failed".into());
            } else {
                end = TurnEnd::Failed("journal_write_failed".into());
            }
        }
        self.finish(&turn_id, end).await;
    }

    /// Records the turn's end. A write refused by the storage (disk full,
    /// read-only, I/O) is retried with a bounded backoff until it commits,
    /// so the turn settles and its workspace is released as soon as the
    /// condition clears, without a restart; the turn keeps its lease
    /// meanwhile, so nothing else runs in that workspace on a half-written
    /// record.
    async fn finish(&self, turn_id: &str, end: TurnEnd) {
        let mut backoff = Duration::from_millis(100);
        loop {
            match self.store.finish_turn(turn_id, end.clone()).await {
                Ok(out) if !out.applied => {
                    tracing::warn!(turn = %turn_id, "turn end refused by the state table (recorded as observation)");
                }
                Ok(_) => {}
                Err(err) if err.storage_condition().is_some() => {
                    tracing::warn!(
                        turn = %turn_id,
                        condition = err.storage_condition().unwrap_or(""),
                        retry_ms = backoff.as_millis() as u64,
                        "cannot record the turn's end yet; retrying"
                    );
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                    continue;
                }
                Err(err) => {
                    tracing::error!(turn = %turn_id, code = err.code(), "recording a turn's end failed");
                }
            }
            return;
        }
    }
}

fn forget(
    live: &mut HashMap<tokio::task::Id, Live>,
    done: Result<(tokio::task::Id, ()), tokio::task::JoinError>,
) {
    match done {
        Ok((id, ())) => {
            live.remove(&id);
        }
        Err(err) if err.is_panic() => {
            // A panicked runner left its turn unsettled; keep it in `live`
            // so shutdown settles it, and say so now.
            tracing::error!("a turn task panicked");
        }
        Err(_) => {}
    }
}

/// Maps the runner's outcome to the store's turn end.
pub(super) fn turn_end(outcome: &TurnOutcome, cancel_requested: bool) -> TurnEnd {
    match outcome {
        TurnOutcome::Completed { stop_reason } => TurnEnd::Completed(stop_reason.clone()),
        TurnOutcome::Cancelled { dispatched: true } => TurnEnd::Cancelled("cancelled".into()),
        TurnOutcome::Cancelled { dispatched: false } => {
            TurnEnd::Cancelled("cancelled_before_dispatch".into())
        }
        // The store refuses the boundary when a cancel is already pending.
        TurnOutcome::Failed {
            code: "boundary_not_persisted",
            dispatched: false,
        } if cancel_requested => TurnEnd::Cancelled("cancelled_before_dispatch".into()),
        TurnOutcome::Failed { code, .. } => TurnEnd::Failed((*code).into()),
        TurnOutcome::SubmissionUnknown { code } => TurnEnd::Unknown((*code).into()),
        TurnOutcome::Interrupted => TurnEnd::Interrupted("cancel_deadline".into()),
    }
}
