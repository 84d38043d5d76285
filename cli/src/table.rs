//! The one table of every list command (`workspaces`, `threads`, `turns`,
//! `permissions`, `providers`, `releases list`, `budgets show`).
//!
//! On a terminal a person reads it: a bold header row, columns padded to
//! their widest cell, times as human ages (`5m`). Piped, a script reads it:
//! one tab-separated line per row and no header, times in the wire's RFC 3339
//! form, so `cut -f2` and `awk -F'\t'` see the same columns every time.
//!
//! What must stay true:
//! - the piped form depends on nothing but the rows (not the terminal, its
//!   width or the clock), and its columns only ever grow at the end;
//! - every cell is one line without tabs: a tab, newline or control
//!   character in a cell (agent text, a path) becomes a space, after the
//!   terminal-safe printer made it harmless, so a row is always N fields;
//! - styling is written through `anstream`, which drops it where colour is
//!   not wanted (a pipe, `NO_COLOR`, `TERM=dumb`, `CLICOLOR=0`);
//! - a person's table fits the terminal's width: generated ids
//!   ([`Cell::Id`]) show as their shortest prefix that is unique in their
//!   column (at least the kind and 8 characters, `turn_1a2b3c4d`), which
//!   every command takes as the id (the prefix rule), and when the rows are
//!   still too wide the widest text columns are cut with `…`; ids and times
//!   are never cut. `--wide` (a table made [`Table::wide`]) shows every
//!   cell whole. A script always gets every cell whole.

use std::io::{self, IsTerminal, Write};

use unicode_width::UnicodeWidthStr;

use crate::style;

/// One cell.
#[derive(Debug, Clone)]
pub(crate) enum Cell {
    /// Text as it is (made terminal-safe and one line).
    Text(String),
    /// A time (milliseconds since the epoch): an age on a terminal, RFC 3339
    /// when piped; `-` when absent.
    Time(Option<i64>),
    /// A generated id (`turn_…`, `thr_…`): its shortest unique prefix for
    /// a person (unless wide), whole for a script. Never cut.
    Id(String),
}

impl From<&str> for Cell {
    fn from(s: &str) -> Cell {
        Cell::Text(s.to_owned())
    }
}

impl From<String> for Cell {
    fn from(s: String) -> Cell {
        Cell::Text(s)
    }
}

impl From<&String> for Cell {
    fn from(s: &String) -> Cell {
        Cell::Text(s.clone())
    }
}

/// Who reads the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reader {
    /// A person at a terminal: header, aligned columns, ages.
    Person,
    /// A script: tab-separated, no header, RFC 3339 times.
    Script,
}

impl Reader {
    /// Who reads stdout.
    pub(crate) fn of_stdout() -> Reader {
        if io::stdout().is_terminal() {
            Reader::Person
        } else {
            Reader::Script
        }
    }
}

/// Rows under a fixed header.
#[derive(Debug)]
pub(crate) struct Table {
    /// Column names (upper case by convention), shown to a person only.
    headers: &'static [&'static str],
    /// The rows; each has `headers.len()` cells (shorter rows are padded
    /// with empty cells, longer ones cut).
    rows: Vec<Vec<Cell>>,
    /// `--wide`: a person sees whole ids and cells, however wide.
    wide: bool,
}

/// The fewest characters of an id after its kind (`turn_`) a person sees.
const ID_CHARS: usize = 8;

/// The narrowest a text column is cut to.
const MIN_COLUMN: usize = 8;

