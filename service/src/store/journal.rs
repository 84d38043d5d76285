//! Journal sequencing and payload retention, owned by the writer.
//!
//! Sequences are assigned in a [`JournalTx`] staged next to a database
//! transaction and become the journal's only after that transaction commits
//! ([`Journal::commit`]); a rolled-back transaction leaves no gap because its
//! stage is simply dropped. Payloads of metadata-only threads go to a bounded
//! in-memory map (shared with readers) and never to disk.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, params};
use serde_json::Value;

use crate::domain::{EventKind, JournalEvent, Retention, StoreResult};
use crate::redact::redactor;

use super::chain::{self, Link};

/// Per-thread journal state.
#[derive(Debug, Clone)]
pub(super) struct ThreadJournal {
    /// The last `thread_seq` committed (0 when empty).
    pub(crate) last: u64,
    /// Current retention of the thread.
    pub(crate) retention: Retention,
}

/// Payloads kept in memory only, bounded; oldest evicted first.
#[derive(Debug, Default)]
pub(super) struct MemoryPayloads {
    /// seq -> payload.
    map: HashMap<u64, Value>,
    /// Insertion order for eviction.
    order: VecDeque<u64>,
    /// Bound on `map.len()`.
    capacity: usize,
}

impl MemoryPayloads {
    /// An empty map holding at most `capacity` payloads.
    pub(super) fn new(capacity: usize) -> Self {
        MemoryPayloads {
            capacity,
            ..Default::default()
        }
    }

    fn insert(&mut self, seq: u64, value: Value) {
        if self.capacity == 0 {
            return;
        }
        while self.map.len() >= self.capacity {
            match self.order.pop_front() {
                Some(old) => {
                    self.map.remove(&old);
                }
                None => break,
            }
        }
        self.map.insert(seq, value);
        self.order.push_back(seq);
    }

    /// The payload of `seq`, if still in memory.
    pub(super) fn get(&self, seq: u64) -> Option<&Value> {
        self.map.get(&seq)
    }
}

/// Shared handle to the in-memory payloads.
pub(super) type SharedPayloads = Arc<Mutex<MemoryPayloads>>;

/// The writer's journal state.
#[derive(Debug)]
pub(super) struct Journal {
    /// The last committed owner-wide `seq`.
    pub(crate) last_seq: u64,
    /// The hash of the event at `last_seq` (the chain head).
    pub(crate) last_hash: chain::Hash,
    /// Per-thread state, for every thread.
    pub(crate) threads: HashMap<String, ThreadJournal>,
    /// In-memory payloads of metadata-only threads.
    pub(crate) memory: SharedPayloads,
}

/// Events staged inside one database transaction.
#[derive(Debug, Default)]
pub(super) struct JournalTx {
    /// The last seq assigned in this stage.
    last_seq: u64,
    /// The chain head after this stage's events.
    last_hash: chain::Hash,
    /// Thread seqs assigned in this stage.
    threads: HashMap<String, u64>,
    /// New threads created in this stage (with their retention).
    new_threads: Vec<(String, Retention)>,
    /// Retention changes made in this stage.
    retention: Vec<(String, Retention)>,
    /// Events to publish after commit.
    pub(crate) events: Vec<JournalEvent>,
    /// Payloads to keep in memory after commit.
    memory: Vec<(u64, Value)>,
}

impl Journal {
    /// Begin a stage for one transaction.
    pub(super) fn begin(&self) -> JournalTx {
        JournalTx {
            last_seq: self.last_seq,
            last_hash: self.last_hash,
            ..Default::default()
        }
    }

    /// Adopt a committed stage; returns the events to publish.
    pub(super) fn commit(&mut self, stage: JournalTx) -> Vec<JournalEvent> {
        for (id, retention) in stage.new_threads {
            self.threads
                .insert(id, ThreadJournal { last: 0, retention });
        }
        for (id, retention) in stage.retention {
            if let Some(t) = self.threads.get_mut(&id) {
                t.retention = retention;
            }
        }
        for (id, last) in stage.threads {
            if let Some(t) = self.threads.get_mut(&id) {
                t.last = last;
            }
        }
        self.last_seq = stage.last_seq;
        self.last_hash = stage.last_hash;
        if !stage.memory.is_empty() {
            let mut mem = self.memory.lock().unwrap_or_else(|p| p.into_inner());
            for (seq, v) in stage.memory {
                mem.insert(seq, v);
            }
        }
        stage.events
    }

