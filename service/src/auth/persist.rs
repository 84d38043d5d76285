//! Where AuthSessions survive restarts: the trait the authority writes
//! through, and an in-memory implementation for tests.

use std::fmt;
use std::sync::{Arc, Mutex};

use super::secret::random_hex;
use crate::domain::{AuthSession, Clock, NewAuthSession, SystemClock};

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
    fn issue(&self, session: NewAuthSession) -> Result<AuthSession, PersistError>;
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

/// Sessions kept only in memory (tests and fuzzing), timed by `clock` as the
/// store is by its own.
#[derive(Debug)]
pub struct MemorySessions {
    /// Issue and revocation times.
    clock: Arc<dyn Clock>,
    /// Every session issued, revoked or not.
    all: Mutex<Vec<AuthSession>>,
}

impl MemorySessions {
    /// Sessions timed by `clock`.
    pub fn new(clock: Arc<dyn Clock>) -> MemorySessions {
        MemorySessions {
            clock,
            all: Mutex::default(),
        }
    }
}

impl Default for MemorySessions {
    fn default() -> Self {
        MemorySessions::new(Arc::new(SystemClock))
    }
}

impl SessionPersistence for MemorySessions {
    fn by_credential(&self, key: &str) -> Result<Option<AuthSession>, PersistError> {
        let all = self.all.lock().expect("poisoned");
        Ok(all
            .iter()
            .filter(|s| s.credential == key && s.revoked_at.is_none())
            .max_by_key(|s| s.created_at)
            .cloned())
    }
    fn by_bearer_hash(&self, hash: &str) -> Result<Option<AuthSession>, PersistError> {
        let all = self.all.lock().expect("poisoned");
        Ok(all.iter().find(|s| s.bearer_sha256 == hash).cloned())
    }
    fn issue(&self, new: NewAuthSession) -> Result<AuthSession, PersistError> {
        let session = AuthSession {
            id: format!(
                "ses_{}",
                random_hex(16).map_err(|e| PersistError::other(e.to_string()))?
            ),
            credential: new.credential,
            principal: new.principal,
            application: new.application,
            scopes: new.scopes,
            bearer_sha256: new.bearer_sha256,
            created_at: self.clock.now_ms(),
            expires_at: new.expires_at,
            revoked_at: None,
        };
        self.all.lock().expect("poisoned").push(session.clone());
        Ok(session)
    }
    fn revoke(&self, id: &str) -> Result<AuthSession, PersistError> {
        let now = self.clock.now_ms();
        let mut all = self.all.lock().expect("poisoned");
        let s = all
            .iter_mut()
            .find(|s| s.id == id)
            .ok_or_else(|| PersistError::other(format!("no session {id}")))?;
        s.revoked_at.get_or_insert(now);
        Ok(s.clone())
    }
}
