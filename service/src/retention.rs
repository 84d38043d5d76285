//! The background driver of history retention (`history` in the config;
//! the store's side is `store::retention`).
//!
//! One task: once the journal's history check passed at start, then every
//! `intervalMinutes`, and at once after a config reload that changes the
//! policy, a *pass* brings the store's per-thread summary up to date (the
//! events appended since the last pass, in bounded writer steps), reads
//! the candidate threads a page at a time (a read connection, never the
//! writer), and for each over a limit runs bounded batches on the writer,
//! each one short transaction, yielding between them, so turns
//! interleave. A pass's figures are kept in the database for `status`
//! ([`Retention::status`]), so a restart still shows the last one; what it
//! changed is in the journal (`history_pruned` receipts, `thread_deleted`
//! for a thread deleted whole). A reload replaces the policy
//! ([`Retention::replace`]); a pass already running finishes under the
//! policy it started with.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lapis_protocol::config::{Config, HistoryConfig};
use lapis_protocol::{HistoryPass, HistoryStatus};

use crate::domain::{Clock, StoreResult};
use crate::store::Store;
use crate::store::retention::summary::PAGE_THREADS;
use crate::store::retention::{Batch, Limits};

const DAY_MS: i64 = 24 * 3600 * 1000;

/// The limits in effect.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Policy {
    /// The global section.
    global: Option<HistoryConfig>,
    /// Declared workspaces' effective sections.
    workspaces: BTreeMap<String, HistoryConfig>,
}

impl Policy {
    fn of(config: &Config) -> Policy {
        Policy {
            global: config.history.clone(),
            workspaces: config.history_policies(),
        }
    }

    fn limits_anything(&self) -> bool {
        self.global
            .as_ref()
            .is_some_and(HistoryConfig::limits_anything)
            || self.workspaces.values().any(HistoryConfig::limits_anything)
    }

    fn every(&self) -> Duration {
        Duration::from_secs(
            60 * self.global.as_ref().map_or(
                lapis_protocol::config::DEFAULT_HISTORY_INTERVAL_MINUTES,
                HistoryConfig::interval,
            ),
        )
    }

    fn limits(&self, workspace: &str, now: i64) -> Limits {
        let section = self.workspaces.get(workspace).or(self.global.as_ref());
        let Some(s) = section else {
            return Limits::default();
        };
        Limits {
            cutoff: s.max_age_days.map(|d| now - d as i64 * DAY_MS),
            max_events: s.max_events_per_thread,
            max_bytes: s.max_bytes_per_thread,
        }
    }
}

#[derive(Debug, Default)]
struct Shared {
    /// The policy in effect (a reload replaces it).
    policy: Mutex<Policy>,
    /// The last finished pass (read back from the store at start).
    last: Mutex<Option<HistoryPass>>,
    /// Wakes the task when the policy changed.
    wake: tokio::sync::Notify,
}

/// The policy and the last pass, shared with `status` and reloads.
#[derive(Debug, Clone, Default)]
pub struct Retention {
    shared: Arc<Shared>,
}

impl Retention {
    /// The policy of `config` (passes run while it limits anything).
    pub(crate) fn of(config: &Config) -> Retention {
        let me = Retention::default();
        *me.policy() = Policy::of(config);
        me
    }

    /// A policy of one global section (tests; `serve` uses [`Retention::of`]).
    pub fn new(global: HistoryConfig) -> Retention {
        let me = Retention::default();
        me.policy().global = Some(global);
        me
    }

    fn policy(&self) -> std::sync::MutexGuard<'_, Policy> {
        self.shared.policy.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn last(&self) -> std::sync::MutexGuard<'_, Option<HistoryPass>> {
        self.shared.last.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A config reload: `config`'s policy from now on; when it differs, a
    /// pass runs under it at once (returns whether it differed).
    pub(crate) fn replace(&self, config: &Config) -> bool {
        let new = Policy::of(config);
        let changed = {
            let mut policy = self.policy();
            let changed = *policy != new;
            *policy = new;
            changed
        };
        if changed {
            self.shared.wake.notify_one();
        }
        changed
    }

    /// `status.history`.
    pub fn status(&self) -> HistoryStatus {
        let policy = self.policy().clone();
        HistoryStatus {
            policy: policy.global,
            workspaces: policy.workspaces,
            last_pass: self.last().clone(),
        }
    }

