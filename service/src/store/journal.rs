//! Journal sequencing and payload retention, owned by the writer.
//!
//! Sequences are assigned in a [`JournalTx`] staged next to a database
//! transaction and become the journal's only after that transaction commits
//! ([`Journal::commit`]); a rolled-back transaction leaves no gap because its
//! stage is simply dropped. Payloads of metadata-only threads go to a bounded
//! in-memory map (shared with readers) and never to disk; on a thread that
//! binds a transcript store their rows keep the event's canonical hash
//! instead (`event_hash`), so content the store hands back after a restart
//! can be checked before it is shown.

use std::collections::HashMap;

use lapis_protocol::{LateAppend, Observation, Payload};
use rusqlite::{Connection, Statement, params};
use serde_json::Value;

use crate::domain::{EventKind, JournalEvent, Retention, StoreResult};
use crate::redact::redactor;

use super::chain::{self, Link};

mod payloads;
pub(super) use payloads::{MemoryPayloads, SharedPayloads};

/// The insert of one event row, as [`Journal::flush`] binds it.
const INSERT_EVENT: &str = "INSERT INTO events (seq, thread_id, thread_seq, turn_id, kind, at, \
     payload, has_payload, hash, event_hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";

/// Columns bound per row by [`bind_row`].
const ROW_PARAMS: usize = 10;

/// Rows in one multi-row insert of a run of appends ([`insert_chunk`]).
/// One statement per chunk keeps the table and index cursors where the
/// previous row left them and pays the statement's start and end once
/// instead of per row. A multi-row statement needs a statement journal
/// (it can fail halfway), which copies the pages it touches first (the
/// table's and the index's rightmost paths): that cost is per statement,
/// so chunks must be long for the sum to win; on the journal bench 8 rows
/// were slower than single rows, 32 even, 256 clearly faster. 256 rows
/// are 2,560 parameters, well under SQLite's limit (32,766). Shorter runs
/// (a live turn's few events per batch) are inserted row by row as before.
const CHUNK_ROWS: usize = 256;

/// [`INSERT_EVENT`] for [`CHUNK_ROWS`] rows, in the same column order.
fn insert_chunk() -> &'static str {
    static SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SQL.get_or_init(|| {
        let rows: Vec<String> = (0..CHUNK_ROWS)
            .map(|r| {
                let p: Vec<String> = (1..=ROW_PARAMS)
                    .map(|c| format!("?{}", r * ROW_PARAMS + c))
                    .collect();
                format!("({})", p.join(", "))
            })
            .collect();
        format!(
            "INSERT INTO events (seq, thread_id, thread_seq, turn_id, kind, at, payload, \
             has_payload, hash, event_hash) VALUES {}",
            rows.join(", ")
        )
    })
}

/// An event row staged for its insert ([`Journal::flush`]): what it
/// stores beyond its event, which is `stage.events[event]`.
#[derive(Debug)]
struct PendingRow {
    /// Index of its event in [`JournalTx::events`].
    event: usize,
    /// The payload text stored (absent: none, or kept in memory only).
    text: Option<String>,
    /// The event had a payload.
    has_payload: bool,
    /// Its chain hash.
    hash: chain::Hash,
    /// Its canonical hash ([`lapis_protocol::transcript::event_hash`]),
    /// recorded only for content kept in memory by a thread that binds a
    /// transcript store: what a payload fetched back from the store is
    /// checked against after a restart.
    event_hash: Option<String>,
}

