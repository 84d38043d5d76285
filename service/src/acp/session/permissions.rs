//! The permission broker side of a session: agent → client requests
//! (`session/request_permission`, and empty-form `elicitation/create`,
//! which ACP v1 makes a one-time approval), automatic approval under
//! `allow-all` (never on a restricted thread), deadlines, and resolution of
//! every pending request on cancel or at the end of the turn.

use serde_json::{Value, json};

use super::super::turn::{PermissionRequest, TurnHooks};
use super::{CallError, Pending, Session};
use lapis_protocol::ApprovalPolicy;
use lapis_protocol::{
    DecidedBy, Note, OutcomeCode, PermissionAnswer, PermissionDecided, PermissionOption,
    PermissionRequested, UnsupportedRequest,
};

impl<H: TurnHooks> Session<H> {
    /// Agent → client requests: permissions go to the broker, and so do
    /// empty-form elicitations (one-time approvals, see [`elicitation`]);
    /// other elicitations get "invalid params" (ACP: a mode or form this
    /// client does not support), anything else (we advertise no
    /// fs/terminal capability) "method not found"; each refusal is
    /// observed.
    pub(super) async fn on_request(
        &mut self,
        method: &str,
        id: Value,
        params: Value,
    ) -> Result<(), CallError> {
        if method == "elicitation/create" {
            return match elicitation(&params) {
                Some((options, invocation)) => {
                    self.broker(id, options, invocation, Reply::Elicitation)
                        .await
                }
                None => {
                    self.refuse(
                        method,
                        id,
                        -32602,
                        "elicitation not supported: only an empty form (an approval) is",
                    )
                    .await
                }
            };
        }
        if method != "session/request_permission" {
            return self
                .refuse(method, id, -32601, "method not supported by this client")
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
        self.broker(id, options, invocation, Reply::Permission)
            .await
    }

    /// Answers a request with a JSON-RPC error and journals the refusal.
    async fn refuse(
        &mut self,
        method: &str,
        id: Value,
        code: i64,
        message: &str,
    ) -> Result<(), CallError> {
        self.write(&json!({"jsonrpc": "2.0", "id": id,
            "error": {"code": code, "message": message}}))
            .await?;
        self.emit(
            Note::UnsupportedRequest(UnsupportedRequest {
                method: method.to_owned(),
                idle: false,
            })
            .into(),
        )
        .await
    }

    /// One interaction through the inbox and the policy: journaled as a
    /// `permission_requested`, answered automatically only under
    /// `allow-all` on an unrestricted thread, else asked with the
    /// provider's deadline.
    async fn broker(
        &mut self,
        id: Value,
        options: Vec<PermissionOption>,
        invocation: lapis_protocol::Invocation,
        reply: Reply,
    ) -> Result<(), CallError> {
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
        let auto = (self.approval == ApprovalPolicy::AllowAll && !self.restricted)
            .then(|| {
                options
                    .iter()
                    .find(|o| o.kind == "allow_once")
                    .or_else(|| options.iter().find(|o| o.is_allow()))
            })
            .flatten()
            .map(|option| PermissionAnswer::Selected {
                option_id: option.id.clone(),
            });
        // A request a client may answer is waited for *before* it is
        // journaled: a client that reads the `permission_requested` event and
        // answers at once must find the wait (an answer arriving first was
        // refused as `not_found`). The hooks create the interaction on the
        // ask's first poll (see [`TurnHooks::ask`]).
        let task = match auto {
            Some(_) => None,
            None => Some(
                self.spawn_ask(&request_id, &invocation, &options, deadline)
                    .await,
            ),
        };
        let requested = self
            .emit(lapis_protocol::Payload::PermissionRequested(
                PermissionRequested {
                    request_id: request_id.clone(),
                    invocation: invocation.clone(),
                    options: options.clone(),
                    expires_at: Some(expires_at),
                },
            ))
            .await;
        let task = match (requested, task) {
            (Err(e), task) => {
                task.inspect(|t| t.abort());
                return Err(e);
            }
            (Ok(()), Some(task)) if !self.cancel_sent() => task,
            (Ok(()), task) => {
                task.inspect(|t| t.abort());
                let (answer, by) = match auto {
                    Some(answer) if !self.cancel_sent() => (answer, DecidedBy::Automatic),
                    _ => (PermissionAnswer::Cancelled, DecidedBy::Cancel),
                };
                return self
                    .respond_permission(&request_id, id, reply, answer, by)
                    .await;
            }
        };
        self.pending.insert(
            request_id,
            Pending {
                rpc_id: id,
                options,
                task,
                reply,
            },
        );
        Ok(())
    }

    /// Spawns the wait for a client's answer to one request, returning once
    /// the hooks have created the pending interaction (the ask's first
    /// poll). The wait is bounded by the provider's deadline; its outcome
    /// reaches [`Self::answer_pending`] through the answers channel.
    async fn spawn_ask(
        &self,
        request_id: &str,
        invocation: &lapis_protocol::Invocation,
        options: &[PermissionOption],
        deadline: std::time::SystemTime,
    ) -> tokio::task::AbortHandle {
        let hooks = self.hooks.clone();
        let tx = self.answers_tx.clone();
        let limit = self.limits.permission_timeout;
        let ask = PermissionRequest {
            request_id: request_id.to_owned(),
            invocation: invocation.clone(),
            options: options.to_vec(),
            deadline,
        };
        let rid = request_id.to_owned();
        let (created_tx, created) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            let mut wait = std::pin::pin!(tokio::time::timeout(limit, hooks.ask(ask)));
            let first =
                std::future::poll_fn(|cx| std::task::Poll::Ready(wait.as_mut().poll(cx))).await;
            let _ = created_tx.send(());
            let answer = match first {
                std::task::Poll::Ready(answer) => answer,
                std::task::Poll::Pending => wait.await,
            };
            let _ = tx.send((rid, answer.ok())).await;
        })
        .abort_handle();
        // Only a task that ended before its first poll (aborted with the
        // runtime) drops the sender; the request then waits for nothing.
        let _ = created.await;
        task
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
        self.respond_permission(request_id, pending.rpc_id, pending.reply, answer, by)
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
                .respond_permission(
                    &request_id,
                    p.rpc_id,
                    p.reply,
                    PermissionAnswer::Cancelled,
                    by,
                )
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
        kind: Reply,
        answer: PermissionAnswer,
        by: DecidedBy,
    ) -> Result<(), CallError> {
        let result = match kind {
            // ACP's `outcome` object is the answer's own serialized form.
            Reply::Permission => json!({"outcome": &answer}),
            // An approval's form is empty: accepting sends no content.
            Reply::Elicitation => match &answer {
                PermissionAnswer::Selected { option_id } if option_id == ELICIT_ACCEPT => {
                    json!({"action": "accept"})
                }
                PermissionAnswer::Selected { .. } => json!({"action": "decline"}),
                PermissionAnswer::Cancelled => json!({"action": "cancel"}),
            },
        };
        let reply = json!({"jsonrpc": "2.0", "id": rpc_id, "result": result});
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

/// How a brokered request is answered on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reply {
    /// `session/request_permission`: `{"outcome": …}`.
    Permission,
    /// `elicitation/create`: `{"action": "accept"|"decline"|"cancel"}`.
    Elicitation,
}

