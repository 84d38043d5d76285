//! Each payload against the object the untyped store wrote (the literals
//! here are those objects), and the reading rules for what is not known.

use serde_json::{Value, json};

use super::*;
use crate::permissions::{DecidedBy, PermissionAnswer, PermissionOption};
use crate::policy::{ApprovalPolicy, Retention};
use crate::state::{TurnEvent, TurnState};

/// `payload` writes `stored` and reads back from it.
fn pins(payload: Payload, stored: Value) {
    assert_eq!(payload.to_value(), stored, "{payload:?}");
    assert_eq!(Payload::from_value(payload.kind(), stored), payload);
}

#[test]
fn lifecycle_payloads_keep_their_stored_shape() {
    pins(
        Payload::ThreadCreated(ThreadCreated {
            workspace_id: "ws".into(),
            provider: "echo".into(),
            approval: ApprovalPolicy::AllowAll,
            restricted: false,
            retention: Retention::MetadataOnly,
            mcp_servers: vec![],
            ports: Default::default(),
            permission_timeout_seconds: None,
            budget: None,
        }),
        json!({"workspaceId": "ws", "provider": "echo", "approval": "allow-all",
            "restricted": false, "retention": "metadata-only"}),
    );
    pins(
        Payload::ThreadCreated(ThreadCreated {
            workspace_id: "ws".into(),
            provider: "echo".into(),
            approval: ApprovalPolicy::Ask,
            restricted: false,
            retention: Retention::Full,
            mcp_servers: vec![],
            ports: crate::ThreadPorts {
                tools: vec!["crm".into()],
                ..Default::default()
            },
            permission_timeout_seconds: None,
            budget: None,
        }),
        json!({"workspaceId": "ws", "provider": "echo", "approval": "ask",
            "restricted": false, "retention": "full", "tools": ["crm"]}),
    );
    pins(
        Payload::TurnSubmitted(TurnSubmitted {
            turn_id: "t".into(),
            command_id: "c".into(),
            continues: None,
            input_digest: None,
        }),
        json!({"turnId": "t", "commandId": "c", "continues": null}),
    );
    pins(
        Payload::TurnSubmitted(TurnSubmitted {
            turn_id: "t".into(),
            command_id: "c".into(),
            continues: None,
            input_digest: Some("ab".repeat(32)),
        }),
        json!({"turnId": "t", "commandId": "c", "continues": null,
            "inputDigest": "ab".repeat(32)}),
    );
    pins(
        Payload::TurnState(StateChange {
            from: TurnState::Running,
            to: TurnState::SubmissionUnknown,
            event: TurnEvent::LoseOutcome,
            outcome: Some("controller_restart".into()),
            recovered: true,
            workspace_idle: false,
        }),
        json!({"from": "running", "to": "submission_unknown", "event": "lose_outcome",
            "outcome": "controller_restart", "recovered": true}),
    );
    pins(
        Payload::TurnState(StateChange {
            from: TurnState::Queued,
            to: TurnState::Preparing,
            event: TurnEvent::Claim,
            outcome: None,
            recovered: false,
            workspace_idle: false,
        }),
        json!({"from": "queued", "to": "preparing", "event": "claim"}),
    );
    pins(
        Payload::TurnState(StateChange {
            from: TurnState::Running,
            to: TurnState::Completed,
            event: TurnEvent::Complete,
            outcome: Some("end_turn".into()),
            recovered: false,
            workspace_idle: true,
        }),
        json!({"from": "running", "to": "completed", "event": "complete",
            "outcome": "end_turn", "workspaceIdle": true}),
    );
    pins(
        Payload::TurnResolved(Resolution {
            as_state: TurnState::Failed,
            from: TurnState::SubmissionUnknown,
            via: ResolvedVia::Resolve,
            principal: "owner".into(),
            application: "app".into(),
        }),
        json!({"as": "failed", "from": "submission_unknown", "via": "resolve",
            "principal": "owner", "application": "app"}),
    );
}

