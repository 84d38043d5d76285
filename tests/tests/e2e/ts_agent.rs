//! The agent written on the official TypeScript ACP SDK
//! (`tests/agents/ts-agent`): turns through the real `serve`, and the agent
//! alone driven by a newline-JSON client, two processes apart, to prove its
//! `session/load` restores a session. Every test prints `SKIPPED:` and
//! returns when node or the SDK's install is missing ([`TsAgent::find`]).

use std::io::Write;
use std::time::{Duration, Instant};

use lapis_e2e::ts_agent::TsAgent;
use lapis_e2e::ts_agent::client::{
    AgentProcess, HANG_GUARD, new_session, reply, stored_history, texts,
};
use lapis_e2e::wait::settle;
use lapis_protocol::Note;
use lapis_protocol::client::Client;
use serde_json::{Value, json};

use crate::serve_support::Server;

#[test]
fn a_new_process_loads_the_session_and_remembers_the_earlier_turn() {
    let Some(ts) = TsAgent::find("a_new_process_loads_the_session_and_remembers_the_earlier_turn")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");

    let mut first = AgentProcess::spawn(&ts, &state, false);
    let init = first.initialize();
    assert_eq!(init["protocolVersion"], 1, "{init}");
    assert_eq!(init["agentCapabilities"]["loadSession"], true, "{init}");
    let session = new_session(&mut first, dir.path());
    let (updates, r) = first.prompt(&session, "the sky is green");
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    assert!(
        updates.len() >= 2,
        "reply not streamed in chunks: {updates:?}"
    );
    let first_reply = reply(&updates);
    assert_eq!(
        first_reply,
        format!("turn 1 of session {session}; nothing said before")
    );
    assert!(first.finish().success());

    // A second process knows nothing until it loads the session.
    let mut second = AgentProcess::spawn(&ts, &state, false);
    second.initialize();
    let (_, r) = second.prompt(&session, "too early");
    assert_eq!(r["error"]["code"], -32002, "prompt before load: {r}");
    let (replayed, r) = second.call(
        "session/load",
        json!({ "sessionId": session, "cwd": dir.path(), "mcpServers": [] }),
    );
    assert!(r.get("error").is_none(), "session/load failed: {r}");
    // The whole history arrives before the load response, in order.
    assert_eq!(
        texts(&replayed),
        [
            (
                "user_message_chunk".to_owned(),
                "the sky is green".to_owned()
            ),
            ("agent_message_chunk".to_owned(), first_reply),
        ]
    );
    assert!(replayed.iter().all(|u| u["sessionId"] == json!(session)));
    let (updates, r) = second.prompt(&session, "what did I say?");
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    assert_eq!(
        reply(&updates),
        format!("turn 2 of session {session}; you said before: \"the sky is green\"")
    );
    assert!(second.finish().success());

    // A history line torn by a killed agent is dropped, never replayed, and
    // later turns still append whole lines.
    let file = state.join(format!("{session}.jsonl"));
    let mut torn = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap();
    torn.write_all(br#"{"role":"user","te"#).unwrap();
    drop(torn);
    let mut third = AgentProcess::spawn(&ts, &state, false);
    third.initialize();
    let (replayed, r) = third.call(
        "session/load",
        json!({ "sessionId": session, "cwd": dir.path(), "mcpServers": [] }),
    );
    assert!(r.get("error").is_none(), "session/load failed: {r}");
    assert_eq!(replayed.len(), 4, "{replayed:?}");
    let (updates, _) = third.prompt(&session, "after the tear");
    assert!(
        reply(&updates).ends_with("you said before: \"what did I say?\""),
        "{}",
        reply(&updates)
    );
    assert!(third.finish().success());
    let prompts: Vec<Value> = stored_history(&state, &session)
        .into_iter()
        .filter(|e| e["role"] == "user")
        .map(|e| e["text"].clone())
        .collect();
    assert_eq!(
        prompts,
        ["the sky is green", "what did I say?", "after the tear"]
    );

    // An unknown session is not invented.
    let mut fourth = AgentProcess::spawn(&ts, &state, false);
    fourth.initialize();
    let (replayed, r) = fourth.call(
        "session/load",
        json!({ "sessionId": "ts-00000000-0000-0000-0000-000000000000",
                "cwd": dir.path(), "mcpServers": [] }),
    );
    assert_eq!(r["error"]["code"], -32002, "{r}");
    assert!(replayed.is_empty());
}

#[test]
fn without_load_session_the_agent_refuses_session_load() {
    let Some(ts) = TsAgent::find("without_load_session_the_agent_refuses_session_load") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let mut agent = AgentProcess::spawn(&ts, &state, false);
    agent.initialize();
    let session = new_session(&mut agent, dir.path());
    agent.finish();

    let mut agent = AgentProcess::spawn(&ts, &state, true);
    let init = agent.initialize();
    assert_eq!(init["agentCapabilities"]["loadSession"], false, "{init}");
    let (replayed, r) = agent.call(
        "session/load",
        json!({ "sessionId": session, "cwd": dir.path(), "mcpServers": [] }),
    );
    assert_eq!(r["error"]["code"], -32601, "{r}");
    assert!(replayed.is_empty());
}

#[test]
fn markers_drive_tools_permissions_and_cancel() {
    let Some(ts) = TsAgent::find("markers_drive_tools_permissions_and_cancel") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut agent = AgentProcess::spawn(&ts, &dir.path().join("state"), false);
    agent.initialize();
    let session = new_session(&mut agent, dir.path());

    // [tool]: a tool call and its completion come before the reply.
    let (updates, r) = agent.prompt(&session, "look [tool]");
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    let kinds: Vec<&str> = updates
        .iter()
        .filter_map(|u| u["update"]["sessionUpdate"].as_str())
        .collect();
    assert_eq!(kinds[..2], ["tool_call", "tool_call_update"], "{kinds:?}");
    assert_eq!(updates[1]["update"]["status"], "completed");

    // [permission]: the answer chosen by the client is reported.
    agent.permission_answer = Some("reject");
    let (updates, _) = agent.prompt(&session, "write [permission]");
    assert!(
        reply(&updates).starts_with("permission: reject_once; turn 2 of session"),
        "{}",
        reply(&updates)
    );
    // A `cancelled` answer means the client cancelled the turn.
    agent.permission_answer = None;
    let (updates, r) = agent.prompt(&session, "write again [permission]");
    assert_eq!(r["result"]["stopReason"], "cancelled", "{r}");
    assert_eq!(reply(&updates), "permission: cancelled; ");

    // [slow]: the turn waits for session/cancel and ends cancelled.
    let id = agent.slow_prompt(&session, "[slow]");
    agent.send(json!({ "jsonrpc": "2.0", "method": "session/cancel",
        "params": { "sessionId": session } }));
    let (_, r) = agent.until_response(id);
    assert_eq!(r["result"]["stopReason"], "cancelled", "{r}");

    // Closing stdin ends the agent even while a turn is still waiting, and
    // that unanswered prompt is already in the stored history.
    agent.slow_prompt(&session, "[slow] again");
    assert!(agent.finish().success());
    let stored = stored_history(&dir.path().join("state"), &session);
    let prompts: Vec<&str> = stored
        .iter()
        .filter(|e| e["role"] == "user")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(
        prompts,
        [
            "look [tool]",
            "write [permission]",
            "write again [permission]",
            "[slow]",
            "[slow] again"
        ]
    );
}

/// `serve` with the SDK agent as provider `ts` and an SDK client of it: the
/// setup every test that drives the agent through the controller shares.
struct Served {
    /// The controller (`finish` ends each test).
    server: Server,
    /// The owner as application `ts-agent-e2e`.
    client: Client,
    /// Where the agent keeps its sessions.
    state: std::path::PathBuf,
    /// Owns `state`; removed when the test ends.
    _scratch: tempfile::TempDir,
}

impl Served {
    /// Starts `serve` (`limits`: its `server` member) on the agent with
    /// `env` added to the provider's environment; `None` where the agent
    /// cannot run (`test` is named in the `SKIPPED:` line).
    fn start(test: &str, limits: Value, env: &[(&str, &str)]) -> Option<Served> {
        let ts = TsAgent::find(test)?;
        let scratch = tempfile::tempdir().unwrap();
        let state = scratch.path().join("state");
        let mut provider = ts.provider(&state);
        for (name, value) in env {
            provider["env"][*name] = json!(value);
        }
        let server = Server::start_full(limits, json!({ "ts": provider }));
        let client = server.client("ts-agent-e2e");
        Some(Served {
            server,
            client,
            state,
            _scratch: scratch,
        })
    }

    /// A new thread on the agent, on workspace `proj`.
    fn thread(&mut self, approval: lapis_protocol::ApprovalPolicy) -> String {
        self.client
            .threads_create("proj", "ts", approval, None)
            .unwrap()
            .id
    }

    /// Submits `prompt` on `thread` (command id `cmd`) and waits until the
    /// turn settles.
    fn turn(&mut self, thread: &str, cmd: &str, prompt: &str) -> lapis_protocol::Turn {
        let turn = self.client.turns_submit(thread, cmd, prompt).unwrap();
        settle(&mut self.client, &turn.id)
    }

    /// `thread`'s journal, from the start.
    fn journal(&mut self, thread: &str) -> Vec<lapis_protocol::JournalEvent> {
        self.client
            .journal_replay(Some(thread), 0, None)
            .unwrap()
            .events
    }
}

/// The reply text in `events`, chunk by chunk.
fn reply_chunks(events: &[lapis_protocol::JournalEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(lapis_e2e::journal::reply_text)
        .collect()
}

#[test]
fn turns_through_serve_on_the_sdk_agent() {
    let Some(mut s) = Served::start("turns_through_serve_on_the_sdk_agent", json!({}), &[]) else {
        return;
    };
    use lapis_protocol::ApprovalPolicy::{AllowAll, Ask};

    // A plain turn: the streamed reply is journaled.
    let thread = s.thread(Ask);
    let t = s.turn(&thread, "ts-1", "remember the number 42");
    assert_eq!(
        (t.state.as_str(), t.outcome.as_deref()),
        ("completed", Some("end_turn"))
    );
    let chunks = reply_chunks(&s.journal(&thread));
    assert!(chunks.len() >= 2, "reply not streamed: {chunks:?}");
    let text = chunks.concat();
    let session = text
        .strip_prefix("turn 1 of session ")
        .and_then(|t| t.strip_suffix("; nothing said before"))
        .unwrap_or_else(|| panic!("unexpected reply {text:?}"));
    // The agent kept the turn where a later process can load it.
    let stored = stored_history(&s.state, session);
    assert_eq!(stored[0]["text"], "remember the number 42");
    assert_eq!(stored[1]["text"], text);

    // Tool calls and a permission request on an allow-all thread.
    let auto = s.thread(AllowAll);
    let t = s.turn(&auto, "ts-2", "edit [tool] [permission]");
    assert_eq!(t.state.as_str(), "completed");
    let events = s.journal(&auto);
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    for k in ["tool_call", "permission_requested", "permission_decided"] {
        assert!(kinds.contains(&k), "{k} missing from {kinds:?}");
    }
    let text = reply_chunks(&events).concat();
    assert!(
        text.starts_with("permission: allow_once; turn 1 of session ts-"),
        "{text:?}"
    );

    // Cancel reaches the agent as session/cancel; it confirms `cancelled`.
    let slow = s.thread(Ask);
    let turn = s.client.turns_submit(&slow, "ts-3", "[slow]").unwrap();
    let deadline = Instant::now() + HANG_GUARD;
    loop {
        let events = s.journal(&slow);
        if reply_chunks(&events)
            .iter()
            .any(|t| t == "waiting for cancel; ")
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "slow turn never started: {events:?}\n{}",
            s.server.log_text()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    s.client.turns_cancel(&turn.id).unwrap();
    assert_eq!(settle(&mut s.client, &turn.id).state.as_str(), "cancelled");
    s.server.finish(&[], &[]);
}

/// How many of `turn`'s notes are `note` (`session_loaded`, `session_resumed` …).
fn notes_of(
    events: &[lapis_protocol::JournalEvent],
    turn: &str,
    note: impl Fn(&Note) -> bool,
) -> usize {
    events
        .iter()
        .filter(|e| e.turn_id.as_deref() == Some(turn))
        .filter(|e| lapis_e2e::journal::note(e).is_some_and(|n| note(&n)))
        .count()
}

/// `session_loaded` notes of one turn.
fn loads(s: &mut Served, thread: &str, turn: &str) -> usize {
    notes_of(&s.journal(thread), turn, |n| {
        matches!(n, Note::SessionLoaded(_))
    })
}

/// The SDK agent remembers: the second turn of a thread goes to the kept
/// agent and its session, and the agent answers with the first turn's text;
/// after its agent was evicted, the third turn's new process `session/load`s
/// the session and still answers with the second turn's text.
#[test]
fn the_sdk_agent_remembers_earlier_turns_kept_and_after_eviction() {
    let Some(mut s) = Served::start(
        "the_sdk_agent_remembers_earlier_turns_kept_and_after_eviction",
        json!({ "maxLiveAgents": 1 }),
        &[],
    ) else {
        return;
    };
    let thread = s.thread(lapis_protocol::ApprovalPolicy::Ask);
    let run = |s: &mut Served, cmd: &str, prompt: &str| {
        let turn = s.client.turns_submit(&thread, cmd, prompt).unwrap();
        lapis_e2e::wait::settles_as(&mut s.client, &turn.id, "completed", Some("end_turn"));
        let t = s.client.turns_get(&turn.id).unwrap();
        (turn.id, t.agent_session_id.expect("session bound"))
    };
    let (first, session) = run(&mut s, "mem-1", "the sky is green");
    assert!(session.starts_with("ts-"), "{session}");
    let (second, kept) = run(&mut s, "mem-2", "what did I say?");
    assert_eq!(kept, session, "the session was not kept");
    assert_eq!(
        lapis_e2e::journal::turn_reply(&mut s.client, &thread, &second),
        format!("turn 2 of session {session}; you said before: \"the sky is green\"")
    );
    assert_eq!(loads(&mut s, &thread, &second), 0, "not reused");
    assert!(!lapis_e2e::journal::turn_reply(&mut s.client, &thread, &first).is_empty());

    // Another thread's turn takes the one agent slot: ours is evicted.
    let other = s.thread(lapis_protocol::ApprovalPolicy::Ask);
    assert_eq!(
        s.turn(&other, "mem-x", "elsewhere").state.as_str(),
        "completed"
    );

    let (third, loaded) = run(&mut s, "mem-3", "and now?");
    assert_eq!(loaded, session, "the session was not loaded");
    assert_eq!(loads(&mut s, &thread, &third), 1, "no session/load");
    assert_eq!(
        lapis_e2e::journal::turn_reply(&mut s.client, &thread, &third),
        format!("turn 3 of session {session}; you said before: \"what did I say?\"")
    );
    s.server.finish(&[], &[]);
}

/// On the SDK agent advertising `session/resume` and `session/close`
/// (TS_AGENT_RESUME=1, TS_AGENT_CLOSE=1), a thread whose agent was evicted
/// is resumed — no `session/load`, no replay — and still remembers.
#[test]
fn the_sdk_agent_is_resumed_not_loaded_when_it_offers_resume() {
    let Some(mut s) = Served::start(
        "the_sdk_agent_is_resumed_not_loaded_when_it_offers_resume",
        json!({ "maxLiveAgents": 1 }),
        &[("TS_AGENT_RESUME", "1"), ("TS_AGENT_CLOSE", "1")],
    ) else {
        return;
    };
    let thread = s.thread(lapis_protocol::ApprovalPolicy::Ask);
    let first = s.turn(&thread, "r-1", "the sky is green");
    assert_eq!(first.state.as_str(), "completed");
    let session = first.agent_session_id.unwrap();
    let other = s.thread(lapis_protocol::ApprovalPolicy::Ask);
    assert_eq!(
        s.turn(&other, "r-x", "elsewhere").state.as_str(),
        "completed"
    );
    let second = s.turn(&thread, "r-2", "and now?");
    assert_eq!(second.state.as_str(), "completed");
    assert_eq!(second.agent_session_id.as_deref(), Some(session.as_str()));
    assert_eq!(loads(&mut s, &thread, &second.id), 0, "loaded, not resumed");
    let resumed = notes_of(&s.journal(&thread), &second.id, |n| {
        matches!(n, Note::SessionResumed(_))
    });
    assert_eq!(resumed, 1, "no session_resumed note");
    assert_eq!(
        lapis_e2e::journal::turn_reply(&mut s.client, &thread, &second.id),
        format!("turn 2 of session {session}; you said before: \"the sky is green\"")
    );
    s.server.finish(&[], &[]);
}

/// Usage from an independent ACP implementation (issue 29): the SDK agent's
/// `[usage]` sends `usage_update` with a *cumulative* cost and answers with
/// *per-turn* tokens; each turn records its own share (0.25 USD and 180
/// tokens a turn, not 0.5 for the second), and the thread totals them.
#[test]
fn the_sdk_agents_usage_is_recorded_per_turn_with_both_semantics() {
    let Some(mut s) = Served::start(
        "the_sdk_agents_usage_is_recorded_per_turn_with_both_semantics",
        json!({}),
        &[],
    ) else {
        return;
    };
    let thread = s.thread(lapis_protocol::ApprovalPolicy::Ask);
    for (i, cmd) in ["u-1", "u-2"].into_iter().enumerate() {
        let done = s.turn(&thread, cmd, "[usage] count");
        assert_eq!(done.state.as_str(), "completed");
        let usage = done.usage.expect("usage recorded");
        let cost = usage.cost.expect("cost");
        assert_eq!(
            (cost.amount.0, cost.currency.as_str()),
            (0.25, "USD"),
            "turn {i}"
        );
        assert_eq!(usage.context_used, Some(1000 * (i as u64 + 1)), "turn {i}");
        assert_eq!(
            (usage.total_tokens, usage.input_tokens, usage.thought_tokens),
            (180, 100, 10),
            "turn {i}: the prompt response's per-turn usage"
        );
    }
    let snap = s.client.threads_get(&thread).unwrap();
    assert_eq!(snap.usage.turns, 2);
    assert_eq!(snap.usage.total_tokens, 360);
    assert_eq!(snap.usage.cost_in("USD"), 0.5);
    s.server.finish(&[], &[]);
}

/// The policy probe against the SDK agent: it asks to write the probe file
/// (naming it), is rejected, and does not write it: `honoured`.
#[test]
fn the_sdk_agent_honours_a_rejected_write_in_the_policy_probe() {
    let Some(s) = Served::start(
        "the_sdk_agent_honours_a_rejected_write_in_the_policy_probe",
        json!({}),
        &[],
    ) else {
        return;
    };
    let doc = s
        .server
        .ctx
        .run(["providers", "check", "ts", "--policy", "--json"])
        .success()
        .json();
    let policy = &doc["report"]["policy"];
    assert_eq!(policy["verdict"], "honoured", "{doc}");
    assert_eq!(
        (
            &policy["requests"],
            &policy["named"],
            &policy["fileWritten"]
        ),
        (&json!(1), &json!(true), &json!(false)),
        "{doc}"
    );
    s.server.finish(&[], &[]);
}

/// Elicitation from the SDK agent through `serve` (issue 29): an
/// empty-form `elicitation/create` is a one-time approval (`allow-all`
/// accepts it on an unrestricted thread, journaled as a permission
/// request); a form with fields gets the invalid-params error, never
/// invented input.
#[test]
fn the_sdk_agents_elicitations_are_approvals_or_refused() {
    let Some(mut s) = Served::start(
        "the_sdk_agents_elicitations_are_approvals_or_refused",
        json!({}),
        &[],
    ) else {
        return;
    };
    let thread = s.thread(lapis_protocol::ApprovalPolicy::AllowAll);
    let t = s.turn(&thread, "e-1", "[elicit] [elicit-fields]");
    assert_eq!(t.state.as_str(), "completed");
    let events = s.journal(&thread);
    let text = reply_chunks(&events).concat();
    assert!(
        text.starts_with("elicit: accept; elicit: error -32602; "),
        "{text:?}"
    );
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    assert!(kinds.contains(&"permission_requested"), "{kinds:?}");
    s.server.finish(&[], &[]);
}
