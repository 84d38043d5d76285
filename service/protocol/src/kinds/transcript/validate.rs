//! `assert_transcript`: checks a transcript a consumer stored against the
//! journal it came from.
//!
//! What must stay true: a stored transcript passes only if it is one
//! gap-free run of the thread's events (by `thread_seq`), in order, each
//! the journal's event with the same `thread_seq`, with the same kind,
//! turn and time and the same canonical hash ([`super::event_hash`]).
//! Content the journal no longer has (metadata-only retention after a
//! restart) cannot be verified: it is never reported as verified, but
//! listed in [`TranscriptCheck::unverified`] so the caller decides.

use std::collections::BTreeMap;

use crate::JournalEvent;

use super::event_hash;

/// What [`assert_transcript`] verified.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TranscriptCheck {
    /// The first and last `thread_seq` checked (`None` for an empty
    /// transcript).
    pub range: Option<(u64, u64)>,
    /// How many events matched the journal's canonical hash.
    pub verified: usize,
    /// `thread_seq`s whose journal payload is unavailable: their metadata
    /// matched, their content could not be compared.
    pub unverified: Vec<u64>,
}

/// Why a stored transcript does not match the journal. Messages name
/// sequences and kinds, never content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TranscriptError {
    /// Events of more than one thread.
    #[error("event {thread_seq} belongs to another thread than the transcript's first")]
    OtherThread {
        /// Where.
        thread_seq: u64,
    },
    /// The stored events skip or repeat a sequence, or go backwards.
    #[error("the transcript is not gap-free: expected thread_seq {expected}, found {found}")]
    Sequence {
        /// What should have come next.
        expected: u64,
        /// What did.
        found: u64,
    },
    /// A stored event the journal does not have.
    #[error("event {thread_seq} is not in the journal")]
    Unknown {
        /// Where.
        thread_seq: u64,
    },
    /// Same sequence, different kind, turn or time.
    #[error("event {thread_seq} differs from the journal's ({field})")]
    Metadata {
        /// Where.
        thread_seq: u64,
        /// Which field: `kind`, `turnId`, `at`, `threadId`.
        field: &'static str,
    },
    /// Same sequence and metadata, different content.
    #[error("event {thread_seq} does not match the journal's hash")]
    Hash {
        /// Where.
        thread_seq: u64,
    },
    /// A stored event whose payload is missing while the journal has one.
    #[error("event {thread_seq} lacks the payload the journal has")]
    MissingPayload {
        /// Where.
        thread_seq: u64,
    },
}

/// Checks `stored` (a transcript a consumer kept, in order) against
/// `journal` (the thread's events as the controller replays them; a
/// superset is fine). See the module docs for what passes.
pub fn assert_transcript(
    journal: &[JournalEvent],
    stored: &[JournalEvent],
) -> Result<TranscriptCheck, TranscriptError> {
    let mut check = TranscriptCheck::default();
    let Some(first) = stored.first() else {
        return Ok(check);
    };
    let by_seq: BTreeMap<u64, &JournalEvent> = journal
        .iter()
        .filter(|e| e.thread_id == first.thread_id)
        .map(|e| (e.thread_seq, e))
        .collect();
    let mut expected = first.thread_seq;
    for event in stored {
        let thread_seq = event.thread_seq;
        if event.thread_id != first.thread_id {
            return Err(TranscriptError::OtherThread { thread_seq });
        }
        if thread_seq != expected {
            return Err(TranscriptError::Sequence {
                expected,
                found: thread_seq,
            });
        }
        expected += 1;
        let theirs = by_seq
            .get(&thread_seq)
            .ok_or(TranscriptError::Unknown { thread_seq })?;
        let differs = |field| Err(TranscriptError::Metadata { thread_seq, field });
        if theirs.kind != event.kind {
            return differs("kind");
        }
        if theirs.turn_id != event.turn_id {
            return differs("turnId");
        }
        if theirs.at != event.at {
            return differs("at");
        }
        if theirs.payload_unavailable {
            check.unverified.push(thread_seq);
            continue;
        }
        if event.payload_unavailable {
            return Err(TranscriptError::MissingPayload { thread_seq });
        }
        if event_hash(theirs) != event_hash(event) {
            return Err(TranscriptError::Hash { thread_seq });
        }
        check.verified += 1;
    }
    check.range = Some((first.thread_seq, expected - 1));
    Ok(check)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EventKind;
    use serde_json::json;

    fn journal() -> Vec<JournalEvent> {
        (1..=4)
            .map(|n| JournalEvent {
                seq: 10 + n,
                thread_id: "thr".into(),
                thread_seq: n,
                turn_id: Some("t".into()),
                kind: EventKind::MessageChunk,
                at: n as i64,
                payload: Some(json!({"text": format!("part {n}")})),
                payload_unavailable: false,
            })
            .collect()
    }

    #[test]
    fn a_faithful_range_passes_and_every_kind_of_damage_is_named() {
        let journal = journal();
        let check = assert_transcript(&journal, &journal[1..]).unwrap();
        assert_eq!((check.range, check.verified), (Some((2, 4)), 3));
        assert_eq!(assert_transcript(&journal, &[]).unwrap().range, None);

        let mut tampered = journal.clone();
        tampered[2].payload = Some(json!({"text": "part 3, edited"}));
        assert_eq!(
            assert_transcript(&journal, &tampered),
            Err(TranscriptError::Hash { thread_seq: 3 })
        );
        let mut gap = journal.clone();
        gap.remove(1);
        assert_eq!(
            assert_transcript(&journal, &gap),
            Err(TranscriptError::Sequence {
                expected: 2,
                found: 3
            })
        );
        let mut swapped = journal.clone();
        swapped.swap(0, 1);
        assert!(matches!(
            assert_transcript(&journal, &swapped),
            Err(TranscriptError::Sequence { .. })
        ));
        let mut kind = journal.clone();
        kind[0].kind = EventKind::ThoughtChunk;
        assert_eq!(
            assert_transcript(&journal, &kind),
            Err(TranscriptError::Metadata {
                thread_seq: 1,
                field: "kind"
            })
        );
        let mut beyond = journal.clone();
        let mut extra = beyond[3].clone();
        extra.thread_seq = 5;
        beyond.push(extra);
        assert_eq!(
            assert_transcript(&journal, &beyond),
            Err(TranscriptError::Unknown { thread_seq: 5 })
        );
        let mut stripped = journal.clone();
        stripped[0].payload = None;
        stripped[0].payload_unavailable = true;
        assert_eq!(
            assert_transcript(&journal, &stripped),
            Err(TranscriptError::MissingPayload { thread_seq: 1 })
        );
        // What the journal lost is listed, never counted as verified.
        let check = assert_transcript(&stripped, &journal).unwrap();
        assert_eq!((check.verified, check.unverified), (3, vec![1]));
    }
}
