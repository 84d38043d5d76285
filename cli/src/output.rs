//! Writing to stdout. A closed pipe (`… | head`) is not an error: the reader
//! has what it wanted, so output stops quietly and the command still succeeds.

use std::io::{self, Write};

use serde::Serialize;

/// Writes `text` and a newline to stdout.
pub(crate) fn line(text: impl AsRef<str>) -> io::Result<()> {
    let mut out = io::stdout().lock();
    quiet_pipe(writeln!(out, "{}", text.as_ref()).and_then(|()| out.flush()))
}

/// Writes one pretty JSON document and a newline to stdout.
pub(crate) fn json<T: Serialize + ?Sized>(value: &T) -> io::Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(io::Error::other)?;
    line(text)
}

pub(crate) fn quiet_pipe(result: io::Result<()>) -> io::Result<()> {
    match result {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// Whether stdout is a pipe whose reader has gone (`… | head` exited).
/// Follow modes poll this while idle, so they end at once even when no
/// new output would reveal the closed pipe.
pub(crate) fn stdout_closed() -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let stdout = io::stdout();
    let mut fds = [PollFd::new(stdout.as_fd(), PollFlags::empty())];
    match poll(&mut fds, PollTimeout::ZERO) {
        Ok(n) if n > 0 => fds[0]
            .revents()
            .is_some_and(|r| r.intersects(PollFlags::POLLERR | PollFlags::POLLHUP)),
        _ => false,
    }
}
