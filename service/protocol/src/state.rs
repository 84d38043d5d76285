//! The turn state machine, as data.
//!
//! [`TRANSITIONS`] is the only place that says which state change is allowed;
//! every change of a turn's state in the store goes through [`next_state`].
//! What must stay true (and is tested exhaustively over every state × event):
//! - terminal states (`completed`, `failed`, `cancelled`) never move again;
//! - `submission_unknown` and `interrupted` (the *fenced* states) move only by
//!   an owner's resolution, and only to `failed` or `cancelled`;
//! - nothing ever goes back to `queued`, `preparing` or `dispatched`: a turn is
//!   dispatched at most once.

use serde::{Deserialize, Serialize};

/// The state of one turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnState {
    /// Accepted and waiting for its workspace.
    Queued,
    /// Claimed by the runner; the agent is being started. Not yet dispatched.
    Preparing,
    /// The dispatch boundary is persisted; the prompt is (being) written.
    Dispatched,
    /// The agent acknowledged work on the prompt.
    Running,
    /// The agent reported the turn finished.
    Completed,
    /// The turn failed (before dispatch, by an agent error, or by resolution).
    Failed,
    /// The turn was cancelled (before dispatch, by the agent, or by resolution).
    Cancelled,
    /// The outcome was lost after the dispatch boundary. Fences the workspace.
    SubmissionUnknown,
    /// A cancel was pending when the outcome was lost. Fences the workspace.
    Interrupted,
}

/// What happens to a turn; the input of the transition table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnEvent {
    /// The scheduler hands the turn to the runner.
    Claim,
    /// The dispatch boundary: the prompt is about to be written to the agent.
    Dispatch,
    /// The agent started working on the prompt.
    Start,
    /// The agent reported a finished turn.
    Complete,
    /// The turn failed with an authoritative outcome (setup error, agent error).
    Fail,
    /// The turn was cancelled with an authoritative outcome.
    Cancel,
    /// The outcome was lost after the dispatch boundary, no cancel pending.
    LoseOutcome,
    /// The outcome was lost while a cancel was pending (or its deadline passed).
    Interrupt,
    /// The owner confirmed the agent stopped and resolved the turn as failed.
    ResolveFailed,
    /// The owner confirmed the agent stopped and resolved the turn as cancelled.
    ResolveCancelled,
}

use TurnEvent as E;
use TurnState as S;

/// Every allowed transition: `(from, event, to)`. Anything absent is refused.
pub const TRANSITIONS: &[(TurnState, TurnEvent, TurnState)] = &[
    (S::Queued, E::Claim, S::Preparing),
    (S::Queued, E::Cancel, S::Cancelled),
    (S::Preparing, E::Dispatch, S::Dispatched),
    (S::Preparing, E::Fail, S::Failed),
    (S::Preparing, E::Cancel, S::Cancelled),
    (S::Dispatched, E::Start, S::Running),
    (S::Dispatched, E::Complete, S::Completed),
    (S::Dispatched, E::Fail, S::Failed),
    (S::Dispatched, E::Cancel, S::Cancelled),
    (S::Dispatched, E::LoseOutcome, S::SubmissionUnknown),
    (S::Dispatched, E::Interrupt, S::Interrupted),
    (S::Running, E::Complete, S::Completed),
    (S::Running, E::Fail, S::Failed),
    (S::Running, E::Cancel, S::Cancelled),
    (S::Running, E::LoseOutcome, S::SubmissionUnknown),
    (S::Running, E::Interrupt, S::Interrupted),
    (S::SubmissionUnknown, E::ResolveFailed, S::Failed),
    (S::SubmissionUnknown, E::ResolveCancelled, S::Cancelled),
    (S::Interrupted, E::ResolveFailed, S::Failed),
    (S::Interrupted, E::ResolveCancelled, S::Cancelled),
];

/// The state after `event` in `state`, or `None` when the table refuses it.
pub fn next_state(state: TurnState, event: TurnEvent) -> Option<TurnState> {
    TRANSITIONS
        .iter()
        .find(|(from, ev, _)| *from == state && *ev == event)
        .map(|(_, _, to)| *to)
}

impl TurnState {
    /// Every state, in lifecycle order.
    pub const ALL: [TurnState; 9] = [
        S::Queued,
        S::Preparing,
        S::Dispatched,
        S::Running,
        S::Completed,
        S::Failed,
        S::Cancelled,
        S::SubmissionUnknown,
        S::Interrupted,
    ];

