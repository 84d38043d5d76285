//! The socket's connection cap, and who gives way when it is reached.
//!
//! What must stay true:
//! - at most `max` connections are counted at once; a connection over the
//!   cap is never left hanging: it is answered with a `limit_reached` error
//!   frame and closed;
//! - connections that have not authenticated yet cannot lock authenticated
//!   clients out: when the cap is reached, the oldest unauthenticated
//!   connection is shed (it gets the same explicit frame) and its slot goes
//!   to the newcomer, provided it has had [`SHED_GRACE`] to say `hello`
//!   (so a flood cannot shed a client mid-handshake). Otherwise the
//!   newcomer is refused. Together with the hello deadline this keeps `status` answering
//!   while a flood of idle connections is held open.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// How long an unauthenticated connection is safe from being shed: enough
/// for any client to connect and say `hello`.
pub(crate) const SHED_GRACE: Duration = Duration::from_secs(1);

/// The cap and the unauthenticated connections that may be shed.
#[derive(Debug)]
pub(crate) struct Admission {
    /// Most connections counted at once.
    max: usize,
    /// Counted connections and the sheddable ones.
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Connections holding a slot.
    open: usize,
    /// Unauthenticated connections by number (oldest first), with when
    /// they were admitted and the signal that sheds them.
    pending: BTreeMap<u64, (Instant, Arc<Shed>)>,
}

/// Tells a connection it was shed.
#[derive(Debug, Default)]
pub(crate) struct Shed {
    /// Set once the connection's slot went to a newcomer.
    done: AtomicBool,
    /// Wakes the connection's loop.
    notify: Notify,
}

/// What admission decided for a new connection.
#[derive(Debug)]
pub(crate) enum Admit {
    /// Serve it; the slot is released when the guard drops.
    Yes(Slot),
    /// Every slot is held by an authenticated connection: refuse it.
    Full,
}

impl Admission {
    /// A cap of `max` connections.
    pub(crate) fn new(max: usize) -> Arc<Admission> {
        Arc::new(Admission {
            max: max.max(1),
            state: Mutex::new(State::default()),
        })
    }

    /// Admits connection `number` at `now`, shedding the oldest
    /// unauthenticated connection past its grace when the cap is reached.
    pub(crate) fn admit(self: &Arc<Self>, number: u64, now: Instant) -> Admit {
        let mut state = self.state.lock().expect("poisoned");
        if state.open >= self.max {
            let sheddable = state
                .pending
                .first_key_value()
                .is_some_and(|(_, (since, _))| now.saturating_duration_since(*since) >= SHED_GRACE);
            if !sheddable {
                return Admit::Full;
            }
            let Some((_, (_, shed))) = state.pending.pop_first() else {
                return Admit::Full;
            };
            // The slot moves to the newcomer: the shed connection no longer
            // counts and closes at once.
            shed.done.store(true, Ordering::SeqCst);
            shed.notify.notify_one();
        } else {
            state.open += 1;
        }
        let shed = Arc::new(Shed::default());
        state.pending.insert(number, (now, shed.clone()));
        Admit::Yes(Slot {
            admission: self.clone(),
            number,
            shed,
        })
    }

    /// Connections counted now.
    #[cfg(test)]
    pub(crate) fn open(&self) -> usize {
        self.state.lock().expect("poisoned").open
    }
}

/// A connection's slot under the cap.
#[derive(Debug)]
pub(crate) struct Slot {
    /// Where the slot is returned.
    admission: Arc<Admission>,
    /// The connection's number.
    number: u64,
    /// Set and notified when this connection is shed.
    shed: Arc<Shed>,
}

impl Slot {
    /// The connection authenticated: it can no longer be shed. False when it
    /// was shed first (the connection must close).
    pub(crate) fn authenticated(&self) -> bool {
        let mut state = self.admission.state.lock().expect("poisoned");
        state.pending.remove(&self.number);
        !self.shed.done.load(Ordering::SeqCst)
    }

    /// Resolves when this connection has been shed.
    pub(crate) async fn shed(&self) {
        loop {
            if self.shed.done.load(Ordering::SeqCst) {
                return;
            }
            self.shed.notify.notified().await;
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut state = self.admission.state.lock().expect("poisoned");
        state.pending.remove(&self.number);
        if !self.shed.done.load(Ordering::SeqCst) {
            state.open -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(a: Admit) -> Slot {
        match a {
            Admit::Yes(s) => s,
            Admit::Full => panic!("refused"),
        }
    }

    #[tokio::test]
    async fn the_oldest_unauthenticated_connection_gives_way_then_newcomers_are_refused() {
        let t0 = Instant::now();
        let later = t0 + SHED_GRACE;
        let a = Admission::new(2);
        let one = slot(a.admit(1, t0));
        let two = slot(a.admit(2, t0));
        assert!(two.authenticated());
        // Full, and connection 1 is still within its grace: refused.
        assert!(matches!(a.admit(3, t0), Admit::Full));
        // Past the grace, connection 1 (unauthenticated) is shed for 3.
        let three = slot(a.admit(3, later));
        one.shed().await;
        assert!(!one.authenticated(), "a shed connection may not stay");
        assert_eq!(a.open(), 2);
        drop(one);
        assert_eq!(a.open(), 2, "the shed slot moved, it is not returned twice");
        assert!(three.authenticated());
        // Every slot authenticated: the newcomer is refused.
        assert!(matches!(a.admit(4, later), Admit::Full));
        drop(two);
        assert_eq!(a.open(), 1);
        let _five = slot(a.admit(5, later));
        assert_eq!(a.open(), 2);
    }
}
