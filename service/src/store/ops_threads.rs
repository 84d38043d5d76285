//! Thread operations on the writer.

use lapis_protocol::config::{PERMISSION_TIMEOUT_SECONDS, ThreadBudget};
use lapis_protocol::{Payload, ThreadConfigured, ThreadCreated};
use rusqlite::params;
use serde_json::json;

use crate::domain::{Actor, NewThread, Receipt, StoreError, StoreResult, Thread, ThreadPatch};

use super::command_kind::CommandKind;
use super::ids::{check_name, digest, new_id};
use super::ports;
use super::read;
use super::receipts::{Command, check_replay, receipt, stage_receipt};
use super::writer::Writer;

impl Writer {
    /// Reserve a thread id for the actor (idempotent by command id: the
    /// same command id answers the same id).
    pub(super) fn reserve_thread(
        &mut self,
        actor: &Actor,
        command_id: &str,
    ) -> StoreResult<Receipt<String>> {
        check_name("command id", command_id)?;
        let dig = digest(&["thread.reserve", &actor.application]);
        if let Some(found) = receipt(&self.conn, actor, command_id)? {
            check_replay(&found, CommandKind::ThreadReserve, &dig)?;
            return Ok(Receipt {
                value: found.resource_id,
                replayed: true,
            });
        }
        let id = new_id("thr_")?;
        self.write(|tx, _, _, now| {
            tx.execute(
                "INSERT INTO thread_reservations (id, principal, application, created_at) \
                 VALUES (?1, ?2, ?3, ?4)",
                params![id, actor.principal, actor.application, now],
            )?;
            stage_receipt(
                tx,
                actor,
                command_id,
                CommandKind::ThreadReserve,
                &dig,
                &id,
                None,
                now,
            )
        })?;
        Ok(Receipt {
            value: id,
            replayed: false,
        })
    }

