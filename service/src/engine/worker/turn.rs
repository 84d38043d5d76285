//! One claimed turn's task, start to end: the steps before its agent
//! (`steps`), the run on a live or new agent (`launch`), and the outcome
//! made durable before the agent is kept or torn down.
//!
//! What must stay true: every exit settles the claim through its
//! [`ClaimGuard`] (slot and boundary signal once) and ends the turn through
//! [`Engine::halt`]; what the turn used and its held text are queued before
//! its end; a kept agent is back in the pool before the end commits (the
//! workspace's next turn finds it idle).

use crate::acp::TurnRun;

use super::steps::Halt;
use super::*;

impl Engine {
    /// One running slot's task: waits for the store's next claim, then
    /// runs that turn (see the claim loop, `Engine::run`). A failed claim
    /// goes back to the loop with its slot, which the loop gives back after a
    /// pause.
    pub(in crate::engine) async fn claim_and_run(
        self,
        prepare: Preparer,
        permit: OwnedSemaphorePermit,
        (claimed, dispatched, settled): super::Shared,
        failed: tokio::sync::mpsc::UnboundedSender<(StoreError, OwnedSemaphorePermit)>,
        stop: watch::Receiver<bool>,
    ) {
        match self.store.next_runnable_with(prepare).await {
            // Answered as the engine stops: the turn never reaches its
            // agent, it fails before its boundary.
            Ok(claim) if *stop.borrow() => {
                let _ = claimed.set(claim.turn.id.clone());
                let guard = ClaimGuard::new(self.store.clone(), self.running.clone(), permit);
                guard.boundary_later();
                let end = TurnEnd::Failed(OutcomeCode::ControllerShutdown);
                if let Err(err) = self.store.finish_turn(&claim.turn.id, end).await {
                    tracing::error!(turn = %claim.turn.id, code = err.code(), "settling a claimed turn at shutdown failed");
                }
                settled.store(true, Ordering::SeqCst);
            }
            Ok(claim) => {
                // Set before anything else can happen to the task: from
                // here on shutdown settles the turn if it is not settled.
                let _ = claimed.set(claim.turn.id.clone());
                self.run_claim(claim, dispatched, settled, permit).await;
            }
            Err(err) => {
                let _ = failed.send((err, permit));
            }
        }
    }

