//! Issue 44 item 5: a thread's journal as a bundle that can be checked
//! offline ([`export_thread`], [`verify_bundle`]; the CLI's `threads
//! export [--verify]`); `threads import` journals a verified bundle again
//! as a new thread (`super::import`).
//!
//! # Format (`lapis-thread-bundle/1`)
//! JSON lines, each the canonical serialization of its record (what
//! `serde_json` writes for it, so a byte edited anywhere is either a
//! different value or a non-canonical line): a [`Header`] (the thread, its
//! retention, i.e. the redaction state, the event count and the anchor's
//! position), one [`BundleEvent`] per event of the thread in `seq` order
//! (every hashed field as stored, the previous event's chain hash and the
//! event's own), then a trailer `{"digest":"<sha-256 of every byte before
//! it>"}`. Content is what the journal retained: payloads are the stored
//! (redacted) text, absent for a metadata-only thread.
//!
//! What verification proves: every event's stored hash is the chain link
//! of its fields after its `prev` (the chain's one encoding,
//! `super::chain::link_hash`), consecutive events link to each other, the
//! lines are canonical and complete; an event history retention pruned
//! (a tombstone, `super::tombstone`) is taken by its stored hash and must
//! be covered by its `history_pruned` receipt in the bundle, as `journal
//! verify` requires. What it cannot prove alone: that a
//! forger who recomputes an edited event's hash and the digest did not
//! make the bundle — the chain between this thread's events runs through
//! other threads' events, which a bundle does not carry. Checking the
//! events' hashes against the exporting controller (or a signature) is the
//! open design question of the import slice.

use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::domain::{StoreError, StoreResult};

use super::chain::{self, GENESIS, Hash, Link, Version};
use super::schema;
use super::tombstone;

/// The format tag of the header.
pub const BUNDLE_FORMAT: &str = "lapis-thread-bundle/1";

/// The first line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Header {
    /// [`BUNDLE_FORMAT`].
    pub format: String,
    /// The exported thread's id.
    pub thread: String,
    /// Its retention (`full` or `metadata-only`): the redaction state.
    pub retention: String,
    /// Event lines that follow.
    pub events: u64,
    /// The anchor's position when exported: events in the durable prefix.
    pub anchor_events: u64,
    /// The chain hash at that position (hex).
    pub anchor_head: String,
    /// The path of the thread's workspace when exported (where `threads
    /// import` looks for a workspace by default). Absent in bundles
    /// written before import existed, which stay canonical.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_path: Option<String>,
}

/// One event line: the hashed fields as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BundleEvent {
    /// Global sequence.
    pub seq: i64,
    /// Per-thread sequence.
    pub thread_seq: i64,
    /// Turn id.
    pub turn_id: Option<String>,
    /// Event kind.
    pub kind: String,
    /// Epoch ms.
    pub at: i64,
    /// Whether the event had a payload.
    pub has_payload: bool,
    /// The stored (redacted) payload text, when retained.
    pub payload: Option<String>,
    /// The recorded canonical event hash, if any.
    pub event_hash: Option<String>,
    /// Chain encoding version (1 or 2).
    pub chain: u8,
    /// The previous event's chain hash (hex).
    pub prev: String,
    /// This event's chain hash (hex).
    pub hash: String,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Trailer {
    digest: String,
}

/// Why a bundle is refused: the byte range `[start, end)` of the line at
/// fault and what is wrong there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bundle refused at bytes {start}..{end}: {reason}")]
pub struct BundleError {
    /// First byte of the offending line.
    pub start: usize,
    /// One past its last byte (its newline excluded).
    pub end: usize,
    /// What is wrong.
    pub reason: String,
    /// The bundle is not of this format version (`bundle_unsupported`),
    /// rather than edited (`bundle_tampered`).
    pub unsupported: bool,
}

impl BundleError {
    /// The stable code: `bundle_tampered`, or `bundle_unsupported` for
    /// another format version.
    pub fn code(&self) -> &'static str {
        if self.unsupported {
            "bundle_unsupported"
        } else {
            "bundle_tampered"
        }
    }
}

/// What a verified bundle holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleReport {
    /// The header.
    pub header: Header,
    /// Events verified.
    pub events: u64,
}