impl Table {
    pub(crate) fn new(headers: &'static [&'static str]) -> Table {
        Table {
            headers,
            rows: Vec::new(),
            wide: false,
        }
    }

    /// Whole ids and cells for a person too (`--wide`).
    pub(crate) fn wide(mut self, wide: bool) -> Table {
        self.wide = wide;
        self
    }

    /// Adds a row.
    pub(crate) fn row(&mut self, cells: Vec<Cell>) {
        self.rows.push(cells);
    }

    /// The table as `reader` reads it, without styling, one line per row,
    /// each ending in a newline. `now` (milliseconds) measures ages;
    /// `width` is the terminal's (a person's rows are fitted to it).
    pub(crate) fn render(&self, reader: Reader, now: i64, width: Option<usize>) -> String {
        let mut cells: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|row| {
                (0..self.headers.len())
                    .map(|i| {
                        row.get(i)
                            .map_or_else(String::new, |c| text(c, reader, now))
                    })
                    .collect()
            })
            .collect();
        if reader == Reader::Person && !self.wide {
            self.shorten_ids(&mut cells);
            if let Some(width) = width {
                self.fit(&mut cells, width);
            }
        }
        let mut out = String::new();
        match reader {
            Reader::Script => {
                for row in &cells {
                    out.push_str(&row.join("\t"));
                    out.push('\n');
                }
            }
            Reader::Person => {
                let header: Vec<String> = self.headers.iter().map(|h| (*h).to_owned()).collect();
                let widths = widths(std::iter::once(&header).chain(&cells));
                for row in std::iter::once(&header).chain(&cells) {
                    out.push_str(&aligned(row, &widths));
                    out.push('\n');
                }
            }
        }
        out
    }

    /// Each [`Cell::Id`] as its shortest prefix unique in its column.
    fn shorten_ids(&self, cells: &mut [Vec<String>]) {
        for col in 0..self.headers.len() {
            let ids: Vec<&str> = self
                .rows
                .iter()
                .filter_map(|r| match r.get(col) {
                    Some(Cell::Id(id)) => Some(id.as_str()),
                    _ => None,
                })
                .collect();
            for (row, shown) in self.rows.iter().zip(cells.iter_mut()) {
                if let (Some(Cell::Id(id)), Some(cell)) = (row.get(col), shown.get_mut(col)) {
                    *cell = short_id(id, &ids).to_owned();
                }
            }
        }
    }

    /// Cuts the widest text columns (never ids or times) until a row fits
    /// `width`, or every text column is [`MIN_COLUMN`] wide.
    fn fit(&self, cells: &mut [Vec<String>], width: usize) {
        let header: Vec<String> = self.headers.iter().map(|h| (*h).to_owned()).collect();
        let mut widths = widths(std::iter::once(&header).chain(cells.iter()));
        let cuttable: Vec<bool> = (0..self.headers.len())
            .map(|col| {
                self.rows
                    .iter()
                    .all(|r| matches!(r.get(col), None | Some(Cell::Text(_))))
            })
            .collect();
        let total = |w: &[usize]| w.iter().sum::<usize>() + 2 * w.len().saturating_sub(1);
        while total(&widths) > width {
            let widest = (0..widths.len())
                .filter(|&c| cuttable[c] && widths[c] > MIN_COLUMN.max(header[c].width()))
                .max_by_key(|&c| widths[c]);
            match widest {
                Some(c) => widths[c] -= 1,
                None => break,
            }
        }
        for row in cells.iter_mut() {
            for (c, cell) in row.iter_mut().enumerate() {
                if cuttable[c] && cell.width() > widths[c] {
                    *cell = cut(cell, widths[c]);
                }
            }
        }
    }

    /// Prints the table on stdout for whoever reads it (a closed pipe is
    /// not an error).
    pub(crate) fn print(&self) -> io::Result<()> {
        let reader = Reader::of_stdout();
        let now = lapis_protocol::time::now_ms();
        let width = crossterm::terminal::size()
            .ok()
            .map(|(columns, _)| usize::from(columns))
            .filter(|w| *w > 0);
        let text = self.render(reader, now, width);
        let mut out = anstream::stdout().lock();
        let result = match (reader, text.split_once('\n')) {
            (Reader::Person, Some((header, rest))) => {
                let h = style::HEADER;
                write!(out, "{h}{header}{h:#}\n{rest}")
            }
            _ => out.write_all(text.as_bytes()),
        };
        crate::output::quiet_pipe(result.and_then(|()| out.flush()))
    }
}

/// `id`'s shortest prefix (at least its kind and [`ID_CHARS`] more) that
/// begins no other of `ids`; the whole id when none is shorter.
fn short_id<'a>(id: &'a str, ids: &[&str]) -> &'a str {
    let least = id.find('_').map_or(ID_CHARS, |i| i + 1 + ID_CHARS);
    let ends: Vec<usize> = id
        .char_indices()
        .map(|(i, _)| i)
        .skip(least)
        .chain([id.len()])
        .collect();
    ends.into_iter()
        .map(|end| &id[..end])
        .find(|prefix| {
            ids.iter()
                .all(|other| *other == id || !other.starts_with(prefix))
        })
        .unwrap_or(id)
}

/// `cell` cut to `width` display columns, its last one `…`.
fn cut(cell: &str, width: usize) -> String {
    let mut out = String::new();
    let mut used = 0;
    for c in cell.chars() {
        let w = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        if used + w + 1 > width {
            break;
        }
        out.push(c);
        used += w;
    }
    out.push('…');
    out
}

/// A cell's text: terminal-safe, one line, no tabs.
fn text(cell: &Cell, reader: Reader, now: i64) -> String {
    let raw = match (cell, reader) {
        (Cell::Text(s), _) | (Cell::Id(s), _) => s.clone(),
        (Cell::Time(None), _) => "-".to_owned(),
        (Cell::Time(Some(at)), Reader::Person) if *at > now => {
            format!("in {}", lapis_protocol::time::age(at - now))
        }
        (Cell::Time(Some(at)), Reader::Person) => {
            lapis_protocol::time::age(now.saturating_sub(*at))
        }
        (Cell::Time(Some(at)), Reader::Script) => lapis_protocol::time::format_ms(*at),
    };
    crate::terminal::safe(&raw)
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

fn widths<'a>(rows: impl Iterator<Item = &'a Vec<String>>) -> Vec<usize> {
    let mut widths = Vec::new();
    for row in rows {
        widths.resize(widths.len().max(row.len()), 0);
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.width());
        }
    }
    widths
}

