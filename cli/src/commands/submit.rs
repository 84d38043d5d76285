//! Submitting a turn and watching it to its end: `turns submit|continue
//! --wait/--follow` and `ask`.
//!
//! The watch subscribes to the thread's journal *before* submitting, so no
//! event of the new turn can be missed, and stops once the turn is
//! terminal or fenced; a turn that ends other than `completed` exits with
//! status 1. A lost connection during the wait is reported (exit 3) and
//! nothing is resubmitted: run `turns show` to see the outcome. A refusal
//! on a fenced workspace names the fence, and on a terminal offers to
//! resolve it ([`super::fences::offer_resolve`]).

use lapis_protocol::client::{Client, JournalFollower};
use lapis_protocol::params::{TurnsContinue, TurnsSubmit};
use lapis_protocol::{Turn, TurnState};
use serde_json::json;

use crate::args::GlobalArgs;
use crate::exit::{CliError, CliResult};
use crate::terminal::safe;

use super::connect::client_error;
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
    pub(super) fn from_flags(wait: bool, follow: bool) -> Option<Watch> {
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
