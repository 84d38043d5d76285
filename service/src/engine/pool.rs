//! The live-agent pool: the agent process of each thread, kept between
//! turns so every prompt of a thread goes to the same native session.
//!
//! Bounds: at most `max_live` agent processes exist at once, counting those
//! running a turn (`busy`) and those waiting idle for their thread's next
//! turn. Making room evicts idle agents least recently used first; an idle
//! agent is also stopped once its provider's `idleSeconds` pass. A running
//! turn is never blocked by the pool: when every agent is busy the new one
//! still starts, and the surplus is retired as turns end.
//!
//! Teardown of a retired agent runs on its own task, never on a turn's
//! critical path; shutdown waits for those tasks within the grace.
//!
//! An idle agent is watched ([`LiveAgent::watch`]): a request it sends
//! while no turn runs is refused at once and every message it sends is
//! journaled at once on the turn it last ran, never left for its next use.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;

use serde_json::Value;

use crate::acp::{LiveAgent, TeardownLimits, Watched};

/// Journals what an idle agent sent, on the turn it last ran.
pub(crate) type IdleJournal = Arc<dyn Fn(&str, Value) + Send + Sync>;

/// An agent waiting for its thread's next turn.
#[derive(Debug)]
struct Idle {
    /// The agent, under watch.
    agent: Watched,
    /// The last turn it ran (late output it sent is journaled there).
    last_turn: String,
    /// LRU order: larger is more recent.
    used: u64,
    /// When it is stopped if still idle.
    expires: Instant,
}

/// A checked-out agent: its last turn travels with it.
#[derive(Debug)]
pub(super) struct Checkout {
    /// The agent, still under watch until resumed.
    pub(crate) agent: Watched,
    /// The turn it last ran.
    pub(crate) last_turn: String,
}

#[derive(Debug, Default)]
struct Inner {
    /// Idle agents by thread id.
    idle: HashMap<String, Idle>,
    /// Agents running a turn (or about to start one).
    busy: usize,
    /// LRU clock.
    tick: u64,
}

/// Counters for `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolStatus {
    /// Agent processes alive (busy + idle).
    pub live: usize,
    /// Of those, idle ones.
    pub idle: usize,
    /// `server.maxLiveAgents`.
    pub(crate) max_live: usize,
}

/// Cheap to clone; all clones share one pool.
#[derive(Clone)]
pub(super) struct AgentPool {
    /// The agents.
    inner: Arc<Mutex<Inner>>,
    /// Teardowns in progress.
    teardowns: Arc<Mutex<JoinSet<()>>>,
    /// `server.maxLiveAgents`.
    max_live: usize,
    /// Teardown waits for retired agents.
    limits: TeardownLimits,
    /// Where idle agents' messages go.
    journal: IdleJournal,
}

impl std::fmt::Debug for AgentPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentPool")
            .field("max_live", &self.max_live)
            .finish_non_exhaustive()
    }
}

