//! The controller core as the server sees it: the store, the provider names
//! threads may use, and the engine that answers permission requests.

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, RwLock};

use crate::acp::PermissionAnswer;
use crate::engine::{Engine, PendingPermission, Taken};
use crate::store::Store;
use lapis_protocol::{ErrorCode, RpcError};

/// Answers an agent's pending permission request (implemented by the engine
/// that runs turns).
pub(crate) trait PermissionResponder: Send + Sync + std::fmt::Debug {
    /// Checks `option_id` for request `request_id` of turn `turn_id` and
    /// reserves the request for it; [`Taken::deliver`] hands it to the
    /// agent. Refuses option ids the agent did not offer.
    fn take<'a>(
        &'a self,
        turn_id: &'a str,
        request_id: &'a str,
        option_id: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<Taken, RpcError>> + Send + 'a>>;

    /// Requests waiting for an answer, optionally of one turn. Callers
    /// filter by ownership before showing any.
    fn pending(&self, turn_id: Option<&str>) -> Vec<PendingPermission>;
}

/// What the handlers need besides the authority.
#[derive(Debug, Clone)]
pub(crate) struct Core {
    /// The durable store (cheap to clone).
    pub(crate) store: Store,
    /// Provider names a thread may name (`echo` plus the configured ones);
    /// a config reload replaces them.
    pub(crate) providers: ProviderNames,
    /// The engine's permission channel; without an engine no request is ever
    /// pending.
    pub(crate) permissions: Option<Arc<dyn PermissionResponder>>,
    /// The engine, for its live-agent and running-turn counters.
    pub(crate) engine: Option<Arc<Engine>>,
    /// Application MCP servers (the engine's registry when there is one).
    pub(crate) mcp: crate::engine::McpRegistry,
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

impl PermissionResponder for Engine {
    fn take<'a>(
        &'a self,
        turn_id: &'a str,
        request_id: &'a str,
        option_id: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<Taken, RpcError>> + Send + 'a>> {
        Box::pin(async move {
            let answer = PermissionAnswer::Selected {
                option_id: option_id.to_owned(),
            };
            self.take_permission(turn_id, request_id, answer)
                .await
                .map_err(|e| match ErrorCode::parse(e.code()) {
                    Some(ErrorCode::Internal) | None => super::failure::internal(e),
                    Some(code) => RpcError::new(code, e.to_string()),
                })
        })
    }

    fn pending(&self, turn_id: Option<&str>) -> Vec<PendingPermission> {
        self.pending_permissions(turn_id)
    }
}

impl Core {
    /// Pending requests, optionally of one turn (none without an engine).
    pub(crate) fn pending_permissions(&self, turn_id: Option<&str>) -> Vec<PendingPermission> {
        self.permissions
            .as_ref()
            .map(|p| p.pending(turn_id))
            .unwrap_or_default()
    }
}
