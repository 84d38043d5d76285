//! AuthSessions: who a connection acts for, and the rules for getting one.
//!
//! What must stay true:
//! - a bootstrap token issues or resumes the one live session of that
//!   credential for that application; a bearer is handed out only when a
//!   session is newly issued, and only its hash is kept (in memory and in the
//!   persistence backend);
//! - a revoked or expired session fails closed, for its bearer and for every
//!   request of a connection already using it;
//! - a session whose token was removed from the configuration fails closed,
//!   also on a running server: [`Authority::replace_tokens`] (a reload)
//!   revokes the sessions of a removed or edited token at once, so their
//!   subscriptions end (a subscription's grants are the token's as it
//!   was when it subscribed, so an edit must end it);
//! - a session belongs to one token *identity*, its name and a fingerprint
//!   of its secret ([`token_identity`]), with the token's principal: a
//!   token removed and re-added under the same name with another secret,
//!   or given another principal or application, never revives a stored
//!   session of the old one (`issued_by`);
//! - a session holds no scope its token no longer grants (the scopes are
//!   narrowed to the token's current ones at every check), so an upgraded
//!   application token loses the cross-application scopes it was issued;
//! - when the store cannot write for a storage condition (a full disk), a
//!   token's `hello` still gets a session, so the owner can see what is
//!   wrong: a *read-only* one, kept in memory only, holding the token's read
//!   scopes only ([`Scope::only_reads`]) and no bearer; at most one per
//!   credential, and never resumed once the store can write again (the next
//!   `hello` issues a stored session);
//! - a token's remembered sessions are bounded (`keep_per_token`): issuing
//!   one purges the token's expired sessions and evicts its oldest, in the
//!   store's transaction, and the removed ones end at once (dropped from the
//!   cache, and revocation watchers woken); read-only sessions are bounded
//!   the same way in memory;
//! - no error or log line carries a token or a bearer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use super::persist::SessionPersistence;
use super::secret::{hash_bearer, new_bearer, secrets_equal, token_identity};
use super::storage::{internal, persist_failed, read_only_session};
use crate::domain::{AuthSession, Clock, NewAuthSession, credential_key, secs_to_ms};
use lapis_protocol::config::{TokenKind, TokenSpec, valid_application};
use lapis_protocol::{ErrorCode, HelloParams, RpcError, Scope};

/// The outcome of a successful `hello`.
#[derive(Debug)]
pub struct Authenticated {
    /// The session.
    pub(crate) session: AuthSession,
    /// The bearer, only when the session was just issued.
    pub(crate) bearer: Option<String>,
}

/// Issues, resumes, checks and revokes sessions.
#[derive(Debug)]
pub struct Authority {
    /// Tokens from the configuration; compared in constant time. Replaced
    /// whole by a reload ([`Authority::replace_tokens`]).
    tokens: RwLock<Vec<Issuer>>,
    /// Lifetime of a newly issued session.
    ttl_secs: u64,
    /// Remembered sessions one token keeps (`server.maxSessionsPerToken`).
    keep_per_token: usize,
    /// Injected time source.
    clock: Arc<dyn Clock>,
    /// Durable copy of every session.
    persist: Arc<dyn SessionPersistence>,
    /// Every known session by id (the persisted set, cached).
    sessions: Mutex<HashMap<String, AuthSession>>,
    /// Bumped after every revocation, so holders of a session that are not
    /// making requests (journal subscriptions) re-check it at once.
    revocations: tokio::sync::watch::Sender<u64>,
}

/// A configured token with its identity ([`token_identity`], a SHA-256 of
/// its secret) computed once per configuration: a session is matched to
/// its token at every request and at every event a subscription forwards,
/// and hashing each token's secret there was most of that check.
#[derive(Debug, Clone)]
struct Issuer {
    spec: TokenSpec,
    identity: String,
}

fn issuers(specs: Vec<TokenSpec>) -> Vec<Issuer> {
    specs
        .into_iter()
        .map(|spec| Issuer {
            identity: token_identity(&spec),
            spec,
        })
        .collect()
}

fn unauthenticated(msg: &str) -> RpcError {
    RpcError::new(ErrorCode::Unauthenticated, msg)
}

