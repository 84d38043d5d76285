//! Cancellation and teardown with real processes: `session/cancel` and its
//! deadline, and no process of the agent's group — grandchildren included —
//! surviving the turn.

use std::time::Duration;

use lapis_protocol::Observation;
use lapis_service::acp::{Payload, TurnOutcome};

use crate::acp::{
    AskMode, CancelOn, Recorder, alive, arg, cancel_sent, completed, fixture, message, read_pid,
    request, run_with,
};

fn session_started(e: &Payload) -> bool {
    matches!(e, Payload::Observation(Observation::SessionStarted { .. }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_ends_with_the_agents_cancelled_stop_reason() {
    let dir = tempfile::tempdir().unwrap();
    let req = request(fixture(&["--chunks", "1", "--hang"]), dir.path());
    let (outcome, hooks) = run_with(req, |cancel| {
        let mut r = Recorder::new(AskMode::Never);
        r.cancel_on = Some((cancel, CancelOn::Event(message)));
        r
    })
    .await;
    assert_eq!(outcome, TurnOutcome::Cancelled { dispatched: true });
    assert!(!outcome.fences());
    assert_eq!(hooks.count(cancel_sent), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_turn_after_a_cancel_is_completed() {
    let dir = tempfile::tempdir().unwrap();
    let req = request(
        fixture(&["--chunks", "1", "--hang", "--cancel-stop", "end_turn"]),
        dir.path(),
    );
    let (outcome, _) = run_with(req, |cancel| {
        let mut r = Recorder::new(AskMode::Never);
        r.cancel_on = Some((cancel, CancelOn::Event(message)));
        r
    })
    .await;
    assert_eq!(outcome, completed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_ignoring_cancel_is_interrupted_at_the_deadline_and_killed() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("grandchild.pid");
    let mut req = request(
        fixture(&[
            "--chunks",
            "1",
            "--hang",
            "--ignore-cancel",
            "--linger",
            "--grandchild",
            &arg(&pidfile),
        ]),
        dir.path(),
    );
    req.limits.cancel_timeout = Duration::from_millis(300);
    req.limits.teardown.exit_grace = Duration::from_millis(200);
    let (outcome, _) = run_with(req, |cancel| {
        let mut r = Recorder::new(AskMode::Never);
        r.cancel_on = Some((cancel, CancelOn::Event(message)));
        r
    })
    .await;
    assert_eq!(outcome, TurnOutcome::Interrupted);
    assert!(outcome.fences());
    assert!(!alive(read_pid(&pidfile)), "grandchild survived teardown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_before_dispatch_never_sends_the_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger");
    let req = request(fixture(&["--ledger", &arg(&ledger)]), dir.path());
    let (outcome, hooks) = run_with(req, |cancel| {
        let mut r = Recorder::new(AskMode::Never);
        r.cancel_on = Some((cancel, CancelOn::Event(session_started)));
        r
    })
    .await;
    assert_eq!(outcome, TurnOutcome::Cancelled { dispatched: false });
    assert!(!hooks.dispatched());
    assert!(!ledger.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grandchildren_do_not_outlive_a_completed_turn() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("grandchild.pid");
    let req = request(
        fixture(&["--chunks", "1", "--grandchild", &arg(&pidfile)]),
        dir.path(),
    );
    let (outcome, _) = run_with(req, |_| Recorder::new(AskMode::Never)).await;
    assert_eq!(outcome, completed());
    assert!(!alive(read_pid(&pidfile)), "grandchild survived teardown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_ignores_stdin_close_is_terminated() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("grandchild.pid");
    let mut req = request(
        fixture(&["--linger", "--grandchild", &arg(&pidfile)]),
        dir.path(),
    );
    req.limits.teardown.exit_grace = Duration::from_millis(100);
    let (outcome, _) = run_with(req, |_| Recorder::new(AskMode::Never)).await;
    assert_eq!(outcome, completed());
    assert!(!alive(read_pid(&pidfile)));
}

/// The lingering agent (keeps running after stdin EOF, dies at once of
/// SIGTERM) is reaped while teardown waits: with a TERM grace far longer than
/// the test, it is reported as ended by SIGTERM, never escalated to SIGKILL
/// (its unreaped zombie once kept the group "alive" for the whole grace).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lingering_agent_dies_of_sigterm_and_is_reaped_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("agent.pid");
    let mut req = request(
        fixture(&["--linger", "--pidfile", &arg(&pidfile)]),
        dir.path(),
    );
    req.limits.teardown.exit_grace = Duration::from_millis(50);
    req.limits.teardown.term_grace = Duration::from_secs(3600);
    let (handle, signal) = lapis_service::acp::cancel_channel();
    drop(handle);
    let hooks = std::sync::Arc::new(Recorder::new(AskMode::Never));
    let (outcome, teardown) = lapis_service::acp::run_turn_detached(req, hooks, signal).await;
    assert_eq!(outcome, completed());
    let agent = read_pid(&pidfile);
    // The outcome is known while the agent still runs: teardown is the
    // caller's to schedule.
    assert!(alive(agent));
    let stopped = teardown
        .expect("a started agent has a teardown")
        .run()
        .await;
    assert_eq!(stopped, lapis_service::acp::Stopped::Terminated);
    assert!(!alive(agent));
}

/// An agent that exits on stdin EOF is reported as having exited by itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_exiting_on_stdin_close_is_reported_as_exited() {
    let dir = tempfile::tempdir().unwrap();
    let mut req = request(fixture(&["--chunks", "1"]), dir.path());
    req.limits.teardown.exit_grace = Duration::from_secs(3600);
    let (_handle, signal) = lapis_service::acp::cancel_channel();
    let hooks = std::sync::Arc::new(Recorder::new(AskMode::Never));
    let (outcome, teardown) = lapis_service::acp::run_turn_detached(req, hooks, signal).await;
    assert_eq!(outcome, completed());
    let stopped = teardown.unwrap().run().await;
    assert_eq!(stopped, lapis_service::acp::Stopped::Exited);
}

/// A sleeping fixture in its own process group, as a crashed controller
/// would have left an agent behind.
fn orphan(dir: &std::path::Path, name: &str) -> std::process::Child {
    use std::os::unix::process::CommandExt;
    let pidfile = dir.join(name);
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_fixture-agent"))
        .args(["--sleeper", &arg(&pidfile)])
        .process_group(0)
        .spawn()
        .unwrap();
    while !pidfile.exists() {
        std::thread::sleep(Duration::from_millis(2));
    }
    child
}

#[test]
fn agents_orphaned_by_a_crashed_controller_are_killed_at_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let registry = lapis_service::acp::AgentRegistry::new(dir.path().join("agents"));
    let mut left_behind = orphan(dir.path(), "a.pid");
    let pid = left_behind.id();
    // The controller "crashes": the record stays, nobody tears the agent down.
    std::mem::forget(registry.record(pid));
    assert!(alive(pid));
    assert_eq!(registry.reap_orphans(), [pid]);
    left_behind.wait().unwrap();
    assert!(!alive(pid));
    assert_eq!(std::fs::read_dir(registry.dir()).unwrap().count(), 0);
}

#[test]
fn a_reused_pid_is_never_killed_by_orphan_cleanup() {
    let dir = tempfile::tempdir().unwrap();
    let registry = lapis_service::acp::AgentRegistry::new(dir.path().join("agents"));
    std::fs::create_dir_all(registry.dir()).unwrap();
    let mut stranger = orphan(dir.path(), "b.pid");
    let pid = stranger.id();
    let real = lapis_service::acp::start_time(pid).unwrap();
    // A record for this pid from an earlier process with another start time.
    std::fs::write(registry.dir().join(pid.to_string()), (real + 1).to_string()).unwrap();
    assert!(registry.reap_orphans().is_empty());
    assert!(alive(pid), "an unrelated process was killed");
    stranger.kill().unwrap();
    stranger.wait().unwrap();
}
