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
use lapis_protocol::{Note, OutcomeCode, ReplaceReason, SessionReplaced};

use crate::domain::{Claim, Preparer, ProviderFacts, SessionBinding, StoreError, TurnEnd};
use crate::store::Store;

use super::broker::{PendingPermission, PermissionBroker};
use super::claim::ClaimGuard;
use super::hooks::StoreHooks;
use super::outcome::{Deadline, Stop, stopped_end, turn_end};
use super::pool::{AgentPool, IdleJournal, PoolStatus};

mod around;
mod config;
mod permissions;
mod transcript;

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

/// Bookkeeping for one running turn task.
struct Live {
    /// The turn.
    turn_id: String,
    /// Whether the boundary was persisted.
    dispatched: Arc<AtomicBool>,
    /// Set once the outcome is durable; the task may still be tearing the
    /// agent down, and shutdown must not settle the turn a second time.
    settled: Arc<AtomicBool>,
}

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
        // store's first-fit order decides who runs next.
        let (claimed, mut claims) = tokio::sync::mpsc::unbounded_channel();
        let mut parked: JoinSet<()> = JoinSet::new();
        loop {
            while let Some(done) = tasks.try_join_next_with_id() {
                forget(&mut live, done);
            }
            while parked.try_join_next().is_some() {}
            let (claim, permit) = tokio::select! {
                Some(answer) = claims.recv() => answer,
                permit = self.slots.clone().acquire_owned() => {
                    let Ok(permit) = permit else { break };
                    let (store, prepare, claimed) =
                        (self.store.clone(), prepare.clone(), claimed.clone());
                    parked.spawn(async move {
                        let claim = store.next_runnable_with(prepare).await;
                        let _ = claimed.send((claim, permit));
                    });
                    continue;
                }
                _ = stop.changed() => break,
            };
            match claim {
                Ok(claim) => {
                    let dispatched = Arc::new(AtomicBool::new(false));
                    let settled = Arc::new(AtomicBool::new(false));
                    let turn_id = claim.turn.id.clone();
                    let task =
                        self.clone()
                            .run_claim(claim, dispatched.clone(), settled.clone(), permit);
                    let handle = tasks.spawn(task);
                    live.insert(
                        handle.id(),
                        Live {
                            turn_id,
                            dispatched,
                            settled,
                        },
                    );
                }
                Err(StoreError::Closed) => break,
                Err(err) => {
                    tracing::error!(code = err.code(), "claiming a turn failed");
                    drop(permit);
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
        // Claims still parked are withdrawn (the store skips a parked claim
        // nobody waits for, so none strands a turn in `preparing`); one
        // answered meanwhile is settled below like any running turn.
        parked.abort_all();
        while parked.join_next().await.is_some() {}
        claims.close();
        while let Ok((answer, permit)) = claims.try_recv() {
            let Ok(claim) = answer else { continue };
            let guard = ClaimGuard::new(self.store.clone(), self.running.clone(), permit);
            guard.boundary_later();
            if let Err(err) = self
                .store
                .finish_turn(
                    &claim.turn.id,
                    TurnEnd::Failed(OutcomeCode::ControllerShutdown),
                )
                .await
            {
                tracing::error!(turn = %claim.turn.id, code = err.code(), "settling a claimed turn at shutdown failed");
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
            if l.settled.load(Ordering::SeqCst) {
                continue;
            }
            let end = if l.dispatched.load(Ordering::SeqCst) {
                TurnEnd::Unknown(OutcomeCode::ControllerShutdown)
            } else {
                TurnEnd::Failed(OutcomeCode::ControllerShutdown)
            };
            if let Err(err) = self.store.finish_turn(&l.turn_id, end).await {
                tracing::error!(turn = %l.turn_id, code = err.code(), "settling a turn at shutdown failed");
            }
        }
    }

    /// Runs one claimed turn on the thread's live agent or a new one. The
    /// outcome is made durable as soon as the runner has it; only then is
    /// the agent kept or torn down, so a crash during teardown never turns
    /// a reported outcome into an unknown one.
    pub(super) async fn run_claim(
        self,
        claim: Claim,
        dispatched: Arc<AtomicBool>,
        settled: Arc<AtomicBool>,
        permit: OwnedSemaphorePermit,
    ) {
        // Settles the running slot and the boundary signal on every exit.
        let mut guard = ClaimGuard::new(self.store.clone(), self.running.clone(), permit);
        let turn_id = claim.turn.id.clone();
        let thread_id = claim.thread.id.clone();
        // The provider and policy the turn was prepared with, as recorded
        // in the claim's transaction; a reload since does not change them.
        let (Some(facts), Some(prepared)) = (claim.provider, claim.turn.prepared.clone()) else {
            guard.boundary_later();
            guard.release();
            self.finish(&turn_id, TurnEnd::Failed(OutcomeCode::UnknownProvider))
                .await;
            return;
        };
        // Budgets first: a spent one fails the turn before any port or
        // agent is asked for anything (see `budgets`).
        if self.budget_spent(&claim.thread, &turn_id).await {
            guard.boundary_later();
            guard.release();
            self.finish(&turn_id, TurnEnd::Failed(OutcomeCode::BudgetExhausted))
                .await;
            return;
        }
        let mcp = match facts.mcp {
            Ok(mcp) => mcp,
            Err(refusal) => {
                guard.boundary_later();
                guard.release();
                self.refuse_mcp(&turn_id, &refusal).await;
                return;
            }
        };
        // The thread's context port is asked now, before any agent is
        // taken: a turn without its context never reaches one. The
        // claiming batch does not wait for the application's answer.
        let mut context = match &claim.thread.context {
            None => Vec::new(),
            Some(port) => {
                guard.boundary_later();
                let port = port.clone();
                let prepared = self
                    .prepare_context(&mut guard, &claim.thread, &turn_id, &claim.prompt, &port)
                    .await;
                match prepared {
                    Some(blocks) => blocks,
                    None => return,
                }
            }
        };
        // Then the thread's memory port: recalled with the prompt, after
        // the context port's blocks and before the prompt text.
        if let Some(port) = claim.thread.memory.clone() {
            guard.boundary_later();
            let recalled = self
                .recall_memory(&mut guard, &claim.thread, &turn_id, &claim.prompt, &port)
                .await;
            match recalled {
                Some(block) => context.extend(block),
                None => return,
            }
        }
        // Last before the agent: the thread's transcript store keeps the
        // prompt (acknowledged within its deadline) or the turn fails here;
        // the feed then carries the turn's output until it is dropped,
        // after the turn's end is committed (see `tools::transcript`).
        let _feed = match claim.thread.transcript_store.clone() {
            None => None,
            Some(port) => {
                guard.boundary_later();
                match self
                    .keep_transcript(
                        &mut guard,
                        &claim.thread,
                        &turn_id,
                        &port,
                        claim.cancel.clone(),
                    )
                    .await
                {
                    Some(feed) => Some(feed),
                    None => return,
                }
            }
        };
        let (spec, fingerprint) = (facts.spec, facts.fingerprint);
        let bound = claim.thread.agent_session.clone();
        let replace = bound.as_ref().and_then(|b| {
            if b.fingerprint != fingerprint {
                Some(ReplaceReason::ProviderChanged)
            } else if b.thread_version != claim.thread.version {
                Some(ReplaceReason::ThreadReconfigured)
            } else {
                None
            }
        });
        // The deadline and any per-turn budget ceiling stop the turn one
        // way, through its cancel; the first to fire names its end.
        let stop = Stop::new(self.store.clone(), turn_id.clone());
        let ceiling =
            super::budgets::TurnCeiling::covering(&self.budgets(), &claim.thread, stop.clone());
        let hooks = Arc::new(
            StoreHooks::new(
                self.store.clone(),
                turn_id.clone(),
                &claim.thread,
                self.broker.clone(),
                dispatched,
                guard.boundary(),
                fingerprint,
                super::evidence::Evidence::new(
                    &self.store.options().home,
                    &claim.workspace.id,
                    PathBuf::from(&claim.workspace.path),
                ),
            )
            .with_ceiling(ceiling),
        );
        let mut limits = self.config.limits;
        // A metadata-only thread keeps no agent stderr, not even redacted.
        limits.stderr.keep = prepared.retention == crate::domain::Retention::Full;
        limits.setup_timeout = Duration::from_secs(spec.session.handshake_seconds);
        // A request waits the thread's own `permissionTimeoutSeconds`, else
        // the provider's, never past the turn's own deadline.
        let turn_seconds = claim
            .turn
            .max_turn_seconds
            .unwrap_or(spec.session.max_turn_seconds);
        let wait = claim
            .thread
            .permission_timeout_seconds
            .unwrap_or(spec.session.permission_timeout_seconds);
        limits.permission_timeout = Duration::from_secs(wait.min(turn_seconds));
        let generation = self.secrets_generation.load(Ordering::SeqCst);
        let agent = self.live_agent(&thread_id, bound.as_ref(), replace).await;
        // A thread with tools: a new agent session gets a fresh ticket in
        // its bridge's environment; a kept one has its own. The session's
        // calls are this turn's while `_active` lives.
        let mut mcp = mcp;
        let (ticket, session) = match self.ticket_for(&claim.thread, agent.as_ref(), &mut mcp) {
            Ok(t) => t,
            Err(e) => {
                tracing::error!(turn = %turn_id, error = %e, "cannot issue a tool ticket");
                guard.boundary_later();
                let refusal = acp::mcp::LaunchRefusal::Tools(
                    lapis_protocol::tools::ToolRefusal::Unavailable {
                        endpoint: claim.thread.tools.first().cloned().unwrap_or_default(),
                    },
                );
                self.refuse_mcp(&turn_id, &refusal).await;
                return;
            }
        };
        let _active = session.map(|s| self.config.tools.active.begin(s, &thread_id, &turn_id));
        if agent.is_none() {
            // A cold start: the boundary is far off, so the batch that
            // answered the claim (maybe holding the turn's submit) commits
            // now instead of waiting for it.
            guard.boundary_later();
        }
        if let (Some(reason), Some(b)) = (replace, &bound) {
            tracing::info!(thread = %thread_id, reason = reason.as_str(), "agent session replaced");
            let replaced = Note::SessionReplaced(SessionReplaced {
                reason,
                previous_session_id: b.session_id.clone(),
            });
            let _ = hooks.event(replaced.into()).await;
        }
        let resume = match (&agent, replace) {
            (None, None) => bound.map(|b| b.session_id),
            _ => None,
        };
        let request = TurnRequest {
            workspace: PathBuf::from(&claim.workspace.path),
            prompt: claim.prompt,
            approval: prepared.approval.effective,
            restricted: prepared.restricted,
            limits,
            lookup: self.lookup(),
            registry: Some(self.registry.clone()),
            resume,
            keep_alive: spec.session.idle_seconds > 0,
            continuation: claim.context.map(|text| acp::PromptContext {
                uri: format!(
                    "lapis://continuation/{}",
                    claim.turn.continues.as_deref().unwrap_or_default()
                ),
                text,
            }),
            context,
            mcp,
            spec: spec.clone(),
        };
        let cancel = claim.cancel.clone();
        let limit = claim
            .turn
            .max_turn_seconds
            .unwrap_or(spec.session.max_turn_seconds);
        let deadline = Deadline::arm(stop.clone(), limit);
        let mut run = run_turn_on(
            request,
            agent,
            ticket,
            hooks.clone(),
            CancelSignal::from(claim.cancel),
        )
        .await;
        if !hooks.dispatched.load(Ordering::SeqCst) {
            // Ended before its boundary (cancelled, refused): the batch
            // that claimed it need not wait for one (a no-op after a
            // cold start's notice).
            guard.boundary_later();
        }
        let mut end = turn_end(&run.outcome, *cancel.borrow());
        deadline.disarm();
        if let Some(reason) = stop.reason() {
            end = stopped_end(end, reason);
        }
        // What the turn used is on its row before its end is told to
        // anyone, so a budget checked at the next claim counts it.
        if (run.context_usage.is_some() || run.tokens.is_some())
            && let Err(err) = self
                .store
                .record_usage(&turn_id, run.context_usage.take(), run.tokens.take())
                .await
        {
            tracing::error!(turn = %turn_id, code = err.code(), "recording the turn's usage failed");
        }
        // Text held back for redaction is queued before the turn's end.
        // Output the store refused or failed to write (disk full, …) makes
        // the store end the turn `journal_write_failed` instead (unknown
        // past the boundary, failed before it): the finish runs after every
        // append queued before it and commits with them, so it is not held
        // back waiting for their answers.
        if let Err(e) = hooks.flush_held().await {
            tracing::error!(turn = %turn_id, code = %e.0, "held text was not journaled");
            end = if hooks.dispatched.load(Ordering::SeqCst) {
                TurnEnd::Unknown(OutcomeCode::JournalWriteFailed)
            } else {
                TurnEnd::Failed(OutcomeCode::JournalWriteFailed)
            };
        }
        // The outcome's snapshot, queued before the end while the turn
        // still holds its workspace (see `evidence`).
        if hooks.dispatched.load(Ordering::SeqCst)
            && let Some(snapshot) = hooks.evidence.at_outcome().await
        {
            let pending = self.store.append_activity(&turn_id, snapshot);
            hooks.unconfirmed_push(pending);
        }
        // A kept agent goes back to the pool before the outcome is recorded:
        // the outcome's commit releases the workspace, and the thread's next
        // turn, claimed as soon as it is released, must find its agent idle
        // rather than start another. Nothing can take it earlier: the
        // workspace's lease (one turn at a time) is held until that commit.
        let idle = Duration::from_secs(spec.session.idle_seconds);
        let teardown = match run.after {
            AfterTurn::Keep(agent)
                if generation != self.secrets_generation.load(Ordering::SeqCst) =>
            {
                tracing::info!(thread = %thread_id, "agent not kept: agent secrets were reloaded during its turn");
                self.pool.retire(*agent);
                self.pool.checkin(&thread_id, None, &turn_id, idle);
                None
            }
            AfterTurn::Keep(agent) => {
                self.pool.checkin(&thread_id, Some(*agent), &turn_id, idle);
                None
            }
            AfterTurn::Teardown(teardown) => Some(teardown),
            AfterTurn::Gone => {
                self.pool.checkin(&thread_id, None, &turn_id, idle);
                None
            }
        };
        // Release first, then report: the slot is free before the end's
        // event can reach a subscriber (see `claim`).
        guard.release();
        let fenced = self.finish(&turn_id, end).await;
        if fenced {
            // The store recorded an unknown outcome (its journal refused
            // the turn's output): that agent is never reused.
            self.pool.discard(&thread_id);
        }
        let _ = hooks.confirm_streamed().await;
        settled.store(true, Ordering::SeqCst);
        drop(guard);
        if let Some(teardown) = teardown {
            teardown.run().await;
            self.pool.checkin(&thread_id, None, &turn_id, idle);
        }
    }
}
