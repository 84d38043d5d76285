//! Issue 15, redaction and the tamper-evident journal, through the real
//! binary: credentials an agent prints (streamed split across chunks, in a
//! tool call, on stderr) reach no journal, no database byte and no log; a
//! metadata-only thread logs no agent stderr; an edited row fails
//! `journal verify` and the next `serve` naming its sequence.

use std::process::Command;

use lapis_service::test_support::sample_credentials;
use serde_json::{Value, json};

use crate::acp_serve::fixture;
use crate::serve_support::Server;
use lapis_e2e::wait::{settled, wait_turn};

#[test]
fn credentials_an_agent_prints_reach_no_journal_database_byte_or_log() {
    let mut server = Server::start_full(
        json!({}),
        json!({
            "leaky": fixture(&["--secrets"]),
            "quiet": fixture(&["--stderr", "2", "--chunks", "1"]),
        }),
    );
    let samples = sample_credentials();
    // The leak check at the end scans every captured output and every file
    // under HOME (database, WAL, serve's log) for each of these.
    for s in &samples {
        server.ctx.register_secret(s.secret.clone());
    }
    let mut client = server.client("acp-e2e");
    let thread = client
        .threads_create("proj", "leaky", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let turn = client
        .turns_submit(&thread.id, "s-1", "scan the repo")
        .unwrap();
    let (state, _) = {
        let t = wait_turn(&mut client, &turn.id, settled);
        (t.state.as_str().to_owned(), t.outcome)
    };
    assert_eq!(state, "completed");
    let t = client.turns_get(&turn.id).unwrap();
    assert!(t.redactions > samples.len() as u64, "{}", t.redactions);

    let page = client.journal_replay(Some(&thread.id), 0, None).unwrap();
    let reply: String = page
        .events
        .iter()
        .filter_map(lapis_e2e::journal::reply_text)
        .collect();
    for s in &samples {
        assert!(
            reply.contains(&format!("[REDACTED:{}]", s.detector)),
            "{} not marked in {reply}",
            s.detector
        );
    }
    // Each sample was split in its middle: the two halves became one event
    // (a secret spans them), never two events holding a half each.
    let chunks = page
        .events
        .iter()
        .filter(|e| e.kind.as_str() == "message_chunk")
        .count();
    assert!(chunks >= samples.len(), "{chunks}");
    let tool = lapis_e2e::journal::last_tool_call(&page.events).unwrap();
    assert_eq!(tool.id, "secret-call", "an id without a credential is kept");
    assert_eq!(
        tool.title.as_deref(),
        Some("curl -H 'Authorization: Bearer [REDACTED:lapis-token]'")
    );
    // What a client read is scanned by the leak check too.
    server
        .ctx
        .capture(&serde_json::to_string(&page.events).unwrap());

    // A metadata-only thread's agent logs nothing; a full one logs redacted.
    let quiet: Value = client
        .call_value(
            "threads.create",
            json!({ "workspaceId": "proj", "provider": "quiet", "retention": "metadata-only" }),
        )
        .unwrap();
    let quiet_turn = client
        .turns_submit(quiet["thread"]["id"].as_str().unwrap(), "q-1", "hi")
        .unwrap();
    assert_eq!(
        wait_turn(&mut client, &quiet_turn.id, settled)
            .state
            .as_str(),
        "completed"
    );
    drop(client);
    server.stop();
    let log = server.log_text();
    assert!(log.contains("debug: [REDACTED:github-token]"), "{log}");
    assert!(log.contains("[REDACTED:private-key]"), "{log}");
    assert!(!log.contains("fixture stderr line"), "{log}");

    // Bytes of every database file hold none of the secrets.
    for name in ["controller.db", "controller.db-wal"] {
        let Ok(bytes) = std::fs::read(server.home.join(name)) else {
            continue;
        };
        let hay = String::from_utf8_lossy(&bytes);
        for s in &samples {
            assert!(!hay.contains(&s.secret), "{} in {name}", s.detector);
        }
    }
    server.finish(&[], &[]);
}

/// `sqlite3` from PATH, if present.
fn sqlite3() -> Option<&'static str> {
    let ok = Command::new("sqlite3")
        .arg("-version")
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then_some("sqlite3")
}

#[test]
fn a_row_edited_with_sqlite3_fails_verify_and_startup_naming_its_seq() {
    let Some(sqlite3) = sqlite3() else {
        lapis_e2e::skip::skip("the sqlite3 command-line tool is not installed");
        return;
    };
    let mut server = Server::start_full(json!({}), json!({ "rich": fixture(&["--chunks", "4"]) }));
    let mut client = server.client("acp-e2e");
    let thread = client
        .threads_create("proj", "rich", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let turn = client.turns_submit(&thread.id, "v-1", "go").unwrap();
    assert_eq!(
        wait_turn(&mut client, &turn.id, settled).state.as_str(),
        "completed"
    );
    // Verify works while serve runs (read-only, WAL snapshot) ...
    let live = server
        .ctx
        .run(["journal", "verify", "--json"])
        .success()
        .json();
    assert_eq!(live["verified"], true);
    drop(client);
    server.stop();
    // ... and while it is stopped.
    let report = server
        .ctx
        .run(["journal", "verify", "--json"])
        .success()
        .json();
    let events = report["events"].as_u64().unwrap();
    assert!(events >= 6, "{report}");
    let plain = server
        .ctx
        .run(["journal", "verify"])
        .success()
        .stdout
        .clone();
    assert!(plain.starts_with(&format!("journal verified: {events} events")));

    let db = server.home.join("controller.db");
    let seq: i64 = 3;
    let edit = Command::new(sqlite3)
        .arg(&db)
        .arg(format!(
            "UPDATE events SET at = at + 1 WHERE seq = {seq}; \
             UPDATE events SET payload = replace(payload, 'chunk', 'CHUNK') \
             WHERE seq = (SELECT max(seq) FROM events WHERE payload LIKE '%chunk%');"
        ))
        .output()
        .unwrap();
    assert!(
        edit.status.success(),
        "{}",
        String::from_utf8_lossy(&edit.stderr)
    );
    let failed = server.ctx.run(["journal", "verify", "--json"]);
    failed.expect_code(2);
    let err = failed.json();
    assert_eq!(err["error"]["code"], "journal_tampered", "{err}");
    assert_eq!(err["error"]["details"]["seq"], seq, "{err}");

    // Startup validation fails closed on the same row.
    let out = server.ctx.run(["serve"]);
    assert_ne!(out.code, Some(0));
    let stderr = &out.stderr;
    // It names the chain check and the edited row, not just any digit.
    assert!(
        stderr.contains("chain") && stderr.contains(&format!("`{seq}`")),
        "{stderr}"
    );
    server.finish(&[], &[]);
}
