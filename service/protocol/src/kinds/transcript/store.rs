//! Consumer transcript stores: what an application registers on its
//! connection (`transcript.register`) so that a thread with
//! `metadata-only` retention keeps its content *outside* the controller,
//! and the two callbacks the controller makes (`transcript.append`,
//! `transcript.fetch`).
//!
//! What must stay true:
//! - a store is a port like any other (volatile, keyed by principal and
//!   application, bound by name, revoked with its connection); a thread
//!   binds one with `transcriptStore` only under `metadata-only`
//!   retention: a `full` thread keeps its content in the journal already;
//! - every content payload the store receives is the one the journal
//!   published: already redacted, with the event's canonical hash
//!   ([`event_hash`](super::event_hash)), so the store keeps what it can
//!   later prove;
//! - a turn's prompt is appended, and acknowledged within the deadline
//!   ([`DEFAULT_TRANSCRIPT_DEADLINE_MS`], at most
//!   [`MAX_TRANSCRIPT_DEADLINE_MS`]), *before* the dispatch boundary: an
//!   append that fails, expires or loses its connection fails the turn
//!   `transcript_store_failed` and never authorizes provider or tool
//!   execution;
//! - what a store answers to `transcript.fetch` is never trusted: each
//!   payload is checked against the hash the controller recorded when the
//!   event was journaled, and one that does not match (or is missing) is
//!   reported unavailable for that event, never shown.

use serde::{Deserialize, Serialize};

use crate::JournalEvent;
use crate::context::PortRefusal;
use crate::memory::AccessEnvelope;

/// The server → client request that hands a store one content event.
pub const TRANSCRIPT_APPEND: &str = "transcript.append";
/// The server → client request that asks a store for stored payloads.
pub const TRANSCRIPT_FETCH: &str = "transcript.fetch";
/// How long one append or fetch may take unless the store asks for less
/// at registration: encrypted durable storage may be slow.
pub const DEFAULT_TRANSCRIPT_DEADLINE_MS: u64 = 120_000;
/// The longest deadline a store may ask for.
pub const MAX_TRANSCRIPT_DEADLINE_MS: u64 = 120_000;
/// Most payloads one `transcript.fetch` asks for.
pub const MAX_FETCH: usize = 1_000;

/// `transcript.register`: one transcript store of this connection
/// (registering a name again replaces it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TranscriptRegister {
    /// The store's name (the tools' name rule: 1-64 of `[A-Za-z0-9_-]`).
    pub port: String,
    /// How long one callback may take, in milliseconds (1 to
    /// [`MAX_TRANSCRIPT_DEADLINE_MS`]; default
    /// [`DEFAULT_TRANSCRIPT_DEADLINE_MS`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<u64>,
}

impl TranscriptRegister {
    /// The deadline in effect (never over [`MAX_TRANSCRIPT_DEADLINE_MS`]).
    pub fn deadline(&self) -> std::time::Duration {
        std::time::Duration::from_millis(
            self.deadline_ms
                .unwrap_or(DEFAULT_TRANSCRIPT_DEADLINE_MS)
                .min(MAX_TRANSCRIPT_DEADLINE_MS),
        )
    }
}

/// `transcript.append` (controller → application): keep one content
/// event. Answered with [`TranscriptAck`] once it is durable on the
/// application's side.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TranscriptAppend {
    /// The store.
    pub port: String,
    /// Who the content belongs to (the controller's, from the thread).
    pub envelope: AccessEnvelope,
    /// The event as the journal published it (its payload redacted).
    pub event: JournalEvent,
    /// Its canonical hash ([`event_hash`](super::event_hash)), the one the
    /// controller recorded and checks a fetched payload against.
    pub hash: String,
}

/// The answer to `transcript.append`: the event is stored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
// An answer: unknown members are ignored, as for every callback answer.
#[serde(rename_all = "camelCase")]
pub struct TranscriptAck {}

/// `transcript.fetch` (controller → application): the stored payloads of
/// some events of one thread (a replay after a restart).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TranscriptFetch {
    /// The store.
    pub port: String,
    /// Who asks (the controller's, from the thread).
    pub envelope: AccessEnvelope,
    /// The events wanted, by `thread_seq`, ascending (at most
    /// [`MAX_FETCH`]).
    pub thread_seqs: Vec<u64>,
}

/// One stored payload, as a store answers it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
// An answer: unknown members are ignored, as for every callback answer.
#[serde(rename_all = "camelCase")]
pub struct TranscriptStored {
    /// Its event.
    pub thread_seq: u64,
    /// The payload as it was appended.
    pub payload: serde_json::Value,
}

/// The answer to `transcript.fetch`: what the store has of what was asked
/// (an event it lacks is simply left out).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
// An answer: unknown members are ignored, as for every callback answer.
#[serde(rename_all = "camelCase")]
pub struct TranscriptPayloads {
    /// The payloads found.
    #[serde(default)]
    pub payloads: Vec<TranscriptStored>,
}

/// Checks one `transcript.register` (the context port's name rule, the
/// store's own deadline bound).
pub fn validate_transcript(r: &TranscriptRegister) -> Result<(), PortRefusal> {
    crate::context::validate_context(&crate::context::ContextRegister {
        port: r.port.clone(),
        deadline_ms: None,
    })?;
    if r.deadline_ms
        .is_some_and(|d| d == 0 || d > MAX_TRANSCRIPT_DEADLINE_MS)
    {
        return Err(PortRefusal::Invalid {
            port: r.port.clone(),
            reason: "deadlineMs must be 1-120000",
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_deadline_is_bounded_and_defaults_to_120_s() {
        let r = |d| TranscriptRegister {
            port: "vault".into(),
            deadline_ms: d,
        };
        assert!(validate_transcript(&r(None)).is_ok());
        assert!(validate_transcript(&r(Some(120_000))).is_ok());
        assert!(validate_transcript(&r(Some(0))).is_err());
        assert!(validate_transcript(&r(Some(120_001))).is_err());
        let bad = TranscriptRegister {
            port: "bad.name".into(),
            deadline_ms: None,
        };
        assert!(validate_transcript(&bad).is_err());
        assert_eq!(r(None).deadline(), Duration::from_secs(120));
        assert_eq!(r(Some(500)).deadline(), Duration::from_millis(500));
    }
}
