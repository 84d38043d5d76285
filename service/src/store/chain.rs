//! The tamper-evident journal: a SHA-256 hash chain over the events table.
//!
//! # Canonical encoding (the one definition; tags `lapis-journal-chain/1`, `/2`)
//! `hash(seq) = SHA-256(E)`, stored as the 32 raw bytes in `events.hash`
//! (shown as lowercase hex), where `E` is the concatenation of
//! 1. the domain tag `lapis-journal-chain/1` (its bytes, then one `0x00`),
//! 2. the previous event's hash, 32 bytes (for the first event: 32 zero
//!    bytes, [`GENESIS`]),
//! 3. the fields, in this order: `seq` (i64, 8 bytes big-endian),
//!    `thread_id` (text), `thread_seq` (i64), `turn_id` (optional text),
//!    `kind` (text), `at` (i64), `has_payload` (one byte, 0 or 1), the
//!    stored payload (optional text). A text is its length as u64
//!    big-endian then its UTF-8 bytes; an absent optional field is
//!    `u64::MAX` big-endian and nothing else.
//!
//! Version 2 (tag `lapis-journal-chain/2`, every row from the `seq` that
//! schema 18's `chain_versions` row names) appends one more field after
//! the stored payload: `event_hash` (optional text, the canonical hash a
//! store-bound thread's content kept in memory records). So an
//! `event_hash` edited at rest breaks the chain at its row, and a payload
//! forged to match it cannot be shown after a restart. Rows before that
//! `seq` keep their version-1 hashes and are verified as before (their
//! `event_hash`, if any, is not covered: [`Version::covers_event_hash`]).
//! Which version a row has is itself covered: moving the boundary makes
//! some row hash with the other tag, which its stored hash does not match.
//!
//! The stored payload is the payload text exactly as written to disk (the
//! JSON after redaction), absent when none was (no payload, or a
//! metadata-only thread's content, which lives in memory only). The hash
//! covers it directly, so an edited payload, and a payload removed from a
//! row that had one, both break the chain at that row. Nothing in the
//! controller drops a stored payload; a future purge would have to keep a
//! digest in its place (and this encoding would grow one).
//!
//! # Cost
//! Writing an event costs one SHA-256 over the link (the payload included)
//! and 32 bytes of row; no allocation; redaction and serialization of a
//! streamed payload happen before it reaches the writer
//! (`super::journal::ReadyPayload`). Verification is one pass in `seq`
//! order with borrowed column values, folded into startup validation's own
//! scan of the events table (`super::validate`) so the table is read once;
//! each row is checked against the previous row's *stored* hash, which
//! lets a helper thread hash batches of rows while the scan reads on
//! ([`ChainCheck`]).
//!
//! What must stay true: every event row is inserted with its hash in the
//! same transaction; nothing rewrites a hashed field; verification stops at
//! the first bad `seq` and names it (check `chain`).

use rusqlite::Connection;
use rusqlite::types::ValueRef;
use sha2::{Digest, Sha256};

use crate::domain::StoreResult;

/// A hash in the chain: SHA-256, raw.
pub(super) type Hash = [u8; 32];

/// The hash before the first event.
pub(crate) const GENESIS: Hash = [0; 32];

/// Domain tag of version 1 of the encoding.
const TAG: &[u8] = b"lapis-journal-chain/1\0";

/// Domain tag of version 2 (covers `event_hash`).
const TAG_2: &[u8] = b"lapis-journal-chain/2\0";

/// The version of the encoding a row was linked with (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Version {
    /// Rows written before schema 18: `event_hash` not covered.
    V1,
    /// Rows written since: `event_hash` covered.
    V2,
}

impl Version {
    /// Whether a row of this version has its `event_hash` in its link.
    pub(super) fn covers_event_hash(self) -> bool {
        self == Version::V2
    }
}

/// The version every row the writer inserts now is linked with.
pub(super) const CURRENT: Version = Version::V2;

