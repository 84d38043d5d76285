//! One ACP connection during a turn: JSON-RPC framing over the agent's stdio,
//! the permission broker, and cancellation.
//!
//! Agent output is read by one task, in order, into a bounded channel, so an
//! update that precedes the prompt's response is always handled before it
//! (no lost tail) and a flood of output applies backpressure to the agent.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;
use tokio::sync::mpsc;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::events::{ActivityEvent, DecidedBy, PermissionAnswer, PermissionOption, UpdateMapper};
use super::lines::{BoundedLines, LineError};
use super::process::{AgentPipes, AgentProcess, TeardownLimits};
use super::runner::{
    ApprovalPolicy, CancelSignal, PermissionRequest, RunnerLimits, TurnHooks, TurnRequest,
};

/// What the reader task forwards.
#[derive(Debug)]
enum Inbound {
    /// One JSON object from the agent.
    Message(Value),
    /// Stdout closed.
    Eof,
    /// The stream is unusable; the code says why.
    Broken(&'static str),
}

/// Why a call did not produce a result.
#[derive(Debug)]
pub(super) enum CallError {
    /// The agent answered with a JSON-RPC error.
    Rpc { code: i64 },
    /// The connection ended or broke (`agent_exited`, `line_too_long`, …).
    Closed(&'static str),
    /// The call's deadline passed.
    Timeout,
    /// A cancel came before the dispatch boundary.
    Cancelled,
    /// After `session/cancel`, the cancel deadline passed.
    Interrupted,
    /// A hook failed.
    Hook,
}

/// A permission request waiting for an answer.
#[derive(Debug)]
struct Pending {
    /// The JSON-RPC id to answer.
    rpc_id: Value,
    /// The offered options.
    options: Vec<PermissionOption>,
    /// The task waiting on [`TurnHooks::ask`].
    task: AbortHandle,
}

/// The connection state of one turn.
pub(super) struct Session<H> {
    /// Closed (dropped) at teardown to ask the agent to exit.
    stdin: Option<ChildStdin>,
    /// Messages from the reader task, in arrival order.
    inbox: mpsc::Receiver<Inbound>,
    /// The reader task.
    reader: AbortHandle,
    /// Storage.
    hooks: Arc<H>,
    /// Tool call state.
    mapper: UpdateMapper,
    /// Next JSON-RPC id for our requests.
    next_id: u64,
    /// Unanswered permission requests by request id.
    pending: HashMap<String, Pending>,
    /// Answers from ask tasks: (request id, answer or `None` on deadline).
    answers_tx: mpsc::Sender<(String, Option<PermissionAnswer>)>,
    /// Receiving side of `answers_tx`.
    answers: mpsc::Receiver<(String, Option<PermissionAnswer>)>,
    /// Cancel requests.
    cancel: CancelSignal,
    /// The cancel sender was dropped; stop watching.
    cancel_closed: bool,
    /// Set once `session/cancel` was sent; then the cancel deadline runs.
    cancel_deadline: Option<Instant>,
    /// Set at the dispatch boundary.
    session_id: Option<String>,
    /// Approval policy.
    approval: ApprovalPolicy,
    /// Restricted thread.
    restricted: bool,
    /// Deadlines.
    limits: RunnerLimits,
    /// A session/update already went unjournaled; the turn ends.
    hook_failed: bool,
}

impl<H> std::fmt::Debug for Session<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("pending", &self.pending.len())
            .field("dispatched", &self.session_id.is_some())
            .finish_non_exhaustive()
    }
}

impl<H: TurnHooks> Session<H> {
    /// Starts reading the agent's stdout.
    pub(super) fn start(
        pipes: AgentPipes,
        hooks: Arc<H>,
        cancel: CancelSignal,
        request: &TurnRequest,
    ) -> Session<H> {
        let (tx, inbox) = mpsc::channel(256);
        let reader = tokio::spawn(read_loop(pipes.stdout, tx)).abort_handle();
        let (answers_tx, answers) = mpsc::channel(64);
        Session {
            stdin: Some(pipes.stdin),
            inbox,
            reader,
            hooks,
            mapper: UpdateMapper::default(),
            next_id: 0,
            pending: HashMap::new(),
            answers_tx,
            answers,
            cancel,
            cancel_closed: false,
            cancel_deadline: None,
            session_id: None,
            approval: request.approval,
            restricted: request.restricted,
            limits: request.limits,
            hook_failed: false,
        }
    }

    pub(super) fn hooks(&self) -> &H {
        &self.hooks
    }

    pub(super) fn mark_dispatched(&mut self, session_id: String) {
        self.session_id = Some(session_id);
    }

