//! Cancelling and resolving turns: a queued turn is cancelled at once, a
//! turn in flight gets its durable cancel flag, and a fenced turn is
//! released only by its owner (resolve, or cancel as the confirmation),
//! audited with how it was resolved.

use super::command_kind::CommandKind;
use super::ids::digest;
use super::read;
use super::receipts::Command;
use super::transition::stage_transition;
use super::writer::Writer;
use crate::domain::{
    Actor, Receipt, ResolveAs, StoreError, StoreResult, Turn, TurnEvent, TurnState,
};
use lapis_protocol::{CancelRequest, OutcomeCode, Payload, Resolution, ResolvedVia};
use rusqlite::params;
use serde_json::json;

impl Writer {
    /// Request cancellation: a queued turn is cancelled at once; a turn in
    /// flight gets its durable cancel flag (the runner stops the agent);
    /// anything else is returned unchanged.
    pub(super) fn request_cancel(&mut self, actor: &Actor, id: &str) -> StoreResult<Turn> {
        let row = self.turn_or_404(id)?;
        match row.state {
            TurnState::Queued => Ok(self
                .transition(
                    id,
                    TurnEvent::Cancel,
                    Some(OutcomeCode::CancelledBeforeStart.as_str().into()),
                    false,
                )?
                .turn),
            s if s.is_in_flight() && !row.cancel_requested => {
                let turn = self.write(|tx, j, st, now| {
                    tx.prepare_cached(
                        "UPDATE turns SET cancel_requested = 1, updated_at = ?1 WHERE id = ?2",
                    )?
                    .execute(params![now, id])?;
                    let request = Payload::CancelRequested(CancelRequest {
                        principal: actor.principal.clone(),
                        application: actor.application.clone(),
                    });
                    j.append(tx, st, &row.thread_id, Some(id), now, request)?;
                    read::turn(tx, id)?.ok_or_else(|| StoreError::not_found("turn", id))
                })?;
                if let Some(l) = self.live.get(id) {
                    l.cancel.send_replace(true);
                }
                Ok(turn)
            }
            _ => Ok(row),
        }
    }

    /// The owner's cancel: a fenced turn is *resolved* as `cancelled` (the
    /// cancel is the owner's confirmation; audited, the queue moves on,
    /// nothing is retried); any other turn goes through [`Self::request_cancel`].
    /// The controller's own cancels (deadlines) use `request_cancel`, which
    /// never resolves a fence.
    pub(super) fn owner_cancel(
        &mut self,
        actor: &Actor,
        id: &str,
        command_id: Option<&str>,
    ) -> StoreResult<Receipt<Turn>> {
        let command = Command {
            actor,
            id: command_id,
            kind: CommandKind::TurnCancel,
            digest: digest(&["turn.cancel", id]),
        };
        self.command(
            command,
            |t: &Turn| t.id.clone(),
            |w| {
                let row = w.turn_or_404(id)?;
                if row.state.is_fenced() {
                    w.resolve_fenced(actor, &row, ResolveAs::Cancelled, ResolvedVia::Cancel)
                } else {
                    w.request_cancel(actor, id)
                }
            },
        )
    }

    /// The owner's resolution of a fenced turn (see module docs of `store`).
    pub(super) fn resolve_turn(
        &mut self,
        actor: &Actor,
        id: &str,
        as_: ResolveAs,
        confirmed_stopped: bool,
        command_id: Option<&str>,
    ) -> StoreResult<Receipt<Turn>> {
        if !confirmed_stopped {
            return Err(StoreError::invalid(
                "resolution requires confirmation that the agent stopped",
            ));
        }
        let as_name = as_.as_str();
        let command = Command {
            actor,
            id: command_id,
            kind: CommandKind::TurnResolve,
            digest: digest(&["turn.resolve", id, as_name]),
        };
        self.command(
            command,
            |t: &Turn| t.id.clone(),
            |w| {
                let row = w.turn_or_404(id)?;
                w.resolve_fenced(actor, &row, as_, ResolvedVia::Resolve)
            },
        )
    }

    /// Settles a fenced turn as `as_` in one transaction: the transition,
    /// an audit row naming the resolving principal and application (and the
    /// thread's own application, which differs when an operator resolved it
    /// with `turns:resolve-any`) and a `turn_resolved` event. Releases the
    /// fence; never re-dispatches.
    fn resolve_fenced(
        &mut self,
        actor: &Actor,
        row: &Turn,
        as_: ResolveAs,
        via: ResolvedVia,
    ) -> StoreResult<Turn> {
        if !row.state.is_fenced() {
            return Err(StoreError::conflict("turn is not awaiting resolution"));
        }
        let thread = read::thread(&self.conn, &row.thread_id)?
            .ok_or_else(|| StoreError::not_found("thread", &row.thread_id))?;
        let (event, as_state) = match as_ {
            ResolveAs::Failed => (TurnEvent::ResolveFailed, TurnState::Failed),
            ResolveAs::Cancelled => (TurnEvent::ResolveCancelled, TurnState::Cancelled),
        };
        let id = row.id.as_str();
        let after = self.write(|tx, j, st, now| {
            let after = stage_transition(tx, j, st, now, row, event, Some(OutcomeCode::ResolvedByOwner.as_str()), false)?
                .ok_or_else(|| StoreError::conflict("turn is not awaiting resolution"))?;
            let detail = json!({
                "as": as_state, "from": row.state, "via": via,
                "application": actor.application, "threadApplication": thread.application,
            });
            tx.prepare_cached(
                "INSERT INTO audit (at, principal, action, turn_id, detail) VALUES (?1, ?2, 'turn.resolve', ?3, ?4)")?
.execute(
                params![now, actor.principal, id, detail.to_string()],
            )?;
            let resolved = Payload::TurnResolved(Resolution {
                as_state,
                from: row.state,
                via,
                principal: actor.principal.clone(),
                application: actor.application.clone(),
            });
            j.append(tx, st, &row.thread_id, Some(id), now, resolved)?;
            Ok(after)
        })?;
        self.after_transition(row.state, &after);
        Ok(after)
    }
}
