//! Tombstones: what a deleted thread's events become, and how the chain
//! is verified across them.
//!
//! `threads.delete` (`super::ops_delete`) keeps every event row of the
//! thread, with its `seq`, thread, `thread_seq` and stored chain hash, and
//! clears the rest: kind [`KIND`], no turn, `at` 0, no payload, no
//! `event_hash`. Its fields gone, a tombstone cannot be hashed again; the
//! chain links *through* it (the next row is checked against its stored
//! hash, [`super::chain::ChainCheck::tombstone`]), and the thread's receipt
//! (`thread_deleted`, [`ThreadDeletion`], journaled in the same
//! transaction) names the tombstones' count, first and last `seq` and
//! [`digest`] over their `(seq, hash)` pairs. So a verification
//! ([`Tombstones`]) also fails, naming a `seq` (check `tombstone`), when
//! a tombstone's hash is edited (the digest, or the next row's link),
//! a tombstone is deleted (the count and digest; validation also sees the
//! gap), a row is made a tombstone without a receipt (uncovered), or the
//! receipt is altered (its own row's hash, which the chain covers). A row
//! "un-tombstoned" with forged fields does not hash to its stored hash.

use std::collections::HashMap;

use rusqlite::types::ValueRef;
use sha2::{Digest, Sha256};

use lapis_protocol::{EventKind, HistoryPruned, ThreadDeletion};

use super::chain::{ChainCheck, Hash};

/// The stored kind of a tombstone (never an [`EventKind`]: a reader that
/// does not expect one fails closed on it).
pub(super) const KIND: &str = "tombstone";

/// Domain tag of the tombstone digest.
const TAG: &[u8] = b"lapis-tombstones/1\0";

/// A running tombstone digest (see `lapis_protocol::ThreadDeletion`'s
/// module docs for the encoding).
#[derive(Clone)]
pub(super) struct Digest256(Sha256);

impl Digest256 {
    pub(super) fn new() -> Self {
        let mut h = Sha256::new();
        h.update(TAG);
        Digest256(h)
    }

    pub(super) fn add(&mut self, seq: i64, hash: &[u8]) {
        self.0.update(seq.to_be_bytes());
        self.0.update(hash);
    }

    pub(super) fn hex(self) -> String {
        hex::encode(self.0.finalize())
    }
}

/// One group of tombstones seen so far (a thread's deletion, or one
/// retention pass): what its receipt must claim ([`Group::matches`]).
pub(super) struct Group {
    count: u64,
    pub(super) first: i64,
    last: i64,
    digest: Digest256,
}

impl Group {
    /// A group whose first tombstone is at `seq` (add it with [`Group::add`]).
    pub(super) fn starting_at(seq: i64) -> Group {
        Group {
            count: 0,
            first: seq,
            last: seq,
            digest: Digest256::new(),
        }
    }

    /// Counts the tombstone at `seq` with its stored `hash`.
    pub(super) fn add(&mut self, seq: i64, hash: &Hash) {
        self.count += 1;
        self.last = seq;
        self.digest.add(seq, hash);
    }

    /// Whether the receipt at `receipt_seq` claiming `events` tombstones
    /// from `first_seq` to `last_seq` with `digest` covers `group`
    /// (`None`: no tombstone names it, so it must claim none). The one
    /// rule `journal verify` and an exported bundle's check share.
    pub(super) fn matches(
        group: Option<Group>,
        receipt_seq: i64,
        events: u64,
        first_seq: u64,
        last_seq: u64,
        digest: &str,
    ) -> bool {
        match group {
            None => events == 0,
            Some(g) => {
                events == g.count
                    && first_seq == g.first as u64
                    && last_seq == g.last as u64
                    && g.last < receipt_seq
                    && digest == g.digest.hex()
            }
        }
    }
}

