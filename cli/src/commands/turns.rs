//! `turns submit|continue|list|show|cancel|resolve`.
//!
//! `submit --wait/--follow` subscribes to the thread's journal *before*
//! submitting, so no event of the new turn can be missed, and stops once the
//! turn is terminal or fenced; a turn that ends other than `completed`
//! exits with status 1. A lost connection during the wait is reported (exit 3) and nothing is
//! resubmitted: run `turns show` to see the outcome.

use lapis_protocol::client::{Client, JournalFollower};
use lapis_protocol::params::{TurnsCancel, TurnsContinue, TurnsResolve, TurnsSubmit};
use lapis_protocol::{Turn, TurnState};
use serde_json::json;

use crate::args::{GlobalArgs, ResolveAsArg, TurnsCommand};
use crate::exit::{CliError, CliResult};
use crate::table::{Cell, Table};
use crate::terminal::safe;

use super::connect::{client_error, connect};
use super::follow;
use super::live::Live;
use super::permissions::{Answers, Prompter, command_prefix};
use super::printer::{Halt, Printer};

/// How a submitted turn is watched.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Watch {
    /// Print the reply once the turn ended.
    Wait,
    /// Stream the reply and activity as they arrive.
    Follow,
}

impl Watch {
    /// From `--wait` / `--follow` (follow wins); `None`: print the id and return.
    fn from_flags(wait: bool, follow: bool) -> Option<Watch> {
        match (wait, follow) {
            (_, true) => Some(Watch::Follow),
            (true, false) => Some(Watch::Wait),
            (false, false) => None,
        }
    }
}

/// What to submit and how to show it.
pub(super) struct Submission<'a> {
    /// Thread id.
    pub(crate) thread: &'a str,
    /// Idempotency key.
    pub(crate) command_id: String,
    /// Prompt text (never printed or logged).
    pub(crate) prompt: &'a str,
    /// The settled turn this one continues (`turns.continue`), if any.
    pub(crate) continues: Option<&'a str>,
    /// Wait or follow.
    pub(crate) watch: Watch,
    /// Show the agent's thoughts.
    pub(crate) thoughts: bool,
    /// JSON (one document for wait, NDJSON for follow).
    pub(crate) json: bool,
    /// `--timeout`: the turn's own deadline (`maxTurnSeconds`), after which
    /// the service cancels it (`deadline_exceeded`).
    pub(crate) max_turn_seconds: Option<u64>,
    /// How the turn's permission requests are answered.
    pub(crate) answers: Answers,
}

/// Submits a turn and watches it to its end (see the module docs).
pub(super) fn submit_and_watch(
    global: &GlobalArgs,
    client: &mut Client,
    s: Submission<'_>,
) -> CliResult {
    // A follow streams the turn to a person: its subscription is present,
    // so a presence-aware notifier stays quiet about it.
    let mut follower = match s.watch {
        Watch::Follow => JournalFollower::attended(client, Some(s.thread), None),
        Watch::Wait => JournalFollower::start(client, Some(s.thread), None),
    }
    .map_err(client_error)?;
    let submit = |client: &mut Client| {
        match s.continues {
            Some(prior) => client.turns_continue(&TurnsContinue {
                turn_id: prior.to_owned(),
                command_id: s.command_id.clone(),
                prompt: s.prompt.to_owned(),
                max_turn_seconds: s.max_turn_seconds,
                expect: None,
            }),
            None => client.turns_submit_with(&TurnsSubmit {
                thread_id: s.thread.to_owned(),
                command_id: s.command_id.clone(),
                prompt: s.prompt.to_owned(),
                continues: None,
                max_turn_seconds: s.max_turn_seconds,
                expect: None,
            }),
        }
        .map_err(client_error)
    };
    // A refusal names the fence; on a terminal it is offered for
    // resolution, then the same submit (the refusal kept no receipt).
    let turn = match submit(follower.client()) {
        Err(e) if e.code == "workspace_fenced" => {
            let e = super::fences::explain(follower.client(), s.thread, &command_prefix(global), e);
            let said = format!("{:#}", e.error);
            if super::fences::offer_resolve(follower.client(), s.thread, s.json, &said)? {
                submit(follower.client())
            } else {
                Err(e)
            }
        }
        other => other,
    }?;
    let mut printer = Printer::new(s.json, s.thoughts, false);
    let mut prompter = Prompter::new(global, s.answers);
    let mut live = Live::new(s.json, command_prefix(global), s.thread);
    let result = (|| -> Result<Turn, Halt> {
        if s.watch == Watch::Follow {
            if s.json {
                let line = json!({ "turn": turn, "commandId": s.command_id });
                printer.record_value(&line)?;
            } else {
                eprintln!("turn {}", turn.id);
            }
        }
        let shown = (s.watch == Watch::Follow).then_some(&mut printer);
        let watched = follow::watch(
            &mut follower,
            s.thread,
            turn,
            shown,
            &mut prompter,
            &mut live,
        );
        live.clear();
        let watched = watched?;
        match (s.watch, s.json) {
            (Watch::Follow, true) => printer.record("turn", &watched.turn)?,
            (Watch::Follow, false) => printer.end_run()?,
            (Watch::Wait, true) => {
                crate::output::json(&json!({
                    "turn": watched.turn, "commandId": s.command_id, "reply": watched.reply
                }))?;
            }
            (Watch::Wait, false) => {
                let mut reply = watched.reply.clone();
                if !reply.is_empty() && !reply.ends_with('\n') {
                    reply.push('\n');
                }
                printer.write_text(&reply)?;
            }
        }
        Ok(watched.turn)
    })();
    let last = match result {
        Ok(t) => t,
        Err(Halt::Closed) => return Ok(()),
        Err(Halt::Failed(e)) => return Err(e),
    };
    if last.state != TurnState::Completed {
        // The error names the turn and how it ended (exit 1), with the
        // agent's own last words when it failed setting up or erring.
        let mut err = CliError::turn_not_completed(&last);
        let said = super::agent_stderr::of_turn(client, s.thread, &last.id).unwrap_or_default();
        if last.state.is_fenced() {
            // Its outcome is unknown: the workspace waits for the owner.
            let prefix = command_prefix(global);
            let fence = super::fences::of_workspace(client, &last.workspace_id)
                .filter(|f| f.turn == last.id)
                .map(|f| super::fences::sentence(&prefix, &f, ""))
                .unwrap_or_else(|| {
                    super::fences::ended_fenced(&prefix, &last, super::connect::APPLICATION)
                });
            err.error = anyhow::anyhow!("{}; {fence}", err.error);
        }
        if !said.is_empty() {
            err.error = anyhow::anyhow!(super::agent_stderr::with_lines(
                err.error.to_string(),
                &said
            ));
        }
        return Err(err);
    }
    if !s.json {
        eprintln!("{}", safe(&describe(&last)));
    }
    Ok(())
}

/// `turn_… completed (end_turn)`.
fn describe(t: &Turn) -> String {
    format!(
        "turn {} {}{}",
        t.id,
        t.state.as_str(),
        t.outcome
            .as_deref()
            .map(|o| format!(" ({o})"))
            .unwrap_or_default()
    )
}

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
