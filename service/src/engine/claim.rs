//! What a claimed turn owes, as values that settle themselves.
//!
//! A claim answered by the store's writer comes with two obligations:
//!
//! - **the boundary signal**: the writer's batch that made the claim waits
//!   (up to its linger) for the turn's dispatch boundary. Exactly one signal
//!   ends that wait: the boundary itself (`mark_dispatched` as an awaited
//!   boundary) or [`BoundarySignal::later`] when the boundary will not
//!   follow at once (a cold agent start, a refusal, a turn that ended
//!   before its boundary). A second signal would cut short the wait of some
//!   other claim in the same batch; none would leave the batch lingering.
//! - **the running slot**: the turn counts in `running` (what `status`
//!   shows) and holds one `maxRunningTurns` permit until its outcome is
//!   recorded. It is given back *before* the turn's end is written
//!   ([`ClaimGuard::release`]): release first, then report, so a client
//!   that calls `status` on seeing the turn's final event never finds the
//!   turn still running.
//!
//! [`ClaimGuard`] owns both and settles whatever is left on drop, so every
//! exit of `run_claim` — an early refusal, the normal end, a panic, the
//! task aborted at shutdown — releases the slot once and signals the
//! boundary once. Explicit calls are still made where they make a batch
//! commit sooner; they are idempotent.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tokio::sync::OwnedSemaphorePermit;

use crate::store::Store;

/// How the boundary-later notice reaches the writer (the store in
/// production; a counter in tests).
type Notify = Arc<dyn Fn() + Send + Sync>;

/// The claim's one boundary signal, shared by its guard and its hooks.
#[derive(Clone)]
pub(super) struct BoundarySignal {
    /// Sends `BoundaryLater` to the writer.
    notify: Notify,
    /// Still owed: neither the boundary nor a later notice went out.
    owed: Arc<AtomicBool>,
}

impl std::fmt::Debug for BoundarySignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoundarySignal")
            .field("owed", &self.owed.load(Ordering::SeqCst))
            .finish()
    }
}

impl BoundarySignal {
    fn new(notify: Notify) -> BoundarySignal {
        BoundarySignal {
            notify,
            owed: Arc::new(AtomicBool::new(true)),
        }
    }

    /// The boundary will not follow at once: the claiming batch stops
    /// waiting for it. Does nothing once the signal went out.
    pub(super) fn later(&self) {
        if self.owed.swap(false, Ordering::SeqCst) {
            (self.notify)();
        }
    }

    /// The boundary is being written now: whether the claiming batch still
    /// waits for it (then the write is its signal; otherwise a later notice
    /// already went out and the write is an ordinary durable one).
    pub(super) fn at_boundary(&self) -> bool {
        self.owed.swap(false, Ordering::SeqCst)
    }
}

/// A claimed turn's obligations (see the module docs). Created when the
/// claim starts running; dropped when its outcome is durable, or on any
/// other exit.
pub(super) struct ClaimGuard {
    /// The boundary signal.
    boundary: BoundarySignal,
    /// The engine's running-turn count, incremented by [`ClaimGuard::new`].
    running: Arc<AtomicUsize>,
    /// The `maxRunningTurns` permit the claim loop took for this claim
    /// (`None` once released).
    permit: Option<OwnedSemaphorePermit>,
    /// Whether the running slot was given back already.
    released: bool,
}

impl ClaimGuard {
    /// Takes the running slot of a claim answered by `store`'s writer.
    pub(super) fn new(
        store: Store,
        running: Arc<AtomicUsize>,
        permit: OwnedSemaphorePermit,
    ) -> ClaimGuard {
        let notify: Notify = Arc::new(move || store.boundary_later());
        ClaimGuard::with_notify(notify, running, Some(permit))
    }

    fn with_notify(
        notify: Notify,
        running: Arc<AtomicUsize>,
        permit: Option<OwnedSemaphorePermit>,
    ) -> ClaimGuard {
        running.fetch_add(1, Ordering::SeqCst);
        ClaimGuard {
            boundary: BoundarySignal::new(notify),
            running,
            permit,
            released: false,
        }
    }

