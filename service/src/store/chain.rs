//! The tamper-evident journal: a SHA-256 hash chain over the events table.
//!
//! # Canonical encoding (the one definition; version `lapis-journal-chain/1`)
//! `hash(seq) = hex(SHA-256(E))`, lowercase, where `E` is the concatenation of
//! 1. the domain tag `lapis-journal-chain/1` (its bytes, then one `0x00`),
//! 2. the previous event's hash as 64 lowercase hex bytes (for `seq` 1:
//!    64 `0` bytes),
//! 3. the fields, each as an 8-byte big-endian length then its UTF-8 bytes
//!    (an absent field is the length `u64::MAX` and no bytes), in this order:
//!    `seq` (decimal), `thread_id`, `thread_seq` (decimal), `turn_id`,
//!    `kind`, `at` (decimal), `has_payload` (`0`/`1`), `payload_sha256`.
//!
//! `payload_sha256` is the lowercase hex SHA-256 of the payload text exactly
//! as stored (the JSON after redaction), absent when no payload was written
//! to disk. A payload dropped later (metadata-only retention) leaves its
//! digest in place, so the chain still verifies; a payload present must match
//! its digest. The chain's order is the journal's global `seq`.
//!
//! What must stay true: every event row is inserted with its hash in the same
//! transaction; nothing rewrites a hashed field; verification stops at the
//! first bad `seq` and names it.

use rusqlite::Connection;
use rusqlite::types::ValueRef;
use sha2::{Digest, Sha256};

use crate::domain::{StoreError, StoreResult};

/// The hash before the first event.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Domain tag of the encoding.
const TAG: &[u8] = b"lapis-journal-chain/1\0";

/// The hashed fields of one event.
#[derive(Debug, Clone, Copy)]
pub struct Link<'a> {
    /// Global sequence.
    pub seq: i64,
    /// Thread id.
    pub thread_id: &'a str,
    /// Per-thread sequence.
    pub thread_seq: i64,
    /// Turn id, if any.
    pub turn_id: Option<&'a str>,
    /// Event kind.
    pub kind: &'a str,
    /// Event time (epoch ms).
    pub at: i64,
    /// Whether the event had a payload.
    pub has_payload: bool,
    /// Digest of the stored payload text.
    pub payload_sha256: Option<&'a str>,
}

/// Lowercase hex SHA-256 of a stored payload text.
pub fn payload_digest(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

fn field(h: &mut Sha256, bytes: Option<&[u8]>) {
    match bytes {
        Some(b) => {
            h.update((b.len() as u64).to_be_bytes());
            h.update(b);
        }
        None => h.update(u64::MAX.to_be_bytes()),
    }
}

/// The hash of `link` after `prev` (see the module docs).
pub fn link_hash(prev: &str, link: &Link<'_>) -> String {
    let mut h = Sha256::new();
    h.update(TAG);
    h.update(prev.as_bytes());
    field(&mut h, Some(link.seq.to_string().as_bytes()));
    field(&mut h, Some(link.thread_id.as_bytes()));
    field(&mut h, Some(link.thread_seq.to_string().as_bytes()));
    field(&mut h, link.turn_id.map(str::as_bytes));
    field(&mut h, Some(link.kind.as_bytes()));
    field(&mut h, Some(link.at.to_string().as_bytes()));
    field(&mut h, Some(if link.has_payload { b"1" } else { b"0" }));
    field(&mut h, link.payload_sha256.map(str::as_bytes));
    hex::encode(h.finalize())
}

/// What a verification saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChainReport {
    /// Events checked.
    pub events: u64,
    /// The last event's hash (the chain head), [`GENESIS`] when empty.
    pub head: String,
}

fn text<'a>(v: ValueRef<'a>) -> Option<&'a str> {
    match v {
        ValueRef::Text(t) => std::str::from_utf8(t).ok(),
        _ => None,
    }
}