impl Authority {
    /// An authority over `tokens`; sessions are looked up in `persist` on
    /// first use and cached.
    pub fn new(
        tokens: Vec<TokenSpec>,
        ttl_secs: u64,
        clock: Arc<dyn Clock>,
        persist: Arc<dyn SessionPersistence>,
    ) -> Authority {
        Authority {
            tokens: RwLock::new(issuers(tokens)),
            ttl_secs,
            keep_per_token: lapis_protocol::config::DEFAULT_MAX_SESSIONS_PER_TOKEN,
            clock,
            persist,
            sessions: Mutex::new(HashMap::new()),
            revocations: tokio::sync::watch::Sender::new(0),
        }
    }

    /// Keeps at most `keep` remembered sessions per token (at least one):
    /// issuing one more removes the token's expired sessions and its
    /// oldest, which end at once.
    pub fn with_session_bound(mut self, keep: usize) -> Authority {
        self.keep_per_token = keep.max(1);
        self
    }

    /// Changes after every revocation; a long-lived holder of a session
    /// re-checks it with [`Authority::check`] when it does.
    pub(crate) fn revocations(&self) -> tokio::sync::watch::Receiver<u64> {
        self.revocations.subscribe()
    }

    /// The owner's token name: the first config token, the one the CLI
    /// uses (its connections may use the slot kept from other tokens).
    pub(crate) fn owner_token(&self) -> String {
        self.tokens()
            .first()
            .map_or(String::new(), |t| t.spec.name.clone())
    }

