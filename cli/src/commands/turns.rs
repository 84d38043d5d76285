//! `turns submit|continue|list|show|cancel|resolve`. Submitting and
//! watching a turn (`--wait/--follow`) is [`super::submit`]'s.

use lapis_protocol::client::Client;
use lapis_protocol::params::{TurnsCancel, TurnsContinue, TurnsResolve, TurnsSubmit};
use lapis_protocol::{Turn, TurnState};
use serde_json::json;

use crate::args::{GlobalArgs, ResolveAsArg, TurnsCommand};
use crate::exit::{CliError, CliResult};
use crate::table::{Cell, Table};
use crate::terminal::safe;

use super::connect::{client_error, connect};
use super::permissions::{Answers, command_prefix};
use super::submit::{Submission, Watch, submit_and_watch};

pub(super) fn run(global: &GlobalArgs, command: TurnsCommand) -> CliResult {
    let mut client = connect(global)?;
    match command {
        TurnsCommand::Submit {
            thread,
            prompt,
            cmd,
            wait,
            follow,
            no_thoughts,
            timeout,
            out,
        } => {
            let thread = super::ids::thread(&mut client, &thread)?;
            let prompt = super::prompt::from_args(&prompt)?;
            let command_id = super::command_id::given_or_fresh(cmd.command_id)?;
            let watch = match Watch::from_flags(wait, follow) {
                Some(watch) => watch,
                None => {
                    let turn = client
                        .turns_submit_with(&TurnsSubmit {
                            thread_id: thread.clone(),
                            command_id: command_id.clone(),
                            prompt,
                            continues: None,
                            max_turn_seconds: timeout,
                            expect: None,
                        })
                        .map_err(client_error)
                        .map_err(|e| {
                            super::fences::explain(&mut client, &thread, &command_prefix(global), e)
                        })?;
                    if out.json {
                        crate::output::json(&json!({ "turn": turn, "commandId": command_id }))?;
                    } else {
                        crate::output::line(&turn.id)?;
                    }
                    return Ok(());
                }
            };
            return submit_and_watch(
                global,
                &mut client,
                Submission {
                    thread: &thread,
                    command_id,
                    prompt: &prompt,
                    continues: None,
                    watch,
                    thoughts: !no_thoughts,
                    json: out.json,
                    max_turn_seconds: timeout,
                    answers: Answers::Ask,
                },
            );
        }
        TurnsCommand::Continue {
            turn,
            prompt,
            cmd,
            wait,
            follow,
            no_thoughts,
            timeout,
            out,
        } => {
            let turn = super::ids::turn(&mut client, &turn)?;
            let prompt = super::prompt::from_args(&prompt)?;
            let command_id = super::command_id::given_or_fresh(cmd.command_id)?;
            let watch = match Watch::from_flags(wait, follow) {
                Some(watch) => watch,
                None => {
                    let next = client
                        .turns_continue(&TurnsContinue {
                            turn_id: turn,
                            command_id: command_id.clone(),
                            prompt,
                            max_turn_seconds: timeout,
                            expect: None,
                        })
                        .map_err(client_error)?;
                    if out.json {
                        crate::output::json(&json!({ "turn": next, "commandId": command_id }))?;
                    } else {
                        crate::output::line(&next.id)?;
                    }
                    return Ok(());
                }
            };
            // The follower subscribes to the prior's thread before the new
            // turn exists, so none of its events can be missed.
            let prior = client.turns_get(&turn).map_err(client_error)?;
            return submit_and_watch(
                global,
                &mut client,
                Submission {
                    thread: &prior.thread_id,
                    command_id,
                    prompt: &prompt,
                    continues: Some(&turn),
                    watch,
                    thoughts: !no_thoughts,
                    json: out.json,
                    max_turn_seconds: timeout,
                    answers: Answers::Ask,
                },
            );
        }
        TurnsCommand::List { thread, out, wide } => {
            let thread = super::ids::optional(&mut client, thread, super::ids::thread)?;
            let list = client.turns_list(thread.as_deref()).map_err(client_error)?;
            if out.json {
                crate::output::json(&json!({ "turns": list }))?;
            } else {
                let mut table =
                    Table::new(&["ID", "THREAD", "STATE", "WORKSPACE", "CREATED"]).wide(wide);
                for t in list {
                    table.row(vec![
                        Cell::Id(t.id),
                        Cell::Id(t.thread_id),
                        t.state.as_str().into(),
                        t.workspace_id.into(),
                        Cell::Time(Some(t.created_at)),
                    ]);
                }
                table.print()?;
            }
        }
        TurnsCommand::Show {
            turn,
            command_id,
            out,
        } => {
            let turn = super::ids::optional(&mut client, turn, super::ids::turn)?;
            let got = client
                .turns_get_with(&lapis_protocol::params::TurnsGet {
                    turn_id: turn,
                    command_id,
                })
                .map_err(client_error)?;
            let (t, unknown, evidence) = (got.turn, got.unknown_tool_effects, got.evidence);
            // The agent's last words on every end it did not report
            // itself: failed, or unknown after the prompt was sent.
            let said = if matches!(
                t.state,
                TurnState::Failed | TurnState::SubmissionUnknown | TurnState::Interrupted
            ) {
                super::agent_stderr::of_turn(&mut client, &t.thread_id, &t.id)?
            } else {
                Vec::new()
            };
            if out.json {
                let mut v = json!({ "turn": t });
                if !unknown.is_empty() {
                    v["unknownToolEffects"] = json!(unknown);
                }
                if !said.is_empty() {
                    v["agentStderr"] = json!(said);
                }
                if let Some(e) = &evidence {
                    v["evidence"] = json!(e);
                }
                crate::output::json(&v)?;
                return Ok(());
            }
            let mode = mode_report(&mut client, &t)?;
            print_turn_with(&t, mode.as_ref())?;
            for u in &unknown {
                let line = format!(
                    "unknown tool effect  {}.{} call {} (never called again; the turn is never continued)",
                    u.endpoint, u.tool, u.call_id
                );
                crate::output::line(safe(&line))?;
            }
            if !said.is_empty() {
                let text = said.join("\n          ");
                crate::output::line(safe(&format!("stderr    {text}")))?;
            }
            // Paths come from the user's tree: terminal-safe.
            for line in evidence.iter().flat_map(super::evidence::lines) {
                crate::output::line(safe(&line))?;
            }
        }
        TurnsCommand::Cancel { turn, cmd, out } => {
            let turn = super::ids::turn(&mut client, &turn)?;
            let command_id = super::command_id::given_or_fresh(cmd.command_id)?;
            let t = client
                .turns_cancel_with(&TurnsCancel {
                    turn_id: turn,
                    command_id: Some(command_id),
                })
                .map_err(client_error)?
                .turn;
            // Cancelling is idempotent for scripts ("make sure it is not
            // running"): a finished turn exits 0, but a person is told.
            if t.state.is_terminal() {
                eprintln!(
                    "turn {} had already finished ({}): nothing to cancel",
                    t.id,
                    t.state.as_str()
                );
            }
            print_turn(&t, out.json)?;
        }
        TurnsCommand::Resolve {
            turn,
            resolution,
            confirm_stopped,
            cmd,
            out,
        } => {
            let turn = super::ids::turn(&mut client, &turn)?;
            let as_ = match resolution {
                ResolveAsArg::Failed => lapis_protocol::ResolveAs::Failed,
                ResolveAsArg::Cancelled => lapis_protocol::ResolveAs::Cancelled,
            };
            let command_id = super::command_id::given_or_fresh(cmd.command_id)?;
            // The owner decides with evidence: what changed in the
            // workspace since the prompt was sent, said before resolving.
            if !out.json {
                let got = client
                    .turns_get_with(&lapis_protocol::params::TurnsGet {
                        turn_id: Some(turn.clone()),
                        command_id: None,
                    })
                    .map_err(client_error)?;
                if got.turn.state.is_fenced()
                    && let Some(said) = got
                        .evidence
                        .as_ref()
                        .and_then(super::evidence::since_summary)
                {
                    eprintln!("{}", safe(&format!("turn {turn}: {said}")));
                }
            }
            let t = client
                .turns_resolve_with(&TurnsResolve {
                    turn_id: turn,
                    resolve_as: as_,
                    confirm_stopped,
                    command_id: Some(command_id),
                })
                .map_err(client_error)?
                .turn;
            print_turn(&t, out.json)?;
        }
    }
    Ok(())
}