#[test]
fn activity_payloads_carry_their_legacy_type() {
    pins(
        Payload::MessageChunk(Chunk {
            message_id: Some("m".into()),
            ..Chunk::text("hi")
        }),
        json!({"type": "message", "text": "hi", "messageId": "m"}),
    );
    pins(
        Payload::ThoughtChunk(Chunk::text("hmm")),
        json!({"type": "reasoning", "text": "hmm"}),
    );
    pins(
        Payload::ToolCall(Invocation {
            id: "t".into(),
            raw_input: Some(json!(1)),
            ..Invocation::default()
        }),
        json!({"type": "invocation", "id": "t", "rawInput": 1}),
    );
    pins(
        Payload::PermissionRequested(PermissionRequested {
            request_id: "0".into(),
            invocation: Invocation {
                id: "t".into(),
                ..Invocation::default()
            },
            options: vec![PermissionOption {
                id: "yes".into(),
                name: "Yes".into(),
                kind: "allow_once".into(),
            }],
            expires_at: None,
        }),
        json!({"type": "permission_requested", "requestId": "0", "invocation": {"id": "t"},
            "options": [{"optionId": "yes", "name": "Yes", "kind": "allow_once"}]}),
    );
    pins(
        Payload::PermissionRequested(PermissionRequested {
            request_id: "0".into(),
            invocation: Invocation {
                id: "t".into(),
                ..Invocation::default()
            },
            options: vec![],
            expires_at: Some(1_500),
        }),
        json!({"type": "permission_requested", "requestId": "0", "invocation": {"id": "t"},
            "options": [], "expiresAt": "1970-01-01T00:00:01.500Z"}),
    );
    pins(
        Payload::PermissionDecided(PermissionDecided {
            request_id: "r1".into(),
            answer: PermissionAnswer::Selected {
                option_id: "yes".into(),
            },
            decided_by: Some(DecidedBy::TurnEnded),
            answered_by: None,
        }),
        json!({"type": "permission_resolved", "requestId": "r1",
            "answer": {"outcome": "selected", "optionId": "yes"}, "decidedBy": "turn_ended"}),
    );
    pins(
        Payload::PermissionDecided(PermissionDecided {
            request_id: "r1".into(),
            answer: PermissionAnswer::Cancelled,
            decided_by: Some(DecidedBy::User),
            answered_by: Some(crate::Answerer {
                principal: "owner".into(),
                application: "phone".into(),
            }),
        }),
        json!({"type": "permission_resolved", "requestId": "r1",
            "answer": {"outcome": "cancelled"}, "decidedBy": "user",
            "answeredBy": {"principal": "owner", "application": "phone"}}),
    );
    pins(
        Payload::PermissionDecided(PermissionDecided {
            request_id: "r1".into(),
            answer: PermissionAnswer::Cancelled,
            decided_by: None,
            answered_by: None,
        }),
        json!({"late": true, "requestId": "r1", "answer": {"outcome": "cancelled"}}),
    );
}

#[test]
fn observations_keep_every_stored_shape() {
    pins(
        Observation::SessionStarted {
            session_id: "s".into(),
        }
        .into(),
        json!({"type": "session_started", "sessionId": "s"}),
    );
    pins(
        Observation::noted("plan", json!({"entries": []})).into(),
        json!({"type": "observation", "kind": "plan", "payload": {"entries": []}}),
    );
    pins(
        Observation::CancelSent.into(),
        json!({"type": "cancel_requested"}),
    );
    pins(
        Observation::Stopped {
            stop_reason: "end_turn".into(),
            meta: None,
        }
        .into(),
        json!({"type": "stopped", "stopReason": "end_turn"}),
    );
    pins(
        Observation::Stopped {
            stop_reason: "end_turn".into(),
            meta: Some(Value::Null),
        }
        .into(),
        json!({"type": "stopped", "stopReason": "end_turn", "meta": null}),
    );
    pins(
        Observation::LateUpdate {
            kind: "agent_message_chunk".into(),
            payload: json!({"x": 1}),
        }
        .into(),
        json!({"type": "late", "kind": "agent_message_chunk", "payload": {"x": 1}}),
    );
    let late = json!({"late": "message_chunk", "data": {"type": "message", "text": "x"}});
    pins(
        Observation::LateAppend(LateAppend {
            late: EventKind::MessageChunk,
            data: late["data"].clone(),
        })
        .into(),
        late,
    );
    pins(
        Observation::Ignored(Ignored {
            ignored: TurnEvent::Fail,
            state: TurnState::Completed,
            outcome: None,
        })
        .into(),
        json!({"ignored": "fail", "state": "completed", "outcome": null}),
    );
}

