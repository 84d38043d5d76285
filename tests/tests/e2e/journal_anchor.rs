//! Issue 24 item 4 through the real binary: what is dispatched is what was
//! chained (a queued prompt edited at rest fails closed, the agent never
//! receives it); a dispatched turn's raw prompt leaves the database; the
//! journal's head is anchored outside the database, so a deleted tail or a
//! truncated WAL fails the next `serve`, while `kill -9` at any moment
//! never stops a healthy database from reopening.

use std::process::Command;
use std::time::{Duration, Instant};

use lapis_protocol::ResolveAs;
use serde_json::{Value, json};

use crate::acp_serve::fixture;
use crate::serve_support::Server;
use crate::serve_turns::kill_agents_in;
use lapis_e2e::wait::{settled, wait_turn};

/// `sqlite3` from PATH, or the test is skipped (failed under CI).
fn sqlite3() -> Option<&'static str> {
    let ok = Command::new("sqlite3")
        .arg("-version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        lapis_e2e::skip::skip("the sqlite3 command-line tool is not installed");
    }
    ok.then_some("sqlite3")
}

fn sql(sqlite3: &str, db: &std::path::Path, statement: &str) -> String {
    let out = Command::new(sqlite3)
        .arg(db)
        .arg(statement)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn anchor_of(server: &Server) -> Value {
    let text = std::fs::read(server.home.join("controller.db-anchor")).unwrap();
    serde_json::from_slice(&text).unwrap()
}

/// A turn waiting behind a busy workspace while serve is stopped; its
/// prompt edited with sqlite3; restarted, the turn fails closed as
/// `prompt_mismatch` and the agent never receives the edited text (nor
/// the original), while the workspace takes the next turn.
#[test]
fn a_queued_prompt_edited_at_rest_fails_closed_and_never_reaches_the_agent() {
    let Some(sqlite3) = sqlite3() else { return };
    let ctx = lapis_e2e::TestContext::new();
    let ledger = ctx.home().join("ledger.txt");
    let ledger_arg = ledger.to_str().unwrap().to_owned();
    let mut server = Server::start_in(
        ctx,
        json!({}),
        json!({
            "hang": fixture(&["--hang"]),
            "ledger": fixture(&["--ledger", &ledger_arg, "--chunks", "1"]),
        }),
    );
    let mut client = server.client("acp-e2e");
    let busy = client
        .threads_create("proj", "hang", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let checked = client
        .threads_create("proj", "ledger", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let holder = client.turns_submit(&busy.id, "hold-1", "hold").unwrap();
    wait_turn(&mut client, &holder.id, |s| {
        s == "dispatched" || s == "running"
    });
    let queued = client
        .turns_submit(&checked.id, "typed-1", "the prompt as typed")
        .unwrap();
    assert_eq!(queued.state.as_str(), "queued");
    drop(client);
    server.stop();
    kill_agents_in(&server.project);
    let db = server.home.join("controller.db");
    assert_eq!(
        sql(
            sqlite3,
            &db,
            &format!("SELECT state FROM turns WHERE id = '{}'", queued.id)
        ),
        "queued"
    );
    sql(
        sqlite3,
        &db,
        &format!(
            "UPDATE turns SET prompt = 'EDITED AT REST: rm -rf ~' WHERE id = '{}'",
            queued.id
        ),
    );
    server.spawn();
    let mut client = server.client("acp-e2e");
    // The stop settled the hanging turn as the state machine says; if that
    // fenced the workspace, the owner releases it.
    let holder = client.turns_get(&holder.id).unwrap();
    if holder.state.is_fenced() {
        client
            .turns_resolve(&holder.id, ResolveAs::Failed, true)
            .unwrap();
    }
    let failed = wait_turn(&mut client, &queued.id, settled);
    assert_eq!(
        (failed.state.as_str(), failed.outcome.as_deref()),
        ("failed", Some("prompt_mismatch"))
    );
    // The workspace is not wedged: the next turn runs.
    let next = client
        .turns_submit(&checked.id, "after-1", "the next prompt")
        .unwrap();
    assert_eq!(
        wait_turn(&mut client, &next.id, settled).state.as_str(),
        "completed"
    );
    let received = std::fs::read_to_string(&ledger).unwrap_or_default();
    assert!(received.contains("the next prompt"), "{received}");
    assert!(
        !received.contains("EDITED") && !received.contains("as typed"),
        "{received}"
    );
    // The owner is told why, in the log as well as the outcome.
    drop(client);
    server.stop();
    assert!(server.log_text().contains("prompt_mismatch"));
    server.finish(&[], &[]);
}

/// A credential typed into a prompt: after the turn completes and serve
/// stops, no byte of controller.db (or a WAL) holds it; the journal keeps
/// only its redacted copy.
#[test]
fn a_completed_turns_raw_prompt_leaves_no_trace_in_the_database_files() {
    let marker = "ghp_M4rk3rUniqueLapisPromptAtRest0000042";
    assert_eq!(marker.len(), 40);
    let mut server = Server::start_full(json!({}), json!({ "rich": fixture(&["--chunks", "2"]) }));
    server.ctx.register_secret(marker);
    let mut client = server.client("acp-e2e");
    let thread = client
        .threads_create("proj", "rich", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let turn = client
        .turns_submit(
            &thread.id,
            "secret-1",
            &format!("use the token {marker} please"),
        )
        .unwrap();
    assert_eq!(
        wait_turn(&mut client, &turn.id, settled).state.as_str(),
        "completed"
    );
    drop(client);
    server.stop();
    let mut seen = 0;
    for name in ["controller.db", "controller.db-wal"] {
        let Ok(bytes) = std::fs::read(server.home.join(name)) else {
            continue;
        };
        seen += 1;
        assert!(
            !bytes.windows(marker.len()).any(|w| w == marker.as_bytes()),
            "the raw prompt is in {name}"
        );
        if name == "controller.db" {
            let hay = String::from_utf8_lossy(&bytes);
            assert!(
                hay.contains("[REDACTED:github-token]"),
                "the redacted record is kept"
            );
        }
    }
    assert!(seen >= 1);
    server.finish(&[], &[]);
}

/// Deleting the journal's last rows leaves a consistent, shorter chain:
/// the anchor refuses it at `serve` and in `journal verify`, until the
/// owner accepts the database with `journal reanchor`.
#[test]
fn a_journal_tail_deleted_with_sqlite3_fails_serve_and_verify_until_reanchored() {
    let Some(sqlite3) = sqlite3() else { return };
    let mut server = Server::start_full(json!({}), json!({ "rich": fixture(&["--chunks", "3"]) }));
    let mut client = server.client("acp-e2e");
    let thread = client
        .threads_create("proj", "rich", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    for i in 0..2 {
        let t = client
            .turns_submit(&thread.id, &format!("t-{i}"), "go")
            .unwrap();
        wait_turn(&mut client, &t.id, settled);
    }
    drop(client);
    server.stop();
    let db = server.home.join("controller.db");
    let events: u64 = sql(sqlite3, &db, "SELECT count(*) FROM events")
        .parse()
        .unwrap();
    assert_eq!(
        anchor_of(&server)["events"],
        events,
        "a clean stop anchors every event"
    );
    sql(
        sqlite3,
        &db,
        "DELETE FROM events WHERE seq > (SELECT max(seq) - 3 FROM events)",
    );
    let out = server.ctx.run(["serve"]);
    assert_ne!(out.code, Some(0));
    assert!(
        out.stderr.contains("does not match its anchor")
            && out.stderr.contains(&format!("names {events} events"))
            && out.stderr.contains("journal reanchor"),
        "{}",
        out.stderr
    );
    let verify = server.ctx.run(["journal", "verify", "--json"]);
    verify.expect_code(2);
    let err = verify.json();
    assert_eq!(err["error"]["code"], "journal_tampered", "{err}");
    assert_eq!(err["error"]["details"]["check"], "anchor", "{err}");
    assert_eq!(err["error"]["details"]["anchored"], events, "{err}");
    assert_eq!(err["error"]["details"]["events"], events - 3, "{err}");
    let accepted = server
        .ctx
        .run(["journal", "reanchor", "--json"])
        .success()
        .json();
    assert_eq!(accepted["events"], events - 3, "{accepted}");
    server.ctx.run(["journal", "verify"]).success();
    server.spawn();
    server.finish(&[], &[]);
}

/// Acknowledged turns whose WAL frames are cut off after a crash: the
/// database alone is consistent and older than its anchor, so `serve`
/// refuses it instead of silently forgetting them.
#[test]
fn a_wal_truncated_after_acknowledged_turns_fails_serve() {
    let mut server = Server::start_full(json!({}), json!({ "rich": fixture(&["--chunks", "2"]) }));
    let mut client = server.client("acp-e2e");
    let thread = client
        .threads_create("proj", "rich", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let first = client.turns_submit(&thread.id, "w-0", "go").unwrap();
    wait_turn(&mut client, &first.id, settled);
    drop(client);
    // A clean stop: everything so far is in controller.db itself.
    server.stop();
    server.spawn();
    let mut client = server.client("acp-e2e");
    for i in 1..4 {
        let t = client
            .turns_submit(&thread.id, &format!("w-{i}"), "go")
            .unwrap();
        assert_eq!(
            wait_turn(&mut client, &t.id, settled).state.as_str(),
            "completed"
        );
    }
    // The anchor follows the journal within its interval once idle.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let verified = server
            .ctx
            .run(["journal", "verify", "--json"])
            .success()
            .json();
        if anchor_of(&server)["events"] == verified["events"] {
            break;
        }
        assert!(Instant::now() < deadline, "the anchor never caught up");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(client);
    server.kill9();
    let anchored = anchor_of(&server)["events"].as_u64().unwrap();
    let wal = server.home.join("controller.db-wal");
    assert!(
        std::fs::metadata(&wal).unwrap().len() > 0,
        "the turns are in the WAL"
    );
    std::fs::OpenOptions::new()
        .write(true)
        .open(&wal)
        .unwrap()
        .set_len(0)
        .unwrap();
    let out = server.ctx.run(["serve"]);
    assert_ne!(out.code, Some(0));
    assert!(
        out.stderr.contains("does not match its anchor")
            && out.stderr.contains(&format!("names {anchored} events")),
        "{}",
        out.stderr
    );
    server.finish(&[], &[]);
}

/// `kill -9` of serve at pseudo-random moments while turns stream: every
/// restart opens (the anchor is never ahead of what is durable) and the
/// journal verifies.
#[test]
fn kill_9_at_random_moments_under_load_always_reopens() {
    let mut server = Server::start_workspaces(
        json!({}),
        json!({ "rich": fixture(&["--chunks", "40"]) }),
        &["second"],
    );
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut submitted = 0;
    for round in 0..8 {
        let mut client = server.client("acp-e2e");
        // Settle what the last kill fenced, so each round has load.
        for t in client.turns_list(None).unwrap() {
            if matches!(t.state.as_str(), "submission_unknown" | "interrupted") {
                client
                    .turns_resolve(&t.id, ResolveAs::Failed, true)
                    .unwrap();
            }
        }
        for ws in ["proj", "second"] {
            let thread = client
                .threads_create(ws, "rich", lapis_protocol::ApprovalPolicy::Ask, None)
                .unwrap();
            for i in 0..3 {
                client
                    .turns_submit(&thread.id, &format!("k-{round}-{ws}-{i}"), "go")
                    .unwrap();
                submitted += 1;
            }
        }
        drop(client);
        std::thread::sleep(Duration::from_millis(next() % 400));
        server.kill9();
        kill_agents_in(&server.project);
        kill_agents_in(&server.ctx.home().join("second"));
        // A healthy database always reopens: `spawn` fails the test if
        // serve exits instead.
        server.spawn();
        server.ctx.run(["journal", "verify"]).success();
    }
    assert_eq!(submitted, 48);
    server.finish(&[], &[]);
}
