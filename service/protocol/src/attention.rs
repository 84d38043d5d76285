//! Attention: the few journal facts a person should hear about — an agent
//! waits for a permission answer, the request was settled, a turn
//! finished, a turn's lost outcome fenced its workspace, a workspace has
//! nothing left to run.
//!
//! What must stay true: attention is a *classification of journal events*,
//! never a second record. [`AttentionKind::of`] is the one definition; the
//! attention subscription (`journal.subscribe` with `attention: true`,
//! which keeps the journal's gap-free, resumable cursor) and the
//! controller's notifier both use it, so they can never disagree.

use serde::{Deserialize, Serialize};

use crate::events::{EventKind, JournalEvent};
use crate::payload::Payload;

/// What an attention event is about. Wire names are snake_case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum AttentionKind {
    /// An agent asked for permission (`permission_requested`).
    PermissionRequested,
    /// A permission request was settled: answered, approved automatically,
    /// expired, or ended with its turn (`permission_decided`; a late answer
    /// to a finished turn is not one).
    PermissionSettled,
    /// A turn reached a terminal state (`turn_state`; its outcome is the
    /// payload's `outcome`).
    TurnFinished,
    /// A turn's outcome was lost and it fences its workspace until its
    /// owner resolves it (`turn_state` to `submission_unknown` or
    /// `interrupted`).
    TurnFenced,
    /// The turn that just reached a terminal state left its workspace with
    /// nothing queued, in flight or fenced (`turn_state` with
    /// `workspaceIdle`).
    WorkspaceIdle,
    /// A turn was refused at its claim because a budget covering it was
    /// spent (`turn_state` to `failed` with outcome `budget_exhausted`).
    BudgetExhausted,
}

impl AttentionKind {
    /// Every kind.
    pub const ALL: [AttentionKind; 6] = [
        AttentionKind::PermissionRequested,
        AttentionKind::PermissionSettled,
        AttentionKind::TurnFinished,
        AttentionKind::TurnFenced,
        AttentionKind::WorkspaceIdle,
        AttentionKind::BudgetExhausted,
    ];

    /// Wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            AttentionKind::PermissionRequested => "permission_requested",
            AttentionKind::PermissionSettled => "permission_settled",
            AttentionKind::TurnFinished => "turn_finished",
            AttentionKind::TurnFenced => "turn_fenced",
            AttentionKind::WorkspaceIdle => "workspace_idle",
            AttentionKind::BudgetExhausted => "budget_exhausted",
        }
    }

    /// Parses a wire name.
    pub fn parse(s: &str) -> Option<AttentionKind> {
        AttentionKind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// The attention kinds `event` raises, in order (empty for most
    /// events). Reads only kinds and metadata (states, the decider), so a
    /// metadata-only payload that did not survive a restart still
    /// classifies: a `permission_decided` without its payload counts as
    /// settled.
    pub fn of(event: &JournalEvent) -> Vec<AttentionKind> {
        match event.kind {
            EventKind::PermissionRequested => vec![AttentionKind::PermissionRequested],
            EventKind::PermissionDecided => match event.body() {
                Some(Payload::PermissionDecided(d)) if d.decided_by.is_none() => Vec::new(),
                _ => vec![AttentionKind::PermissionSettled],
            },
            EventKind::TurnState => match event.body() {
                Some(Payload::TurnState(change)) => {
                    let mut kinds = Vec::new();
                    if change.to.is_terminal() {
                        kinds.push(AttentionKind::TurnFinished);
                        if change.outcome.as_deref()
                            == Some(crate::OutcomeCode::BudgetExhausted.as_str())
                        {
                            kinds.push(AttentionKind::BudgetExhausted);
                        }
                    } else if change.to.is_fenced() {
                        kinds.push(AttentionKind::TurnFenced);
                    }
                    if change.workspace_idle {
                        kinds.push(AttentionKind::WorkspaceIdle);
                    }
                    kinds
                }
                _ => Vec::new(),
            },
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn event(kind: EventKind, payload: serde_json::Value) -> JournalEvent {
        JournalEvent {
            seq: 1,
            thread_id: "thr".into(),
            thread_seq: 1,
            turn_id: Some("turn".into()),
            kind,
            at: 0,
            payload: Some(payload),
            payload_unavailable: false,
        }
    }

    #[test]
    fn attention_is_a_classification_of_journal_events() {
        use AttentionKind::*;
        let state = |to: &str, idle: bool| {
            let mut p = json!({"from": "running", "to": to, "event": "complete",
                "outcome": "end_turn"});
            if idle {
                p["workspaceIdle"] = json!(true);
            }
            event(EventKind::TurnState, p)
        };
        assert_eq!(
            AttentionKind::of(&state("completed", true)),
            [TurnFinished, WorkspaceIdle]
        );
        assert_eq!(AttentionKind::of(&state("failed", false)), [TurnFinished]);
        assert_eq!(
            AttentionKind::of(&state("submission_unknown", false)),
            [TurnFenced]
        );
        assert!(AttentionKind::of(&state("running", false)).is_empty());
        let asked = event(
            EventKind::PermissionRequested,
            json!({"requestId": "r",
            "invocation": {"id": "c"}, "options": []}),
        );
        assert_eq!(AttentionKind::of(&asked), [PermissionRequested]);
        let decided = event(
            EventKind::PermissionDecided,
            json!({"requestId": "r",
            "answer": {"outcome": "cancelled"}, "decidedBy": "expired"}),
        );
        assert_eq!(AttentionKind::of(&decided), [PermissionSettled]);
        let late = event(
            EventKind::PermissionDecided,
            json!({"late": true, "requestId": "r",
            "answer": {"outcome": "cancelled"}}),
        );
        assert!(AttentionKind::of(&late).is_empty());
        let chunk = event(EventKind::MessageChunk, json!({"text": "hi"}));
        assert!(AttentionKind::of(&chunk).is_empty());
        for k in AttentionKind::ALL {
            assert_eq!(serde_json::to_value(k).unwrap(), json!(k.as_str()));
            assert_eq!(AttentionKind::parse(k.as_str()), Some(k));
        }
    }
}