#[test]
fn what_is_not_understood_stays_raw() {
    // A new kind (a newer server) reads as Unknown, raw JSON kept.
    let event: JournalEvent = serde_json::from_value(json!({
        "seq": 1, "threadId": "th", "threadSeq": 1, "turnId": null,
        "kind": "turn_paused", "at": "1970-01-01T00:00:00.000Z",
        "payload": {"why": "x"}, "payloadUnavailable": false
    }))
    .unwrap();
    assert_eq!(event.kind, EventKind::Unknown);
    assert_eq!(
        event.body(),
        Some(Payload::Unknown {
            kind: EventKind::Unknown,
            raw: json!({"why": "x"})
        })
    );
    // A known kind whose payload does not parse, or names another type.
    for (kind, raw) in [
        (EventKind::MessageChunk, json!(7)),
        (
            EventKind::MessageChunk,
            json!({"type": "reasoning", "text": "x"}),
        ),
        (
            EventKind::TurnState,
            json!({"from": "queued", "to": "later"}),
        ),
        (EventKind::Observation, json!({"type": "brand_new"})),
    ] {
        assert_eq!(
            Payload::from_value(kind, raw.clone()),
            Payload::Unknown { kind, raw }
        );
    }
    // New members of a known payload are ignored, not fatal.
    assert_eq!(
        Payload::from_value(
            EventKind::UserMessage,
            json!({"text": "hi", "attachments": []})
        ),
        Payload::UserMessage(Prompt { text: "hi".into() })
    );
}

#[test]
fn every_kind_has_a_payload_that_names_it() {
    for kind in EventKind::ALL {
        let p = Payload::from_value(kind, json!({}));
        assert_eq!(p.kind(), kind);
    }
}

#[test]
fn tool_calls_round_trip_and_unknown_effects_are_the_unfinished_mutating_ones() {
    use crate::{ToolCallFinished, ToolCallOutcome, ToolCallRequested, unknown_effects};
    let req = |id: &str, mutating| {
        Payload::ToolCallRequested(ToolCallRequested {
            call_id: id.into(),
            endpoint: "crm".into(),
            endpoint_identity: "tools_x".into(),
            tool: "update".into(),
            mutating,
            idempotency_key: format!("turn_1:{id}"),
            arguments: None,
        })
    };
    let fin = |id: &str, outcome| {
        Payload::ToolCallFinished(ToolCallFinished {
            call_id: id.into(),
            outcome,
            code: None,
            output: None,
        })
    };
    let events = [
        req("a", true),
        fin("a", ToolCallOutcome::Ok),
        req("b", true),
        req("c", false),
        req("d", true),
        fin("d", ToolCallOutcome::EffectUnknown),
    ];
    for p in &events {
        assert_eq!(&Payload::from_value(p.kind(), p.to_value()), p);
    }
    assert_eq!(
        events[0].to_value(),
        json!({"callId": "a", "endpoint": "crm", "endpointIdentity": "tools_x", "tool": "update",
            "mutating": true, "idempotencyKey": "turn_1:a"})
    );
    let unknown: Vec<String> = unknown_effects("turn_1", &events)
        .into_iter()
        .map(|u| u.call_id)
        .collect();
    assert_eq!(unknown, ["b", "d"], "a finished, c is a read tool");
}

