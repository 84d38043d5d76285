//! Serving an application's ports until one turn settles: the loop every
//! application that submits a turn binding its own tools (or memory, …)
//! needs, written once. [`Client::serve_tools`] serves one callback and returns; a
//! [`JournalFollower`](super::JournalFollower) waits for events and only
//! queues callbacks. This answers callbacks *and* watches the turn's
//! journal on the one connection, so neither waits on the other.
//!
//! What must stay true: the turn's end is never missed (the subscription
//! starts before the turn's state is read, so an end committed in between
//! is seen by one or the other); every callback read is answered; and the
//! connection is left as it was found: the subscription is ended and its
//! late events dropped, other notifications stay queued for
//! [`Client::next_notification`].

use std::time::{Duration, Instant};

use crate::call;
use crate::notifications::JournalNotice;
use crate::params::{JournalSubscribe, JournalUnsubscribe, UnsubscribeResult};
use crate::{Incoming, Payload, Turn, TurnState};

use super::ports::PortHandlers;
use super::serve::ToolHandler;
use super::{Client, ClientError};

/// Settled for [`Client::serve_until_settled`]: finished
/// (`completed`, `failed`, `cancelled`) or fenced (`submission_unknown`,
/// `interrupted`: its owner resolves it, nothing more will run).
fn settled(state: TurnState) -> bool {
    state.is_terminal() || state.is_fenced()
}

impl Client {
    /// Serves `handler` to the controller's tool callbacks until turn
    /// `turn_id` settles (finished, or fenced), or `timeout` passes
    /// (`None`: no bound). Returns the turn as it then stands: check
    /// `turn.state` (still active means the timeout passed first).
    ///
    /// Use it after `turns_submit` on a thread that binds this
    /// connection's endpoints; the turn may be another connection's (any
    /// turn this session can read). Callbacks of other turns that arrive
    /// meanwhile are served too: one connection has one handler.
    pub fn serve_tools_until_settled(
        &mut self,
        handler: &mut impl ToolHandler,
        turn_id: &str,
        timeout: Option<Duration>,
    ) -> Result<Turn, ClientError> {
        self.serve_until_settled(&mut PortHandlers::new().tools(handler), turn_id, timeout)
    }

    /// [`Client::serve_tools_until_settled`] for every port kind: each
    /// callback is answered by its kind's handler in `ports` (tools and a
    /// memory port on one connection, as a managed controller's
    /// application has them).
    pub fn serve_until_settled(
        &mut self,
        ports: &mut PortHandlers<'_>,
        turn_id: &str,
        timeout: Option<Duration>,
    ) -> Result<Turn, ClientError> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let thread = self.turns_get(turn_id)?.thread_id;
        let mut subscription = self.subscribe_live(&thread)?;
        let mut turn = self.turns_get(turn_id)?;
        while !settled(turn.state) {
            if let Some(request) = self.callbacks.pop_front() {
                self.reply(&ports.answer(&request))?;
                continue;
            }
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if left.is_some_and(|l| l.is_zero()) {
                break;
            }
            let notification = match self.read_incoming(left) {
                Ok(Some(Incoming::Request(r))) => {
                    self.reply(&ports.answer(&r))?;
                    continue;
                }
                Ok(Some(Incoming::Notification(n))) => n,
                Ok(Some(Incoming::Response(_))) => {
                    return Err(ClientError::Protocol("unsolicited response".into()));
                }
                Ok(None) => {
                    return Err(ClientError::Disconnected {
                        request_sent: false,
                    });
                }
                Err(ClientError::Timeout) => break,
                Err(e) => return Err(e),
            };
            match JournalNotice::parse(&notification) {
                Some(JournalNotice::Event(p)) if p.subscription == subscription => {
                    let ends = p.event.turn_id.as_deref() == Some(turn_id)
                        && matches!(p.event.body(), Some(Payload::TurnState(c)) if settled(c.to));
                    if ends {
                        turn = self.turns_get(turn_id)?;
                    }
                }
                // The subscription ended (it fell behind, or the server
                // closed it): a new one, then the state read again, keeps
                // the rule above.
                Some(JournalNotice::Lagged(p)) if p.subscription == subscription => {
                    subscription = self.subscribe_live(&thread)?;
                    turn = self.turns_get(turn_id)?;
                }
                Some(JournalNotice::Ended(p)) if p.subscription == subscription => {
                    subscription = self.subscribe_live(&thread)?;
                    turn = self.turns_get(turn_id)?;
                }
                _ => self.queued.push_back(notification),
            }
        }
        let _: UnsubscribeResult =
            self.request::<call::JournalUnsubscribe>(&JournalUnsubscribe {
                subscription: subscription.clone(),
            })?;
        self.queued.retain(|n| match JournalNotice::parse(n) {
            Some(JournalNotice::Event(p)) => p.subscription != subscription,
            Some(JournalNotice::Lagged(p)) => p.subscription != subscription,
            Some(JournalNotice::Ended(p)) => p.subscription != subscription,
            None => true,
        });
        Ok(turn)
    }

    /// A live-only subscription to `thread` (no replay: the state read
    /// after it covers the past).
    fn subscribe_live(&mut self, thread: &str) -> Result<String, ClientError> {
        self.journal_subscribe_with(&JournalSubscribe {
            thread_id: Some(thread.to_owned()),
            after: None,
            attention: false,
            present: false,
        })
    }
}
