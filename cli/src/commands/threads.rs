//! `threads create|configure|list|show|delete|export|import` (export in
//! `threads_export`, import in `threads_import`).

use serde_json::json;

use lapis_protocol::params::{ThreadsConfigure, ThreadsCreate, ThreadsList};

use crate::args::{ApprovalArg, GlobalArgs, RetentionArg, ThreadsCommand};
use crate::exit::CliResult;
use crate::table::{Cell, Table};
use crate::terminal::safe;

use super::connect::{client_error, connect};

pub(super) fn run(global: &GlobalArgs, command: ThreadsCommand) -> CliResult {
    // Export reads the database, `--verify` only its file: no controller.
    if let ThreadsCommand::Export {
        thread,
        output,
        force,
        verify,
        out,
    } = &command
    {
        return match (verify, thread, output) {
            (Some(file), _, _) => super::threads_export::verify(file, out.json),
            (None, Some(thread), Some(file)) => {
                super::threads_export::export(global, thread, file, *force, out.json)
            }
            // clap requires THREAD and -o without --verify.
            _ => Err(crate::exit::CliError::failure(
                "usage",
                anyhow::anyhow!("threads export needs THREAD and -o FILE, or --verify FILE"),
            )),
        };
    }
    if let ThreadsCommand::Import {
        file,
        workspace,
        provider,
        out,
    } = command
    {
        return super::threads_import::import(global, &file, workspace, provider, out.json);
    }
    let mut client = connect(global)?;
    match command {
        ThreadsCommand::Create {
            workspace,
            provider,
            approval,
            restricted,
            retention,
            permission_timeout,
            budget,
            worktree,
            cmd,
            out,
        } => {
            let workspace = super::ids::workspace(&mut client, &workspace)?;
            let command_id = super::command_id::given_or_fresh(cmd.command_id)?;
            let workspace = if worktree {
                worktree_for(&mut client, &workspace, &command_id)?
            } else {
                workspace
            };
            let provider_name = provider.clone();
            let mut params = ThreadsCreate::new(workspace, provider)
                .approval(approval_policy(approval))
                .restricted(restricted)
                .retention(retention_policy(retention))
                .command_id(command_id);
            params.permission_timeout_seconds = permission_timeout;
            params.budget = budget.budget();
            let thread = client
                .threads_create_with(&params)
                .map_err(client_error)
                .map_err(|e| super::suggest::provider_not_found(global, &provider_name, e))?
                .thread;
            warn_if_unasked(&mut client, &thread);
            if out.json {
                crate::output::json(&json!({ "thread": thread }))?;
            } else {
                crate::output::line(&thread.id)?;
            }
        }
        ThreadsCommand::Configure {
            thread,
            expected_version,
            provider,
            approval,
            restricted,
            retention,
            permission_timeout,
            budget,
            clear_budget,
            cmd,
            out,
        } => {
            let thread = super::ids::thread(&mut client, &thread)?;
            let command_id = super::command_id::given_or_fresh(cmd.command_id)?;
            let mut params = ThreadsConfigure::new(thread, expected_version).command_id(command_id);
            params.provider = provider;
            params.approval = approval.map(approval_policy);
            params.restricted = restricted;
            params.retention = retention.map(retention_policy);
            params.permission_timeout_seconds = permission_timeout.map(|t| t.0);
            params.budget = if clear_budget {
                Some(None)
            } else {
                budget.budget().map(Some)
            };
            let thread = client
                .threads_configure(&params)
                .map_err(client_error)?
                .thread;
            if out.json {
                crate::output::json(&json!({ "thread": thread }))?;
            } else {
                crate::output::line(format!("{}\tversion {}", thread.id, thread.version))?;
            }
        }
        ThreadsCommand::List(list_args) => {
            let (list, next) = if list_args.limit.is_none() && list_args.after.is_none() {
                (client.threads_list().map_err(client_error)?, None)
            } else {
                let page = client
                    .threads_list_page(&ThreadsList {
                        limit: list_args.limit.map(usize::from),
                        after: list_args.after.clone(),
                        ..Default::default()
                    })
                    .map_err(client_error)?;
                (page.threads, page.next)
            };
            if list_args.list.out.json {
                crate::output::json(&json!({ "threads": list, "next": next }))?;
            } else {
                if let Some(next) = &next {
                    eprintln!("more: threads list --after {next}");
                }
                let mut table = Table::new(&["ID", "WORKSPACE", "PROVIDER", "APPROVAL", "UPDATED"])
                    .wide(list_args.list.wide);
                for t in list {
                    table.row(vec![
                        Cell::Id(t.id),
                        t.workspace_id.into(),
                        t.provider.into(),
                        t.approval.as_str().into(),
                        Cell::Time(Some(t.updated_at)),
                    ]);
                }
                table.print()?;
            }
        }
        ThreadsCommand::Delete { thread, out } => {
            let thread = super::ids::thread(&mut client, &thread)?;
            let deleted = client.threads_delete(&thread).map_err(client_error)?;
            if out.json {
                crate::output::json(&deleted)?;
            } else {
                let r = &deleted.receipt;
                crate::output::line(format!(
                    "thread {} deleted: {} event(s) and {} turn(s) removed; receipt at seq {} (digest {})",
                    r.thread_id, r.events, r.turns, deleted.seq, r.digest
                ))?;
            }
        }
        // Answered above.
        ThreadsCommand::Export { .. } | ThreadsCommand::Import { .. } => {}
        ThreadsCommand::Show { thread, out } => {
            let thread = super::ids::thread(&mut client, &thread)?;
            let snap = client.threads_get(&thread).map_err(client_error)?;
            if out.json {
                crate::output::json(&snap)?;
            } else {
                let t = &snap.thread;
                let wait = match t.permission_timeout_seconds {
                    Some(n) => format!("{n}s"),
                    None => "the provider's".to_owned(),
                };
                let mut fields = vec![
                    ("thread", t.id.clone()),
                    ("workspace", t.workspace_id.clone()),
                    ("provider", t.provider.clone()),
                    ("approval", t.approval.as_str().to_owned()),
                    (
                        "restricted",
                        if t.restricted { "yes" } else { "no" }.to_owned(),
                    ),
                    ("retention", t.retention.as_str().to_owned()),
                    ("version", t.version.to_string()),
                    ("permission timeout", wait),
                ];
                if let Some(b) = &t.budget {
                    fields.push(("budget", budget_line(b)));
                }
                if let Some(store) = &t.ports.transcript_store {
                    fields.push(("transcript store", store.clone()));
                }
                if snap.usage.turns > 0 {
                    fields.push(("usage", super::usage::totals_line(&snap.usage)));
                }
                let width = fields.iter().map(|(k, _)| k.len()).max().unwrap_or(0) + 1;
                for (label, value) in fields {
                    crate::output::line(format!("{label:<width$}{value}"))?;
                }
                crate::output::line("turns:")?;
                for turn in &snap.recent_turns {
                    crate::output::line(format!("  {}\t{}", turn.id, turn.state.as_str()))?;
                }
                if snap.truncated {
                    crate::output::line("(older events not shown: use `journal tail THREAD`)")?;
                }
            }
        }
    }
    Ok(())
}

