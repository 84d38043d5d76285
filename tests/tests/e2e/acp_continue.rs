//! What was asked and what comes next, through the real `serve`: every
//! prompt is a `user_message` event that `turns show` includes (never a log
//! line), and `turns.continue` / `turns continue` make a linked attempt
//! after a settled turn — the new instructions alone on a kept or loaded
//! session, a bounded digest of the prior turn beside them on a new one.

use std::time::{Duration, Instant};

use lapis_protocol::client::{Client, ClientError};
use lapis_protocol::params::{ThreadsCreate, TurnsContinue};
use lapis_protocol::{Thread, Turn};
use serde_json::{Value, json};

use crate::acp::arg;
use crate::serve_support::Server;
use lapis_e2e::wait::settle;

fn fixture(args: &[&str]) -> Value {
    json!({ "command": env!("CARGO_BIN_EXE_fixture-agent"), "args": args })
}

/// Opens a thread on `proj` that asks for permissions (also used by the
/// transcript tests).
pub(crate) fn thread(
    client: &mut Client,
    provider: &str,
    retention: Option<lapis_protocol::Retention>,
) -> Thread {
    let mut p = ThreadsCreate::new("proj", provider).approval(lapis_protocol::ApprovalPolicy::Ask);
    p.retention = retention;
    let r: Value = client.call("threads.create", &p).unwrap();
    serde_json::from_value(r["thread"].clone()).unwrap()
}

fn completes(client: &mut Client, turn: &Turn) -> Turn {
    lapis_e2e::wait::settles_as(client, &turn.id, "completed", Some("end_turn"))
}

fn cont(client: &mut Client, prior: &str, cmd: &str, prompt: &str) -> Result<Turn, ClientError> {
    client.turns_continue(&TurnsContinue {
        turn_id: prior.to_owned(),
        command_id: cmd.to_owned(),
        prompt: prompt.to_owned(),
        max_turn_seconds: None,
        expect: None,
    })
}

