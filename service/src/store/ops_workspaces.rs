//! Workspace operations on the writer: registering and removing.
//!
//! What must stay true: a removed workspace keeps its row (marked with
//! `removed_at`), so its threads, turns, receipts and journal keep every
//! reference the startup validator checks and `journal verify` still walks
//! an unbroken chain; and a workspace is only ever removed with no turn that
//! is queued, claimed or fenced on it (checked in the same writer step that
//! marks it, so no submit can slip in between), so nothing can wait on a
//! workspace that no longer takes work. The validator checks that too.
//! One tree has one workspace: a new workspace whose directory is inside,
//! contains, or is the same directory (by inode, so a bind mount or a
//! second path to it counts) as a registered one is refused
//! (`workspace_overlaps`), checked in the writer step that inserts it.
//! Pairs registered before that rule existed keep working.

use rusqlite::{OptionalExtension, params};
use serde_json::json;

use crate::domain::{Actor, Receipt, StoreError, StoreResult, TurnState, Workspace};
use lapis_protocol::params::WorkspaceRemoved;

use super::command_kind::CommandKind;
use super::ids::{check_name, digest};
use super::read;
use super::receipts::Command;
use super::writer::Writer;

impl Writer {
    /// Register `id` for the canonical `path`; the same pair again is a
    /// no-op (`replayed`). With a command id (an application's
    /// `workspaces.add`) the answer is also recorded as a receipt.
    pub(super) fn add_workspace(
        &mut self,
        id: &str,
        path: &str,
        command: Option<(&Actor, &str)>,
    ) -> StoreResult<Receipt<Workspace>> {
        let Some((actor, command_id)) = command else {
            return self.register_workspace(id, path);
        };
        let command = Command {
            actor,
            id: Some(command_id),
            kind: CommandKind::WorkspaceAdd,
            digest: digest(&["workspace.add", id, path]),
        };
        let r = self.command(
            command,
            |r: &Receipt<Workspace>| r.value.id.clone(),
            |w| w.register_workspace(id, path),
        )?;
        Ok(Receipt {
            value: r.value.value,
            replayed: r.replayed || r.value.replayed,
        })
    }

    /// A removed workspace comes back when the same id is added for the same
    /// directory again (with its threads); its id and directory are not
    /// given to another pairing, since its threads still name them.
    fn register_workspace(&mut self, id: &str, path: &str) -> StoreResult<Receipt<Workspace>> {
        check_name("workspace id", id)?;
        if let Some((existing, removed)) = read::workspace_any(&self.conn, id)? {
            if existing.path != path {
                return Err(StoreError::conflict(if removed {
                    "workspace id belonged to a removed workspace of another directory; choose another id"
                } else {
                    "workspace id is registered for another path"
                }));
            }
            if !removed {
                return Ok(Receipt {
                    value: existing,
                    replayed: true,
                });
            }
            self.write(|tx, _, _, _| {
                tx.execute(
                    "UPDATE workspaces SET removed_at = NULL WHERE id = ?1",
                    [id],
                )?;
                Ok(())
            })?;
            return Ok(Receipt {
                value: existing,
                replayed: false,
            });
        }
        let other: Option<String> = self
            .conn
            .query_row("SELECT id FROM workspaces WHERE path = ?1", [path], |r| {
                r.get(0)
            })
            .optional()?;
        if let Some(existing) = other {
            return Err(StoreError::WorkspaceAlias { existing });
        }
        let registered: Vec<(String, String)> = self
            .conn
            .prepare_cached("SELECT id, path FROM workspaces WHERE removed_at IS NULL")?
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?;
        if let Some((existing, how)) = overlap(path, &registered) {
            return Err(StoreError::WorkspaceOverlaps { existing, how });
        }
        let ws = self.write(|tx, _, _, now| {
            tx.execute(
                "INSERT INTO workspaces (id, path, created_at) VALUES (?1, ?2, ?3)",
                params![id, path, now],
            )?;
            Ok(Workspace {
                id: id.to_owned(),
                path: path.to_owned(),
                created_at: now,
            })
        })?;
        Ok(Receipt {
            value: ws,
            replayed: false,
        })
    }

