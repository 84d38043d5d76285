//! AuthSessions: who a connection acts for, and the rules for getting one.
//!
//! What must stay true:
//! - a bootstrap token issues or resumes the one live session of that
//!   credential for that application; a bearer is handed out only when a
//!   session is newly issued, and only its hash is kept (in memory and in the
//!   persistence backend);
//! - a revoked or expired session fails closed, for its bearer and for every
//!   request of a connection already using it;
//! - a session whose token was removed from the configuration fails closed;
//! - when the store cannot write for a storage condition (a full disk), a
//!   token's `hello` still gets a session, so the owner can see what is
//!   wrong: a *read-only* one, kept in memory only, holding the token's read
//!   scopes only ([`Scope::only_reads`]) and no bearer; at most one per
//!   credential, and never resumed once the store can write again (the next
//!   `hello` issues a stored session);
//! - no error or log line carries a token or a bearer.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use super::persist::{PersistError, SessionPersistence};
use super::secret::{hash_bearer, new_bearer, random_hex, secrets_equal};
use crate::domain::{AuthSession, Clock, NewAuthSession, credential_key, secs_to_ms};
use lapis_protocol::config::{TokenSpec, valid_application};
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
    /// Tokens from the configuration; compared in constant time.
    tokens: Vec<TokenSpec>,
    /// Lifetime of a newly issued session.
    ttl_secs: u64,
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

fn unauthenticated(msg: &str) -> RpcError {
    RpcError::new(ErrorCode::Unauthenticated, msg)
}

fn internal(e: impl fmt::Display) -> RpcError {
    tracing::error!(error = %e, "session storage failed");
    RpcError::new(ErrorCode::Internal, "session storage failed")
}

/// A persistence failure: `storage_unavailable` naming the condition when
/// the storage refused the write (a full disk), otherwise `internal`.
fn persist_failed(e: PersistError) -> RpcError {
    match e.storage_condition() {
        Some(condition) => {
            tracing::warn!(condition, "session storage cannot write");
            RpcError::new(
                ErrorCode::StorageUnavailable,
                format!("the controller cannot write its database ({condition}); existing sessions keep working"),
            )
            .with_data("condition", condition.into())
        }
        None => internal(e),
    }
}

/// The read-only, in-memory session of `spec` for `application` while the
/// store cannot write (`condition`): the live one already made for this
/// credential, else a new one (its bearer hash is of a bearer nobody is
/// given, so no bearer ever resumes it).
fn read_only_session(
    sessions: &mut HashMap<String, AuthSession>,
    spec: &TokenSpec,
    application: &str,
    condition: &'static str,
    now: i64,
    ttl_secs: u64,
) -> Result<AuthSession, RpcError> {
    let key = credential_key(&spec.name, application);
    if let Some(live) = sessions
        .values()
        .filter(|s| s.credential == key && s.live_at(now) && s.read_only.is_some())
        .max_by_key(|s| s.created_at)
    {
        return Ok(live.clone());
    }
    let session = AuthSession {
        id: format!("ses_{}", random_hex(16).map_err(internal)?),
        credential: key,
        principal: spec.principal.clone(),
        application: application.to_owned(),
        scopes: spec
            .effective_scopes()
            .into_iter()
            .filter(|s| s.only_reads())
            .collect(),
        bearer_sha256: hash_bearer(&new_bearer().map_err(internal)?),
        created_at: now,
        expires_at: Some(now.saturating_add(secs_to_ms(ttl_secs))),
        revoked_at: None,
        read_only: Some(condition),
    };
    tracing::warn!(session = %session.id, principal = %session.principal, application = %session.application, condition, "the store cannot write: read-only session issued in memory");
    sessions.insert(session.id.clone(), session.clone());
    Ok(session)
}

