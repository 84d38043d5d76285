//! Writing to stdout. A closed pipe (`… | head`) is not an error: the reader
//! has what it wanted, so output stops quietly and the command still succeeds.

use std::io::{self, Write};

use serde::Serialize;

/// Writes `text` and a newline to stdout.
pub fn line(text: impl AsRef<str>) -> io::Result<()> {
    let mut out = io::stdout().lock();
    quiet_pipe(writeln!(out, "{}", text.as_ref()).and_then(|()| out.flush()))
}

/// Writes one pretty JSON document and a newline to stdout.
pub fn json<T: Serialize + ?Sized>(value: &T) -> io::Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(io::Error::other)?;
    line(text)
}

fn quiet_pipe(result: io::Result<()>) -> io::Result<()> {
    match result {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}
