//! What a key does in `watch`: a pure function of the view and the key,
//! returning the request to make (if any). The loop in `mod.rs` makes it;
//! the journal then shows its effect.
//!
//! What must stay true:
//! - a permission is answered only with an option the request offered, of
//!   the kind the key names (allow once, allow always, reject); a request
//!   without such an option is not answered, and the footer says why;
//! - a fenced turn is resolved only after the owner *typed* the outcome to
//!   record (`failed` or `cancelled`) and Enter; any other text, or Esc,
//!   resolves nothing. Resolving confirms the agent is no longer running
//!   the turn, and the prompt says so;
//! - a running turn is cancelled only after `c` and then `y`; any other
//!   key cancels nothing;
//! - `?` shows every key over the view and `/` filters the turns list (by
//!   id, workspace, state or provider); neither makes a request;
//! - keys act on the selected turn only.

use lapis_protocol::{PermissionOption, ResolveAs};

use super::model::{Mode, View};
use crate::commands::permissions::Verb;

/// A key, as the view understands it (the loop maps terminal events).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Key {
    /// A printable character.
    Char(char),
    /// Up arrow.
    Up,
    /// Down arrow.
    Down,
    /// Enter.
    Enter,
    /// Escape.
    Esc,
    /// Backspace.
    Backspace,
    /// Ctrl-C.
    Interrupt,
}

/// Which kind of answer a key gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Choice {
    /// `a`: allow this once.
    AllowOnce,
    /// `A`: allow always.
    AllowAlways,
    /// `r`: reject.
    Reject,
}

impl Choice {
    /// The option of `options` this choice answers with: the first of the
    /// exact kind (reject falls back to reject always).
    pub(super) fn pick(self, options: &[PermissionOption]) -> Option<&PermissionOption> {
        let exact = |v: Verb| options.iter().find(|o| o.kind == v.kind());
        match self {
            Choice::AllowOnce => exact(Verb::Allow),
            Choice::AllowAlways => exact(Verb::AllowAlways),
            Choice::Reject => exact(Verb::Reject).or_else(|| exact(Verb::RejectAlways)),
        }
    }

    fn label(self) -> &'static str {
        match self {
            Choice::AllowOnce => "allow once",
            Choice::AllowAlways => "allow always",
            Choice::Reject => "reject",
        }
    }
}

/// A request the loop makes for a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Action {
    /// Leave the view.
    Quit,
    /// `permissions.respond`.
    Respond {
        /// The asking turn.
        turn: String,
        /// The request.
        request: String,
        /// The chosen option id.
        option: String,
    },
    /// `turns.cancel`.
    Cancel {
        /// The turn.
        turn: String,
    },
    /// `turns.resolve` with `confirmStopped`.
    Resolve {
        /// The fenced turn.
        turn: String,
        /// What to record it as.
        resolve_as: ResolveAs,
    },
    /// Replay the journal for a selected turn's transcript.
    Load {
        /// The turn.
        turn: String,
        /// Its thread.
        thread: String,
    },
}

/// The footer's key help in normal mode.
pub(super) const HELP: &str =
    "↑/↓ select  a/A/r answer  p next request  c cancel  R resolve  / filter  ? keys  q quit";

/// Every key and what it does (the `?` overlay).
pub(super) const KEYS: [(&str, &str); 10] = [
    ("↑/↓ k/j", "select a turn"),
    ("a", "allow the selected turn's request once"),
    ("A", "allow it always"),
    ("r", "reject it"),
    ("p", "select the next turn waiting for a permission answer"),
    ("c", "cancel the selected turn (asks first: y)"),
    (
        "R",
        "resolve the selected fenced turn (type failed or cancelled)",
    ),
    ("/", "filter turns by id, workspace, state or provider"),
    ("?", "show these keys (any key closes)"),
    ("q Esc", "quit"),
];

