//! Turn operations on the writer: submit, claim, transitions, cancel, resolve.
//!
//! Every state change goes through [`Writer::transition`] (or
//! [`stage_transition`] inside a larger transaction), which asks the one
//! transition table; a refused change is journaled as an observation and
//! changes nothing.

use rusqlite::params;
use tokio::sync::watch;

use crate::domain::{
    Actor, Claim, Preparer, Receipt, SessionBinding, StoreError, StoreResult, SubmitTurn,
    TransitionOutcome, Turn, TurnEnd, TurnEvent, TurnState,
};

use super::continuation;
use lapis_protocol::{
    Ignored, Observation, OutcomeCode, Payload, Prompt, ThreadExpect, TurnSubmitted,
};

use super::command_kind::CommandKind;
use super::hot;
use super::ids::{check_name, check_sha256_hex, new_id};
use super::integrity::{self, InputCheck};
use super::journal::ReadyPayload;
use super::prepared;
use super::read;
use super::receipts::{check_replay, receipt, stage_receipt};
use super::transition::{stage_claim, stage_transition};
use super::writer::{LiveTurn, Writer};

/// Largest accepted per-turn deadline (one week).
pub(super) const MAX_TURN_SECONDS: u64 = 604_800;
/// Longest native session id the store keeps.
pub(super) const MAX_SESSION_ID_BYTES: usize = 512;

/// A native session id is opaque to the controller but bounded, and free of
/// control characters (it is shown in records and logs).
fn check_session_id(id: &str) -> StoreResult<()> {
    if id.is_empty() || id.len() > MAX_SESSION_ID_BYTES || id.chars().any(char::is_control) {
        return Err(StoreError::invalid(
            "agent session id is empty, too long or has control characters",
        ));
    }
    Ok(())
}

impl Writer {
    /// Load a turn or fail `not_found`.
    pub(super) fn turn_or_404(&self, id: &str) -> StoreResult<Turn> {
        read::turn(&self.conn, id)?.ok_or_else(|| StoreError::not_found("turn", id))
    }

    /// Memory effects of a committed transition.
    pub(crate) fn after_transition(&mut self, from: TurnState, after: &Turn) {
        let (ws, id, to) = (&after.workspace_id, &after.id, after.state);
        if from == TurnState::Queued {
            if to == TurnState::Preparing {
                self.sched.claim(ws, id);
            } else {
                self.sched.remove_queued(ws, id);
            }
        }
        if from.is_in_flight() && !to.is_in_flight() {
            self.sched.release(ws, id, to.is_fenced());
        }
        if from.is_fenced() {
            self.sched.unfence(ws, id);
        }
        if to.is_terminal() {
            self.live.remove(id);
        } else if let Some(l) = self.live.get_mut(id) {
            l.state = to;
        }
    }

    /// Apply `event` to a turn through the table (see module docs).
    pub(super) fn transition(
        &mut self,
        id: &str,
        event: TurnEvent,
        outcome: Option<String>,
        recovered: bool,
    ) -> StoreResult<TransitionOutcome> {
        if let Some(code) = &outcome {
            check_name("outcome code", code)?;
        }
        // A tracked turn: one statement, from the state memory holds.
        let live =
            |w: &mut Self| w.live_transition(id, event, outcome.as_deref(), None, |_, _| Ok(()));
        if !recovered && let Some(turn) = live(self)? {
            return Ok(TransitionOutcome {
                turn,
                applied: true,
            });
        }
        let row = self.turn_or_404(id)?;
        let after = self.write(|tx, j, st, now| {
            let after =
                stage_transition(tx, j, st, now, &row, event, outcome.as_deref(), recovered)?;
            if after.is_none() {
                let ignored = Observation::Ignored(Ignored {
                    ignored: event,
                    state: row.state,
                    outcome: outcome.clone(),
                });
                j.append(tx, st, &row.thread_id, Some(id), now, ignored.into())?;
            }
            Ok(after)
        })?;
        match after {
            Some(turn) => {
                self.after_transition(row.state, &turn);
                Ok(TransitionOutcome {
                    turn,
                    applied: true,
                })
            }
            None => Ok(TransitionOutcome {
                turn: row,
                applied: false,
            }),
        }
    }

