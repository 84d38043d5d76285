//! Issue 44 items 1 and 3 through the real binary: `threads delete` leaves
//! a content-free receipt, a journal that verifies and no content in the
//! database file; `workspaces remove --purge`; `kill -9` in the middle of
//! a deletion leaves the old state (the deletion is one transaction).

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use serde_json::json;

use crate::acp_serve::fixture;
use crate::serve_support::Server;
use lapis_e2e::wait::{settled, wait_turn};

const MARKER: &str = "MARKER-e2e-5a7c0d1b";

/// A running server with one thread holding one settled turn whose prompt
/// is [`MARKER`].
fn server_with_thread() -> (Server, String) {
    let server = Server::start_full(json!({}), json!({ "rich": fixture(&["--chunks", "2"]) }));
    let mut client = server.client("delete-e2e");
    let thread = client
        .threads_create("proj", "rich", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let t = client
        .turns_submit(&thread.id, "t-1", &format!("say {MARKER}"))
        .unwrap();
    wait_turn(&mut client, &t.id, settled);
    (server, thread.id)
}

fn holds_marker(server: &Server) -> bool {
    ["controller.db", "controller.db-wal"].iter().any(|f| {
        std::fs::read(server.home.join(f))
            .is_ok_and(|b| b.windows(MARKER.len()).any(|w| w == MARKER.as_bytes()))
    })
}

#[test]
fn threads_delete_leaves_a_receipt_a_journal_that_verifies_and_no_content() {
    let (mut server, thread) = server_with_thread();
    let deleted = server
        .ctx
        .run(["threads", "delete", &thread, "--json"])
        .success()
        .json();
    let receipt = &deleted["receipt"];
    assert_eq!(receipt["threadId"], thread.as_str(), "{deleted}");
    assert_eq!(receipt["turns"], 1, "{deleted}");
    assert!(receipt["events"].as_u64().unwrap() >= 4, "{deleted}");
    assert!(!deleted.to_string().contains(MARKER));
    // Every read names the deletion; the list no longer shows it.
    let shown = server.ctx.run(["threads", "show", &thread, "--json"]);
    assert_ne!(shown.code, Some(0));
    assert_eq!(shown.json()["error"]["code"], "thread_deleted");
    let mut client = server.client("delete-e2e");
    let err = client.journal_replay(Some(&thread), 0, None).unwrap_err();
    assert_eq!(err.code(), "thread_deleted");
    let again = client.threads_delete(&thread).unwrap_err();
    assert_eq!(again.code(), "thread_deleted");
    assert!(client.threads_list().unwrap().is_empty());
    // The owner-wide journal keeps the receipt, and nothing else of it.
    let page = client.journal_replay(None, 0, Some(1000)).unwrap();
    let of_thread: Vec<_> = page
        .events
        .iter()
        .filter(|e| e.thread_id == thread)
        .collect();
    assert_eq!(of_thread.len(), 1);
    assert_eq!(of_thread[0].kind, lapis_protocol::EventKind::ThreadDeleted);
    drop(client);
    server.stop();
    assert!(
        !holds_marker(&server),
        "deleted content is still in the file"
    );
    server.ctx.run(["journal", "verify"]).success();
    server.spawn();
    server.finish(&[], &[]);
}

#[test]
fn workspaces_remove_purge_deletes_its_threads_first() {
    let server = Server::start_full(json!({}), json!({ "rich": fixture(&["--chunks", "1"]) }));
    let dir = server.ctx.home().join("other");
    std::fs::create_dir_all(&dir).unwrap();
    let mut client = server.client("delete-e2e");
    client
        .workspaces_add("other", dir.to_str().unwrap())
        .unwrap();
    let thread = client
        .threads_create("other", "rich", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let t = client.turns_submit(&thread.id, "t-1", "go").unwrap();
    wait_turn(&mut client, &t.id, settled);
    let removed = server
        .ctx
        .run(["workspaces", "remove", "other", "--purge", "--json"])
        .success()
        .json();
    assert_eq!(removed["threadsDeleted"], 1, "{removed}");
    assert_eq!(removed["threads"], 0, "{removed}");
    assert_eq!(
        client.threads_get(&thread.id).unwrap_err().code(),
        "thread_deleted"
    );
    server.finish(&[], &[]);
}

/// `kill -9` inside the deletion's transaction: after a restart the thread
/// is whole (the old state), the journal verifies, and deleting again
/// works and verifies.
#[test]
fn kill_9_during_a_deletion_leaves_the_old_state() {
    let (mut server, thread) = server_with_thread();
    server.stop();
    let mut serve = server.ctx.command(["serve"]);
    serve
        .env("LAPIS_DELETE_FAULT_PAUSE", "before-commit")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = serve.spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let paused = BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .any(|l| l == "lapis-fault-pause: delete before-commit");
        let _ = tx.send(paused);
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::os::unix::net::UnixStream::connect(server.socket()).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "serve did not come up"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let mut delete = server.ctx.command(["threads", "delete", &thread]);
    delete.stdout(Stdio::null()).stderr(Stdio::null());
    let mut delete = delete.spawn().unwrap();
    assert!(rx.recv().unwrap(), "the deletion never paused");
    child.kill().unwrap();
    child.wait().unwrap();
    let _ = delete.wait();
    server.ctx.run(["journal", "verify"]).success();
    server.spawn();
    let mut client = server.client("delete-e2e");
    assert_eq!(
        client.turns_list(Some(&thread)).unwrap().len(),
        1,
        "old state"
    );
    client.threads_delete(&thread).unwrap();
    drop(client);
    server.stop();
    server.ctx.run(["journal", "verify"]).success();
    server.spawn();
    server.finish(&[], &[]);
}