#[test]
fn prepared_context_has_a_pinned_stored_form() {
    use crate::context::{PreparedBlock, PreparedContext};
    let p = Payload::ContextPrepared(PreparedContext {
        port: "notes".into(),
        port_identity: "context_x".into(),
        budget_bytes: 10,
        used_bytes: 7,
        blocks: vec![
            PreparedBlock {
                id: "a".into(),
                sha256: "ab".into(),
                bytes: 3,
                cut: false,
                text: Some("abc".into()),
            },
            PreparedBlock {
                id: "b".into(),
                sha256: "cd".into(),
                bytes: 4,
                cut: true,
                text: None,
            },
        ],
        cut_blocks: 1,
        cut_bytes: 2,
    });
    assert_eq!(p.kind(), EventKind::ContextPrepared);
    assert_eq!(
        p.to_value(),
        json!({"port": "notes", "portIdentity": "context_x", "budgetBytes": 10, "usedBytes": 7,
            "blocks": [{"id": "a", "sha256": "ab", "bytes": 3, "text": "abc"},
                       {"id": "b", "sha256": "cd", "bytes": 4, "cut": true}],
            "cutBlocks": 1, "cutBytes": 2})
    );
    assert_eq!(Payload::from_value(p.kind(), p.to_value()), p);
}

#[test]
fn memory_recalls_have_a_pinned_stored_form_without_text() {
    use crate::memory::{PreparedMemory, RecallVia};
    let p = Payload::MemoryRecalled(PreparedMemory {
        via: RecallVia::Preparation,
        port: "mem".into(),
        port_identity: "memory_x".into(),
        candidates: 3,
        rejected: 1,
        rendered: vec!["m1".into(), "m3".into()],
        budget_bytes: 8192,
        used_bytes: 32,
    });
    assert_eq!(p.kind(), EventKind::MemoryRecalled);
    assert_eq!(
        p.to_value(),
        json!({"via": "preparation", "port": "mem", "portIdentity": "memory_x", "candidates": 3,
            "rejected": 1, "rendered": ["m1", "m3"], "budgetBytes": 8192, "usedBytes": 32})
    );
    assert_eq!(Payload::from_value(p.kind(), p.to_value()), p);
}

#[test]
fn workspace_snapshots_have_a_pinned_stored_form() {
    use crate::snapshot::{SnapshotPoint, SnapshotSkipped, WorkspaceSnapshot};
    let taken = Payload::WorkspaceSnapshot(WorkspaceSnapshot {
        at: SnapshotPoint::Boundary,
        tree: Some("4b825dc642cb6eb9a060e54bf8d69288fbee4904".into()),
        files: Some(3),
        skipped: None,
    });
    assert_eq!(taken.kind(), EventKind::WorkspaceSnapshot);
    assert!(
        !taken.kind().is_content(),
        "metadata, kept under every retention"
    );
    assert!(taken.kind().is_activity(), "the engine appends it");
    assert_eq!(
        taken.to_value(),
        json!({"at": "boundary", "tree": "4b825dc642cb6eb9a060e54bf8d69288fbee4904", "files": 3})
    );
    assert_eq!(Payload::from_value(taken.kind(), taken.to_value()), taken);
    let skipped = Payload::WorkspaceSnapshot(WorkspaceSnapshot::skipped(
        SnapshotPoint::Outcome,
        SnapshotSkipped::NotGit,
    ));
    assert_eq!(
        skipped.to_value(),
        json!({"at": "outcome", "skipped": "not_git"})
    );
    assert_eq!(
        Payload::from_value(skipped.kind(), skipped.to_value()),
        skipped
    );
}

#[test]
fn deletion_receipts_have_a_pinned_content_free_stored_form() {
    let p = Payload::ThreadDeleted(crate::ThreadDeletion {
        thread_id: "thr_1".into(),
        events: 9,
        turns: 2,
        first_seq: 3,
        last_seq: 14,
        digest: "ab".repeat(32),
        by: crate::DeletedBy {
            principal: "owner".into(),
            application: "cli".into(),
            token: Some("owner".into()),
        },
        deleted_at: 0,
    });
    assert_eq!(p.kind(), EventKind::ThreadDeleted);
    assert!(!p.kind().is_content() && !p.kind().is_activity());
    assert_eq!(
        p.to_value(),
        json!({"threadId": "thr_1", "events": 9, "turns": 2, "firstSeq": 3, "lastSeq": 14,
            "digest": "ab".repeat(32),
            "by": {"principal": "owner", "application": "cli", "token": "owner"},
            "deletedAt": "1970-01-01T00:00:00.000Z"})
    );
    assert_eq!(Payload::from_value(p.kind(), p.to_value()), p);
}