/// Verifies the whole chain in `seq` order; the first bad event fails as
/// `InvalidRow { table: "events", row: seq, check: "chain" }` (or
/// `payload_digest` when a present payload does not match its digest).
pub fn verify(conn: &Connection) -> StoreResult<ChainReport> {
    let mut stmt = conn.prepare(
        "SELECT seq, thread_id, thread_seq, turn_id, kind, at, has_payload, payload_sha256, \
         payload, hash FROM events ORDER BY seq",
    )?;
    let mut rows = stmt.query([]).map_err(StoreError::from_sqlite)?;
    let mut prev = GENESIS.to_owned();
    let mut events = 0;
    while let Some(r) = rows.next().map_err(StoreError::from_sqlite)? {
        let seq: i64 = r.get_ref(0)?.as_i64().unwrap_or(-1);
        let bad = |check: &'static str| StoreError::InvalidRow {
            table: "events",
            row: seq.to_string(),
            check,
        };
        let digest = match r.get_ref(7)? {
            ValueRef::Null => None,
            v => Some(text(v).ok_or_else(|| bad("chain"))?),
        };
        if let (Some(d), Some(p)) = (digest, text(r.get_ref(8)?)) {
            if payload_digest(p) != d {
                return Err(bad("payload_digest"));
            }
        } else if digest.is_none() && !matches!(r.get_ref(8)?, ValueRef::Null) {
            return Err(bad("payload_digest"));
        }
        let link = Link {
            seq,
            thread_id: text(r.get_ref(1)?).ok_or_else(|| bad("chain"))?,
            thread_seq: r.get_ref(2)?.as_i64().map_err(|_| bad("chain"))?,
            turn_id: text(r.get_ref(3)?),
            kind: text(r.get_ref(4)?).ok_or_else(|| bad("chain"))?,
            at: r.get_ref(5)?.as_i64().map_err(|_| bad("chain"))?,
            has_payload: r.get_ref(6)?.as_i64().map_err(|_| bad("chain"))? != 0,
            payload_sha256: digest,
        };
        let expected = link_hash(&prev, &link);
        if text(r.get_ref(9)?) != Some(expected.as_str()) {
            return Err(bad("chain"));
        }
        prev = expected;
        events += 1;
    }
    Ok(ChainReport { events, head: prev })
}

/// The chain head (the last event's stored hash), [`GENESIS`] when empty.
pub fn head(conn: &Connection) -> StoreResult<String> {
    let h: Option<String> = conn
        .query_row(
            "SELECT hash FROM events ORDER BY seq DESC LIMIT 1",
            [],
            |r| r.get(0),
        )
        .or_else(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => Ok(None),
            e => Err(e),
        })?;
    Ok(h.unwrap_or_else(|| GENESIS.to_owned()))
}

/// An event row as the backfill reads it: seq, thread, thread seq, turn,
/// kind, at, has_payload, payload.
type Row = (
    i64,
    String,
    i64,
    Option<String>,
    String,
    i64,
    bool,
    Option<String>,
);

/// Migration step: digest every stored payload and chain every existing
/// row, once, inside the migration's transaction.
pub fn backfill(conn: &Connection) -> StoreResult<()> {
    let rows: Vec<Row> = {
        let mut stmt = conn.prepare(
            "SELECT seq, thread_id, thread_seq, turn_id, kind, at, has_payload, payload \
             FROM events ORDER BY seq",
        )?;
        stmt.query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
                r.get(7)?,
            ))
        })?
        .collect::<Result<_, _>>()?
    };
    let mut update =
        conn.prepare("UPDATE events SET payload_sha256 = ?2, hash = ?3 WHERE seq = ?1")?;
    let mut prev = GENESIS.to_owned();
    for (seq, thread_id, thread_seq, turn_id, kind, at, has_payload, payload) in &rows {
        let digest = payload.as_deref().map(payload_digest);
        let hash = link_hash(
            &prev,
            &Link {
                seq: *seq,
                thread_id,
                thread_seq: *thread_seq,
                turn_id: turn_id.as_deref(),
                kind,
                at: *at,
                has_payload: *has_payload,
                payload_sha256: digest.as_deref(),
            },
        );
        update.execute(rusqlite::params![seq, digest, hash])?;
        prev = hash;
    }
    Ok(())
}
