//! Where AuthSessions survive restarts: the trait the authority writes
//! through, and an in-memory implementation for tests.

use std::fmt;

use crate::domain::{AuthSession, IssuedSession, NewAuthSession};

#[cfg(any(test, feature = "test-support"))]
mod memory;
#[cfg(any(test, feature = "test-support"))]
pub use memory::MemorySessions;

/// Where sessions survive restarts (the store, or memory in tests).
///
/// Sessions are keyed by [`credential_key`](crate::domain::credential_key)
/// (token name and application), so one token used by two applications
/// yields two isolated sessions.
pub trait SessionPersistence: Send + Sync + fmt::Debug {
    /// The newest unrevoked session stored under `key`.
    fn by_credential(&self, key: &str) -> Result<Option<AuthSession>, PersistError>;
    /// The session with this bearer hash, revoked or not.
    fn by_bearer_hash(&self, hash: &str) -> Result<Option<AuthSession>, PersistError>;
    /// Stores a new session; the backend assigns its id and issue time.
    /// In the same write it keeps the session's token bounded to `keep`
    /// sessions (the new one among them): the token's expired sessions are
    /// removed, then its oldest (revoked ones first); the answer names the
    /// removed ones.
    fn issue(&self, session: NewAuthSession, keep: usize) -> Result<IssuedSession, PersistError>;
    /// Marks a session revoked (idempotent: the first revocation time
    /// stays) and returns it as stored.
    fn revoke(&self, id: &str) -> Result<AuthSession, PersistError>;
}

/// The persistence backend failed; the cause is logged, not shown.
#[derive(Debug, thiserror::Error)]
#[error("session storage failed: {0}")]
pub struct PersistError(pub String, pub Option<&'static str>);

impl PersistError {
    /// A failure of the backend's own (a bug, a closed store).
    #[cfg(any(test, feature = "test-support"))]
    pub fn other(cause: impl Into<String>) -> PersistError {
        PersistError(cause.into(), None)
    }

    /// The storage condition (`disk_full`, `read_only`, `io_error`) that
    /// refused the write, if that was the cause: the caller is told
    /// `storage_unavailable`, never `internal`.
    pub fn storage_condition(&self) -> Option<&'static str> {
        self.1
    }
}
