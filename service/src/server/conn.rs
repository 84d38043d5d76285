//! Per-connection state shared by the connection loop, the router and the
//! handlers. Its own file so those three depend on it without depending on
//! each other (the loop calls the router, the router calls the handlers).

use tokio::sync::mpsc;

use crate::auth::AuthSession;
use lapis_protocol::{NotificationOf, Response, encode};

use super::subscriptions::Subscriptions;

/// Frames waiting for the writer task; bounded so a client that stops
/// reading slows its own connection down instead of growing memory.
pub(super) const OUTBOX: usize = 256;

/// A cloneable way to send frames to this connection's peer.
#[derive(Debug, Clone)]
pub(super) struct Outbox(pub(super) mpsc::Sender<Vec<u8>>);

impl Outbox {
    /// Queues a response. Returns false when the connection is gone.
    pub(super) async fn respond(&self, response: &Response) -> bool {
        self.0.send(encode(response)).await.is_ok()
    }

    /// Queues a notification of `method`, serialized straight from
    /// `params` ([`NotificationOf`]). Returns false when the connection is
    /// gone.
    pub(super) async fn notify(&self, method: &str, params: &impl serde::Serialize) -> bool {
        let frame = encode(&NotificationOf::new(method, params));
        self.0.send(frame).await.is_ok()
    }
}

/// Per-connection state handed to method handlers.
#[derive(Debug)]
pub(super) struct Conn {
    /// The authenticated session, once `hello` succeeded.
    pub(crate) session: Option<AuthSession>,
    /// Where responses and notifications go.
    pub(crate) outbox: Outbox,
    /// This connection's journal subscriptions.
    pub(crate) subscriptions: Subscriptions,
    /// Connection number, for logs.
    pub(crate) number: u64,
    /// The MCP servers this connection registered (`mcp.register`);
    /// dropped with the connection, which withdraws them.
    pub(crate) mcp: Option<crate::engine::McpLease>,
    /// The ports this connection registered (`tools.register`,
    /// `context.register`); dropped with the connection, which revokes
    /// them all at once.
    pub(crate) tools: Option<crate::tools::PortLease>,
    /// The calling side of this connection (server → client requests),
    /// made by its first port registration; closed with the connection.
    pub(crate) peer: Option<crate::tools::Peer>,
    /// A bridge connection's ticket grant (`hello` with a ticket): only
    /// `tools.list` and `tools.call` run on it. Re-checked every request.
    pub(crate) bridge: Option<(String, crate::tools::Grant)>,
    /// Its slot under the connection cap (socket connections), which
    /// `hello` counts against the session's token quota.
    pub(crate) slot: Option<std::sync::Arc<super::admission::Slot>>,
}
