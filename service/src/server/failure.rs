//! The one mapping of unexpected failures to the wire's `internal` error.
//! Its own file so the router, the handlers and the controller share it
//! without importing each other.

use lapis_protocol::{ErrorCode, RpcError};

/// Maps an unexpected failure to `internal`, logging the cause (which must
/// not hold a secret).
pub(super) fn internal(e: impl std::fmt::Display) -> RpcError {
    tracing::error!(error = %e, "internal error");
    RpcError::new(ErrorCode::Internal, "internal error; see the server log")
}
