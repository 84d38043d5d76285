//! Bounded execution through the real `serve`: turn deadlines (the
//! provider's and per turn), an agent ignoring the deadline's cancel, and
//! `maxRunningTurns`.

use std::time::Duration;

use lapis_protocol::params::TurnsSubmit;
use serde_json::json;

use crate::acp_sessions::{fixture, status};
use crate::serve_support::Server;
use lapis_e2e::wait::{settled, until as eventually, wait_turn};

/// A turn past its deadline is cancelled through the cancel path: the agent
/// confirms, and the turn ends `cancelled` with `deadline_exceeded`. The
/// per-turn `maxTurnSeconds` overrides the provider's.
#[test]
fn an_overlong_turn_is_cancelled_at_its_deadline() {
    let mut slow = fixture(&["--chunks", "1", "--hang"]);
    slow["maxTurnSeconds"] = json!(1);
    let server = Server::start_full(
        json!({}),
        json!({ "slow": slow, "hang": fixture(&["--chunks", "1", "--hang"]) }),
    );
    let mut client = server.client("sessions-e2e");
    let thread = client
        .threads_create("proj", "slow", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let turn = client
        .turns_submit(&thread.id, "d-1", "never ends")
        .unwrap();
    lapis_e2e::wait::settles_as(
        &mut client,
        &turn.id,
        "cancelled",
        Some("deadline_exceeded"),
    );
    assert!(client.turns_get(&turn.id).unwrap().cancel_requested);
    let hang = client
        .threads_create("proj", "hang", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let submit = |cmd: &str, seconds: u64| TurnsSubmit {
        thread_id: hang.id.clone(),
        command_id: cmd.into(),
        prompt: "wait".into(),
        continues: None,
        max_turn_seconds: Some(seconds),
        expect: None,
    };
    let turn = client.turns_submit_with(&submit("d-2", 1)).unwrap();
    assert_eq!(turn.max_turn_seconds, Some(1));
    lapis_e2e::wait::settles_as(
        &mut client,
        &turn.id,
        "cancelled",
        Some("deadline_exceeded"),
    );
    assert!(client.turns_submit_with(&submit("d-3", 0)).is_err());
    server.finish(&[], &[]);
}

/// `server.maxRunningTurns` caps concurrent turns: with one slot, a
/// runnable turn in another workspace waits in the queue until the running
/// one has its outcome; `status` shows running/limit.
#[test]
fn max_running_turns_caps_concurrent_turns() {
    let server = Server::start_workspaces(
        json!({ "maxRunningTurns": 1 }),
        json!({ "hang": fixture(&["--chunks", "1", "--hang"]), "quick": fixture(&["--chunks", "1"]) }),
        &["other"],
    );
    let mut client = server.client("sessions-e2e");
    let ta = client
        .threads_create("proj", "hang", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let tb = client
        .threads_create("other", "quick", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let a = client.turns_submit(&ta.id, "c-1", "hold").unwrap();
    wait_turn(&mut client, &a.id, |s| s == "running");
    let b = client.turns_submit(&tb.id, "c-2", "go").unwrap();
    let s = status(&server);
    assert_eq!(s["agents"]["runningTurns"], 1, "{s}");
    assert_eq!(s["agents"]["maxRunningTurns"], 1, "{s}");
    assert_eq!(client.turns_get(&b.id).unwrap().state.as_str(), "queued");
    client.turns_cancel(&a.id).unwrap();
    let (state, _) = {
        let t = wait_turn(&mut client, &b.id, settled);
        (t.state.as_str().to_owned(), t.outcome)
    };
    assert_eq!(state, "completed");
    let (a, b) = (
        client.turns_get(&a.id).unwrap(),
        client.turns_get(&b.id).unwrap(),
    );
    assert!(
        b.prepared_at.unwrap() >= a.finished_at.unwrap(),
        "the second turn was claimed while the first still ran"
    );
    server.finish(&[], &[]);
}

/// An agent that ignores the deadline's `session/cancel` is `interrupted`
/// with `deadline_exceeded` when the cancel deadline passes, and its
/// workspace is fenced; its process is never reused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_ignoring_the_deadline_cancel_is_interrupted() {
    use lapis_service::engine::{Engine, EngineConfig};
    use lapis_service::{ApprovalPolicy, Store, StoreOptions, TurnState};

    use crate::acp_engine::Rig;

    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(StoreOptions::new(dir.path().join("home"))).unwrap();
    let mut spec = crate::acp::fixture(&["--chunks", "1", "--hang", "--ignore-cancel"]);
    spec.name = "stuck".into();
    spec.session.max_turn_seconds = 1;
    let mut config = EngineConfig::new([("stuck".to_string(), spec)].into_iter().collect());
    config.limits = crate::acp::test_limits();
    config.limits.cancel_timeout = Duration::from_millis(300);
    config.shutdown_grace = Duration::from_secs(5);
    let engine = Engine::new(store.clone(), config);
    let handle = Some(engine.start());
    let rig = Rig {
        dir,
        store,
        engine,
        handle,
    };
    let thread = rig.thread("ws", "stuck", ApprovalPolicy::Ask).await;
    let turn = rig.submit(&thread, "s-1", "never ends").await;
    let t = rig.settled(&turn).await;
    assert_eq!(t.state, TurnState::Interrupted);
    assert_eq!(t.outcome.as_deref(), Some("deadline_exceeded"));
    assert!(t.cancel_requested);
    assert_eq!(rig.store.status().fenced_workspaces, ["ws"]);
    // The interrupted agent was not kept.
    let engine = rig.engine.clone();
    eventually("the interrupted agent to be retired", || {
        engine.status().agents.live == 0
    });
    rig.handle.unwrap().shutdown().await;
}

/// An agent that never answers `initialize` fails its turn at the
/// provider's `handshakeSeconds` (before the dispatch boundary, so plain
/// `failed`), not at `maxTurnSeconds`; the workspace runs the next turn.
#[test]
fn an_agent_that_never_answers_initialize_fails_at_the_handshake_deadline() {
    let mut mute = fixture(&["--never-initialize"]);
    mute["handshakeSeconds"] = json!(1);
    mute["maxTurnSeconds"] = json!(604_800);
    let server = Server::start_full(
        json!({}),
        json!({ "mute": mute, "ok": fixture(&["--chunks", "1"]) }),
    );
    let mut client = server.client("sessions-e2e");
    let thread = client
        .threads_create("proj", "mute", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let turn = client.turns_submit(&thread.id, "h-1", "hello").unwrap();
    let t = wait_turn(&mut client, &turn.id, settled);
    assert_eq!(
        (t.state.as_str(), t.outcome.as_deref()),
        ("failed", Some("initialize_timeout"))
    );
    let ok = client
        .threads_create("proj", "ok", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let next = client.turns_submit(&ok.id, "h-2", "hello").unwrap();
    let t = wait_turn(&mut client, &next.id, settled);
    assert_eq!(t.state.as_str(), "completed");
    server.finish(&[], &[]);
}

/// An agent that closes its stdout mid-turn and keeps running is gone as
/// far as the turn is concerned: the turn settles at once as
/// `submission_unknown` (`agent_exited`; it was dispatched), not at
/// `maxTurnSeconds`, and the agent's group is torn down.
#[test]
fn an_agent_that_closes_stdout_and_keeps_running_settles_its_turn() {
    let mut gone = fixture(&["--close-stdout-at", "prompt"]);
    gone["maxTurnSeconds"] = json!(604_800);
    let server = Server::start_full(json!({}), json!({ "gone": gone }));
    let mut client = server.client("sessions-e2e");
    let thread = client
        .threads_create("proj", "gone", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let turn = client.turns_submit(&thread.id, "e-1", "hello").unwrap();
    let t = wait_turn(&mut client, &turn.id, settled);
    assert_eq!(
        (t.state.as_str(), t.outcome.as_deref()),
        ("submission_unknown", Some("agent_exited"))
    );
    client
        .turns_resolve(&turn.id, lapis_protocol::ResolveAs::Failed, true)
        .unwrap();
    server.finish(&[], &[]);
}

/// An agent that exits at the prompt while a descendant keeps its stdout
/// open (no EOF ever comes) is gone all the same: the turn settles as
/// `submission_unknown` (`agent_exited`) when the leader exits, not at
/// `maxTurnSeconds`, and teardown kills the descendant with the group.
#[test]
fn an_agent_whose_descendant_holds_stdout_open_settles_when_it_exits() {
    let scratch = tempfile::tempdir().unwrap();
    let pidfile = scratch.path().join("keeper.pid");
    let mut gone = fixture(&["--exit-leaving-stdout", pidfile.to_str().unwrap()]);
    gone["maxTurnSeconds"] = json!(604_800);
    let server = Server::start_full(json!({}), json!({ "gone": gone }));
    let mut client = server.client("sessions-e2e");
    let thread = client
        .threads_create("proj", "gone", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let turn = client.turns_submit(&thread.id, "k-1", "hello").unwrap();
    let t = wait_turn(&mut client, &turn.id, settled);
    assert_eq!(
        (t.state.as_str(), t.outcome.as_deref()),
        ("submission_unknown", Some("agent_exited"))
    );
    eventually("the descendant wrote its pid", || {
        std::fs::read_to_string(&pidfile).is_ok_and(|p| p.trim().parse::<u32>().is_ok())
    });
    let keeper = crate::acp::read_pid(&pidfile);
    eventually("the descendant is killed with the group", || {
        !crate::acp::alive(keeper)
    });
    client
        .turns_resolve(&turn.id, lapis_protocol::ResolveAs::Failed, true)
        .unwrap();
    server.finish(&[], &[]);
}
