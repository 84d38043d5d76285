//! The permission broker side of a session: agent → client requests,
//! automatic approval under `allow-all`, deadlines, and resolution of every
//! pending request on cancel or at the end of the turn.

use serde_json::{Value, json};

use super::super::turn::{PermissionRequest, TurnHooks};
use super::{CallError, Pending, Session};
use lapis_protocol::ApprovalPolicy;
use lapis_protocol::{
    DecidedBy, Note, OutcomeCode, PermissionAnswer, PermissionDecided, PermissionOption,
    PermissionRequested, UnsupportedRequest,
};

impl<H: TurnHooks> Session<H> {
    /// Agent → client requests: permissions go to the broker; anything else
    /// (we advertise no fs/terminal capability) is refused and observed.
    pub(super) async fn on_request(
        &mut self,
        method: &str,
        id: Value,
        params: Value,
    ) -> Result<(), CallError> {
        if method != "session/request_permission" {
            self.write(&json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": "method not supported by this client"}}))
                .await?;
            return self
                .emit(
                    Note::UnsupportedRequest(UnsupportedRequest {
                        method: method.to_owned(),
                        idle: false,
                    })
                    .into(),
                )
                .await;
        }
        let options: Vec<PermissionOption> = params
            .get("options")
            .and_then(Value::as_array)
            .map(|opts| {
                opts.iter()
                    .filter_map(|o| {
                        Some(PermissionOption {
                            id: o.get("optionId")?.as_str()?.to_string(),
                            name: o
                                .get("name")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_string(),
                            kind: o
                                .get("kind")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_string(),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        let invocation = self
            .mapper
            .preview(params.get("toolCall").unwrap_or(&Value::Null));
        // String ids are used verbatim; others by their JSON text.
        let request_id = match &id {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        if self.pending.contains_key(&request_id) {
            return Err(CallError::Closed(OutcomeCode::ProtocolError));
        }
        let limit = self.limits.permission_timeout;
        let deadline = std::time::SystemTime::now() + limit;
        let expires_at = deadline
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        self.emit(lapis_protocol::Payload::PermissionRequested(
            PermissionRequested {
                request_id: request_id.clone(),
                invocation: invocation.clone(),
                options: options.clone(),
                expires_at: Some(expires_at),
            },
        ))
        .await?;
        if self.cancel_sent() {
            return self
                .respond_permission(
                    &request_id,
                    id,
                    PermissionAnswer::Cancelled,
                    DecidedBy::Cancel,
                )
                .await;
        }
        let auto = (self.approval == ApprovalPolicy::AllowAll && !self.restricted)
            .then(|| {
                options
                    .iter()
                    .find(|o| o.kind == "allow_once")
                    .or_else(|| options.iter().find(|o| o.is_allow()))
            })
            .flatten();
        if let Some(option) = auto {
            let answer = PermissionAnswer::Selected {
                option_id: option.id.clone(),
            };
            return self
                .respond_permission(&request_id, id, answer, DecidedBy::Automatic)
                .await;
        }
        let hooks = self.hooks.clone();
        let tx = self.answers_tx.clone();
        let ask = PermissionRequest {
            request_id: request_id.clone(),
            invocation,
            options: options.clone(),
            deadline,
        };
        let rid = request_id.clone();
        let task = tokio::spawn(async move {
            let answer = tokio::time::timeout(limit, hooks.ask(ask)).await.ok();
            let _ = tx.send((rid, answer)).await;
        })
        .abort_handle();
        self.pending.insert(
            request_id,
            Pending {
                rpc_id: id,
                options,
                task,
            },
        );
        Ok(())
    }

    /// An ask task finished: a user answer, or `None` when the deadline passed.
    pub(super) async fn answer_pending(
        &mut self,
        request_id: &str,
        answer: Option<PermissionAnswer>,
    ) -> Result<(), CallError> {
        let Some(pending) = self.pending.remove(request_id) else {
            return Ok(()); // already resolved by a cancel
        };
        let (answer, by) = match answer {
            Some(PermissionAnswer::Selected { option_id })
                if pending.options.iter().any(|o| o.id == option_id) =>
            {
                (PermissionAnswer::Selected { option_id }, DecidedBy::User)
            }
            Some(_) => (PermissionAnswer::Cancelled, DecidedBy::User),
            None => (expiry_answer(&pending.options), DecidedBy::Expired),
        };
        self.respond_permission(request_id, pending.rpc_id, answer, by)
            .await
    }

    /// Answers every pending request (cancel or end of turn). Each one is
    /// journaled as resolved even if the agent can no longer be told; the
    /// first failure is reported after all were handled.
    pub(super) async fn resolve_all(&mut self, by: DecidedBy) -> Result<(), CallError> {
        let pending: Vec<(String, Pending)> = self.pending.drain().collect();
        let mut first_err = None;
        for (request_id, p) in pending {
            p.task.abort();
            let res = self
                .respond_permission(&request_id, p.rpc_id, PermissionAnswer::Cancelled, by)
                .await;
            if let Err(e) = res {
                first_err.get_or_insert(e);
                if self.hook_failed {
                    break;
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    async fn respond_permission(
        &mut self,
        request_id: &str,
        rpc_id: Value,
        answer: PermissionAnswer,
        by: DecidedBy,
    ) -> Result<(), CallError> {
        // ACP's `outcome` object is the answer's own serialized form.
        let reply = json!({"jsonrpc": "2.0", "id": rpc_id, "result": {"outcome": &answer}});
        self.emit(lapis_protocol::Payload::PermissionDecided(
            PermissionDecided {
                request_id: request_id.to_string(),
                answer,
                decided_by: Some(by),
                // Named by the engine's hooks, which know who answered.
                answered_by: None,
            },
        ))
        .await?;
        self.write(&reply).await
    }
}

/// The answer when nobody answered in time: a reject option if offered
/// (`reject_once` first), else `cancelled`.
fn expiry_answer(options: &[PermissionOption]) -> PermissionAnswer {
    options
        .iter()
        .find(|o| o.kind == "reject_once")
        .or_else(|| options.iter().find(|o| o.is_reject()))
        .map(|o| PermissionAnswer::Selected {
            option_id: o.id.clone(),
        })
        .unwrap_or(PermissionAnswer::Cancelled)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opt(id: &str, kind: &str) -> PermissionOption {
        PermissionOption {
            id: id.into(),
            name: id.into(),
            kind: kind.into(),
        }
    }

    #[test]
    fn expiry_prefers_reject_once_then_any_reject_then_cancelled() {
        let sel = |id: &str| PermissionAnswer::Selected {
            option_id: id.into(),
        };
        assert_eq!(
            expiry_answer(&[
                opt("a", "allow_once"),
                opt("ra", "reject_always"),
                opt("r", "reject_once")
            ]),
            sel("r")
        );
        assert_eq!(
            expiry_answer(&[opt("a", "allow_once"), opt("ra", "reject_always")]),
            sel("ra")
        );
        assert_eq!(
            expiry_answer(&[opt("a", "allow_once")]),
            PermissionAnswer::Cancelled
        );
    }
}