    pub(super) fn cancel_requested(&self) -> bool {
        *self.cancel.0.borrow()
    }

    pub(super) fn cancel_sent(&self) -> bool {
        self.cancel_deadline.is_some()
    }

    pub(super) async fn emit(&mut self, event: ActivityEvent) -> Result<(), CallError> {
        self.hooks.event(event).await.map_err(|err| {
            tracing::warn!(error = %err, "journaling an agent event failed");
            self.hook_failed = true;
            CallError::Hook
        })
    }

    /// Sends a request and handles everything else the agent sends until its
    /// response arrives.
    pub(super) async fn call(
        &mut self,
        method: &str,
        params: Value,
        timeout: Option<Duration>,
    ) -> Result<Value, CallError> {
        let id = self.next_id;
        self.next_id += 1;
        self.write(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            if self.cancel_deadline.is_none() && !self.cancel_closed && self.cancel_requested() {
                self.on_cancel().await?;
            }
            tokio::select! {
                biased;
                inbound = self.inbox.recv() => match inbound {
                    Some(Inbound::Message(msg)) => {
                        if let Some(result) = self.handle(msg, id).await? {
                            return result;
                        }
                    }
                    Some(Inbound::Eof) | None => return Err(CallError::Closed("agent_exited")),
                    Some(Inbound::Broken(code)) => return Err(CallError::Closed(code)),
                },
                Some((request_id, answer)) = self.answers.recv() => {
                    self.answer_pending(&request_id, answer).await?;
                }
                changed = self.cancel.0.changed(), if !self.cancel_closed && self.cancel_deadline.is_none() => {
                    if changed.is_err() {
                        self.cancel_closed = true;
                    }
                }
                _ = sleep_until(deadline), if deadline.is_some() => return Err(CallError::Timeout),
                _ = sleep_until(self.cancel_deadline), if self.cancel_deadline.is_some() => {
                    return Err(CallError::Interrupted);
                }
            }
        }
    }

