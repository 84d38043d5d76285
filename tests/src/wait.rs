//! Bounded polling, once for the whole suite.
//!
//! The controller works asynchronously (the engine claims and runs turns on
//! its own), so tests wait for a condition rather than sleep a guessed time.
//! Every wait here polls and gives up after [`PATIENCE`] with a message
//! naming what it waited for: a hang guard, never a timing threshold (a
//! test never asserts that something happened *quickly*).

use std::time::{Duration, Instant};

use lapis_protocol::client::Client;
use lapis_protocol::{Turn, TurnState};

/// How long a wait lasts before the test fails as hung.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// Between two probes.
const INTERVAL: Duration = Duration::from_millis(10);

/// Polls `probe` until it yields a value (at most [`PATIENCE`]).
pub fn eventually<T>(what: &str, probe: impl FnMut() -> Option<T>) -> T {
    within(what, PATIENCE, probe)
}

/// Polls until `cond` holds (at most [`PATIENCE`]).
pub fn until(what: &str, mut cond: impl FnMut() -> bool) {
    eventually(what, || cond().then_some(()))
}

/// Polls `probe` until it yields a value, for at most `limit`.
pub fn within<T>(what: &str, limit: Duration, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = probe() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(INTERVAL);
    }
}

/// Whether a turn state (by wire name) is settled: finished, or fenced
/// waiting for its owner — neither queued nor in flight.
pub fn settled(state: &str) -> bool {
    TurnState::parse(state).is_some_and(|s| s.is_terminal() || s.is_fenced())
}

/// Polls `turns.get` until `done` holds for the turn's state name; returns
/// the turn as it was then.
pub fn wait_turn(client: &mut Client, turn: &str, done: impl Fn(&str) -> bool) -> Turn {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let t = client.turns_get(turn).expect("turns.get");
        if done(t.state.as_str()) {
            return t;
        }
        assert!(
            Instant::now() < deadline,
            "turn {turn} stuck in {}",
            t.state
        );
        std::thread::sleep(INTERVAL);
    }
}

/// Polls `turns.get` until the turn is [`settled`].
pub fn settle(client: &mut Client, turn: &str) -> Turn {
    wait_turn(client, turn, settled)
}

/// [`settle`]s the turn and asserts it settled as `state` with `outcome`
/// (wire names); returns it.
#[track_caller]
pub fn settles_as(client: &mut Client, turn: &str, state: &str, outcome: Option<&str>) -> Turn {
    let t = settle(client, turn);
    assert_eq!(
        (t.state.as_str(), t.outcome.as_deref()),
        (state, outcome),
        "turn {turn}"
    );
    t
}