fn print_turn(t: &Turn, json_out: bool) -> CliResult {
    if json_out {
        Ok(crate::output::json(&json!({ "turn": t }))?)
    } else {
        print_turn_with(t, None)
    }
}

/// What the agent reported about a restricted turn's mode request: the
/// `restricted_mode` observation (journaled during setup, after the
/// turn's `user_message`), or `None` when the turn asked for no mode or
/// the report is not in the journal.
fn mode_report(
    client: &mut Client,
    t: &Turn,
) -> Result<Option<lapis_protocol::RestrictedMode>, CliError> {
    let asked = t
        .prepared
        .as_ref()
        .is_some_and(|p| p.restricted && p.restricted_mode.is_some());
    if !asked {
        return Ok(None);
    }
    let from = t.user_message.as_ref().map_or(0, |m| m.thread_seq);
    // Another application's fenced turn is readable (`turns:resolve-any`),
    // its thread's journal is not: no report then.
    match super::agent_stderr::restricted_mode_of_turn(client, &t.thread_id, &t.id, from) {
        Err(e) if e.code == "not_found" => Ok(None),
        other => other,
    }
}

/// The plain form of a turn; `mode` is the agent's `restricted_mode`
/// report, if read.
fn print_turn_with(t: &Turn, mode: Option<&lapis_protocol::RestrictedMode>) -> CliResult {
    // The outcome and the prompt echo may hold anything: terminal-safe.
    let line = |text: String| crate::output::line(safe(&text));
    line(format!(
        "turn      {}\nthread    {}\nworkspace {}\nstate     {}\noutcome   {}",
        t.id,
        t.thread_id,
        t.workspace_id,
        t.state.as_str(),
        t.outcome.as_deref().unwrap_or("-")
    ))?;
    if let Some(p) = &t.prepared {
        line(format!("prepared  {}", prepared_line(p, mode)))?;
    }
    if let Some(asked) = &t.user_message {
        let text = match (&asked.text, asked.payload_unavailable) {
            (Some(text), _) => text.replace('\n', "\n          "),
            (None, true) => "(unavailable: the thread keeps metadata only)".to_owned(),
            (None, false) => "-".to_owned(),
        };
        line(format!("asked     {text}"))?;
    }
    if t.awaiting_input {
        crate::output::line(
            "input     awaiting a permission answer (see `lapis-ai-controller permissions list`)",
        )?;
    }
    if let Some(u) = &t.usage {
        line(format!("usage     {}", super::usage::turn_line(u)))?;
    }
    Ok(())
}