    /// Before the boundary a cancel ends the turn at once; after it, the
    /// agent is told and every pending permission is answered `cancelled`.
    async fn on_cancel(&mut self) -> Result<(), CallError> {
        let Some(session_id) = self.session_id.clone() else {
            return Err(CallError::Cancelled);
        };
        self.cancel_deadline = Some(Instant::now() + self.limits.cancel_timeout);
        self.emit(ActivityEvent::CancelRequested).await?;
        self.write(&json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}}))
            .await?;
        self.resolve_all(DecidedBy::Cancel).await
    }

    /// Handles one message; `Some` when it is the response to `awaited`.
    async fn handle(
        &mut self,
        msg: Value,
        awaited: u64,
    ) -> Result<Option<Result<Value, CallError>>, CallError> {
        let method = msg
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_string);
        match (method, msg.get("id").cloned()) {
            (Some(method), Some(id)) => {
                let params = msg.get("params").cloned().unwrap_or(Value::Null);
                self.on_request(&method, id, params).await?;
                Ok(None)
            }
            (Some(method), None) => {
                let mut params = msg.get("params").cloned().unwrap_or(Value::Null);
                let event = if method == "session/update" {
                    match params.get_mut("update").map(Value::take) {
                        Some(update) => self.mapper.map(update),
                        None => return Err(CallError::Closed("protocol_error")),
                    }
                } else {
                    ActivityEvent::Observation {
                        kind: "notification".into(),
                        payload: json!({"method": method}),
                    }
                };
                self.emit(event).await?;
                Ok(None)
            }
            (None, Some(id)) if id.as_u64() == Some(awaited) => {
                if let Some(result) = msg.get("result") {
                    Ok(Some(Ok(result.clone())))
                } else if let Some(err) = msg.get("error") {
                    let code = err.get("code").and_then(Value::as_i64).unwrap_or(0);
                    Ok(Some(Err(CallError::Rpc { code })))
                } else {
                    Err(CallError::Closed("protocol_error"))
                }
            }
            (None, Some(_)) => {
                tracing::debug!("response to an unknown request id ignored");
                Ok(None)
            }
            (None, None) => Err(CallError::Closed("protocol_error")),
        }
    }

    /// Agent → client requests: permissions go to the broker; anything else
    /// (we advertise no fs/terminal capability) is refused and observed.
    async fn on_request(
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
                .emit(ActivityEvent::Observation {
                    kind: "unsupported_request".into(),
                    payload: json!({"method": method}),
                })
                .await;
        }
        let options: Vec<PermissionOption> = params
            .get("options")
            .and_then(Value::as_array)
            .map(|opts| {
                opts.iter()
                    .filter_map(|o| {
                        Some(PermissionOption {
                            option_id: o.get("optionId")?.as_str()?.to_string(),
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
            return Err(CallError::Closed("protocol_error"));
        }
        self.emit(ActivityEvent::PermissionRequested {
            request_id: request_id.clone(),
            invocation: invocation.clone(),
            options: options.clone(),
        })
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
                option_id: option.option_id.clone(),
            };
            return self
                .respond_permission(&request_id, id, answer, DecidedBy::Automatic)
                .await;
        }
        let hooks = self.hooks.clone();
        let tx = self.answers_tx.clone();
        let limit = self.limits.permission_timeout;
        let ask = PermissionRequest {
            request_id: request_id.clone(),
            invocation,
            options: options.clone(),
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
    async fn answer_pending(
        &mut self,
        request_id: &str,
        answer: Option<PermissionAnswer>,
    ) -> Result<(), CallError> {
        let Some(pending) = self.pending.remove(request_id) else {
            return Ok(()); // already resolved by a cancel
        };
        let (answer, by) = match answer {
            Some(PermissionAnswer::Selected { option_id })
                if pending.options.iter().any(|o| o.option_id == option_id) =>
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
    async fn resolve_all(&mut self, by: DecidedBy) -> Result<(), CallError> {
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
        let outcome = match &answer {
            PermissionAnswer::Selected { option_id } => {
                json!({"outcome": "selected", "optionId": option_id})
            }
            PermissionAnswer::Cancelled => json!({"outcome": "cancelled"}),
        };
        self.emit(ActivityEvent::PermissionResolved {
            request_id: request_id.to_string(),
            answer,
            decided_by: by,
        })
        .await?;
        self.write(&json!({"jsonrpc": "2.0", "id": rpc_id, "result": {"outcome": outcome}}))
            .await
    }

    async fn write(&mut self, msg: &Value) -> Result<(), CallError> {
        let Some(stdin) = self.stdin.as_mut() else {
            return Err(CallError::Closed("broken_pipe"));
        };
        let mut bytes = serde_json::to_vec(msg).map_err(|_| CallError::Closed("protocol_error"))?;
        bytes.push(b'\n');
        let res = async {
            stdin.write_all(&bytes).await?;
            stdin.flush().await
        }
        .await;
        res.map_err(|_| CallError::Closed("broken_pipe"))
    }

    /// Teardown: answer what is still pending, close stdin, journal late
    /// output until the agent closes stdout or the grace passes, then end
    /// the process group.
    pub(super) async fn finish(mut self, process: AgentProcess, limits: TeardownLimits) {
        if !self.pending.is_empty() && !self.hook_failed {
            let _ = self.resolve_all(DecidedBy::TurnEnded).await;
        }
        for (_, p) in self.pending.drain() {
            p.task.abort();
        }
        self.stdin = None;
        let deadline = Instant::now() + limits.exit_grace;
        while let Ok(Some(Inbound::Message(msg))) =
            tokio::time::timeout_at(deadline, self.inbox.recv()).await
        {
            if self.hook_failed {
                continue;
            }
            let kind = msg
                .pointer("/params/update/sessionUpdate")
                .or_else(|| msg.get("method"))
                .and_then(Value::as_str)
                .unwrap_or("unknown")
                .to_string();
            let _ = self
                .hooks
                .event(ActivityEvent::Late { kind, payload: msg })
                .await;
        }
        self.reader.abort();
        let remaining = deadline.saturating_duration_since(Instant::now());
        process
            .shutdown(TeardownLimits {
                exit_grace: remaining,
                term_grace: limits.term_grace,
            })
            .await;
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
            option_id: o.option_id.clone(),
        })
        .unwrap_or(PermissionAnswer::Cancelled)
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// Reads agent stdout in order; stops at the first unusable line.
async fn read_loop<R>(mut lines: BoundedLines<R>, tx: mpsc::Sender<Inbound>)
where
    R: tokio::io::AsyncBufRead + Unpin,
{
    loop {
        let item = match lines.next_line().await {
            Ok(Some(line)) => {
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                match serde_json::from_slice::<Value>(&line) {
                    Ok(v) if v.is_object() => Inbound::Message(v),
                    _ => Inbound::Broken("invalid_json"),
                }
            }
            Ok(None) => Inbound::Eof,
            Err(LineError::TooLong { .. }) => Inbound::Broken("line_too_long"),
            Err(LineError::Io(_)) => Inbound::Broken("read_error"),
        };
        let last = !matches!(item, Inbound::Message(_));
        if tx.send(item).await.is_err() || last {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opt(id: &str, kind: &str) -> PermissionOption {
        PermissionOption {
            option_id: id.into(),
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