fn approval_policy(a: ApprovalArg) -> lapis_protocol::ApprovalPolicy {
    match a {
        ApprovalArg::Ask => lapis_protocol::ApprovalPolicy::Ask,
        ApprovalArg::AllowAll => lapis_protocol::ApprovalPolicy::AllowAll,
    }
}

fn retention_policy(r: RetentionArg) -> lapis_protocol::Retention {
    match r {
        RetentionArg::Full => lapis_protocol::Retention::Full,
        RetentionArg::MetadataOnly => lapis_protocol::Retention::MetadataOnly,
    }
}

/// `threads create --worktree`: a new worktree workspace of `workspace`'s
/// repository, named after it and the command id (so a retry with the same
/// command id finds the same worktree instead of making another).
fn worktree_for(
    client: &mut lapis_protocol::client::Client,
    workspace: &str,
    command_id: &str,
) -> Result<String, crate::exit::CliError> {
    let known = client.workspaces_list().map_err(client_error)?;
    let Some(repo) = known.iter().find(|w| w.id == workspace) else {
        return Err(crate::exit::CliError::failure(
            "not_found",
            anyhow::anyhow!("no workspace `{workspace}` (see `workspaces list`)"),
        ));
    };
    // FNV-1a: stable across builds, unlike the standard hasher.
    let digest = command_id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let base: String = workspace.chars().take(50).collect();
    let id = format!("{base}-wt-{:08x}", digest as u32);
    let added = client
        .workspaces_add_with(&lapis_protocol::params::WorkspacesAdd {
            id: id.clone(),
            path: String::new(),
            worktree: Some(lapis_protocol::params::WorktreeSpec {
                of: repo.path.clone(),
                branch: None,
                from: None,
            }),
            command_id: Some(format!("{command_id}-worktree")),
        })
        .map_err(client_error)?;
    eprintln!(
        "worktree workspace {} at {}",
        added.workspace.id, added.workspace.path
    );
    Ok(id)
}

/// Warns, on stderr, when an `ask` thread's provider was found acting
/// without asking by its recorded policy probe (`providers check NAME
/// --policy`, verdict `ignored`, for its current definition): its turns
/// fail `ask_unavailable` before dispatch unless the owner accepted the
/// provider. A controller that cannot say warns nothing.
fn warn_if_unasked(client: &mut lapis_protocol::client::Client, thread: &lapis_protocol::Thread) {
    if thread.approval != lapis_protocol::ApprovalPolicy::Ask || thread.restricted {
        return;
    }
    let Ok(status) = client.status() else {
        return;
    };
    let ignored = status.policy_probes.iter().any(|r| {
        r.provider == thread.provider
            && r.current
            && r.probe.verdict == lapis_protocol::probe::PolicyVerdict::Ignored
    });
    if ignored {
        eprintln!(
            "warning: provider `{}` acted without asking in its policy probe (`providers check {} --policy`: ignored); \
             this thread's `ask` turns fail `ask_unavailable` before reaching it. Set the provider's `askMode` to a \
             mode that asks and probe again, use `--approval allow-all` by choice, use another provider, or accept \
             it with `\"allowUnasked\": true` in its config",
            safe(&thread.provider),
            safe(&thread.provider)
        );
    }
}

/// A thread's own budget in one line: `1000 tokens, 0.5 USD (key thread:ID:total)`.
fn budget_line(b: &lapis_protocol::config::ThreadBudget) -> String {
    let mut parts = Vec::new();
    if let Some(t) = b.tokens {
        parts.push(format!("{t} tokens"));
    }
    if let Some(c) = b.cost {
        parts.push(format!(
            "{} {}",
            c.0,
            b.currency.as_deref().unwrap_or("USD")
        ));
    }
    parts.join(", ")
}
