//! Sessions kept only in memory, for tests and fuzzing (compiled for tests
//! and `test-support` only).

use std::sync::{Arc, Mutex};

use super::{PersistError, SessionPersistence};
use crate::auth::secret::random_hex;
use crate::domain::{AuthSession, Clock, NewAuthSession, SystemClock};

/// Sessions kept only in memory (tests and fuzzing), timed by `clock` as the
/// store is by its own.
#[derive(Debug)]
pub struct MemorySessions {
    /// Issue and revocation times.
    clock: Arc<dyn Clock>,
    /// Every session issued, revoked or not.
    all: Mutex<Vec<AuthSession>>,
    /// A storage condition every `issue` fails with while set (a full disk
    /// as the store reports it).
    refuse_issue: Mutex<Option<&'static str>>,
}

impl MemorySessions {
    /// Sessions timed by `clock`.
    pub fn new(clock: Arc<dyn Clock>) -> MemorySessions {
        MemorySessions {
            clock,
            all: Mutex::default(),
            refuse_issue: Mutex::default(),
        }
    }

    /// Makes every later `issue` fail with the storage `condition` (as the
    /// store's does on a full disk), or work again with `None`.
    pub fn refuse_issue(&self, condition: Option<&'static str>) {
        *self.refuse_issue.lock().expect("poisoned") = condition;
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
        if let Some(condition) = *self.refuse_issue.lock().expect("poisoned") {
            return Err(PersistError(
                "the storage refused the write".into(),
                Some(condition),
            ));
        }
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
            read_only: None,
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
