//! Command receipts: the store's idempotency.
//!
//! Every mutation may carry a caller-chosen command id. A receipt is keyed by
//! (principal, application, command id) — two applications of one principal
//! never see each other's ids — and holds the command's kind, a digest of its
//! input, the resource it made or changed and, for commands whose answer is
//! not simply the resource as it is now, the result as first returned. The
//! same id with the same kind and digest replays (`replayed: true`, nothing
//! runs again); anything else is `conflict`. A receipt is written in the same
//! transaction as the change it records, so a lost answer can always be
//! asked for again.

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::domain::{Actor, Receipt, StoreError, StoreResult};

use super::command_kind::CommandKind;
use super::ids::{check_name, digest};
use super::writer::Writer;

/// A stored command receipt.
pub(crate) struct StoredReceipt {
    /// The command's kind (stored name).
    pub(crate) kind: String,
    /// Digest of its input.
    pub(crate) digest: String,
    /// The resource it made or changed.
    pub(crate) resource_id: String,
    /// The result as first returned, for kinds that replay it.
    pub(crate) result: Option<String>,
}

/// Look up the receipt of `(principal, application, command_id)`.
pub(crate) fn receipt(
    conn: &Connection,
    actor: &Actor,
    command_id: &str,
) -> StoreResult<Option<StoredReceipt>> {
    Ok(conn
        .prepare_cached(
            "SELECT kind, digest, resource_id, result FROM receipts \
             WHERE principal = ?1 AND application = ?2 AND command_id = ?3",
        )?
        .query_row([&actor.principal, &actor.application, command_id], |r| {
            Ok(StoredReceipt {
                kind: r.get(0)?,
                digest: r.get(1)?,
                resource_id: r.get(2)?,
                result: r.get(3)?,
            })
        })
        .optional()?)
}

/// Check a reused command id: same kind and digest replays, anything else conflicts.
pub(crate) fn check_replay(
    found: &StoredReceipt,
    kind: CommandKind,
    digest: &str,
) -> StoreResult<()> {
    if found.kind == kind.as_str() && found.digest == digest {
        Ok(())
    } else {
        Err(StoreError::conflict(
            "command id was already used with different input",
        ))
    }
}

/// Insert a receipt inside the caller's transaction.
#[allow(clippy::too_many_arguments)]
pub(crate) fn stage_receipt(
    tx: &Connection,
    actor: &Actor,
    command_id: &str,
    kind: CommandKind,
    digest: &str,
    resource_id: &str,
    result: Option<&str>,
    now: i64,
) -> StoreResult<()> {
    tx.prepare_cached(
        "INSERT INTO receipts (principal, application, command_id, kind, digest, resource_id, \
         result, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        actor.principal,
        actor.application,
        command_id,
        kind.as_str(),
        digest,
        resource_id,
        result,
        now
    ])?;
    Ok(())
}

/// A command to run under an optional command id.
pub(crate) struct Command<'a> {
    /// Who runs it (the receipt's principal and application).
    pub(crate) actor: &'a Actor,
    /// The caller's command id, if any.
    pub(crate) id: Option<&'a str>,
    /// What it is.
    pub(crate) kind: CommandKind,
    /// Digest of its input (kind-specific parts, see `ids::digest`).
    pub(crate) digest: String,
}

