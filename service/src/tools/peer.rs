//! Requests the controller sends *to* a client on that client's own
//! connection (`tools.invoke`, `capture.begin`, `capture.finish`), and the
//! routing of their responses back to the waiting caller.
//!
//! What must stay true: a request waits for exactly one of its response,
//! its deadline, the revocation of the endpoint it serves, or the closing of
//! the connection — never forever, and a late response after any of the
//! other three is dropped (it matches no pending id). Ids are strings
//! (`lapis-<n>`), so they never collide with the client's own numeric ids.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, oneshot, watch};

use lapis_protocol::callback::Callback;
use lapis_protocol::{Id, Request, Response, RpcError};

/// Why a request to a client did not produce its result.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PeerError {
    /// The connection closed (or was never writable) before an answer.
    #[error("the application's connection is gone")]
    Gone,
    /// The endpoint was revoked while the request waited.
    #[error("the tool endpoint was revoked")]
    Revoked,
    /// No answer within the deadline.
    #[error("the application did not answer within {} ms", .0.as_millis())]
    Deadline(Duration),
    /// The application answered with an error (its message is not shown:
    /// it is the application's text).
    #[error("the application answered with an error")]
    Refused(RpcError),
    /// The answer did not decode as the callback's result.
    #[error("the application's answer is malformed")]
    Malformed,
}

impl PeerError {
    /// Why a port's call failed, as the refusal a thread's turn reports
    /// (`context_unavailable`, `transcript_store_failed`, …): the port's
    /// side of it in a few words, never the application's text.
    pub(crate) fn why(&self) -> &'static str {
        match self {
            PeerError::Gone => "its connection is gone",
            PeerError::Revoked => "it was revoked while answering",
            PeerError::Deadline(_) => "it did not answer within its deadline",
            PeerError::Refused(_) => "it answered with an error",
            PeerError::Malformed => "its answer is malformed",
        }
    }
}

#[derive(Debug)]
struct Inner {
    /// The connection's writer queue.
    tx: mpsc::Sender<Vec<u8>>,
    /// Requests waiting for their response, by id number.
    pending: Mutex<HashMap<u64, oneshot::Sender<Response>>>,
    /// Next id number.
    next: AtomicU64,
    /// Set once when the connection closes.
    closed: watch::Sender<bool>,
}

/// The calling side of one client connection; cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct Peer(Arc<Inner>);

