//! One ACP connection ([`Conn`], which lives as long as the agent process)
//! and one turn on it ([`Session`]): JSON-RPC framing over the agent's stdio,
//! the permission broker, and cancellation.
//!
//! Agent output is read by one task, in order, into a bounded channel, so an
//! update that precedes the prompt's response is always handled before it
//! (no lost tail) and a flood of output applies backpressure to the agent.
//! Between turns the channel simply fills; what an idle agent said is
//! drained when the agent is next used or retired.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;
use tokio::sync::mpsc;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::events::{UpdateMapper, late_update};
use super::lines::{BoundedLines, LineError};
use super::process::{AgentPipes, AgentProcess, Stopped, TeardownLimits};
use super::turn::{CancelSignal, RunnerLimits, TurnHooks, TurnRequest};
use lapis_protocol::ApprovalPolicy;
use lapis_protocol::{
    AgentNotification, DecidedBy, Note, Observation, OutcomeCode, Payload, PermissionAnswer,
    PermissionOption,
};

mod permissions;

/// What the reader task forwards.
#[derive(Debug)]
pub(super) enum Inbound {
    /// One JSON object from the agent.
    Message(Value),
    /// Stdout closed.
    Eof,
    /// The stream is unusable; the code says why.
    Broken(OutcomeCode),
}

/// Why a call did not produce a result.
#[derive(Debug)]
pub(super) enum CallError {
    /// The agent answered with a JSON-RPC error.
    Rpc { code: i64 },
    /// The connection ended or broke (`agent_exited`, `line_too_long`, …).
    Closed(OutcomeCode),
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
    /// How the answer goes back (a permission outcome or an elicitation
    /// action).
    reply: permissions::Reply,
}

/// The agent's side of the connection; outlives turns.
#[derive(Debug)]
pub(super) struct Conn {
    /// Closed (dropped) at teardown to ask the agent to exit.
    pub(super) stdin: Option<ChildStdin>,
    /// Messages from the reader task, in arrival order.
    pub(super) inbox: mpsc::Receiver<Inbound>,
    /// The reader task.
    pub(super) reader: AbortHandle,
    /// Next JSON-RPC id for our requests (unique over the connection).
    next_id: u64,
    /// The stream ended or broke, or a write failed: never reused.
    pub(super) broken: bool,
}

impl Conn {
    /// Starts reading the agent's stdout.
    pub(super) fn open(pipes: AgentPipes) -> Conn {
        let (tx, inbox) = mpsc::channel(256);
        let reader = tokio::spawn(read_loop(pipes.stdout, tx, pipes.leader_exit)).abort_handle();
        Conn {
            stdin: Some(pipes.stdin),
            inbox,
            reader,
            next_id: 0,
            broken: false,
        }
    }

    /// A fresh JSON-RPC id for a request of ours.
    pub(super) fn request_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// Writes one message; a failure marks the connection broken.
    pub(super) async fn write(&mut self, msg: &Value) -> Result<(), CallError> {
        let Some(stdin) = self.stdin.as_mut() else {
            return Err(CallError::Closed(OutcomeCode::BrokenPipe));
        };
        let mut bytes =
            serde_json::to_vec(msg).map_err(|_| CallError::Closed(OutcomeCode::ProtocolError))?;
        bytes.push(b'\n');
        let res = async {
            stdin.write_all(&bytes).await?;
            stdin.flush().await
        }
        .await;
        res.map_err(|_| {
            self.broken = true;
            CallError::Closed(OutcomeCode::BrokenPipe)
        })
    }
}

