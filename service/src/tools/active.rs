//! Which turn each agent session is running now: a bridge call is the
//! call of that turn, and a session with no running turn calls nothing.
//!
//! What must stay true: an entry lives exactly as long as the
//! [`ActiveTurn`] guard the engine holds around the turn's run, so a call
//! that arrives after the turn ended (or from a session that never ran
//! one) is refused rather than attributed to some other turn.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The running turn of a session.
#[derive(Debug, Clone)]
pub(crate) struct Running {
    /// The thread.
    pub(crate) thread_id: String,
    /// The turn.
    pub(crate) turn_id: String,
    /// The thread's transcript store's gate, when it binds one: a tool
    /// result reaches the agent only once the store acknowledged it.
    pub(crate) gate: Option<super::transcript::Gate>,
}

/// Running turns by agent session number; cheap to clone.
#[derive(Debug, Clone, Default)]
pub(crate) struct ActiveTurns(Arc<Mutex<HashMap<u64, Running>>>);

/// Keeps a session's turn current; dropping it ends that.
#[derive(Debug)]
pub(crate) struct ActiveTurn {
    /// The map.
    turns: ActiveTurns,
    /// The session.
    session: u64,
}

impl Drop for ActiveTurn {
    fn drop(&mut self) {
        self.turns.lock().remove(&self.session);
    }
}

impl ActiveTurns {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Running>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `turn_id` of `thread_id` runs on `session` until the guard drops.
    pub(crate) fn begin(
        &self,
        session: u64,
        thread_id: &str,
        turn_id: &str,
        gate: Option<super::transcript::Gate>,
    ) -> ActiveTurn {
        let running = Running {
            thread_id: thread_id.to_owned(),
            turn_id: turn_id.to_owned(),
            gate,
        };
        self.lock().insert(session, running);
        ActiveTurn {
            turns: self.clone(),
            session,
        }
    }

    /// The turn `session` runs now.
    pub(crate) fn get(&self, session: u64) -> Option<Running> {
        self.lock().get(&session).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_is_current_while_its_guard_lives() {
        let a = ActiveTurns::default();
        assert!(a.get(1).is_none());
        let g = a.begin(1, "thr", "turn_1", None);
        assert_eq!(a.get(1).unwrap().turn_id, "turn_1");
        assert!(a.get(2).is_none());
        drop(g);
        assert!(a.get(1).is_none());
    }
}