/// What a verification collects about tombstones and receipts, checked
/// at the end ([`Tombstones::check`]).
///
/// Tombstones are grouped by `(thread, at)`: a deletion's keep `at` 0
/// and are covered by the thread's `thread_deleted`; a retention pass's
/// (`super::retention`) carry in `at` the `seq` of the `history_pruned`
/// receipt that covers them.
#[derive(Default)]
pub(super) struct Tombstones {
    groups: HashMap<(String, i64), Group>,
    /// `(seq of the receipt, its thread, what it claims)`; `None`: it did
    /// not parse.
    receipts: Vec<(i64, String, Option<Claim>)>,
}

/// What one receipt says its tombstones are.
struct Claim {
    thread: String,
    /// The group's `at`: 0 for a deletion, the receipt's `seq` for a pass.
    at: i64,
    events: u64,
    first_seq: u64,
    last_seq: u64,
    digest: String,
}

impl Tombstones {
    /// Hands the row (`super::chain::COLUMNS` from column 0) to `chain`:
    /// a tombstone by its stored hash, any other row to be hashed, and
    /// remembers tombstones and receipts. `false`: the row already fails
    /// (see [`ChainCheck::row`]).
    pub(super) fn row(
        &mut self,
        r: &rusqlite::Row<'_>,
        chain: &mut ChainCheck<'_, '_>,
    ) -> rusqlite::Result<bool> {
        let seq = r.get_ref(0)?.as_i64().unwrap_or(-1);
        let thread = text(r.get_ref(1)?);
        let kind = text(r.get_ref(4)?);
        let at = r.get_ref(5)?.as_i64().unwrap_or(-1);
        if kind == KIND.as_bytes() {
            let Some(stored) = r
                .get_ref(8)?
                .as_blob()
                .ok()
                .and_then(|b| Hash::try_from(b).ok())
            else {
                return chain.row(r, 0);
            };
            let g = self
                .groups
                .entry((String::from_utf8_lossy(thread).into_owned(), at))
                .or_insert_with(|| Group::starting_at(seq));
            g.add(seq, &stored);
            chain.tombstone(seq, stored);
            return Ok(true);
        }
        let payload = text(r.get_ref(7)?);
        let claim = if kind == EventKind::ThreadDeleted.as_str().as_bytes() {
            Some(
                serde_json::from_slice::<ThreadDeletion>(payload)
                    .ok()
                    .map(|d| Claim {
                        thread: d.thread_id,
                        at: 0,
                        events: d.events,
                        first_seq: d.first_seq,
                        last_seq: d.last_seq,
                        digest: d.digest,
                    }),
            )
        } else if kind == EventKind::HistoryPruned.as_str().as_bytes() {
            Some(
                serde_json::from_slice::<HistoryPruned>(payload)
                    .ok()
                    .map(|d| Claim {
                        thread: d.thread_id,
                        at: seq,
                        events: d.events,
                        first_seq: d.first_seq,
                        last_seq: d.last_seq,
                        digest: d.digest,
                    }),
            )
        } else {
            None
        };
        if let Some(claim) = claim {
            let thread = String::from_utf8_lossy(thread).into_owned();
            self.receipts.push((seq, thread, claim));
        }
        chain.row(r, 0)
    }

    /// Every tombstone covered by its thread's receipt, and every receipt
    /// matching its thread's tombstones; otherwise the first `seq` that
    /// is not.
    pub(super) fn check(mut self) -> Result<(), i64> {
        let mut bad: Option<i64> = None;
        let mut fail = |seq: i64| bad = Some(bad.map_or(seq, |b| b.min(seq)));
        for (seq, thread, receipt) in self.receipts {
            let Some(receipt) = receipt.filter(|d| d.thread == thread) else {
                fail(seq);
                continue;
            };
            let group = self.groups.remove(&(thread, receipt.at));
            let matches = Group::matches(
                group,
                seq,
                receipt.events,
                receipt.first_seq,
                receipt.last_seq,
                &receipt.digest,
            );
            if !matches {
                fail(seq);
            }
        }
        for g in self.groups.values() {
            fail(g.first);
        }
        bad.map_or(Ok(()), Err)
    }
}

fn text(v: ValueRef<'_>) -> &[u8] {
    match v {
        ValueRef::Text(t) | ValueRef::Blob(t) => t,
        _ => &[],
    }
}
