//! Each turn's prepared configuration through the real binary: recorded at
//! claim for restricted and unrestricted turns, shown by `turns.get`,
//! `turns show` and thread snapshots, journaled as a metadata-only
//! `turn_prepared` event that survives metadata-only retention and a
//! restart, and taken from the thread and provider as they are at claim.

use lapis_protocol::client::Client;
use lapis_protocol::{EventKind, JournalEvent, Payload, TurnState};
use serde_json::{Value, json};

use crate::policy::{app, fixture, settle};
use crate::serve_support::{OWNER, Server};

/// Every event of `turn`, owner-wide (works for metadata-only threads
/// after a restart, where a thread replay is `transcript_unavailable`).
fn events_of(client: &mut Client, turn: &str) -> Vec<JournalEvent> {
    let page = client.journal_replay(None, 0, None).unwrap();
    page.events
        .into_iter()
        .filter(|e| e.turn_id.as_deref() == Some(turn))
        .collect()
}

fn with(mut provider: Value, extra: Value) -> Value {
    for (k, v) in extra.as_object().unwrap() {
        provider[k] = v.clone();
    }
    provider
}

#[test]
fn each_turn_records_what_it_ran_under_and_the_record_survives_metadata_only_retention() {
    let server_providers = json!({
        "modal": with(fixture(&["--advertise"]), json!({
            "restrictedMode": "plan",
            "vcsIdentity": {"name": "Lapis Bot", "email": "bot@example.com"},
        })),
        "open": fixture(&[]),
    });
    let mut server = Server::start_full(json!({}), server_providers);
    let mut c = app(&server, OWNER, "preparer");

    // A restricted, allow-all, metadata-only thread.
    let created = c
        .call_value(
            "threads.create",
            json!({ "workspaceId": "proj", "provider": "modal", "approval": "allow-all",
                    "restricted": true, "retention": "metadata-only" }),
        )
        .unwrap();
    let locked = created["thread"]["id"].as_str().unwrap().to_owned();
    let turn = c.turns_submit(&locked, "r-1", "look only").unwrap();
    assert_eq!(settle(&mut c, &turn.id).state, TurnState::Completed);
    let got = c.turns_get(&turn.id).unwrap();
    let p = serde_json::to_value(got.prepared.as_ref().expect("prepared")).unwrap();
    let fingerprint = p["providerFingerprint"].as_str().unwrap().to_owned();
    assert_eq!(fingerprint.len(), 64);
    assert_eq!(
        p,
        json!({
            "provider": "modal",
            "providerFingerprint": fingerprint,
            "approval": {"requested": "allow-all", "effective": "ask", "suppressed": ["restricted"]},
            "restricted": true,
            "restrictedMode": "plan",
            "allowUnrestricted": false,
            "retention": "metadata-only",
            "vcsIdentity": "Lapis Bot",
            "threadVersion": 1,
            "mcpServers": [],
        })
    );
    // The fingerprint is the one the session was bound under.
    let snap = c.threads_get(&locked).unwrap();
    assert_eq!(snap.thread.agent_session.unwrap().fingerprint, fingerprint);
    assert_eq!(snap.recent_turns[0].prepared, got.prepared);

    // Journaled once, right after the claim, with the same value; it never
    // moves the turn (the next state is the dispatch boundary's).
    let events = events_of(&mut c, &turn.id);
    let prepared: Vec<_> = events
        .iter()
        .filter(|e| e.kind == EventKind::TurnPrepared)
        .collect();
    assert_eq!(prepared.len(), 1);
    assert_eq!(
        prepared[0].body(),
        Some(Payload::TurnPrepared(got.prepared.clone().unwrap()))
    );
    let order: Vec<String> = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::TurnState | EventKind::TurnPrepared))
        .map(|e| match e.body() {
            Some(Payload::TurnState(change)) => change.to.as_str().to_owned(),
            _ => "prepared".to_owned(),
        })
        .collect();
    assert_eq!(order[..3], ["preparing", "prepared", "dispatched"]);
    assert_eq!(order.last().map(String::as_str), Some("completed"));

    // An unrestricted allow-all thread through the CLI: automatic approval
    // in effect, structured input never covered.
    let out = server
        .ctx
        .run([
            "threads",
            "create",
            "proj",
            "--provider",
            "open",
            "--approval",
            "allow-all",
            "--command-id",
            "t-open",
        ])
        .success()
        .stdout
        .clone();
    let open = out.trim().to_owned();
    let done = server
        .ctx
        .run([
            "turns",
            "submit",
            &open,
            "--prompt",
            "go",
            "--wait",
            "--json",
            "--command-id",
            "s-open",
        ])
        .success()
        .json();
    let open_turn = done["turn"]["id"].as_str().unwrap().to_owned();
    let shown = server
        .ctx
        .run(["turns", "show", &open_turn, "--json"])
        .success()
        .json();
    let q = &shown["turn"]["prepared"];
    assert_eq!(
        q["approval"],
        json!({"requested": "allow-all", "effective": "allow-all", "suppressed": ["structured_input"]})
    );
    assert_eq!(
        (
            &q["restricted"],
            &q["restrictedMode"],
            &q["retention"],
            &q["vcsIdentity"]
        ),
        (&json!(false), &Value::Null, &json!("full"), &Value::Null)
    );
    assert_ne!(q["providerFingerprint"], json!(fingerprint));
    let plain = server
        .ctx
        .run(["turns", "show", &open_turn])
        .success()
        .stdout
        .clone();
    assert!(
        plain.contains(
            "prepared  provider open, approval allow-all, unrestricted, retention full, thread version 1"
        ),
        "{plain}"
    );

    // A restart: the metadata-only thread's content is gone, its prepared
    // record and event are not.
    server.stop();
    server.spawn();
    let mut c = app(&server, OWNER, "preparer");
    assert_eq!(c.turns_get(&turn.id).unwrap().prepared, got.prepared);
    let events = events_of(&mut c, &turn.id);
    let asked = events
        .iter()
        .find(|e| e.kind == EventKind::UserMessage)
        .unwrap();
    assert!(asked.payload_unavailable);
    let kept = events
        .iter()
        .find(|e| e.kind == EventKind::TurnPrepared)
        .unwrap();
    assert!(!kept.payload_unavailable);
    assert_eq!(
        kept.body(),
        Some(Payload::TurnPrepared(got.prepared.clone().unwrap()))
    );
    server.finish(&[], &[]);
}

