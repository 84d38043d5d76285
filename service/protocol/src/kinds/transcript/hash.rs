//! The canonical event hash: one SHA-256 per journal event, computable by
//! anyone holding the event, so a transcript stored outside the controller
//! can be checked against the journal.
//!
//! # Encoding (the one definition; tag `lapis-transcript-event/1`)
//! `event_hash(e) = SHA-256(E)`, shown as 64 lowercase hex digits, where
//! `E` is the concatenation of
//! 1. the tag `lapis-transcript-event/1` (its bytes, then one `0x00`),
//! 2. `thread_id` (text), `thread_seq` (u64, 8 bytes big-endian),
//!    `turn_id` (optional text), `kind` (its stored name, text), `at`
//!    (i64 ms, 8 bytes big-endian, two's complement), and the payload
//!    (optional text: its canonical JSON).
//!
//! A text is its length as u64 big-endian then its UTF-8 bytes; an absent
//! optional field is `u64::MAX` big-endian and nothing else. Canonical JSON
//! is the compact form with every object's keys sorted by their UTF-8
//! bytes, strings escaped as `serde_json` escapes them and numbers as
//! `serde_json` prints them: the same value always encodes the same way,
//! whatever order its members were written in.
//!
//! What must stay true: the owner-wide `seq` is not hashed (it belongs to
//! one controller's journal, and a transcript may be replayed into
//! another); everything a reader sees of the event is. An event whose
//! payload is unavailable has no hash here: there is nothing to hash.

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::JournalEvent;

/// Domain tag of the encoding.
const TAG: &[u8] = b"lapis-transcript-event/1\0";

/// A canonical event hash: 64 lowercase hex digits.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EventHash(String);

impl EventHash {
    /// The hex digits.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Reads a hash from its hex form (exactly 64 lowercase hex digits).
    pub fn parse(hex: &str) -> Option<EventHash> {
        (hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
            .then(|| EventHash(hex.to_owned()))
    }
}

impl std::fmt::Display for EventHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The canonical hash of `event` (see the module docs), `None` when its
/// payload is unavailable.
pub fn event_hash(event: &JournalEvent) -> Option<EventHash> {
    if event.payload_unavailable {
        return None;
    }
    let mut hasher = Sha256::new();
    hasher.update(TAG);
    text(&mut hasher, Some(event.thread_id.as_bytes()));
    hasher.update(event.thread_seq.to_be_bytes());
    text(&mut hasher, event.turn_id.as_deref().map(str::as_bytes));
    text(&mut hasher, Some(event.kind.as_str().as_bytes()));
    hasher.update(event.at.to_be_bytes());
    let payload = event.payload.as_ref().map(|p| {
        let mut out = Vec::new();
        canonical_json(p, &mut out);
        out
    });
    text(&mut hasher, payload.as_deref());
    let digest = hasher.finalize();
    let mut hex = String::with_capacity(64);
    for b in digest {
        hex.push(char::from(HEX[usize::from(b >> 4)]));
        hex.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    Some(EventHash(hex))
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn text(hasher: &mut Sha256, bytes: Option<&[u8]>) {
    match bytes {
        Some(b) => {
            hasher.update((b.len() as u64).to_be_bytes());
            hasher.update(b);
        }
        None => hasher.update(u64::MAX.to_be_bytes()),
    }
}

/// Appends the canonical JSON of `value` to `out`.
pub(crate) fn canonical_json(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut members: Vec<(&String, &Value)> = map.iter().collect();
            members.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push(b'{');
            for (i, (k, v)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                scalar(&Value::String(k.clone()), out);
                out.push(b':');
                canonical_json(v, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                canonical_json(v, out);
            }
            out.push(b']');
        }
        other => scalar(other, out),
    }
}

fn scalar(value: &Value, out: &mut Vec<u8>) {
    // A scalar's compact form is already unique.
    let _ = serde_json::to_writer(&mut *out, value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EventKind;
    use serde_json::json;

    fn event(payload: Option<Value>) -> JournalEvent {
        JournalEvent {
            seq: 7,
            thread_id: "thr_1".into(),
            thread_seq: 3,
            turn_id: Some("trn_1".into()),
            kind: EventKind::MessageChunk,
            at: 1_700_000_000_000,
            payload,
            payload_unavailable: false,
        }
    }

    #[test]
    fn member_order_and_whitespace_do_not_change_the_hash() {
        let a: Value = serde_json::from_str(r#"{"text":"hi","messageId":"m"}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{ "messageId" : "m", "text" : "hi" }"#).unwrap();
        assert_eq!(event_hash(&event(Some(a))), event_hash(&event(Some(b))));
        let mut out = Vec::new();
        canonical_json(
            &json!({"b": [1, {"z": null, "a": "é\n"}], "a": true}),
            &mut out,
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"a":true,"b":[1,{"a":"é\n","z":null}]}"#
        );
    }

    #[test]
    fn every_field_but_the_global_seq_is_covered() {
        let base = event(Some(json!({"text": "hi"})));
        let h = event_hash(&base).unwrap();
        assert_eq!(h.as_str().len(), 64);
        assert_eq!(EventHash::parse(h.as_str()), Some(h.clone()));
        let mut other_seq = base.clone();
        other_seq.seq = 99;
        assert_eq!(event_hash(&other_seq).as_ref(), Some(&h));
        let changes: [fn(&mut JournalEvent); 7] = [
            |e| e.thread_id = "thr_2".into(),
            |e| e.thread_seq = 4,
            |e| e.turn_id = None,
            |e| e.kind = EventKind::ThoughtChunk,
            |e| e.at += 1,
            |e| e.payload = Some(json!({"text": "hi!"})),
            |e| e.payload = None,
        ];
        for change in changes {
            let mut e = base.clone();
            change(&mut e);
            assert_ne!(event_hash(&e).as_ref(), Some(&h), "{e:?}");
        }
        let mut gone = base;
        gone.payload = None;
        gone.payload_unavailable = true;
        assert_eq!(event_hash(&gone), None);
    }

    #[test]
    fn the_encoding_is_pinned() {
        // A change to the encoding breaks every stored transcript: it
        // needs a new tag, not an edit. The value was computed apart from
        // this code (Python's hashlib over the bytes the module docs
        // describe).
        let h = event_hash(&event(Some(json!({"text": "hi"})))).unwrap();
        assert_eq!(h.as_str(), PINNED);
    }

    const PINNED: &str = "b8416c4106800f56c110807bb496e2bc14524ee86c0adf05b138f45649e0e5e9";
}