fn hash_of(bytes: Option<Vec<u8>>) -> Option<Hash> {
    bytes.and_then(|b| b.try_into().ok())
}

/// The bundle of thread `thread` (its id or a unique prefix of it) of the
/// database at `db`, read-only (works while `serve` runs; a read sees the
/// last commit). An unknown thread fails `not_found`, a prefix two threads
/// share `invalid_request`, a deleted thread `thread_deleted`.
pub fn export_thread(db: &Path, thread: &str) -> StoreResult<Vec<u8>> {
    let anchor = super::anchor::read(db)?.unwrap_or(super::anchor::Anchor::EMPTY);
    let conn = schema::open_reader(db)?;
    let version = schema::check_chained(&conn, db)?;
    let v2_from = chain::v2_from(&conn, version)?;
    let thread = resolve(&conn, thread)?;
    let thread = thread.as_str();
    let (retention, workspace_path): (String, Option<String>) = conn
        .query_row(
            "SELECT t.retention, (SELECT w.path FROM workspaces w WHERE w.id = t.workspace_id) \
             FROM threads t WHERE t.id = ?1 AND t.deleted_at IS NULL",
            [thread],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => super::ops_delete::gone(&conn, thread),
            e => StoreError::from_sqlite(e),
        })?;
    let mut stmt = conn.prepare(
        "SELECT e.seq, e.thread_seq, e.turn_id, e.kind, e.at, e.has_payload, e.payload, \
         e.event_hash, e.hash, (SELECT p.hash FROM events p WHERE p.seq = e.seq - 1) \
         FROM events e WHERE e.thread_id = ?1 ORDER BY e.seq",
    )?;
    let rows = stmt
        .query_map([thread], |r| {
            let seq: i64 = r.get(0)?;
            Ok(BundleEvent {
                seq,
                thread_seq: r.get(1)?,
                turn_id: r.get(2)?,
                kind: r.get(3)?,
                at: r.get(4)?,
                has_payload: r.get(5)?,
                payload: r.get(6)?,
                event_hash: r.get(7)?,
                chain: if seq >= v2_from { 2 } else { 1 },
                hash: hex::encode(r.get::<_, Vec<u8>>(8)?),
                prev: hex::encode(hash_of(r.get(9)?).unwrap_or(GENESIS)),
            })
        })?
        .collect::<Result<Vec<_>, _>>()
        .map_err(StoreError::from_sqlite)?;
    let header = Header {
        format: BUNDLE_FORMAT.to_owned(),
        thread: thread.to_owned(),
        retention,
        events: rows.len() as u64,
        anchor_events: anchor.events,
        anchor_head: hex::encode(anchor.head),
        workspace_path,
    };
    let mut out = Vec::new();
    line(&header, &mut out)?;
    for e in &rows {
        line(e, &mut out)?;
    }
    let digest = hex::encode(Sha256::digest(&out));
    line(&Trailer { digest }, &mut out)?;
    Ok(out)
}

/// The thread whose id is `given` or starts with it.
fn resolve(conn: &rusqlite::Connection, given: &str) -> StoreResult<String> {
    let mut stmt = conn.prepare(
        "SELECT id FROM threads WHERE substr(id, 1, length(?1)) = ?1 \
         ORDER BY id = ?1 DESC, id LIMIT 2",
    )?;
    let ids = stmt
        .query_map([given], |r| r.get::<_, String>(0))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(StoreError::from_sqlite)?;
    match ids.as_slice() {
        [] => Err(StoreError::not_found("thread", given)),
        [one, ..] if one == given => Ok(one.clone()),
        [one] => Ok(one.clone()),
        _ => Err(StoreError::InvalidRequest {
            reason: format!("thread id prefix `{given}` matches more than one thread"),
        }),
    }
}

/// Appends `record`'s canonical line.
fn line<T: Serialize>(record: &T, out: &mut Vec<u8>) -> StoreResult<()> {
    serde_json::to_writer(&mut *out, record).map_err(|e| StoreError::InvalidRequest {
        reason: format!("a bundle line does not serialize ({e})"),
    })?;
    out.push(b'\n');
    Ok(())
}

