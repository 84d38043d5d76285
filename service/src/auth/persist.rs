//! Where AuthSessions survive restarts: the trait the authority writes
//! through, and an in-memory implementation for tests.

use std::fmt;
use std::sync::Mutex;

use super::session::AuthSession;

/// Where sessions survive restarts (the store, or memory in tests).
///
/// Sessions are keyed by [`credential_key`] (token name and application), so
/// one token used by two applications yields two isolated sessions.
pub trait SessionPersistence: Send + Sync + fmt::Debug {
    /// The newest unrevoked session stored under `key`.
    fn by_credential(&self, key: &str) -> Result<Option<AuthSession>, PersistError>;
    /// The session with this bearer hash, revoked or not.
    fn by_bearer_hash(&self, hash: &str) -> Result<Option<AuthSession>, PersistError>;
    /// Stores a new session; the backend may assign the id (returned).
    fn issue(&self, session: &AuthSession) -> Result<AuthSession, PersistError>;
    /// Marks a session revoked.
    fn revoke(&self, id: &str, at: u64) -> Result<(), PersistError>;
}

/// The persistence key of a session: `token:application`.
pub fn credential_key(token: &str, application: &str) -> String {
    format!("{token}:{application}")
}

/// The persistence backend failed; the cause is logged, not shown.
#[derive(Debug, thiserror::Error)]
#[error("session storage failed: {0}")]
pub struct PersistError(pub String);

/// Sessions kept only in memory (tests, and servers without a store).
#[derive(Debug, Default)]
pub struct MemorySessions(Mutex<Vec<AuthSession>>);

impl SessionPersistence for MemorySessions {
    fn by_credential(&self, key: &str) -> Result<Option<AuthSession>, PersistError> {
        let all = self.0.lock().expect("poisoned");
        Ok(all
            .iter()
            .filter(|s| {
                credential_key(&s.credential, &s.application) == key && s.revoked_at.is_none()
            })
            .max_by_key(|s| s.created_at)
            .cloned())
    }
    fn by_bearer_hash(&self, hash: &str) -> Result<Option<AuthSession>, PersistError> {
        let all = self.0.lock().expect("poisoned");
        Ok(all.iter().find(|s| s.bearer_hash == hash).cloned())
    }
    fn issue(&self, session: &AuthSession) -> Result<AuthSession, PersistError> {
        self.0.lock().expect("poisoned").push(session.clone());
        Ok(session.clone())
    }
    fn revoke(&self, id: &str, at: u64) -> Result<(), PersistError> {
        for s in self.0.lock().expect("poisoned").iter_mut() {
            if s.id == id && s.revoked_at.is_none() {
                s.revoked_at = Some(at);
            }
        }
        Ok(())
    }
}
