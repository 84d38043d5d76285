//! `threads.import` (see the store's `import`): the bundle is verified
//! and planned before anything is looked up or written.

use lapis_protocol::params::{ThreadImportedResult, ThreadsImport};
use lapis_protocol::{ErrorCode, RpcError};
use serde_json::json;

use crate::auth::AuthSession;
use crate::domain::StoreError;

use super::super::context::ServerContext;
use super::{actor, check_grants, store_err};

/// `threads.import`: a new thread of the session's principal and
/// application, on `workspaceId` (default: the registered workspace at
/// the bundle's path, else `workspace_required`) with `provider`
/// (default: the bundle's), both granted to the session's token; the
/// provider must be configured here.
pub(crate) async fn threads_import(
    ctx: &ServerContext,
    session: &AuthSession,
    p: ThreadsImport,
) -> Result<ThreadImportedResult, RpcError> {
    let mut plan = crate::store::plan_import(p.bundle.as_bytes()).map_err(refusal)?;
    if let Some(provider) = p.provider {
        plan.set_provider(provider).map_err(store_err)?;
    }
    let workspace = match p.workspace_id {
        Some(w) => w,
        None => {
            let found = match plan.workspace_path() {
                Some(path) => ctx.core.store.workspace_at(path).await.map_err(store_err)?,
                None => None,
            };
            found.ok_or_else(|| {
                refusal(crate::store::import_refused(
                    ErrorCode::WorkspaceRequired,
                    match plan.workspace_path() {
                        Some(_) => "no workspace registered here has the bundle's workspace path: pass --workspace ID (`workspaceId`)",
                        None => "the bundle names no workspace path: pass --workspace ID (`workspaceId`)",
                    },
                    json!({ "flag": "--workspace" }),
                ))
            })?
        }
    };
    let Some(provider) = plan.provider() else {
        return Err(RpcError::new(
            ErrorCode::InvalidRequest,
            "retention pruned the bundle's thread settings: pass --provider NAME (`provider`)",
        ));
    };
    check_grants(ctx, session, Some(&workspace), Some(provider))?;
    if !ctx.core.providers.contains(provider) {
        return Err(RpcError::new(
            ErrorCode::NotFound,
            format!("no such provider `{provider}` in the configuration: pass --provider NAME"),
        ));
    }
    let (receipt, thread, seq) = ctx
        .core
        .store
        .import_thread(&actor(session), &workspace, plan)
        .await
        .map_err(refusal)?;
    Ok(ThreadImportedResult {
        thread,
        receipt,
        seq,
    })
}

/// An import refusal with its code and `data`; anything else as usual.
fn refusal(e: StoreError) -> RpcError {
    match e {
        StoreError::ImportRefused { code, reason, data } => data
            .into_iter()
            .fold(RpcError::new(code, reason), |err, (k, v)| {
                err.with_data(&k, v)
            }),
        other => store_err(other),
    }
}
