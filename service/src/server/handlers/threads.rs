//! Threads.

use crate::auth::AuthSession;
use crate::domain::{ApprovalPolicy, NewThread, Retention, ThreadPatch};
use crate::store::ThreadFilter;
use lapis_protocol::params::{ThreadResult, ThreadsResult};
use lapis_protocol::{ErrorCode, RpcError, ThreadSnapshot, params};

use super::super::context::ServerContext;
use super::{actor, owned_thread, store_err, visible_thread};

fn provider(ctx: &ServerContext, name: &str) -> Result<(), RpcError> {
    if ctx.core.providers.contains(name) {
        Ok(())
    } else {
        Err(RpcError::new(
            ErrorCode::NotFound,
            format!("no such provider `{name}` in the configuration"),
        ))
    }
}

/// `threads.create`: stamped with the session's principal and application.
pub(crate) async fn threads_create(
    ctx: &ServerContext,
    session: &AuthSession,
    p: params::ThreadsCreate,
) -> Result<ThreadResult, RpcError> {
    super::check_grants(ctx, session, Some(&p.workspace_id), Some(&p.provider))?;
    provider(ctx, &p.provider)?;
    super::mcp::check_create(ctx, session, &p.provider, p.restricted, &p.mcp_servers)?;
    let retention = p.retention.unwrap_or(Retention::Full);
    let mut ports = p.ports;
    // The identities are the controller's to record, never the client's.
    ports.identities = super::tools::check_ports(ctx, session, p.restricted, retention, &ports)?;
    let input = NewThread {
        command_id: p.command_id,
        workspace_id: p.workspace_id,
        provider: p.provider,
        approval: p.approval.unwrap_or(ApprovalPolicy::Ask),
        restricted: p.restricted,
        retention,
        mcp_servers: p.mcp_servers,
        ports,
        permission_timeout_seconds: p.permission_timeout_seconds,
        budget: p.budget,
        thread_id: p.thread_id,
    };
    let receipt = ctx
        .core
        .store
        .create_thread(&actor(session), input)
        .await
        .map_err(store_err)?;
    Ok(ThreadResult {
        thread: receipt.value,
        replayed: receipt.replayed,
    })
}

/// `threads.reserve`: a thread id for this application, before its thread.
pub(crate) async fn threads_reserve(
    ctx: &ServerContext,
    session: &AuthSession,
    p: params::ThreadsReserve,
) -> Result<params::ThreadReserved, RpcError> {
    let receipt = ctx
        .core
        .store
        .reserve_thread(&actor(session), &p.command_id)
        .await
        .map_err(store_err)?;
    Ok(params::ThreadReserved {
        thread_id: receipt.value,
        replayed: receipt.replayed,
    })
}

/// `threads.get`: the thread, its recent turns and a bounded event tail.
pub(crate) async fn threads_get(
    ctx: &ServerContext,
    session: &AuthSession,
    p: params::ThreadRef,
) -> Result<ThreadSnapshot, RpcError> {
    visible_thread(ctx, session, &p.thread_id).await?;
    let mut snapshot = ctx
        .core
        .store
        .thread_snapshot(&p.thread_id)
        .await
        .map_err(store_err)?;
    super::permissions::mark_snapshot(ctx, &mut snapshot);
    super::fit::snapshot(&mut snapshot, ctx.limits.max_frame_bytes);
    Ok(snapshot)
}

/// `threads.attach`: the thread snapshot when the thread still has the
/// binding the caller states, else `binding_mismatch` naming the fields.
pub(crate) async fn threads_attach(
    ctx: &ServerContext,
    session: &AuthSession,
    p: params::ThreadsAttach,
) -> Result<ThreadSnapshot, RpcError> {
    let thread = owned_thread(ctx, session, &p.thread_id).await?;
    super::tools::check_restricted(thread.restricted, &thread.ports)?;
    let mut fields = p.expect.mismatches(&thread);
    // A port registered now under another identity than the thread
    // recorded is another port behind the same name.
    let owner = crate::tools::registry::PortOwner::thread(&thread);
    for changed in ctx.core.tools.registry.changed(owner, &thread.ports) {
        if !fields.contains(&changed) {
            fields.push(changed);
        }
    }
    if !fields.is_empty() {
        return Err(store_err(crate::domain::StoreError::BindingMismatch {
            fields,
        }));
    }
    threads_get(
        ctx,
        session,
        params::ThreadRef {
            thread_id: p.thread_id,
        },
    )
    .await
}