/// Parses one line as `T` and requires it canonical.
fn record<T: Serialize + for<'de> Deserialize<'de>>(
    text: &[u8],
    start: usize,
) -> Result<T, BundleError> {
    let refuse = |reason: String| BundleError {
        start,
        end: start + text.len(),
        reason,
        unsupported: false,
    };
    let value: T =
        serde_json::from_slice(text).map_err(|e| refuse(format!("not a bundle record ({e})")))?;
    let again = serde_json::to_string(&value).map_err(|e| refuse(e.to_string()))?;
    if again.as_bytes() != text {
        return Err(refuse("the line is not as exported (not canonical)".into()));
    }
    Ok(value)
}

/// Verifies `bytes` as a bundle, offline: nothing but the bytes is read.
/// The first fault names its line's byte range.
pub fn verify_bundle(bytes: &[u8]) -> Result<BundleReport, BundleError> {
    read_bundle(bytes).map(|(report, _)| report)
}

/// [`verify_bundle`], with the verified event lines.
pub(crate) fn read_bundle(bytes: &[u8]) -> Result<(BundleReport, Vec<BundleEvent>), BundleError> {
    let mut lines = Vec::new();
    let mut start = 0;
    while start < bytes.len() {
        let end = bytes[start..]
            .iter()
            .position(|b| *b == b'\n')
            .map_or(bytes.len(), |i| start + i);
        lines.push((start, end));
        start = end + 1;
    }
    let whole = BundleError {
        start: 0,
        end: bytes.len(),
        reason: String::new(),
        unsupported: false,
    };
    if !bytes.ends_with(b"\n") || lines.len() < 2 {
        return Err(BundleError {
            reason: "truncated: no trailer line".into(),
            ..whole
        });
    }
    let (hs, he) = lines[0];
    let at = |(s, e): (usize, usize), reason: String| BundleError {
        start: s,
        end: e,
        reason,
        unsupported: false,
    };
    // The format first: another version's header may have other fields.
    // It is another version (not an edit) only when its digest still
    // covers every byte: a byte flipped in the tag is `bundle_tampered`.
    #[derive(Deserialize)]
    struct Format {
        format: String,
    }
    let (ts, te) = lines[lines.len() - 1];
    let sealed = serde_json::from_slice::<Trailer>(&bytes[ts..te])
        .is_ok_and(|t| t.digest == hex::encode(Sha256::digest(&bytes[..ts])));
    if let Ok(f) = serde_json::from_slice::<Format>(&bytes[hs..he])
        && f.format != BUNDLE_FORMAT
        && sealed
    {
        return Err(BundleError {
            unsupported: true,
            ..at(
                lines[0],
                format!("format `{}`, not `{BUNDLE_FORMAT}`", f.format),
            )
        });
    }
    let header: Header = record(&bytes[hs..he], hs)?;
    let events = &lines[1..lines.len() - 1];
    let mut verified = Vec::with_capacity(events.len());
    let mut last: Option<(i64, i64, Hash)> = None;
    let mut pruned = Pruned::default();
    for &(s, e) in events {
        let ev: BundleEvent = record(&bytes[s..e], s)?;
        let bad = |reason: String| at((s, e), reason);
        let decode = |h: &str| -> Option<Hash> { hex::decode(h).ok()?.try_into().ok() };
        let (Some(prev), Some(hash)) = (decode(&ev.prev), decode(&ev.hash)) else {
            return Err(bad("a hash is not 32 bytes of hex".into()));
        };
        if let Some((seq, thread_seq, _)) = last
            && (ev.seq <= seq || ev.thread_seq <= thread_seq)
        {
            return Err(bad(format!("seq {} out of order", ev.seq)));
        }
        if ev.kind == tombstone::KIND {
            // A pruned event: its fields are gone, so it is taken by its
            // stored hash and must be covered by its receipt (below).
            if ev.turn_id.is_some() || ev.payload.is_some() || ev.event_hash.is_some() {
                return Err(bad(format!("seq {}: a tombstone with content", ev.seq)));
            }
            if let Some((seq, _, h)) = last
                && ev.seq == seq + 1
                && prev != h
            {
                return Err(bad(format!("seq {} does not link to seq {seq}", ev.seq)));
            }
            pruned.tombstone(ev.at, ev.seq, &hash, (s, e));
            last = Some((ev.seq, ev.thread_seq, hash));
            verified.push(ev);
            continue;
        }
        if ev.kind == lapis_protocol::EventKind::HistoryPruned.as_str() {
            let receipt = ev
                .payload
                .as_deref()
                .and_then(|p| serde_json::from_str::<lapis_protocol::HistoryPruned>(p).ok())
                .filter(|r| r.thread_id == header.thread);
            let Some(receipt) = receipt else {
                return Err(bad(format!("seq {}: not a receipt of this thread", ev.seq)));
            };
            pruned.receipts.push((ev.seq, receipt, (s, e)));
        }
        if let Some((seq, _, h)) = last
            && ev.seq == seq + 1
            && prev != h
        {
            return Err(bad(format!("seq {} does not link to seq {seq}", ev.seq)));
        }
        let version = match ev.chain {
            1 => Version::V1,
            2 => Version::V2,
            n => return Err(bad(format!("unknown chain version {n}"))),
        };
        let link = Link {
            seq: ev.seq,
            thread_id: header.thread.as_bytes(),
            thread_seq: ev.thread_seq,
            turn_id: ev.turn_id.as_deref().map(str::as_bytes),
            kind: ev.kind.as_bytes(),
            at: ev.at,
            has_payload: ev.has_payload,
            stored_payload: ev.payload.as_deref().map(str::as_bytes),
            event_hash: ev.event_hash.as_deref().map(str::as_bytes),
            version,
        };
        if chain::link_hash(&prev, &link) != hash {
            return Err(bad(format!(
                "seq {}: its fields do not hash to its chain hash",
                ev.seq
            )));
        }
        last = Some((ev.seq, ev.thread_seq, hash));
        verified.push(ev);
    }
    if let Err((range, reason)) = pruned.check() {
        return Err(at(range, reason));
    }
    if header.events != events.len() as u64 {
        // The lines are sound but too few or many: the end is at fault (a
        // line cut, or the last event run into the trailer).
        return Err(at(
            lines[lines.len() - 1],
            format!(
                "the header counts {} events, the bundle has {}",
                header.events,
                events.len()
            ),
        ));
    }
    let trailer: Trailer = record(&bytes[ts..te], ts)?;
    if trailer.digest != hex::encode(Sha256::digest(&bytes[..ts])) {
        return Err(at(
            (ts, te),
            "the digest does not match the lines before it".into(),
        ));
    }
    Ok((
        BundleReport {
            events: events.len() as u64,
            header,
        },
        verified,
    ))
}

