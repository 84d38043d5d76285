//! `workspaces add ID DIR`, `workspaces list` and `workspaces remove ID`.

use lapis_protocol::params::{WorkspacesAdd, WorkspacesRemove, WorktreeSpec};
use serde_json::json;

use crate::args::{GlobalArgs, WorkspacesCommand};
use crate::exit::{CliError, CliResult};
use crate::table::{Cell, Table};

use super::connect::{client_error, connect};

pub(super) fn run(global: &GlobalArgs, command: WorkspacesCommand) -> CliResult {
    let mut client = connect(global)?;
    match command {
        WorkspacesCommand::Add {
            id,
            dir,
            worktree_of,
            branch,
            from,
            cmd,
            out,
        } => {
            // The server canonicalizes; an absolute path is all it needs.
            let path = dir
                .as_deref()
                .map(absolute)
                .transpose()?
                .unwrap_or_default();
            let worktree = worktree_of
                .as_deref()
                .map(absolute)
                .transpose()?
                .map(|of| WorktreeSpec { of, branch, from });
            let command_id = super::command_id::given_or_fresh(cmd.command_id)?;
            let ws = client
                .workspaces_add_with(&WorkspacesAdd {
                    id,
                    path,
                    worktree,
                    command_id: Some(command_id),
                })
                .map_err(client_error)?
                .workspace;
            if out.json {
                crate::output::json(&json!({ "workspace": ws }))?;
            } else {
                crate::output::line(format!("{}\t{}", ws.id, ws.path))?;
            }
        }
        WorkspacesCommand::Remove {
            id,
            delete_worktree,
            force,
            purge,
            out,
        } => {
            let id = super::ids::workspace(&mut client, &id)?;
            let removed = client
                .workspaces_remove_with(&WorkspacesRemove {
                    id,
                    delete_worktree,
                    force,
                    purge,
                })
                .map_err(client_error)?;
            if out.json {
                crate::output::json(&json!(removed))?;
            } else {
                let ws = &removed.workspace;
                let what = if removed.replayed {
                    "was already removed"
                } else {
                    "removed"
                };
                crate::output::line(format!(
                    "workspace {} ({}) {what}; its {} thread(s) stay readable (`threads list`, `journal tail`) and take no new turns",
                    ws.id, ws.path, removed.threads
                ))?;
                if removed.threads_deleted > 0 {
                    crate::output::line(format!(
                        "{} thread(s) deleted first; their receipts stay in the journal",
                        removed.threads_deleted
                    ))?;
                }
                if removed.worktree_deleted {
                    crate::output::line(format!(
                        "worktree {} deleted (its branch stays)",
                        ws.path
                    ))?;
                }
            }
        }
        WorkspacesCommand::List(list_args) => {
            let list = client.workspaces_with_fences().map_err(client_error)?;
            if list_args.out.json {
                crate::output::json(&json!(list))?;
            } else {
                // A fenced workspace names the turn that fences it; how
                // to release it is `turns resolve`.
                let mut table = Table::new(&["ID", "PATH", "ADDED", "FENCED BY", "FENCED"])
                    .wide(list_args.wide);
                for ws in &list.workspaces {
                    let fence = list.fences.iter().find(|f| f.workspace == ws.id);
                    table.row(vec![
                        (&ws.id).into(),
                        (&ws.path).into(),
                        Cell::Time(Some(ws.created_at)),
                        fence
                            .map_or_else(String::new, |f| {
                                format!(
                                    "turn {} (thread {}, application {}), {}",
                                    f.turn, f.thread, f.application, f.state
                                )
                            })
                            .into(),
                        Cell::Time(fence.map(|f| f.since)),
                    ]);
                }
                table.print()?;
            }
        }
    }
    Ok(())
}

/// `dir` made absolute, as UTF-8 (the wire carries strings).
pub(super) fn absolute(dir: &std::path::Path) -> Result<String, CliError> {
    let dir = std::path::absolute(dir).map_err(|e| CliError::failure("invalid_request", e))?;
    dir.to_str().map(str::to_owned).ok_or_else(|| {
        CliError::failure(
            "invalid_request",
            anyhow::anyhow!("the directory path is not UTF-8"),
        )
    })
}