/// `threads.list`: the threads the session sees (its application's, or
/// every application's of its principal for the owner's token), inside its
/// token's grants, one page at a time (`limit`, `after`).
///
/// `next` is the key of the page's last row in the store's order, taken
/// before the grant filter: a page the grants thin (or empty) still
/// continues where it stopped.
pub(crate) async fn threads_list(
    ctx: &ServerContext,
    session: &AuthSession,
    p: params::ThreadsList,
) -> Result<ThreadsResult, RpcError> {
    let after = p.after.as_deref().map(cursor::decode).transpose()?;
    let filter = ThreadFilter {
        principal: Some(session.principal.clone()),
        application: super::reach(ctx, session),
        workspace_id: p.workspace_id,
        limit: p.limit.unwrap_or(0),
        after,
    };
    let (list, next) = ctx
        .core
        .store
        .list_threads_page(filter)
        .await
        .map_err(store_err)?;
    let spec = ctx.authority.spec_of(session);
    let threads = list
        .into_iter()
        .filter(|t| {
            spec.as_ref().is_some_and(|s| {
                s.allows_workspace(&t.workspace_id) && s.allows_provider(&t.provider)
            })
        })
        .collect();
    Ok(ThreadsResult {
        threads,
        next: next.as_ref().map(cursor::encode),
    })
}

/// `threads.list`'s cursor: opaque to callers, `c1.<created_at>.<id>`.
mod cursor {
    use lapis_protocol::RpcError;

    use crate::store::ThreadKey;

    const PREFIX: &str = "c1.";

    pub(super) fn encode(k: &ThreadKey) -> String {
        format!("{PREFIX}{}.{}", k.created_at, k.id)
    }

    pub(super) fn decode(s: &str) -> Result<ThreadKey, RpcError> {
        let bad = || RpcError::invalid_params("`after` is not a cursor `threads.list` returned");
        let (at, id) = s
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split_once('.'))
            .ok_or_else(bad)?;
        let created_at = at.parse::<i64>().map_err(|_| bad())?;
        if id.is_empty() || id.len() > 128 {
            return Err(bad());
        }
        Ok(ThreadKey {
            created_at,
            id: id.to_owned(),
        })
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn a_cursor_reads_back_and_anything_else_is_refused() {
            let k = ThreadKey {
                created_at: 1_765_000_000_123,
                id: "thr_9a1f".into(),
            };
            assert_eq!(decode(&encode(&k)).unwrap(), k);
            for s in ["", "c1.", "c1.x.thr", "c1.12.", "c2.12.thr", "12.thr"] {
                assert!(decode(s).is_err(), "{s}");
            }
        }
    }
}

/// `threads.configure`: optimistic on the version; refused while a turn is active.
pub(crate) async fn threads_configure(
    ctx: &ServerContext,
    session: &AuthSession,
    mut p: params::ThreadsConfigure,
) -> Result<ThreadResult, RpcError> {
    let thread = owned_thread(ctx, session, &p.thread_id).await?;
    if let Some(name) = &p.provider {
        super::check_grants(ctx, session, None, Some(name))?;
        provider(ctx, name)?;
    }
    let provider_name = p.provider.as_deref().unwrap_or(&thread.provider);
    let restricted = p.restricted.unwrap_or(thread.restricted);
    super::mcp::check_restricted(ctx, provider_name, restricted, &thread.mcp_servers)?;
    super::tools::check_restricted(restricted, &thread.ports)?;
    // The store the thread binds after the call, under the retention it
    // has after the call; a newly named one must be registered now.
    let retention = p.retention.unwrap_or(thread.retention);
    match &p.ports.transcript_store {
        Some(named) => {
            // The identities are the controller's to record (as at create).
            p.ports.transcript_store_identity =
                super::tools::check_transcript_store(ctx, session, retention, named.as_deref())?;
        }
        None if thread.ports.transcript_store.is_some() && retention != Retention::MetadataOnly => {
            return Err(RpcError::new(
                ErrorCode::InvalidRequest,
                "the thread binds a transcript store: unbind it (`transcriptStore: null`) \
                 in the same call to make its retention `full`",
            ));
        }
        None => {}
    }
    let patch = ThreadPatch {
        provider: p.provider,
        approval: p.approval,
        restricted: p.restricted,
        retention: p.retention,
        permission_timeout_seconds: p.permission_timeout_seconds,
        budget: p.budget,
        ports: p.ports,
    };
    let receipt = ctx
        .core
        .store
        .configure_thread(
            &actor(session),
            &p.thread_id,
            p.expected_version,
            patch,
            p.command_id.as_deref(),
        )
        .await
        .map_err(store_err)?;
    Ok(ThreadResult {
        thread: receipt.value,
        replayed: receipt.replayed,
    })
}
