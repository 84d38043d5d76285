//! Issue 44 item 2 through the real binary: `history` limits applied by
//! the controller in the background. A thread's oldest events go by count
//! and by age under content-free `history_pruned` receipts (an idle
//! thread with nothing left is deleted whole), `status` shows the policy
//! and the last pass, `journal verify` passes across the cut and fails on
//! tampering there, and `kill -9` inside a batch leaves the old state or
//! the new. (A busy thread is left alone: `retention_busy`, and the
//! store's `a_queued_claimed_or_fenced_thread_is_left_alone`.)

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::acp_serve::fixture;
use crate::serve_support::Server;
use lapis_e2e::wait::{settled, wait_turn};
use lapis_protocol::EventKind;

const MARKER: &str = "MARKER-e2e-r3t41n-9c1f";

/// A running server with one thread of four settled turns.
fn server_with_thread() -> (Server, String) {
    let server = Server::start_full(json!({}), json!({ "rich": fixture(&["--chunks", "2"]) }));
    let mut client = server.client("history-e2e");
    let thread = client
        .threads_create("proj", "rich", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    for i in 0..4 {
        let t = client
            .turns_submit(&thread.id, &format!("t-{i}"), &format!("say {MARKER}"))
            .unwrap();
        wait_turn(&mut client, &t.id, settled);
    }
    (server, thread.id)
}

/// `status --json`'s `history`, once it shows a pass other than `seen`
/// (the last pass is kept across restarts).
fn last_pass(server: &Server, seen: &Value) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let doc = server.ctx.run(["status", "--json"]).success().json();
        let pass = &doc["history"]["lastPass"];
        if !pass.is_null() && pass["startedAt"] != seen["startedAt"] {
            return doc["history"].clone();
        }
        assert!(Instant::now() < deadline, "no pass: {doc}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The thread's events as replayed: (kept, receipts).
fn events(server: &Server, thread: &str) -> (usize, usize) {
    let mut client = server.client("history-e2e");
    let page = client.journal_replay(Some(thread), 0, Some(1000)).unwrap();
    let receipts = page
        .events
        .iter()
        .filter(|e| e.kind == EventKind::HistoryPruned)
        .count();
    (page.events.len() - receipts, receipts)
}

#[test]
fn history_prunes_by_count_then_by_age_and_the_journal_verifies_across_the_cut() {
    let (mut server, thread) = server_with_thread();
    let (before, _) = events(&server, &thread);
    assert!(before > 16, "{before} events");
    server.stop();
    server.edit_config(|c| c["history"] = json!({ "maxEventsPerThread": 16 }));
    server.spawn();
    let history = last_pass(&server, &Value::Null);
    assert_eq!(history["policy"]["maxEventsPerThread"], 16, "{history}");
    let pass = &history["lastPass"];
    let first = pass.clone();
    assert_eq!(pass["events"], (before - 16) as u64, "{history}");
    assert_eq!(
        (pass["threads"].clone(), pass["threadsDeleted"].clone()),
        (json!(1), json!(0))
    );
    let (kept, receipts) = events(&server, &thread);
    assert_eq!(kept, 16);
    assert!(receipts >= 1);
    server.stop();
    server.ctx.run(["journal", "verify"]).success();
    // By age: everything is two days old to the pass; the idle thread goes.
    server.edit_config(|c| c["history"] = json!({ "maxAgeDays": 1 }));
    server.spawn_with_env(&[("LAPIS_RETENTION_SKEW_DAYS", "2")]);
    let pass = last_pass(&server, &first)["lastPass"].clone();
    assert_eq!(pass["threadsDeleted"], 1, "{pass}");
    assert_eq!(pass["events"], 16, "{pass}");
    let shown = server.ctx.run(["threads", "show", &thread, "--json"]);
    assert_eq!(shown.json()["error"]["code"], "thread_deleted");
    server.stop();
    server.ctx.run(["journal", "verify"]).success();
    for f in ["controller.db", "controller.db-wal"] {
        let bytes = std::fs::read(server.home.join(f)).unwrap_or_default();
        assert!(
            !bytes.windows(MARKER.len()).any(|w| w == MARKER.as_bytes()),
            "pruned content is still in {f}"
        );
    }
    // Tampering across the cut: a tombstone's stored hash edited.
    let db = server.home.join("controller.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute(
        "UPDATE events SET hash = zeroblob(32) WHERE seq = \
         (SELECT seq FROM events WHERE kind = 'tombstone' ORDER BY seq LIMIT 1 OFFSET 2)",
        [],
    )
    .unwrap();
    drop(conn);
    let verify = server.ctx.run(["journal", "verify", "--json"]);
    assert_ne!(verify.code, Some(0));
    assert!(
        verify.stdout.contains("tombstone") || verify.stderr.contains("tombstone"),
        "{} {}",
        verify.stdout,
        verify.stderr
    );
}

/// `kill -9` inside a batch (its tombstones written, not its receipt):
/// after a restart the thread is whole (the old state) and verifies; the
/// next pass prunes it and the journal verifies again.
#[test]
fn kill_9_during_a_retention_batch_leaves_the_old_state() {
    let (mut server, thread) = server_with_thread();
    let (before, _) = events(&server, &thread);
    server.stop();
    server.edit_config(|c| c["history"] = json!({ "maxEventsPerThread": 16 }));
    server.spawn_with_env(&[("LAPIS_RETENTION_FAULT_PAUSE", "before-commit")]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !server
        .log_text()
        .contains("lapis-fault-pause: retention before-commit")
    {
        assert!(Instant::now() < deadline, "the batch never paused");
        std::thread::sleep(Duration::from_millis(20));
    }
    server.stop_with("-KILL");
    server.ctx.run(["journal", "verify"]).success();
    server.spawn_with_env(&[("LAPIS_RETENTION_FAULT_PAUSE", "never")]);
    // The pass after the restart ran from the old state.
    let pass = last_pass(&server, &Value::Null)["lastPass"].clone();
    assert_eq!(pass["events"], (before - 16) as u64, "{pass}");
    assert_eq!(events(&server, &thread).0, 16);
    server.stop();
    server.ctx.run(["journal", "verify"]).success();
    server.spawn();
    server.finish(&[], &[]);
}