/// The hashed fields of one event.
#[derive(Debug, Clone, Copy)]
pub(super) struct Link<'a> {
    /// Global sequence.
    pub(crate) seq: i64,
    /// Thread id.
    pub(crate) thread_id: &'a [u8],
    /// Per-thread sequence.
    pub(crate) thread_seq: i64,
    /// Turn id, if any.
    pub(crate) turn_id: Option<&'a [u8]>,
    /// Event kind.
    pub(crate) kind: &'a [u8],
    /// Event time (epoch ms).
    pub(crate) at: i64,
    /// Whether the event had a payload.
    pub(crate) has_payload: bool,
    /// The payload text as stored, when it was written to disk.
    pub(crate) stored_payload: Option<&'a [u8]>,
    /// The event's recorded canonical hash (hex text), if any; linked only
    /// under [`Version::V2`].
    pub(crate) event_hash: Option<&'a [u8]>,
    /// The encoding's version.
    pub(crate) version: Version,
}

/// Feeds the encoding `E` of `link` after `prev` to `put`, piece by piece
/// (see the module docs): the one definition, hashed directly by
/// [`link_hash`] and laid out in a batch by [`ChainCheck`].
fn encode<F: FnMut(&[u8])>(prev: &Hash, link: &Link<'_>, put: &mut F) {
    fn text<F: FnMut(&[u8])>(put: &mut F, bytes: Option<&[u8]>) {
        match bytes {
            Some(b) => {
                put(&(b.len() as u64).to_be_bytes());
                put(b);
            }
            None => put(&u64::MAX.to_be_bytes()),
        }
    }
    put(match link.version {
        Version::V1 => TAG,
        Version::V2 => TAG_2,
    });
    put(prev);
    put(&link.seq.to_be_bytes());
    text(put, Some(link.thread_id));
    put(&link.thread_seq.to_be_bytes());
    text(put, link.turn_id);
    text(put, Some(link.kind));
    put(&link.at.to_be_bytes());
    put(&[u8::from(link.has_payload)]);
    text(put, link.stored_payload);
    if link.version.covers_event_hash() {
        text(put, link.event_hash);
    }
}

/// The hash of `link` after `prev` (see the module docs).
pub(super) fn link_hash(prev: &Hash, link: &Link<'_>) -> Hash {
    let mut h = Sha256::new();
    encode(prev, link, &mut |b| h.update(b));
    h.finalize().into()
}

/// What a verification saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChainReport {
    /// Events checked.
    pub events: u64,
    /// The last event's hash (the chain head) in lowercase hex; [`GENESIS`]
    /// when empty.
    pub head: String,
}

/// The columns [`ChainCheck::row`] reads, in this order, after whatever the
/// caller selects first (`at` is column `first + 5`, …).
pub(super) const COLUMNS: &str =
    "seq, thread_id, thread_seq, turn_id, kind, at, has_payload, payload, hash, event_hash";

/// [`COLUMNS`] of a database from before `event_hash` (schema 17).
pub(super) const COLUMNS_BEFORE_17: &str =
    "seq, thread_id, thread_seq, turn_id, kind, at, has_payload, payload, hash, NULL";

/// The first schema version with `chain_versions` (version 2 links).
pub(super) const V2_SCHEMA: i64 = 18;

/// The first `seq` linked with [`Version::V2`] in a database at schema
/// `version` (`i64::MAX` before [`V2_SCHEMA`]: none). A database at or
/// past it without its `chain_versions` row fails closed: the row decides
/// how every later event is checked.
pub(super) fn v2_from(conn: &Connection, version: i64) -> StoreResult<i64> {
    if version < V2_SCHEMA {
        return Ok(i64::MAX);
    }
    let from: Option<i64> = conn
        .query_row(
            "SELECT from_seq FROM chain_versions WHERE version = 2",
            [],
            |r| r.get(0),
        )
        .or_else(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => Ok(None),
            e => Err(e),
        })
        .map_err(crate::domain::StoreError::from_sqlite)?;
    from.filter(|f| *f >= 1)
        .ok_or(crate::domain::StoreError::InvalidRow {
            table: "chain_versions",
            row: "2".into(),
            check: "from_seq",
        })
}

fn bytes(v: ValueRef<'_>) -> Option<&[u8]> {
    match v {
        ValueRef::Text(t) | ValueRef::Blob(t) => Some(t),
        _ => None,
    }
}

/// Rows per batch handed to a checker.
const BATCH_ROWS: usize = 2048;

/// Rows laid out for checking: each row's encoding `E` (see the module
/// docs, with the previous row's *stored* hash as `prev`) and its stored
/// hash.
#[derive(Debug, Default)]
struct Batch {
    /// The rows' encodings, back to back.
    buf: Vec<u8>,
    /// `(seq, end of its encoding in buf, stored hash)` per row.
    rows: Vec<(i64, usize, Hash)>,
}

