//! Continuations after application tool calls: an unknown tool effect of
//! the prior refuses the continuation in the store's own step
//! (`tool_effect_unknown`, naming the call), a finished mutating call or
//! an unfinished read call does not.

use serde_json::json;

use super::continuation::{completed, continues, run};
use super::*;
use crate::domain::*;
use crate::store::*;

fn requested(call: &str, mutating: bool) -> (EventKind, serde_json::Value) {
    (
        EventKind::ToolCallRequested,
        json!({"callId": call, "endpoint": "crm", "endpointIdentity": "tools_x",
               "tool": if mutating { "update" } else { "find" },
               "mutating": mutating, "idempotencyKey": format!("turn:{call}")}),
    )
}

fn finished(call: &str, outcome: &str) -> (EventKind, serde_json::Value) {
    (
        EventKind::ToolCallFinished,
        json!({"callId": call, "outcome": outcome}),
    )
}

#[tokio::test]
async fn an_unknown_tool_effect_refuses_the_continuation_in_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(options(&dir.path().join("home"))).unwrap();
    let s = &store;
    let ws = workspace(s, dir.path(), "ws1").await;
    let th = thread(s, &ws.id, Retention::Full).await;

    // A mutating call requested and never finished.
    let open = run(
        s,
        &th.id,
        "a1",
        "x",
        &[requested("tcall_a", true)],
        completed(),
    )
    .await;
    let e = s
        .submit_turn(&owner(), continues(&th.id, &open.id, "a2", "go on"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), "tool_effect_unknown");
    match &e {
        StoreError::ToolEffectUnknown {
            turn,
            call,
            endpoint,
            tool,
        } => {
            assert_eq!((turn, call.as_str()), (&open.id, "tcall_a"));
            assert_eq!((endpoint.as_str(), tool.as_str()), ("crm", "update"));
        }
        other => panic!("{other:?}"),
    }
    // Nothing was queued.
    assert!(s.try_claim().await.unwrap().is_none());

    // Finished `effect_unknown`: refused the same way.
    let lost = run(
        s,
        &th.id,
        "b1",
        "x",
        &[
            requested("tcall_b", true),
            finished("tcall_b", "effect_unknown"),
        ],
        completed(),
    )
    .await;
    let e = s
        .submit_turn(&owner(), continues(&th.id, &lost.id, "b2", "go on"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), "tool_effect_unknown");

    // A finished mutating call, and a read call without a finish: accepted.
    let whole = run(
        s,
        &th.id,
        "c1",
        "x",
        &[
            requested("tcall_c", true),
            finished("tcall_c", "ok"),
            requested("tcall_d", false),
        ],
        completed(),
    )
    .await;
    let next = s
        .submit_turn(&owner(), continues(&th.id, &whole.id, "c2", "go on"))
        .await
        .unwrap()
        .value;
    assert_eq!(next.continues.as_deref(), Some(whole.id.as_str()));
    // The claim checks again and passes.
    let claim = s.try_claim().await.unwrap().expect("runnable");
    assert_eq!(claim.turn.id, next.id);
}
