//! The tamper-evident journal: a SHA-256 hash chain over the events table.
//!
//! # Canonical encoding (the one definition; tag `lapis-journal-chain/1`)
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
//! and 32 bytes of row; no allocation. Verification is one pass in
//! `seq` order with borrowed column values and no per-row allocation, folded
//! into startup validation's own scan of the events table
//! (`super::validate`) so the table is read once.
//!
//! What must stay true: every event row is inserted with its hash in the
//! same transaction; nothing rewrites a hashed field; verification stops at
//! the first bad `seq` and names it (check `chain`).

use rusqlite::Connection;
use rusqlite::types::ValueRef;
use sha2::{Digest, Sha256};

use crate::domain::{StoreError, StoreResult};

/// A hash in the chain: SHA-256, raw.
pub(super) type Hash = [u8; 32];

/// The hash before the first event.
pub(crate) const GENESIS: Hash = [0; 32];

/// Domain tag of the encoding.
const TAG: &[u8] = b"lapis-journal-chain/1\0";

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
}

fn text(h: &mut Sha256, bytes: Option<&[u8]>) {
    match bytes {
        Some(b) => {
            h.update((b.len() as u64).to_be_bytes());
            h.update(b);
        }
        None => h.update(u64::MAX.to_be_bytes()),
    }
}

/// The hash of `link` after `prev` (see the module docs).
pub(super) fn link_hash(prev: &Hash, link: &Link<'_>) -> Hash {
    let mut h = Sha256::new();
    h.update(TAG);
    h.update(prev);
    h.update(link.seq.to_be_bytes());
    text(&mut h, Some(link.thread_id));
    h.update(link.thread_seq.to_be_bytes());
    text(&mut h, link.turn_id);
    text(&mut h, Some(link.kind));
    h.update(link.at.to_be_bytes());
    h.update([u8::from(link.has_payload)]);
    text(&mut h, link.stored_payload);
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

/// The columns [`Verifier::row`] reads, in this order, after whatever the
/// caller selects first (`at` is column `first + 5`, …).
pub(super) const COLUMNS: &str =
    "seq, thread_id, thread_seq, turn_id, kind, at, has_payload, payload, hash";

/// Follows the chain one row at a time, in `seq` order (see the module
/// docs); holds only the previous hash.
#[derive(Debug)]
pub(super) struct Verifier {
    /// The hash the next row must chain from.
    prev: Hash,
    /// Rows checked.
    events: u64,
}

impl Default for Verifier {
    fn default() -> Self {
        Verifier {
            prev: GENESIS,
            events: 0,
        }
    }
}

fn bytes(v: ValueRef<'_>) -> Option<&[u8]> {
    match v {
        ValueRef::Text(t) | ValueRef::Blob(t) => Some(t),
        _ => None,
    }
}

impl Verifier {
    /// Checks one row whose [`COLUMNS`] start at column `at`. Returns
    /// whether its stored hash is the one the chain expects; a row whose
    /// columns do not even have the right types is not.
    pub(super) fn row(&mut self, r: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<bool> {
        let col = |i: usize| r.get_ref(at + i);
        let (Ok(seq), Some(thread_id), Ok(thread_seq), Some(kind), Ok(when), Ok(has)) = (
            col(0)?.as_i64(),
            bytes(col(1)?),
            col(2)?.as_i64(),
            bytes(col(4)?),
            col(5)?.as_i64(),
            col(6)?.as_i64(),
        ) else {
            return Ok(false);
        };
        let link = Link {
            seq,
            thread_id,
            thread_seq,
            turn_id: bytes(col(3)?),
            kind,
            at: when,
            has_payload: has != 0,
            stored_payload: bytes(col(7)?),
        };
        let expected = link_hash(&self.prev, &link);
        if col(8)?.as_blob().ok() != Some(&expected[..]) {
            return Ok(false);
        }
        self.prev = expected;
        self.events += 1;
        Ok(true)
    }

    /// What was verified so far.
    pub(super) fn report(&self) -> ChainReport {
        ChainReport {
            events: self.events,
            head: hex::encode(self.prev),
        }
    }
}

/// Verifies the whole chain in `seq` order; the first bad event fails as
/// `InvalidRow { table: "events", row: seq, check: "chain" }`.
pub(super) fn verify(conn: &Connection) -> StoreResult<ChainReport> {
    let mut stmt = conn.prepare(&format!("SELECT {COLUMNS} FROM events ORDER BY seq"))?;
    let mut rows = stmt.query([]).map_err(StoreError::from_sqlite)?;
    let mut chain = Verifier::default();
    while let Some(r) = rows.next().map_err(StoreError::from_sqlite)? {
        if !chain.row(r, 0).map_err(StoreError::from_sqlite)? {
            let seq = r.get_ref(0)?.as_i64().unwrap_or(-1);
            return Err(StoreError::InvalidRow {
                table: "events",
                row: seq.to_string(),
                check: "chain",
            });
        }
    }
    Ok(chain.report())
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

/// Migration step: chain every existing row once, in `seq` order, inside
/// the migration's transaction.
pub(super) fn backfill(conn: &Connection) -> StoreResult<()> {
    let mut hashes: Vec<(i64, Hash)> = Vec::new();
    {
        let mut stmt = conn.prepare(
            "SELECT seq, thread_id, thread_seq, turn_id, kind, at, has_payload, payload \
             FROM events ORDER BY seq",
        )?;
        let mut rows = stmt.query([])?;
        let mut prev = GENESIS;
        while let Some(r) = rows.next()? {
            let seq: i64 = r.get(0)?;
            let link = Link {
                seq,
                thread_id: bytes(r.get_ref(1)?).unwrap_or_default(),
                thread_seq: r.get(2)?,
                turn_id: bytes(r.get_ref(3)?),
                kind: bytes(r.get_ref(4)?).unwrap_or_default(),
                at: r.get(5)?,
                has_payload: r.get::<_, i64>(6)? != 0,
                stored_payload: bytes(r.get_ref(7)?),
            };
            prev = link_hash(&prev, &link);
            hashes.push((seq, prev));
        }
    }
    let mut update = conn.prepare("UPDATE events SET hash = ?2 WHERE seq = ?1")?;
    for (seq, hash) in &hashes {
        update.execute(rusqlite::params![seq, &hash[..]])?;
    }
    Ok(())
}
