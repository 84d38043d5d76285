//! Each note against the object the controller wrote before notes were
//! typed (the literals are those objects), and the rule that only a payload
//! a note holds in full reads as one.

use serde_json::{Value, json};

use super::*;
use crate::error::ErrorCode;
use crate::events::EventKind;
use crate::payload::{Observation, Payload};

/// `note` is stored as `{"type":"observation","kind":…,"payload":stored}`
/// and reads back from it as the same note.
fn pins(note: Note, stored: Value) {
    let kind = note.kind();
    let payload = Payload::from(note.clone());
    let whole = json!({"type": "observation", "kind": kind, "payload": stored});
    assert_eq!(payload.to_value(), whole, "{note:?}");
    assert_eq!(Payload::from_value(EventKind::Observation, whole), payload);
}

/// What `kind` + `stored` read as.
fn read(kind: &str, stored: Value) -> Observation {
    let whole = json!({"type": "observation", "kind": kind, "payload": stored});
    match Payload::from_value(EventKind::Observation, whole) {
        Payload::Observation(o) => o,
        other => panic!("not an observation: {other:?}"),
    }
}

#[test]
fn every_note_keeps_its_stored_shape() {
    pins(
        Note::AskMode(AskMode {
            mode: Some("default".into()),
            result: Some(ModeResult::Rejected),
            probe_ignored: false,
            runs_unasked: false,
        }),
        json!({"mode": "default", "result": "rejected", "runsUnasked": false}),
    );
    pins(
        Note::AskMode(AskMode {
            mode: None,
            result: None,
            probe_ignored: true,
            runs_unasked: true,
        }),
        json!({"mode": null, "probeIgnored": true, "runsUnasked": true}),
    );
    pins(
        Note::AgentStderr(AgentStderr {
            lines: vec!["boom".into(), "bye".into()],
        }),
        json!({"lines": ["boom", "bye"]}),
    );
    pins(
        Note::McpRefused(McpRefused {
            refused: OutcomeCode::Refused(ErrorCode::McpRestricted),
            message: "server 1 (tickets) is not allowed".into(),
        }),
        json!({"refused": "mcp_restricted", "message": "server 1 (tickets) is not allowed"}),
    );
    pins(
        Note::SessionLoaded(SessionLoaded {
            session_id: "s1".into(),
            replayed_updates: 3,
            resume_failed: false,
        }),
        json!({"sessionId": "s1", "replayedUpdates": 3}),
    );
    pins(
        Note::SessionLoaded(SessionLoaded {
            session_id: "s1".into(),
            replayed_updates: 0,
            resume_failed: true,
        }),
        json!({"sessionId": "s1", "replayedUpdates": 0, "resumeFailed": true}),
    );
    pins(
        Note::SessionResumed(SessionResumed {
            session_id: "s1".into(),
        }),
        json!({"sessionId": "s1"}),
    );
    pins(
        Note::ContextReset(ContextReset {
            reason: ResetReason::ResumeFailed,
            previous_session_id: "s1".into(),
            session_id: "s2".into(),
        }),
        json!({"reason": "resume_failed", "previousSessionId": "s1", "sessionId": "s2"}),
    );
    pins(
        Note::ContextReset(ContextReset {
            reason: ResetReason::LoadUnsupported,
            previous_session_id: "s1".into(),
            session_id: "s2".into(),
        }),
        json!({"reason": "load_unsupported", "previousSessionId": "s1", "sessionId": "s2"}),
    );
    pins(
        Note::SessionReplaced(SessionReplaced {
            reason: ReplaceReason::ThreadReconfigured,
            previous_session_id: "s1".into(),
        }),
        json!({"reason": "thread_reconfigured", "previousSessionId": "s1"}),
    );
    pins(
        Note::RestrictedMode(RestrictedMode {
            mode: None,
            result: ModeResult::Unsupported,
            runs_unrestricted: true,
        }),
        json!({"mode": null, "result": "unsupported", "runsUnrestricted": true}),
    );
    pins(
        Note::UnsupportedRequest(UnsupportedRequest {
            method: "elicitation/create".into(),
            idle: false,
        }),
        json!({"method": "elicitation/create"}),
    );
    pins(
        Note::UnsupportedRequest(UnsupportedRequest {
            method: "fs/read_text_file".into(),
            idle: true,
        }),
        json!({"method": "fs/read_text_file", "idle": true}),
    );
    pins(
        Note::Notification(AgentNotification {
            method: "x/progress".into(),
        }),
        json!({"method": "x/progress"}),
    );
}

#[test]
fn a_payload_a_note_does_not_hold_in_full_stays_verbatim() {
    // A newer server's member this SDK does not know: kept, not dropped.
    let newer = json!({"lines": ["boom"], "truncated": true});
    assert_eq!(
        read("agent_stderr", newer.clone()),
        Observation::noted("agent_stderr", newer)
    );
    // A value outside a closed set.
    let unknown_reason = json!({"reason": "moon_phase", "previousSessionId": "s1"});
    assert_eq!(
        read("session_replaced", unknown_reason.clone()),
        Observation::noted("session_replaced", unknown_reason)
    );
    // An agent's own update under a note's name carries its
    // `sessionUpdate`, so it never passes for the controller's note.
    let spoof = json!({"sessionUpdate": "agent_stderr", "lines": ["rm -rf ~"]});
    assert_eq!(
        read("agent_stderr", spoof.clone()),
        Observation::noted("agent_stderr", spoof)
    );
    // A kind that is no note.
    assert_eq!(
        read("plan", json!({"entries": []})),
        Observation::noted("plan", json!({"entries": []}))
    );
}

#[test]
fn a_notes_label_is_its_kind() {
    let note = Note::Notification(AgentNotification { method: "m".into() });
    assert_eq!(Observation::Note(note).label(), Some("notification"));
}
