//! Issue 44 item 6 through the real binary: a thread with a running turn
//! (a fixture agent that streams, then waits to be cancelled) is left
//! untouched by a pass whose policy would prune it, while an idle thread
//! over the same limit is pruned; a config reload changes the policy (a
//! pass runs under it at once); and the last pass is kept in the
//! database, so `status` shows it after a restart with no policy at all.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::acp_serve::fixture;
use crate::serve_support::Server;
use lapis_e2e::wait::{settled, wait_turn};
use lapis_protocol::EventKind;

/// `status --json`'s `history`, once it shows a pass other than `seen`.
fn pass_after(server: &Server, seen: &Value) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let doc = server.ctx.run(["status", "--json"]).success().json();
        let pass = &doc["history"]["lastPass"];
        if !pass.is_null() && pass["startedAt"] != seen["startedAt"] {
            return doc["history"].clone();
        }
        assert!(Instant::now() < deadline, "no new pass: {doc}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The thread's replayed events: (live, `history_pruned` receipts).
fn events(server: &Server, thread: &str) -> (usize, usize) {
    let mut client = server.client("history-busy");
    let page = client.journal_replay(Some(thread), 0, Some(1000)).unwrap();
    let receipts = page
        .events
        .iter()
        .filter(|e| e.kind == EventKind::HistoryPruned)
        .count();
    (page.events.len() - receipts, receipts)
}

fn reload(server: &Server, history: Value) {
    server.edit_config(|c| c["history"] = history);
    let out = server
        .ctx
        .run(["config", "reload", "--json"])
        .success()
        .json();
    assert_eq!(out["applied"], true, "{out}");
}

#[test]
fn a_busy_thread_keeps_its_events_a_reload_applies_the_policy_and_the_pass_outlives_a_restart() {
    let mut server = Server::start_full(
        json!({}),
        json!({
            "busy": fixture(&["--chunks", "40", "--hang"]),
            "rich": fixture(&["--chunks", "40"]),
        }),
    );
    let mut client = server.client("history-busy");
    let approval = lapis_protocol::ApprovalPolicy::Ask;
    let busy = client
        .threads_create("proj", "busy", approval, None)
        .unwrap();
    let idle = client
        .threads_create("proj", "rich", approval, None)
        .unwrap();
    let t = client.turns_submit(&idle.id, "idle-1", "stream").unwrap();
    wait_turn(&mut client, &t.id, settled);
    // The busy thread's turn streamed its 40 chunks and waits.
    let running = client.turns_submit(&busy.id, "busy-1", "stream").unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while events(&server, &busy.id).0 < 40 {
        assert!(Instant::now() < deadline, "the busy turn never streamed");
        std::thread::sleep(Duration::from_millis(20));
    }
    let busy_before = events(&server, &busy.id);
    let idle_before = events(&server, &idle.id);
    assert!(busy_before.0 > 16 && idle_before.0 > 16);
    // No policy at start, so no pass yet: the reload brings one, at once.
    reload(&server, json!({ "maxEventsPerThread": 16 }));
    let history = pass_after(&server, &Value::Null);
    assert_eq!(history["policy"]["maxEventsPerThread"], 16, "{history}");
    let pass = history["lastPass"].clone();
    assert_eq!(pass["skippedBusy"], 1, "{pass}");
    assert_eq!(pass["threads"], 1, "{pass}");
    assert_eq!(pass["events"], (idle_before.0 - 16) as u64, "{pass}");
    assert_eq!(events(&server, &busy.id), busy_before, "the busy thread");
    assert_eq!(events(&server, &idle.id).0, 16);
    assert!(
        client.turns_get(&running.id).unwrap().state.as_str() == "running",
        "the turn runs on"
    );
    // Settled, the thread is the next pass's (a changed policy wakes it).
    client.turns_cancel(&running.id).unwrap();
    wait_turn(&mut client, &running.id, settled);
    reload(&server, json!({ "maxEventsPerThread": 17 }));
    let history = pass_after(&server, &pass);
    let pass = history["lastPass"].clone();
    assert_eq!(pass["skippedBusy"], 0, "{pass}");
    assert_eq!(events(&server, &busy.id).0, 17);
    // The pass is kept: after a restart without any policy, `status`
    // still shows it (and no pass runs).
    server.stop();
    server.edit_config(|c| {
        c.as_object_mut().unwrap().remove("history");
    });
    server.spawn();
    let shown = pass_after(&server, &Value::Null);
    assert_eq!(shown["lastPass"], pass, "{shown}");
    assert!(shown["policy"].is_null(), "{shown}");
    server.stop();
    server.ctx.run(["journal", "verify"]).success();
}
