//! The engine: claims runnable turns from the store and runs each through
//! the ACP runner, one task per turn (the scheduler already guarantees one
//! turn per workspace), at most `maxRunningTurns` at once, on the thread's
//! live agent from the [`AgentPool`] when there is one.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;

use crate::acp::{
    self, AfterTurn, AgentRegistry, CancelSignal, CommandLookup, LiveAgent, PermissionAnswer,
    ProviderSpec, TurnHooks, TurnRequest, run_turn_on,
};
use lapis_protocol::config::EnvFile;
use lapis_protocol::snapshot::EvidenceMode;
use lapis_protocol::{Note, OutcomeCode, ReplaceReason, SessionReplaced};

use crate::domain::{Claim, Preparer, ProviderFacts, SessionBinding, StoreError, TurnEnd};
use crate::store::Store;

use super::broker::{PendingPermission, PermissionBroker};
use super::claim::ClaimGuard;
use super::hooks::StoreHooks;
use super::outcome::{Stop, stopped_end, turn_end, within_deadline};
use super::pool::{AgentPool, IdleJournal, PoolStatus};

mod around;
mod ask;
mod config;
mod launch;
mod permissions;
mod port_steps;
mod steps;
mod transcript;
mod turn;

pub use config::EngineConfig;
pub use permissions::EngineError;

use around::forget;

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
    /// The budgets checked at every claim; a config reload replaces them.
    budgets: Arc<std::sync::RwLock<Vec<lapis_protocol::config::Budget>>>,
    /// Workspaces whose evidence is not the default (`workspaces.<id>.evidence`);
    /// a config reload replaces them for later claims.
    evidence: Arc<std::sync::RwLock<BTreeMap<String, EvidenceMode>>>,
    /// What each workspace's recent snapshots cost (`status`'s `evidence`).
    evidence_costs: Arc<super::evidence_cost::EvidenceCosts>,
    /// Bumped by every secrets reload: an agent started under an older
    /// generation is never kept for a later turn (its environment is stale).
    secrets_generation: Arc<AtomicU64>,
    /// Pending permission interactions.
    broker: PermissionBroker,
    /// Running agents' process groups (`<controller home>/agents`).
    registry: AgentRegistry,
    /// Live agents kept between the turns of their threads.
    pool: AgentPool,
    /// One permit per running turn (`maxRunningTurns`); the claim loop
    /// takes one before claiming, so excess turns stay queued in order.
    pub(super) slots: Arc<Semaphore>,
    /// Turns between claim and durable outcome.
    running: Arc<AtomicUsize>,
}

/// Counters for `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineStatus {
    /// Live agents and their bound.
    pub agents: PoolStatus,
    /// Turns running now.
    pub(crate) running_turns: usize,
    /// `server.maxRunningTurns`.
    pub(crate) max_running_turns: usize,
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

/// Bookkeeping for one slot's task: its claim, then its turn.
struct Live {
    /// The turn, once claimed (unset while the claim is parked).
    claimed: Arc<std::sync::OnceLock<String>>,
    /// Whether the boundary was persisted.
    dispatched: Arc<AtomicBool>,
    /// Set once the outcome is durable; the task may still be tearing the
    /// agent down, and shutdown must not settle the turn a second time.
    settled: Arc<AtomicBool>,
    /// Withdraws a claim still parked at shutdown.
    abort: tokio::task::AbortHandle,
}

/// What a slot's task shares with the claim loop: the claimed turn's id,
/// whether its boundary was persisted, whether its outcome is durable.
type Shared = (
    Arc<std::sync::OnceLock<String>>,
    Arc<AtomicBool>,
    Arc<AtomicBool>,
);