    /// Runs one claimed turn on the thread's live agent or a new one. The
    /// outcome is made durable as soon as the runner has it; only then is
    /// the agent kept or torn down, so a crash during teardown never turns
    /// a reported outcome into an unknown one.
    pub(in crate::engine) async fn run_claim(
        self,
        mut claim: Claim,
        dispatched: Arc<AtomicBool>,
        settled: Arc<AtomicBool>,
        permit: OwnedSemaphorePermit,
    ) {
        // Settles the running slot and the boundary signal on every exit.
        let mut guard = ClaimGuard::new(self.store.clone(), self.running.clone(), permit);
        let turn_id = claim.turn.id.clone();
        let thread_id = claim.thread.id.clone();
        let cancel = claim.cancel.clone();
        let launched = match self.before_agent(&guard, &mut claim).await {
            Ok(ready) => self.launch(&guard, claim, ready, dispatched).await,
            Err(halt) => Err(halt),
        };
        let launch = match launched {
            Ok(launch) => launch,
            Err(halt) => {
                self.halt(&mut guard, &turn_id, halt).await;
                return;
            }
        };
        // What the run does not take stays in `launch` to the end: the
        // tool calls' active turn and the transcript store's feed.
        let hooks = launch.hooks.clone();
        let signal = CancelSignal::from(cancel.clone());
        let run = run_turn_on(
            launch.request,
            launch.agent,
            launch.ticket,
            hooks.clone(),
            signal,
        );
        let mut run = within_deadline(run, &launch.stop, launch.limit).await;
        // Nothing more is dispatched: a turn that ended before its
        // boundary (cancelled, refused) lets the claiming batch go.
        guard.boundary_later();
        let cancelled = *cancel.borrow();
        let end = self
            .end_of_run(&hooks, &mut run, cancelled, &launch.stop)
            .await;
        // A kept agent goes back to the pool before the outcome is recorded:
        // the outcome's commit releases the workspace, and the thread's next
        // turn, claimed as soon as it is released, must find its agent idle
        // rather than start another. Nothing can take it earlier: the
        // workspace's lease (one turn at a time) is held until that commit.
        let teardown = match run.after {
            AfterTurn::Keep(agent)
                if launch.generation != self.secrets_generation.load(Ordering::SeqCst) =>
            {
                tracing::info!(thread = %thread_id, "agent not kept: agent secrets were reloaded during its turn");
                self.pool.retire(*agent);
                self.pool.checkin(&thread_id, None, &turn_id, launch.idle);
                None
            }
            AfterTurn::Keep(agent) => {
                self.pool
                    .checkin(&thread_id, Some(*agent), &turn_id, launch.idle);
                None
            }
            AfterTurn::Teardown(teardown) => Some(teardown),
            AfterTurn::Gone => {
                self.pool.checkin(&thread_id, None, &turn_id, launch.idle);
                None
            }
        };
        if self.halt(&mut guard, &turn_id, Halt::End(end)).await {
            // The store recorded an unknown outcome (its journal refused
            // the turn's output): that agent is never reused.
            self.pool.discard(&thread_id);
        }
        let _ = hooks.confirm_streamed().await;
        settled.store(true, Ordering::SeqCst);
        drop(guard);
        if let Some(teardown) = teardown {
            teardown.run().await;
            self.pool.checkin(&thread_id, None, &turn_id, launch.idle);
        }
    }

    /// How a run ended, with what it leaves queued before its end: its
    /// usage, its held text and its outcome snapshot.
    async fn end_of_run(
        &self,
        hooks: &StoreHooks,
        run: &mut TurnRun<StoreHooks>,
        cancelled: bool,
        stop: &Stop,
    ) -> TurnEnd {
        let turn_id = hooks.turn_id.as_str();
        let mut end = turn_end(&run.outcome, cancelled);
        if let Some(reason) = stop.reason() {
            end = stopped_end(end, reason);
        }
        // The store did not acknowledge an authorizing event: the agent
        // never got it and the controller stopped the turn there, so its
        // outcome is known, failed closed.
        if let Some(refusal) = hooks.gate_refused() {
            end = TurnEnd::Failed(OutcomeCode::Refused(refusal.code()));
        }
        // What the turn used is on its row before its end is told to
        // anyone, so a budget checked at the next claim counts it.
        if run.context_usage.is_some() || run.tokens.is_some() {
            self.store.record_usage_before_end(
                turn_id,
                run.context_usage.take(),
                run.tokens.take(),
            );
        }
        let dispatched = hooks.dispatched.load(Ordering::SeqCst);
        // Text held back for redaction is queued before the turn's end.
        // Output the store refused or failed to write (disk full, …) makes
        // the store end the turn `journal_write_failed` instead (unknown
        // past the boundary, failed before it): the finish runs after every
        // append queued before it and commits with them, so it is not held
        // back waiting for their answers.
        if let Err(e) = hooks.flush_held().await {
            tracing::error!(turn = %turn_id, code = %e.0, "held text was not journaled");
            end = if dispatched {
                TurnEnd::Unknown(OutcomeCode::JournalWriteFailed)
            } else {
                TurnEnd::Failed(OutcomeCode::JournalWriteFailed)
            };
        }
        // The outcome's snapshot, queued before the end while the turn
        // still holds its workspace (see `evidence`).
        if dispatched && let Some(snapshot) = hooks.evidence.at_outcome().await {
            let pending = self.store.append_activity(turn_id, snapshot);
            hooks.unconfirmed_push(pending);
        }
        end
    }
}
