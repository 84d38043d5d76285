//! `watch`: a full-screen live view of the controller — workspaces and
//! their state, turns, the selected turn's reply as it streams, pending
//! permission requests answered with a key, cancel, and a fenced turn's
//! resolve behind a typed confirmation.
//!
//! The parts: `model.rs` (the view model, reduced from a snapshot and
//! journal events; pure), `keys.rs` (what a key does; pure), `render.rs`
//! (drawing the model), `transcript.rs` (one turn's transcript and the
//! terminal-safe text rule). This file owns the terminal and the
//! connection.
//!
//! What must stay true:
//! - one authenticated connection carries everything: the owner journal
//!   subscription (every thread of the CLI's session) is made *before* the
//!   snapshot is read, so no event falls between the two; after a lost
//!   connection the same session is resumed and the subscription renewed
//!   from the last event's cursor (gap-free), then the snapshot re-read;
//!   the subscription is *present* (`JournalFollower::attended`), so a
//!   presence-aware notifier stays quiet while the view is open;
//! - without a terminal on stdin and stdout it refuses (exit 2) and names
//!   the streaming commands instead; it never draws into a pipe;
//! - the terminal is restored on every exit, error and panic included: raw
//!   mode and the alternate screen belong to [`Screen`], which undoes them
//!   on drop;
//! - a redraw follows every batch of events (drained without waiting, then
//!   drawn once), and the idle view redraws once a second for ages; the
//!   loop waits on the socket at most [`TICK`] so keys act promptly.

mod keys;
mod model;
mod render;
mod rows;
mod transcript;

#[cfg(test)]
mod tests;

use std::io::{self, IsTerminal, Stdout};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

use crossterm::event::{Event, KeyCode, KeyEventKind, KeyModifiers};
use crossterm::terminal::{EnterAlternateScreen, LeaveAlternateScreen};
use lapis_protocol::JournalEvent;
use lapis_protocol::client::{Client, ClientError, JournalFollower};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;

use self::keys::{Action, Key};
use self::model::{Link, Snapshot, View};
use super::connect::{client_error, client_target, connect_to};
use crate::args::GlobalArgs;
use crate::exit::{CliError, CliResult};

/// The longest the loop waits on the socket before it looks at keys.
const TICK: Duration = Duration::from_millis(40);

/// Redraw at least this often (ages and elapsed times move).
const IDLE_REDRAW: Duration = Duration::from_secs(1);

/// Events reduced before a redraw, at most (a burst is drawn once).
const BATCH: usize = 256;

/// Runs the view until the person quits.
pub(super) fn run(global: &GlobalArgs) -> CliResult {
    if !io::stdin().is_terminal() || !io::stdout().is_terminal() {
        let prefix = super::permissions::command_prefix(global);
        return Err(CliError::failure(
            "no_terminal",
            anyhow::anyhow!(
                "`watch` is a full-screen view and needs a terminal on stdin and stdout; to stream instead, use `{prefix} journal tail --follow` (add --json for NDJSON) or `{prefix} turns submit … --follow`"
            ),
        ));
    }
    let target = client_target(global)?;
    let mut client = connect_to(&target)?;
    let mut view = View::default();
    let mut screen = Screen::enter().map_err(CliError::from)?;
    let input = spawn_input();
    let mut resume = None;
    loop {
        match connected(&mut client, &mut view, &mut screen, &input, resume)? {
            Ended::Quit => return Ok(()),
            Ended::Lost { cursor, why } => {
                resume = cursor;
                view.link = Link::Reconnecting(why);
                if !reconnect(&mut client, &target, &mut view, &mut screen, &input)? {
                    return Ok(());
                }
            }
        }
    }
}

/// How one connection's session of the view ended.
enum Ended {
    /// The person quit.
    Quit,
    /// The connection was lost after the event at `cursor` (`None`: before
    /// any event).
    Lost { cursor: Option<u64>, why: String },
}