/// A write refused to a read-only session: the storage condition, and
/// how to get a full session.
pub(crate) fn read_only_refusal(condition: &str, scope: Scope) -> RpcError {
    RpcError::new(
        ErrorCode::StorageUnavailable,
        format!(
            "this session is read-only (no `{}`): the controller could not write its database \
             when it was issued ({condition}); free space, then say `hello` again",
            scope.as_str()
        ),
    )
    .with_data("condition", condition.into())
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
            tokens,
            ttl_secs,
            clock,
            persist,
            sessions: Mutex::new(HashMap::new()),
            revocations: tokio::sync::watch::Sender::new(0),
        }
    }

    /// Changes after every revocation; a long-lived holder of a session
    /// re-checks it with [`Authority::check`] when it does.
    pub(crate) fn revocations(&self) -> tokio::sync::watch::Receiver<u64> {
        self.revocations.subscribe()
    }

    /// The owner's token name: the first config token, the one the CLI
    /// uses (its connections may use the slot kept from other tokens).
    pub(crate) fn owner_token(&self) -> &str {
        self.tokens.first().map_or("", |t| t.name.as_str())
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
        let token = Authority::token_of(session);
        self.tokens
            .iter()
            .any(|t| t.name == token && t.effective_scopes().contains(&scope))
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
        let mut matched: Option<&TokenSpec> = None;
        for spec in &self.tokens {
            if secrets_equal(token, &spec.secret) && matched.is_none() {
                matched = Some(spec);
            }
        }
        let spec = matched.ok_or_else(|| unauthenticated("unknown token"))?;
        if !spec.allows_application(application) {
            return Err(RpcError::new(
                ErrorCode::Forbidden,
                "this token may not speak for that application",
            ));
        }
        let now = self.clock.now_ms();
        let key = credential_key(&spec.name, application);
        let mut sessions = self.sessions.lock().expect("poisoned");
        if let Some(live) = sessions
            .values()
            .filter(|s| s.credential == key && s.live_at(now) && s.read_only.is_none())
            .max_by_key(|s| s.created_at)
        {
            return Ok(Authenticated {
                session: live.clone(),
                bearer: None,
            });
        }
        if let Some(stored) = self.persist.by_credential(&key).map_err(internal)?
            && stored.live_at(now)
        {
            sessions.insert(stored.id.clone(), stored.clone());
            return Ok(Authenticated {
                session: stored,
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
        let session = match self.persist.issue(session) {
            Ok(session) => session,
            Err(e) => match e.storage_condition() {
                Some(condition) => {
                    let session = read_only_session(
                        &mut sessions,
                        spec,
                        application,
                        condition,
                        now,
                        self.ttl_secs,
                    )?;
                    return Ok(Authenticated {
                        session,
                        bearer: None,
                    });
                }
                None => return Err(persist_failed(e)),
            },
        };
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
        if !self
            .tokens
            .iter()
            .any(|t| credential_key(&t.name, &session.application) == session.credential)
        {
            return Err(unauthenticated("session credential no longer configured"));
        }
        Ok(session.clone())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::persist::MemorySessions;
    use crate::domain::ManualClock;
    use lapis_protocol::{PROTOCOL, Scope};

    const SECRET: &str = "lapis_0000000000000000000000000000000000000000000000000000000000000001";

    fn authority(clock: Arc<ManualClock>) -> Authority {
        let tokens = vec![TokenSpec {
            name: "owner".into(),
            principal: "owner".into(),
            secret: SECRET.into(),
            scopes: None,
            applications: None,
        }];
        let persist = Arc::new(MemorySessions::new(clock.clone()));
        Authority::new(tokens, 100, clock, persist)
    }

    fn token(app: &str) -> HelloParams {
        HelloParams {
            protocol: PROTOCOL.into(),
            token: Some(SECRET.into()),
            bearer: None,
            application: Some(app.into()),
            ticket: None,
        }
    }

    fn bearer(b: &str) -> HelloParams {
        HelloParams {
            protocol: PROTOCOL.into(),
            token: None,
            bearer: Some(b.into()),
            application: None,
            ticket: None,
        }
    }

    fn code(e: RpcError) -> ErrorCode {
        e.error_code().unwrap()
    }

    #[test]
    fn token_issues_once_then_resumes_without_bearer() {
        let a = authority(Arc::new(ManualClock::new(1000)));
        let first = a.hello(&token("app")).unwrap();
        let bearer_value = first.bearer.clone().expect("new session returns a bearer");
        let again = a.hello(&token("app")).unwrap();
        assert_eq!(again.session.id, first.session.id);
        assert!(again.bearer.is_none());
        let via_bearer = a.hello(&bearer(&bearer_value)).unwrap();
        assert_eq!(via_bearer.session.id, first.session.id);
        assert!(via_bearer.bearer.is_none());
        assert_ne!(first.session.bearer_sha256, bearer_value);
        let other_app = a.hello(&token("other")).unwrap();
        assert_ne!(other_app.session.id, first.session.id);
        assert_eq!(first.session.scopes, Scope::ALL.to_vec());
    }

    #[test]
    fn wrong_token_and_unknown_bearer_fail() {
        let a = authority(Arc::new(ManualClock::new(0)));
        let mut p = token("app");
        p.token = Some(format!("{SECRET}x"));
        assert_eq!(code(a.hello(&p).unwrap_err()), ErrorCode::Unauthenticated);
        assert_eq!(
            code(a.hello(&bearer("lapis_s_nope")).unwrap_err()),
            ErrorCode::Unauthenticated
        );
        let mut both = token("app");
        both.bearer = Some("x".into());
        assert_eq!(code(a.hello(&both).unwrap_err()), ErrorCode::InvalidRequest);
        let mut bad_app = token("app");
        bad_app.application = Some("has space".into());
        assert_eq!(
            code(a.hello(&bad_app).unwrap_err()),
            ErrorCode::InvalidRequest
        );
    }

    #[test]
    fn revoked_and_expired_fail_closed_and_token_reissues() {
        let clock = Arc::new(ManualClock::new(0));
        let a = authority(clock.clone());
        let first = a.hello(&token("app")).unwrap();
        let b1 = first.bearer.unwrap();
        a.revoke(&first.session, None).unwrap();
        assert_eq!(
            code(a.hello(&bearer(&b1)).unwrap_err()),
            ErrorCode::Unauthenticated
        );
        assert!(a.check(&first.session.id).is_err());
        let second = a.hello(&token("app")).unwrap();
        assert_ne!(second.session.id, first.session.id);
        let b2 = second.bearer.unwrap();
        clock.advance(100);
        let err = a.hello(&bearer(&b2)).unwrap_err();
        assert_eq!(code(err.clone()), ErrorCode::Unauthenticated);
        assert!(err.message.contains("expired"));
        assert!(a.check(&second.session.id).is_err());
    }

    #[test]
    fn a_token_pinned_to_applications_refuses_others() {
        let tokens = vec![TokenSpec {
            name: "bot".into(),
            principal: "owner".into(),
            secret: SECRET.into(),
            scopes: None,
            applications: Some(vec!["bot".into()]),
        }];
        let clock = Arc::new(ManualClock::new(0));
        let a = Authority::new(tokens, 100, clock, Arc::new(MemorySessions::default()));
        assert!(a.hello(&token("bot")).is_ok());
        assert_eq!(
            code(a.hello(&token("editor")).unwrap_err()),
            ErrorCode::Forbidden
        );
    }

    #[test]
    fn sessions_survive_through_persistence() {
        let clock = Arc::new(ManualClock::new(0));
        let persist = Arc::new(MemorySessions::new(clock.clone()));
        let tokens = vec![TokenSpec {
            name: "owner".into(),
            principal: "owner".into(),
            secret: SECRET.into(),
            scopes: None,
            applications: None,
        }];
        let a = Authority::new(tokens.clone(), 100, clock.clone(), persist.clone());
        let b = a.hello(&token("app")).unwrap().bearer.unwrap();
        let stored = persist.by_bearer_hash(&hash_bearer(&b)).unwrap().unwrap();
        assert_ne!(stored.bearer_sha256, b);
        let reopened = Authority::new(tokens, 100, clock, persist);
        let resumed = reopened.hello(&bearer(&b)).unwrap();
        assert_eq!(resumed.session.id, stored.id);
        // The token resumes the stored session too, without a new bearer.
        assert!(reopened.hello(&token("app")).unwrap().bearer.is_none());
    }

    #[test]
    fn a_full_disk_issues_a_read_only_session_in_memory_until_it_can_write() {
        let clock = Arc::new(ManualClock::new(0));
        let persist = Arc::new(MemorySessions::new(clock.clone()));
        let tokens = vec![TokenSpec {
            name: "owner".into(),
            principal: "owner".into(),
            secret: SECRET.into(),
            scopes: None,
            applications: None,
        }];
        let a = Authority::new(tokens, 100, clock, persist.clone());
        let stored = a.hello(&token("before")).unwrap();
        persist.refuse_issue(Some("disk_full"));
        // A session stored before the disk filled resumes as it was.
        let resumed = a.hello(&token("before")).unwrap();
        assert_eq!(resumed.session.id, stored.session.id);
        assert_eq!(resumed.session.read_only, None);
        // A fresh credential gets a read-only session: reads only, no
        // bearer, not stored, the same one on the next hello.
        let ro = a.hello(&token("fresh")).unwrap();
        assert!(ro.bearer.is_none());
        assert_eq!(ro.session.read_only, Some("disk_full"));
        assert_eq!(
            ro.session.scopes,
            vec![Scope::StatusRead, Scope::WorkspacesRead, Scope::ThreadsRead]
        );
        assert_eq!(ro.session.view().read_only.as_deref(), Some("disk_full"));
        assert!(a.check(&ro.session.id).is_ok());
        assert!(a.token_grants(&ro.session, Scope::TurnsWrite));
        assert!(!ro.session.has(Scope::TurnsWrite));
        assert_eq!(a.hello(&token("fresh")).unwrap().session.id, ro.session.id);
        assert!(persist.by_credential("owner:fresh").unwrap().is_none());
        // Space returns: the next hello issues a stored, full session.
        persist.refuse_issue(None);
        let full = a.hello(&token("fresh")).unwrap();
        assert_ne!(full.session.id, ro.session.id);
        assert!(full.bearer.is_some());
        assert_eq!(full.session.read_only, None);
        assert_eq!(full.session.scopes, Scope::ALL.to_vec());
        // A write of the read-only session names the condition.
        assert_eq!(
            read_only_refusal("disk_full", Scope::TurnsWrite).error_code(),
            Some(ErrorCode::StorageUnavailable)
        );
    }
}
