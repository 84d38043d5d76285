//! A live wait: while a turn is watched (`ask`, `turns submit|continue
//! --wait/--follow`) a person sees that something happens, and Ctrl-C
//! means something.
//!
//! What must stay true:
//! - the spinner (elapsed time and the turn's state: queued, preparing,
//!   running, waiting for permission) is drawn on stderr only when stderr
//!   is a terminal that redraws lines (not `TERM=dumb`,
//!   [`crate::terminal::redraws_lines`]) and the output is not JSON, only
//!   while the cursor is at the start of a line (never over a half-written
//!   reply), and is erased before anything else is written
//!   ([`Live::clear`]); its line is redrawn with crossterm's commands (the
//!   terminal layer `watch` uses too) and dimmed only when stderr takes
//!   colour (`anstream`'s choice: not with `NO_COLOR`);
//! - the first Ctrl-C cancels the turn (`turns.cancel`) and says so; the
//!   watch goes on until the turn settles. The second stops watching
//!   (exit 1) and prints the commands that show or follow the turn again;
//!   nothing is cancelled or resubmitted by it;
//! - a watched turn queued in a fenced workspace says so once per fence
//!   (which turn fences it, and the command that resolves it), on stderr,
//!   whether or not the spinner is drawn: a follow is never silent about
//!   waiting on a fence.

use std::io::{self, Write};
use std::time::Instant;

use crossterm::style::Print;
use crossterm::terminal::{Clear, ClearType};

use lapis_protocol::client::Client;
use lapis_protocol::{Turn, TurnState};

use super::interrupt::Interrupts;
use super::printer::Halt;
use crate::exit::{CliError, ExitClass};

/// The spinner's frames.
const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/// How often a queued turn's workspace is checked for a fence.
const FENCE_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// The shortest time between two frames.
const FRAME_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// What a watch shows and how it answers Ctrl-C.
#[derive(Debug)]
pub(super) struct Live {
    /// Ctrl-C presses, counted while the watch runs.
    interrupts: Interrupts,
    /// Draw the spinner (stderr is a terminal that redraws lines, output
    /// not JSON).
    spin: bool,
    /// Dim the spinner (stderr takes colour).
    colour: bool,
    /// When the watch began.
    start: Instant,
    /// The next frame.
    frame: usize,
    /// Whether a spinner line is on the screen now.
    shown: bool,
    /// When the last frame was drawn (frames are at most every
    /// [`FRAME_EVERY`], however fast events arrive).
    drawn: Option<Instant>,
    /// Whether the first Ctrl-C already asked for a cancel.
    cancelled: bool,
    /// `lapis-ai-controller [--config …] [--instance …]`, for the commands
    /// printed on detach.
    prefix: String,
    /// The watched turn's thread.
    thread: String,
    /// The fence (its turn) already said to hold the watched turn queued.
    fence_said: Option<String>,
    /// When the workspace was last checked for a fence.
    fence_checked: Option<Instant>,
}

impl Live {
    /// Begins a live wait for a turn of `thread`.
    pub(super) fn new(json: bool, prefix: String, thread: &str) -> Live {
        Live {
            interrupts: Interrupts::install(),
            spin: !json && crate::terminal::redraws_lines(&io::stderr()),
            colour: anstream::AutoStream::choice(&io::stderr()) != anstream::ColorChoice::Never,
            start: Instant::now(),
            frame: 0,
            shown: false,
            drawn: None,
            cancelled: false,
            prefix,
            thread: thread.to_owned(),
            fence_said: None,
            fence_checked: None,
        }
    }

    /// While `turn` is queued, checks now and then whether its workspace is
    /// fenced and, for each new fence, says which turn holds it and how to
    /// resolve it.
    pub(super) fn behind_fence(&mut self, client: &mut Client, turn: &Turn) {
        if turn.state != TurnState::Queued
            || self
                .fence_checked
                .is_some_and(|t| t.elapsed() < FENCE_EVERY)
        {
            return;
        }
        self.fence_checked = Some(Instant::now());
        let fence = super::fences::of_workspace(client, &turn.workspace_id);
        match fence {
            Some(f) if self.fence_said.as_deref() != Some(f.turn.as_str()) => {
                self.clear();
                eprintln!(
                    "{}",
                    super::fences::queued_behind(&self.prefix, &turn.id, &f)
                );
                self.fence_said = Some(f.turn);
            }
            Some(_) => {}
            None => self.fence_said = None,
        }
    }

