//! Unit tests of the engine's pure parts; the engine with real agents is
//! tested end to end in `tests/tests/e2e/acp_engine.rs`.

use super::worker::turn_end;
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
