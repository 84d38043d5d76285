//! Journal sequencing and payload retention, owned by the writer.
//!
//! Sequences are assigned in a [`JournalTx`] staged next to a database
//! transaction and become the journal's only after that transaction commits
//! ([`Journal::commit`]); a rolled-back transaction leaves no gap because its
//! stage is simply dropped. Payloads of metadata-only threads go to a bounded
//! in-memory map (shared with readers) and never to disk.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, Statement, params};
use serde_json::{Value, json};

use crate::domain::{EventKind, JournalEvent, Retention, StoreResult};
use crate::redact::redactor;

use super::chain::{self, Link};

/// The insert of one event row, as [`Journal::append_ready`] binds it.
pub(super) const INSERT_EVENT: &str = "INSERT INTO events (seq, thread_id, thread_seq, turn_id, kind, at, \
     payload, has_payload, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";

/// A payload made ready for the durable write: redacted (every string but
/// ids, see [`crate::redact`]) and serialized, once. Streamed appends build
/// it where they are submitted ([`super::Store::append_activity`]), so that
/// work runs on the caller's thread, in parallel with the single writer,
/// which then only links and inserts the text as it is (see
/// [`Journal::append_ready`]).
///
/// What must stay true: `text` is `value` serialized, and `value` has been
/// through [`crate::redact::Redactor::redact_value`]; the fields are only
/// set by the constructors below.
#[derive(Debug)]
pub(super) struct ReadyPayload {
    /// The redacted value (published to subscribers).
    value: Value,
    /// `value` as JSON text (stored, and covered by the chain hash).
    text: String,
    /// Markers the redaction inserted.
    redactions: u32,
}

impl ReadyPayload {
    /// Redacts `value` and serializes it.
    pub(super) fn new(mut value: Value) -> ReadyPayload {
        let redactions = redactor().redact_value(&mut value);
        ReadyPayload {
            text: serde_json::to_string(&value).unwrap_or_else(|_| "null".into()),
            value,
            redactions,
        }
    }

    /// A late activity of `kind` as the observation that records it:
    /// `{"late": kind, "data": payload}`. The inner payload is already
    /// redacted and the rest is the kind's name, so its count carries over.
    pub(super) fn late(kind: EventKind, inner: Option<ReadyPayload>) -> ReadyPayload {
        let (data, redactions) = inner.map_or((Value::Null, 0), |p| (p.value, p.redactions));
        let value = json!({ "late": kind.as_str(), "data": data });
        ReadyPayload {
            text: serde_json::to_string(&value).unwrap_or_else(|_| "null".into()),
            value,
            redactions,
        }
    }
}

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

    /// Insert one event inside `tx`, assigning both sequences in `stage`:
    /// [`Self::append_ready`] with the payload made ready here (redacted and
    /// serialized on the writer: for the operations' own few events).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn append(
        &self,
        tx: &Connection,
        stage: &mut JournalTx,
        thread: &str,
        turn: Option<&str>,
        kind: EventKind,
        at: i64,
        payload: Option<Value>,
    ) -> StoreResult<()> {
        let mut insert = tx.prepare_cached(INSERT_EVENT)?;
        self.append_ready(
            tx,
            &mut insert,
            stage,
            thread,
            turn,
            kind,
            at,
            payload.map(ReadyPayload::new),
        )
    }

    /// Insert one event with `insert` ([`INSERT_EVENT`] prepared on `tx`,
    /// reused across a batch), assigning both sequences in `stage`. The
    /// payload was redacted when it was made ready ([`ReadyPayload`]); its
    /// markers are added to the turn's `redactions` count in the same
    /// transaction. The row carries its chain hash ([`chain`]): the one
    /// per-event cost that must stay on the writer, since it links to the
    /// previous event.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn append_ready(
        &self,
        tx: &Connection,
        insert: &mut Statement<'_>,
        stage: &mut JournalTx,
        thread: &str,
        turn: Option<&str>,
        kind: EventKind,
        at: i64,
        payload: Option<ReadyPayload>,
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
        let keep_on_disk =
            !kind.is_content() || self.retention_of(stage, thread) == Retention::Full;
        let has_payload = payload.is_some();
        let (payload, text, redactions) = match payload {
            Some(p) => (Some(p.value), keep_on_disk.then_some(p.text), p.redactions),
            None => (None, None, 0),
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
        insert.execute(params![
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
