//! Pending permission interactions: the live side of `permissions.respond`.
//!
//! The durable record of a request is its `permission_requested` journal
//! event and its row in the store's inbox; the broker holds only the
//! channel that delivers the answer (and who gave it) to the waiting
//! runner. An entry exists exactly while the runner waits: when the
//! deadline passes, the turn is cancelled or it ends, the runner drops its
//! wait and the entry disappears, so a late answer finds nothing to move.
//!
//! The runner registers its wait *before* the request is journaled (so an
//! answer from a client that read the event always finds it), and
//! [`PermissionBroker::publish`]es it once the request is durable:
//! `permissions.list` never shows a request the journal does not hold yet.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use crate::acp::{Invocation, PermissionAnswer, PermissionOption, PermissionRequest};
use lapis_protocol::Answerer;

/// What reaches the waiting runner: the answer, and who gave it.
pub(crate) type Delivery = (PermissionAnswer, Option<Answerer>);

/// One permission request waiting for a client's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingPermission {
    /// The turn that asked.
    pub(crate) turn_id: String,
    /// The request's id within the turn.
    pub request_id: String,
    /// The turn's thread (for authorization by the caller).
    pub thread_id: String,
    /// The only acceptable option ids.
    pub(crate) options: Vec<PermissionOption>,
    /// The tool call the request is about.
    pub(crate) invocation: Invocation,
    /// When the runner stops waiting (`permissions.list` shows it).
    pub(crate) deadline: std::time::SystemTime,
}

/// Why an answer was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AnswerError {
    /// Nothing is waiting under that id (never asked, already answered,
    /// expired, or the turn ended).
    #[error("no pending permission request `{request_id}` for turn `{turn_id}`")]
    NotPending {
        /// The turn named by the caller.
        turn_id: String,
        /// The request named by the caller.
        request_id: String,
    },
    /// The option id was not one of those offered.
    #[error("option `{option_id}` was not offered for this request")]
    NotOffered {
        /// The refused option id.
        option_id: String,
    },
}

struct Entry {
    /// Shown to callers.
    info: PendingPermission,
    /// Delivers the answer to the runner.
    tx: oneshot::Sender<Delivery>,
    /// A checked answer is on its way (see [`Taken`]): hidden from
    /// `pending`, and every other answer is refused as not pending.
    taken: bool,
    /// The request is durable (journaled): shown by `pending`.
    published: bool,
}

/// The registry of pending interactions. Cheap to clone.
#[derive(Clone, Default)]
pub(crate) struct PermissionBroker {
    /// Keyed by (turn id, request id).
    inner: Arc<Mutex<HashMap<(String, String), Entry>>>,
}

impl std::fmt::Debug for PermissionBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PermissionBroker")
            .field("pending", &self.lock().len())
            .finish()
    }
}

/// Removes its entry when the runner stops waiting.
#[derive(Debug)]
pub(super) struct Registration {
    /// Owner registry.
    broker: PermissionBroker,
    /// Entry key.
    key: (String, String),
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.broker.lock().remove(&self.key);
    }
}

impl PermissionBroker {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Entry>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a request; the receiver yields the client's answer.
    pub(super) fn register(
        &self,
        turn_id: &str,
        thread_id: &str,
        request: &PermissionRequest,
    ) -> (oneshot::Receiver<Delivery>, Registration) {
        let (tx, rx) = oneshot::channel();
        let key = (turn_id.to_string(), request.request_id.clone());
        let info = PendingPermission {
            turn_id: turn_id.to_string(),
            request_id: request.request_id.clone(),
            thread_id: thread_id.to_string(),
            options: request.options.clone(),
            invocation: request.invocation.clone(),
            deadline: request.deadline,
        };
        self.lock().insert(
            key.clone(),
            Entry {
                info,
                tx,
                taken: false,
                published: false,
            },
        );
        let reg = Registration {
            broker: self.clone(),
            key,
        };
        (rx, reg)
    }

