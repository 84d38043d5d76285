//! Drawing `watch`'s view model into a ratatui frame.
//!
//! What must stay true:
//! - drawing reads the model and the clock it is given, nothing else, so a
//!   frame is a pure function of (view, now, size) and renders the same to
//!   a test backend as to a terminal;
//! - the layout fits any size: panes shrink to nothing rather than panic,
//!   and the transcript shows its *tail* (what the agent writes now) wrapped
//!   to the pane's width by display width;
//! - only text from the model is drawn, and the model holds agent text
//!   already made terminal-safe (`transcript::display`);
//! - colour is meaning's second channel, never its only one: a frame
//!   without colours ([`without_colour`], for `NO_COLOR` and friends) says
//!   the same in its text and keeps its effects (the selection's reverse).

use ratatui::Frame;
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Row, Table, TableState};
use unicode_width::UnicodeWidthChar;

use super::keys::{Choice, HELP, KEYS};
use super::model::{Link, Mode, View};
use super::transcript::Entry;
use lapis_protocol::time::age;

/// Takes every colour out of a drawn frame, keeping its text and effects:
/// what `watch` shows when the terminal's colours are not wanted (the rules
/// of the CLI's other output, `crate::style`).
pub(super) fn without_colour(buffer: &mut Buffer) {
    for cell in &mut buffer.content {
        cell.set_fg(Color::Reset);
        cell.set_bg(Color::Reset);
    }
}

/// Draws the whole screen.
pub(super) fn draw(frame: &mut Frame<'_>, view: &View, now: i64) {
    let [header, body, message, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(0),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    frame.render_widget(Paragraph::new(header_line(view)), header);
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(55), Constraint::Percentage(45)]).areas(body);
    let workspaces = view.workspace_ids();
    // Rows, the header row and the two borders.
    let wanted = u16::try_from(workspaces.len())
        .unwrap_or(u16::MAX)
        .saturating_add(3);
    let [ws_area, turns_area] = Layout::vertical([
        Constraint::Length(wanted.min(left.height / 2)),
        Constraint::Min(0),
    ])
    .areas(left);
    draw_workspaces(frame, view, &workspaces, ws_area);
    draw_turns(frame, view, now, turns_area);
    let pending = view
        .selected
        .as_ref()
        .and_then(|t| view.pending.get(t))
        .and_then(|l| l.first());
    let perm_height = pending.map_or(0, |p| {
        u16::try_from(p.options.len())
            .unwrap_or(u16::MAX)
            .saturating_add(3)
    });
    let [transcript_area, perm_area] = Layout::vertical([
        Constraint::Min(0),
        Constraint::Length(perm_height.min(right.height / 2)),
    ])
    .areas(right);
    draw_transcript(frame, view, transcript_area);
    if let Some(p) = pending {
        let mut lines = vec![Line::from(p.title.clone().bold())];
        for o in &p.options {
            let key = [
                (Choice::AllowOnce, "a"),
                (Choice::AllowAlways, "A"),
                (Choice::Reject, "r"),
            ]
            .into_iter()
            .find(|(c, _)| c.pick(&p.options).is_some_and(|x| x.id == o.id))
            .map_or("  ", |(_, k)| k);
            lines.push(Line::from(format!("{key}  {} ({})", o.name, o.kind)));
        }
        let block = Block::bordered()
            .title(format!(" permission {} ", p.id))
            .border_style(Style::new().yellow());
        frame.render_widget(Paragraph::new(lines).block(block), perm_area);
    }
    if let Some(m) = &view.message {
        frame.render_widget(Paragraph::new(Line::from(m.clone().yellow())), message);
    }
    frame.render_widget(Paragraph::new(footer_line(view)), footer);
    if view.mode == Mode::Help {
        draw_help(frame);
    }
}

fn header_line(view: &View) -> Line<'static> {
    let mut spans = vec![
        "lapis-ai-controller watch".bold(),
        Span::raw(format!(
            "  controller {}  queue {}/{}",
            view.version, view.queue.0, view.queue.1
        )),
    ];
    let waiting = view.pending_count();
    if waiting > 0 {
        spans.push(Span::raw("  "));
        spans.push(
            format!(
                "{waiting} permission request{} waiting",
                if waiting == 1 { "" } else { "s" }
            )
            .black()
            .on_yellow(),
        );
    }
    spans.push(Span::raw("  "));
    spans.push(match &view.link {
        Link::Live => "live".green(),
        Link::Reconnecting(why) => format!("reconnecting ({why})").red(),
    });
    Line::from(spans)
}

