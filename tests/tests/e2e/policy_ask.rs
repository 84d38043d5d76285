//! `ask` honoured or refused (issue 40 item 1), with fixture agents whose
//! modes behave like today's adapters: they start in an automatic mode
//! (`--start-mode auto`, where they act without asking) and honour
//! `session/set_mode`, answer it "method not found", refuse it, or accept
//! it and stay automatic (`--ignore-mode`). An `ask` thread's session is
//! put in the provider's `askMode` and the result recorded (`ask_mode`);
//! when no asking mode can be had, or the definition's recorded policy
//! probe is `ignored`, the turn fails `ask_unavailable` before its prompt
//! is sent, unless the owner accepted the provider (`allowUnasked`).

use lapis_protocol::client::Client;
use lapis_protocol::{AskMode, ModeResult, Note, Payload, Turn, TurnState};
use serde_json::{Value, json};

use crate::acp::arg;
use crate::policy::{app, fixture, settle};
use crate::serve_support::{OWNER, Server};

/// The `ask_mode` observation of a turn.
fn ask_note(client: &mut Client, thread: &str, turn: &str) -> Option<AskMode> {
    let page = client.journal_replay(Some(thread), 0, None).unwrap();
    page.events
        .into_iter()
        .filter(|e| e.turn_id.as_deref() == Some(turn))
        .find_map(|e| match lapis_e2e::journal::note(&e)? {
            Note::AskMode(m) => Some(m),
            _ => None,
        })
}