    /// Marks a registered request durable: [`pending`](Self::pending)
    /// shows it from now on (an unknown key is ignored: its wait ended).
    pub(super) fn publish(&self, turn_id: &str, request_id: &str) {
        let key = (turn_id.to_string(), request_id.to_string());
        if let Some(entry) = self.lock().get_mut(&key) {
            entry.published = true;
        }
    }

    /// Published pending requests, optionally of one turn, in no particular
    /// order.
    pub(crate) fn pending(&self, turn_id: Option<&str>) -> Vec<PendingPermission> {
        self.lock()
            .values()
            .filter(|e| e.published && !e.taken && turn_id.is_none_or(|t| e.info.turn_id == t))
            .map(|e| e.info.clone())
            .collect()
    }

    /// Delivers an answer at once ([`take`](Self::take) then
    /// [`Taken::deliver`]).
    #[cfg(test)]
    fn answer(
        &self,
        turn_id: &str,
        request_id: &str,
        answer: PermissionAnswer,
    ) -> Result<(), AnswerError> {
        self.take(turn_id, request_id, answer, None)?.deliver()
    }

    /// Checks an answer and reserves the request for it without delivering
    /// it yet, so the caller can make its receipt durable first. A selected
    /// option must be one of the offered ids exactly; otherwise the request
    /// stays pending and the call fails. While reserved, every other answer
    /// is refused as not pending; dropping the [`Taken`] undelivered
    /// releases the request again.
    pub(crate) fn take(
        &self,
        turn_id: &str,
        request_id: &str,
        answer: PermissionAnswer,
        by: Option<Answerer>,
    ) -> Result<Taken, AnswerError> {
        let key = (turn_id.to_string(), request_id.to_string());
        let mut map = self.lock();
        let not_pending = || AnswerError::NotPending {
            turn_id: turn_id.to_string(),
            request_id: request_id.to_string(),
        };
        let Some(entry) = map.get_mut(&key).filter(|e| !e.taken) else {
            return Err(not_pending());
        };
        if let PermissionAnswer::Selected { option_id } = &answer
            && !entry.info.options.iter().any(|o| &o.id == option_id)
        {
            return Err(AnswerError::NotOffered {
                option_id: option_id.chars().take(128).collect(),
            });
        }
        entry.taken = true;
        Ok(Taken {
            broker: self.clone(),
            key,
            answer: Some((answer, by)),
        })
    }
}

/// A checked answer holding its request (see [`PermissionBroker::take`]).
#[derive(Debug)]
pub(crate) struct Taken {
    /// Owner registry.
    broker: PermissionBroker,
    /// The request's key.
    key: (String, String),
    /// The answer and who gave it; `None` once delivered.
    answer: Option<Delivery>,
}

impl Taken {
    /// Hands the answer to the waiting runner. Fails as not pending when the
    /// runner stopped waiting meanwhile (deadline, cancel, end of turn): the
    /// request was then resolved another way, as its journal says.
    pub(crate) fn deliver(mut self) -> Result<(), AnswerError> {
        let answer = self.answer.take().expect("delivered once");
        let entry = self.broker.lock().remove(&self.key);
        let not_pending = || AnswerError::NotPending {
            turn_id: self.key.0.clone(),
            request_id: self.key.1.clone(),
        };
        match entry {
            Some(entry) => entry.tx.send(answer).map_err(|_| not_pending()),
            None => Err(not_pending()),
        }
    }
}

