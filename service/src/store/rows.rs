//! Row mapping for the tables the turn's hot path reads (workspaces,
//! threads, turns): the column lists, as macros too so hot statements are
//! `concat!`ed at compile time (no `format!` per call), and mappers that
//! read a row from any column on (`*_row_at`), for joined reads (see
//! [`super::hot`]).

use rusqlite::Row;

use crate::domain::{
    ApprovalPolicy, Retention, SessionBinding, Thread, Turn, TurnState, Workspace,
};

use super::row_error::bad;

/// Columns of a workspace row, in [`workspace_row`] order.
macro_rules! workspace_cols {
    () => {
        "id, path, created_at"
    };
}
pub(super) use workspace_cols;
pub(super) const WORKSPACE_COLS: &str = workspace_cols!();

/// Map a workspace row.
pub(super) fn workspace_row(r: &Row<'_>) -> rusqlite::Result<Workspace> {
    workspace_row_at(r, 0)
}

/// [`workspace_row`] for the columns from `b` on (a joined row).
pub(super) fn workspace_row_at(r: &Row<'_>, b: usize) -> rusqlite::Result<Workspace> {
    Ok(Workspace {
        id: r.get(b)?,
        path: r.get(b + 1)?,
        created_at: r.get(b + 2)?,
    })
}

/// Columns of a thread row, in [`thread_row`] order.
macro_rules! thread_cols {
    () => {
        concat!(
            "id, principal, application, workspace_id, provider, approval, \
     restricted, retention, version, created_at, updated_at, agent_session_id, agent_fingerprint, \
     agent_thread_version, mcp_servers, permission_timeout_seconds, budget, ",
            $crate::store::ports::port_cols!()
        )
    };
}
pub(super) use thread_cols;
pub(super) const THREAD_COLS: &str = thread_cols!();

/// Map a thread row.
pub(super) fn thread_row(r: &Row<'_>) -> rusqlite::Result<Thread> {
    thread_row_at(r, 0)
}

/// [`thread_row`] for the columns from `b` on (a joined row).
pub(super) fn thread_row_at(r: &Row<'_>, b: usize) -> rusqlite::Result<Thread> {
    let id: String = r.get(b)?;
    let approval: String = r.get(b + 5)?;
    let retention: String = r.get(b + 7)?;
    Ok(Thread {
        approval: ApprovalPolicy::parse(&approval)
            .ok_or_else(|| bad("threads", &id, "approval"))?,
        retention: Retention::parse(&retention).ok_or_else(|| bad("threads", &id, "retention"))?,
        principal: r.get(b + 1)?,
        application: r.get(b + 2)?,
        workspace_id: r.get(b + 3)?,
        provider: r.get(b + 4)?,
        restricted: r.get(b + 6)?,
        version: r.get::<_, i64>(b + 8)? as u64,
        created_at: r.get(b + 9)?,
        updated_at: r.get(b + 10)?,
        agent_session: match (
            r.get::<_, Option<String>>(b + 11)?,
            r.get::<_, Option<String>>(b + 12)?,
        ) {
            (Some(session_id), Some(fingerprint)) => Some(SessionBinding {
                session_id,
                fingerprint,
                thread_version: r.get::<_, Option<i64>>(b + 13)?.unwrap_or(0) as u64,
            }),
            _ => None,
        },
        mcp_servers: match r.get::<_, Option<String>>(b + 14)? {
            None => Vec::new(),
            Some(json) => {
                serde_json::from_str(&json).map_err(|_| bad("threads", &id, "mcp_servers"))?
            }
        },
        permission_timeout_seconds: r.get::<_, Option<i64>>(b + 15)?.map(|n| n as u64),
        // Startup validation refused a budget that does not parse.
        budget: r
            .get::<_, Option<String>>(b + 16)?
            .and_then(|json| serde_json::from_str(&json).ok()),
        ports: super::ports::read(r, b + 17, &id)?,
        id,
    })
}

/// Columns of a turn row, in [`turn_row`] order.
macro_rules! turn_cols {
    () => {
        "id, thread_id, workspace_id, principal, command_id, state, outcome, \
     cancel_requested, continues, queue_seq, created_at, updated_at, prepared_at, dispatched_at, \
     started_at, finished_at, resolved_at, agent_session_id, max_turn_seconds, redactions, prepared, \
     usage"
    };
}
pub(super) use turn_cols;
pub(super) const TURN_COLS: &str = turn_cols!();

/// Map a turn row.
pub(super) fn turn_row(r: &Row<'_>) -> rusqlite::Result<Turn> {
    turn_row_at(r, 0)
}

/// [`turn_row`] for the columns from `b` on (a joined row).
pub(super) fn turn_row_at(r: &Row<'_>, b: usize) -> rusqlite::Result<Turn> {
    let id: String = r.get(b)?;
    let state: String = r.get(b + 5)?;
    Ok(Turn {
        state: TurnState::parse(&state).ok_or_else(|| bad("turns", &id, "state"))?,
        thread_id: r.get(b + 1)?,
        workspace_id: r.get(b + 2)?,
        principal: r.get(b + 3)?,
        command_id: r.get(b + 4)?,
        outcome: r.get(b + 6)?,
        cancel_requested: r.get(b + 7)?,
        continues: r.get(b + 8)?,
        queue_seq: r.get::<_, i64>(b + 9)? as u64,
        created_at: r.get(b + 10)?,
        updated_at: r.get(b + 11)?,
        prepared_at: r.get(b + 12)?,
        dispatched_at: r.get(b + 13)?,
        started_at: r.get(b + 14)?,
        finished_at: r.get(b + 15)?,
        resolved_at: r.get(b + 16)?,
        agent_session_id: r.get(b + 17)?,
        max_turn_seconds: r.get::<_, Option<i64>>(b + 18)?.map(|s| s as u64),
        awaiting_input: false,
        redactions: r.get::<_, i64>(b + 19)? as u64,
        prepared: match r.get_ref(b + 20)?.as_str_or_null()? {
            Some(json) => {
                Some(serde_json::from_str(json).map_err(|_| bad("turns", &id, "prepared"))?)
            }
            None => None,
        },
        user_message: None,
        usage: match r.get_ref(b + 21)?.as_str_or_null()? {
            Some(json) => Some(serde_json::from_str(json).map_err(|_| bad("turns", &id, "usage"))?),
            None => None,
        },
        id,
    })
}