    /// Accept a turn (idempotent by `(principal, application, command id)`).
    /// With `expect`, the thread's binding is compared in the same step, so
    /// no turn is ever queued under a binding the caller did not state.
    pub(super) fn submit_turn(
        &mut self,
        actor: &Actor,
        input: SubmitTurn,
        expect: Option<&ThreadExpect>,
    ) -> StoreResult<Receipt<Turn>> {
        check_name("command id", &input.command_id)?;
        check_name("thread id", &input.thread_id)?;
        // Whitespace alone is nothing to ask: an agent given it answers
        // something unrelated, at a turn's cost.
        if input.prompt.trim().is_empty() {
            return Err(StoreError::invalid("prompt is empty or only whitespace"));
        }
        if input.max_turn_seconds == Some(0) || input.max_turn_seconds > Some(MAX_TURN_SECONDS) {
            return Err(StoreError::invalid(
                "maxTurnSeconds must be between 1 and 604800",
            ));
        }
        let dig = integrity::submit_digest(
            &input.thread_id,
            &input.prompt,
            input.continues.as_deref(),
            input.max_turn_seconds,
        );
        if let Some(found) = receipt(&self.conn, actor, &input.command_id)? {
            check_replay(&found, CommandKind::TurnSubmit, &dig)?;
            return Ok(Receipt {
                value: self.turn_or_404(&found.resource_id)?,
                replayed: true,
            });
        }
        let (thread, workspace) = hot::thread_and_workspace(&self.conn, &input.thread_id)?
            .ok_or_else(|| StoreError::not_found("thread", &input.thread_id))?;
        // Checked here rather than by a read before the request: one store
        // round trip per submit instead of two.
        // Another's thread answers like an unknown one (see the handlers).
        if !actor.owns(&thread) {
            return Err(StoreError::not_found("thread", &input.thread_id));
        }
        if workspace.is_none() {
            return Err(StoreError::invalid(format!(
                "workspace `{}` was removed: its threads are read-only (add it again with `workspaces add {} DIR` for the same directory)",
                thread.workspace_id, thread.workspace_id
            )));
        }
        if let Some(expect) = expect {
            let fields = expect.mismatches(&thread);
            if !fields.is_empty() {
                return Err(StoreError::BindingMismatch { fields });
            }
        }
        if let Some(prev) = &input.continues {
            let prev = self.turn_or_404(prev)?;
            let memory = std::sync::Arc::clone(&self.journal.memory);
            let memory = memory.lock().unwrap_or_else(|p| p.into_inner());
            continuation::check_prior(&self.conn, &memory, &prev, &thread.id)?;
        }
        if let Some(fence) = self.sched.fenced_by(&thread.workspace_id) {
            return Err(StoreError::WorkspaceFenced {
                workspace: thread.workspace_id.clone(),
                turn: fence.to_owned(),
            });
        }
        if !self.sched.has_room() {
            return Err(StoreError::QueueFull {
                capacity: self.sched.capacity(),
            });
        }
        let id = new_id("turn_")?;
        let queue_seq = self.last_queue_seq + 1;
        let turn = self.write(|tx, j, st, now| {
            tx.prepare_cached(
                "INSERT INTO turns (id, thread_id, workspace_id, principal, command_id, queue_seq, \
                 state, continues, prompt, created_at, updated_at, max_turn_seconds) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'queued', ?7, ?8, ?9, ?9, ?10)",
            )?
            .execute(params![
                id,
                thread.id,
                thread.workspace_id,
                actor.principal,
                input.command_id,
                queue_seq as i64,
                input.continues,
                input.prompt,
                now,
                input.max_turn_seconds.map(|s| s as i64)
            ])?;
            stage_receipt(
                tx,
                actor,
                &input.command_id,
                CommandKind::TurnSubmit,
                &dig,
                &id,
                None,
                now,
            )?;
            let submitted = Payload::TurnSubmitted(TurnSubmitted {
                turn_id: id.clone(),
                command_id: input.command_id.clone(),
                continues: input.continues.clone(),
                input_digest: Some(dig.clone()),
            });
            // What was asked, in the thread's transcript (content: it follows
            // the thread's retention like the agent's reply).
            let asked = Payload::UserMessage(Prompt {
                text: input.prompt.clone(),
            });
            let mut redactions = 0;
            for payload in [submitted, asked] {
                let ready = ReadyPayload::new(&payload);
                redactions += u64::from(ready.redactions);
                let kind = payload.kind();
                j.append_ready(tx, st, &thread.id, Some(&id), kind, now, Some(ready))?;
            }
            // The row as the INSERT (and the redaction counts) left it,
            // without reading it back: `write` inserts the staged events.
            Ok(Turn {
                id: id.clone(),
                thread_id: thread.id.clone(),
                workspace_id: thread.workspace_id.clone(),
                principal: actor.principal.clone(),
                command_id: input.command_id.clone(),
                state: TurnState::Queued,
                outcome: None,
                cancel_requested: false,
                continues: input.continues.clone(),
                queue_seq,
                created_at: now,
                updated_at: now,
                prepared_at: None,
                dispatched_at: None,
                started_at: None,
                finished_at: None,
                resolved_at: None,
                agent_session_id: None,
                max_turn_seconds: input.max_turn_seconds,
                awaiting_input: false,
                redactions,
                prepared: None,
                user_message: None,
                usage: None,
            })
        })?;
        self.last_queue_seq = queue_seq;
        self.sched.enqueue(&turn.workspace_id, queue_seq, &turn.id);
        let (cancel, _) = watch::channel(false);
        self.live.insert(
            turn.id.clone(),
            LiveTurn {
                thread: thread.id,
                workspace: turn.workspace_id.clone(),
                state: turn.state,
                cancel,
                append_failed: false,
                asked: false,
            },
        );
        Ok(Receipt {
            value: turn,
            replayed: false,
        })
    }

