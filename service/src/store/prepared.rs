//! A turn's prepared configuration ([`PreparedConfig`]), made from its
//! thread and its provider's facts and staged in the claim's transaction:
//! the `prepared` column and a `turn_prepared` journal event carry the same
//! value, so the record can never exist without the claim or vice versa.
//!
//! `turn_prepared` is a lifecycle kind: its payload is metadata (names,
//! flags, digests), kept under every retention, and it is never content,
//! so it is no part of a reply or a continuation's digest and never moves
//! the turn (only the agent's own progress marks a turn running).

use rusqlite::Connection;

use crate::domain::{ProviderFacts, StoreResult, Thread, Turn};
use lapis_protocol::{Payload, PreparedApproval, PreparedConfig};

use super::journal::{Journal, JournalTx};

/// The configuration a turn of `thread` runs under, given what the engine
/// knows of its provider (`None`: not configured).
pub(super) fn prepare(thread: &Thread, facts: Option<&ProviderFacts>) -> PreparedConfig {
    let restricted = thread.restricted;
    let policy = facts.map(|f| &f.spec.restricted);
    PreparedConfig {
        provider: thread.provider.clone(),
        provider_fingerprint: facts.map(|f| f.fingerprint.clone()),
        approval: PreparedApproval::new(thread.approval, restricted),
        restricted,
        restricted_mode: policy.filter(|_| restricted).and_then(|p| p.mode.clone()),
        allow_unrestricted: restricted && policy.is_some_and(|p| p.allow_unrestricted),
        retention: thread.retention,
        vcs_identity: facts.and_then(|f| f.spec.vcs_identity.as_ref().map(|v| v.name.clone())),
        thread_version: thread.version,
        mcp_servers: facts.map(|f| f.mcp_servers.clone()).unwrap_or_default(),
    }
}

/// The `prepared` column's text for `prepared`.
pub(super) fn column_text(prepared: &PreparedConfig) -> String {
    Payload::TurnPrepared(prepared.clone())
        .to_value()
        .to_string()
}

/// Journals `prepared`, stored on the claimed turn by the claim's own
/// UPDATE (`super::transition::stage_claim`, with [`column_text`]), inside
/// the claim's transaction; returns the turn as it now reads.
pub(super) fn stage(
    tx: &Connection,
    journal: &Journal,
    stage: &mut JournalTx,
    now: i64,
    turn: &Turn,
    prepared: &PreparedConfig,
) -> StoreResult<Turn> {
    let payload = Payload::TurnPrepared(prepared.clone());
    journal.append(tx, stage, &turn.thread_id, Some(&turn.id), now, payload)?;
    // The row as it now is, without reading it back.
    let mut after = turn.clone();
    after.prepared = Some(prepared.clone());
    Ok(after)
}
