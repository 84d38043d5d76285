//! `threads create|list|show`.

use serde_json::json;

use crate::args::{ApprovalArg, GlobalArgs, ThreadsCommand};
use crate::exit::CliResult;

use super::connect::{client_error, connect};

pub fn run(global: &GlobalArgs, command: ThreadsCommand) -> CliResult {
    let mut client = connect(global)?;
    match command {
        ThreadsCommand::Create {
            workspace,
            provider,
            approval,
            out,
        } => {
            let approval = match approval {
                ApprovalArg::Ask => "ask",
                ApprovalArg::AllowAll => "allow-all",
            };
            let thread = client
                .threads_create(&workspace, &provider, approval, None)
                .map_err(client_error)?;
            if out.json {
                crate::output::json(&json!({ "thread": thread }))?;
            } else {
                crate::output::line(&thread.id)?;
            }
        }
        ThreadsCommand::List(out) => {
            let list = client.threads_list().map_err(client_error)?;
            if out.json {
                crate::output::json(&json!({ "threads": list }))?;
            } else {
                for t in list {
                    crate::output::line(format!(
                        "{}\t{}\t{}\t{}",
                        t.id,
                        t.workspace_id,
                        t.provider,
                        t.approval.as_str()
                    ))?;
                }
            }
        }
        ThreadsCommand::Show { thread, out } => {
            let snap = client.threads_get(&thread).map_err(client_error)?;
            if out.json {
                crate::output::json(&snap)?;
            } else {
                let t = &snap.thread;
                crate::output::line(format!(
                    "thread     {}\nworkspace  {}\nprovider   {}\napproval   {}\nversion    {}\nturns:",
                    t.id,
                    t.workspace_id,
                    t.provider,
                    t.approval.as_str(),
                    t.version
                ))?;
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