/// A row padded to `widths` with two spaces between columns; the last
/// column is not padded (no trailing blanks).
fn aligned(row: &[String], widths: &[usize]) -> String {
    let mut line = String::new();
    for (i, cell) in row.iter().enumerate() {
        if i + 1 == row.len() {
            line.push_str(cell);
        } else {
            line.push_str(cell);
            line.push_str(&" ".repeat(widths[i] - cell.width() + 2));
        }
    }
    line.trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use unicode_width::UnicodeWidthStr;

    use super::{Cell, Reader, Table};

    fn sample() -> Table {
        let mut t = Table::new(&["ID", "STATE", "AGE"]);
        t.row(vec![
            "turn_a".into(),
            "running".into(),
            Cell::Time(Some(1_000)),
        ]);
        t.row(vec![
            "turn_bb".into(),
            "tab\there\nnewline".into(),
            Cell::Time(None),
        ]);
        t
    }

    #[test]
    fn a_person_gets_a_header_aligned_columns_and_ages() {
        let text = sample().render(Reader::Person, 1_000 + 300_000, None);
        assert_eq!(
            text,
            "ID       STATE             AGE\n\
             turn_a   running           5m\n\
             turn_bb  tab here newline  -\n"
        );
    }

    #[test]
    fn a_script_gets_tab_separated_rows_without_header_and_rfc3339_times() {
        let text = sample().render(Reader::Script, 999_999_999, None);
        assert_eq!(
            text,
            "turn_a\trunning\t1970-01-01T00:00:01.000Z\nturn_bb\ttab here newline\t-\n"
        );
    }

    #[test]
    fn agent_escapes_never_reach_a_cell() {
        let mut t = Table::new(&["TITLE"]);
        t.row(vec!["a\u{1b}]0;pwned\u{7}b".into()]);
        let text = t.render(Reader::Script, 0, None);
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}'),
            "{text:?}"
        );
    }

    #[test]
    fn wide_characters_are_aligned_by_display_width() {
        let mut t = Table::new(&["A", "B"]);
        t.row(vec!["日本".into(), "x".into()]);
        t.row(vec!["ab".into(), "y".into()]);
        let text = t.render(Reader::Person, 0, None);
        assert_eq!(text, "A     B\n日本  x\nab    y\n");
    }

    /// The 80-column render of `turns list`: two generated ids as their
    /// short prefixes (unique in their column), no line over 80 columns;
    /// `--wide` keeps them whole; a script gets them whole too.
    #[test]
    fn a_persons_table_fits_80_columns_with_short_ids_and_wide_keeps_them_whole() {
        let turn = |hex: &str| format!("turn_{hex}{}", "0".repeat(32 - hex.len()));
        let thread = format!("thr_{}", "ab".repeat(16));
        let table = || {
            let mut t = Table::new(&["ID", "THREAD", "STATE", "WORKSPACE", "CREATED"]);
            for (id, ws) in [
                (turn("1a2b3c4d5e"), "proj"),
                (
                    turn("1a2b3c4d9f"),
                    "a-workspace-with-a-rather-long-name-indeed",
                ),
                (turn("77"), "proj"),
            ] {
                t.row(vec![
                    Cell::Id(id),
                    Cell::Id(thread.clone()),
                    "submission_unknown".into(),
                    ws.into(),
                    Cell::Time(Some(1_000)),
                ]);
            }
            t
        };
        let text = table().render(Reader::Person, 1_000 + 300_000, Some(80));
        assert_eq!(
            text,
            "ID              THREAD        STATE               WORKSPACE              CREATED\n\
             turn_1a2b3c4d5  thr_abababab  submission_unknown  proj                   5m\n\
             turn_1a2b3c4d9  thr_abababab  submission_unknown  a-workspace-with-a-r…  5m\n\
             turn_77000000   thr_abababab  submission_unknown  proj                   5m\n"
        );
        assert!(text.lines().all(|l| l.width() <= 80), "{text}");
        let wide = table()
            .wide(true)
            .render(Reader::Person, 1_000 + 300_000, Some(80));
        assert!(
            wide.contains(&turn("1a2b3c4d5e")) && wide.contains(&thread),
            "{wide}"
        );
        assert!(
            wide.contains("a-workspace-with-a-rather-long-name-indeed"),
            "{wide}"
        );
        let piped = table().render(Reader::Script, 0, Some(80));
        assert!(piped.contains(&turn("77")) && piped.contains("rather-long-name-indeed"));
    }
}