    fn tokens(&self) -> std::sync::RwLockReadGuard<'_, Vec<Issuer>> {
        self.tokens.read().expect("poisoned")
    }

    /// The config token `session` was issued by, as configured now.
    pub(crate) fn spec_of(&self, session: &AuthSession) -> Option<TokenSpec> {
        self.tokens()
            .iter()
            .find(|t| issued_by(session, t))
            .map(|t| t.spec.clone())
    }

    /// Whether `session` is of an owner's token: it sees every application
    /// of its principal (a removed token sees nothing).
    pub(crate) fn is_owner(&self, session: &AuthSession) -> bool {
        self.spec_of(session)
            .is_some_and(|t| t.kind() == TokenKind::Owner)
    }

    /// Replaces the tokens (a reload): every session of a token that is
    /// gone, or changed in any field, is revoked at once, and holders of
    /// sessions (subscriptions) are told to re-check. Other tokens'
    /// sessions go on, with the scopes their token grants now. Returns
    /// the number of sessions revoked.
    pub(crate) fn replace_tokens(&self, new: Vec<TokenSpec>) -> usize {
        let mut tokens = self.tokens.write().expect("poisoned");
        let old = std::mem::replace(&mut *tokens, issuers(new.clone()));
        drop(tokens);
        // A session goes on only when the token that issued it is in the
        // new set unchanged: an edited token (secret, principal,
        // application, scopes or grants) is a new token, and the
        // sessions issued under the old one end (their holders say
        // `hello` again and get the new authority at once, subscriptions
        // included).
        let unchanged = |session: &AuthSession| {
            old.iter()
                .find(|t| issued_by(session, t))
                .is_some_and(|was| new.contains(&was.spec))
        };
        let mut revoked = 0;
        let mut sessions = self.sessions.lock().expect("poisoned");
        for session in sessions.values_mut() {
            if session.revoked_at.is_some() || unchanged(session) {
                continue;
            }
            if session.read_only.is_some() {
                session.revoked_at = Some(self.clock.now_ms());
            } else {
                match self.persist.revoke(&session.id) {
                    Ok(s) => *session = s,
                    Err(e) => {
                        // Still fails closed: its token is no longer configured.
                        tracing::error!(session = %session.id, error = %e, "revoking a removed token's session failed");
                        session.revoked_at = Some(self.clock.now_ms());
                    }
                }
            }
            revoked += 1;
            tracing::info!(session = %session.id, "session revoked: its token was removed or changed");
        }
        drop(sessions);
        if revoked > 0 {
            self.revocations.send_modify(|n| *n += 1);
        }
        revoked
    }

    /// The config token name a session was issued by.
    pub(crate) fn token_of(session: &AuthSession) -> &str {
        session
            .credential
            .split_once(':')
            .map_or(session.credential.as_str(), |(token, _)| token)
    }

    /// Whether the token `session` was issued by grants `scope` (a
    /// read-only session lacks write scopes its token has).
    pub(crate) fn token_grants(&self, session: &AuthSession, scope: Scope) -> bool {
        self.spec_of(session)
            .is_some_and(|t| t.effective_scopes().contains(&scope))
    }

    /// The current time from the injected clock (milliseconds).
    pub(crate) fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Authenticates `hello` params whose protocol the caller already checked.
    pub fn hello(&self, params: &HelloParams) -> Result<Authenticated, RpcError> {
        if params.ticket.is_some() {
            return Err(RpcError::new(
                ErrorCode::InvalidRequest,
                "a tool ticket authenticates an MCP bridge connection only",
            ));
        }
        match (&params.token, &params.bearer) {
            (Some(token), None) => {
                let application = params.application.as_deref().ok_or_else(|| {
                    RpcError::new(
                        ErrorCode::InvalidRequest,
                        "`application` is required with a token",
                    )
                })?;
                if !valid_application(application) {
                    return Err(RpcError::new(
                        ErrorCode::InvalidRequest,
                        "`application` must be 1-64 of [A-Za-z0-9._-]",
                    ));
                }
                self.with_token(token, application)
            }
            (None, Some(bearer)) => self.with_bearer(bearer),
            _ => Err(RpcError::new(
                ErrorCode::InvalidRequest,
                "`hello` needs exactly one of `token` or `bearer`",
            )),
        }
    }

    fn with_token(&self, token: &str, application: &str) -> Result<Authenticated, RpcError> {
        // Compare against every token without stopping early.
        let mut matched: Option<Issuer> = None;
        for issuer in self.tokens().iter() {
            if secrets_equal(token, &issuer.spec.secret) && matched.is_none() {
                matched = Some(issuer.clone());
            }
        }
        let issuer = matched.ok_or_else(|| unauthenticated("unknown token"))?;
        let spec = &issuer.spec;
        if !spec.allows_application(application) {
            return Err(RpcError::new(
                ErrorCode::Forbidden,
                "this token may not speak for that application",
            ));
        }
        let now = self.clock.now_ms();
        let key = credential_key(&issuer.identity, application);
        let mut sessions = self.sessions.lock().expect("poisoned");
        if let Some(live) = sessions
            .values()
            .filter(|s| {
                s.credential == key
                    && s.live_at(now)
                    && s.read_only.is_none()
                    && issued_by(s, &issuer)
            })
            .max_by_key(|s| s.created_at)
        {
            return Ok(Authenticated {
                session: narrowed(live.clone(), spec),
                bearer: None,
            });
        }
        if let Some(stored) = self.persist.by_credential(&key).map_err(internal)?
            && stored.live_at(now)
            && issued_by(&stored, &issuer)
        {
            sessions.insert(stored.id.clone(), stored.clone());
            return Ok(Authenticated {
                session: narrowed(stored, spec),
                bearer: None,
            });
        }
        let bearer = new_bearer().map_err(internal)?;
        let session = NewAuthSession {
            credential: key,
            principal: spec.principal.clone(),
            application: application.to_owned(),
            scopes: spec.effective_scopes(),
            bearer_sha256: hash_bearer(&bearer),
            expires_at: Some(now.saturating_add(secs_to_ms(self.ttl_secs))),
        };
        let issued = match self.persist.issue(session, self.keep_per_token) {
            Ok(issued) => issued,
            Err(e) => match e.storage_condition() {
                Some(condition) => {
                    let session = read_only_session(
                        &mut sessions,
                        spec,
                        application,
                        condition,
                        now,
                        self.ttl_secs,
                        self.keep_per_token,
                    )?;
                    return Ok(Authenticated {
                        session,
                        bearer: None,
                    });
                }
                None => return Err(persist_failed(e)),
            },
        };
        let session = issued.session;
        // The sessions the store removed to keep the token bounded end
        // now: their connections' next request and their subscriptions
        // find them unknown.
        let mut ended = false;
        for id in &issued.removed {
            ended |= sessions.remove(id).is_some_and(|s| s.live_at(now));
        }
        if ended {
            self.revocations.send_modify(|n| *n += 1);
        }
        if !issued.removed.is_empty() {
            tracing::info!(token = %spec.name, removed = issued.removed.len(), "sessions past the token's bound removed");
        }
        sessions.insert(session.id.clone(), session.clone());
        tracing::info!(session = %session.id, principal = %session.principal, application = %session.application, "session issued");
        Ok(Authenticated {
            session,
            bearer: Some(bearer),
        })
    }

    fn with_bearer(&self, bearer: &str) -> Result<Authenticated, RpcError> {
        let hash = hash_bearer(bearer);
        let mut sessions = self.sessions.lock().expect("poisoned");
        let cached = sessions
            .values()
            .find(|s| secrets_equal(&s.bearer_sha256, &hash))
            .cloned();
        let session = match cached {
            Some(s) => s,
            None => {
                let stored = self
                    .persist
                    .by_bearer_hash(&hash)
                    .map_err(internal)?
                    .ok_or_else(|| unauthenticated("unknown bearer"))?;
                sessions.insert(stored.id.clone(), stored.clone());
                stored
            }
        };
        let session = self.ensure_live(&session)?;
        Ok(Authenticated {
            session,
            bearer: None,
        })
    }

    fn ensure_live(&self, session: &AuthSession) -> Result<AuthSession, RpcError> {
        if session.revoked_at.is_some() {
            return Err(unauthenticated("session revoked"));
        }
        if !session.unexpired_at(self.clock.now_ms()) {
            return Err(unauthenticated("session expired"));
        }
        let spec = self
            .spec_of(session)
            .ok_or_else(|| unauthenticated("session credential no longer configured"))?;
        Ok(narrowed(session.clone(), &spec))
    }

    /// Re-checks a connection's session before each request.
    pub(crate) fn check(&self, session_id: &str) -> Result<AuthSession, RpcError> {
        let sessions = self.sessions.lock().expect("poisoned");
        let session = sessions
            .get(session_id)
            .ok_or_else(|| unauthenticated("session unknown"))?;
        self.ensure_live(session)
    }

    /// Revokes `target` (default: the caller's own session). A principal may
    /// revoke only its own sessions.
    pub(crate) fn revoke(
        &self,
        caller: &AuthSession,
        target: Option<&str>,
    ) -> Result<String, RpcError> {
        let target = target.unwrap_or(&caller.id);
        let mut sessions = self.sessions.lock().expect("poisoned");
        let session = sessions
            .get_mut(target)
            .filter(|s| s.principal == caller.principal)
            .ok_or_else(|| RpcError::new(ErrorCode::NotFound, "no such session"))?;
        if session.revoked_at.is_none() {
            *session = self.persist.revoke(&session.id).map_err(internal)?;
            self.revocations.send_modify(|n| *n += 1);
            tracing::info!(session = %session.id, "session revoked");
        }
        Ok(session.id.clone())
    }
}

/// Whether `spec` is the token that issued `session`: the same name and
/// secret (the credential's [`token_identity`]; a session stored before
/// identities, `name:application`, matches by name alone until it
/// expires), the same principal, and a binding that still allows the
/// session's application.
fn issued_by(session: &AuthSession, issuer: &Issuer) -> bool {
    let (spec, app) = (&issuer.spec, session.application.as_str());
    // `credential_key(token, app)` without building it.
    let keyed = |token: &str| {
        session
            .credential
            .strip_prefix(token)
            .and_then(|rest| rest.strip_prefix(':'))
            == Some(app)
    };
    spec.principal == session.principal
        && spec.allows_application(app)
        && (keyed(&issuer.identity) || keyed(&spec.name))
}

/// `session` holding only the scopes its token grants now.
fn narrowed(mut session: AuthSession, spec: &TokenSpec) -> AuthSession {
    let granted = spec.effective_scopes();
    session.scopes.retain(|s| granted.contains(s));
    session
}

#[cfg(test)]
mod tests;
