//! Answering an agent's permission request: `permissions.respond` as one
//! engine operation.
//!
//! What must stay true, in this order:
//!
//! 1. a command id seen before with the same input replays its answer
//!    (`accepted`, `replayed`) without touching the request; other input is
//!    `conflict`;
//! 2. the answer is checked against the pending request (an offered option
//!    id, exactly) and the request is reserved for it ([`Taken`]); an answer
//!    to a request the inbox records as settled is `conflict` naming how it
//!    was settled; an answer for a finished turn is also journaled as a late
//!    `permission_decided` observation;
//! 3. with a command id the receipt is durable *before* the answer is
//!    delivered, so the agent never acts on an answer whose receipt could
//!    be lost;
//! 4. delivery hands the answer to the waiting runner, which journals the
//!    decision. A runner that stopped waiting in between (deadline, cancel)
//!    resolved the request another way: without a receipt that is
//!    `not_found`; with one, the receipt's `accepted` stands so a retry
//!    agrees with the first answer.
//!
//! The caller authorizes first: the server checks that the session's
//! principal owns the turn's thread (any of its applications may answer,
//! whoever asked); the answer names the answering application.

use lapis_protocol::ErrorCode;
use lapis_protocol::params::{PermissionsRespond, RespondResult};

use super::*;
use crate::domain::Actor;
use crate::engine::Taken;
use crate::engine::broker::AnswerError;
use crate::store::CommandKind;

/// Why a permission answer was refused.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// Nothing is pending under that id and the turn is still active.
    #[error(transparent)]
    NotPending(AnswerError),
    /// The turn already ended: the late answer was journaled and changed nothing.
    #[error("turn `{turn_id}` has finished; the answer changes nothing")]
    TurnFinished {
        /// The finished turn.
        turn_id: String,
    },
    /// The request was settled already (the inbox says how).
    #[error("permission request `{request_id}` was already settled: {how}")]
    Settled {
        /// The request.
        request_id: String,
        /// How it was settled (`error.data.settlement` on the wire).
        settlement: lapis_protocol::Settlement,
        /// [`crate::store::Settled::describe`], for the message.
        how: String,
    },
    /// The option was not offered.
    #[error(transparent)]
    NotOffered(AnswerError),
    /// The store refused or failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl EngineError {
    /// The wire code (`internal` for failures the client cannot act on).
    pub fn error_code(&self) -> ErrorCode {
        match self {
            EngineError::NotPending(_) => ErrorCode::NotFound,
            EngineError::TurnFinished { .. } | EngineError::Settled { .. } => ErrorCode::Conflict,
            EngineError::NotOffered(_) => ErrorCode::InvalidRequest,
            EngineError::Store(e) => e.error_code(),
        }
    }
}

/// Longest wait for a request being settled right now (see
/// [`Engine::settlement`]); the runner journals a decision as soon as it
/// has it, so this bounds only a stalled store.
const SETTLING_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The receipt's command kind and digest of one answer.
fn receipt_parts(p: &PermissionsRespond) -> Vec<String> {
    vec![
        "permission.respond".to_owned(),
        p.turn_id.clone(),
        p.request_id.clone(),
        p.option_id.clone(),
    ]
}

impl Engine {
    /// Pending permission requests, optionally of one turn.
    pub fn pending_permissions(&self, turn_id: Option<&str>) -> Vec<PendingPermission> {
        self.broker.pending(turn_id)
    }

    /// `permissions.respond` for `actor` (see the module docs for what it
    /// guarantees and in which order).
    pub(crate) async fn respond(
        &self,
        actor: &Actor,
        p: &PermissionsRespond,
    ) -> Result<RespondResult, EngineError> {
        let receipt = p.command_id.as_deref().map(|cmd| (cmd, receipt_parts(p)));
        if let Some((cmd, parts)) = &receipt
            && self
                .store
                .replay_command(actor, cmd, CommandKind::PermissionRespond, parts.clone())
                .await?
                .is_some()
        {
            return Ok(RespondResult {
                accepted: true,
                replayed: true,
            });
        }
        let answer = PermissionAnswer::Selected {
            option_id: p.option_id.clone(),
        };
        let by = lapis_protocol::Answerer {
            principal: actor.principal.clone(),
            application: actor.application.clone(),
        };
        let taken = self
            .take(&p.turn_id, &p.request_id, answer, Some(by))
            .await?;
        if let Some((cmd, parts)) = receipt {
            let result = serde_json::json!({ "accepted": true });
            self.store
                .record_command(
                    actor,
                    cmd,
                    CommandKind::PermissionRespond,
                    parts,
                    &p.turn_id,
                    result,
                )
                .await?;
        }
        if let Err(err) = taken.deliver() {
            tracing::warn!(turn = %p.turn_id, "permission answer arrived as the request ended");
            if p.command_id.is_none() {
                return Err(EngineError::NotPending(err));
            }
        }
        Ok(RespondResult {
            accepted: true,
            replayed: false,
        })
    }