/// The connection state of one turn.
pub(super) struct Session<H> {
    /// The connection (handed back by [`Session::into_conn`]).
    conn: Conn,
    /// Storage.
    hooks: Arc<H>,
    /// Tool call state.
    mapper: UpdateMapper,
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
    /// While `session/load` runs: how many replayed updates were dropped.
    /// History the agent replays is never journaled as this turn's output.
    replaying: Option<u64>,
    /// The last `usage_update` of this turn (the context and cumulative
    /// cost at its end).
    pub(super) context_usage: Option<lapis_protocol::usage::ContextUsage>,
    /// The sum of the per-call token counts the agent put in its chunks'
    /// `_meta.usage` this turn (qwen-code's shape); the turn's tokens when
    /// the prompt response carries none.
    pub(super) chunk_tokens: Option<lapis_protocol::usage::TokenUsage>,
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
    /// A turn on `conn`.
    pub(super) fn start(
        conn: Conn,
        hooks: Arc<H>,
        cancel: CancelSignal,
        request: &TurnRequest,
    ) -> Session<H> {
        let (answers_tx, answers) = mpsc::channel(64);
        Session {
            conn,
            hooks,
            mapper: UpdateMapper::default(),
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
            replaying: None,
            context_usage: None,
            chunk_tokens: None,
        }
    }

    /// Whether the connection can carry another turn: nothing broke and
    /// every event of this turn was journaled.
    pub(super) fn reusable(&self) -> bool {
        !self.conn.broken && !self.hook_failed && self.conn.stdin.is_some()
    }

    /// Ends the turn's use of the connection: answers what is still
    /// pending (`turn_ended`) and hands the connection back.
    pub(super) async fn into_conn(mut self) -> Conn {
        if !self.pending.is_empty() && !self.hook_failed {
            let _ = self.resolve_all(DecidedBy::TurnEnded).await;
        }
        for (_, p) in self.pending.drain() {
            p.task.abort();
        }
        self.conn
    }

