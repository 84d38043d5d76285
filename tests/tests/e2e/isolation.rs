//! A foreign resource answers exactly like an unknown one (issue 24): every
//! method that names another principal's or another application's thread
//! or turn gets `not_found` with the message an unknown id of the same
//! kind gets, never `forbidden`, so ids cannot be probed.

use lapis_protocol::client::{Client, ClientError};
use serde_json::{Value, json};

use crate::policy::app;
use crate::serve_support::{GUEST, NARROW, OWNER, Server};

/// The error a call answers with: (code, message).
fn refusal(c: &mut Client, method: &str, params: Value) -> (String, String) {
    match c.call_value(method, params) {
        Err(ClientError::Rpc(e)) => (
            e.error_code()
                .map(|c| c.as_str().to_owned())
                .unwrap_or_default(),
            e.message,
        ),
        other => panic!("{method}: expected an error, got {other:?}"),
    }
}

#[test]
fn foreign_threads_and_turns_answer_like_unknown_ones() {
    let server = Server::start();
    let mut owner = app(&server, OWNER, "editor");
    let thread = owner
        .threads_create("proj", "echo", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let turn = owner.turns_submit(&thread.id, "c-1", "hello").unwrap();
    // Another principal, and the same principal through an application
    // token of another application (without `permissions:respond-any`,
    // which opens the principal's permission inbox to it: `inbox.rs`).
    for mut other in [
        app(&server, GUEST, "editor"),
        app(&server, NARROW, "other-app"),
    ] {
        assert_foreign(&mut other, &thread.id, &turn.id);
    }
    // The owner still reaches both.
    owner.turns_get(&turn.id).unwrap();
    server.finish(&[], &[]);
}

/// Every method that names `thread` or `turn` answers `other` exactly as
/// it answers an unknown id of the same kind (`not_found`, same message).
pub(crate) fn assert_foreign(other: &mut Client, thread: &str, turn: &str) {
    // Unknown ids of the same shape.
    let (no_thread, no_turn) = (
        format!("thr_{}", "0".repeat(32)),
        format!("turn_{}", "0".repeat(32)),
    );
    let by_thread = |id: &str| {
        vec![
            ("threads.get", json!({ "threadId": id })),
            ("threads.attach", json!({ "threadId": id, "expect": {} })),
            (
                "threads.configure",
                json!({ "threadId": id, "expectedVersion": 1, "approval": "ask" }),
            ),
            (
                "turns.submit",
                json!({ "threadId": id, "commandId": "x-1", "prompt": "p" }),
            ),
            ("turns.list", json!({ "threadId": id })),
            ("journal.replay", json!({ "threadId": id })),
            ("journal.subscribe", json!({ "threadId": id })),
            ("permissions.list", json!({ "threadId": id })),
            ("threads.delete", json!({ "threadId": id })),
        ]
    };
    let by_turn = |id: &str| {
        vec![
            ("turns.get", json!({ "turnId": id })),
            ("turns.cancel", json!({ "turnId": id })),
            (
                "turns.resolve",
                json!({ "turnId": id, "as": "failed", "confirmStopped": true }),
            ),
            (
                "turns.continue",
                json!({ "turnId": id, "commandId": "x-2", "prompt": "p" }),
            ),
            ("permissions.list", json!({ "turnId": id })),
            (
                "permissions.respond",
                json!({ "turnId": id, "requestId": "r-1", "optionId": "o" }),
            ),
        ]
    };
    {
        for (cases, real, unknown) in [
            (
                by_thread as fn(&str) -> Vec<(&'static str, Value)>,
                thread,
                &no_thread,
            ),
            (by_turn, turn, &no_turn),
        ] {
            for ((method, foreign), (_, missing)) in cases(real).into_iter().zip(cases(unknown)) {
                let (code, message) = refusal(other, method, foreign);
                let (unknown_code, unknown_message) = refusal(other, method, missing);
                assert_eq!(code, "not_found", "{method}: {message}");
                assert_eq!(code, unknown_code, "{method}");
                assert_eq!(
                    message.replace(real, "ID"),
                    unknown_message.replace(unknown.as_str(), "ID"),
                    "{method}: same message shape"
                );
            }
        }
    }
}