    /// The signal, for the hooks that write the boundary.
    pub(super) fn boundary(&self) -> BoundarySignal {
        self.boundary.clone()
    }

    /// See [`BoundarySignal::later`].
    pub(super) fn boundary_later(&self) {
        self.boundary.later();
    }

    /// Gives the running slot and its permit back now, before the turn's
    /// end is written (idempotent; drop does it otherwise).
    pub(super) fn release(&mut self) {
        if !std::mem::replace(&mut self.released, true) {
            self.running.fetch_sub(1, Ordering::SeqCst);
        }
        self.permit = None;
    }
}

impl Drop for ClaimGuard {
    fn drop(&mut self) {
        // An exit before the boundary that said nothing: the batch must
        // not linger for a boundary that will never come.
        self.boundary.later();
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use tokio::sync::Semaphore;

    use super::*;

    /// A guard whose notices are counted, with its permit from `slots`.
    struct Rig {
        notices: Arc<AtomicUsize>,
        running: Arc<AtomicUsize>,
        slots: Arc<Semaphore>,
    }

    impl Rig {
        fn new() -> Rig {
            Rig {
                notices: Arc::default(),
                running: Arc::default(),
                slots: Arc::new(Semaphore::new(1)),
            }
        }

        fn guard(&self) -> ClaimGuard {
            let notices = self.notices.clone();
            let permit = self.slots.clone().try_acquire_owned().expect("a free slot");
            let guard = ClaimGuard::with_notify(
                Arc::new(move || {
                    notices.fetch_add(1, Ordering::SeqCst);
                }),
                self.running.clone(),
                Some(permit),
            );
            assert_eq!(self.running.load(Ordering::SeqCst), 1);
            assert_eq!(self.slots.available_permits(), 0);
            guard
        }

        /// After the exit: the slot is free and the batch heard exactly
        /// one signal (`boundary_written`: the boundary itself was it).
        fn settled(&self, boundary_written: bool) {
            assert_eq!(self.running.load(Ordering::SeqCst), 0, "running slot");
            assert_eq!(self.slots.available_permits(), 1, "permit");
            let later = usize::from(!boundary_written);
            assert_eq!(self.notices.load(Ordering::SeqCst), later, "notices");
        }
    }

    /// Every way `run_claim` can leave, each settling the claim once.
    #[tokio::test]
    async fn every_exit_releases_the_slot_and_signals_the_boundary_once() {
        // Unknown provider / refused MCP servers: a notice, then return.
        let rig = Rig::new();
        let guard = rig.guard();
        guard.boundary_later();
        drop(guard);
        rig.settled(false);

        // An exit that forgot its notice (a new early return).
        let rig = Rig::new();
        drop(rig.guard());
        rig.settled(false);

        // Warm agent: the boundary is the signal.
        let rig = Rig::new();
        let guard = rig.guard();
        assert!(guard.boundary().at_boundary(), "the batch awaits it");
        drop(guard);
        rig.settled(true);

        // Cold start: a notice now, then the boundary (no second signal),
        // then the turn's own "not dispatched?" notice (no third).
        let rig = Rig::new();
        let guard = rig.guard();
        guard.boundary_later();
        assert!(!guard.boundary().at_boundary(), "already signalled");
        guard.boundary_later();
        drop(guard);
        rig.settled(false);

        // Ended before its boundary (cancel, setup failure).
        let rig = Rig::new();
        let guard = rig.guard();
        let hooks_side = guard.boundary();
        guard.boundary_later();
        drop(hooks_side);
        drop(guard);
        rig.settled(false);

        // A panic inside the turn task.
        let rig = Rig::new();
        let guard = rig.guard();
        let task = tokio::spawn(async move {
            let _guard = guard;
            panic!("runner bug");
        });
        assert!(task.await.unwrap_err().is_panic());
        rig.settled(false);

        // The task aborted at shutdown while waiting on its agent.
        let rig = Rig::new();
        let guard = rig.guard();
        let task = tokio::spawn(async move {
            let _guard = guard;
            std::future::pending::<()>().await;
        });
        task.abort();
        assert!(task.await.unwrap_err().is_cancelled());
        rig.settled(false);
    }
}
