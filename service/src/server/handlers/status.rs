//! `status`: identity, uptime, the scheduler's counters, the turns in
//! flight and the fences with what blocks them, the pending permission
//! requests (count and oldest), live agents, the last config reload,
//! usage totals (from the turns' records), and per workspace what its
//! evidence snapshots cost.

use std::collections::HashMap;

use lapis_protocol::{
    PROTOCOL, RpcError, TurnState,
    params::{
        EngineCounters, InboxSummary, OldestRequest, QueueStatus, StatusResult, StatusTurn,
        UsageStatus, WorkCounts,
    },
};

use crate::acp::AgentRegistry;
use crate::store::{Store, TurnFilter};

use super::super::context::ServerContext;
use super::super::failure::internal;

/// Usage totals: overall, by workspace and by application (one read of
/// the turns' usage records each).
async fn usage_status(store: &Store) -> Result<UsageStatus, RpcError> {
    let workspaces = store
        .usage_by("workspace", None)
        .await
        .map_err(super::store_err)?;
    let applications = store
        .usage_by("application", None)
        .await
        .map_err(super::store_err)?;
    let mut total = lapis_protocol::usage::UsageTotals::default();
    for t in applications.values() {
        total.merge(t);
    }
    Ok(UsageStatus {
        total,
        workspaces,
        applications,
    })
}

/// Reads counters the core keeps in memory; the database (a read
/// connection, never the writer) only when turns are in flight or fenced,
/// to say which.
/// An application token's session gets only what concerns the threads it
/// sees ([`narrow_to`]); the owner's token the installation's view.
pub(crate) async fn status(
    ctx: &ServerContext,
    session: &crate::auth::AuthSession,
) -> Result<StatusResult, RpcError> {
    let mut result = installation(ctx).await?;
    if !ctx.authority.is_owner(session) {
        narrow_to(ctx, session, &mut result).await;
    }
    Ok(result)
}

/// Keeps in `result` only the turns, fences, unknown effects, oldest
/// request and usage of the threads and application `session` sees.
async fn narrow_to(
    ctx: &ServerContext,
    session: &crate::auth::AuthSession,
    result: &mut StatusResult,
) {
    result.running_turns =
        visible_turns(ctx, session, std::mem::take(&mut result.running_turns)).await;
    result.fences = visible_turns(ctx, session, std::mem::take(&mut result.fences)).await;
    let mut seen: HashMap<String, bool> = HashMap::new();
    let mut sees = async |thread: &str| -> bool {
        if let Some(v) = seen.get(thread) {
            return *v;
        }
        let v = super::visible_thread(ctx, session, thread).await.is_ok();
        seen.insert(thread.to_owned(), v);
        v
    };
    let store = &ctx.core.store;
    let mut keep = Vec::new();
    for e in std::mem::take(&mut result.unknown_tool_effects) {
        if let Ok(turn) = store.get_turn(&e.turn_id).await
            && sees(&turn.thread_id).await
        {
            keep.push(e);
        }
    }
    result.unknown_tool_effects = keep;
    if let Some(oldest) = result.permissions.oldest.take()
        && let Ok(turn) = store.get_turn(&oldest.turn_id).await
        && sees(&turn.thread_id).await
    {
        result.permissions.oldest = Some(oldest);
    }
    result
        .usage
        .applications
        .retain(|app, _| *app == session.application);
}

/// The turns of `turns` whose thread `session` sees.
pub(super) async fn visible_turns(
    ctx: &ServerContext,
    session: &crate::auth::AuthSession,
    turns: Vec<StatusTurn>,
) -> Vec<StatusTurn> {
    let mut seen: HashMap<String, bool> = HashMap::new();
    let mut keep = Vec::new();
    for t in turns {
        let v = match seen.get(&t.thread) {
            Some(v) => *v,
            None => {
                let v = super::visible_thread(ctx, session, &t.thread).await.is_ok();
                seen.insert(t.thread.clone(), v);
                v
            }
        };
        if v {
            keep.push(t);
        }
    }
    keep
}