/// Runs the view over `client`'s connection until it is lost or the person
/// quits.
fn connected(
    client: &mut Client,
    view: &mut View,
    screen: &mut Screen,
    input: &Receiver<Input>,
    resume: Option<u64>,
) -> Result<Ended, CliError> {
    let lost = |cursor: u64, e: &ClientError| Ended::Lost {
        cursor: (cursor > 0).then_some(cursor),
        why: transcript::display(&e.to_string()),
    };
    // A person is looking: the subscription is present, so a
    // presence-aware notifier (`notify.presence`) stays quiet meanwhile.
    let mut follower = match JournalFollower::attended(client, None, resume) {
        Ok(f) => f,
        Err(e) if e.is_service_unavailable() => return Ok(lost(resume.unwrap_or(0), &e)),
        Err(e) => return Err(client_error(e)),
    };
    match snapshot(follower.client()) {
        Ok(snap) => view.load(snap),
        Err(e) if e.is_service_unavailable() => return Ok(lost(follower.cursor(), &e)),
        Err(e) => return Err(client_error(e)),
    }
    view.link = Link::Live;
    if let Some(action) = view.selected.clone().and_then(|t| view.select(&t))
        && let Err(e) = perform(follower.client(), view, action)
    {
        return Ok(lost(follower.cursor(), &e));
    }
    let mut dirty = true;
    let mut drawn = Instant::now();
    loop {
        loop {
            match input.try_recv() {
                Ok(Input::Key(key)) => {
                    dirty = true;
                    match view.key(key) {
                        Some(Action::Quit) => return Ok(Ended::Quit),
                        Some(action) => {
                            if let Err(e) = perform(follower.client(), view, action) {
                                return Ok(lost(follower.cursor(), &e));
                            }
                        }
                        None => {}
                    }
                }
                Ok(Input::Resize) => dirty = true,
                Ok(Input::Failed(e)) => return Err(CliError::from(e)),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => return Ok(Ended::Quit),
            }
        }
        if dirty || drawn.elapsed() >= IDLE_REDRAW {
            screen.draw(view)?;
            dirty = false;
            drawn = Instant::now();
        }
        let mut wait = Some(TICK);
        for _ in 0..BATCH {
            match follower.next(wait) {
                Ok(Some(e)) => dirty |= view.apply(&e),
                Ok(None) => break,
                Err(e) if e.is_service_unavailable() => return Ok(lost(follower.cursor(), &e)),
                Err(e) => return Err(client_error(e)),
            }
            // More of a burst is taken without waiting, then drawn once.
            wait = Some(Duration::from_millis(1));
        }
    }
}

/// Waits for the controller to answer again, resuming the same session
/// (or, when that session is gone, opening a new one). `Ok(false)` when
/// the person quit meanwhile.
fn reconnect(
    client: &mut Client,
    target: &super::connect::Target,
    view: &mut View,
    screen: &mut Screen,
    input: &Receiver<Input>,
) -> Result<bool, CliError> {
    let mut backoff = Duration::from_millis(100);
    loop {
        screen.draw(view)?;
        match input.recv_timeout(backoff) {
            Ok(Input::Key(Key::Char('q') | Key::Interrupt | Key::Esc)) => return Ok(false),
            Ok(Input::Failed(e)) => return Err(CliError::from(e)),
            Ok(_) | Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return Ok(false),
        }
        match client.reconnect() {
            Ok(_) => return Ok(true),
            Err(ClientError::SessionChanged) => {
                if let Ok(fresh) = connect_to(target) {
                    *client = fresh;
                    return Ok(true);
                }
            }
            Err(e) => view.link = Link::Reconnecting(transcript::display(&e.to_string())),
        }
        backoff = (backoff * 2).min(Duration::from_secs(2));
    }
}

/// Reads what the view starts from.
fn snapshot(client: &mut Client) -> Result<Snapshot, ClientError> {
    Ok(Snapshot {
        status: Some(client.status()?),
        workspaces: client.workspaces_list()?,
        threads: client.threads_list()?,
        turns: client.turns_list(None)?,
        pending: client.permissions_list(None, None)?,
    })
}

