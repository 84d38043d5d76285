//! Cancellation and teardown with real processes: `session/cancel` and its
//! deadline, and no process of the agent's group — grandchildren included —
//! surviving the turn.

use std::time::Duration;

use lapis_service::acp::TurnOutcome;

use crate::acp::{AskMode, Recorder, alive, arg, completed, fixture, read_pid, request, run_with};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_ends_with_the_agents_cancelled_stop_reason() {
    let dir = tempfile::tempdir().unwrap();
    let req = request(fixture(&["--chunks", "1", "--hang"]), dir.path());
    let (outcome, hooks) = run_with(req, |cancel| {
        let mut r = Recorder::new(AskMode::Never);
        r.cancel_on = Some((cancel, "message"));
        r
    })
    .await;
    assert_eq!(outcome, TurnOutcome::Cancelled { dispatched: true });
    assert!(!outcome.fences());
    assert_eq!(hooks.count("cancel_requested"), 1);
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
        r.cancel_on = Some((cancel, "message"));
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
        r.cancel_on = Some((cancel, "message"));
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
        r.cancel_on = Some((cancel, "session_started"));
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
