//! AuthSessions persisted in the controller's store.
//!
//! The authority is synchronous (it runs inside `hello` and before every
//! request, mostly from its in-memory cache); the store is async. The bridge
//! blocks the current worker with `block_in_place`, which needs the
//! multi-threaded runtime `serve` runs on. Store times are milliseconds, the
//! authority's seconds.

use tokio::runtime::Handle;

use crate::auth::{AuthSession, PersistError, SessionPersistence};
use crate::domain::{AuthSession as StoredSession, NewAuthSession};
use crate::store::Store;
use lapis_protocol::Scope;

/// [`SessionPersistence`] over the store.
#[derive(Debug, Clone)]
pub struct StoreSessions(pub Store);

fn block<F: std::future::Future>(f: F) -> F::Output {
    tokio::task::block_in_place(|| Handle::current().block_on(f))
}

fn err(e: impl std::fmt::Display) -> PersistError {
    PersistError(e.to_string())
}

fn from_stored(s: StoredSession) -> AuthSession {
    let credential = s
        .credential
        .split_once(':')
        .map(|(token, _)| token.to_owned())
        .unwrap_or_else(|| s.credential.clone());
    AuthSession {
        id: s.id,
        credential,
        principal: s.principal,
        application: s.application,
        scopes: s.scopes.iter().filter_map(|x| Scope::parse(x)).collect(),
        bearer_hash: s.bearer_sha256,
        created_at: (s.created_at / 1000).max(0) as u64,
        // A stored session without expiry is treated as expired: this
        // server always writes one, so its absence is not ours to trust.
        expires_at: s.expires_at.map(|e| (e / 1000).max(0) as u64).unwrap_or(0),
        revoked_at: s.revoked_at.map(|r| (r / 1000).max(0) as u64),
    }
}

impl SessionPersistence for StoreSessions {
    fn by_credential(&self, key: &str) -> Result<Option<AuthSession>, PersistError> {
        Ok(block(self.0.find_session_by_credential(key))
            .map_err(err)?
            .map(from_stored))
    }

    fn by_bearer_hash(&self, hash: &str) -> Result<Option<AuthSession>, PersistError> {
        Ok(block(self.0.find_session_by_bearer_hash(hash))
            .map_err(err)?
            .map(from_stored))
    }

    fn issue(&self, session: &AuthSession) -> Result<AuthSession, PersistError> {
        let input = NewAuthSession {
            credential: crate::auth::credential_key(&session.credential, &session.application),
            principal: session.principal.clone(),
            application: session.application.clone(),
            scopes: session
                .scopes
                .iter()
                .map(|s| s.as_str().to_owned())
                .collect(),
            bearer_sha256: session.bearer_hash.clone(),
            expires_at: Some(session.expires_at.saturating_mul(1000).min(i64::MAX as u64) as i64),
        };
        let stored = block(self.0.issue_session(input)).map_err(err)?;
        let mut issued = from_stored(stored);
        // Keep the authority's own clock for the times it compares.
        issued.created_at = session.created_at;
        issued.expires_at = session.expires_at;
        Ok(issued)
    }

    fn revoke(&self, id: &str, _at: u64) -> Result<(), PersistError> {
        block(self.0.revoke_session(id)).map_err(err)?;
        Ok(())
    }
}