impl Batch {
    /// The first row whose stored hash is not the hash of its encoding.
    fn first_bad(&self) -> Option<i64> {
        let mut start = 0;
        for (seq, end, stored) in &self.rows {
            let h: Hash = Sha256::digest(&self.buf[start..*end]).into();
            if h != *stored {
                return Some(*seq);
            }
            start = *end;
        }
        None
    }

    fn clear(&mut self) {
        self.buf.clear();
        self.rows.clear();
    }
}

/// Follows the chain over rows given in `seq` order, hashing in batches
/// that a helper thread checks while the caller reads on.
///
/// Why this is the same check as following the chain one hash at a time:
/// row `n` is checked as `SHA-256(E(stored hash of row n-1, fields of row
/// n)) == stored hash of row n` (row 1 against [`GENESIS`]). If every row
/// up to `n` passes, the stored hashes *are* the chain computed from
/// genesis, by induction; and the first row that fails is exactly the row
/// where a one-at-a-time walk stops. So rows can be checked in any order,
/// on any thread, and the smallest failing `seq` is the answer.
///
/// When the helper is busy (its queue of 2 batches is full) the caller
/// checks the batch itself, so on one core nothing waits and on two the
/// hashing runs beside the table scan. What must stay true: every row
/// added is checked before [`Self::finish`] returns; the answer is the
/// smallest failing `seq`.
pub(super) struct ChainCheck<'scope, 'env> {
    /// Where the helper is spawned (on the first full batch).
    scope: &'scope std::thread::Scope<'scope, 'env>,
    /// Rows being laid out.
    batch: Batch,
    /// The stored hash of the last row added.
    prev: Hash,
    /// Rows added.
    events: u64,
    /// The smallest failing `seq` found by this thread.
    bad: Option<i64>,
    /// Batches to the helper, and emptied batches back.
    helper: Option<Helper<'scope>>,
    /// The `seq` whose stored hash is kept for the anchor check (0: none).
    watch: i64,
    /// The stored hash of row `watch`, once added.
    watched: Option<Hash>,
    /// The first `seq` linked with [`Version::V2`] ([`v2_from`]).
    v2_from: i64,
}

struct Helper<'scope> {
    to: std::sync::mpsc::SyncSender<Batch>,
    back: std::sync::mpsc::Receiver<Batch>,
    done: std::thread::ScopedJoinHandle<'scope, Option<i64>>,
}