    /// Mark `id` removed, with an audit row naming who removed it. Refused
    /// while a turn of the workspace is fenced (`workspace_fenced`) or
    /// queued or claimed (`workspace_busy`); a fenced turn is named first,
    /// since it is the one that needs the owner. Removing a removed
    /// workspace again answers `replayed: true`.
    pub(super) fn remove_workspace(
        &mut self,
        actor: &Actor,
        id: &str,
    ) -> StoreResult<WorkspaceRemoved> {
        check_name("workspace id", id)?;
        let (workspace, removed) = read::workspace_any(&self.conn, id)?
            .ok_or_else(|| StoreError::not_found("workspace", id))?;
        let threads: u64 = self.conn.query_row(
            "SELECT count(*) FROM threads WHERE workspace_id = ?1 AND deleted_at IS NULL",
            [id],
            |r| r.get(0),
        )?;
        if removed {
            return Ok(WorkspaceRemoved {
                workspace,
                threads,
                replayed: true,
                worktree_deleted: false,
                threads_deleted: 0,
            });
        }
        let busy: Option<(String, String)> = self
            .conn
            .query_row(
                "SELECT id, state FROM turns WHERE workspace_id = ?1 \
                 AND state NOT IN ('completed', 'failed', 'cancelled') \
                 ORDER BY state IN ('submission_unknown', 'interrupted') DESC, queue_seq LIMIT 1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        if let Some((turn, state)) = busy {
            let state = TurnState::parse(&state).ok_or(StoreError::InvalidRow {
                table: "turns",
                row: turn.clone(),
                check: "fields",
            })?;
            return Err(if state.is_fenced() {
                StoreError::WorkspaceFenced {
                    workspace: id.to_owned(),
                    turn,
                }
            } else {
                StoreError::WorkspaceBusy {
                    workspace: id.to_owned(),
                    turn,
                    state,
                }
            });
        }
        self.write(|tx, _, _, now| {
            tx.execute(
                "UPDATE workspaces SET removed_at = ?2 WHERE id = ?1",
                params![id, now],
            )?;
            let detail = json!({
                "workspace": id, "path": workspace.path,
                "application": actor.application, "threads": threads,
            });
            tx.prepare_cached(
                "INSERT INTO audit (at, principal, action, turn_id, detail) \
                 VALUES (?1, ?2, 'workspace.remove', NULL, ?3)",
            )?
            .execute(params![now, actor.principal, detail.to_string()])?;
            Ok(())
        })?;
        Ok(WorkspaceRemoved {
            workspace,
            threads,
            replayed: false,
            worktree_deleted: false,
            threads_deleted: 0,
        })
    }
}

/// How `path` (canonical) overlaps a registered workspace, if it does:
/// `(its id, "inside" | "contains" | "same directory")`. Compared by path
/// components, then by the (device, inode) of each directory and its
/// ancestors, so a bind mount or another path to one tree is found too;
/// a directory that cannot be read is compared by its path alone.
fn overlap(path: &str, registered: &[(String, String)]) -> Option<(String, &'static str)> {
    use std::path::Path;
    let new = Path::new(path);
    let new_chain = inode_chain(new);
    for (id, other) in registered {
        let other = Path::new(other);
        let how = if new.starts_with(other) {
            Some("inside")
        } else if other.starts_with(new) {
            Some("contains")
        } else {
            let other_chain = inode_chain(other);
            match (new_chain.first(), other_chain.first()) {
                (Some(a), Some(b)) if a == b => Some("same directory"),
                (Some(_), Some(b)) if new_chain.contains(b) => Some("inside"),
                (Some(a), Some(_)) if other_chain.contains(a) => Some("contains"),
                _ => None,
            }
        };
        if let Some(how) = how {
            return Some((id.clone(), how));
        }
    }
    None
}

/// The (device, inode) of `dir` and of each of its ancestors, `dir` first;
/// empty when `dir` cannot be read.
fn inode_chain(dir: &std::path::Path) -> Vec<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let mut chain = Vec::new();
    for p in dir.ancestors() {
        match std::fs::metadata(p) {
            Ok(m) => chain.push((m.dev(), m.ino())),
            Err(_) if chain.is_empty() => return chain,
            Err(_) => break,
        }
    }
    chain
}