impl Writer {
    /// Runs `f` as `command`: without a command id it just runs; with one
    /// that was seen before it replays the stored result (or `conflict` for
    /// other input) and runs nothing; otherwise `f`'s changes and the
    /// receipt (with `f`'s result) commit together or not at all.
    pub(crate) fn command<T: Serialize + DeserializeOwned>(
        &mut self,
        command: Command<'_>,
        resource_id: impl FnOnce(&T) -> String,
        f: impl FnOnce(&mut Writer) -> StoreResult<T>,
    ) -> StoreResult<Receipt<T>> {
        let Some(cmd) = command.id else {
            return Ok(Receipt {
                value: f(self)?,
                replayed: false,
            });
        };
        check_name("command id", cmd)?;
        if let Some(found) = receipt(&self.conn, command.actor, cmd)? {
            check_replay(&found, command.kind, &command.digest)?;
            let value = found
                .result
                .as_deref()
                .and_then(|r| serde_json::from_str(r).ok())
                .ok_or(StoreError::InvalidRow {
                    table: "receipts",
                    row: cmd.to_owned(),
                    check: "result",
                })?;
            return Ok(Receipt {
                value,
                replayed: true,
            });
        }
        // One savepoint around the change and its receipt (inside the
        // writer's batch transaction, or its own transaction otherwise).
        let outbox = self.outbox.len();
        // A write inside it must take its own savepoint (`Writer::write`
        // skips one only for a batch's first write with no savepoint open).
        self.batch_clean = None;
        self.conn.execute_batch("SAVEPOINT command")?;
        let mut changed = false;
        let result = (|| {
            let value = f(self)?;
            changed = true;
            let json = serde_json::to_string(&value)
                .map_err(|_| StoreError::invalid("result not serializable"))?;
            let now = self.clock.now_ms();
            stage_receipt(
                &self.conn,
                command.actor,
                cmd,
                command.kind,
                &command.digest,
                &resource_id(&value),
                Some(&json),
                now,
            )?;
            Ok(value)
        })();
        match result {
            Ok(value) => {
                self.conn.execute_batch("RELEASE command")?;
                Ok(Receipt {
                    value,
                    replayed: false,
                })
            }
            Err(e) => {
                let _ = self
                    .conn
                    .execute_batch("ROLLBACK TO command; RELEASE command");
                // A refused `f` changed nothing (its own write rolled back);
                // a failed receipt undoes `f` on disk, so memory follows.
                if changed {
                    self.outbox.truncate(outbox);
                    let _ = self.reload();
                }
                Err(e)
            }
        }
    }
}

impl Writer {
    /// Stores the receipt of a command that already took effect outside the
    /// store (see `Store::record_command`).
    pub(crate) fn record_command(
        &mut self,
        actor: &Actor,
        command_id: &str,
        kind: CommandKind,
        digest_parts: &[String],
        resource_id: &str,
        result: &serde_json::Value,
    ) -> StoreResult<()> {
        check_name("command id", command_id)?;
        let parts: Vec<&str> = digest_parts.iter().map(String::as_str).collect();
        let dig = digest(&parts);
        if let Some(found) = receipt(&self.conn, actor, command_id)? {
            return check_replay(&found, kind, &dig);
        }
        let result = result.to_string();
        self.write(|tx, _, _, now| {
            stage_receipt(
                tx,
                actor,
                command_id,
                kind,
                &dig,
                resource_id,
                Some(&result),
                now,
            )
        })
    }
}

/// The command receipts as the store's public operations.
impl super::Store {
    /// The turn a `turns.submit` with this command id created, for the
    /// submitting principal and application (`not_found` otherwise): finds
    /// the turn of a lost answer without resending the prompt.
    pub(crate) async fn turn_by_command(
        &self,
        actor: &Actor,
        command_id: &str,
    ) -> StoreResult<crate::domain::Turn> {
        let (actor, cmd) = (actor.clone(), command_id.to_owned());
        self.read(move |c, _| {
            let found = receipt(c, &actor, &cmd)?
                .filter(|r| r.kind == CommandKind::TurnSubmit.as_str())
                .ok_or_else(|| StoreError::not_found("command", cmd.clone()))?;
            super::read::turn(c, &found.resource_id)?
                .ok_or_else(|| StoreError::not_found("turn", found.resource_id))
        })
        .await
    }

    /// The recorded answer of a command the store does not run itself (a
    /// permission answer): `Some` when this command id was used with the
    /// same input, `conflict` with other input, `None` when unseen.
    pub(crate) async fn replay_command(
        &self,
        actor: &Actor,
        command_id: &str,
        kind: CommandKind,
        digest_parts: Vec<String>,
    ) -> StoreResult<Option<serde_json::Value>> {
        let (actor, cmd) = (actor.clone(), command_id.to_owned());
        self.read(move |c, _| {
            let parts: Vec<&str> = digest_parts.iter().map(String::as_str).collect();
            let Some(found) = receipt(c, &actor, &cmd)? else {
                return Ok(None);
            };
            check_replay(&found, kind, &digest(&parts))?;
            Ok(found.result.and_then(|r| serde_json::from_str(&r).ok()))
        })
        .await
    }

    /// Records the answer of a command the store does not run itself, after
    /// it took effect (see [`Store::replay_command`]).
    pub(crate) async fn record_command(
        &self,
        actor: &Actor,
        command_id: &str,
        kind: CommandKind,
        digest_parts: Vec<String>,
        resource_id: &str,
        result: serde_json::Value,
    ) -> StoreResult<()> {
        let (actor, cmd, resource) = (actor.clone(), command_id.to_owned(), resource_id.to_owned());
        self.op(move |w| w.record_command(&actor, &cmd, kind, &digest_parts, &resource, &result))
            .await
    }

    // ---- runner -----------------------------------------------------------
}