    /// The id a new thread gets: a fresh one, or the actor's reservation
    /// (`not_found` when it is none of theirs, `conflict` once taken).
    fn thread_id_for(&self, actor: &Actor, reserved: Option<&str>) -> StoreResult<String> {
        let Some(id) = reserved else {
            return new_id("thr_");
        };
        let owned: bool = self
            .conn
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM thread_reservations \
                 WHERE id = ?1 AND principal = ?2 AND application = ?3)",
            )?
            .query_row(params![id, actor.principal, actor.application], |r| {
                r.get(0)
            })?;
        if !owned {
            return Err(StoreError::not_found("thread reservation", id));
        }
        if read::thread(&self.conn, id)?.is_some() {
            return Err(StoreError::conflict("the reserved thread id is taken"));
        }
        Ok(id.to_owned())
    }

    /// Create a thread stamped with the actor (idempotent when a command id is given).
    pub(super) fn create_thread(
        &mut self,
        actor: &Actor,
        input: NewThread,
    ) -> StoreResult<Receipt<Thread>> {
        check_name("workspace id", &input.workspace_id)?;
        check_name("provider", &input.provider)?;
        let restricted = if input.restricted { "1" } else { "0" };
        let mcp = (!input.mcp_servers.is_empty()).then(|| json!(input.mcp_servers).to_string());
        let mut parts = vec![
            "thread.create",
            &actor.application,
            &input.workspace_id,
            &input.provider,
            input.approval.as_str(),
            restricted,
            input.retention.as_str(),
        ];
        // Only when present, so receipts made before MCP servers existed
        // still replay.
        if let Some(m) = &mcp {
            parts.push(m);
        }
        let (early, late) = ports::receipt_parts(&input.ports);
        parts.extend(early.iter().map(String::as_str));
        if let Some(n) = input.permission_timeout_seconds {
            check_permission_timeout(n)?;
        }
        let timeout = input
            .permission_timeout_seconds
            .map(|n| format!("permissionTimeout={n}"));
        if let Some(t) = &timeout {
            parts.push(t);
        }
        if let Some(b) = &input.budget {
            check_budget(b)?;
        }
        let budget = input.budget.as_ref().map(budget_json).transpose()?;
        // Tagged and only when present, like the timeout above.
        let budget_part = budget.as_ref().map(|b| format!("budget={b}"));
        if let Some(b) = &budget_part {
            parts.push(b);
        }
        ports::check(&input.ports, input.retention)?;
        parts.extend(late.iter().map(String::as_str));
        let reserved = input.thread_id.as_ref().map(|t| format!("thread={t}"));
        if let Some(r) = &reserved {
            parts.push(r);
        }
        let dig = digest(&parts);
        if let Some(cmd) = &input.command_id {
            check_name("command id", cmd)?;
            if let Some(found) = receipt(&self.conn, actor, cmd)? {
                check_replay(&found, CommandKind::ThreadCreate, &dig)?;
                let t = read::thread(&self.conn, &found.resource_id)?
                    .ok_or_else(|| StoreError::not_found("thread", &found.resource_id))?;
                return Ok(Receipt {
                    value: t,
                    replayed: true,
                });
            }
        }
        // A removed workspace is not found: it takes no new threads.
        if read::workspace(&self.conn, &input.workspace_id)?.is_none() {
            return Err(StoreError::not_found("workspace", &input.workspace_id));
        }
        let id = self.thread_id_for(actor, input.thread_id.as_deref())?;
        let thread = self.write(|tx, j, st, now| {
            let sql = format!(
                "INSERT INTO threads (id, principal, application, workspace_id, provider, approval, \
                 restricted, retention, version, created_at, updated_at, mcp_servers, \
                 permission_timeout_seconds, budget, {}) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 1, ?9, ?9, ?10, ?11, ?12, {})",
                ports::COLS,
                ports::placeholders(13)
            );
            let fixed = params![
                id,
                actor.principal,
                actor.application,
                input.workspace_id,
                input.provider,
                input.approval.as_str(),
                input.restricted,
                input.retention.as_str(),
                now,
                mcp,
                input.permission_timeout_seconds.map(|n| n as i64),
                budget,
            ];
            ports::execute(tx, &sql, fixed, &input.ports)?;
            if let Some(cmd) = &input.command_id {
                stage_receipt(tx, actor, cmd, CommandKind::ThreadCreate, &dig, &id, None, now)?;
            }
            j.stage_thread(
                st,
                &id,
                input.retention,
                input.ports.transcript_store.is_some(),
            );
            let created = Payload::ThreadCreated(ThreadCreated {
                workspace_id: input.workspace_id.clone(),
                provider: input.provider.clone(),
                approval: input.approval,
                restricted: input.restricted,
                retention: input.retention,
                mcp_servers: input.mcp_servers.clone(),
                ports: input.ports.clone(),
                permission_timeout_seconds: input.permission_timeout_seconds,
                budget: input.budget.clone(),
            });
            j.append(tx, st, &id, None, now, created)?;
            read::thread(tx, &id)?.ok_or_else(|| StoreError::not_found("thread", &id))
        })?;
        Ok(Receipt {
            value: thread,
            replayed: false,
        })
    }

    /// Change a thread's configuration if `expected_version` is current and no
    /// turn of the thread is queued or in flight (a fenced turn does not
    /// block it: it never runs again). Every turn claimed later reads the new
    /// configuration; none accepted earlier can, since none is waiting.
    pub(super) fn configure_thread(
        &mut self,
        actor: &Actor,
        id: &str,
        expected_version: u64,
        patch: ThreadPatch,
        command_id: Option<&str>,
    ) -> StoreResult<Receipt<Thread>> {
        let input = serde_json::to_string(&patch)
            .map_err(|_| StoreError::invalid("patch not serializable"))?;
        let command = Command {
            actor,
            id: command_id,
            kind: CommandKind::ThreadConfigure,
            digest: digest(&[
                "thread.configure",
                id,
                &expected_version.to_string(),
                &input,
            ]),
        };
        self.command(
            command,
            |t: &Thread| t.id.clone(),
            |w| w.configure(actor, id, expected_version, patch),
        )
    }

    fn configure(
        &mut self,
        actor: &Actor,
        id: &str,
        expected_version: u64,
        patch: ThreadPatch,
    ) -> StoreResult<Thread> {
        if let Some(p) = &patch.provider {
            check_name("provider", p)?;
        }
        if let Some(Some(n)) = patch.permission_timeout_seconds {
            check_permission_timeout(n)?;
        }
        if let Some(Some(b)) = &patch.budget {
            check_budget(b)?;
        }
        if let Some(Some(s)) = &patch.ports.transcript_store {
            check_name("transcript store", s)?;
        }
        let cur =
            read::thread(&self.conn, id)?.ok_or_else(|| StoreError::not_found("thread", id))?;
        if cur.version != expected_version {
            return Err(StoreError::conflict("thread version is stale"));
        }
        if self
            .live
            .values()
            .any(|t| t.thread == id && !t.state.is_fenced())
        {
            return Err(StoreError::conflict("thread has a queued or running turn"));
        }
        let next = Thread {
            provider: patch.provider.clone().unwrap_or(cur.provider.clone()),
            approval: patch.approval.unwrap_or(cur.approval),
            restricted: patch.restricted.unwrap_or(cur.restricted),
            retention: patch.retention.unwrap_or(cur.retention),
            permission_timeout_seconds: patch
                .permission_timeout_seconds
                .unwrap_or(cur.permission_timeout_seconds),
            budget: patch.budget.clone().unwrap_or(cur.budget.clone()),
            ports: cur.ports.patched(&patch.ports),
            version: cur.version + 1,
            ..cur.clone()
        };
        ports::check(&next.ports, next.retention)?;
        let next_budget = next.budget.as_ref().map(budget_json).transpose()?;
        self.write(|tx, j, st, now| {
            let sql = format!(
                "UPDATE threads SET provider = ?1, approval = ?2, restricted = ?3, retention = ?4, \
                 version = ?5, updated_at = ?6, permission_timeout_seconds = ?9, budget = ?10, \
                 {} WHERE id = ?7 AND version = ?8",
                ports::assignments(11)
            );
            let fixed = params![
                next.provider,
                next.approval.as_str(),
                next.restricted,
                next.retention.as_str(),
                next.version as i64,
                now,
                id,
                cur.version as i64,
                next.permission_timeout_seconds.map(|n| n as i64),
                next_budget,
            ];
            ports::execute(tx, &sql, fixed, &next.ports)?;
            j.stage_retention(
                st,
                id,
                next.retention,
                next.ports.transcript_store.is_some(),
            );
            let configured = Payload::ThreadConfigured(ThreadConfigured {
                version: next.version,
                provider: next.provider.clone(),
                approval: next.approval,
                restricted: next.restricted,
                retention: next.retention,
                principal: actor.principal.clone(),
                permission_timeout_seconds: next.permission_timeout_seconds,
                budget: next.budget.clone(),
                transcript_store: next.ports.transcript_store.clone(),
            });
            j.append(tx, st, id, None, now, configured)?;
            read::thread(tx, id)?.ok_or_else(|| StoreError::not_found("thread", id))
        })
    }
}

/// A thread's own permission timeout is within the provider's bounds
/// ([`PERMISSION_TIMEOUT_SECONDS`], one definition for both).
fn check_permission_timeout(seconds: u64) -> StoreResult<()> {
    if PERMISSION_TIMEOUT_SECONDS.contains(&seconds) {
        Ok(())
    } else {
        Err(StoreError::invalid(format!(
            "permissionTimeoutSeconds must be an integer from {} to {}",
            PERMISSION_TIMEOUT_SECONDS.start(),
            PERMISSION_TIMEOUT_SECONDS.end()
        )))
    }
}

/// A thread's own budget is valid ([`ThreadBudget::check`], the rules of
/// the configured budgets).
fn check_budget(budget: &ThreadBudget) -> StoreResult<()> {
    budget
        .check()
        .map_err(|why| StoreError::invalid(format!("budget: {why}")))
}

/// A thread's budget as its column stores it (JSON).
fn budget_json(budget: &ThreadBudget) -> StoreResult<String> {
    serde_json::to_string(budget).map_err(|_| StoreError::invalid("budget does not serialize"))
}
