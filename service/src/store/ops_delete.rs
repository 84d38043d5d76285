//! `threads.delete` on the writer (see `super::tombstone` for what stays
//! and how the chain is verified across it).
//!
//! What must stay true: one writer step, one transaction, checks the
//! thread has no queued, claimed or fenced turn and then tombstones its
//! events (but what retention already pruned and its `history_pruned`
//! receipts, which stay as they are), removes its turns (with their inbox rows, audit rows and
//! command receipts), marks the thread deleted and journals its receipt:
//! a crash leaves the old state or the new. Nothing is appended to a
//! deleted thread afterwards (`hot::thread_and_workspace` and
//! `read::thread` no longer find it).

use lapis_protocol::{DeletedBy, Payload, ThreadDeletion};
use rusqlite::{OptionalExtension, params};

use crate::domain::{Actor, StoreError, StoreResult, TurnState};

use super::handle::Store;
use super::tombstone::{Digest256, KIND};
use super::writer::Writer;

/// What `Writer::delete_thread` answers: the receipt and its `seq`.
pub(crate) type Deleted = (ThreadDeletion, u64);

impl Store {
    /// Delete thread `id` (see the module docs). `token` names the
    /// session's token in the receipt. Refused with `thread_busy` /
    /// `thread_fenced` naming the turn; `thread_deleted` when it already
    /// is. The caller checks ownership.
    pub(crate) async fn delete_thread(
        &self,
        actor: &Actor,
        token: Option<String>,
        id: &str,
    ) -> StoreResult<Deleted> {
        let (actor, id) = (actor.clone(), id.to_owned());
        self.op(move |w| w.delete_thread(&actor, token, &id)).await
    }

    /// The live threads of workspace `id` (for `workspaces.remove --purge`).
    pub(crate) async fn workspace_threads(&self, id: &str) -> StoreResult<Vec<String>> {
        let id = id.to_owned();
        self.read(move |c, _| {
            let mut stmt = c.prepare_cached(
                "SELECT id FROM threads WHERE workspace_id = ?1 AND deleted_at IS NULL ORDER BY id",
            )?;
            let rows = stmt.query_map([&id], |r| r.get(0))?;
            rows.collect::<Result<_, _>>()
                .map_err(StoreError::from_sqlite)
        })
        .await
    }
}

/// Why thread `id` is not found: `ThreadDeleted` (with its owner) when
/// it was deleted, `not_found` otherwise.
pub(super) fn gone(conn: &rusqlite::Connection, id: &str) -> StoreError {
    let owner = conn
        .prepare_cached(
            "SELECT principal, application FROM threads WHERE id = ?1 AND deleted_at IS NOT NULL",
        )
        .and_then(|mut s| s.query_row([id], |r| Ok((r.get(0)?, r.get(1)?))).optional());
    match owner {
        Ok(Some((principal, application))) => StoreError::ThreadDeleted {
            thread: id.to_owned(),
            principal,
            application,
        },
        Ok(None) => StoreError::not_found("thread", id),
        Err(e) => StoreError::from_sqlite(e),
    }
}

