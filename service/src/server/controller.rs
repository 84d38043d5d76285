//! The controller core as the server sees it: the store, the provider names
//! threads may use, and the engine that runs turns (and answers their
//! permission requests).

use std::collections::BTreeSet;
use std::sync::{Arc, RwLock};

use crate::engine::{Engine, PendingPermission};
use crate::store::Store;

/// What the handlers need besides the authority.
#[derive(Debug, Clone)]
pub(crate) struct Core {
    /// The durable store (cheap to clone).
    pub(crate) store: Store,
    /// Provider names a thread may name (`echo` plus the configured ones);
    /// a config reload replaces them.
    pub(crate) providers: ProviderNames,
    /// The engine that runs turns: its permission requests, live agents
    /// and running-turn counters. Without an engine (store-only tests) no
    /// request is ever pending.
    pub(crate) engine: Option<Arc<Engine>>,
    /// Application MCP servers (the engine's registry when there is one).
    pub(crate) mcp: crate::engine::McpRegistry,
    /// Application tool endpoints and bridge tickets (the engine's when
    /// there is one).
    pub(crate) tools: crate::tools::Tools,
    /// Who is watching what (present subscriptions); the notifier reads it.
    pub(crate) presence: crate::presence::Presence,
}

/// The provider names threads may use, shared by every connection and
/// replaced as a whole by a config reload.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProviderNames(Arc<RwLock<BTreeSet<String>>>);

impl ProviderNames {
    /// These names.
    pub(crate) fn new(names: BTreeSet<String>) -> ProviderNames {
        ProviderNames(Arc::new(RwLock::new(names)))
    }

    /// Whether `name` is one of them.
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.0
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .contains(name)
    }

    /// The names, sorted.
    pub(crate) fn list(&self) -> Vec<String> {
        let names = self.0.read().unwrap_or_else(|p| p.into_inner());
        names.iter().cloned().collect()
    }

    /// Replaces every name at once.
    pub(crate) fn replace(&self, names: BTreeSet<String>) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = names;
    }
}

impl Core {
    /// Pending requests, optionally of one turn (none without an engine).
    pub(crate) fn pending_permissions(&self, turn_id: Option<&str>) -> Vec<PendingPermission> {
        self.engine
            .as_ref()
            .map(|e| e.pending_permissions(turn_id))
            .unwrap_or_default()
    }
}
