//! Client errors. None of them carries a credential.

use std::path::PathBuf;

use crate::{ErrorCode, RpcError};

/// Why a client call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Nothing answers on the socket (service not running).
    #[error("the controller is not reachable at {}", path.display())]
    Unavailable {
        /// The socket path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The connection closed. With `request_sent`, the request may or may
    /// not have been applied; the SDK never resends it.
    #[error("the connection to the controller was lost{}", if *request_sent { " after the request was sent; its outcome is unknown" } else { "" })]
    Disconnected {
        /// Whether the request had been written.
        request_sent: bool,
    },
    /// The server did not answer within the request deadline (wedged or
    /// overloaded). With `request_sent`, the request may have been applied.
    #[error("the controller did not answer within {} ms{}", after.as_millis(), if *request_sent { "; the request's outcome is unknown" } else { "" })]
    Unresponsive {
        /// Whether the request had been written.
        request_sent: bool,
        /// The deadline that passed.
        after: std::time::Duration,
    },
    /// The server answered with an error.
    #[error("{} [{}]", .0.message, .0.error_code().map(|c| c.as_str()).unwrap_or("unknown"))]
    Rpc(RpcError),
    /// The server sent something that is not the protocol.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// Parameters could not be encoded.
    #[error("cannot encode request parameters")]
    Encode(#[source] serde_json::Error),
    /// Socket I/O failed.
    #[error("socket I/O failed")]
    Io(#[source] std::io::Error),
    /// A read timed out (internal; surfaced as `Ok(None)` by notification reads).
    #[error("timed out waiting for the controller")]
    Timeout,
    /// The ssh transport to a remote controller failed: `code` is stable
    /// (`ssh_missing`, `ssh_unreachable`, `ssh_host_key`,
    /// `remote_binary_missing`, `remote_unavailable`, `remote_failed`),
    /// `message` says what to do.
    #[error("{message}")]
    Remote {
        /// The stable code.
        code: &'static str,
        /// What happened and the fix.
        message: String,
    },
    /// `reconnect` before any `hello`.
    #[error("not authenticated: say hello first")]
    NotAuthenticated,
    /// `reconnect` got a different session than before (the old one was
    /// revoked or expired and the token issued a new one).
    #[error("the session changed on reconnect")]
    SessionChanged,
    /// `reconnect` of a managed controller's client: its private socket
    /// cannot be dialled again (start a new [`super::ManagedController`]).
    #[error("a managed controller's connection cannot be reconnected")]
    NotReconnectable,
}

impl ClientError {
    /// The stable code: the server's for RPC errors, else a client-side one.
    pub fn code(&self) -> &'static str {
        match self {
            ClientError::Unavailable { .. } => "unavailable",
            ClientError::Disconnected { .. } => "disconnected",
            ClientError::Unresponsive { .. } => "unresponsive",
            ClientError::Rpc(e) => e.error_code().map(ErrorCode::as_str).unwrap_or("internal"),
            ClientError::Protocol(_) => "protocol_error",
            ClientError::Encode(_) | ClientError::Io(_) => "io_error",
            ClientError::Timeout => "timeout",
            ClientError::NotAuthenticated => "unauthenticated",
            ClientError::SessionChanged => "session_changed",
            ClientError::NotReconnectable => "not_reconnectable",
            ClientError::Remote { code, .. } => code,
        }
    }

    /// Whether the service could not be reached at all.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, ClientError::Unavailable { .. })
    }

    /// Whether the service is unusable right now: unreachable, gone
    /// mid-call, not answering in time, or refusing connections at its
    /// limit. Commands report these as exit class 3.
    pub fn is_service_unavailable(&self) -> bool {
        match self {
            ClientError::Unavailable { .. }
            | ClientError::Disconnected { .. }
            | ClientError::Unresponsive { .. } => true,
            ClientError::Remote { code, .. } => {
                matches!(*code, "ssh_unreachable" | "remote_unavailable")
            }
            ClientError::Rpc(e) => e.error_code() == Some(ErrorCode::LimitReached),
            _ => false,
        }
    }
}
