//! A live agent: one process with its open ACP connection and the native
//! session bound on it, kept between the turns of one thread.
//!
//! What must stay true: a live agent is only handed out when its previous
//! turn ended with an outcome the agent reported (never after
//! `submission_unknown` or `interrupted`) and its connection is intact; what
//! it says while idle is never taken for a later turn's output; retiring it
//! always ends its whole process group.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::AbortHandle;
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
pub(crate) struct Watched {
    /// Where the agent is while watched.
    slot: Arc<Mutex<Slot>>,
    /// The watch task (ended when the agent is taken back or dropped).
    task: AbortHandle,
}

/// Where a watched agent is: polled in place by its watch, so taking it
/// back needs no answer from the watch task (a stop message and the
/// task's end were two wake-ups on every warm turn's path before its
/// boundary).
enum Slot {
    /// Waiting for its next message: the watch polls its inbox in place.
    Idle(Box<LiveAgent>),
    /// The watch is answering a message it took; the sender, once set,
    /// takes the agent when it is done.
    Handling(Option<oneshot::Sender<LiveAgent>>),
    /// Taken back.
    Resumed,
}

impl std::fmt::Debug for Watched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &*lock(&self.slot) {
            Slot::Idle(_) => "idle",
            Slot::Handling(_) => "handling",
            Slot::Resumed => "resumed",
        };
        f.debug_struct("Watched")
            .field("state", &state)
            .finish_non_exhaustive()
    }
}

fn lock(slot: &Mutex<Slot>) -> std::sync::MutexGuard<'_, Slot> {
    slot.lock().unwrap_or_else(|p| p.into_inner())
}

impl Watched {
    /// Ends the watch and returns the agent: at once, unless the watch is
    /// answering a message the agent sent (then when it is done). `None`
    /// only if the watch task died; its process group was then killed
    /// with it.
    pub(crate) async fn resume(self) -> Option<LiveAgent> {
        let done = {
            let mut slot = lock(&self.slot);
            match std::mem::replace(&mut *slot, Slot::Resumed) {
                // The watch task is ended on drop (it is parked on the
                // inbox, whose waker the next turn's read replaces).
                Slot::Idle(agent) => return Some(*agent),
                Slot::Handling(_) => {
                    let (tx, rx) = oneshot::channel();
                    *slot = Slot::Handling(Some(tx));
                    rx
                }
                Slot::Resumed => return None,
            }
        };
        done.await.ok()
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        // Taken back, or never (shutdown abort): the watch ends; an agent
        // still in the slot or in the task goes with them, and its process
        // group is killed on drop.
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
        let gone = self.conn.broken;
        let slot = Arc::new(Mutex::new(Slot::Idle(Box::new(self))));
        let task = tokio::spawn(watch_idle(Arc::clone(&slot), observe, gone)).abort_handle();
        Watched { slot, task }
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

/// The watch of an idle agent (see [`LiveAgent::watch`]): takes each
/// message out of the agent's inbox in place, together with the agent
/// (one lock, so a message is never taken once the agent was resumed),
/// answers it, and puts the agent back or hands it to a resume waiting.
async fn watch_idle(slot: Arc<Mutex<Slot>>, observe: IdleObserver, mut gone: bool) {
    let mut seen = 0usize;
    while !gone {
        let next = std::future::poll_fn(|cx| {
            let mut s = lock(&slot);
            let item = match &mut *s {
                Slot::Idle(agent) => std::task::ready!(agent.conn.inbox.poll_recv(cx)),
                Slot::Handling(_) | Slot::Resumed => return std::task::Poll::Ready(None),
            };
            match std::mem::replace(&mut *s, Slot::Handling(None)) {
                Slot::Idle(agent) => {
                    std::task::Poll::Ready(Some((*agent, item.unwrap_or(Inbound::Eof))))
                }
                other => {
                    *s = other;
                    std::task::Poll::Ready(None)
                }
            }
        })
        .await;
        let Some((mut agent, item)) = next else {
            return;
        };
        let mut stale = Stale::default();
        agent.idle_item(item, &mut stale).await;
        for msg in stale.messages {
            observe(msg);
        }
        seen += 1;
        gone = stale.gone || seen > MAX_IDLE_MESSAGES;
        if gone {
            agent.conn.broken = true;
        }
        let mut s = lock(&slot);
        match std::mem::replace(&mut *s, Slot::Resumed) {
            Slot::Handling(Some(resumed)) => {
                // A resume dropped meanwhile drops the agent with it.
                let _ = resumed.send(agent);
                return;
            }
            Slot::Handling(None) | Slot::Idle(_) | Slot::Resumed => {
                *s = Slot::Idle(Box::new(agent));
            }
        }
    }
}