/// A line's byte range.
type Range = (usize, usize);

/// One retention pass's tombstones seen in a bundle, with the line of the
/// first.
struct Group {
    tombs: tombstone::Group,
    range: Range,
}

/// The bundle's pruned events (tombstones, grouped by their `at`: the
/// `seq` of the `history_pruned` receipt that covers them) and receipts,
/// checked as `journal verify` checks them (`super::tombstone`).
#[derive(Default)]
struct Pruned {
    groups: std::collections::HashMap<i64, Group>,
    receipts: Vec<(i64, lapis_protocol::HistoryPruned, Range)>,
}

impl Pruned {
    fn tombstone(&mut self, at: i64, seq: i64, hash: &Hash, range: Range) {
        let g = self.groups.entry(at).or_insert_with(|| Group {
            tombs: tombstone::Group::starting_at(seq),
            range,
        });
        g.tombs.add(seq, hash);
    }

    /// Every tombstone covered by its receipt and every receipt matching
    /// its tombstones; otherwise the first line at fault.
    fn check(mut self) -> Result<(), (Range, String)> {
        let mut faults: Vec<(Range, String)> = Vec::new();
        for (seq, r, range) in self.receipts {
            let group = self.groups.remove(&seq);
            let matches = tombstone::Group::matches(
                group.map(|g| g.tombs),
                seq,
                r.events,
                r.first_seq,
                r.last_seq,
                &r.digest,
            );
            if !matches {
                faults.push((
                    range,
                    format!("seq {seq}: the receipt does not match its tombstones"),
                ));
            }
        }
        for g in self.groups.into_values() {
            faults.push((
                g.range,
                format!("seq {}: a tombstone no receipt covers", g.tombs.first),
            ));
        }
        faults.sort_by_key(|(range, _)| *range);
        faults.into_iter().next().map_or(Ok(()), Err)
    }
}
