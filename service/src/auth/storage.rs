//! When the session store fails: the errors a failed write becomes, and
//! the read-only session a token's `hello` gets while the store cannot
//! write for a storage condition (a full disk).
//!
//! What must stay true: a read-only session lives in memory only, holds
//! its token's read scopes only and no bearer anyone is given, and there is
//! at most one live per credential (see the module docs of `sessions`);
//! no error or log line carries a token or a bearer.

use std::collections::HashMap;
use std::fmt;

use super::persist::PersistError;
use super::secret::{hash_bearer, new_bearer, random_hex, token_identity};
use crate::domain::{AuthSession, credential_key, secs_to_ms};
use lapis_protocol::config::TokenSpec;
use lapis_protocol::{ErrorCode, RpcError, Scope};

/// A session storage failure, logged; the caller sees `internal` only.
pub(super) fn internal(e: impl fmt::Display) -> RpcError {
    tracing::error!(error = %e, "session storage failed");
    RpcError::new(ErrorCode::Internal, "session storage failed")
}

/// A persistence failure: `storage_unavailable` naming the condition when
/// the storage refused the write (a full disk), otherwise `internal`.
pub(super) fn persist_failed(e: PersistError) -> RpcError {
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
/// credential, else a new one, the token's oldest read-only ones past
/// `keep` removed (its bearer hash is of a bearer nobody is
/// given, so no bearer ever resumes it).
pub(super) fn read_only_session(
    sessions: &mut HashMap<String, AuthSession>,
    spec: &TokenSpec,
    application: &str,
    condition: &'static str,
    now: i64,
    ttl_secs: u64,
    keep: usize,
) -> Result<AuthSession, RpcError> {
    let identity = token_identity(spec);
    let key = credential_key(&identity, application);
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
    // Bounded like stored ones: the token's oldest read-only sessions go.
    let prefix = format!("{identity}:");
    let mut mine: Vec<(i64, String)> = sessions
        .values()
        .filter(|s| s.read_only.is_some() && s.credential.starts_with(&prefix))
        .map(|s| (s.created_at, s.id.clone()))
        .collect();
    mine.sort();
    let excess = (mine.len() + 1).saturating_sub(keep.max(1));
    for (_, id) in mine.into_iter().take(excess) {
        sessions.remove(&id);
    }
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