/// One line of what a turn runs under (`turns show`): provider, approval
/// (with why automatic approval is withheld), restriction, retention and
/// the thread version it was claimed under. A restricted turn's mode is
/// shown as the agent reported it (`mode`, the `restricted_mode`
/// observation), never as applied just because it was requested.
fn prepared_line(
    p: &lapis_protocol::PreparedConfig,
    mode: Option<&lapis_protocol::RestrictedMode>,
) -> String {
    let a = &p.approval;
    let approval = if a.requested == a.effective {
        a.effective.as_str().to_owned()
    } else {
        format!(
            "{} ({} requested; restricted)",
            a.effective.as_str(),
            a.requested.as_str()
        )
    };
    let restricted = match (p.restricted, &p.restricted_mode) {
        (false, _) => "unrestricted".to_owned(),
        (true, Some(requested)) => {
            use lapis_protocol::ModeResult;
            let said = match mode.map(|m| m.result) {
                Some(ModeResult::Applied) => None,
                Some(ModeResult::Unreported) => Some("the agent reported no modes"),
                Some(ModeResult::Unsupported) => Some("the agent does not offer it"),
                Some(ModeResult::Rejected) => Some("the agent rejected it"),
                None if p.retention == lapis_protocol::Retention::MetadataOnly => {
                    Some("the agent's report is not retained (metadata-only)")
                }
                None => Some("no report from the agent"),
            };
            match (said, mode.is_some_and(|m| m.runs_unrestricted)) {
                (None, _) => format!("restricted (mode {requested} applied)"),
                (Some(said), true) => {
                    format!("restricted (mode {requested} requested; {said}; runs unrestricted)")
                }
                (Some(said), false) => format!("restricted (mode {requested} requested; {said})"),
            }
        }
        (true, None) => "restricted (no mode)".to_owned(),
    };
    let mut line = format!(
        "provider {}, approval {approval}, {restricted}, retention {}, thread version {}",
        p.provider,
        p.retention.as_str(),
        p.thread_version
    );
    if !p.mcp_servers.is_empty() {
        let names: Vec<&str> = p.mcp_servers.iter().map(|m| m.name.as_str()).collect();
        line.push_str(&format!(", mcp {}", names.join(" ")));
    }
    line
}