fn footer_line(view: &View) -> Line<'static> {
    match &view.mode {
        Mode::Resolve { turn, input } => Line::from(vec![
            format!(
                "resolve {turn}: only if its agent no longer runs it, type failed or cancelled and Enter (Esc leaves): "
            )
            .yellow(),
            Span::raw(format!("{input}_")),
        ]),
        Mode::ConfirmCancel { turn } => Line::from(
            format!("cancel {turn}? its agent is asked to stop: y cancels, any other key keeps it")
                .yellow(),
        ),
        Mode::Filter { input } => Line::from(vec![
            "filter turns (id, workspace, state, provider; Enter keeps, Esc clears): "
                .yellow(),
            Span::raw(format!("{input}_")),
        ]),
        Mode::Normal | Mode::Help => Line::from(HELP.dim()),
    }
}

/// The `?` overlay: every key and what it does, centred over the view.
fn draw_help(frame: &mut Frame<'_>) {
    let area = frame.area();
    let lines: Vec<Line<'static>> = KEYS
        .iter()
        .map(|(key, what)| Line::from(vec![format!("{key:<8} ").bold(), Span::raw(*what)]))
        .collect();
    let width = KEYS
        .iter()
        .map(|(_, what)| what.chars().count() + 9)
        .max()
        .unwrap_or(0)
        .saturating_add(2);
    let width = u16::try_from(width).unwrap_or(u16::MAX).min(area.width);
    let height = u16::try_from(KEYS.len() + 2)
        .unwrap_or(u16::MAX)
        .min(area.height);
    let popup = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    };
    frame.render_widget(Clear, popup);
    let block = Block::bordered().title(" keys (any key closes) ");
    frame.render_widget(Paragraph::new(lines).block(block), popup);
}

fn draw_workspaces(frame: &mut Frame<'_>, view: &View, ids: &[String], area: Rect) {
    let rows = ids.iter().map(|id| {
        let state = view.workspace_state(id);
        let style = match state {
            super::model::WorkspaceState::Fenced => Style::new().red(),
            super::model::WorkspaceState::Running { .. } => Style::new().green(),
            _ => Style::new(),
        };
        Row::new(vec![id.clone(), state.label()]).style(style)
    });
    let table = Table::new(
        rows,
        [Constraint::Percentage(50), Constraint::Percentage(50)],
    )
    .header(Row::new(["WORKSPACE", "STATE"]).bold())
    .block(Block::bordered().title(" workspaces "));
    frame.render_widget(table, area);
}

fn draw_turns(frame: &mut Frame<'_>, view: &View, now: i64, area: Rect) {
    let ordered = view.ordered();
    let selected = view
        .selected
        .as_ref()
        .and_then(|s| ordered.iter().position(|t| t.id == *s));
    let rows = ordered.iter().map(|t| {
        let mut state = t.state.as_str().to_owned();
        if view.pending.contains_key(&t.id) {
            state.push_str(" (permission)");
        } else if t.cancel_requested && !t.state.is_terminal() {
            state.push_str(" (cancelling)");
        }
        let style = if t.state.is_fenced() {
            Style::new().red()
        } else if view.pending.contains_key(&t.id) {
            Style::new().yellow()
        } else if t.in_flight() {
            Style::new().green()
        } else {
            Style::new()
        };
        Row::new(vec![
            short(&t.id),
            t.workspace.clone(),
            state,
            age(now.saturating_sub(t.created_at)),
            view.provider(t).to_owned(),
            t.elapsed(now).map(age).unwrap_or_default(),
        ])
        .style(style)
    });
    let table = Table::new(
        rows,
        [
            Constraint::Length(13),
            Constraint::Fill(1),
            Constraint::Length(20),
            Constraint::Length(4),
            Constraint::Fill(1),
            Constraint::Length(7),
        ],
    )
    .header(Row::new(["TURN", "WORKSPACE", "STATE", "AGE", "PROVIDER", "ELAPSED"]).bold())
    .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED))
    .block(Block::bordered().title(if view.filter.is_empty() {
        " turns ".to_owned()
    } else {
        format!(" turns matching `{}` ", view.filter)
    }));
    let mut state = TableState::default().with_selected(selected);
    frame.render_stateful_widget(table, area, &mut state);
}

