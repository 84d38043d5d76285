//! From the runner's outcome to the store's turn end, and the turn
//! deadline that ends overlong turns through the cancel path.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::acp::TurnOutcome;
use crate::domain::{Actor, TurnEnd};
use crate::store::Store;
use lapis_protocol::OutcomeCode;

/// A turn's deadline: when it passes, the turn is cancelled through the
/// store like an owner's cancel (durable flag, `cancel_requested` event, the
/// runner's `session/cancel` and cancel deadline).
pub(super) struct Deadline {
    /// The timer task.
    timer: tokio::task::JoinHandle<()>,
    /// Set when the deadline fired.
    fired: Arc<AtomicBool>,
}

impl Deadline {
    pub(super) fn arm(store: Store, turn: String, seconds: u64) -> Deadline {
        let fired = Arc::new(AtomicBool::new(false));
        let flag = fired.clone();
        let timer = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(seconds)).await;
            flag.store(true, Ordering::SeqCst);
            tracing::warn!(turn = %turn, seconds, "turn deadline passed; cancelling");
            let actor = Actor::new("controller", "deadline");
            if let Err(err) = store.request_cancel(&actor, &turn).await {
                tracing::error!(turn = %turn, code = err.code(), "cancelling an overdue turn failed");
            }
        });
        Deadline { timer, fired }
    }

    /// Stops the timer; whether the deadline had fired.
    pub(super) fn disarm(self) -> bool {
        self.timer.abort();
        self.fired.load(Ordering::SeqCst)
    }
}

/// A turn ended after its deadline fired carries `deadline_exceeded`,
/// unless the agent completed it anyway.
pub(super) fn deadline_end(end: TurnEnd) -> TurnEnd {
    match end {
        TurnEnd::Cancelled(_) => TurnEnd::Cancelled(OutcomeCode::DeadlineExceeded),
        TurnEnd::Interrupted(_) | TurnEnd::Unknown(_) => {
            TurnEnd::Interrupted(OutcomeCode::DeadlineExceeded)
        }
        other => other,
    }
}

/// Maps the runner's outcome to the store's turn end.
pub(super) fn turn_end(outcome: &TurnOutcome, cancel_requested: bool) -> TurnEnd {
    match outcome {
        TurnOutcome::Completed { stop_reason } => TurnEnd::Completed(stop_reason.clone()),
        TurnOutcome::Cancelled { dispatched: true } => TurnEnd::Cancelled(OutcomeCode::Cancelled),
        TurnOutcome::Cancelled { dispatched: false } => {
            TurnEnd::Cancelled(OutcomeCode::CancelledBeforeDispatch)
        }
        // The store refuses the boundary when a cancel is already pending.
        TurnOutcome::Failed {
            code: OutcomeCode::BoundaryNotPersisted,
            dispatched: false,
        } if cancel_requested => TurnEnd::Cancelled(OutcomeCode::CancelledBeforeDispatch),
        TurnOutcome::Failed { code, .. } => TurnEnd::Failed(*code),
        TurnOutcome::SubmissionUnknown { code } => TurnEnd::Unknown(*code),
        TurnOutcome::Interrupted => TurnEnd::Interrupted(OutcomeCode::CancelDeadline),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Retention;
    use crate::store::tests::{fixture, owner, submit, thread, workspace};

    /// A turn's deadline is tokio time: on the paused clock an hour-long
    /// deadline passes at once, fires exactly when it is due (not a second
    /// before), and cancels through the store like an owner's cancel.
    #[tokio::test(start_paused = true)]
    async fn a_deadline_cancels_its_turn_when_due_on_the_paused_clock() {
        let fx = fixture().await;
        let ws = workspace(&fx.store, fx.dir.path(), "w1").await;
        let th = thread(&fx.store, &ws.id, Retention::Full).await;
        let turn = fx
            .store
            .submit_turn(&owner(), submit(&th.id, "c1", "hi"))
            .await
            .unwrap()
            .value;
        fx.store.try_claim().await.unwrap().expect("runnable");

        let deadline = Deadline::arm(fx.store.clone(), turn.id.clone(), 3600);
        // No store call until it is due: waiting on the store's threads
        // lets the paused clock run ahead to the next timer.
        tokio::time::sleep(Duration::from_secs(3599)).await;
        assert!(!deadline.fired.load(Ordering::SeqCst), "fired early");
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(deadline.fired.load(Ordering::SeqCst), "not fired when due");
        let mut cancelled = false;
        for _ in 0..1000 {
            if fx.store.get_turn(&turn.id).await.unwrap().cancel_requested {
                cancelled = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(cancelled, "the deadline's cancel never reached the store");
        assert!(deadline.disarm());
    }
}
