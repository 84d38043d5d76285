//! The background driver of history retention (`history` in the config;
//! the store's side is `store::retention`).
//!
//! One task: once the journal's history check passed at start, and then
//! every `intervalMinutes`, a *pass* reads the candidate threads (a read
//! connection, never the writer), and for each over a limit runs bounded
//! batches on the writer, each one short transaction, yielding between
//! them, so turns interleave. A pass's figures are kept for `status`
//! ([`Retention::status`]); what it changed is in the journal
//! (`history_pruned` receipts, `thread_deleted` for a thread deleted
//! whole). The policy is read at start (a reload does not change it).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lapis_protocol::config::{Config, HistoryConfig};
use lapis_protocol::{HistoryPass, HistoryStatus};

use crate::domain::{Clock, StoreResult};
use crate::store::Store;
use crate::store::retention::{Batch, Limits};

const DAY_MS: i64 = 24 * 3600 * 1000;

/// The policy and the last pass, shared with `status`.
#[derive(Debug, Clone)]
pub struct Retention {
    /// The global section.
    global: Option<HistoryConfig>,
    /// Declared workspaces' effective sections.
    workspaces: BTreeMap<String, HistoryConfig>,
    /// The last finished pass.
    last: Arc<Mutex<Option<HistoryPass>>>,
}

impl Retention {
    /// The policy of `config`, or `None` when nothing is limited.
    pub(crate) fn of(config: &Config) -> Option<Retention> {
        let workspaces = config.history_policies();
        let any = config
            .history
            .as_ref()
            .is_some_and(HistoryConfig::limits_anything)
            || workspaces.values().any(HistoryConfig::limits_anything);
        any.then(|| Retention {
            global: config.history.clone(),
            workspaces,
            last: Arc::default(),
        })
    }

    /// A policy of one global section (tests; `serve` uses [`Retention::of`]).
    pub fn new(global: HistoryConfig) -> Retention {
        Retention {
            global: Some(global),
            workspaces: BTreeMap::new(),
            last: Arc::default(),
        }
    }

    /// `status.history`.
    pub fn status(&self) -> HistoryStatus {
        HistoryStatus {
            policy: self.global.clone(),
            workspaces: self.workspaces.clone(),
            last_pass: self.last.lock().unwrap_or_else(|p| p.into_inner()).clone(),
        }
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

    /// Starts the task (it ends with the runtime).
    pub fn spawn(&self, store: Store) {
        let me = self.clone();
        let clock = store.options().clock.clone();
        let every = Duration::from_secs(
            60 * self.global.as_ref().map_or(
                lapis_protocol::config::DEFAULT_HISTORY_INTERVAL_MINUTES,
                HistoryConfig::interval,
            ),
        );
        tokio::spawn(async move {
            if store.history_verified().await.is_err() {
                return;
            }
            loop {
                let pass = me.pass(&store, clock.as_ref()).await;
                tracing::info!(
                    events = pass.events,
                    threads = pass.threads,
                    deleted = pass.threads_deleted,
                    busy = pass.skipped_busy,
                    batches = pass.batches,
                    error = pass.error.as_deref().unwrap_or(""),
                    "history retention pass"
                );
                *me.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(pass);
                tokio::time::sleep(every).await;
            }
        });
    }

    /// One pass (see the module docs); an error ends it early, named.
    async fn pass(&self, store: &Store, clock: &dyn Clock) -> HistoryPass {
        let started = clock.now_ms();
        let mut pass = HistoryPass {
            started_at: started,
            ..Default::default()
        };
        if let Err(e) = self.run(store, started + skew(), &mut pass).await {
            pass.error = Some(e.code().to_owned());
        }
        pass.finished_at = clock.now_ms();
        pass
    }

    async fn run(&self, store: &Store, now: i64, pass: &mut HistoryPass) -> StoreResult<()> {
        for mut c in store.history_candidates().await? {
            let limits = self.limits(&c.workspace, now);
            if !limits.visits(&c) {
                continue;
            }
            let mut touched = false;
            loop {
                match store.prune_batch(&c, limits, pass.started_at).await? {
                    Batch::Pruned { events, bytes, .. } => {
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
        }
        if pass.batches > 0 {
            store.history_compact().await?;
        }
        Ok(())
    }
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