/// `turn_` and the first 8 hex digits.
fn short(id: &str) -> String {
    id.char_indices()
        .nth(13)
        .map_or_else(|| id.to_owned(), |(i, _)| id[..i].to_owned())
}

fn draw_transcript(frame: &mut Frame<'_>, view: &View, area: Rect) {
    let title = match view.selected_turn() {
        Some(t) => format!(" {} ", t.id),
        None => " no turn yet ".to_owned(),
    };
    let mut block = Block::bordered().title(title);
    if let Some((meter, borrowed)) = view.selected.as_deref().and_then(|t| view.context_of(t)) {
        block = block.title_bottom(context_line(meter, borrowed));
    }
    let inner = block.inner(area);
    let width = usize::from(inner.width.max(1));
    let mut lines: Vec<Line<'static>> = Vec::new();
    let entries = view
        .selected
        .as_ref()
        .and_then(|t| view.transcripts.get(t))
        .map(|t| t.entries.as_slice())
        .unwrap_or_default();
    for entry in entries {
        let (text, style) = match entry {
            Entry::Reply(t) => (t.clone(), Style::new()),
            Entry::Thought(t) => (
                format!("thinking: {t}"),
                Style::new().add_modifier(Modifier::DIM | Modifier::ITALIC),
            ),
            Entry::Tool { line, .. } => (format!("tool {line}"), Style::new().bold()),
            Entry::Note(n) => (n.clone(), Style::new().cyan()),
        };
        for piece in wrap(&text, width) {
            lines.push(Line::styled(piece, style));
        }
    }
    let height = usize::from(inner.height);
    let skip = lines.len().saturating_sub(height);
    let tail: Vec<Line<'static>> = lines.into_iter().skip(skip).collect();
    frame.render_widget(Paragraph::new(tail).block(block), area);
}

/// Tokens as a person reads them: `950`, `12.3k`, `1.2M`.
fn tokens(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

/// The context meter under the transcript: ` context ████░░░░ 45% 90.0k/200.0k `,
/// yellow from 75 %, red from 90 % (where agents start compacting or
/// refusing); `(thread)` when the turn has no report of its own and the
/// thread's latest is shown.
pub(super) fn context_line(meter: super::model::ContextMeter, borrowed: bool) -> Line<'static> {
    const CELLS: u64 = 10;
    let pct = meter.percent();
    let full = usize::try_from((pct * CELLS).div_ceil(100).min(CELLS)).unwrap_or(0);
    let bar = format!(
        "{}{}",
        "█".repeat(full),
        "░".repeat(usize::try_from(CELLS).unwrap_or(0) - full)
    );
    let style = match pct {
        90.. => Style::new().red(),
        75.. => Style::new().yellow(),
        _ => Style::new().green(),
    };
    let whose = if borrowed { " (thread)" } else { "" };
    Line::from(vec![
        Span::raw(" context "),
        Span::styled(bar, style),
        Span::raw(format!(
            " {pct}% {}/{}{whose} ",
            tokens(meter.used),
            tokens(meter.size)
        )),
    ])
}

/// `text` cut into lines of at most `width` display columns (every `\n`
/// ends one; an empty text is no line).
pub(super) fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut out = Vec::new();
    for logical in text.split('\n') {
        let mut line = String::new();
        let mut used = 0;
        for c in logical.chars() {
            let w = c.width().unwrap_or(0);
            if used + w > width && !line.is_empty() {
                out.push(std::mem::take(&mut line));
                used = 0;
            }
            line.push(c);
            used += w;
        }
        out.push(line);
    }
    if text.ends_with('\n') {
        out.pop();
    }
    if text.is_empty() {
        out.clear();
    }
    out
}