/// Binds `row` (of `event`) as the row whose parameters start after `at`.
fn bind_row(
    stmt: &mut Statement<'_>,
    at: usize,
    event: &JournalEvent,
    row: &PendingRow,
) -> rusqlite::Result<()> {
    stmt.raw_bind_parameter(at + 1, event.seq as i64)?;
    stmt.raw_bind_parameter(at + 2, event.thread_id.as_str())?;
    stmt.raw_bind_parameter(at + 3, event.thread_seq as i64)?;
    stmt.raw_bind_parameter(at + 4, event.turn_id.as_deref())?;
    stmt.raw_bind_parameter(at + 5, event.kind.as_str())?;
    stmt.raw_bind_parameter(at + 6, event.at)?;
    stmt.raw_bind_parameter(at + 7, row.text.as_deref())?;
    stmt.raw_bind_parameter(at + 8, row.has_payload)?;
    stmt.raw_bind_parameter(at + 9, &row.hash[..])?;
    stmt.raw_bind_parameter(at + 10, row.event_hash.as_deref())
}

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
    pub(super) redactions: u32,
    /// An imported event whose payload its bundle did not retain
    /// ([`ReadyPayload::unavailable`]): stored as had, never kept.
    gone: bool,
}

impl ReadyPayload {
    /// Redacts the stored form of `payload` and serializes it.
    pub(super) fn new(payload: &Payload) -> ReadyPayload {
        let mut value = payload.to_value();
        let redactions = redactor().redact_value(&mut value);
        ReadyPayload {
            text: serde_json::to_string(&value).unwrap_or_else(|_| "null".into()),
            value,
            redactions,
            gone: false,
        }
    }

    /// A payload imported from a bundle (`super::import`), as its stored
    /// text parsed, redacted again by this controller's rules.
    pub(super) fn imported(mut value: Value) -> ReadyPayload {
        let redactions = redactor().redact_value(&mut value);
        ReadyPayload {
            text: serde_json::to_string(&value).unwrap_or_else(|_| "null".into()),
            value,
            redactions,
            gone: false,
        }
    }

    /// An imported content event that had a payload its bundle did not
    /// retain (a metadata-only thread's): journaled as having had one,
    /// with none stored or kept in memory (read back as unavailable).
    pub(super) fn unavailable() -> ReadyPayload {
        ReadyPayload {
            value: Value::Null,
            text: String::new(),
            redactions: 0,
            gone: true,
        }
    }

