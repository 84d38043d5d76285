//! `turns submit|list|show|cancel|resolve`.
//!
//! `submit --wait/--follow` subscribes to the thread's journal *before*
//! submitting, so no event of the new turn can be missed, and stops once the
//! turn is terminal or fenced. A lost connection during the wait is reported
//! (exit 3) and nothing is resubmitted: run `turns show` to see the outcome.

use std::time::Duration;

use lapis_protocol::client::{Client, JournalFollower};
use lapis_protocol::{EventKind, JournalEvent, Turn, TurnState};
use serde_json::{Value, json};

use crate::args::{GlobalArgs, ResolveAsArg, TurnsCommand};
use crate::exit::{CliError, CliResult};

use super::connect::{client_error, connect};

pub fn run(global: &GlobalArgs, command: TurnsCommand) -> CliResult {
    let mut client = connect(global)?;
    match command {
        TurnsCommand::Submit {
            thread,
            prompt,
            command_id,
            wait,
            follow,
            out,
        } => {
            let command_id = match command_id {
                Some(c) => c,
                None => format!(
                    "cmd_{}",
                    lapis_service::auth::random_hex(16)
                        .map_err(|e| CliError::failure("internal", e))?
                ),
            };
            let watching = wait || follow;
            if !watching {
                let turn = client
                    .turns_submit(&thread, &command_id, &prompt)
                    .map_err(client_error)?;
                if out.json {
                    crate::output::json(&json!({ "turn": turn, "commandId": command_id }))?;
                } else {
                    crate::output::line(&turn.id)?;
                }
                return Ok(());
            }
            // Subscribed before submitting, so no event of the turn is missed.
            let mut follower =
                JournalFollower::start(&mut client, Some(&thread), None).map_err(client_error)?;
            let turn = follower
                .client()
                .turns_submit(&thread, &command_id, &prompt)
                .map_err(client_error)?;
            if !out.json {
                crate::output::line(&turn.id)?;
            }
            let mut events = Vec::new();
            let last = wait_for_end(&mut follower, &thread, turn, follow, out.json, &mut events)?;
            if out.json {
                let mut doc = json!({ "turn": last, "commandId": command_id });
                if follow {
                    doc["events"] = json!(events);
                }
                crate::output::json(&doc)?;
            } else {
                crate::output::line(format!(
                    "{}\t{}{}",
                    last.id,
                    last.state.as_str(),
                    last.outcome.map(|o| format!(" ({o})")).unwrap_or_default()
                ))?;
            }
        }
        TurnsCommand::List { thread, out } => {
            let list = client.turns_list(thread.as_deref()).map_err(client_error)?;
            if out.json {
                crate::output::json(&json!({ "turns": list }))?;
            } else {
                for t in list {
                    crate::output::line(format!(
                        "{}\t{}\t{}",
                        t.id,
                        t.thread_id,
                        t.state.as_str()
                    ))?;
                }
            }
        }
        TurnsCommand::Show { turn, out } => {
            let t = client.turns_get(&turn).map_err(client_error)?;
            print_turn(&t, out.json)?;
        }
        TurnsCommand::Cancel { turn, out } => {
            let t = client.turns_cancel(&turn).map_err(client_error)?;
            print_turn(&t, out.json)?;
        }
        TurnsCommand::Resolve {
            turn,
            resolution,
            confirm_stopped,
            out,
        } => {
            let as_ = match resolution {
                ResolveAsArg::Failed => "failed",
                ResolveAsArg::Cancelled => "cancelled",
            };
            let t = client
                .turns_resolve(&turn, as_, confirm_stopped)
                .map_err(client_error)?;
            print_turn(&t, out.json)?;
        }
    }
    Ok(())
}

