//! Pending permission interactions: the live side of `permissions.respond`.
//!
//! The durable record of a request is its `permission_requested` journal
//! event; the broker holds only the channel that delivers the answer to the
//! waiting runner. An entry exists exactly while the runner waits: when the
//! deadline passes, the turn is cancelled or it ends, the runner drops its
//! wait and the entry disappears, so a late answer finds nothing to move.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use crate::acp::{Invocation, PermissionAnswer, PermissionOption, PermissionRequest};

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
    tx: oneshot::Sender<PermissionAnswer>,
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
    ) -> (oneshot::Receiver<PermissionAnswer>, Registration) {
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
        self.lock().insert(key.clone(), Entry { info, tx });
        let reg = Registration {
            broker: self.clone(),
            key,
        };
        (rx, reg)
    }

    /// Pending requests, optionally of one turn, in no particular order.
    pub(crate) fn pending(&self, turn_id: Option<&str>) -> Vec<PendingPermission> {
        self.lock()
            .values()
            .filter(|e| turn_id.is_none_or(|t| e.info.turn_id == t))
            .map(|e| e.info.clone())
            .collect()
    }

    /// Delivers an answer. A selected option must be one of the offered ids
    /// exactly; otherwise the request stays pending and the call fails.
    pub(crate) fn answer(
        &self,
        turn_id: &str,
        request_id: &str,
        answer: PermissionAnswer,
    ) -> Result<(), AnswerError> {
        let key = (turn_id.to_string(), request_id.to_string());
        let mut map = self.lock();
        let Some(entry) = map.get(&key) else {
            return Err(AnswerError::NotPending {
                turn_id: turn_id.to_string(),
                request_id: request_id.to_string(),
            });
        };
        if let PermissionAnswer::Selected { option_id } = &answer
            && !entry.info.options.iter().any(|o| &o.option_id == option_id)
        {
            return Err(AnswerError::NotOffered {
                option_id: option_id.chars().take(128).collect(),
            });
        }
        let entry = map.remove(&key).expect("entry checked above");
        // The runner may have stopped waiting this instant; then the answer
        // is moot and the request was resolved another way.
        entry.tx.send(answer).map_err(|_| AnswerError::NotPending {
            turn_id: turn_id.to_string(),
            request_id: request_id.to_string(),
        })
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
                option_id: "yes".into(),
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
        assert_eq!(broker.pending(Some("t1")).len(), 1);
        let sel = |id: &str| PermissionAnswer::Selected {
            option_id: id.into(),
        };
        assert!(matches!(
            broker.answer("t1", "r1", sel("no")),
            Err(AnswerError::NotOffered { .. })
        ));
        broker.answer("t1", "r1", sel("yes")).unwrap();
        assert_eq!(rx.try_recv().unwrap(), sel("yes"));
        assert!(matches!(
            broker.answer("t1", "r1", sel("yes")),
            Err(AnswerError::NotPending { .. })
        ));
        drop(reg);
        assert!(broker.pending(None).is_empty());
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