    /// Hand the next runnable turn to the runner, if any (moves it to
    /// `preparing`), with its prepared configuration made from `prepare`'s
    /// facts and committed in the same transaction (see [`super::prepared`]).
    pub(super) fn claim(&mut self, prepare: &Preparer) -> StoreResult<Option<Claim>> {
        let Some((_, id)) = self.sched.pick() else {
            return Ok(None);
        };
        // The turn, its prompt and chained input, its thread and its
        // workspace in one statement (see `super::hot`).
        let read =
            hot::claim_read(&self.conn, &id)?.ok_or_else(|| StoreError::not_found("turn", &id))?;
        let row = read.turn;
        let (thread, workspace) = read
            .thread
            .ok_or_else(|| StoreError::not_found("thread", &row.thread_id))?;
        let workspace =
            workspace.ok_or_else(|| StoreError::not_found("workspace", &row.workspace_id))?;
        let prompt = read.prompt.ok_or(StoreError::InvalidRow {
            table: "turns",
            row: id.clone(),
            check: "prompt",
        })?;
        match integrity::compare_queued(&row, &prompt, read.submitted) {
            InputCheck::Matches | InputCheck::Unchained => {}
            InputCheck::Mismatch => {
                // Edited at rest: fail closed before anything reaches an
                // agent (the turn leaves the queue, its workspace moves on).
                tracing::error!(
                    turn = %id,
                    code = OutcomeCode::PromptMismatch.as_str(),
                    "the queued turn's input no longer matches its chained digest: not dispatched"
                );
                return self.refuse_claim(&id, OutcomeCode::PromptMismatch);
            }
        }
        // A continuation's prior is checked again: its record must still be
        // whole, and the digest for a lost session is made from it now.
        let context = match &row.continues {
            Some(prior) => {
                let prior = self.turn_or_404(prior)?;
                let memory = std::sync::Arc::clone(&self.journal.memory);
                let memory = memory.lock().unwrap_or_else(|p| p.into_inner());
                match continuation::check_prior(&self.conn, &memory, &prior, &thread.id) {
                    Ok(events) => Some(continuation::digest(&prior, &events)),
                    Err(err) => {
                        drop(memory);
                        tracing::warn!(turn = %id, code = err.code(), "continuation refused at claim");
                        return self.refuse_claim(&id, OutcomeCode::ContinuationRefused);
                    }
                }
            }
            None => None,
        };
        let provider = prepare(&thread);
        let config = prepared::prepare(&thread, provider.as_ref());
        let text = prepared::column_text(&config);
        let after = self.write(|tx, j, st, now| {
            let after = stage_claim(tx, j, st, now, &row, &text)?
                .ok_or_else(|| StoreError::conflict("turn is not queued"))?;
            prepared::stage(tx, j, st, now, &after, &config)
        })?;
        self.after_transition(row.state, &after);
        let cancel = self
            .live
            .get(&id)
            .map(|l| l.cancel.subscribe())
            .unwrap_or_else(|| watch::channel(false).1);
        Ok(Some(Claim {
            turn: after,
            provider,
            thread,
            workspace,
            prompt,
            context,
            cancel,
        }))
    }

