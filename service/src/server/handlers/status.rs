//! `status`: identity, uptime and the scheduler's counters.

use serde_json::Value;

use lapis_protocol::{
    PROTOCOL, RpcError,
    params::{EngineCounters, QueueStatus, StatusResult},
};

use super::super::context::ServerContext;
use super::super::dispatch::internal;

/// Reads counters the core keeps in memory; never touches the database, so
/// it answers quickly even while the writer is busy.
pub async fn status(ctx: &ServerContext) -> Result<Value, RpcError> {
    let s = ctx.core.store.status();
    let id = &ctx.identity;
    let result = StatusResult {
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
    serde_json::to_value(result).map_err(internal)
}