async fn installation(ctx: &ServerContext) -> Result<StatusResult, RpcError> {
    let store = &ctx.core.store;
    // First, before this call's own reads (see `StatusResult::work`).
    let work = WorkCounts {
        store: store.counts(),
        processes: crate::children::counts(),
    };
    let s = store.status();
    let running_turns = if s.running_workspaces.is_empty() {
        Vec::new()
    } else {
        turns_in(
            store,
            &[
                TurnState::Preparing,
                TurnState::Dispatched,
                TurnState::Running,
            ],
        )
        .await?
    };
    let fences = fences(store, !s.fenced_workspaces.is_empty()).await?;
    // Served by the partial index on tool-call events: no scan of the journal.
    let unknown_tool_effects = store
        .unknown_tool_effects(None)
        .await
        .map_err(super::store_err)?;
    // Served by the inbox's partial index on pending rows.
    let inbox = store.inbox_status().await.map_err(super::store_err)?;
    let permissions = InboxSummary {
        pending: inbox.pending,
        oldest: inbox
            .oldest
            .map(|(turn_id, request_id, requested_at)| OldestRequest {
                turn_id,
                request_id,
                requested_at,
            }),
    };
    let usage = usage_status(store).await?;
    let budgets = match &ctx.core.engine {
        Some(engine) => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
                .unwrap_or(0);
            super::budgets::statuses(
                store,
                &super::budgets::all(store, &engine.budgets()).await?,
                now,
            )
            .await?
        }
        None => Vec::new(),
    };
    let id = &ctx.identity;
    let policy_probes = super::providers::policy_records(ctx).await?;
    let evidence = match &ctx.core.engine {
        Some(engine) => engine.evidence_costs(ctx.reload.workspace_ids()),
        None => Vec::new(),
    };
    let result = StatusResult {
        history: ctx.retention.shown(),
        evidence,
        telemetry: ctx.telemetry.as_ref().map(|t| t.status().clone()),
        work: Some(work),
        policy_probes,
        usage,
        budgets,
        permissions,
        unknown_tool_effects,
        protocol: PROTOCOL.to_owned(),
        version: id.build.version.clone(),
        build: id.build_info(),
        snapshot: id.snapshot.clone(),
        pid: id.pid,
        uptime_seconds: id.started.elapsed().as_secs(),
        queue: QueueStatus {
            depth: s.queue_depth,
            capacity: s.queue_capacity,
        },
        running_workspaces: s.running_workspaces,
        fenced_workspaces: s.fenced_workspaces,
        default_provider: ctx.reload.default_provider(),
        storage_fault: ctx.core.store.storage_fault().map(str::to_owned),
        live_agents: AgentRegistry::of_home(&store.options().home).live(),
        running_turns,
        fences,
        last_reload: ctx.reload.last(),
        agents: ctx.core.engine.as_ref().map(|e| {
            let st = e.status();
            EngineCounters {
                live: st.agents.live,
                idle: st.agents.idle,
                max_live: st.agents.max_live,
                running_turns: st.running_turns,
                max_running_turns: st.max_running_turns,
            }
        }),
    };
    Ok(result)
}

/// The turns fencing their workspaces (none when `any` is false: the
/// scheduler's counters say there are none, so the database is not read).
pub(super) async fn fences(store: &Store, any: bool) -> Result<Vec<StatusTurn>, RpcError> {
    if !any {
        return Ok(Vec::new());
    }
    turns_in(
        store,
        &[TurnState::SubmissionUnknown, TurnState::Interrupted],
    )
    .await
}

/// Turns in any of `states`, oldest first, with when they got there (Unix
/// seconds, as documented; the store keeps milliseconds) and the
/// application of their thread.
async fn turns_in(store: &Store, states: &[TurnState]) -> Result<Vec<StatusTurn>, RpcError> {
    let mut applications: HashMap<String, String> = HashMap::new();
    let mut out = Vec::new();
    for state in states {
        let filter = TurnFilter {
            state: Some(*state),
            ..TurnFilter::default()
        };
        for t in store.list_turns(filter).await.map_err(internal)? {
            let since = match t.state {
                TurnState::Preparing => t.prepared_at,
                TurnState::Dispatched => t.dispatched_at,
                TurnState::Running => t.started_at,
                TurnState::SubmissionUnknown | TurnState::Interrupted => t.finished_at,
                _ => None,
            }
            .unwrap_or(t.updated_at);
            let application = match applications.get(&t.thread_id) {
                Some(a) => a.clone(),
                None => {
                    let thread = store.get_thread(&t.thread_id).await.map_err(internal)?;
                    applications.insert(t.thread_id.clone(), thread.application.clone());
                    thread.application
                }
            };
            out.push(StatusTurn {
                turn: t.id,
                thread: t.thread_id,
                workspace: t.workspace_id,
                application,
                state: t.state,
                since,
            });
        }
    }
    out.sort_by(|a, b| (a.since, &a.turn).cmp(&(b.since, &b.turn)));
    Ok(out)
}
