//! `journal.replay` of a thread that binds a transcript store: what the
//! journal no longer holds (metadata-only content after a restart) is
//! fetched from the store and shown only where it hashes to what was
//! recorded.
//!
//! What must stay true: a payload is never shown unverified — a missing
//! or mismatching one, or one whose row was journaled before the chain
//! covered `event_hash` (chain version 1: the store offers no hash for it,
//! `Store::replay_flagged`), leaves its event `payloadUnavailable` (the page
//! goes on: `transcript_unavailable` for that event only); without the
//! store connected, or when it fails, is late, or its connection goes
//! (the call is invalidated), the replay fails `transcript_unavailable`
//! at the first such event, as it does for a thread without a store. The
//! fetch runs inside the request: a client that goes away drops it.
//!
//! `turns.continue` of such a thread's prior after a restart fetches the
//! same way ([`restore_prior`]), but all or nothing: the prior authorizes
//! a continuation only when every one of its payloads verifies.

use lapis_protocol::{ErrorCode, ReplayPage, RpcError};

use crate::domain::{StoreError, Thread};
use crate::tools::Peer;
use crate::tools::transcript::{fetch, port_of};

use super::super::context::ServerContext;
use super::store_err;

/// One replay page of `thread` (which binds a store), completed from it.
pub(super) async fn complete(
    ctx: &ServerContext,
    thread: &Thread,
    peer: Option<&Peer>,
    after: u64,
    limit: usize,
) -> Result<ReplayPage, RpcError> {
    let store = &ctx.core.store;
    let (mut page, hashes) = store
        .replay_flagged(&thread.id, after, limit)
        .await
        .map_err(store_err)?;
    let gone: Vec<_> = page
        .events
        .iter()
        .filter(|e| e.payload_unavailable)
        .map(|e| (e.clone(), hashes.get(&e.thread_seq).cloned()))
        .collect();
    let Some((first, _)) = gone.first() else {
        return Ok(page);
    };
    let unavailable = |why: &str| {
        tracing::info!(thread = %thread.id, seq = first.thread_seq, why, "replay: transcript unavailable");
        let err = store_err(StoreError::TranscriptUnavailable {
            thread: thread.id.clone(),
            seq: first.thread_seq,
        });
        RpcError {
            message: format!("{} ({why})", err.message),
            ..err
        }
    };
    let port = thread.ports.transcript_store.as_deref().unwrap_or_default();
    let Ok(endpoint) = port_of(&ctx.core.tools, thread, port) else {
        return Err(unavailable("its transcript store is not connected"));
    };
    if peer.is_some_and(|p| p.same(&endpoint.peer)) {
        // This connection answers callbacks only between its requests: the
        // fetch would wait out its deadline.
        return Err(unavailable(
            "its transcript store is served on this connection: replay from another one",
        ));
    }
    let done = fetch(&endpoint, thread, &gone)
        .await
        .map_err(|r| unavailable(&r.to_string()))?;
    let verified = done.len();
    for event in done {
        if let Some(slot) = page
            .events
            .iter_mut()
            .find(|e| e.thread_seq == event.thread_seq)
        {
            *slot = event;
        }
    }
    if verified < gone.len() {
        tracing::warn!(thread = %thread.id, refused = gone.len() - verified,
            "replay: content the transcript store lacks, that does not match its recorded hash or whose row predates the chain's event hashes is not shown");
    }
    Ok(page)
}

/// Puts back in memory the content of `prior` (a turn of `thread`, which
/// binds a store) that the journal no longer holds, fetched from the store,
/// so `turns.continue` can check it and digest it.
///
/// What must stay true: content is restored only when every gone event of
/// the prior came back and hashes to the `event_hash` its chained row
/// records; otherwise nothing is restored and the continuation is refused
/// `transcript_unverified` naming the first such event (`data.seq`). A
/// store that cannot be asked (not connected, served on this connection,
/// failing, late) leaves the content unavailable: `transcript_unavailable`.
pub(super) async fn restore_prior(
    ctx: &ServerContext,
    thread: &Thread,
    prior: &str,
    peer: Option<&Peer>,
    unavailable: RpcError,
) -> Result<(), RpcError> {
    let store = &ctx.core.store;
    let gone = store
        .gone_payloads(&thread.id, prior)
        .await
        .map_err(store_err)?;
    if gone.is_empty() {
        // Nothing is missing now (another request restored it): the
        // store's refusal was about something else.
        return Err(unavailable);
    }
    let because = |why: &str| RpcError {
        message: format!("{} ({why})", unavailable.message),
        ..unavailable.clone()
    };
    let port = thread.ports.transcript_store.as_deref().unwrap_or_default();
    let Ok(endpoint) = port_of(&ctx.core.tools, thread, port) else {
        return Err(because("its transcript store is not connected"));
    };
    if peer.is_some_and(|p| p.same(&endpoint.peer)) {
        return Err(because(
            "its transcript store is served on this connection: continue from another one",
        ));
    }
    let done = fetch(&endpoint, thread, &gone)
        .await
        .map_err(|r| because(&r.to_string()))?;
    if let Some((e, hash)) = gone
        .iter()
        .find(|(e, _)| !done.iter().any(|d| d.thread_seq == e.thread_seq))
    {
        let why = if hash.is_none() {
            "its row was journaled before the chain covered event hashes"
        } else {
            "the transcript store's content is missing or does not hash to the recorded value"
        };
        tracing::warn!(thread = %thread.id, seq = e.thread_seq, why, "continue: prior content unverified");
        return Err(RpcError::new(
            ErrorCode::TranscriptUnverified,
            format!(
                "turn `{prior}` cannot be continued: event {} of thread `{}` is unverified ({why}); nothing was written",
                e.thread_seq, thread.id
            ),
        )
        .with_data("seq", e.thread_seq.into()));
    }
    store.restore_payloads(done);
    Ok(())
}