impl View {
    /// Handles `key`: changes the selection or mode, and returns the
    /// request to make, if any.
    pub(super) fn key(&mut self, key: Key) -> Option<Action> {
        if let Mode::Resolve { turn, input } = &mut self.mode {
            match key {
                Key::Char(c) => input.push(c),
                Key::Backspace => {
                    input.pop();
                }
                Key::Esc | Key::Interrupt => {
                    self.mode = Mode::Normal;
                    self.message = Some("nothing resolved".into());
                }
                Key::Enter => {
                    let resolve_as = match input.trim() {
                        "failed" => ResolveAs::Failed,
                        "cancelled" => ResolveAs::Cancelled,
                        other => {
                            self.message = Some(format!(
                                "type `failed` or `cancelled` (not `{}`), or Esc",
                                super::transcript::display(other)
                            ));
                            input.clear();
                            return None;
                        }
                    };
                    let turn = turn.clone();
                    self.mode = Mode::Normal;
                    return Some(Action::Resolve { turn, resolve_as });
                }
                Key::Up | Key::Down => {}
            }
            return None;
        }
        match &mut self.mode {
            Mode::Resolve { .. } | Mode::Normal => {}
            Mode::Help => {
                self.mode = Mode::Normal;
                return None;
            }
            Mode::ConfirmCancel { turn } => {
                let turn = std::mem::take(turn);
                self.mode = Mode::Normal;
                if key == Key::Char('y') {
                    return Some(Action::Cancel { turn });
                }
                self.message = Some(format!("nothing cancelled: {turn} keeps running"));
                return None;
            }
            Mode::Filter { input } => {
                match key {
                    Key::Char(c) => input.push(c),
                    Key::Backspace => {
                        input.pop();
                    }
                    Key::Enter => {
                        self.mode = Mode::Normal;
                        self.message = Some(if self.filter.is_empty() {
                            "showing every turn".to_owned()
                        } else {
                            format!(
                                "showing turns matching `{}` (/ changes it, Esc in it clears it)",
                                self.filter
                            )
                        });
                        return None;
                    }
                    Key::Esc | Key::Interrupt => {
                        self.filter.clear();
                        self.mode = Mode::Normal;
                        self.message = Some("filter cleared: showing every turn".into());
                        return None;
                    }
                    Key::Up | Key::Down => return None,
                }
                let typed = input.clone();
                self.filter = super::transcript::display(&typed);
                return None;
            }
        }
        self.message = None;
        match key {
            Key::Char('q') | Key::Esc | Key::Interrupt => Some(Action::Quit),
            Key::Char('?') => {
                self.mode = Mode::Help;
                None
            }
            Key::Char('/') => {
                self.mode = Mode::Filter {
                    input: self.filter.clone(),
                };
                None
            }
            Key::Up | Key::Char('k') => self.step(-1),
            Key::Down | Key::Char('j') => self.step(1),
            Key::Char('p') => self.next_pending(),
            Key::Char('a') => self.answer(Choice::AllowOnce),
            Key::Char('A') => self.answer(Choice::AllowAlways),
            Key::Char('r') => self.answer(Choice::Reject),
            Key::Char('c') => {
                let t = self.selected_turn()?;
                if t.state.is_terminal() || t.state.is_fenced() {
                    self.message = Some(format!(
                        "turn {} is {}: nothing to cancel{}",
                        t.id,
                        t.state.as_str(),
                        if t.state.is_fenced() {
                            " (R resolves it)"
                        } else {
                            ""
                        }
                    ));
                    return None;
                }
                self.mode = Mode::ConfirmCancel { turn: t.id.clone() };
                None
            }
            Key::Char('R') => {
                let t = self.selected_turn()?;
                if !t.state.is_fenced() {
                    self.message = Some(format!(
                        "turn {} is {}: only a fenced turn is resolved",
                        t.id,
                        t.state.as_str()
                    ));
                    return None;
                }
                self.mode = Mode::Resolve {
                    turn: t.id.clone(),
                    input: String::new(),
                };
                None
            }
            _ => None,
        }
    }

    /// Moves the selection `by` rows, and asks for the new turn's
    /// transcript when it is not complete.
    fn step(&mut self, by: isize) -> Option<Action> {
        let order: Vec<String> = self.ordered().iter().map(|t| t.id.clone()).collect();
        if order.is_empty() {
            return None;
        }
        let at = self
            .selected
            .as_ref()
            .and_then(|s| order.iter().position(|x| x == s))
            .unwrap_or(0);
        let next = at.saturating_add_signed(by).min(order.len() - 1);
        self.select(&order[next])
    }

    /// Selects the next turn (in list order, after the selected one) with a
    /// pending request.
    fn next_pending(&mut self) -> Option<Action> {
        let order: Vec<String> = self.ordered().iter().map(|t| t.id.clone()).collect();
        let at = self
            .selected
            .as_ref()
            .and_then(|s| order.iter().position(|x| x == s))
            .map_or(0, |i| i + 1);
        let found = order[at.min(order.len())..]
            .iter()
            .chain(&order[..at.min(order.len())])
            .find(|id| self.pending.contains_key(*id))
            .cloned();
        match found {
            Some(id) => self.select(&id),
            None => {
                self.message = Some("no permission request is waiting".into());
                None
            }
        }
    }

    /// Selects `turn`; a [`Action::Load`] when its transcript is not
    /// complete.
    pub(super) fn select(&mut self, turn: &str) -> Option<Action> {
        self.selected = Some(turn.to_owned());
        let complete = self.transcripts.get(turn).is_some_and(|t| t.complete);
        let thread = self.turns.get(turn)?.thread.clone();
        (!complete).then(|| Action::Load {
            turn: turn.to_owned(),
            thread,
        })
    }

    /// Answers the selected turn's first pending request with `choice`.
    fn answer(&mut self, choice: Choice) -> Option<Action> {
        let turn = self.selected.clone()?;
        let Some(request) = self.pending.get(&turn).and_then(|l| l.first()) else {
            self.message = Some("the selected turn waits for no permission (p finds one)".into());
            return None;
        };
        match choice.pick(&request.options) {
            Some(option) => Some(Action::Respond {
                turn,
                request: request.id.clone(),
                option: option.id.clone(),
            }),
            None => {
                self.message = Some(format!(
                    "request {} offers no `{}` option",
                    request.id,
                    choice.label()
                ));
                None
            }
        }
    }
}