impl Writer {
    pub(super) fn delete_thread(
        &mut self,
        actor: &Actor,
        token: Option<String>,
        id: &str,
    ) -> StoreResult<Deleted> {
        let found: Option<(String, String, Option<i64>)> = self
            .conn
            .prepare_cached("SELECT principal, application, deleted_at FROM threads WHERE id = ?1")?
            .query_row([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .optional()?;
        let Some((principal, application, deleted)) = found else {
            return Err(StoreError::not_found("thread", id));
        };
        if deleted.is_some() {
            return Err(StoreError::ThreadDeleted {
                thread: id.to_owned(),
                principal,
                application,
            });
        }
        self.refuse_busy(id)?;
        let by = DeletedBy {
            principal: actor.principal.clone(),
            application: actor.application.clone(),
            token,
        };
        let deletion = self.write(|tx, journal, stage, now| {
            let mut digest = Digest256::new();
            let (mut events, mut first, mut last) = (0u64, 0i64, 0i64);
            {
                let mut stmt = tx.prepare_cached(
                    "SELECT seq, hash FROM events WHERE thread_id = ?1 \
                     AND kind NOT IN ('tombstone', 'history_pruned') ORDER BY seq",
                )?;
                let mut rows = stmt.query([id])?;
                while let Some(r) = rows.next()? {
                    let seq: i64 = r.get(0)?;
                    let hash = r.get_ref(1)?.as_blob().unwrap_or_default();
                    digest.add(seq, hash);
                    if events == 0 {
                        first = seq;
                    }
                    (events, last) = (events + 1, seq);
                }
            }
            let turns = tx.execute(
                &format!(
                    "UPDATE events SET kind = '{KIND}', turn_id = NULL, at = 0, payload = NULL, \
                     has_payload = 0, event_hash = NULL WHERE thread_id = ?1 \
                     AND kind NOT IN ('{KIND}', 'history_pruned')"
                ),
                [id],
            )
            .and_then(|_| {
                let of_thread = "(SELECT id FROM turns WHERE thread_id = ?1)";
                tx.execute("DELETE FROM permission_requests WHERE thread_id = ?1", [id])?;
                tx.execute(&format!("DELETE FROM audit WHERE turn_id IN {of_thread}"), [id])?;
                tx.execute(
                    &format!(
                        "DELETE FROM receipts WHERE kind IN ('turn.submit', 'turn.cancel', \
                         'turn.resolve', 'permission.respond') AND resource_id IN {of_thread}"
                    ),
                    [id],
                )?;
                tx.execute("DELETE FROM turns WHERE thread_id = ?1", [id])
            })?;
            tx.execute(
                "UPDATE threads SET deleted_at = ?2, updated_at = ?2, agent_session_id = NULL, \
                 agent_fingerprint = NULL, agent_thread_version = NULL WHERE id = ?1",
                params![id, now],
            )?;
            pause("before-commit");
            let deletion = ThreadDeletion {
                thread_id: id.to_owned(),
                events,
                turns: turns as u64,
                first_seq: first as u64,
                last_seq: last as u64,
                digest: digest.hex(),
                by,
                deleted_at: now,
            };
            journal.append(
                tx,
                stage,
                id,
                None,
                now,
                Payload::ThreadDeleted(deletion.clone()),
            )?;
            // Content kept in memory (metadata-only threads) goes now.
            let mut memory = journal.memory.lock().unwrap_or_else(|p| p.into_inner());
            for seq in first..=last {
                memory.remove(seq as u64);
            }
            Ok(deletion)
        })?;
        let seq = self.journal.last_seq;
        self.compact = true;
        Ok((deletion, seq))
    }

    /// `thread_fenced` for a turn of `id` whose outcome is unknown (named
    /// first: it needs the owner), `thread_busy` for a queued or claimed one.
    pub(super) fn refuse_busy(&self, id: &str) -> StoreResult<()> {
        // Cached: a retention batch runs it, and counts what its cached
        // statements cost (`retention::steps`).
        let busy: Option<(String, String)> = self
            .conn
            .prepare_cached(
                "SELECT id, state FROM turns WHERE thread_id = ?1 \
                 AND state NOT IN ('completed', 'failed', 'cancelled') \
                 ORDER BY state IN ('submission_unknown', 'interrupted') DESC, queue_seq LIMIT 1",
            )?
            .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        let Some((turn, state)) = busy else {
            return Ok(());
        };
        let state = TurnState::parse(&state).ok_or(StoreError::InvalidRow {
            table: "turns",
            row: turn.clone(),
            check: "fields",
        })?;
        Err(if state.is_fenced() {
            StoreError::ThreadFenced {
                thread: id.to_owned(),
                turn,
            }
        } else {
            StoreError::ThreadBusy {
                thread: id.to_owned(),
                turn,
                state,
            }
        })
    }
}

/// Test hook (`test-support` builds only): `LAPIS_DELETE_FAULT_PAUSE=<step>`
/// stops a deletion at `<step>` (`before-commit`: everything written but
/// the receipt, inside the transaction), after saying
/// `lapis-fault-pause: delete <step>` on stderr, so a test can kill -9 the
/// controller exactly there.
fn pause(step: &str) {
    #[cfg(feature = "test-support")]
    if std::env::var("LAPIS_DELETE_FAULT_PAUSE").is_ok_and(|w| w == step) {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "lapis-fault-pause: delete {step}");
        loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
    }
    #[cfg(not(feature = "test-support"))]
    let _ = step;
}
