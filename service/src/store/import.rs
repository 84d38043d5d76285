//! `threads.import` on the writer (issue 44 item 5): a verified bundle
//! (`super::bundle`) journaled again as a new thread of this controller.
//!
//! What must stay true:
//! - Nothing is written unless the whole bundle verifies and every row it
//!   becomes is one this controller would store itself (`plan`, before
//!   the writer's transaction): a refusal writes nothing.
//! - One writer step, one transaction, bounded by
//!   `lapis_protocol::MAX_IMPORT_BUNDLE_BYTES`: the thread row, its turns
//!   (new ids, every one settled: never queued or run again) with their
//!   `turn.submit` receipts, its events appended through the journal's
//!   normal path (new `seq`s, linked into this controller's chain, their
//!   `at` as exported), then the `thread_imported` receipt. A crash (kill
//!   -9) leaves no trace of the import or all of it.
//! - Content only as the bundle retained it: a metadata-only thread's
//!   content stays absent (read back as unavailable); what retention
//!   pruned (tombstones, `history_pruned` receipts) is left out and
//!   counted in the receipt's `pruned`. Stored payloads are redacted
//!   again by this controller's rules; source ids in them become the new
//!   ones, and `thread_created` names the new workspace.
//! - Each import is a new thread: importing one bundle twice gives two.

use lapis_protocol::{Payload, ThreadImported};
use rusqlite::params;
use serde_json::Value;

use crate::domain::{Actor, StoreError, StoreResult, Thread};

use super::command_kind::CommandKind;
use super::handle::Store;
use super::ids::{check_name, digest};
use super::journal::ReadyPayload;
use super::ports;
use super::read;
use super::receipts::stage_receipt;
use super::writer::Writer;

mod plan;
pub(crate) use plan::{Plan, plan, refused};

/// What `Writer::import_thread` answers: the receipt, the new thread and
/// the receipt's `seq`.
pub(crate) type Imported = (ThreadImported, Thread, u64);

impl Store {
    /// Imports `plan` as a new thread of `workspace` for `actor` (see the
    /// module docs). `not_found` for an unknown workspace.
    pub(crate) async fn import_thread(
        &self,
        actor: &Actor,
        workspace: &str,
        plan: Plan,
    ) -> StoreResult<Imported> {
        let (actor, workspace) = (actor.clone(), workspace.to_owned());
        self.op(move |w| w.import_thread(&actor, &workspace, plan))
            .await
    }

    /// The registered workspace at `path`, if any.
    pub(crate) async fn workspace_at(&self, path: &str) -> StoreResult<Option<String>> {
        let path = path.to_owned();
        self.read(move |c, _| {
            use rusqlite::OptionalExtension;
            c.prepare_cached(
                "SELECT id FROM workspaces WHERE path = ?1 AND removed_at IS NULL ORDER BY id",
            )?
            .query_row([&path], |r| r.get(0))
            .optional()
            .map_err(StoreError::from_sqlite)
        })
        .await
    }
}

