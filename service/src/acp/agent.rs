//! A live agent: one process with its open ACP connection and the native
//! session bound on it, kept between the turns of one thread.
//!
//! What must stay true: a live agent is only handed out when its previous
//! turn ended with an outcome the agent reported (never after
//! `submission_unknown` or `interrupted`) and its connection is intact; what
//! it says while idle is never taken for a later turn's output; retiring it
//! always ends its whole process group.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::process::{AgentProcess, Stopped, TeardownLimits};
use super::session::{Conn, Inbound};

/// An agent process kept alive between turns.
#[derive(Debug)]
pub(crate) struct LiveAgent {
    /// The process group.
    pub(super) process: AgentProcess,
    /// Its stdio connection.
    pub(super) conn: Conn,
    /// The native session the last turn's prompt went to.
    pub(super) session_id: String,
    /// The session lifecycle `initialize` advertised (`session/close` is
    /// sent at retirement when it offers it).
    pub(super) caps: lapis_protocol::probe::SessionCapabilities,
    /// Provider name, for log lines.
    pub(super) provider: String,
    /// The tool ticket of this agent's MCP bridge (threads with tools):
    /// valid exactly as long as this agent lives.
    pub(crate) ticket: Option<crate::tools::TicketHold>,
}

/// Most messages an idle agent may send before it is retired.
const MAX_IDLE_MESSAGES: usize = 256;

/// Receives each message an idle agent sends, as it arrives.
pub(crate) type IdleObserver = Arc<dyn Fn(Value) + Send + Sync>;

/// An idle agent under watch ([`LiveAgent::watch`]).
#[derive(Debug)]
pub(crate) struct Watched {
    /// Ends the watch.
    stop: Option<oneshot::Sender<()>>,
    /// The watch; yields the agent back.
    task: JoinHandle<LiveAgent>,
}

impl Watched {
    /// Ends the watch and returns the agent (`None` only if the watch
    /// task died; its process group was then killed with it).
    pub(crate) async fn resume(mut self) -> Option<LiveAgent> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        (&mut self.task).await.ok()
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        // Never resumed (shutdown abort): the agent goes with its task, and
        // its process group is killed on drop.
        self.task.abort();
    }
}

/// What an idle agent said since its last turn.
#[derive(Debug, Default)]
pub(crate) struct Stale {
    /// Messages it sent while no turn ran (requests were refused).
    pub(crate) messages: Vec<Value>,
    /// It exited or its stream broke: it must be retired, not reused.
    pub(crate) gone: bool,
}

impl LiveAgent {
    /// The native session bound on this process.
    pub(crate) fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The agent session number of its bridge's tool ticket, if it has one.
    pub(crate) fn ticket_session(&self) -> Option<u64> {
        self.ticket.as_ref().map(crate::tools::TicketHold::session)
    }

    /// Drains what arrived while the agent was idle, without waiting.
    /// Requests (no turn can answer them) are refused with a JSON-RPC error.
    pub(crate) async fn take_stale(&mut self) -> Stale {
        let mut stale = Stale::default();
        if self.process.exited() || self.conn.broken {
            stale.gone = true;
        }
        while let Ok(item) = self.conn.inbox.try_recv() {
            self.idle_item(item, &mut stale).await;
        }
        stale
    }

    /// One message of an idle agent: a request is refused at once.
    async fn idle_item(&mut self, item: Inbound, stale: &mut Stale) {
        match item {
            Inbound::Message(msg) => {
                if let (Some(_), Some(id)) = (msg.get("method"), msg.get("id")) {
                    let refusal = json!({"jsonrpc": "2.0", "id": id,
                        "error": {"code": -32603, "message": "no turn is running"}});
                    if self.conn.write(&refusal).await.is_err() {
                        stale.gone = true;
                    }
                }
                stale.messages.push(msg);
            }
            Inbound::Eof | Inbound::Broken(_) => {
                self.conn.broken = true;
                stale.gone = true;
            }
        }
    }

    /// Keeps the idle agent answered while it waits for its thread's next
    /// turn: a request it sends is refused the moment it arrives (never a
    /// silent wait until the agent is next used), and every message is
    /// handed to `observe` at once (the engine journals it on the turn the
    /// agent last ran). An agent that sends more than
    /// [`MAX_IDLE_MESSAGES`] while idle is no longer watched and is marked
    /// gone (retired instead of reused). [`Watched::resume`] takes it back.
    pub(crate) fn watch(self, observe: IdleObserver) -> Watched {
        let (stop, mut stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let mut agent = self;
            let mut seen = 0usize;
            let mut gone = agent.conn.broken;
            loop {
                tokio::select! {
                    biased;
                    _ = &mut stopped => break,
                    item = agent.conn.inbox.recv(), if !gone => {
                        let mut stale = Stale::default();
                        agent.idle_item(item.unwrap_or(Inbound::Eof), &mut stale).await;
                        for msg in stale.messages {
                            observe(msg);
                        }
                        seen += 1;
                        gone = stale.gone || seen > MAX_IDLE_MESSAGES;
                        if gone {
                            agent.conn.broken = true;
                        }
                    }
                }
            }
            agent
        });
        Watched {
            stop: Some(stop),
            task,
        }
    }

    /// Ends the agent: `session/close` first when it offers it (answered
    /// within the exit grace, never waited for longer), then closes stdin,
    /// discards (and counts) what it still says until it exits or the
    /// grace passes, and ends the group.
    pub(crate) async fn shutdown(mut self, limits: TeardownLimits) -> Stopped {
        let deadline = Instant::now() + limits.exit_grace;
        let mut discarded = 0usize;
        if self.caps.close && !self.conn.broken {
            let id = self.conn.request_id();
            let close = json!({"jsonrpc": "2.0", "id": id, "method": "session/close",
                "params": {"sessionId": self.session_id}});
            if self.conn.write(&close).await.is_ok() {
                while let Ok(Some(Inbound::Message(msg))) =
                    tokio::time::timeout_at(deadline, self.conn.inbox.recv()).await
                {
                    if msg.get("method").is_none() && msg.get("id") == Some(&json!(id)) {
                        tracing::debug!(provider = %self.provider, ok = msg.get("result").is_some(), "session/close answered");
                        break;
                    }
                    discarded += 1;
                }
            }
        }
        self.conn.stdin = None;
        while let Ok(Some(Inbound::Message(_))) =
            tokio::time::timeout_at(deadline, self.conn.inbox.recv()).await
        {
            discarded += 1;
        }
        self.conn.reader.abort();
        if discarded > 0 {
            tracing::debug!(provider = %self.provider, discarded, "output of a retired agent discarded");
        }
        let remaining = deadline.saturating_duration_since(Instant::now());
        self.process
            .shutdown(TeardownLimits {
                exit_grace: remaining,
                term_grace: limits.term_grace,
            })
            .await
    }
}
