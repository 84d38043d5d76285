//! Agent sessions through the real `serve`: outcome before teardown, the
//! live-agent pool, resume and replacement (bounded execution:
//! `acp_limits.rs`).

use std::path::Path;

use lapis_protocol::client::Client;
use lapis_protocol::params::ThreadsConfigure;
use lapis_protocol::{
    ContextReset, Note, ReplaceReason, ResetReason, SessionLoaded, SessionReplaced, SessionResumed,
};
use serde_json::{Value, json};

use crate::acp::{alive, arg, read_pid};
use crate::serve_support::Server;
use lapis_e2e::wait::{settled, until as eventually, wait_turn};

pub(crate) fn fixture(args: &[&str]) -> Value {
    json!({ "command": env!("CARGO_BIN_EXE_fixture-agent"), "args": args })
}

fn pid_of(path: &Path) -> u32 {
    eventually("the agent's pid file", || path.exists());
    read_pid(&path.to_path_buf())
}

/// The turn's outcome is durable the moment the agent answers: it is
/// visible while the lingering agent is still being torn down, and a
/// `kill -9` of serve in that window leaves the turn `completed` and the
/// workspace unfenced (the orphaned agent dies at the next start).
#[test]
fn a_crash_after_the_outcome_commit_leaves_the_turn_completed() {
    let scratch = tempfile::tempdir().unwrap();
    let pidfile = scratch.path().join("agent.pid");
    let mut linger = fixture(&["--linger", "--pidfile", &arg(&pidfile)]);
    linger["idleSeconds"] = json!(0);
    let mut server = Server::start_full(json!({}), json!({ "linger": linger }));
    let mut client = server.client("sessions-e2e");
    let thread = client
        .threads_create("proj", "linger", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let turn = client.turns_submit(&thread.id, "l-1", "answer").unwrap();
    lapis_e2e::wait::settles_as(&mut client, &turn.id, "completed", Some("end_turn"));
    let agent = pid_of(&pidfile);
    assert!(
        alive(agent),
        "the outcome was committed only after teardown"
    );
    drop(client);
    server.kill9();
    server.spawn();
    let mut client = server.client("sessions-e2e");
    let t = client.turns_get(&turn.id).unwrap();
    assert_eq!(t.state.as_str(), "completed");
    let status = server.ctx.run(["status", "--json"]).json();
    assert_eq!(status["fencedWorkspaces"], json!([]), "{status}");
    eventually("the orphaned agent to die", || !alive(agent));
    server.finish(&[], &[]);
}

/// Teardown of the lingering agent logs what really happened: it died of
/// SIGTERM (it did not "ignore" it and was never SIGKILLed).
#[test]
fn a_lingering_agents_teardown_is_logged_as_sigterm() {
    let scratch = tempfile::tempdir().unwrap();
    let pidfile = scratch.path().join("agent.pid");
    let mut linger = fixture(&["--linger", "--pidfile", &arg(&pidfile)]);
    linger["idleSeconds"] = json!(0);
    let server = Server::start_full(json!({}), json!({ "linger": linger }));
    let mut client = server.client("sessions-e2e");
    let thread = client
        .threads_create("proj", "linger", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let turn = client.turns_submit(&thread.id, "l-1", "answer").unwrap();
    wait_turn(&mut client, &turn.id, settled);
    let agent = pid_of(&pidfile);
    eventually("the agent to be stopped", || {
        server.log_text().contains("agent stopped")
    });
    assert!(!alive(agent));
    let log = server.log_text();
    let line = log.lines().find(|l| l.contains("agent stopped")).unwrap();
    assert!(line.contains("sigterm"), "{line}");
    assert!(!log.contains("outlived SIGTERM"), "{log}");
    server.finish(&[], &[]);
}

/// The noted observations of a turn with this label (their payloads).
fn notes(client: &mut Client, thread: &str, turn: &str) -> Vec<Note> {
    let page = client.journal_replay(Some(thread), 0, None).unwrap();
    page.events
        .iter()
        .filter(|e| e.turn_id.as_deref() == Some(turn))
        .filter_map(lapis_e2e::journal::note)
        .collect()
}

/// The notes of one kind of a turn, as `pick` extracts them.
fn observations<T>(
    client: &mut Client,
    thread: &str,
    turn: &str,
    pick: impl Fn(Note) -> Option<T>,
) -> Vec<T> {
    notes(client, thread, turn)
        .into_iter()
        .filter_map(pick)
        .collect()
}

fn loaded(n: Note) -> Option<SessionLoaded> {
    match n {
        Note::SessionLoaded(l) => Some(l),
        _ => None,
    }
}

fn reset(n: Note) -> Option<ContextReset> {
    match n {
        Note::ContextReset(r) => Some(r),
        _ => None,
    }
}

fn replaced(n: Note) -> Option<SessionReplaced> {
    match n {
        Note::SessionReplaced(r) => Some(r),
        _ => None,
    }
}

/// Submits and waits for the outcome; returns the turn id.
fn run(client: &mut Client, thread: &str, cmd: &str, prompt: &str) -> String {
    let turn = client.turns_submit(thread, cmd, prompt).unwrap();
    lapis_e2e::wait::settles_as(client, &turn.id, "completed", Some("end_turn"));
    turn.id
}

fn session_of(client: &mut Client, turn: &str) -> String {
    client
        .turns_get(turn)
        .unwrap()
        .agent_session_id
        .expect("a dispatched turn names its session")
}

pub(crate) fn status(server: &Server) -> Value {
    server.ctx.run(["status", "--json"]).json()
}

/// Two turns of a thread go to one agent process and one native session,
/// and the agent remembers the first prompt when answering the second.
#[test]
fn two_turns_share_one_agent_process_and_session() {
    let scratch = tempfile::tempdir().unwrap();
    let pidfile = scratch.path().join("agent.pid");
    let server = Server::start_full(
        json!({}),
        json!({ "mem": fixture(&["--recall", "--pidfile", &arg(&pidfile)]) }),
    );
    // The CLI's application, so `turns show` may read the thread.
    let mut client = server.client("lapis-cli");
    let thread = client
        .threads_create("proj", "mem", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let first = run(&mut client, &thread.id, "m-1", "first question");
    let pid = pid_of(&pidfile);
    let second = run(&mut client, &thread.id, "m-2", "second question");
    assert_eq!(
        read_pid(&pidfile.to_path_buf()),
        pid,
        "a second agent process was started"
    );
    assert!(alive(pid));
    assert_eq!(
        session_of(&mut client, &first),
        session_of(&mut client, &second)
    );
    assert!(
        lapis_e2e::journal::turn_reply(&mut client, &thread.id, &second)
            .starts_with("recall: first question | second question"),
        "{}",
        lapis_e2e::journal::turn_reply(&mut client, &thread.id, &second)
    );
    // `turns show --json` reports the session.
    let shown = server.ctx.run(["turns", "show", &second, "--json"]).json();
    assert_eq!(
        shown["turn"]["agentSessionId"],
        json!(session_of(&mut client, &second)),
        "{shown}"
    );
    let s = status(&server);
    assert_eq!(s["agents"]["live"], 1, "{s}");
    assert_eq!(s["agents"]["idle"], 1, "{s}");
    assert_eq!(s["agents"]["maxLive"], 16, "{s}");
    server.finish(&[], &[]);
}

/// With room for one live agent, a second thread's turn evicts the first
/// thread's idle agent; the first thread's next turn starts a new agent that
/// `session/load`s the stored session. The replayed history is counted,
/// never journaled as output. An idle agent past `idleSeconds` is stopped.
#[test]
fn an_evicted_agent_is_resumed_with_session_load() {
    let scratch = tempfile::tempdir().unwrap();
    let history = |n: &str| arg(&scratch.path().join(n));
    let (ha, hb) = (history("a.history"), history("b.history"));
    let mut a = fixture(&["--recall", "--load-session", "--history", &ha]);
    let mut b = fixture(&["--recall", "--load-session", "--history", &hb]);
    a["idleSeconds"] = json!(1);
    b["idleSeconds"] = json!(600);
    let server = Server::start_full(json!({ "maxLiveAgents": 1 }), json!({ "a": a, "b": b }));
    let mut client = server.client("sessions-e2e");
    let ta = client
        .threads_create("proj", "a", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let tb = client
        .threads_create("proj", "b", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let a1 = run(&mut client, &ta.id, "a-1", "alpha one");
    let b1 = run(&mut client, &tb.id, "b-1", "beta one");
    let s = status(&server);
    assert_eq!(
        (
            s["agents"]["live"].as_u64(),
            s["agents"]["maxLive"].as_u64()
        ),
        (Some(1), Some(1)),
        "{s}"
    );
    let a2 = run(&mut client, &ta.id, "a-2", "alpha two");
    assert_eq!(session_of(&mut client, &a1), session_of(&mut client, &a2));
    assert!(
        lapis_e2e::journal::turn_reply(&mut client, &ta.id, &a2)
            .starts_with("recall: alpha one | alpha two")
    );
    let loads = observations(&mut client, &ta.id, &a2, loaded);
    assert_eq!(loads.len(), 1, "{loads:?}");
    assert_eq!(loads[0].replayed_updates, 1, "{loads:?}");
    let page = client.journal_replay(Some(&ta.id), 0, None).unwrap();
    assert!(
        !page.events.iter().any(|e| e.turn_id.as_deref() == Some(&a2)
            && matches!(
                lapis_e2e::journal::observation(e),
                Some(lapis_protocol::Observation::Noted { kind, .. }) if kind == "user_message_chunk"
            )),
        "replayed history was journaled as turn output"
    );
    assert!(observations(&mut client, &ta.id, &a2, reset).is_empty());
    // b's agent was evicted for a2 and resumes the same way.
    let b2 = run(&mut client, &tb.id, "b-2", "beta two");
    assert_eq!(session_of(&mut client, &b1), session_of(&mut client, &b2));
    assert!(
        lapis_e2e::journal::turn_reply(&mut client, &tb.id, &b2)
            .starts_with("recall: beta one | beta two")
    );
    // a2's agent was evicted for b2; run a3 and let its one idle second pass.
    run(&mut client, &ta.id, "a-3", "alpha three");
    eventually("the idle agent to be stopped", || {
        status(&server)["agents"]["live"] == 0
    });
    server.finish(&[], &[]);
}

/// An agent that cannot load sessions gets a new one, and the turn says so
/// with a `context_reset` observation.
#[test]
fn an_agent_without_load_session_gives_context_reset() {
    let mut once = fixture(&["--recall"]);
    once["idleSeconds"] = json!(0);
    let server = Server::start_full(json!({}), json!({ "once": once }));
    let mut client = server.client("sessions-e2e");
    let thread = client
        .threads_create("proj", "once", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let first = run(&mut client, &thread.id, "o-1", "first");
    assert!(observations(&mut client, &thread.id, &first, reset).is_empty());
    let second = run(&mut client, &thread.id, "o-2", "second");
    let resets = observations(&mut client, &thread.id, &second, reset);
    assert_eq!(resets.len(), 1, "{resets:?}");
    assert_eq!(resets[0].reason, ResetReason::LoadUnsupported);
    let (s1, s2) = (
        session_of(&mut client, &first),
        session_of(&mut client, &second),
    );
    assert_eq!(resets[0].previous_session_id, s1);
    assert_eq!(resets[0].session_id, s2);
    assert_ne!(s1, s2);
    assert!(
        lapis_e2e::journal::turn_reply(&mut client, &thread.id, &second)
            .starts_with("recall: second\n")
    );
    server.finish(&[], &[]);
}

/// `kill -9` of serve between turns: the orphaned (lingering) agent dies at
/// the next start, and the thread's next turn loads its session in a new
/// agent.
#[test]
fn a_killed_controller_resumes_the_session_at_the_next_turn() {
    let scratch = tempfile::tempdir().unwrap();
    let pidfile = scratch.path().join("agent.pid");
    let history = arg(&scratch.path().join("history"));
    let agent = fixture(&[
        "--linger",
        "--recall",
        "--load-session",
        "--history",
        &history,
        "--pidfile",
        &arg(&pidfile),
    ]);
    let mut server = Server::start_full(json!({}), json!({ "mem": agent }));
    let mut client = server.client("sessions-e2e");
    let thread = client
        .threads_create("proj", "mem", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let first = run(&mut client, &thread.id, "k-1", "before the crash");
    let old = pid_of(&pidfile);
    drop(client);
    server.kill9();
    assert!(alive(old), "the live agent is orphaned by kill -9");
    server.spawn();
    eventually("the orphaned agent to die", || !alive(old));
    let mut client = server.client("sessions-e2e");
    assert_eq!(
        client.turns_get(&first).unwrap().state.as_str(),
        "completed"
    );
    let second = run(&mut client, &thread.id, "k-2", "after the crash");
    assert_ne!(pid_of(&pidfile), old);
    assert_eq!(
        session_of(&mut client, &first),
        session_of(&mut client, &second)
    );
    assert_eq!(
        observations(&mut client, &thread.id, &second, loaded).len(),
        1
    );
    assert!(
        lapis_e2e::journal::turn_reply(&mut client, &thread.id, &second)
            .starts_with("recall: before the crash | after the crash")
    );
    server.finish(&[], &[]);
}

/// A changed provider definition (here its arguments) replaces the session
/// at the next turn, and so does a new thread configuration version; both
/// are journaled with their reason.
#[test]
fn a_changed_provider_or_thread_version_replaces_the_session() {
    let scratch = tempfile::tempdir().unwrap();
    let history = arg(&scratch.path().join("history"));
    let agent = fixture(&["--recall", "--load-session", "--history", &history]);
    let mut server = Server::start_full(json!({}), json!({ "mem": agent }));
    let mut client = server.client("sessions-e2e");
    let thread = client
        .threads_create("proj", "mem", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let first = run(&mut client, &thread.id, "r-1", "one");
    drop(client);
    assert_eq!(server.stop(), Some(0));
    let mut config: Value =
        serde_json::from_slice(&std::fs::read(&server.config).unwrap()).unwrap();
    config["providers"]["mem"]["args"]
        .as_array_mut()
        .unwrap()
        .push(json!("--thoughts"));
    config["providers"]["mem"]["args"]
        .as_array_mut()
        .unwrap()
        .push(json!("1"));
    std::fs::write(&server.config, serde_json::to_vec(&config).unwrap()).unwrap();
    server.spawn();
    let mut client = server.client("sessions-e2e");
    let second = run(&mut client, &thread.id, "r-2", "two");
    let replacements = observations(&mut client, &thread.id, &second, replaced);
    assert_eq!(replacements.len(), 1, "{replacements:?}");
    assert_eq!(replacements[0].reason, ReplaceReason::ProviderChanged);
    assert_eq!(
        replacements[0].previous_session_id,
        session_of(&mut client, &first)
    );
    assert_ne!(
        session_of(&mut client, &first),
        session_of(&mut client, &second)
    );
    assert!(observations(&mut client, &thread.id, &second, loaded).is_empty());
    // A new configuration version replaces the (live) session as well.
    let configure =
        ThreadsConfigure::new(&thread.id, 1).approval(lapis_protocol::ApprovalPolicy::AllowAll);
    let _: Value = client.call("threads.configure", &configure).unwrap();
    let third = run(&mut client, &thread.id, "r-3", "three");
    let replacements = observations(&mut client, &thread.id, &third, replaced);
    assert_eq!(replacements.len(), 1, "{replacements:?}");
    assert_eq!(replacements[0].reason, ReplaceReason::ThreadReconfigured);
    assert_ne!(
        session_of(&mut client, &second),
        session_of(&mut client, &third)
    );
    // The unchanged session is kept from here on.
    let fourth = run(&mut client, &thread.id, "r-4", "four");
    assert_eq!(
        session_of(&mut client, &third),
        session_of(&mut client, &fourth)
    );
    server.finish(&[], &[]);
}

fn resumed(n: Note) -> Option<SessionResumed> {
    match n {
        Note::SessionResumed(r) => Some(r),
        _ => None,
    }
}

/// The fixture's `--lifecycle-ledger`: one `resume|load|close SESSION` line
/// per request it received.
fn lifecycle(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// An agent that advertises `session/resume` (and `session/close`) is
/// resumed without a replay, never loaded, though it offers `session/load`
/// too; its retired process closed the session first. One that refuses the
/// resume falls back to `session/load`, which the journal says.
#[test]
fn resume_is_used_when_advertised_and_load_otherwise() {
    let scratch = tempfile::tempdir().unwrap();
    let path = |n: &str| scratch.path().join(n);
    let (ha, hb, la, lb) = (
        arg(&path("a.history")),
        arg(&path("b.history")),
        path("a.ledger"),
        path("b.ledger"),
    );
    let mut a = fixture(&[
        "--recall",
        "--load-session",
        "--resume-session",
        "--close-session",
        "--history",
        &ha,
        "--lifecycle-ledger",
        &arg(&la),
    ]);
    let mut b = fixture(&[
        "--recall",
        "--load-session",
        "--resume-session",
        "--refuse-resume",
        "--history",
        &hb,
        "--lifecycle-ledger",
        &arg(&lb),
    ]);
    a["idleSeconds"] = json!(1);
    b["idleSeconds"] = json!(0);
    let server = Server::start_full(json!({}), json!({ "a": a, "b": b }));
    let mut client = server.client("sessions-e2e");
    let ta = client
        .threads_create("proj", "a", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let a1 = run(&mut client, &ta.id, "a-1", "alpha one");
    let s1 = session_of(&mut client, &a1);
    // Past its idle second the agent is evicted, closing its session.
    eventually("the first agent to close its session", || {
        lifecycle(&la) == [format!("close {s1}")]
    });
    let a2 = run(&mut client, &ta.id, "a-2", "alpha two");
    assert_eq!(session_of(&mut client, &a2), s1);
    assert!(
        lapis_e2e::journal::turn_reply(&mut client, &ta.id, &a2)
            .starts_with("recall: alpha one | alpha two")
    );
    let resumes = observations(&mut client, &ta.id, &a2, resumed);
    assert_eq!(resumes.len(), 1, "{resumes:?}");
    assert_eq!(resumes[0].session_id, s1);
    assert!(observations(&mut client, &ta.id, &a2, loaded).is_empty());
    assert!(observations(&mut client, &ta.id, &a2, reset).is_empty());
    eventually("the second agent to close its session", || {
        lifecycle(&la).len() == 3
    });
    assert_eq!(
        lifecycle(&la),
        [
            format!("close {s1}"),
            format!("resume {s1}"),
            format!("close {s1}")
        ]
    );

    // A refused resume: `session/load` restores the session (history
    // replayed and counted), and the note says the resume failed.
    let tb = client
        .threads_create("proj", "b", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let b1 = run(&mut client, &tb.id, "b-1", "beta one");
    let sb = session_of(&mut client, &b1);
    let b2 = run(&mut client, &tb.id, "b-2", "beta two");
    assert_eq!(session_of(&mut client, &b2), sb);
    let loads = observations(&mut client, &tb.id, &b2, loaded);
    assert_eq!(loads.len(), 1, "{loads:?}");
    assert!(loads[0].resume_failed, "{loads:?}");
    assert_eq!(loads[0].replayed_updates, 1, "{loads:?}");
    assert!(observations(&mut client, &tb.id, &b2, resumed).is_empty());
    assert_eq!(
        lifecycle(&lb),
        [format!("resume {sb}"), format!("load {sb}")],
        "no close: b does not advertise it"
    );
    server.finish(&[], &[]);
}
