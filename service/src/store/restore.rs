//! Content of a store-bound prior turn put back in memory for its
//! continuation (`turns.continue` after a restart), once its transcript
//! store gave it back and each payload hashed to what the chain recorded.
//!
//! What must stay true: a payload is restored only with the `event_hash`
//! its row's chain link covers (chain version 2, see `super::chain`); a
//! row linked before that (version 1) has no trustworthy hash, so its
//! content is never restored and the continuation is refused. Restoring
//! writes no row: it only refills `super::journal::MemoryPayloads`, which
//! the prior's check and digest read (in the step that queues the
//! continuation and again at its claim, which waits for the journal's
//! verification after open).

use std::collections::HashMap;

use rusqlite::Connection;

use crate::domain::{JournalEvent, StoreResult};

use super::handle::Store;
use super::journal::MemoryPayloads;
use super::{chain, read, schema};

impl Store {
    /// The events of `turn` (of `thread`) whose content is gone, in thread
    /// order, each with the `event_hash` its chained row covers (`None`
    /// when the row has none or was linked before the chain covered it).
    pub(crate) async fn gone_payloads(
        &self,
        thread: &str,
        turn: &str,
    ) -> StoreResult<Vec<(JournalEvent, Option<String>)>> {
        let (thread, turn) = (thread.to_owned(), turn.to_owned());
        self.read(move |c, m| gone(c, m, &thread, &turn)).await
    }

    /// Keeps `events`' payloads in memory again (each verified by the
    /// caller against [`Store::gone_payloads`]' hash).
    pub(crate) fn restore_payloads(&self, events: Vec<JournalEvent>) {
        let mut memory = self.memory().lock().unwrap_or_else(|p| p.into_inner());
        for e in events {
            if let Some(payload) = e.payload {
                memory.insert(e.seq, payload);
            }
        }
    }
}

fn gone(
    conn: &Connection,
    memory: &MemoryPayloads,
    thread: &str,
    turn: &str,
) -> StoreResult<Vec<(JournalEvent, Option<String>)>> {
    let gone: Vec<JournalEvent> = read::turn_events(conn, memory, thread, turn)?
        .into_iter()
        .filter(|e| e.payload_unavailable)
        .collect();
    if gone.is_empty() {
        return Ok(Vec::new());
    }
    let mut hashes = chained_hashes(conn, thread, &gone)?;
    Ok(gone
        .into_iter()
        .map(|e| {
            let hash = hashes.remove(&e.thread_seq);
            (e, hash)
        })
        .collect())
}

/// The `event_hash` recorded for each of `thread`'s `events` whose row's
/// chain link covers it (chain version 2), by `thread_seq`: a row linked
/// before that (version 1, journaled before schema 18) offers none, since
/// a hash outside the chain could have been edited at rest. The one rule
/// for what may verify content a transcript store gives back, for
/// `journal.replay` ([`super::replay::replay_flagged`]) and
/// `turns.continue` ([`Store::gone_payloads`]) alike.
pub(super) fn chained_hashes(
    conn: &Connection,
    thread: &str,
    events: &[JournalEvent],
) -> StoreResult<HashMap<u64, String>> {
    let covered_from = chain::v2_from(conn, schema::SCHEMA_VERSION)?;
    let seqs: Vec<u64> = events
        .iter()
        .filter(|e| e.seq as i64 >= covered_from)
        .map(|e| e.thread_seq)
        .collect();
    if seqs.is_empty() {
        return Ok(HashMap::new());
    }
    read::event_hashes(conn, thread, &seqs)
}
