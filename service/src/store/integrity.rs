//! What is dispatched is what was chained: a queued turn's stored input is
//! checked against the digest its `turn_submitted` event carries before
//! the turn is claimed.
//!
//! A submission's input digest ([`submit_digest`], the one definition) is
//! what the turn's command receipt records, and since schema version 8 it
//! is also the `inputDigest` of the turn's `turn_submitted` event, which
//! the journal's hash chain covers. The raw prompt itself lives only in
//! `turns.prompt`, and only while the turn is queued (every transition out
//! of `queued` clears it, under `secure_delete`; the redacted
//! `user_message` event is the record). So an edit of a queued turn's
//! prompt, continued turn or deadline at rest no longer matches its
//! chained digest, and [`check_queued`] refuses it: the claim then fails
//! the turn as `prompt_mismatch` instead of handing the edited text to the
//! agent.
//!
//! What must stay true: the claim compares the bytes it is about to hand
//! to the runner, read in the same writer step; a turn whose submitted
//! event is missing or unreadable fails closed; only turns submitted before
//! version 8 (no `inputDigest`) go unchecked.

use lapis_protocol::Payload;

use crate::domain::{EventKind, Turn};

use super::ids::digest;

/// The input digest of a `turns.submit`: the receipt's digest and the
/// chained `inputDigest`. The deadline is part of it only when given, so
/// receipts of turns submitted before deadlines existed still replay.
pub(super) fn submit_digest(
    thread_id: &str,
    prompt: &str,
    continues: Option<&str>,
    max_turn_seconds: Option<u64>,
) -> String {
    let deadline = max_turn_seconds.map(|s| s.to_string());
    let mut parts = vec!["turn.submit", thread_id, prompt, continues.unwrap_or("")];
    if let Some(d) = &deadline {
        parts.push(d);
    }
    digest(&parts)
}

/// What the check of a queued turn found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum InputCheck {
    /// The stored input is what was chained.
    Matches,
    /// Submitted before schema version 8: nothing chained to compare.
    Unchained,
    /// The stored input differs from the chained digest, or the turn's
    /// `turn_submitted` event is missing or unreadable.
    Mismatch,
}

/// Compares `row`'s stored input (with `prompt` as read from `turns`) to
/// the digest chained in its `turn_submitted` event, whose payload the
/// claim read with the row (`None`: no such event, or no payload; the
/// claim's one joined read, see `super::hot`).
pub(super) fn compare_queued(row: &Turn, prompt: &str, payload: Option<String>) -> InputCheck {
    let submitted = payload
        .and_then(|p| serde_json::from_str(&p).ok())
        .and_then(
            |raw| match Payload::from_value(EventKind::TurnSubmitted, raw) {
                Payload::TurnSubmitted(s) => Some(s),
                _ => None,
            },
        );
    let Some(submitted) = submitted else {
        return InputCheck::Mismatch;
    };
    let Some(chained) = submitted.input_digest else {
        return InputCheck::Unchained;
    };
    let stored = submit_digest(
        &row.thread_id,
        prompt,
        row.continues.as_deref(),
        row.max_turn_seconds,
    );
    if stored == chained && submitted.turn_id == row.id {
        InputCheck::Matches
    } else {
        InputCheck::Mismatch
    }
}