/// A fixture provider starting in `auto`, with `extra` config members.
fn auto(args: &[&str], ledger: &str, extra: Value) -> Value {
    let mut all = vec!["--start-mode", "auto", "--permissions", "1"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--ledger", ledger]);
    let mut p = fixture(&all);
    for (k, v) in extra.as_object().unwrap() {
        p[k] = v.clone();
    }
    p
}

/// Creates an `ask` thread of `provider`, submits one turn and returns it
/// settled, answering its one permission request (if any) `allow_once`.
fn ask_turn(c: &mut Client, provider: &str, id: &str) -> (String, Turn, bool) {
    let t = c
        .call_value(
            "threads.create",
            json!({ "workspaceId": "proj", "provider": provider, "approval": "ask" }),
        )
        .unwrap();
    let thread = t["thread"]["id"].as_str().unwrap().to_owned();
    let turn = c.turns_submit(&thread, id, "edit the file").unwrap();
    let mut asked = false;
    let done = lapis_e2e::wait::eventually("the turn settles", || {
        let now = c.turns_get(&turn.id).unwrap();
        if lapis_e2e::wait::settled(now.state.as_str()) {
            return Some(now);
        }
        let page = c.journal_replay(Some(&thread), 0, None).unwrap();
        let request = page.events.iter().find_map(|e| match e.body() {
            Some(Payload::PermissionRequested(r)) if e.turn_id.as_deref() == Some(&turn.id) => {
                Some(r)
            }
            _ => None,
        });
        if let Some(r) = request
            && !asked
        {
            asked = true;
            let allow = r.options.iter().find(|o| o.kind == "allow_once").unwrap();
            c.permissions_respond(&turn.id, &r.request_id, &allow.id)
                .unwrap();
        }
        None
    });
    (thread, done, asked)
}

fn prompts(ledger: &std::path::Path) -> usize {
    std::fs::read_to_string(ledger)
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

#[test]
fn an_ask_thread_gets_the_asking_mode_or_fails_before_dispatch() {
    let scratch = tempfile::tempdir().unwrap();
    let ledger = |n: &str| scratch.path().join(n);
    let ask = json!({"askMode": "default"});
    let server = Server::start_full(
        json!({}),
        json!({
            "honours": auto(&[], &arg(&ledger("honours")), ask.clone()),
            "noasking": auto(&[], &arg(&ledger("noasking")), json!({})),
            "unimplemented": auto(&["--no-set-mode"], &arg(&ledger("unimplemented")), ask.clone()),
            "refuses": auto(&["--reject-mode"], &arg(&ledger("refuses")), ask.clone()),
            "accepted": auto(&["--no-set-mode"], &arg(&ledger("accepted")),
                json!({"askMode": "default", "allowUnasked": true})),
        }),
    );
    let mut c = app(&server, OWNER, "asker");

    // Honoured: the session is put in `default` and the agent asks.
    let (thread, done, asked) = ask_turn(&mut c, "honours", "h-1");
    assert_eq!(done.state, TurnState::Completed, "{done:?}");
    assert!(asked, "the agent asked once in its asking mode");
    let note = ask_note(&mut c, &thread, &done.id).expect("ask_mode");
    assert_eq!(
        (note.mode.as_deref(), note.result, note.runs_unasked),
        (Some("default"), Some(ModeResult::Applied), false)
    );

    // Without an asking mode the same agent acts in its automatic mode:
    // what the issue found (nothing is requested or recorded).
    let (thread, done, asked) = ask_turn(&mut c, "noasking", "n-1");
    assert_eq!(done.state, TurnState::Completed, "{done:?}");
    assert!(!asked);
    assert!(ask_note(&mut c, &thread, &done.id).is_none());

    // No asking mode can be had: failed before the prompt was sent.
    for (provider, result) in [
        ("unimplemented", ModeResult::Unsupported),
        ("refuses", ModeResult::Rejected),
    ] {
        let (thread, done, asked) = ask_turn(&mut c, provider, &format!("{provider}-1"));
        assert_eq!(done.state, TurnState::Failed, "{provider}: {done:?}");
        assert_eq!(
            done.outcome.as_deref(),
            Some("ask_unavailable"),
            "{provider}"
        );
        assert_eq!(done.dispatched_at, None, "{provider}: before the boundary");
        assert!(!asked);
        assert_eq!(prompts(&ledger(provider)), 0, "{provider}: no prompt sent");
        let note = ask_note(&mut c, &thread, &done.id).expect("ask_mode");
        assert_eq!(note.result, Some(result), "{provider}");
        assert!(!note.runs_unasked);
    }

    // Accepted by the owner: it runs, recorded as running unasked.
    let (thread, done, _) = ask_turn(&mut c, "accepted", "a-1");
    assert_eq!(done.state, TurnState::Completed, "{done:?}");
    let note = ask_note(&mut c, &thread, &done.id).expect("ask_mode");
    assert_eq!(note.result, Some(ModeResult::Unsupported));
    assert!(note.runs_unasked);

    // The CLI's error names the fix.
    let t = server
        .ctx
        .run(["threads", "create", "proj", "--provider", "refuses"])
        .success()
        .stdout
        .trim()
        .to_owned();
    let wait = server
        .ctx
        .run(["turns", "submit", &t, "--prompt", "go", "--wait"]);
    wait.expect_code(1);
    assert!(wait.stderr.contains("(ask_unavailable)"), "{}", wait.stderr);
    assert!(wait.stderr.contains("allowUnasked"), "{}", wait.stderr);
    server.finish(&[], &[]);
}

/// An agent that accepts `session/set_mode` and stays automatic cannot be
/// caught at setup; its policy probe can: once the probe of its definition
/// is recorded `ignored`, `threads create` warns and its `ask` turns fail
/// `ask_unavailable` at the claim, before any agent is started — unless the
/// owner accepted the provider. The probe meets the session a turn would
/// (the asking mode requested), so an agent that honours the mode is
/// recorded `honoured`.
#[test]
fn a_provider_found_ignoring_approval_is_refused_for_ask_turns() {
    let scratch = tempfile::tempdir().unwrap();
    let ledger = |n: &str| scratch.path().join(n);
    let ask = json!({"askMode": "default"});
    let probe = ["--policy-probe", "honour"];
    let server = Server::start_full(
        json!({}),
        json!({
            "ignores": auto(&[&probe[..], &["--ignore-mode"]].concat(), &arg(&ledger("ignores")), ask.clone()),
            "honours": auto(&probe, &arg(&ledger("honours")), ask.clone()),
            "accepted": auto(&[&probe[..], &["--ignore-mode", "--chunks", "1"]].concat(),
                &arg(&ledger("accepted")), json!({"askMode": "default", "allowUnasked": true})),
        }),
    );
    let mut c = app(&server, OWNER, "lapis-cli");
    // Before any probe, setup cannot tell: the turn runs unasked.
    let (_, done, asked) = ask_turn(&mut c, "ignores", "i-1");
    assert_eq!(done.state, TurnState::Completed, "{done:?}");
    assert!(!asked);
    for (name, verdict) in [
        ("ignores", "ignored"),
        ("honours", "honoured"),
        ("accepted", "ignored"),
    ] {
        let doc = server
            .ctx
            .run(["providers", "check", name, "--policy", "--json"])
            .success()
            .json();
        assert_eq!(doc["report"]["policy"]["verdict"], verdict, "{name}: {doc}");
    }
    let created = server
        .ctx
        .run(["threads", "create", "proj", "--provider", "ignores"]);
    created.success();
    assert!(
        created
            .stderr
            .contains("warning: provider `ignores` acted without asking"),
        "{}",
        created.stderr
    );
    let quiet = server
        .ctx
        .run(["threads", "create", "proj", "--provider", "honours"]);
    assert!(!quiet.stderr.contains("warning"), "{}", quiet.stderr);
    let before = prompts(&ledger("ignores"));
    let (thread, done, _) = ask_turn(&mut c, "ignores", "i-2");
    assert_eq!(done.state, TurnState::Failed, "{done:?}");
    assert_eq!(done.outcome.as_deref(), Some("ask_unavailable"));
    assert_eq!(done.dispatched_at, None);
    assert_eq!(prompts(&ledger("ignores")), before, "no prompt sent");
    let note = ask_note(&mut c, &thread, &done.id).expect("ask_mode");
    assert!(note.probe_ignored && !note.runs_unasked, "{note:?}");
    // An allow-all thread of the same provider is the owner's choice.
    let t = c
        .call_value(
            "threads.create",
            json!({ "workspaceId": "proj", "provider": "ignores", "approval": "allow-all" }),
        )
        .unwrap();
    let free = c
        .turns_submit(t["thread"]["id"].as_str().unwrap(), "i-3", "go")
        .unwrap();
    assert_eq!(settle(&mut c, &free.id).state, TurnState::Completed);
    // Accepted by the owner: runs, recorded.
    let (thread, done, _) = ask_turn(&mut c, "accepted", "a-1");
    assert_eq!(done.state, TurnState::Completed, "{done:?}");
    let note = ask_note(&mut c, &thread, &done.id).expect("ask_mode");
    assert!(note.probe_ignored && note.runs_unasked, "{note:?}");
    // Honoured: asked in its asking mode.
    let (_, done, asked) = ask_turn(&mut c, "honours", "h-1");
    assert_eq!(done.state, TurnState::Completed, "{done:?}");
    assert!(asked);
    server.finish(&[], &[]);
}
