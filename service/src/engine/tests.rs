//! Unit tests of the engine's pure parts; the engine with real agents is
//! tested end to end in `tests/tests/e2e/acp_engine.rs`.

use super::outcome::{deadline_end, turn_end};
use crate::acp::TurnOutcome;
use crate::domain::TurnEnd;

#[test]
fn outcomes_map_to_turn_ends() {
    let cases = [
        (
            TurnOutcome::Completed {
                stop_reason: "end_turn".into(),
            },
            false,
            TurnEnd::Completed("end_turn".into()),
        ),
        (
            TurnOutcome::Cancelled { dispatched: true },
            true,
            TurnEnd::Cancelled("cancelled".into()),
        ),
        (
            TurnOutcome::Cancelled { dispatched: false },
            true,
            TurnEnd::Cancelled("cancelled_before_dispatch".into()),
        ),
        (
            TurnOutcome::Failed {
                code: "boundary_not_persisted",
                dispatched: false,
            },
            true,
            TurnEnd::Cancelled("cancelled_before_dispatch".into()),
        ),
        (
            TurnOutcome::Failed {
                code: "boundary_not_persisted",
                dispatched: false,
            },
            false,
            TurnEnd::Failed("boundary_not_persisted".into()),
        ),
        (
            TurnOutcome::Failed {
                code: "agent_error",
                dispatched: true,
            },
            false,
            TurnEnd::Failed("agent_error".into()),
        ),
        (
            TurnOutcome::SubmissionUnknown {
                code: "broken_pipe",
            },
            false,
            TurnEnd::Unknown("broken_pipe".into()),
        ),
        (
            TurnOutcome::Interrupted,
            true,
            TurnEnd::Interrupted("cancel_deadline".into()),
        ),
    ];
    for (outcome, cancel, want) in cases {
        assert_eq!(turn_end(&outcome, cancel), want, "{outcome:?}");
    }
}

#[test]
fn providers_from_config_json_are_validated() {
    use super::EngineConfig;
    let ok =
        serde_json::json!({"claude": {"command": "claude-code-acp", "envAllowlist": ["PATH"]}});
    let specs = EngineConfig::providers_from_json(&ok).unwrap();
    assert_eq!(specs["claude"].env_allowlist, ["PATH"]);
    let config =
        EngineConfig::new(specs).with_builtin_echo("/opt/lapis/bin/lapis-ai-controller".into());
    assert_eq!(config.providers["echo"].args, ["acp-echo"]);
    let bad = serde_json::json!({"x": {"command": "rel/agent"}});
    assert!(EngineConfig::providers_from_json(&bad).is_err());
    // A configured `echo` wins over the built-in.
    let own = serde_json::json!({"echo": {"command": "/usr/bin/my-echo"}});
    let config = EngineConfig::new(EngineConfig::providers_from_json(&own).unwrap())
        .with_builtin_echo("/x".into());
    assert!(config.providers["echo"].args.is_empty());
}

#[test]
fn a_deadline_marks_every_unconfirmed_end_and_never_a_completion() {
    let code = || super::DEADLINE_EXCEEDED.to_string();
    assert_eq!(
        deadline_end(TurnEnd::Cancelled("cancelled".into())),
        TurnEnd::Cancelled(code())
    );
    assert_eq!(
        deadline_end(TurnEnd::Interrupted("cancel_deadline".into())),
        TurnEnd::Interrupted(code())
    );
    assert_eq!(
        deadline_end(TurnEnd::Unknown("agent_exited".into())),
        TurnEnd::Interrupted(code())
    );
    for kept in [
        TurnEnd::Completed("end_turn".into()),
        TurnEnd::Failed("agent_error".into()),
    ] {
        assert_eq!(deadline_end(kept.clone()), kept);
    }
}