    /// Answers a pending permission request at once, with no receipt (any
    /// answer, including a cancellation; for embedding and tests).
    #[cfg(any(test, feature = "test-support"))]
    pub async fn respond_permission(
        &self,
        turn_id: &str,
        request_id: &str,
        answer: PermissionAnswer,
    ) -> Result<(), EngineError> {
        self.take(turn_id, request_id, answer, None)
            .await?
            .deliver()
            .map_err(EngineError::NotPending)
    }

    /// Checks an answer and reserves the request for it; an answer for a
    /// finished turn is journaled as an observation and refused.
    async fn take(
        &self,
        turn_id: &str,
        request_id: &str,
        answer: PermissionAnswer,
        by: Option<lapis_protocol::Answerer>,
    ) -> Result<Taken, EngineError> {
        match self.broker.take(turn_id, request_id, answer.clone(), by) {
            Ok(taken) => Ok(taken),
            Err(e @ AnswerError::NotOffered { .. }) => Err(EngineError::NotOffered(e)),
            Err(e @ AnswerError::NotPending { .. }) => {
                let settled = self.settlement(turn_id, request_id).await?;
                let turn = self.store.get_turn(turn_id).await?;
                if let Some(settled) = settled {
                    if !turn.state.is_active() {
                        self.journal_late(turn_id, request_id, answer).await;
                    }
                    return Err(EngineError::Settled {
                        request_id: request_id.to_owned(),
                        how: settled.describe(),
                        settlement: settled.settlement,
                    });
                }
                if turn.state.is_active() {
                    return Err(EngineError::NotPending(e));
                }
                self.journal_late(turn_id, request_id, answer).await;
                Err(EngineError::TurnFinished {
                    turn_id: turn_id.to_string(),
                })
            }
        }
    }

    /// How the inbox records the request settled, if it is. A row still
    /// pending without a live wait is being settled right now (its runner
    /// took an answer, or stopped waiting, and is journaling the
    /// decision): its settlement is waited for, briefly, so a second
    /// answer right after the first is `conflict` like any later one.
    async fn settlement(
        &self,
        turn_id: &str,
        request_id: &str,
    ) -> Result<Option<crate::store::Settled>, EngineError> {
        // Subscribed before reading: a decision committed in between is seen.
        let mut events = self.store.subscribe();
        let Some(entry) = self.store.permission_request(turn_id, request_id).await? else {
            return Ok(None);
        };
        if entry.settled.is_some() {
            return Ok(entry.settled);
        }
        let decided = async {
            loop {
                match events.recv().await {
                    Ok(e)
                        if e.turn_id.as_deref() == Some(turn_id)
                            && e.kind == lapis_protocol::EventKind::PermissionDecided =>
                    {
                        return;
                    }
                    Ok(_) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => return,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        };
        let _ = tokio::time::timeout(SETTLING_WAIT, decided).await;
        Ok(self
            .store
            .permission_request(turn_id, request_id)
            .await?
            .and_then(|entry| entry.settled))
    }

    /// Records an answer to a finished turn; the store files it as an
    /// observation: a late answer never moves a finished turn.
    async fn journal_late(&self, turn_id: &str, request_id: &str, answer: PermissionAnswer) {
        let late = lapis_protocol::PermissionDecided {
            request_id: request_id.to_owned(),
            answer,
            decided_by: None,
            answered_by: None,
        };
        let _ = self
            .store
            .append_activity(turn_id, lapis_protocol::Payload::PermissionDecided(late))
            .await;
    }
}