fn code(e: ClientError) -> String {
    match e {
        ClientError::Rpc(rpc) => rpc
            .data
            .and_then(|d| d.get("code").and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_default(),
        other => panic!("not an RPC error: {other}"),
    }
}

fn ledger(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_prompt_is_a_user_message_that_turns_show_includes_and_no_log_carries() {
    let mut server = Server::start_full(json!({}), json!({}));
    let mut client = server.client("lapis-cli");
    let th = thread(&mut client, "echo", None);
    let asked = "what-was-asked-7f3a";
    let turn = client.turns_submit(&th.id, "u-1", asked).unwrap();
    completes(&mut client, &turn);
    let page = client.journal_replay(Some(&th.id), 0, None).unwrap();
    let kinds: Vec<&str> = page.events.iter().map(|e| e.kind.as_str()).collect();
    let at = kinds.iter().position(|k| *k == "user_message").unwrap();
    assert_eq!(kinds[at - 1], "turn_submitted", "{kinds:?}");
    let first_reply = kinds.iter().position(|k| *k == "message_chunk").unwrap();
    assert!(at < first_reply, "{kinds:?}");
    assert_eq!(
        page.events[at].body(),
        Some(lapis_protocol::Payload::UserMessage(
            lapis_protocol::Prompt {
                text: asked.to_owned()
            }
        ))
    );
    let shown = server.ctx.run(["turns", "show", &turn.id, "--json"]).json();
    assert_eq!(shown["turn"]["userMessage"]["text"], asked, "{shown}");
    let plain = server.ctx.run(["turns", "show", &turn.id]);
    plain.success();
    assert!(
        plain.stdout.contains(&format!("asked     {asked}")),
        "{}",
        plain.stdout
    );

    // Metadata-only: shown while the payload is in memory, unavailable after
    // a restart, as for the agent's reply.
    let meta = thread(
        &mut client,
        "echo",
        Some(lapis_protocol::Retention::MetadataOnly),
    );
    let private = "private-question-91c2";
    let m = client.turns_submit(&meta.id, "u-2", private).unwrap();
    completes(&mut client, &m);
    let t = client.turns_get(&m.id).unwrap();
    assert_eq!(t.user_message.unwrap().text.as_deref(), Some(private));
    drop(client);
    server.stop();
    server.spawn();
    let mut client = server.client("lapis-cli");
    let t = client.turns_get(&m.id).unwrap();
    let um = t.user_message.expect("the event exists");
    assert!(um.payload_unavailable && um.text.is_none(), "{um:?}");
    let plain = server.ctx.run(["turns", "show", &m.id]);
    plain.success();
    assert!(
        plain.stdout.contains("asked     (unavailable"),
        "{}",
        plain.stdout
    );
    let log = server.log_text();
    assert!(!log.contains(asked) && !log.contains(private), "{log}");
    server.finish(&[], &[]);
}

/// On the thread's kept session the continuation sends only the new
/// instructions (the agent remembers the rest); the same command id replays,
/// other input conflicts; the CLI continues and waits for the reply.
#[test]
fn a_continuation_on_the_kept_session_sends_only_the_new_instructions() {
    let scratch = tempfile::tempdir().unwrap();
    let ledger_path = scratch.path().join("ledger");
    let server = Server::start_full(
        json!({}),
        json!({ "mem": fixture(&["--recall", "--ledger", &arg(&ledger_path)]) }),
    );
    let mut client = server.client("lapis-cli");
    let th = thread(&mut client, "mem", None);
    let first = client.turns_submit(&th.id, "k-1", "first ask").unwrap();
    completes(&mut client, &first);
    let next = cont(&mut client, &first.id, "k-2", "go on").unwrap();
    assert_eq!(next.continues.as_deref(), Some(first.id.as_str()));
    assert_eq!(next.thread_id, th.id);
    completes(&mut client, &next);
    assert!(
        lapis_e2e::journal::turn_reply(&mut client, &th.id, &next.id)
            .starts_with("recall: first ask | go on"),
        "{}",
        lapis_e2e::journal::turn_reply(&mut client, &th.id, &next.id)
    );
    assert_eq!(ledger(&ledger_path), ["first ask", "go on"]);
    // Replay and conflict.
    let again = cont(&mut client, &first.id, "k-2", "go on").unwrap();
    assert_eq!(again.id, next.id);
    let e = cont(&mut client, &first.id, "k-2", "go elsewhere").unwrap_err();
    assert_eq!(code(e), "conflict");
    // The CLI: `turns continue TURN --prompt … --wait` prints the reply.
    let out = server.ctx.run([
        "turns", "continue", &next.id, "--prompt", "and then", "--wait",
    ]);
    out.success();
    assert!(
        out.stdout.contains("recall: first ask | go on | and then"),
        "{}",
        out.stdout
    );
    assert_eq!(ledger(&ledger_path).len(), 3, "nothing was sent twice");
    server.finish(&[], &[]);
}

/// When the session cannot be resumed the attempt carries a bounded digest
/// of the prior turn (prompt, reply, tool calls) as a content block before
/// the prompt text, in the labelled context block (though the fixture
/// agent advertises `embeddedContext`: agents reorder resources).
#[test]
fn a_continuation_on_a_new_session_carries_a_digest_of_the_prior_turn() {
    let scratch = tempfile::tempdir().unwrap();
    let ledger_path = scratch.path().join("ledger");
    let mut once = fixture(&[
        "--tool-calls",
        "1",
        "--chunks",
        "1",
        "--chunk-text",
        "prior-reply-",
        "--ledger",
        &arg(&ledger_path),
        "--embedded-context",
    ]);
    once["idleSeconds"] = json!(0);
    let server = Server::start_full(json!({}), json!({ "once": once }));
    let mut client = server.client("lapis-cli");
    let th = thread(&mut client, "once", None);
    let first = client.turns_submit(&th.id, "d-1", "fix the bug").unwrap();
    completes(&mut client, &first);
    let next = cont(&mut client, &first.id, "d-2", "now add a test").unwrap();
    completes(&mut client, &next);
    let lines = ledger(&ledger_path);
    assert_eq!(lines.len(), 2, "{lines:?}");
    let (context, prompt) = lines[1].split_once(" || ").expect("two content blocks");
    assert_eq!(prompt, "now add a test", "the user's text comes last");
    let sent = lapis_e2e::prompt::context_blocks(context);
    assert_eq!(sent.len(), 1, "one labelled block: {context}");
    assert_eq!(sent[0].0, format!("lapis://continuation/{}", first.id));
    assert!(context.contains(&first.id), "{context}");
    assert!(context.contains("Asked: fix the bug"), "{context}");
    assert!(context.contains("Replied: prior-reply-0"), "{context}");
    assert!(context.contains("- Edit file 0 (completed)"), "{context}");
    server.finish(&[], &[]);
}

/// Every refusal through the wire: an in-flight prior, a queued one, an
/// unknown outcome (the fence stays), a tool call left running, and a
/// metadata-only prior whose transcript is gone.
#[test]
fn continuations_are_refused_for_unsettled_or_incomplete_priors() {
    let scratch = tempfile::tempdir().unwrap();
    let mut server = Server::start_full(
        json!({}),
        json!({
            "hang": fixture(&["--hang"]),
            "exits": fixture(&["--exit-at", "prompt"]),
            "tools": fixture(&["--tool-calls", "1", "--tool-final", "in_progress"]),
        }),
    );
    let _ = scratch;
    let mut client = server.client("lapis-cli");
    // In flight, and queued behind it.
    let th = thread(&mut client, "hang", None);
    let running = client.turns_submit(&th.id, "r-1", "wait").unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    // The hanging agent sends nothing: the turn stays `dispatched`.
    while !matches!(
        client.turns_get(&running.id).unwrap().state.as_str(),
        "dispatched" | "running"
    ) {
        assert!(Instant::now() < deadline, "never dispatched");
        std::thread::sleep(Duration::from_millis(5));
    }
    let queued = client.turns_submit(&th.id, "r-2", "later").unwrap();
    for (prior, cmd) in [(&running.id, "c-1"), (&queued.id, "c-2")] {
        let e = cont(&mut client, prior, cmd, "x").unwrap_err();
        assert_eq!(code(e), "conflict");
    }
    client.turns_cancel(&queued.id).unwrap();
    client.turns_cancel(&running.id).unwrap();
    assert_eq!(settle(&mut client, &running.id).state.as_str(), "cancelled");

    // submission_unknown: refused, the workspace stays fenced.
    let ex = thread(&mut client, "exits", None);
    let lost = client.turns_submit(&ex.id, "e-1", "vanish").unwrap();
    assert_eq!(
        settle(&mut client, &lost.id).state.as_str(),
        "submission_unknown"
    );
    let e = cont(&mut client, &lost.id, "c-3", "x").unwrap_err();
    assert_eq!(code(e), "conflict");
    let status = server.ctx.run(["status", "--json"]).json();
    assert_eq!(status["fencedWorkspaces"], json!(["proj"]), "{status}");
    client
        .turns_resolve(&lost.id, lapis_protocol::ResolveAs::Failed, true)
        .expect("resolve");

    // A tool call that never reached a terminal status.
    let tt = thread(&mut client, "tools", None);
    let t = client.turns_submit(&tt.id, "t-1", "edit").unwrap();
    completes(&mut client, &t);
    let e = cont(&mut client, &t.id, "c-4", "x").unwrap_err();
    assert_eq!(code(e), "conflict");
    let out = server
        .ctx
        .run(["turns", "continue", &t.id, "--prompt", "x"]);
    out.expect_code(2);
    assert!(out.stderr.contains("tool call"), "{}", out.stderr);

    // Metadata-only history lost to a restart.
    let meta = thread(
        &mut client,
        "echo",
        Some(lapis_protocol::Retention::MetadataOnly),
    );
    let m = client.turns_submit(&meta.id, "m-1", "hello").unwrap();
    completes(&mut client, &m);
    drop(client);
    server.stop();
    server.spawn();
    let mut client = server.client("lapis-cli");
    let e = cont(&mut client, &m.id, "c-5", "x").unwrap_err();
    assert_eq!(code(e), "transcript_unavailable");
    server.finish(&[], &[]);
}
