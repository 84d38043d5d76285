//! Watching a turn to its end (`turns submit --wait/--follow`, `ask`): its
//! events go to a [`Printer`], its reply is collected, and its permission
//! requests are handed to the [`Prompter`] as they come.
//!
//! What must stay true: the watch stops at the journal's own record of the
//! turn's final state, so every event of the turn before it has been seen;
//! a request journaled before `permissions.list` shows it is asked again
//! while the journal is quiet.

use std::time::Duration;

use lapis_protocol::client::JournalFollower;
use lapis_protocol::{EventKind, JournalEvent, Payload, Turn};

use super::connect::client_error;
use super::live::Live;
use super::permissions::Prompter;
use super::printer::{Halt, Printer};

/// How long a follower waits for an event before checking the turn and
/// whether stdout was closed.
const IDLE: Duration = Duration::from_millis(250);

fn ended(t: &Turn) -> bool {
    t.state.is_terminal() || t.state.is_fenced()
}

/// What watching a turn produced.
pub(super) struct Watched {
    /// The turn as it ended.
    pub(crate) turn: Turn,
    /// The reply text (every reply chunk, joined).
    pub(crate) reply: String,
}

/// Runs `turn` to its end: shows its events when `printer` is given,
/// collects the reply, and hands each permission request to `prompter`.
/// Stops at the journal's own record of the final state, so every event of
/// the turn before it has been seen.
pub(super) fn watch(
    follower: &mut JournalFollower<'_>,
    thread: &str,
    mut turn: Turn,
    mut printer: Option<&mut Printer>,
    prompter: &mut Prompter,
    live: &mut Live,
) -> Result<Watched, Halt> {
    let mut reply = String::new();
    // Requests journaled but not yet listed when their event arrived.
    let mut unshown: Vec<String> = Vec::new();
    loop {
        live.check(follower.client(), &turn)?;
        let next = follower.next(Some(IDLE)).map_err(client_error)?;
        let Some(event) = next else {
            if crate::output::stdout_closed() {
                return Err(Halt::Closed);
            }
            if !unshown.is_empty() {
                live.clear();
            }
            let mut still = Vec::new();
            for request in std::mem::take(&mut unshown) {
                if !prompter.ask(
                    follower.client(),
                    &turn.id,
                    &request,
                    printer.as_deref_mut(),
                )? {
                    still.push(request);
                }
            }
            unshown = still;
            // Quiet for a while: re-read the turn; if it ended, collect what
            // the journal holds that was not seen yet.
            turn = follower
                .client()
                .turns_get(&turn.id)
                .map_err(client_error)?;
            if ended(&turn) {
                let mut after = follower.cursor();
                loop {
                    let page = follower
                        .client()
                        .journal_replay(Some(thread), after, None)
                        .map_err(client_error)?;
                    for e in page.events {
                        if e.turn_id.as_deref() == Some(turn.id.as_str()) {
                            take(&e, &mut reply, printer.as_deref_mut())?;
                        }
                    }
                    after = page.next_after;
                    if !page.more {
                        break;
                    }
                }
                return Ok(Watched { turn, reply });
            }
            live.behind_fence(follower.client(), &turn);
            live.tick(&turn, printer.as_deref().is_none_or(Printer::at_line_start));
            continue;
        };
        if event.turn_id.as_deref() != Some(turn.id.as_str()) {
            continue;
        }
        // Whatever is written next must not land on the spinner's line.
        if printer.is_some() || event.kind == EventKind::PermissionRequested {
            live.clear();
        } else {
            live.tick(&turn, true);
        }
        take(&event, &mut reply, printer.as_deref_mut())?;
        match event.body() {
            Some(Payload::PermissionRequested(r)) => {
                if let Some(p) = printer.as_deref_mut() {
                    p.end_run()?;
                }
                if !prompter.ask(
                    follower.client(),
                    &turn.id,
                    &r.request_id,
                    printer.as_deref_mut(),
                )? {
                    unshown.push(r.request_id);
                }
            }
            Some(Payload::PermissionDecided(d)) => unshown.retain(|r| *r != d.request_id),
            Some(Payload::TurnState(change)) => {
                turn = follower
                    .client()
                    .turns_get(&turn.id)
                    .map_err(client_error)?;
                if change.to.is_terminal() || change.to.is_fenced() {
                    return Ok(Watched { turn, reply });
                }
            }
            _ => {}
        }
    }
}

/// Collects reply text and shows the event.
fn take(e: &JournalEvent, reply: &mut String, printer: Option<&mut Printer>) -> Result<(), Halt> {
    if let Some(Payload::MessageChunk(c)) = e.body()
        && let Some(text) = c.plain_text()
    {
        reply.push_str(text);
    }
    match printer {
        Some(p) => p.event(e),
        None => Ok(()),
    }
}
