//! Agent sessions through the real `serve`: outcome before teardown, the
//! live-agent pool, resume, replacement and bounded execution.

use std::path::Path;
use std::time::{Duration, Instant};

use lapis_service::client::{Client, Credential};
use serde_json::{Value, json};

use crate::acp::{alive, arg, read_pid};
use crate::serve_support::{OWNER, Server};

fn fixture(args: &[&str]) -> Value {
    json!({ "command": env!("CARGO_BIN_EXE_fixture-agent"), "args": args })
}

fn sdk(server: &Server) -> Client {
    Client::open(
        &server.socket(),
        Credential::Token {
            token: OWNER.to_owned(),
            application: "sessions-e2e".to_owned(),
        },
    )
    .unwrap()
}

/// Polls until `done(state)`; returns (state, outcome).
fn wait_turn(
    client: &mut Client,
    turn: &str,
    done: impl Fn(&str) -> bool,
) -> (String, Option<String>) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let t = client.turns_get(turn).unwrap();
        let state = t.state.as_str().to_owned();
        if done(&state) {
            return (state, t.outcome);
        }
        assert!(Instant::now() < deadline, "turn stuck in {state}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn settled(s: &str) -> bool {
    !matches!(s, "queued" | "preparing" | "dispatched" | "running")
}

/// Waits (bounded) until `cond` holds.
fn eventually(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
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
    let linger = fixture(&["--linger", "--pidfile", &arg(&pidfile)]);
    let mut server = Server::start_full(json!({}), json!({ "linger": linger }));
    let mut client = sdk(&server);
    let thread = client
        .threads_create("proj", "linger", "ask", None)
        .unwrap();
    let turn = client.turns_submit(&thread.id, "l-1", "answer").unwrap();
    let (state, outcome) = wait_turn(&mut client, &turn.id, settled);
    assert_eq!(
        (state.as_str(), outcome.as_deref()),
        ("completed", Some("end_turn"))
    );
    let agent = pid_of(&pidfile);
    assert!(
        alive(agent),
        "the outcome was committed only after teardown"
    );
    drop(client);
    server.kill9();
    server.spawn();
    let mut client = sdk(&server);
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
    let linger = fixture(&["--linger", "--pidfile", &arg(&pidfile)]);
    let server = Server::start_full(json!({}), json!({ "linger": linger }));
    let mut client = sdk(&server);
    let thread = client
        .threads_create("proj", "linger", "ask", None)
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