impl AgentPool {
    pub(super) fn new(max_live: usize, limits: TeardownLimits, journal: IdleJournal) -> AgentPool {
        AgentPool {
            inner: Arc::default(),
            teardowns: Arc::default(),
            max_live: max_live.max(1),
            limits,
            journal,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes the thread's idle agent, if any, and counts a busy agent for
    /// the turn about to run. Without one, room is made for the agent the
    /// turn will start: idle agents are evicted, least recently used first.
    pub(super) fn checkout(&self, thread: &str) -> Option<Checkout> {
        let mut retired = Vec::new();
        let found = {
            let mut inner = self.lock();
            inner.busy += 1;
            let found = inner.idle.remove(thread);
            if found.is_none() {
                while inner.idle.len() + inner.busy > self.max_live {
                    let Some(oldest) = inner
                        .idle
                        .iter()
                        .min_by_key(|(_, i)| i.used)
                        .map(|(k, _)| k.clone())
                    else {
                        break;
                    };
                    if let Some(i) = inner.idle.remove(&oldest) {
                        retired.push((oldest, i.agent));
                    }
                }
            }
            found
        };
        for (thread, agent) in retired {
            tracing::info!(thread = %thread, "idle agent evicted (least recently used) to make room");
            self.retire_watched(agent);
        }
        found.map(|i| Checkout {
            agent: i.agent,
            last_turn: i.last_turn,
        })
    }

    /// Ends a turn's use of the pool. A reusable agent is kept for the
    /// thread when its provider keeps agents (`idle` > 0) and the bound
    /// allows; otherwise it is retired.
    pub(super) fn checkin(
        &self,
        thread: &str,
        agent: Option<LiveAgent>,
        last_turn: &str,
        idle: Duration,
    ) {
        let rejected = {
            let mut inner = self.lock();
            inner.busy = inner.busy.saturating_sub(1);
            match agent {
                Some(agent) if !idle.is_zero() && inner.idle.len() + inner.busy < self.max_live => {
                    inner.tick += 1;
                    let used = inner.tick;
                    let (journal, turn) = (Arc::clone(&self.journal), last_turn.to_owned());
                    let agent = agent.watch(Arc::new(move |msg| journal(&turn, msg)));
                    let previous = inner.idle.insert(
                        thread.to_owned(),
                        Idle {
                            agent,
                            last_turn: last_turn.to_owned(),
                            used,
                            expires: Instant::now() + idle,
                        },
                    );
                    if let Some(p) = previous {
                        self.retire_watched(p.agent);
                    }
                    None
                }
                other => other,
            }
        };
        if let Some(agent) = rejected {
            self.retire(agent);
        }
    }

    /// Stops idle agents whose idle time is over.
    pub(super) fn evict_expired(&self) {
        let now = Instant::now();
        let expired: Vec<(String, Idle)> = {
            let mut inner = self.lock();
            let keys: Vec<String> = inner
                .idle
                .iter()
                .filter(|(_, i)| i.expires <= now)
                .map(|(k, _)| k.clone())
                .collect();
            keys.into_iter()
                .filter_map(|k| inner.idle.remove(&k).map(|i| (k, i)))
                .collect()
        };
        for (thread, i) in expired {
            tracing::info!(thread = %thread, "idle agent stopped (idleSeconds passed)");
            self.retire_watched(i.agent);
        }
    }

    /// Retires every idle agent (their environment is out of date: the
    /// agent secrets were reloaded). Their threads resume at the next turn.
    pub(super) fn retire_idle(&self) {
        let idle: Vec<(String, Idle)> = self.lock().idle.drain().collect();
        for (thread, i) in idle {
            tracing::info!(thread = %thread, "idle agent stopped (agent secrets reloaded)");
            self.retire_watched(i.agent);
        }
    }

    /// Tears an agent down on its own task.
    pub(super) fn retire(&self, agent: LiveAgent) {
        let limits = self.limits;
        let mut tasks = self.teardowns.lock().unwrap_or_else(|p| p.into_inner());
        while tasks.try_join_next().is_some() {}
        tasks.spawn(async move {
            agent.shutdown(limits).await;
        });
    }

    /// Ends an idle agent's watch and tears it down, on its own task.
    pub(super) fn retire_watched(&self, agent: Watched) {
        let limits = self.limits;
        let mut tasks = self.teardowns.lock().unwrap_or_else(|p| p.into_inner());
        while tasks.try_join_next().is_some() {}
        tasks.spawn(async move {
            if let Some(agent) = agent.resume().await {
                agent.shutdown(limits).await;
            }
        });
    }

    /// Retires the thread's idle agent, if any (its last turn's outcome
    /// was lost, so it is never reused).
    pub(super) fn discard(&self, thread: &str) {
        let idle = self.lock().idle.remove(thread);
        if let Some(i) = idle {
            self.retire_watched(i.agent);
        }
    }

    /// Stops expired idle agents every quarter second until `stop` flips.
    pub(super) async fn reap_idle(self, mut stop: tokio::sync::watch::Receiver<bool>) {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(250)) => self.evict_expired(),
                _ = stop.changed() => return,
            }
        }
    }

    /// Live and idle counts.
    pub(super) fn status(&self) -> PoolStatus {
        let inner = self.lock();
        PoolStatus {
            live: inner.idle.len() + inner.busy,
            idle: inner.idle.len(),
            max_live: self.max_live,
        }
    }

    /// Retires every idle agent and waits for all teardowns until
    /// `deadline`; what is left is aborted (its group killed on drop).
    pub(super) async fn shutdown(&self, deadline: Instant) {
        let idle: Vec<Idle> = self.lock().idle.drain().map(|(_, i)| i).collect();
        for i in idle {
            self.retire_watched(i.agent);
        }
        let mut tasks =
            std::mem::take(&mut *self.teardowns.lock().unwrap_or_else(|p| p.into_inner()));
        while !tasks.is_empty() {
            match tokio::time::timeout_at(deadline, tasks.join_next()).await {
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
    }
}
