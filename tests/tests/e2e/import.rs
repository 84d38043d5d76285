//! Issue 44 item 5's import through the real binary: a bundle exported by
//! controller A (`threads export`) is imported into controller B (its own
//! HOME) as a new thread with new ids, its turns settled, its content as
//! exported, a `thread_imported` receipt, the chain verifying; a tampered
//! bundle is refused naming its byte range with nothing written; a second
//! import is a second thread; the imported thread takes a new turn and a
//! continuation; kill -9 inside the import leaves no imported thread.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::acp_serve::fixture;
use crate::serve_support::Server;
use lapis_e2e::wait::{settled, wait_turn};
use lapis_protocol::TurnState;

const MARKER: &str = "MARKER-e2e-import-5c1e";

fn providers() -> Value {
    json!({ "rich": fixture(&["--chunks", "2"]) })
}

/// Controller A with a thread of two settled turns (the second continues
/// the first), exported to a file in A's HOME: (A, thread, file, events).
fn exported() -> (Server, String, std::path::PathBuf, u64) {
    let server = Server::start_full(json!({}), providers());
    let mut client = server.client("import-e2e");
    let thread = client
        .threads_create("proj", "rich", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let t1 = client
        .turns_submit(&thread.id, "t-1", &format!("say {MARKER}"))
        .unwrap();
    wait_turn(&mut client, &t1.id, settled);
    let t2 = client
        .turns_continue(&lapis_protocol::params::TurnsContinue {
            turn_id: t1.id.clone(),
            command_id: "t-2".into(),
            prompt: "and again".into(),
            max_turn_seconds: None,
            expect: None,
        })
        .unwrap();
    wait_turn(&mut client, &t2.id, settled);
    let file = server.ctx.home().join("a.bundle");
    let out = server
        .ctx
        .run([
            "threads",
            "export",
            &thread.id,
            "-o",
            file.to_str().unwrap(),
            "--json",
        ])
        .success()
        .json();
    let events = out["events"].as_u64().unwrap();
    (server, thread.id, file, events)
}

/// Threads of the CLI's application (the importer's) on `server`.
fn thread_count(server: &Server) -> usize {
    let listed = server.ctx.run(["threads", "list", "--json"]);
    let listed = listed.success().json();
    listed["threads"].as_array().unwrap().len()
}

#[test]
fn a_bundle_imports_into_another_controller_as_a_new_thread() {
    let (a, source, file, events) = exported();
    let mut b = Server::start_full(json!({}), providers());
    let bundle = b.ctx.home().join("in.bundle");
    std::fs::copy(&file, &bundle).unwrap();
    let path = bundle.to_str().unwrap();

    // B's `proj` is another directory: the workspace must be named.
    let refused = b.ctx.run(["threads", "import", path, "--json"]);
    refused.expect_code(2);
    assert_eq!(refused.json()["error"]["code"], "workspace_required");
    assert!(refused.stderr.contains("--workspace") || refused.stdout.contains("--workspace"));

    // One byte flipped: refused offline with its range, nothing written.
    let text = std::fs::read_to_string(&bundle).unwrap();
    let at = text.find(MARKER).unwrap();
    let mut edited = text.clone().into_bytes();
    edited[at] ^= 0x01;
    let bad = b.ctx.home().join("edited.bundle");
    std::fs::write(&bad, &edited).unwrap();
    let tampered = b.ctx.run([
        "threads",
        "import",
        bad.to_str().unwrap(),
        "--workspace",
        "proj",
        "--json",
    ]);
    tampered.expect_code(2);
    let err = tampered.json();
    assert_eq!(err["error"]["code"], "bundle_tampered", "{err}");
    let (start, end) = (
        err["error"]["details"]["start"].as_u64().unwrap() as usize,
        err["error"]["details"]["end"].as_u64().unwrap() as usize,
    );
    assert!(start <= at && at < end, "{err}");
    assert_eq!(thread_count(&b), 0, "nothing written");

    let imported = b
        .ctx
        .run(["threads", "import", path, "--workspace", "proj", "--json"])
        .success()
        .json();
    let new = imported["thread"]["id"].as_str().unwrap().to_owned();
    assert_ne!(new, source);
    let receipt = &imported["receipt"];
    assert_eq!(receipt["sourceThreadId"], source.as_str(), "{imported}");
    assert_eq!(receipt["events"], events, "{imported}");
    assert_eq!(receipt["turns"], 2, "{imported}");
    assert_eq!(receipt["pruned"], 0, "{imported}");
    assert_eq!(receipt["bundleSha256"].as_str().unwrap().len(), 64);

    // Shown with its settled turns under new ids, continuation linked.
    // The imported thread is the importer's: the CLI's application.
    let mut client = b.client("lapis-cli");
    let turns = client.turns_list(Some(&new)).unwrap();
    assert_eq!(turns.len(), 2);
    assert!(turns.iter().all(|t| t.state == TurnState::Completed));
    let source_turns = a.client("import-e2e").turns_list(Some(&source)).unwrap();
    assert!(
        turns
            .iter()
            .all(|t| source_turns.iter().all(|s| s.id != t.id))
    );
    let shown = b.ctx.run(["threads", "show", &new]);
    shown.success();
    for t in &turns {
        assert!(shown.stdout.contains(&t.id), "{}", shown.stdout);
    }
    let listed = b.ctx.run(["turns", "list", "--thread", &new, "--json"]);
    let listed = listed.success().json().to_string();
    assert!(turns.iter().all(|t| listed.contains(&t.id)), "{listed}");

    // Its export verifies and holds the content and the receipt.
    let again = b.ctx.home().join("b.bundle");
    b.ctx
        .run(["threads", "export", &new, "-o", again.to_str().unwrap()])
        .success();
    b.ctx
        .run(["threads", "export", "--verify", again.to_str().unwrap()])
        .success();
    let text = std::fs::read_to_string(&again).unwrap();
    assert!(text.contains(MARKER));
    assert!(text.contains("\"kind\":\"thread_imported\""));
    assert_eq!(
        text.matches(&source).count(),
        1,
        "only the receipt names the source"
    );

    // A second import is a second thread.
    let second = b
        .ctx
        .run(["threads", "import", path, "--workspace", "proj", "--json"])
        .success()
        .json();
    assert_ne!(second["thread"]["id"], new.as_str());
    assert_eq!(thread_count(&b), 2);

    // The imported thread goes on: a new turn, and a continuation of an
    // imported one.
    let t = client.turns_submit(&new, "t-3", "more").unwrap();
    wait_turn(&mut client, &t.id, settled);
    assert_eq!(client.turns_get(&t.id).unwrap().state, TurnState::Completed);
    let c = client
        .turns_continue(&lapis_protocol::params::TurnsContinue {
            turn_id: turns[1].id.clone(),
            command_id: "t-4".into(),
            prompt: "go on".into(),
            max_turn_seconds: None,
            expect: None,
        })
        .unwrap();
    wait_turn(&mut client, &c.id, settled);
    assert_eq!(client.turns_get(&c.id).unwrap().state, TurnState::Completed);
    drop(client);

    b.stop();
    b.ctx.run(["journal", "verify"]).success();
    // Without a controller, import refuses (the CLI never writes the
    // database itself).
    let down = b
        .ctx
        .run(["threads", "import", path, "--workspace", "proj", "--json"]);
    down.expect_code(3);
    b.spawn();
    b.finish(&[], &[]);
    a.finish(&[], &[]);
}

/// `kill -9` inside the import's transaction (its rows written, not its
/// receipt): after a restart there is no imported thread, the journal
/// verifies, and importing again works.
#[test]
fn kill_9_during_an_import_leaves_no_thread() {
    let (a, _, file, _) = exported();
    let mut b = Server::start_full(json!({}), providers());
    let path = file.to_str().unwrap().to_owned();
    b.stop();
    b.spawn_with_env(&[("LAPIS_IMPORT_FAULT_PAUSE", "before-receipt")]);
    let mut import = b
        .ctx
        .command(["threads", "import", &path, "--workspace", "proj"]);
    import
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut import = import.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !b
        .log_text()
        .contains("lapis-fault-pause: import before-receipt")
    {
        assert!(Instant::now() < deadline, "the import never paused");
        std::thread::sleep(Duration::from_millis(20));
    }
    b.stop_with("-KILL");
    let _ = import.wait();
    b.ctx.run(["journal", "verify"]).success();
    b.spawn();
    assert_eq!(thread_count(&b), 0, "the old state: no imported thread");
    b.ctx
        .run(["threads", "import", &path, "--workspace", "proj"])
        .success();
    assert_eq!(thread_count(&b), 1);
    b.stop();
    b.ctx.run(["journal", "verify"]).success();
    b.spawn();
    b.finish(&[], &[]);
    a.finish(&[], &[]);
}