impl Engine {
    /// An engine over `store`.
    pub fn new(store: Store, config: EngineConfig) -> Engine {
        let registry = AgentRegistry::of_home(&store.options().home);
        let journal = around::idle_journal(store.clone());
        let pool = AgentPool::new(config.max_live_agents, config.limits.teardown, journal);
        let slots = Arc::new(Semaphore::new(config.max_running_turns.max(1)));
        Engine {
            store,
            providers: Arc::new(std::sync::RwLock::new(config.providers.clone())),
            secrets: Arc::new(std::sync::RwLock::new(config.lookup.secrets.clone())),
            budgets: Arc::new(std::sync::RwLock::new(config.budgets.clone())),
            evidence: Arc::new(std::sync::RwLock::new(config.evidence.clone())),
            evidence_costs: Arc::default(),
            secrets_generation: Arc::default(),
            config: Arc::new(config),
            broker: PermissionBroker::default(),
            registry,
            pool,
            slots,
            running: Arc::default(),
        }
    }

    /// Live agents and running turns, with their bounds.
    pub fn status(&self) -> EngineStatus {
        EngineStatus {
            agents: self.pool.status(),
            running_turns: self.running.load(Ordering::SeqCst),
            max_running_turns: self.config.max_running_turns.max(1),
        }
    }

    async fn run(self, mut stop: watch::Receiver<bool>) {
        let mut tasks: JoinSet<()> = JoinSet::new();
        let mut live: HashMap<tokio::task::Id, Live> = HashMap::new();
        let prepare = self.preparer();
        // One claim parked on the store per free running slot (each holds
        // its slot's permit), so one store batch can claim a turn in every
        // free workspace; without a free slot turns stay queued, and the
        // store's first-fit order decides who runs next. Each slot's task
        // waits for its claim and runs the turn itself: no task between
        // the writer's answer and the turn (a spawn and two wake-ups per
        // turn before). A failed claim comes back here.
        let (failed, mut failures) = tokio::sync::mpsc::unbounded_channel();
        loop {
            while let Some(done) = tasks.try_join_next_with_id() {
                forget(&mut live, done);
            }
            tokio::select! {
                Some((err, permit)) = failures.recv() => match err {
                    StoreError::Closed => break,
                    err => {
                        tracing::error!(code = err.code(), "claiming a turn failed");
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        drop(permit);
                    }
                },
                permit = self.slots.clone().acquire_owned() => {
                    let Ok(permit) = permit else { break };
                    let dispatched = Arc::new(AtomicBool::new(false));
                    let settled = Arc::new(AtomicBool::new(false));
                    let claimed = Arc::new(std::sync::OnceLock::new());
                    let task = self.clone().claim_and_run(
                        prepare.clone(),
                        permit,
                        (claimed.clone(), dispatched.clone(), settled.clone()),
                        failed.clone(),
                        stop.clone(),
                    );
                    let abort = tasks.spawn(task);
                    live.insert(abort.id(), Live { claimed, dispatched, settled, abort });
                }
                _ = stop.changed() => break,
            }
        }
        // Claims still parked are withdrawn (the store skips a parked claim
        // nobody waits for, so none strands a turn in `preparing`); one
        // answered meanwhile fails before its boundary (`claim_and_run`).
        let parked: Vec<tokio::task::Id> = live
            .iter()
            .filter(|(_, l)| l.claimed.get().is_none())
            .map(|(id, _)| *id)
            .collect();
        for id in parked {
            if let Some(l) = live.remove(&id) {
                l.abort.abort();
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
        // Idle agents get their polite teardown (stdin closed, then TERM).
        let teardown = self.config.limits.teardown;
        let pool_deadline = tokio::time::Instant::now()
            + teardown.exit_grace
            + teardown.term_grace
            + Duration::from_secs(1);
        self.pool.shutdown(pool_deadline.max(deadline)).await;
        for (_, l) in live {
            let Some(turn_id) = l.claimed.get() else {
                continue;
            };
            if l.settled.load(Ordering::SeqCst) {
                continue;
            }
            let end = if l.dispatched.load(Ordering::SeqCst) {
                TurnEnd::Unknown(OutcomeCode::ControllerShutdown)
            } else {
                TurnEnd::Failed(OutcomeCode::ControllerShutdown)
            };
            if let Err(err) = self.store.finish_turn(turn_id, end).await {
                tracing::error!(turn = %turn_id, code = err.code(), "settling a turn at shutdown failed");
            }
        }
    }
}
