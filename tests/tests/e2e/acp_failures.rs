//! Outcome classification with real agent processes: failures before the
//! dispatch boundary are plain `failed`; after it, an unreported outcome is
//! `submission_unknown` and the prompt is never sent twice.

use lapis_protocol::OutcomeCode;
use lapis_service::acp::{ProviderSpec, TurnOutcome};
use serde_json::json;

use crate::acp::{AskMode, Recorder, arg, fixture, request, run_fixture, run_with};

fn failed(code: &str) -> TurnOutcome {
    TurnOutcome::Failed {
        code: OutcomeCode::parse(code).expect("an outcome code"),
        dispatched: false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn launch_failures_are_failed_before_the_boundary() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            json!({"command": "/nonexistent/agent"}),
            "command_not_executable",
        ),
        (
            json!({"command": "lapis-surely-missing-agent"}),
            "command_not_found",
        ),
    ];
    for (def, code) in cases {
        let spec = ProviderSpec::from_json("p", &def).unwrap();
        let (outcome, hooks) =
            run_with(request(spec, dir.path()), |_| Recorder::new(AskMode::Never)).await;
        assert_eq!(outcome, failed(code));
        assert!(!hooks.dispatched());
    }
    let missing = dir.path().join("gone");
    let (outcome, _) = run_with(request(fixture(&[]), &missing), |_| {
        Recorder::new(AskMode::Never)
    })
    .await;
    assert_eq!(outcome, failed("workspace_unavailable"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_failures_are_failed_with_short_codes() {
    let cases: [(&[&str], &str); 6] = [
        (&["--exit-at", "initialize"], "agent_exited"),
        (&["--fail-initialize"], "initialize_failed"),
        (&["--protocol-version", "2"], "protocol_version_unsupported"),
        (&["--exit-at", "session_new"], "agent_exited"),
        (&["--auth-required"], "auth_required"),
        (
            &["--oversized", "0", "--exit-at", "session_new"],
            "agent_exited",
        ),
    ];
    for (args, code) in cases {
        let (outcome, hooks, _dir) = run_fixture(args).await;
        assert_eq!(outcome, failed(code), "for {args:?}");
        assert!(
            !hooks.dispatched(),
            "boundary must not be passed for {args:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unpersisted_boundary_never_sends_the_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger");
    let spec = fixture(&["--ledger", &arg(&ledger)]);
    let (outcome, _) = run_with(request(spec, dir.path()), |_| {
        let mut r = Recorder::new(AskMode::Never);
        r.fail_boundary = true;
        r
    })
    .await;
    assert_eq!(outcome, failed("boundary_not_persisted"));
    assert!(
        !ledger.exists(),
        "the agent must never have seen the prompt"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_exit_after_the_prompt_is_submission_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger");
    let spec = fixture(&["--ledger", &arg(&ledger), "--exit-at", "prompt"]);
    let (outcome, hooks) =
        run_with(request(spec, dir.path()), |_| Recorder::new(AskMode::Never)).await;
    assert_eq!(
        outcome,
        TurnOutcome::SubmissionUnknown {
            code: OutcomeCode::AgentExited
        }
    );
    assert!(outcome.fences());
    assert!(hooks.dispatched());
    // Received exactly once, never re-dispatched.
    assert_eq!(std::fs::read_to_string(&ledger).unwrap().lines().count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_output_survives_an_agent_that_dies_without_answering() {
    let (outcome, hooks, _dir) = run_fixture(&["--chunks", "10", "--exit-after-stream"]).await;
    assert_eq!(
        outcome,
        TurnOutcome::SubmissionUnknown {
            code: OutcomeCode::AgentExited
        }
    );
    let want: String = (0..10).map(|i| format!("chunk{i} ")).collect();
    assert_eq!(hooks.reply(), want);
    assert_eq!(hooks.count(crate::acp::stopped), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_line_is_a_protocol_failure_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let mut req = request(
        fixture(&["--chunks", "2", "--oversized", "200000"]),
        dir.path(),
    );
    req.limits.max_line_bytes = 64 * 1024;
    let (outcome, hooks) = run_with(req, |_| Recorder::new(AskMode::Never)).await;
    assert_eq!(
        outcome,
        TurnOutcome::SubmissionUnknown {
            code: OutcomeCode::LineTooLong
        }
    );
    assert_eq!(hooks.reply(), "chunk0 chunk1 ");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_stop_reasons_complete_the_turn() {
    let (outcome, _, _dir) = run_fixture(&["--stop-reason", "max_tokens"]).await;
    assert_eq!(
        outcome,
        TurnOutcome::Completed {
            stop_reason: "max_tokens".into()
        }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_answer_to_the_prompt_is_a_reported_failure() {
    let (outcome, hooks, _dir) = run_fixture(&["--chunks", "1", "--prompt-error"]).await;
    assert_eq!(
        outcome,
        TurnOutcome::Failed {
            code: OutcomeCode::AgentError,
            dispatched: true
        }
    );
    assert!(!outcome.fences());
    assert_eq!(hooks.reply(), "chunk0 ");
}

/// A `stopReason` outside ACP's enum (misspelt, empty, oversized) is the
/// agent's protocol error: the turn fails after its dispatch with one fixed
/// code, and the value itself is recorded nowhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_reason_outside_the_enum_fails_with_a_fixed_code() {
    let long = "z".repeat(1000);
    for stop in ["end turn", "", long.as_str()] {
        let (outcome, hooks, _dir) = run_fixture(&["--stop-reason", stop]).await;
        assert_eq!(
            outcome,
            TurnOutcome::Failed {
                code: OutcomeCode::InvalidStopReason,
                dispatched: true
            },
            "for {stop:?}"
        );
        let stored: Vec<_> = hooks.events().iter().map(|e| e.to_value()).collect();
        let recorded = serde_json::to_string(&stored).unwrap();
        assert!(recorded.contains("invalid_stop_reason"), "{recorded}");
        if !stop.is_empty() {
            assert!(!recorded.contains(stop), "{recorded}");
        }
    }
}

/// Version negotiation against an agent that offers ACP v2 (docs/acp-v2.md):
/// one that also speaks v1 answers the controller's `protocolVersion: 1`
/// and the turn runs on v1; one that speaks only v2 answers 2 and the turn
/// fails `protocol_version_unsupported` before anything else is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_offering_v2_is_negotiated_down_to_v1_or_refused() {
    let (outcome, hooks, _dir) = run_fixture(&["--protocol-versions", "1,2"]).await;
    assert!(
        matches!(outcome, TurnOutcome::Completed { .. }),
        "{outcome:?}"
    );
    assert!(hooks.dispatched());
    for args in [
        &["--protocol-versions", "2"][..],
        &["--protocol-versions", "2,3"][..],
    ] {
        let (outcome, hooks, _dir) = run_fixture(args).await;
        assert_eq!(outcome, failed("protocol_version_unsupported"), "{args:?}");
        assert!(!hooks.dispatched(), "{args:?}");
    }
}