impl Drop for Taken {
    fn drop(&mut self) {
        if self.answer.is_some()
            && let Some(entry) = self.broker.lock().get_mut(&self.key)
        {
            entry.taken = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acp::Invocation;

    fn request() -> PermissionRequest {
        PermissionRequest {
            request_id: "r1".into(),
            invocation: Invocation::default(),
            options: vec![PermissionOption {
                id: "yes".into(),
                name: "Yes".into(),
                kind: "allow_once".into(),
            }],
            deadline: std::time::SystemTime::UNIX_EPOCH,
        }
    }

    #[test]
    fn only_offered_options_are_accepted_and_only_once() {
        let broker = PermissionBroker::default();
        let (mut rx, reg) = broker.register("t1", "th1", &request());
        broker.publish("t1", "r1");
        assert_eq!(broker.pending(Some("t1")).len(), 1);
        let sel = |id: &str| PermissionAnswer::Selected {
            option_id: id.into(),
        };
        assert!(matches!(
            broker.answer("t1", "r1", sel("no")),
            Err(AnswerError::NotOffered { .. })
        ));
        broker.answer("t1", "r1", sel("yes")).unwrap();
        assert_eq!(rx.try_recv().unwrap(), (sel("yes"), None));
        assert!(matches!(
            broker.answer("t1", "r1", sel("yes")),
            Err(AnswerError::NotPending { .. })
        ));
        drop(reg);
        assert!(broker.pending(None).is_empty());
    }

    /// The receipt of `permissions.respond` is written between `take` and
    /// `deliver`: meanwhile the request is reserved, an undelivered answer
    /// releases it, and a runner that stopped waiting refuses delivery.
    #[test]
    fn a_taken_answer_reserves_the_request_until_delivered_or_dropped() {
        let broker = PermissionBroker::default();
        let (mut rx, reg) = broker.register("t1", "th1", &request());
        broker.publish("t1", "r1");
        let yes = PermissionAnswer::Selected {
            option_id: "yes".into(),
        };
        let taken = broker.take("t1", "r1", yes.clone(), None).unwrap();
        assert!(broker.pending(None).is_empty());
        assert!(matches!(
            broker.take("t1", "r1", yes.clone(), None),
            Err(AnswerError::NotPending { .. })
        ));
        assert!(rx.try_recv().is_err(), "nothing delivered before `deliver`");
        drop(taken);
        assert_eq!(broker.pending(None).len(), 1, "released again");
        let phone = Answerer {
            principal: "owner".into(),
            application: "phone".into(),
        };
        broker
            .take("t1", "r1", yes.clone(), Some(phone.clone()))
            .unwrap()
            .deliver()
            .unwrap();
        assert_eq!(rx.try_recv().unwrap(), (yes.clone(), Some(phone)));
        drop(reg);

        let (_rx, reg) = broker.register("t1", "r2-thread", &request());
        let taken = broker.take("t1", "r1", yes, None).unwrap();
        drop(reg);
        assert!(matches!(
            taken.deliver(),
            Err(AnswerError::NotPending { .. })
        ));
        assert!(broker.pending(None).is_empty());
    }

    /// A wait registered before its request is journaled: answerable at
    /// once (a client that read the event finds it), listed only once
    /// published (durable).
    #[test]
    fn an_unpublished_wait_is_answerable_but_not_listed() {
        let broker = PermissionBroker::default();
        let (mut rx, _reg) = broker.register("t1", "th1", &request());
        assert!(broker.pending(None).is_empty());
        broker.publish("t1", "r1");
        assert_eq!(broker.pending(None).len(), 1);
        let (mut rx2, _reg2) = broker.register("t2", "th1", &request());
        assert_eq!(broker.pending(None).len(), 1);
        broker
            .answer("t2", "r1", PermissionAnswer::Cancelled)
            .unwrap();
        assert_eq!(rx2.try_recv().unwrap(), (PermissionAnswer::Cancelled, None));
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn a_dropped_wait_leaves_nothing_to_answer() {
        let broker = PermissionBroker::default();
        let (_rx, reg) = broker.register("t1", "th1", &request());
        drop(reg);
        assert!(matches!(
            broker.answer("t1", "r1", PermissionAnswer::Cancelled),
            Err(AnswerError::NotPending { .. })
        ));
    }
}