    /// A late activity of `kind` as the observation that records it
    /// ([`LateAppend`]). The inner payload is already redacted and the rest
    /// is the kind's name, so its count carries over.
    pub(super) fn late(kind: EventKind, inner: Option<ReadyPayload>) -> ReadyPayload {
        let (data, redactions) = inner.map_or((Value::Null, 0), |p| (p.value, p.redactions));
        let late = Payload::Observation(Observation::LateAppend(LateAppend { late: kind, data }));
        let value = late.to_value();
        ReadyPayload {
            text: serde_json::to_string(&value).unwrap_or_else(|_| "null".into()),
            value,
            redactions,
            gone: false,
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
    /// Its content kept in memory records its canonical hash: the thread
    /// binds a transcript store (the only reader of that hash), so threads
    /// without one pay nothing for it.
    pub(crate) hashed: bool,
}

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

/// The thread of a stage's latest append: its last assigned `thread_seq`
/// (newer than its entry in [`JournalTx::threads`], which is written back
/// when another thread is appended to, and at commit) and whether its
/// content goes to disk. Anything else that changes a thread in the stage
/// (a new thread, a retention change) writes it back and drops it first.
#[derive(Debug)]
struct Hot {
    /// Thread id.
    thread: String,
    /// The last `thread_seq` assigned in the stage.
    last: u64,
    /// Its retention keeps content on disk ([`Retention::Full`]).
    content_on_disk: bool,
    /// Its content kept in memory records its canonical hash
    /// ([`ThreadJournal::hashed`]).
    hashed: bool,
}

/// Events staged inside one database transaction.
#[derive(Debug, Default)]
pub(super) struct JournalTx {
    /// The last seq assigned in this stage.
    last_seq: u64,
    /// The chain head after this stage's events.
    last_hash: chain::Hash,
    /// Thread seqs assigned in this stage (but the hot thread's).
    threads: HashMap<String, u64>,
    /// The thread appended to last, with its state, so a run of appends to
    /// one thread looks it up once (see [`Hot`]).
    hot: Option<Hot>,
    /// New threads created in this stage (with their retention and
    /// whether they are hashed).
    new_threads: Vec<(String, Retention, bool)>,
    /// Retention (and hashing) changes made in this stage.
    retention: Vec<(String, Retention, bool)>,
    /// Events to publish after commit.
    pub(crate) events: Vec<JournalEvent>,
    /// Payloads to keep in memory after commit.
    memory: Vec<(u64, Value)>,
    /// Rows of `events` not inserted yet ([`Journal::flush`], which
    /// [`super::writer::Writer::write`] runs before the stage's savepoint
    /// or transaction ends).
    rows: Vec<PendingRow>,
}

impl JournalTx {
    /// Writes the hot thread back to the map (see [`Hot`]).
    fn cool(&mut self) {
        if let Some(Hot { thread, last, .. }) = self.hot.take() {
            match self.threads.get_mut(&thread) {
                Some(s) => *s = last,
                None => {
                    self.threads.insert(thread, last);
                }
            }
        }
    }
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
    pub(super) fn commit(&mut self, mut stage: JournalTx) -> Vec<JournalEvent> {
        stage.cool();
        for (id, retention, hashed) in stage.new_threads {
            self.threads.insert(
                id,
                ThreadJournal {
                    last: 0,
                    retention,
                    hashed,
                },
            );
        }
        for (id, retention, hashed) in stage.retention {
            if let Some(t) = self.threads.get_mut(&id) {
                t.retention = retention;
                t.hashed = hashed;
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

    /// Stage a new thread (so events can be appended to it in the same
    /// stage); `hashed`: it binds a transcript store.
    pub(super) fn stage_thread(
        &self,
        stage: &mut JournalTx,
        id: &str,
        retention: Retention,
        hashed: bool,
    ) {
        stage.cool();
        stage.new_threads.push((id.to_owned(), retention, hashed));
        stage.threads.insert(id.to_owned(), 0);
    }

    /// Stage a retention (or transcript store) change.
    pub(super) fn stage_retention(
        &self,
        stage: &mut JournalTx,
        id: &str,
        retention: Retention,
        hashed: bool,
    ) {
        stage.cool();
        stage.retention.push((id.to_owned(), retention, hashed));
    }

    /// The stage's hot thread, made `thread` if it is not already: the
    /// previous one is written back to the stage's map.
    fn heat<'s>(&self, stage: &'s mut JournalTx, thread: &str) -> &'s mut Hot {
        let hot = match stage.hot.take() {
            Some(h) if h.thread == thread => h,
            other => {
                stage.hot = other;
                stage.cool();
                let last = match stage.threads.get(thread) {
                    Some(s) => *s,
                    None => self.threads.get(thread).map_or(0, |t| t.last),
                };
                let (retention, hashed) = self.retention_of(stage, thread);
                Hot {
                    thread: thread.to_owned(),
                    last,
                    content_on_disk: retention == Retention::Full,
                    hashed,
                }
            }
        };
        stage.hot.insert(hot)
    }

    fn retention_of(&self, stage: &JournalTx, thread: &str) -> (Retention, bool) {
        stage
            .retention
            .iter()
            .rev()
            .find(|(id, _, _)| id == thread)
            .map(|(_, r, h)| (*r, *h))
            .or_else(|| {
                stage
                    .new_threads
                    .iter()
                    .find(|(id, _, _)| id == thread)
                    .map(|(_, r, h)| (*r, *h))
            })
            .or_else(|| self.threads.get(thread).map(|t| (t.retention, t.hashed)))
            .unwrap_or((Retention::Full, false))
    }

    /// Insert one event inside `tx`, assigning both sequences in `stage`:
    /// [`Self::append_ready`] with the payload made ready here (redacted and
    /// serialized on the writer: for the operations' own few events).
    pub(super) fn append(
        &self,
        tx: &Connection,
        stage: &mut JournalTx,
        thread: &str,
        turn: Option<&str>,
        at: i64,
        payload: Payload,
    ) -> StoreResult<()> {
        let ready = ReadyPayload::new(&payload);
        self.append_ready(tx, stage, thread, turn, payload.kind(), at, Some(ready))?;
        // Inserted now: the operation may read the journal after this.
        self.flush(tx, stage)
    }

    /// Inserts the stage's pending rows, in `seq` order: full chunks with
    /// one multi-row statement each ([`CHUNK_ROWS`]), the rest one by one.
    pub(super) fn flush(&self, tx: &Connection, stage: &mut JournalTx) -> StoreResult<()> {
        let mut chunks = stage.rows.chunks_exact(CHUNK_ROWS);
        if chunks.len() > 0 {
            let mut insert = tx.prepare_cached(insert_chunk())?;
            for chunk in &mut chunks {
                for (i, row) in chunk.iter().enumerate() {
                    bind_row(&mut insert, i * ROW_PARAMS, &stage.events[row.event], row)?;
                }
                insert.raw_execute()?;
            }
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut insert = tx.prepare_cached(INSERT_EVENT)?;
            for row in rest {
                bind_row(&mut insert, 0, &stage.events[row.event], row)?;
                insert.raw_execute()?;
            }
        }
        stage.rows.clear();
        Ok(())
    }

    /// Stage one event, assigning both sequences in `stage`; its row is
    /// inserted with the next full chunk or by [`Self::flush`], always
    /// inside the stage's savepoint or transaction. The payload was
    /// redacted when it was made ready ([`ReadyPayload`]); its markers are
    /// added to the turn's `redactions` count in the same transaction. The
    /// row carries its chain hash ([`chain`]): the one per-event cost that
    /// must stay on the writer, since it links to the previous event.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn append_ready(
        &self,
        tx: &Connection,
        stage: &mut JournalTx,
        thread: &str,
        turn: Option<&str>,
        kind: EventKind,
        at: i64,
        payload: Option<ReadyPayload>,
    ) -> StoreResult<()> {
        // Assigned in the stage up front; a failed insert fails the whole
        // transaction and the stage is dropped with it.
        let hot = self.heat(stage, thread);
        hot.last += 1;
        let (thread_seq, content_on_disk, hashed) = (hot.last, hot.content_on_disk, hot.hashed);
        let seq = stage.last_seq + 1;
        let keep_on_disk = !kind.is_content() || content_on_disk;
        let has_payload = payload.is_some();
        let gone = payload.as_ref().is_some_and(|p| p.gone);
        let (payload, text, redactions) = match payload {
            Some(p) if p.gone => (None, None, 0),
            Some(p) => (Some(p.value), keep_on_disk.then_some(p.text), p.redactions),
            None => (None, None, 0),
        };
        if let (Some(turn), true) = (turn, redactions > 0) {
            tx.prepare_cached("UPDATE turns SET redactions = redactions + ?2 WHERE id = ?1")?
                .execute(params![turn, redactions])?;
        }
        if let (Some(v), false) = (&payload, keep_on_disk) {
            stage.memory.push((seq, v.clone()));
        }
        let kept_in_memory = hashed && has_payload && !keep_on_disk;
        let event = JournalEvent {
            seq,
            thread_id: thread.to_owned(),
            thread_seq,
            turn_id: turn.map(str::to_owned),
            kind,
            at,
            payload,
            payload_unavailable: gone,
        };
        let event_hash = kept_in_memory
            .then(|| lapis_protocol::transcript::event_hash(&event))
            .flatten()
            .map(|h| h.as_str().to_owned());
        // Linked with its `event_hash` (chain version 2): a hash edited at
        // rest breaks the chain at this row.
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
                event_hash: event_hash.as_deref().map(str::as_bytes),
                version: chain::CURRENT,
            },
        );
        stage.last_seq = seq;
        stage.last_hash = hash;
        stage.rows.push(PendingRow {
            event: stage.events.len(),
            text,
            has_payload,
            hash,
            event_hash,
        });
        stage.events.push(event);
        if stage.rows.len() == CHUNK_ROWS {
            self.flush(tx, stage)?;
        }
        Ok(())
    }
}

impl JournalTx {
    /// The `seq` the next event appended to this stage gets.
    pub(super) fn next_seq(&self) -> u64 {
        self.last_seq + 1
    }
}