    /// `status.history` when there is anything to say: a policy, or a
    /// pass kept from before.
    pub(crate) fn shown(&self) -> Option<HistoryStatus> {
        let s = self.status();
        let any = s.policy.is_some() || !s.workspaces.is_empty() || s.last_pass.is_some();
        any.then_some(s)
    }

    /// Starts the task (it ends with the runtime).
    pub fn spawn(&self, store: Store) {
        let me = self.clone();
        let clock = store.options().clock.clone();
        tokio::spawn(async move {
            if let Ok(Some(kept)) = store.history_last_pass().await {
                me.last().get_or_insert(kept);
            }
            if store.history_verified().await.is_err() {
                return;
            }
            loop {
                let policy = me.policy().clone();
                if policy.limits_anything() {
                    let pass = pass(&policy, &store, clock.as_ref()).await;
                    tracing::info!(
                        events = pass.events,
                        threads = pass.threads,
                        deleted = pass.threads_deleted,
                        busy = pass.skipped_busy,
                        batches = pass.batches,
                        candidates = pass.candidates,
                        scanned = pass.scanned,
                        error = pass.error.as_deref().unwrap_or(""),
                        "history retention pass"
                    );
                    if let Err(e) = store.history_save_pass(&pass).await {
                        tracing::warn!(code = e.code(), "history retention: the pass was not kept");
                    }
                    *me.last() = Some(pass);
                }
                tokio::select! {
                    () = tokio::time::sleep(policy.every()) => {}
                    () = me.shared.wake.notified() => {}
                }
            }
        });
    }
}

/// One pass (see the module docs); an error ends it early, named.
async fn pass(policy: &Policy, store: &Store, clock: &dyn Clock) -> HistoryPass {
    let started = clock.now_ms();
    let mut pass = HistoryPass {
        started_at: started,
        ..Default::default()
    };
    if let Err(e) = run(policy, store, started + skew(), &mut pass).await {
        pass.error = Some(e.code().to_owned());
    }
    pass.finished_at = clock.now_ms();
    pass
}

async fn run(policy: &Policy, store: &Store, now: i64, pass: &mut HistoryPass) -> StoreResult<()> {
    pass.scanned = store.history_refresh().await?;
    let mut after = None;
    loop {
        let page = store.history_candidates_page(after, PAGE_THREADS).await?;
        after = page.last().map(|c| c.thread.clone());
        pass.candidates += page.len() as u64;
        let last_page = page.len() < PAGE_THREADS;
        for c in page {
            visit(policy, store, now, c, pass).await?;
        }
        if last_page {
            break;
        }
    }
    if pass.batches > 0 {
        store.history_compact().await?;
    }
    Ok(())
}

async fn visit(
    policy: &Policy,
    store: &Store,
    now: i64,
    mut c: crate::store::retention::Candidate,
    pass: &mut HistoryPass,
) -> StoreResult<()> {
    let limits = policy.limits(&c.workspace, now);
    if !limits.visits(&c) {
        return Ok(());
    }
    let mut touched = false;
    loop {
        let (batch, steps) = store
            .prune_batch_counted(&c, limits, pass.started_at)
            .await?;
        pass.batch_vm_steps += steps.vm;
        pass.batch_full_scan_steps += steps.full_scan;
        match batch {
            Batch::Pruned {
                events,
                bytes,
                live_from,
                ..
            } => {
                c.live_from = live_from;
                pass.batches += 1;
                pass.events += events;
                pass.bytes += bytes;
                c.events = c.events.saturating_sub(events);
                c.bytes = c.bytes.saturating_sub(bytes);
                touched = true;
                // Whatever waits for the writer goes first.
                tokio::task::yield_now().await;
            }
            Batch::Deleted => {
                pass.batches += 1;
                pass.threads_deleted += 1;
                break;
            }
            Batch::Busy => {
                pass.skipped_busy += 1;
                break;
            }
            Batch::Nothing => break,
        }
    }
    pass.threads += u64::from(touched);
    Ok(())
}

/// Test hook (`test-support` builds only): `LAPIS_RETENTION_SKEW_DAYS=N`
/// runs passes as if N days later, so a test sees events age.
fn skew() -> i64 {
    #[cfg(feature = "test-support")]
    if let Some(days) = std::env::var("LAPIS_RETENTION_SKEW_DAYS")
        .ok()
        .and_then(|d| d.parse::<i64>().ok())
    {
        return days * DAY_MS;
    }
    0
}