    /// A queued turn refused at its claim: claimed and failed with `code`
    /// (two journaled transitions; its prompt is cleared with the first).
    fn refuse_claim(&mut self, id: &str, code: OutcomeCode) -> StoreResult<Option<Claim>> {
        self.transition(id, TurnEvent::Claim, None, false)?;
        self.transition(id, TurnEvent::Fail, Some(code.as_str().into()), false)?;
        Ok(None)
    }

    /// Persist the dispatch boundary and, in the same transaction, the
    /// native session the prompt goes to: on the turn, and as the thread's
    /// binding. Refused (`conflict`) unless the turn is `preparing` without a
    /// pending cancel: the runner must then not write the prompt.
    pub(super) fn mark_dispatched(
        &mut self,
        id: &str,
        binding: &SessionBinding,
    ) -> StoreResult<Turn> {
        check_session_id(&binding.session_id)?;
        check_sha256_hex(&binding.fingerprint)?;
        if let Some(turn) = self.live_dispatch(id, binding)? {
            return Ok(turn);
        }
        let row = self.turn_or_404(id)?;
        if row.state == TurnState::Preparing && row.cancel_requested {
            return Err(StoreError::conflict("cancel requested before dispatch"));
        }
        let after = self.write(|tx, j, st, now| {
            let Some(mut after) =
                stage_transition(tx, j, st, now, &row, TurnEvent::Dispatch, None, false)?
            else {
                return Ok(None);
            };
            tx.prepare_cached("UPDATE turns SET agent_session_id = ?1 WHERE id = ?2")?
                .execute(params![binding.session_id, id])?;
            super::ops_live::bind_session(tx, &row.thread_id, binding)?;
            after.agent_session_id = Some(binding.session_id.clone());
            Ok(Some(after))
        })?;
        match after {
            Some(turn) => {
                self.after_transition(row.state, &turn);
                Ok(turn)
            }
            None => Err(StoreError::conflict("turn is not preparing")),
        }
    }

    /// End a turn as the runner saw it (see [`TurnEnd`]). A lost outcome
    /// before the dispatch boundary is a plain failure: the prompt was never
    /// written, so nothing needs fencing.
    pub(super) fn finish_turn(&mut self, id: &str, end: TurnEnd) -> StoreResult<TransitionOutcome> {
        // Output the store refused or failed to write (it ran before this,
        // in order): the reported outcome stands on an incomplete record,
        // so it is the owner's to confirm.
        let end = match self.live.get(id) {
            Some(l) if l.append_failed => {
                tracing::error!(turn = %id, "streamed events were not journaled");
                TurnEnd::Unknown(OutcomeCode::JournalWriteFailed)
            }
            _ => end,
        };
        let preparing = self
            .live
            .get(id)
            .is_some_and(|l| l.state == TurnState::Preparing);
        let end = match end {
            TurnEnd::Unknown(c) | TurnEnd::Interrupted(c) if preparing => TurnEnd::Failed(c),
            other => other,
        };
        let (event, code) = match end {
            TurnEnd::Completed(stop_reason) => (TurnEvent::Complete, stop_reason),
            TurnEnd::Failed(c) => (TurnEvent::Fail, c.as_str().to_owned()),
            TurnEnd::Cancelled(c) => (TurnEvent::Cancel, c.as_str().to_owned()),
            TurnEnd::Interrupted(c) => (TurnEvent::Interrupt, c.as_str().to_owned()),
            TurnEnd::Unknown(c) => {
                let cancel = self.live.get(id).is_some_and(|l| *l.cancel.borrow());
                (
                    if cancel {
                        TurnEvent::Interrupt
                    } else {
                        TurnEvent::LoseOutcome
                    },
                    c.as_str().to_owned(),
                )
            }
        };
        self.transition(id, event, Some(code), false)
    }

    /// The last resort when a turn's end cannot be recorded for a reason
    /// other than the storage (which is retried): the turn leaves the
    /// scheduler as a fence, in memory only, so its workspace is never
    /// held in flight by a turn nobody will settle. The row stays in flight
    /// on disk, so the next open's recovery records it
    /// `submission_unknown`, resolvable as any fence.
    pub(super) fn fence_in_memory(&mut self, id: &str) -> StoreResult<()> {
        let row = self.turn_or_404(id)?;
        if !row.state.is_in_flight() {
            return Ok(());
        }
        tracing::error!(turn = %id, "turn end unrecordable: workspace fenced until a restart");
        self.sched.release(&row.workspace_id, id, true);
        self.live.remove(id);
        Ok(())
    }
}