/// The option ids an approval elicitation offers.
const ELICIT_ACCEPT: &str = "accept";
const ELICIT_DECLINE: &str = "decline";

/// An `elicitation/create` this client serves: form mode with an empty
/// form (no properties), which ACP makes a one-time approval. It is
/// offered as `accept` (`allow_once`) and `decline` (`reject_once`), with
/// the agent's message as the title; the controller never invents input,
/// so a form with fields, URL mode (not advertised) or anything else is
/// `None` (refused).
fn elicitation(params: &Value) -> Option<(Vec<PermissionOption>, lapis_protocol::Invocation)> {
    if params.get("mode").and_then(Value::as_str) != Some("form") {
        return None;
    }
    let schema = params.get("requestedSchema")?;
    let empty = schema
        .get("properties")
        .is_none_or(|p| p.as_object().is_some_and(|m| m.is_empty()))
        && schema
            .get("required")
            .is_none_or(|r| r.as_array().is_some_and(|a| a.is_empty()));
    if !empty {
        return None;
    }
    let option = |id: &str, name: &str, kind: &str| PermissionOption {
        id: id.into(),
        name: name.into(),
        kind: kind.into(),
    };
    let options = vec![
        option(ELICIT_ACCEPT, "Accept", "allow_once"),
        option(ELICIT_DECLINE, "Decline", "reject_once"),
    ];
    let invocation = lapis_protocol::Invocation {
        id: params
            .get("toolCallId")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        title: params
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_owned),
        kind: Some("elicitation".into()),
        ..Default::default()
    };
    Some((options, invocation))
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
