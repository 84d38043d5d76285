//! From the runner's outcome to the store's turn end, and the stop (the
//! turn deadline, a per-turn budget ceiling) that ends a running turn
//! through the cancel path.

use std::sync::Arc;
use std::sync::OnceLock;
use std::time::Duration;

use crate::acp::TurnOutcome;
use crate::domain::{Actor, TurnEnd};
use crate::store::Store;
use lapis_protocol::OutcomeCode;

/// How a running turn is stopped by the controller: its deadline
/// ([`Deadline`]) or a per-turn budget ceiling
/// (`budgets::TurnCeiling`), both through the store like an owner's cancel
/// (durable flag, `cancel_requested` event, the runner's `session/cancel`
/// and cancel deadline) and never any other way. The first reason to fire
/// is the one the turn's end carries ([`stopped_end`]).
#[derive(Debug, Clone)]
pub(super) struct Stop {
    /// The store the cancel goes through.
    store: Store,
    /// The turn.
    turn: String,
    /// Why it was stopped, set once by the first [`Stop::fire`].
    reason: Arc<OnceLock<OutcomeCode>>,
}

impl Stop {
    pub(super) fn new(store: Store, turn: String) -> Stop {
        Stop {
            store,
            turn,
            reason: Arc::new(OnceLock::new()),
        }
    }

    /// Cancels the turn for `reason` (the cancel's actor is
    /// `controller`/`by`), unless it was stopped already; whether this call
    /// was the one that stopped it.
    pub(super) fn fire(&self, reason: OutcomeCode, by: &'static str) -> bool {
        if self.reason.set(reason).is_err() {
            return false;
        }
        tracing::warn!(turn = %self.turn, reason = reason.as_str(), "stopping the turn; cancelling");
        let (store, turn) = (self.store.clone(), self.turn.clone());
        tokio::spawn(async move {
            let actor = Actor::new("controller", by);
            if let Err(err) = store.request_cancel(&actor, &turn).await {
                tracing::error!(turn = %turn, code = err.code(), "cancelling a stopped turn failed");
            }
        });
        true
    }

    /// Why the turn was stopped, if it was.
    pub(super) fn reason(&self) -> Option<OutcomeCode> {
        self.reason.get().copied()
    }
}

/// A turn's deadline: when it passes, the turn is stopped
/// (`deadline_exceeded`) through its [`Stop`], and the run goes on to
/// its end (the cancel path ends it).
///
/// Raced against the run in the turn's own task rather than armed as a
/// timer task of its own: a spawn and an abort per turn, each a wake-up
/// for the runtime, were part of a warm turn's cost.
pub(super) async fn within_deadline<T>(
    run: impl std::future::Future<Output = T>,
    stop: &Stop,
    seconds: u64,
) -> T {
    let mut run = std::pin::pin!(run);
    tokio::select! {
        biased;
        out = &mut run => out,
        () = tokio::time::sleep(Duration::from_secs(seconds)) => {
            stop.fire(OutcomeCode::DeadlineExceeded, "deadline");
            run.await
        }
    }
}

/// A turn ended after it was stopped for `reason` (`deadline_exceeded`,
/// `budget_exhausted`) carries that reason, in the state its end reached:
/// `cancelled` when the agent confirmed the cancel, `interrupted` (fenced)
/// when it did not or the outcome was lost, and unchanged when the agent
/// completed or failed the turn anyway.
pub(super) fn stopped_end(end: TurnEnd, reason: OutcomeCode) -> TurnEnd {
    match end {
        TurnEnd::Cancelled(_) => TurnEnd::Cancelled(reason),
        TurnEnd::Interrupted(_) | TurnEnd::Unknown(_) => TurnEnd::Interrupted(reason),
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
    /// before), cancels through the store like an owner's cancel, and the
    /// run goes on to its own end.
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

        let stop = Stop::new(fx.store.clone(), turn.id.clone());
        // The run goes on past its deadline until it ends (here: when told).
        let (end_run, run) = tokio::sync::oneshot::channel::<u32>();
        let raced = tokio::spawn({
            let stop = stop.clone();
            async move { within_deadline(run, &stop, 3600).await }
        });
        // No store call until it is due: waiting on the store's threads
        // lets the paused clock run ahead to the next timer.
        tokio::time::sleep(Duration::from_secs(3599)).await;
        assert_eq!(stop.reason(), None, "fired early");
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(
            stop.reason(),
            Some(OutcomeCode::DeadlineExceeded),
            "not fired when due"
        );
        // A later reason changes nothing: the first one is the turn's.
        assert!(!stop.fire(OutcomeCode::BudgetExhausted, "budget"));
        let mut cancelled = false;
        for _ in 0..1000 {
            if fx.store.get_turn(&turn.id).await.unwrap().cancel_requested {
                cancelled = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(cancelled, "the deadline's cancel never reached the store");
        assert!(!raced.is_finished(), "the deadline ended the run itself");
        end_run.send(7).unwrap();
        assert_eq!(raced.await.unwrap().unwrap(), 7);
        assert_eq!(stop.reason(), Some(OutcomeCode::DeadlineExceeded));
    }
}