#[test]
fn a_turn_is_prepared_with_the_thread_and_provider_as_they_are_at_claim() {
    let providers = json!({
        "hang": fixture(&["--hang"]),
        "open": fixture(&[]),
    });
    let server = Server::start_full(json!({}), providers);
    let mut c = app(&server, OWNER, "preparer");
    // A hanging turn holds the workspace, so the next one stays queued.
    let blocker = c
        .threads_create("proj", "hang", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let holding = c.turns_submit(&blocker.id, "h-1", "hold").unwrap();
    lapis_e2e::wait::wait_turn(&mut c, &holding.id, |s| s == "dispatched");
    let th = c
        .threads_create("proj", "open", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let first = c.turns_submit(&th.id, "o-1", "one").unwrap();
    assert_eq!(first.state, TurnState::Queued);
    assert_eq!(first.prepared, None);

    // Between submit and claim: a configure is refused (a turn waits), a
    // provider reload is taken.
    let refused = c
        .call_value(
            "threads.configure",
            json!({ "threadId": th.id, "expectedVersion": 1, "approval": "allow-all" }),
        )
        .unwrap_err();
    assert_eq!(refused.code(), "conflict");
    server.reconfigure(|doc| {
        doc["providers"]["open"]["vcsIdentity"] =
            json!({"name": "Reloaded", "email": "r@example.com"});
    });
    c.turns_cancel(&holding.id).unwrap();
    let one = settle(&mut c, &first.id);
    assert_eq!(one.state, TurnState::Completed);
    let p1 = one.prepared.unwrap();
    assert_eq!(
        (p1.thread_version, p1.vcs_identity.as_deref()),
        (1, Some("Reloaded"))
    );

    // Configured after it settled: the next turn runs under version 2.
    let configured = c
        .call_value(
            "threads.configure",
            json!({ "threadId": th.id, "expectedVersion": 1, "approval": "allow-all",
                    "restricted": true }),
        )
        .unwrap();
    assert_eq!(configured["thread"]["version"], 2);
    let second = c.turns_submit(&th.id, "o-2", "two").unwrap();
    let two = settle(&mut c, &second.id);
    let p2 = two.prepared.unwrap();
    assert_eq!(p2.thread_version, 2);
    assert!(p2.restricted);
    assert_eq!(
        serde_json::to_value(&p2.approval).unwrap(),
        json!({"requested": "allow-all", "effective": "ask", "suppressed": ["restricted"]})
    );
    // The fixture offers no modes: restricted without allowUnrestricted
    // fails before the boundary, and the record still says what was asked.
    assert_eq!(two.state, TurnState::Failed);
    assert_eq!(two.outcome.as_deref(), Some("restricted_mode_unavailable"));
    assert_eq!(p2.restricted_mode, None);
    assert_eq!(p1.provider_fingerprint, p2.provider_fingerprint);
    server.finish(&[], &[]);
}
