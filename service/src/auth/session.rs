//! One AuthSession: the record the authority keeps and the persistence
//! backend stores. Its own file so `persist` and `sessions` both depend on
//! it without depending on each other.

use std::fmt;

use serde::{Deserialize, Serialize};

use lapis_protocol::{Scope, SessionView};

/// One authenticated session, as stored.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthSession {
    /// Public id (`ses_…`).
    pub id: String,
    /// Name of the config token that issued it.
    pub credential: String,
    /// Principal it acts for.
    pub principal: String,
    /// Application it belongs to.
    pub application: String,
    /// Granted scopes.
    pub scopes: Vec<Scope>,
    /// SHA-256 of the bearer; the bearer itself is never stored.
    pub bearer_hash: String,
    /// Issue time (Unix seconds).
    pub created_at: u64,
    /// Expiry (Unix seconds); at or after it the session fails closed.
    pub expires_at: u64,
    /// Revocation time, once revoked.
    pub revoked_at: Option<u64>,
}

impl fmt::Debug for AuthSession {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthSession")
            .field("id", &self.id)
            .field("credential", &self.credential)
            .field("principal", &self.principal)
            .field("application", &self.application)
            .field("expires_at", &self.expires_at)
            .field("revoked_at", &self.revoked_at)
            .finish_non_exhaustive()
    }
}

impl AuthSession {
    /// The client's view.
    pub fn view(&self) -> SessionView {
        SessionView {
            id: self.id.clone(),
            principal: self.principal.clone(),
            application: self.application.clone(),
            scopes: self.scopes.clone(),
        }
    }

    /// Whether the session holds `scope`.
    pub fn has(&self, scope: Scope) -> bool {
        self.scopes.contains(&scope)
    }

    pub(super) fn live_at(&self, now: u64) -> bool {
        self.revoked_at.is_none() && now < self.expires_at
    }
}
