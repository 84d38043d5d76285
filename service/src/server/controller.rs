//! The controller core as the server sees it: the store, the provider names
//! threads may use, and the engine that answers permission requests.

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::acp::PermissionAnswer;
use crate::engine::Engine;
use crate::store::Store;
use lapis_protocol::{ErrorCode, RpcError};

/// Answers an agent's pending permission request (implemented by the engine
/// that runs turns).
pub trait PermissionResponder: Send + Sync + std::fmt::Debug {
    /// Delivers `option_id` to request `request_id` of turn `turn_id`.
    /// Refuses option ids the agent did not offer.
    fn respond<'a>(
        &'a self,
        turn_id: &'a str,
        request_id: &'a str,
        option_id: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<(), RpcError>> + Send + 'a>>;
}

/// What the handlers need besides the authority.
#[derive(Debug, Clone)]
pub struct Core {
    /// The durable store (cheap to clone).
    pub store: Store,
    /// Provider names a thread may name (`echo` plus the configured ones).
    pub providers: BTreeSet<String>,
    /// The engine's permission channel; without an engine no request is ever
    /// pending.
    pub permissions: Option<Arc<dyn PermissionResponder>>,
}

impl PermissionResponder for Engine {
    fn respond<'a>(
        &'a self,
        turn_id: &'a str,
        request_id: &'a str,
        option_id: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<(), RpcError>> + Send + 'a>> {
        Box::pin(async move {
            let answer = PermissionAnswer::Selected {
                option_id: option_id.to_owned(),
            };
            self.respond_permission(turn_id, request_id, answer)
                .await
                .map_err(|e| match ErrorCode::parse(e.code()) {
                    Some(ErrorCode::Internal) | None => super::dispatch::internal(e),
                    Some(code) => RpcError::new(code, e.to_string()),
                })
        })
    }
}