impl Writer {
    pub(super) fn import_thread(
        &mut self,
        actor: &Actor,
        workspace: &str,
        plan: Plan,
    ) -> StoreResult<Imported> {
        check_name("workspace id", workspace)?;
        if read::workspace(&self.conn, workspace)?.is_none() {
            return Err(StoreError::not_found("workspace", workspace));
        }
        let Some(provider) = plan.settings.provider.clone() else {
            return Err(StoreError::invalid(
                "retention pruned the bundle's thread settings: name the provider (--provider NAME)",
            ));
        };
        let first_queue = self.last_queue_seq + 1;
        let id = plan.thread.clone();
        let (receipt, thread) = self.write(|tx, journal, stage, now| {
            let s = &plan.settings;
            let budget = s
                .budget
                .as_ref()
                .map(serde_json::to_string)
                .transpose()
                .map_err(|_| StoreError::invalid("budget not serializable"))?;
            let sql = format!(
                "INSERT INTO threads (id, principal, application, workspace_id, provider, approval, \
                 restricted, retention, version, created_at, updated_at, mcp_servers, \
                 permission_timeout_seconds, budget, {}) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 1, ?9, ?9, NULL, ?10, ?11, {})",
                ports::COLS,
                ports::placeholders(12)
            );
            let fixed = params![
                id,
                actor.principal,
                actor.application,
                workspace,
                provider,
                s.approval.as_str(),
                s.restricted,
                plan.retention.as_str(),
                now,
                s.permission_timeout_seconds.map(|n| n as i64),
                budget,
            ];
            ports::execute(tx, &sql, fixed, &Default::default())?;
            journal.stage_thread(stage, &id, plan.retention, false);
            for (i, t) in plan.turns.iter().enumerate() {
                tx.prepare_cached(
                    "INSERT INTO turns (id, thread_id, workspace_id, principal, command_id, \
                     queue_seq, state, outcome, continues, prompt, created_at, updated_at, \
                     prepared_at, dispatched_at, started_at, finished_at, resolved_at) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, \
                     ?12, ?16)",
                )?
                .execute(params![
                    t.id,
                    id,
                    workspace,
                    actor.principal,
                    t.command_id,
                    (first_queue + i as u64) as i64,
                    t.state.as_str(),
                    t.outcome,
                    t.continues,
                    t.prompt,
                    t.created_at,
                    t.finished_at,
                    t.prepared_at,
                    t.dispatched_at,
                    t.started_at,
                    t.resolved_at,
                ])?;
                let dig = digest(&["turn.import", &t.id]);
                stage_receipt(
                    tx,
                    actor,
                    &t.command_id,
                    CommandKind::TurnSubmit,
                    &dig,
                    &t.id,
                    None,
                    now,
                )?;
            }
            for e in &plan.events {
                let ready = match &e.payload {
                    None => None,
                    Some(None) => Some(ReadyPayload::unavailable()),
                    Some(Some(v)) => {
                        let mut v = v.clone();
                        if e.kind == lapis_protocol::EventKind::ThreadCreated
                            && let Value::Object(m) = &mut v
                        {
                            m.insert("workspaceId".into(), Value::String(workspace.to_owned()));
                        }
                        Some(ReadyPayload::imported(v))
                    }
                };
                journal.append_ready(tx, stage, &id, e.turn.as_deref(), e.kind, e.at, ready)?;
            }
            journal.flush(tx, stage)?;
            pause("before-receipt");
            let receipt = ThreadImported {
                source_thread_id: plan.header.thread.clone(),
                source_head: plan.source_head.clone(),
                source_anchor_events: plan.header.anchor_events,
                source_anchor_head: plan.header.anchor_head.clone(),
                bundle_sha256: plan.sha256.clone(),
                events: plan.events.len() as u64,
                pruned: plan.pruned,
                turns: plan.turns.len() as u64,
                imported_at: now,
            };
            journal.append(
                tx,
                stage,
                &id,
                None,
                now,
                Payload::ThreadImported(receipt.clone()),
            )?;
            let thread =
                read::thread(tx, &id)?.ok_or_else(|| StoreError::not_found("thread", &id))?;
            Ok((receipt, thread))
        })?;
        self.last_queue_seq += plan.turns.len() as u64;
        Ok((receipt, thread, self.journal.last_seq))
    }
}

/// Test hook (`test-support` builds only): `LAPIS_IMPORT_FAULT_PAUSE=<step>`
/// stops an import at `<step>` (`before-receipt`: the thread, its turns
/// and events written, inside the transaction, the receipt not yet),
/// after saying `lapis-fault-pause: import <step>` on stderr, so a test
/// can kill -9 the controller exactly there.
fn pause(step: &str) {
    #[cfg(feature = "test-support")]
    if std::env::var("LAPIS_IMPORT_FAULT_PAUSE").is_ok_and(|w| w == step) {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "lapis-fault-pause: import {step}");
        loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
    }
    #[cfg(not(feature = "test-support"))]
    let _ = step;
}