    /// The stable name stored in the database and sent on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            S::Queued => "queued",
            S::Preparing => "preparing",
            S::Dispatched => "dispatched",
            S::Running => "running",
            S::Completed => "completed",
            S::Failed => "failed",
            S::Cancelled => "cancelled",
            S::SubmissionUnknown => "submission_unknown",
            S::Interrupted => "interrupted",
        }
    }

    /// Parse a stored name.
    pub fn parse(s: &str) -> Option<TurnState> {
        TurnState::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// `completed`, `failed` or `cancelled`: never moves again.
    pub fn is_terminal(self) -> bool {
        matches!(self, S::Completed | S::Failed | S::Cancelled)
    }

    /// `submission_unknown` or `interrupted`: fences the workspace.
    pub fn is_fenced(self) -> bool {
        matches!(self, S::SubmissionUnknown | S::Interrupted)
    }

    /// Holds the workspace lease (claimed and not yet finished).
    pub fn is_in_flight(self) -> bool {
        matches!(self, S::Preparing | S::Dispatched | S::Running)
    }

    /// Past the dispatch boundary without a known outcome.
    pub fn is_past_dispatch(self) -> bool {
        matches!(self, S::Dispatched | S::Running)
    }

    /// Not terminal: the turn still counts as active on its thread.
    pub fn is_active(self) -> bool {
        !self.is_terminal()
    }
}

impl std::fmt::Display for TurnState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl TurnEvent {
    /// Every event.
    pub const ALL: [TurnEvent; 10] = [
        E::Claim,
        E::Dispatch,
        E::Start,
        E::Complete,
        E::Fail,
        E::Cancel,
        E::LoseOutcome,
        E::Interrupt,
        E::ResolveFailed,
        E::ResolveCancelled,
    ];
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The expected matrix, written out independently of [`TRANSITIONS`]:
    /// one row per state, one column per event in `TurnEvent::ALL` order.
    /// `-` = refused; otherwise the initial of the target state.
    const MATRIX: [(TurnState, &str); 9] = [
        //                     Cl Di St Co Fa Ca Lo In RF RC
        (S::Queued, /*      */ "P  -  -  -  -  X  -  -  -  -"),
        (S::Preparing, /*   */ "-  D  -  -  F  X  -  -  -  -"),
        (S::Dispatched, /*  */ "-  -  R  C  F  X  U  I  -  -"),
        (S::Running, /*     */ "-  -  -  C  F  X  U  I  -  -"),
        (S::Completed, /*   */ "-  -  -  -  -  -  -  -  -  -"),
        (S::Failed, /*      */ "-  -  -  -  -  -  -  -  -  -"),
        (S::Cancelled, /*   */ "-  -  -  -  -  -  -  -  -  -"),
        (S::SubmissionUnknown, "-  -  -  -  -  -  -  -  F  X"),
        (S::Interrupted, /* */ "-  -  -  -  -  -  -  -  F  X"),
    ];

    fn decode(c: &str) -> Option<TurnState> {
        match c {
            "-" => None,
            "P" => Some(S::Preparing),
            "D" => Some(S::Dispatched),
            "R" => Some(S::Running),
            "C" => Some(S::Completed),
            "F" => Some(S::Failed),
            "X" => Some(S::Cancelled),
            "U" => Some(S::SubmissionUnknown),
            "I" => Some(S::Interrupted),
            other => panic!("bad matrix cell {other}"),
        }
    }

    #[test]
    fn every_state_times_every_event_matches_the_matrix() {
        let mut checked = 0;
        for (state, row) in MATRIX {
            let cells: Vec<&str> = row.split_whitespace().collect();
            assert_eq!(cells.len(), TurnEvent::ALL.len(), "row for {state}");
            for (event, cell) in TurnEvent::ALL.into_iter().zip(cells) {
                assert_eq!(
                    next_state(state, event),
                    decode(cell),
                    "{state} × {event:?}"
                );
                checked += 1;
            }
        }
        assert_eq!(checked, 90);
        assert_eq!(MATRIX.map(|(s, _)| s), TurnState::ALL);
    }

    #[test]
    fn table_has_no_duplicate_keys() {
        for (i, (a, e, _)) in TRANSITIONS.iter().enumerate() {
            for (b, f, _) in &TRANSITIONS[i + 1..] {
                assert!(!(a == b && e == f), "duplicate entry {a} × {e:?}");
            }
        }
    }

    #[test]
    fn invariants_hold_for_every_cell() {
        for state in TurnState::ALL {
            for event in TurnEvent::ALL {
                let Some(to) = next_state(state, event) else {
                    continue;
                };
                assert!(!state.is_terminal(), "terminal {state} moved on {event:?}");
                if state.is_fenced() {
                    assert!(matches!(event, E::ResolveFailed | E::ResolveCancelled));
                    assert!(to.is_terminal());
                }
                if matches!(event, E::ResolveFailed | E::ResolveCancelled) {
                    assert!(state.is_fenced(), "resolution from unfenced {state}");
                }
                assert!(
                    !matches!(to, S::Queued | S::Preparing) || state == S::Queued,
                    "{state} went back to {to}"
                );
                if to == S::Dispatched {
                    assert_eq!(state, S::Preparing);
                }
            }
        }
    }

    #[test]
    fn names_round_trip() {
        for s in TurnState::ALL {
            assert_eq!(TurnState::parse(s.as_str()), Some(s));
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        assert_eq!(TurnState::parse("bogus"), None);
    }
}
