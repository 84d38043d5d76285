//! Loading the writer's memory from the database, and recovery at open.
//!
//! Recovery runs once, after validation and before anything else: turns
//! caught `preparing` never reached the dispatch boundary and become `failed`
//! (`setup_interrupted`); turns `dispatched` or `running` may have run and
//! become `submission_unknown` (`interrupted` when a cancel was pending),
//! fencing their workspace. Queued turns stay queued. Nothing is dispatched.

use std::collections::HashMap;

use tokio::sync::watch;

use crate::domain::{Retention, StoreResult, TurnEvent, TurnState};

use super::journal::ThreadJournal;
use super::read::{self, TURN_COLS};
use super::scheduler::Scheduler;
use super::writer::{LiveTurn, Writer};
use lapis_protocol::OutcomeCode;

/// One turn changed by recovery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovered {
    /// Turn id.
    pub turn: String,
    /// State found.
    pub(crate) from: TurnState,
    /// State recorded.
    pub(crate) to: TurnState,
}

impl Writer {
    /// Rebuild journal counters, live turns and the scheduler from the database.
    pub(super) fn reload(&mut self) -> StoreResult<()> {
        let conn = &self.conn;
        let last_seq: i64 =
            conn.query_row("SELECT coalesce(max(seq), 0) FROM events", [], |r| r.get(0))?;
        let last_hash = super::chain::head(conn)?;
        let mut threads = HashMap::new();
        {
            let mut stmt = conn.prepare(
                "SELECT t.id, t.retention, \
                 (SELECT coalesce(max(e.thread_seq), 0) FROM events e WHERE e.thread_id = t.id), \
                 t.transcript_store IS NOT NULL FROM threads t",
            )?;
            let mut rows = stmt.query([])?;
            while let Some(r) = rows.next()? {
                let retention: String = r.get(1)?;
                threads.insert(
                    r.get::<_, String>(0)?,
                    ThreadJournal {
                        last: r.get::<_, i64>(2)? as u64,
                        retention: Retention::parse(&retention).unwrap_or(Retention::Full),
                        hashed: r.get(3)?,
                    },
                );
            }
        }
        let last_queue_seq: i64 =
            conn.query_row("SELECT coalesce(max(queue_seq), 0) FROM turns", [], |r| {
                r.get(0)
            })?;
        let mut sched = Scheduler::new(self.sched.capacity());
        let mut live = HashMap::new();
        // Keep existing cancel channels so claims handed out stay connected.
        let mut old = std::mem::take(&mut self.live);
        {
            let mut stmt = conn.prepare(&format!(
                "SELECT {TURN_COLS} FROM turns \
                 WHERE state NOT IN ('completed', 'failed', 'cancelled') ORDER BY queue_seq"
            ))?;
            let turns = stmt.query_map([], read::turn_row)?;
            for t in turns {
                let t = t.map_err(read::unwrap_err)?;
                match t.state {
                    TurnState::Queued => sched.enqueue(&t.workspace_id, t.queue_seq, &t.id),
                    s if s.is_in_flight() => sched.restore_in_flight(&t.workspace_id, &t.id),
                    s if s.is_fenced() => sched.fence(&t.workspace_id, &t.id),
                    _ => {}
                }
                let cancel = match old.remove(&t.id) {
                    Some(prev) => {
                        prev.cancel.send_replace(t.cancel_requested);
                        prev.cancel
                    }
                    None => watch::channel(t.cancel_requested).0,
                };
                live.insert(
                    t.id.clone(),
                    LiveTurn {
                        thread: t.thread_id,
                        workspace: t.workspace_id,
                        state: t.state,
                        cancel,
                        append_failed: false,
                        asked: true,
                    },
                );
            }
        }
        self.journal.last_seq = last_seq as u64;
        self.journal.last_hash = last_hash;
        self.journal.threads = threads;
        self.last_queue_seq = last_queue_seq as u64;
        self.sched = sched;
        self.live = live;
        Ok(())
    }

    /// Settle every turn a previous process left in flight (see module docs).
    pub(super) fn recover(&mut self) -> StoreResult<Vec<Recovered>> {
        let stuck: Vec<(String, TurnState, bool)> = {
            let mut v: Vec<_> = self
                .live
                .iter()
                .filter(|(_, t)| t.state.is_in_flight())
                .map(|(id, t)| (id.clone(), t.state, *t.cancel.borrow()))
                .collect();
            v.sort();
            v
        };
        let mut out = Vec::new();
        for (id, state, cancel) in stuck {
            let (event, code) = match state {
                TurnState::Preparing => (TurnEvent::Fail, OutcomeCode::SetupInterrupted),
                _ if cancel => (TurnEvent::Interrupt, OutcomeCode::OutcomeLost),
                _ => (TurnEvent::LoseOutcome, OutcomeCode::OutcomeLost),
            };
            let outcome = self.transition(&id, event, Some(code.as_str().to_owned()), true)?;
            out.push(Recovered {
                turn: id,
                from: state,
                to: outcome.turn.state,
            });
        }
        self.publish(None, Vec::new());
        Ok(out)
    }
}