impl Peer {
    /// A peer writing into a connection's writer queue.
    pub(crate) fn new(tx: mpsc::Sender<Vec<u8>>) -> Peer {
        Peer(Arc::new(Inner {
            tx,
            pending: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
            closed: watch::Sender::new(false),
        }))
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<Response>>> {
        self.0.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sends the callback `C` and waits for its result (decoded as
    /// `C::Result`), the deadline, `revoked` turning true, or the
    /// connection closing: the one way the controller calls a client.
    pub(crate) async fn call<C: Callback>(
        &self,
        params: &C::Params,
        deadline: Duration,
        revoked: watch::Receiver<bool>,
    ) -> Result<C::Result, PeerError> {
        self.request(C::METHOD, params, deadline, revoked).await
    }

    /// Sends `method` and waits for its result, the deadline, `revoked`
    /// turning true, or the connection closing.
    async fn request<P: Serialize, R: DeserializeOwned>(
        &self,
        method: &str,
        params: &P,
        deadline: Duration,
        mut revoked: watch::Receiver<bool>,
    ) -> Result<R, PeerError> {
        let mut closed = self.0.closed.subscribe();
        if *closed.borrow() {
            return Err(PeerError::Gone);
        }
        let n = self.0.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending().insert(n, tx);
        let _forget = Forget(self, n);
        let frame = Request {
            id: Id::String(format!("lapis-{n}")),
            method: method.to_owned(),
            params: serde_json::to_value(params).map_err(|_| PeerError::Malformed)?,
        }
        .to_frame();
        if self.0.tx.send(frame).await.is_err() {
            return Err(PeerError::Gone);
        }
        // A revocation signal whose sender is gone without flipping never
        // revokes (the registry flips it before dropping it).
        let revocation = async move {
            if revoked.wait_for(|r| *r).await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        let response = tokio::select! {
            r = rx => r.map_err(|_| PeerError::Gone)?,
            _ = tokio::time::sleep(deadline) => return Err(PeerError::Deadline(deadline)),
            _ = revocation => return Err(PeerError::Revoked),
            _ = closed.wait_for(|c| *c) => return Err(PeerError::Gone),
        };
        if let Some(e) = response.error {
            return Err(PeerError::Refused(e));
        }
        serde_json::from_value(response.result.unwrap_or_default())
            .map_err(|_| PeerError::Malformed)
    }

    /// Hands a response frame read from the connection to its waiting
    /// request. `false` when it answers nothing pending (late or unknown).
    pub(crate) fn deliver(&self, response: Response) -> bool {
        let Some(Id::String(id)) = &response.id else {
            return false;
        };
        let Some(n) = id.strip_prefix("lapis-").and_then(|n| n.parse().ok()) else {
            return false;
        };
        match self.pending().remove(&n) {
            Some(tx) => tx.send(response).is_ok(),
            None => false,
        }
    }

    /// Whether `other` is this very connection's calling side.
    pub(crate) fn same(&self, other: &Peer) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The connection closed: every waiting request fails `Gone` now.
    pub(crate) fn close(&self) {
        self.0.closed.send_replace(true);
        self.pending().clear();
    }
}

/// Removes a request from `pending` however its wait ends.
struct Forget<'a>(&'a Peer, u64);

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.0.pending().remove(&self.1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn never() -> watch::Receiver<bool> {
        watch::Sender::new(false).subscribe()
    }

    #[tokio::test]
    async fn a_response_reaches_its_request_and_a_late_one_nothing() {
        let (tx, mut rx) = mpsc::channel(4);
        let peer = Peer::new(tx);
        let p2 = peer.clone();
        let call = tokio::spawn(async move {
            p2.request::<_, serde_json::Value>(
                "tools.invoke",
                &serde_json::json!({}),
                Duration::from_secs(5),
                never(),
            )
            .await
        });
        let frame = rx.recv().await.unwrap();
        let sent: serde_json::Value = serde_json::from_slice(&frame).unwrap();
        assert_eq!(sent["method"], "tools.invoke");
        let id: Id = serde_json::from_value(sent["id"].clone()).unwrap();
        assert!(peer.deliver(Response::ok(id.clone(), serde_json::json!({"ok": 1}))));
        assert_eq!(call.await.unwrap().unwrap()["ok"], 1);
        assert!(!peer.deliver(Response::ok(id, serde_json::json!({}))));
        assert!(!peer.deliver(Response::ok(Id::Number(1), serde_json::json!({}))));
    }

    #[tokio::test(start_paused = true)]
    async fn deadline_revocation_and_close_each_end_the_wait() {
        let (tx, _rx) = mpsc::channel(4);
        let peer = Peer::new(tx);
        let late = peer
            .request::<_, serde_json::Value>("x", &(), Duration::from_secs(1), never())
            .await;
        assert!(matches!(late, Err(PeerError::Deadline(_))));
        let revoke = watch::Sender::new(false);
        let rx = revoke.subscribe();
        let p = peer.clone();
        let call = tokio::spawn(async move {
            p.request::<_, serde_json::Value>("x", &(), Duration::from_secs(60), rx)
                .await
        });
        tokio::task::yield_now().await;
        revoke.send_replace(true);
        assert!(matches!(call.await.unwrap(), Err(PeerError::Revoked)));
        let p = peer.clone();
        let call = tokio::spawn(async move {
            p.request::<_, serde_json::Value>("x", &(), Duration::from_secs(60), never())
                .await
        });
        tokio::task::yield_now().await;
        peer.close();
        assert!(matches!(call.await.unwrap(), Err(PeerError::Gone)));
        assert!(peer.pending().is_empty());
    }
}