    /// Stage a new thread (so events can be appended to it in the same stage).
    pub(super) fn stage_thread(&self, stage: &mut JournalTx, id: &str, retention: Retention) {
        stage.new_threads.push((id.to_owned(), retention));
        stage.threads.insert(id.to_owned(), 0);
    }

    /// Stage a retention change.
    pub(super) fn stage_retention(&self, stage: &mut JournalTx, id: &str, retention: Retention) {
        stage.retention.push((id.to_owned(), retention));
    }

    fn retention_of(&self, stage: &JournalTx, thread: &str) -> Retention {
        stage
            .retention
            .iter()
            .rev()
            .find(|(id, _)| id == thread)
            .map(|(_, r)| *r)
            .or_else(|| {
                stage
                    .new_threads
                    .iter()
                    .find(|(id, _)| id == thread)
                    .map(|(_, r)| *r)
            })
            .or_else(|| self.threads.get(thread).map(|t| t.retention))
            .unwrap_or(Retention::Full)
    }

    /// Insert one event inside `tx`, assigning both sequences in `stage`.
    /// The payload is redacted first (every string but ids, see
    /// [`crate::redact`]); the markers inserted are added to the turn's
    /// `redactions` count in the same transaction. The row carries its
    /// chain hash ([`chain`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn append(
        &self,
        tx: &Connection,
        stage: &mut JournalTx,
        thread: &str,
        turn: Option<&str>,
        kind: EventKind,
        at: i64,
        mut payload: Option<Value>,
    ) -> StoreResult<()> {
        // Assigned in the stage up front; a failed insert fails the whole
        // transaction and the stage is dropped with it.
        let thread_seq = match stage.threads.get_mut(thread) {
            Some(s) => {
                *s += 1;
                *s
            }
            None => {
                let s = self.threads.get(thread).map_or(0, |t| t.last) + 1;
                stage.threads.insert(thread.to_owned(), s);
                s
            }
        };
        let seq = stage.last_seq + 1;
        let redactions = payload.as_mut().map_or(0, |v| redactor().redact_value(v));
        let keep_on_disk =
            !kind.is_content() || self.retention_of(stage, thread) == Retention::Full;
        let has_payload = payload.is_some();
        let text = match (&payload, keep_on_disk) {
            (Some(v), true) => Some(serde_json::to_string(v).unwrap_or_else(|_| "null".into())),
            _ => None,
        };
        let hash = chain::link_hash(
            &stage.last_hash,
            &Link {
                seq: seq as i64,
                thread_id: thread.as_bytes(),
                thread_seq: thread_seq as i64,
                turn_id: turn.map(str::as_bytes),
                kind: kind.as_str().as_bytes(),
                at,
                has_payload,
                stored_payload: text.as_deref().map(str::as_bytes),
            },
        );
        let mut stmt = tx.prepare_cached(
            "INSERT INTO events (seq, thread_id, thread_seq, turn_id, kind, at, payload, \
             has_payload, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )?;
        stmt.execute(params![
            seq as i64,
            thread,
            thread_seq as i64,
            turn,
            kind.as_str(),
            at,
            text,
            has_payload,
            &hash[..]
        ])?;
        if let (Some(turn), true) = (turn, redactions > 0) {
            tx.prepare_cached("UPDATE turns SET redactions = redactions + ?2 WHERE id = ?1")?
                .execute(params![turn, redactions])?;
        }
        stage.last_seq = seq;
        stage.last_hash = hash;
        if let (Some(v), false) = (&payload, keep_on_disk) {
            stage.memory.push((seq, v.clone()));
        }
        stage.events.push(JournalEvent {
            seq,
            thread_id: thread.to_owned(),
            thread_seq,
            turn_id: turn.map(str::to_owned),
            kind,
            at,
            payload,
            payload_unavailable: false,
        });
        Ok(())
    }
}