    /// Starts or stops dropping replayed history; returns the count dropped.
    pub(super) fn set_replaying(&mut self, on: bool) -> u64 {
        let dropped = self.replaying.unwrap_or(0);
        self.replaying = on.then_some(0);
        dropped
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

    pub(super) async fn emit(&mut self, event: Payload) -> Result<(), CallError> {
        self.hooks.event(event).await.map_err(|err| {
            tracing::warn!(error = %err, "journaling an agent event failed");
            self.hook_failed = true;
            CallError::Hook
        })
    }

    /// Journals the tool-call envelopes that changed since they were last
    /// journaled (the prompt ended; see `events`' durable pair).
    pub(super) async fn flush_tool_calls(&mut self) -> Result<(), CallError> {
        if self.hook_failed {
            return Err(CallError::Hook);
        }
        for event in self.mapper.flush() {
            self.emit(event).await?;
        }
        Ok(())
    }

    /// Sends a request and handles everything else the agent sends until its
    /// response arrives.
    pub(super) async fn call(
        &mut self,
        method: &str,
        params: Value,
        timeout: Option<Duration>,
    ) -> Result<Value, CallError> {
        let id = self.conn.request_id();
        self.write(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            if self.cancel_deadline.is_none() && !self.cancel_closed && self.cancel_requested() {
                self.on_cancel().await?;
            }
            tokio::select! {
                biased;
                inbound = self.conn.inbox.recv() => match inbound {
                    Some(Inbound::Message(msg)) => {
                        if let Some(result) = self.handle(msg, id).await? {
                            return result;
                        }
                    }
                    Some(Inbound::Eof) | None => {
                        self.conn.broken = true;
                        return Err(CallError::Closed(OutcomeCode::AgentExited));
                    }
                    Some(Inbound::Broken(code)) => {
                        self.conn.broken = true;
                        return Err(CallError::Closed(code));
                    }
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
        self.emit(Observation::CancelSent.into()).await?;
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
            (Some(method), None) if method == "session/update" && self.replaying.is_some() => {
                // History replayed by `session/load`: counted, never journaled.
                if let Some(n) = self.replaying.as_mut() {
                    *n += 1;
                }
                Ok(None)
            }
            (Some(method), None) => {
                let mut params = msg.get("params").cloned().unwrap_or(Value::Null);
                let event = if method == "session/update" {
                    match params.get_mut("update").map(Value::take) {
                        Some(update) => {
                            if let Some(u) = lapis_protocol::usage::TokenUsage::of_chunk(&update) {
                                self.chunk_tokens.get_or_insert_default().add(&u);
                            }
                            match self.mapper.map(update) {
                                Some(event) => event,
                                // Only a tool call's envelope changed.
                                None => return Ok(None),
                            }
                        }
                        None => return Err(CallError::Closed(OutcomeCode::ProtocolError)),
                    }
                } else {
                    Note::Notification(AgentNotification {
                        method: method.to_owned(),
                    })
                    .into()
                };
                if let Payload::Observation(Observation::Note(Note::UsageUpdate(u))) = &event {
                    self.context_usage = Some(u.clone());
                }
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
                    Err(CallError::Closed(OutcomeCode::ProtocolError))
                }
            }
            (None, Some(_)) => {
                tracing::debug!("response to an unknown request id ignored");
                Ok(None)
            }
            (None, None) => Err(CallError::Closed(OutcomeCode::ProtocolError)),
        }
    }

    async fn write(&mut self, msg: &Value) -> Result<(), CallError> {
        self.conn.write(msg).await
    }

    /// Teardown: answer what is still pending, close stdin, journal late
    /// output until the agent closes stdout or the grace passes, then end
    /// the process group.
    pub(super) async fn finish(mut self, process: AgentProcess, limits: TeardownLimits) -> Stopped {
        if !self.pending.is_empty() && !self.hook_failed {
            let _ = self.resolve_all(DecidedBy::TurnEnded).await;
        }
        for (_, p) in self.pending.drain() {
            p.task.abort();
        }
        self.conn.stdin = None;
        let deadline = Instant::now() + limits.exit_grace;
        while let Ok(Some(Inbound::Message(msg))) =
            tokio::time::timeout_at(deadline, self.conn.inbox.recv()).await
        {
            if self.hook_failed {
                continue;
            }
            let _ = self.hooks.event(late_update(msg)).await;
        }
        self.conn.reader.abort();
        let remaining = deadline.saturating_duration_since(Instant::now());
        process
            .shutdown(TeardownLimits {
                exit_grace: remaining,
                term_grace: limits.term_grace,
            })
            .await
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// Reads agent stdout in order; stops at the first unusable line. Once the
/// group leader has exited, what it wrote is drained and then the agent is
/// gone (`Eof`) even if a descendant keeps the pipe open (see `leader`).
async fn read_loop<R>(
    mut lines: BoundedLines<R>,
    tx: mpsc::Sender<Inbound>,
    mut leader_exit: Option<tokio::sync::watch::Receiver<bool>>,
) where
    R: tokio::io::AsyncBufRead + Unpin,
{
    let mut exited = false;
    let mut unwatched = false;
    loop {
        if std::mem::take(&mut unwatched) {
            leader_exit = None;
        }
        // `next_line` is cancel-safe (its partial line lives in `lines`).
        let next = match (&mut leader_exit, exited) {
            (_, true) => {
                match tokio::time::timeout(super::leader::DRAIN, lines.next_line()).await {
                    Ok(next) => next,
                    Err(_) => Ok(None),
                }
            }
            (Some(watch), false) => tokio::select! {
                biased;
                next = lines.next_line() => next,
                gone = watch.wait_for(|gone| *gone) => {
                    // A watch that ended without seeing the exit is no
                    // watch: stdout EOF alone tells from now on.
                    match gone {
                        Ok(_) => exited = true,
                        Err(_) => unwatched = true,
                    }
                    continue;
                }
            },
            (None, false) => lines.next_line().await,
        };
        let item = match next {
            Ok(Some(line)) => {
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                match serde_json::from_slice::<Value>(&line) {
                    Ok(v) if v.is_object() => Inbound::Message(v),
                    _ => Inbound::Broken(OutcomeCode::InvalidJson),
                }
            }
            Ok(None) => Inbound::Eof,
            Err(LineError::TooLong { .. }) => Inbound::Broken(OutcomeCode::LineTooLong),
            Err(LineError::Io(_)) => Inbound::Broken(OutcomeCode::ReadError),
        };
        let last = !matches!(item, Inbound::Message(_));
        if tx.send(item).await.is_err() || last {
            return;
        }
    }
}