    /// Acts on Ctrl-C: the first press cancels `turn`, the second stops
    /// watching ([`Halt::Failed`] with exit 1 and the commands to go on).
    pub(super) fn check(&mut self, client: &mut Client, turn: &Turn) -> Result<(), Halt> {
        let presses = self.interrupts.presses();
        if presses == 0 {
            return Ok(());
        }
        if !self.cancelled {
            self.cancelled = true;
            self.clear();
            match client.turns_cancel(&turn.id) {
                Ok(t) if t.state.is_terminal() => {
                    eprintln!("Ctrl-C: turn {} had already ended", t.id)
                }
                Ok(_) => eprintln!(
                    "Ctrl-C: cancelling turn {}; press Ctrl-C again to stop watching",
                    turn.id
                ),
                Err(e) => eprintln!(
                    "Ctrl-C: turn {} could not be cancelled ({e}); press Ctrl-C again to stop watching",
                    turn.id
                ),
            }
        }
        if presses >= 2 {
            self.clear();
            return Err(Halt::Failed(CliError {
                class: ExitClass::TurnNotCompleted,
                code: "detached",
                error: anyhow::anyhow!(
                    "stopped watching turn {} ({}); see it with `{} turns show {}`, follow its thread with `{} journal tail {} --follow`",
                    turn.id,
                    turn.state.as_str(),
                    self.prefix,
                    turn.id,
                    self.prefix,
                    self.thread
                ),
                details: None,
            }));
        }
        Ok(())
    }

    /// Draws the next spinner frame for `turn`, when enabled and the
    /// cursor is at the start of a line (`at_line_start`).
    pub(super) fn tick(&mut self, turn: &Turn, at_line_start: bool) {
        if !self.spin || !at_line_start {
            return;
        }
        if self.shown && self.drawn.is_some_and(|t| t.elapsed() < FRAME_EVERY) {
            return;
        }
        self.drawn = Some(Instant::now());
        let state = if turn.awaiting_input {
            "waiting for permission"
        } else {
            match turn.state {
                TurnState::Queued if self.fence_said.is_some() => "queued behind a fence",
                TurnState::Queued => "queued",
                TurnState::Preparing => "preparing",
                TurnState::Dispatched | TurnState::Running => "running",
                _ => "settling",
            }
        };
        let line = spinner_line(
            FRAMES[self.frame % FRAMES.len()],
            state,
            self.cancelled,
            self.start.elapsed().as_secs(),
            self.colour,
        );
        self.frame += 1;
        let mut err = io::stderr().lock();
        let _ = crossterm::queue!(
            err,
            Print('\r'),
            Print(line),
            Clear(ClearType::UntilNewLine)
        );
        let _ = err.flush();
        self.shown = true;
    }

    /// Erases the spinner line, if one is shown.
    pub(super) fn clear(&mut self) {
        if self.shown {
            let mut err = io::stderr().lock();
            let _ = crossterm::queue!(err, Print('\r'), Clear(ClearType::UntilNewLine));
            let _ = err.flush();
            self.shown = false;
        }
    }
}

impl Drop for Live {
    /// A watch that ends any way leaves no spinner behind.
    fn drop(&mut self) {
        self.clear();
    }
}

/// One spinner frame's text: `⠋ running 3s`, dimmed when `colour`.
fn spinner_line(frame: char, state: &str, cancelled: bool, secs: u64, colour: bool) -> String {
    let cancelling = if cancelled { ", cancelling" } else { "" };
    let text = format!("{frame} {state}{cancelling} {secs}s");
    if colour {
        crate::style::paint(crate::style::DIM, &text)
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::spinner_line;

    #[test]
    fn a_spinner_line_is_dimmed_only_with_colour() {
        assert_eq!(
            spinner_line('⠋', "running", true, 3, false),
            "⠋ running, cancelling 3s"
        );
        assert_eq!(
            spinner_line('⠙', "queued", false, 0, true),
            "\x1b[2m⠙ queued 0s\x1b[0m"
        );
    }
}