/// Makes the request a key asked for; its outcome goes to the footer. Only
/// a lost connection is an error.
fn perform(client: &mut Client, view: &mut View, action: Action) -> Result<(), ClientError> {
    let done = match action {
        Action::Quit => return Ok(()),
        Action::Respond {
            turn,
            request,
            option,
        } => client
            .permissions_respond(&turn, &request, &option)
            .map(|()| format!("answered {request} with {option}")),
        Action::Cancel { turn } => client
            .turns_cancel(&turn)
            .map(|t| format!("cancel asked for {} ({})", t.id, t.state.as_str())),
        Action::Resolve { turn, resolve_as } => client
            .turns_resolve(&turn, resolve_as, true)
            .map(|t| format!("resolved {} as {}", t.id, t.state.as_str())),
        Action::Load { turn, thread } => {
            let events = replay(client, &thread, &turn)?;
            view.loaded(&turn, &events);
            return Ok(());
        }
    };
    match done {
        Ok(message) => view.message = Some(transcript::display(&message)),
        Err(e) if e.is_service_unavailable() => return Err(e),
        Err(e) => view.message = Some(transcript::display(&format!("refused: {e}"))),
    }
    Ok(())
}

/// Every journal event of `turn` (its thread's journal, paged).
fn replay(client: &mut Client, thread: &str, turn: &str) -> Result<Vec<JournalEvent>, ClientError> {
    let mut events = Vec::new();
    let mut after = 0;
    loop {
        let page = client.journal_replay(Some(thread), after, None)?;
        events.extend(
            page.events
                .into_iter()
                .filter(|e| e.turn_id.as_deref() == Some(turn)),
        );
        after = page.next_after;
        if !page.more {
            return Ok(events);
        }
    }
}

/// What the input thread reports.
enum Input {
    /// A key the view understands.
    Key(Key),
    /// The terminal changed size.
    Resize,
    /// Reading the terminal failed.
    Failed(io::Error),
}

/// Reads terminal events on a thread of their own (the main loop waits on
/// the socket) and hands them over a channel.
fn spawn_input() -> Receiver<Input> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        loop {
            let input = match crossterm::event::read() {
                Ok(Event::Key(k)) if k.kind != KeyEventKind::Release => {
                    let key = match k.code {
                        KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => {
                            Key::Interrupt
                        }
                        KeyCode::Char(c) => Key::Char(c),
                        KeyCode::Up => Key::Up,
                        KeyCode::Down => Key::Down,
                        KeyCode::Enter => Key::Enter,
                        KeyCode::Esc => Key::Esc,
                        KeyCode::Backspace => Key::Backspace,
                        _ => continue,
                    };
                    Input::Key(key)
                }
                Ok(Event::Resize(..)) => Input::Resize,
                Ok(_) => continue,
                Err(e) => {
                    let _ = tx.send(Input::Failed(e));
                    return;
                }
            };
            if tx.send(input).is_err() {
                return;
            }
        }
    });
    rx
}

/// The terminal while the view is up: raw mode and the alternate screen,
/// undone on drop (any exit, a panic's unwinding included).
struct Screen {
    /// The ratatui terminal over stdout.
    terminal: Terminal<CrosstermBackend<Stdout>>,
    /// Whether colours are wanted: anstream's rules for stdout, as for the
    /// CLI's other output (`NO_COLOR`, `CLICOLOR=0`, `TERM=dumb` say no,
    /// `CLICOLOR_FORCE` yes).
    colour: bool,
}

impl Screen {
    fn enter() -> io::Result<Screen> {
        crossterm::terminal::enable_raw_mode()?;
        let guard = RawMode;
        crossterm::execute!(io::stdout(), EnterAlternateScreen, crossterm::cursor::Hide)?;
        let terminal = Terminal::new(CrosstermBackend::new(io::stdout()))?;
        std::mem::forget(guard);
        let colour = anstream::AutoStream::choice(&io::stdout()) != anstream::ColorChoice::Never;
        Ok(Screen { terminal, colour })
    }

    fn draw(&mut self, view: &View) -> Result<(), CliError> {
        let now = lapis_protocol::time::now_ms();
        self.terminal
            .draw(|frame| {
                render::draw(frame, view, now);
                if !self.colour {
                    render::without_colour(frame.buffer_mut());
                }
            })
            .map_err(CliError::from)?;
        Ok(())
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        let _ = crossterm::execute!(io::stdout(), LeaveAlternateScreen, crossterm::cursor::Show);
        let _ = crossterm::terminal::disable_raw_mode();
    }
}

/// Raw mode alone, while [`Screen::enter`] has not finished: undone if a
/// later step fails.
struct RawMode;

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = crossterm::execute!(io::stdout(), LeaveAlternateScreen);
        let _ = crossterm::terminal::disable_raw_mode();
    }
}