fn min_seq(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

impl<'scope, 'env> ChainCheck<'scope, 'env> {
    /// A check starting at [`GENESIS`], rows from `v2_from` on checked as
    /// [`Version::V2`] ([`v2_from`]); a helper thread is spawned in `scope`
    /// once there is more than one batch and more than one CPU.
    pub(super) fn new(scope: &'scope std::thread::Scope<'scope, 'env>, v2_from: i64) -> Self {
        ChainCheck {
            scope,
            batch: Batch::default(),
            prev: GENESIS,
            events: 0,
            bad: None,
            helper: None,
            watch: 0,
            watched: None,
            v2_from,
        }
    }

    /// Keeps the stored hash of row `seq` (see [`Self::watched`]).
    pub(super) fn watch(&mut self, seq: u64) {
        self.watch = i64::try_from(seq).unwrap_or(i64::MAX);
    }

    /// The stored hash of the watched row, if it was added. Meaningful
    /// once [`Self::finish`] found the chain whole up to it.
    pub(super) fn watched(&self) -> Option<Hash> {
        self.watched
    }

    /// Adds the row whose [`COLUMNS`] start at column `at`. Returns `false`
    /// when the row already fails (its stored hash is not 32 bytes): the
    /// caller stops reading; [`Self::finish`] names the first bad `seq`.
    pub(super) fn row(&mut self, r: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<bool> {
        let col = |i: usize| r.get_ref(at + i);
        let seq = col(0)?.as_i64().unwrap_or(-1);
        let link = Link {
            seq,
            thread_id: bytes(col(1)?).unwrap_or_default(),
            thread_seq: col(2)?.as_i64().unwrap_or(-1),
            turn_id: bytes(col(3)?),
            kind: bytes(col(4)?).unwrap_or_default(),
            at: col(5)?.as_i64().unwrap_or(-1),
            has_payload: col(6)?.as_i64().is_ok_and(|h| h != 0),
            stored_payload: bytes(col(7)?),
            event_hash: bytes(col(9)?),
            version: if seq >= self.v2_from {
                Version::V2
            } else {
                Version::V1
            },
        };
        // A row whose other columns have the wrong types is refused by its
        // caller's own checks (validation) or hashes to something else.
        let Some(stored) = col(8)?.as_blob().ok().and_then(|b| Hash::try_from(b).ok()) else {
            self.bad = min_seq(self.bad, Some(seq));
            return Ok(false);
        };
        let buf = &mut self.batch.buf;
        encode(&self.prev, &link, &mut |b| buf.extend_from_slice(b));
        self.batch.rows.push((seq, buf.len(), stored));
        if seq == self.watch {
            self.watched = Some(stored);
        }
        self.prev = stored;
        self.events += 1;
        if self.batch.rows.len() >= BATCH_ROWS {
            self.hand_off();
        }
        Ok(true)
    }

    /// Sends the full batch to the helper, or checks it here when the
    /// helper is busy (or absent).
    fn hand_off(&mut self) {
        if self.helper.is_none() && std::thread::available_parallelism().map_or(1, |n| n.get()) > 1
        {
            let (to, rx) = std::sync::mpsc::sync_channel::<Batch>(2);
            let (tx_back, back) = std::sync::mpsc::channel::<Batch>();
            let done = self.scope.spawn(move || {
                let mut bad = None;
                for mut batch in rx {
                    if bad.is_none() {
                        bad = batch.first_bad();
                    }
                    batch.clear();
                    let _ = tx_back.send(batch);
                }
                bad
            });
            self.helper = Some(Helper { to, back, done });
        }
        let next = self
            .helper
            .as_ref()
            .and_then(|h| h.back.try_recv().ok())
            .unwrap_or_default();
        let batch = std::mem::replace(&mut self.batch, next);
        let batch = match &self.helper {
            Some(h) => match h.to.try_send(batch) {
                Ok(()) => return,
                Err(std::sync::mpsc::TrySendError::Full(b))
                | Err(std::sync::mpsc::TrySendError::Disconnected(b)) => b,
            },
            None => batch,
        };
        if self.bad.is_none() {
            self.bad = batch.first_bad();
        }
        let mut batch = batch;
        batch.clear();
        self.batch = batch;
    }

    /// Adds a tombstone (see `super::tombstone`): its fields are gone, so
    /// it is not hashed; the next row links to its stored hash, and its
    /// receipt's digest covers that hash.
    pub(super) fn tombstone(&mut self, seq: i64, stored: Hash) {
        if seq == self.watch {
            self.watched = Some(stored);
        }
        self.prev = stored;
        self.events += 1;
    }

    /// Checks what is left, waits for the helper, and returns the report,
    /// or the first failing `seq`.
    pub(super) fn finish(mut self) -> Result<ChainReport, i64> {
        let mut bad = min_seq(self.bad, self.batch.first_bad());
        if let Some(h) = self.helper.take() {
            drop(h.to);
            // A panicked helper checked nothing: fail closed on the first row.
            let helper_bad = h.done.join().unwrap_or(Some(1));
            bad = min_seq(bad, helper_bad);
        }
        match bad {
            Some(seq) => Err(seq),
            None => Ok(ChainReport {
                events: self.events,
                head: hex::encode(self.prev),
            }),
        }
    }
}

/// The chain head (the last event's stored hash), [`GENESIS`] when empty or
/// when the stored value is not a hash (validation has failed the open
/// before the writer uses it then).
pub(super) fn head(conn: &Connection) -> StoreResult<Hash> {
    let h: Option<Vec<u8>> = conn
        .query_row(
            "SELECT hash FROM events ORDER BY seq DESC LIMIT 1",
            [],
            |r| r.get(0),
        )
        .or_else(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => Ok(None),
            e => Err(e),
        })?;
    Ok(h.and_then(|h| Hash::try_from(h.as_slice()).ok())
        .unwrap_or(GENESIS))
}

mod relink;
pub(super) use relink::backfill;
#[cfg(test)]
pub(super) use relink::relink;
