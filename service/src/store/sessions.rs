//! Remembered AuthSessions (`auth_sessions`): issue, look up, revoke — and
//! the bound that keeps them from growing without end.
//!
//! What must stay true: the rows of one config token are bounded. Issuing a
//! session for a token first purges that token's expired rows, then evicts
//! its oldest past the bound (revoked ones before live ones), then inserts —
//! in one transaction, so a kill at any point leaves the old rows or the new
//! ones, never a table past its bound. Each step reads through the
//! `auth_sessions_credential` index over the token's own rows only (the
//! token's credentials are the range `token:` .. `token;`), so what an
//! admission costs does not grow with the table: a fixed number of
//! statements (a test counts them) over at most the bound's rows (a test
//! checks the query plans). A removed row's bearer fails closed like an
//! unknown one (`unauthenticated`); the caller drops the removed ids from
//! its cache, so their connections end too.

use rusqlite::params;

use crate::domain::{AuthSession, IssuedSession, NewAuthSession, StoreError, StoreResult};

use super::handle::Store;
use super::ids::{check_name, check_sha256_hex, new_id};
use super::read;
use super::writer::Writer;

/// Removes the token's expired rows (`?1`..`?2` is the token's credential
/// range, `?3` now; a row without an expiry counts as expired, as
/// `AuthSession::unexpired_at` says).
pub(super) const PURGE_EXPIRED: &str = "DELETE FROM auth_sessions \
     WHERE credential >= ?1 AND credential < ?2 \
     AND (expires_at IS NULL OR expires_at <= ?3) RETURNING id";

/// Removes the token's rows past the newest `?3` (live before revoked,
/// then newest first), making room for one more under the bound.
pub(super) const EVICT_OLDEST: &str = "DELETE FROM auth_sessions WHERE id IN (\
     SELECT id FROM auth_sessions WHERE credential >= ?1 AND credential < ?2 \
     ORDER BY revoked_at IS NULL DESC, created_at DESC, id DESC LIMIT -1 OFFSET ?3) \
     RETURNING id";

/// The credential range of the token a credential key names: every
/// `token:application` of that token sorts inside `[token:, token;)` (`;`
/// follows `:`, and token names hold neither).
pub(super) fn token_range(credential: &str) -> (String, String) {
    let token = credential
        .split_once(':')
        .map_or(credential, |(token, _)| token);
    (format!("{token}:"), format!("{token};"))
}

impl Writer {
    /// Stores a new session, keeping at most `keep` rows of its token (at
    /// least the new one); the caller generated the bearer and passes its
    /// hash.
    pub(super) fn issue_session(
        &mut self,
        input: NewAuthSession,
        keep: usize,
    ) -> StoreResult<IssuedSession> {
        check_sha256_hex(&input.bearer_sha256)?;
        check_name("credential", &input.credential)?;
        let id = new_id("ses_")?;
        let scopes = serde_json::to_string(&input.scopes).unwrap_or_else(|_| "[]".into());
        let (from, to) = token_range(&input.credential);
        // Room for the new row: the newest `keep - 1` stay.
        let stay = i64::try_from(keep.max(1) - 1).unwrap_or(i64::MAX);
        self.write(|tx, _, _, now| {
            let mut removed = Vec::new();
            for row in tx
                .prepare_cached(PURGE_EXPIRED)?
                .query_map(params![from, to, now], |r| r.get::<_, String>(0))?
            {
                removed.push(row?);
            }
            for row in tx
                .prepare_cached(EVICT_OLDEST)?
                .query_map(params![from, to, stay], |r| r.get::<_, String>(0))?
            {
                removed.push(row?);
            }
            tx.prepare_cached(
                "INSERT INTO auth_sessions (id, credential, principal, application, scopes, \
                 bearer_sha256, created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )?
            .execute(params![
                id,
                input.credential,
                input.principal,
                input.application,
                scopes,
                input.bearer_sha256,
                now,
                input.expires_at
            ])?;
            let session =
                read::session(tx, &id)?.ok_or_else(|| StoreError::not_found("session", &id))?;
            Ok(IssuedSession { session, removed })
        })
    }

    /// Revoke a session (idempotent: a revoked session keeps its first revocation time).
    pub(super) fn revoke_session(&mut self, id: &str) -> StoreResult<AuthSession> {
        self.write(|tx, _, _, now| {
            tx.execute(
                "UPDATE auth_sessions SET revoked_at = ?1 WHERE id = ?2 AND revoked_at IS NULL",
                params![now, id],
            )?;
            read::session(tx, id)?.ok_or_else(|| StoreError::not_found("session", id))
        })
    }
}

impl Store {
    /// Store a new session (the caller made the bearer; pass its SHA-256
    /// hex), keeping at most `keep` sessions of its token: its expired
    /// ones are purged and its oldest evicted in the same transaction (see
    /// the module docs). The answer names the removed sessions.
    pub async fn issue_session(
        &self,
        input: NewAuthSession,
        keep: usize,
    ) -> StoreResult<IssuedSession> {
        self.op(move |w| w.issue_session(input, keep)).await
    }

    /// The newest unrevoked session of a credential (the caller checks expiry).
    pub(crate) async fn find_session_by_credential(
        &self,
        credential: &str,
    ) -> StoreResult<Option<AuthSession>> {
        let credential = credential.to_owned();
        self.read(move |c, _| read::session_by_credential(c, &credential))
            .await
    }

    /// The session with this bearer hash, revoked or not (the caller checks).
    pub async fn find_session_by_bearer_hash(
        &self,
        sha256_hex: &str,
    ) -> StoreResult<Option<AuthSession>> {
        let h = sha256_hex.to_owned();
        self.read(move |c, _| read::session_by_bearer(c, &h)).await
    }

    /// Revoke a session (idempotent).
    pub(crate) async fn revoke_session(&self, id: &str) -> StoreResult<AuthSession> {
        let id = id.to_owned();
        self.op(move |w| w.revoke_session(&id)).await
    }
}
