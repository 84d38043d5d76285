//! Sessions kept only in memory, for tests and fuzzing (compiled for tests
//! and `test-support` only).

use std::sync::{Arc, Mutex};

use super::{PersistError, SessionPersistence};
use crate::auth::secret::random_hex;
use crate::domain::{AuthSession, Clock, IssuedSession, NewAuthSession, SystemClock};

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
    fn issue(&self, new: NewAuthSession, keep: usize) -> Result<IssuedSession, PersistError> {
        if let Some(condition) = *self.refuse_issue.lock().expect("poisoned") {
            return Err(PersistError(
                "the storage refused the write".into(),
                Some(condition),
            ));
        }
        let now = self.clock.now_ms();
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
            created_at: now,
            expires_at: new.expires_at,
            revoked_at: None,
            read_only: None,
        };
        // The store's bound (`store::sessions`): the token's expired
        // sessions go, then its oldest past `keep - 1`, revoked ones first.
        let token = |credential: &str| {
            credential
                .split_once(':')
                .map_or(credential.to_owned(), |(t, _)| t.to_owned())
        };
        let mine = token(&session.credential);
        let mut all = self.all.lock().expect("poisoned");
        let mut removed = Vec::new();
        all.retain(|s| {
            let gone = token(&s.credential) == mine && !s.unexpired_at(now);
            if gone {
                removed.push(s.id.clone());
            }
            !gone
        });
        let mut same: Vec<&AuthSession> = all
            .iter()
            .filter(|s| token(&s.credential) == mine)
            .collect();
        same.sort_by_key(|s| {
            (
                std::cmp::Reverse(s.revoked_at.is_none()),
                std::cmp::Reverse(s.created_at),
                std::cmp::Reverse(s.id.clone()),
            )
        });
        let evicted: Vec<String> = same
            .iter()
            .skip(keep.max(1) - 1)
            .map(|s| s.id.clone())
            .collect();
        all.retain(|s| !evicted.contains(&s.id));
        removed.extend(evicted);
        all.push(session.clone());
        Ok(IssuedSession { session, removed })
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
