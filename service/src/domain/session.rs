//! The one AuthSession: the record the authority issues, checks and revokes
//! and the store persists, with no translation between them.
//!
//! What must stay true: times are milliseconds from the injected
//! [`Clock`](super::Clock); `credential` is the persistence key
//! ([`credential_key`]: token name and application), so one token used by two
//! applications yields two isolated sessions; only the bearer's hash is kept.

use std::fmt;

use lapis_protocol::{Scope, SessionView};

/// The persistence key of a session: `token:application`, where `token` is
/// the token's identity (`name:fingerprint`, `auth::secret::token_identity`;
/// sessions stored before identities have the bare name). The first `:`
/// ends the token's name either way.
pub(crate) fn credential_key(token: &str, application: &str) -> String {
    format!("{token}:{application}")
}

/// One authenticated session, as issued and as stored.
#[derive(Clone, PartialEq, Eq)]
pub struct AuthSession {
    /// Public id (`ses_…`).
    pub(crate) id: String,
    /// [`credential_key`] of the config token that issued it.
    pub(crate) credential: String,
    /// Principal it acts for.
    pub(crate) principal: String,
    /// Application it belongs to.
    pub(crate) application: String,
    /// Granted scopes (a stored scope this build does not know grants nothing).
    pub(crate) scopes: Vec<Scope>,
    /// Lowercase hex SHA-256 of the bearer; the bearer itself is never stored.
    pub bearer_sha256: String,
    /// Issue time (ms).
    pub(crate) created_at: i64,
    /// Expiry (ms); at or after it the session fails closed. A session
    /// without one is treated as expired: this server always writes one.
    pub(crate) expires_at: Option<i64>,
    /// Revocation time (ms), once revoked.
    pub(crate) revoked_at: Option<i64>,
    /// The storage condition that kept this session from being stored: such
    /// a session lives in the authority's memory only, with read scopes only
    /// (see `Authority`), and is never persisted.
    pub(crate) read_only: Option<&'static str>,
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
            .field("read_only", &self.read_only)
            .finish_non_exhaustive()
    }
}

impl AuthSession {
    /// The client's view.
    pub(crate) fn view(&self) -> SessionView {
        SessionView {
            id: self.id.clone(),
            principal: self.principal.clone(),
            application: self.application.clone(),
            scopes: self.scopes.clone(),
            read_only: self.read_only.map(str::to_owned),
        }
    }

    /// Whether the session holds `scope`.
    pub(crate) fn has(&self, scope: Scope) -> bool {
        self.scopes.contains(&scope)
    }

    /// Whether it is unexpired at `now_ms`.
    pub(crate) fn unexpired_at(&self, now_ms: i64) -> bool {
        self.expires_at.is_some_and(|e| now_ms < e)
    }

    /// Neither revoked nor expired at `now_ms`.
    pub(crate) fn live_at(&self, now_ms: i64) -> bool {
        self.revoked_at.is_none() && self.unexpired_at(now_ms)
    }
}

/// What issuing a session did: the session, and the ids of its token's
/// sessions removed in the same transaction to keep the token bounded
/// (expired ones, then the oldest past the bound).
#[derive(Debug, Clone)]
pub struct IssuedSession {
    /// The new session.
    pub session: AuthSession,
    /// The sessions removed to make room for it.
    pub removed: Vec<String>,
}

/// Input of `issue_session`: the store assigns the id and the issue time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAuthSession {
    /// [`credential_key`] of the config token.
    pub credential: String,
    /// Principal.
    pub principal: String,
    /// Application.
    pub application: String,
    /// Granted scopes.
    pub scopes: Vec<Scope>,
    /// Lowercase hex SHA-256 of the bearer the caller generated.
    pub bearer_sha256: String,
    /// Expiry (ms).
    pub expires_at: Option<i64>,
}