fn print_turn(t: &Turn, json_out: bool) -> CliResult {
    if json_out {
        crate::output::json(&json!({ "turn": t }))?;
    } else {
        crate::output::line(format!(
            "turn      {}\nthread    {}\nworkspace {}\nstate     {}\noutcome   {}",
            t.id,
            t.thread_id,
            t.workspace_id,
            t.state.as_str(),
            t.outcome.as_deref().unwrap_or("-")
        ))?;
    }
    Ok(())
}

fn ended(t: &Turn) -> bool {
    t.state.is_terminal() || t.state.is_fenced()
}

/// Waits until `turn` is terminal or fenced, printing (or collecting) its
/// events when following. A follower stops at the journal's own record of
/// the final state, so every event before it has been seen; a plain wait
/// may stop as soon as a read shows the turn ended.
fn wait_for_end(
    follower: &mut JournalFollower<'_>,
    thread: &str,
    mut turn: Turn,
    follow: bool,
    json_out: bool,
    events: &mut Vec<JournalEvent>,
) -> Result<Turn, CliError> {
    loop {
        if !follow && ended(&turn) {
            return Ok(turn);
        }
        let next = follower
            .next(Some(Duration::from_secs(1)))
            .map_err(client_error)?;
        let Some(event) = next else {
            // Quiet for a while: re-read the turn; a follower collects what
            // it has not seen from the journal before stopping.
            turn = follower
                .client()
                .turns_get(&turn.id)
                .map_err(client_error)?;
            if follow && ended(&turn) {
                let after = follower.cursor();
                catch_up(follower.client(), thread, &turn.id, after, json_out, events)?;
                return Ok(turn);
            }
            continue;
        };
        if event.turn_id.as_deref() != Some(turn.id.as_str()) {
            continue;
        }
        let final_state = event.kind == EventKind::TurnState
            && event
                .payload
                .as_ref()
                .and_then(|p| p.get("to"))
                .and_then(Value::as_str)
                .and_then(TurnState::parse)
                .is_some_and(|s| s.is_terminal() || s.is_fenced());
        let state_change = event.kind == EventKind::TurnState;
        if follow {
            if !json_out {
                print_event(&event)?;
            }
            events.push(event);
        }
        if state_change {
            turn = follower
                .client()
                .turns_get(&turn.id)
                .map_err(client_error)?;
        }
        if follow && final_state {
            return Ok(turn);
        }
    }
}

/// Replays the thread after `after` and keeps the turn's events.
fn catch_up(
    client: &mut Client,
    thread: &str,
    turn: &str,
    mut after: u64,
    json_out: bool,
    events: &mut Vec<JournalEvent>,
) -> Result<(), CliError> {
    loop {
        let page = client
            .journal_replay(Some(thread), after, None)
            .map_err(client_error)?;
        for e in page.events {
            if e.turn_id.as_deref() == Some(turn) {
                if !json_out {
                    print_event(&e)?;
                }
                events.push(e);
            }
        }
        after = page.next_after;
        if !page.more {
            return Ok(());
        }
    }
}

/// One human line per event: text chunks as text, the rest as kind + payload.
pub fn print_event(e: &JournalEvent) -> Result<(), CliError> {
    let text = e.payload.as_ref().and_then(chunk_text);
    let line = match (e.kind, text) {
        (EventKind::MessageChunk, Some(t)) => t,
        (EventKind::ThoughtChunk, Some(t)) => format!("(thinking) {t}"),
        _ => format!(
            "[{} #{}] {}",
            e.kind.as_str(),
            e.thread_seq,
            e.payload
                .as_ref()
                .map(Value::to_string)
                .unwrap_or_else(|| if e.payload_unavailable {
                    "(payload unavailable)".into()
                } else {
                    String::new()
                })
        ),
    };
    crate::output::line(line)?;
    Ok(())
}

fn chunk_text(v: &Value) -> Option<String> {
    v.get("text")
        .or_else(|| v.get("content").and_then(|c| c.get("text")))
        .and_then(Value::as_str)
        .map(str::to_owned)
}
