//! `watch`'s rows: what one line of its lists shows (a workspace's
//! derived state, a turn, a pending request) and a turn's context meter,
//! each built from the protocol's records by [`super::model::View`].
//!
//! What must stay true: a row holds only what the records say (a context
//! meter is the agent's report, never a guess; a zero-size window is no
//! report), so the view model stays pure.

use lapis_protocol::{PermissionOption, Turn, TurnState};

/// A workspace's state, derived from its turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WorkspaceState {
    /// Nothing queued, in flight or fenced.
    Idle,
    /// A turn in flight, with this many queued behind it.
    Running { queued: usize },
    /// Only queued turns (waiting for a running slot).
    Queued(usize),
    /// A turn's outcome is unknown; nothing runs until it is resolved.
    Fenced,
}

impl WorkspaceState {
    /// How the list shows it.
    pub(super) fn label(self) -> String {
        match self {
            WorkspaceState::Idle => "idle".into(),
            WorkspaceState::Running { queued: 0 } => "running".into(),
            WorkspaceState::Running { queued } => format!("running, queued {queued}"),
            WorkspaceState::Queued(n) => format!("queued {n}"),
            WorkspaceState::Fenced => "fenced".into(),
        }
    }
}

/// How full an agent session's context window is, as the agent reported
/// it (tokens).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ContextMeter {
    /// Tokens in the context.
    pub(super) used: u64,
    /// The window's size.
    pub(super) size: u64,
}

impl ContextMeter {
    /// A report, when it is one (a zero-size window is no report).
    pub(super) fn of(used: Option<u64>, size: Option<u64>) -> Option<ContextMeter> {
        match (used, size) {
            (Some(used), Some(size)) if size > 0 => Some(ContextMeter { used, size }),
            _ => None,
        }
    }

    /// Whole percent used, capped at 100 (an agent may report more used
    /// than the window holds while it compacts).
    pub(super) fn percent(self) -> u64 {
        (u128::from(self.used) * 100 / u128::from(self.size)).min(100) as u64
    }
}

/// One turn as the list shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct TurnRow {
    /// `turn_…`.
    pub(super) id: String,
    /// Its thread.
    pub(super) thread: String,
    /// Its workspace.
    pub(super) workspace: String,
    /// Its state.
    pub(super) state: TurnState,
    /// The outcome code, once settled or fenced.
    pub(super) outcome: Option<String>,
    /// A cancel was asked for.
    pub(super) cancel_requested: bool,
    /// Submission time (ms since the epoch).
    pub(super) created_at: i64,
    /// When it started running (or was claimed), for the elapsed time.
    pub(super) started_at: Option<i64>,
    /// When it settled or was fenced.
    pub(super) finished_at: Option<i64>,
    /// The agent's latest context report for this turn.
    pub(super) context: Option<ContextMeter>,
}

impl TurnRow {
    pub(super) fn of(t: &Turn) -> TurnRow {
        TurnRow {
            id: t.id.clone(),
            thread: t.thread_id.clone(),
            workspace: t.workspace_id.clone(),
            state: t.state,
            outcome: t.outcome.clone(),
            cancel_requested: t.cancel_requested,
            created_at: t.created_at,
            started_at: t.started_at.or(t.dispatched_at).or(t.prepared_at),
            finished_at: t.finished_at,
            context: t
                .usage
                .as_ref()
                .and_then(|u| ContextMeter::of(u.context_used, u.context_size)),
        }
    }

    /// In flight: preparing, dispatched or running.
    pub(super) fn in_flight(&self) -> bool {
        matches!(
            self.state,
            TurnState::Preparing | TurnState::Dispatched | TurnState::Running
        )
    }

    /// How long it has run (to `now` while in flight), in ms.
    pub(super) fn elapsed(&self, now: i64) -> Option<i64> {
        let start = self.started_at?;
        Some(self.finished_at.unwrap_or(now).saturating_sub(start).max(0))
    }
}

/// A permission request waiting for an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Pending {
    /// The request id within its turn.
    pub(super) id: String,
    /// What the agent wants to do (terminal-safe).
    pub(super) title: String,
    /// The options offered (names made terminal-safe).
    pub(super) options: Vec<PermissionOption>,
}
