//! `logs [--follow] [-n N]`: the service log. A controller started by
//! `serve --background` (its pid file is in the controller home) logs to
//! `serve.log` beside it, tailed here; otherwise under systemd it is the
//! user journal of the unit (`journalctl` prints it, with its own paging and
//! follow), under launchd the plist's log file, tailed here. Where none
//! exists the command says where the log goes instead and exits 3.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::anyhow;
use lapis_installer::inspect::{self, LogSource};
use lapis_installer::unit::serve_command_line;

use crate::args::{GlobalArgs, LogsArgs};
use crate::exit::{CliError, CliResult};

/// How often a followed log file is checked for new lines.
const FOLLOW_POLL: Duration = Duration::from_millis(250);

pub(super) fn run(global: &GlobalArgs, args: LogsArgs) -> CliResult {
    if let Some(log) = background_log(global) {
        return tail(&log, args.lines, args.follow)
            .map_err(|e| CliError::failure("io", anyhow!(e).context(log.display().to_string())));
    }
    let paths = super::paths::resolve(global, None, None)?;
    let by_hand = serve_command_line(&paths);
    match inspect::log_source(&paths, args.lines, args.follow) {
        Ok(LogSource::Journal(journal_args)) => journal(&journal_args, &by_hand),
        Ok(LogSource::File(path)) => tail(&path, args.lines, args.follow)
            .map_err(|e| CliError::failure("io", anyhow!(e).context(path.display().to_string()))),
        Err(e) => Err(CliError::unavailable(
            "no_service_log",
            anyhow!(
                "{e}; start the service with `lapis-ai-controller install`, or run `{by_hand}` \
                 and read its stderr"
            ),
        )),
    }
}

/// The log of a controller `serve --background` started: `serve.log` in
/// the controller home, while the home holds the pid file that start
/// wrote (`stop` removes it; one left by a crash still names the log that
/// says why).
fn background_log(global: &GlobalArgs) -> Option<std::path::PathBuf> {
    use lapis_protocol::home::{LOG_FILE, PID_FILE};
    let home = super::connect::local_client_target(global).ok()?.home;
    let log = home.join(LOG_FILE);
    (home.join(PID_FILE).is_file() && log.is_file()).then_some(log)
}

/// Runs `journalctl` on the inherited stdout. A reader that closed the pipe
/// (`logs | head`) ends it with SIGPIPE, which is success.
fn journal(args: &[String], by_hand: &str) -> CliResult {
    let status = Command::new("journalctl")
        .args(args)
        .stdin(Stdio::null())
        .status();
    let status = match status {
        Ok(s) => s,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(CliError::unavailable(
                "no_service_log",
                anyhow!(
                    "no service log: `journalctl` is not installed, so there is no user journal; \
                     run `{by_hand}` by hand and read its stderr"
                ),
            ));
        }
        Err(e) => {
            return Err(CliError::unavailable(
                "no_service_log",
                anyhow!("cannot run `journalctl`: {e}"),
            ));
        }
    };
    use std::os::unix::process::ExitStatusExt;
    if status.success() || status.signal() == Some(nix::sys::signal::Signal::SIGPIPE as i32) {
        return Ok(());
    }
    Err(CliError::unavailable(
        "journal_unavailable",
        anyhow!("`journalctl {}` failed ({status})", args.join(" ")),
    ))
}

/// Prints the last `lines` lines of `path`, then, with `follow`, whatever is
/// appended (starting over when the file is truncated or replaced by a
/// shorter one). A closed stdout ends it quietly.
fn tail(path: &Path, lines: usize, follow: bool) -> io::Result<()> {
    let mut file = File::open(path)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    let mut pos = bytes.len() as u64;
    let mut out = io::stdout().lock();
    if quiet(
        out.write_all(last_lines(&bytes, lines))
            .and_then(|()| out.flush()),
    )? {
        return Ok(());
    }
    if !follow {
        return Ok(());
    }
    loop {
        std::thread::sleep(FOLLOW_POLL);
        let len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        if len < pos {
            file = File::open(path)?;
            pos = 0;
        }
        file.seek(SeekFrom::Start(pos))?;
        let mut new = Vec::new();
        file.read_to_end(&mut new)?;
        pos += new.len() as u64;
        if quiet(out.write_all(&new).and_then(|()| out.flush()))? {
            return Ok(());
        }
    }
}

/// `Ok(true)` when the reader went away (broken pipe).
fn quiet(result: io::Result<()>) -> io::Result<bool> {
    match result {
        Ok(()) => Ok(false),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(true),
        Err(e) => Err(e),
    }
}

/// The tail of `bytes` holding its last `n` lines (a final line without a
/// newline counts as a line).
fn last_lines(bytes: &[u8], n: usize) -> &[u8] {
    if n == 0 {
        return &[];
    }
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let mut seen = 0;
    for (i, b) in body.iter().enumerate().rev() {
        if *b == b'\n' {
            seen += 1;
            if seen == n {
                return &bytes[i + 1..];
            }
        }
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::last_lines;

    #[test]
    fn last_lines_counts_from_the_end() {
        assert_eq!(last_lines(b"a\nb\nc\n", 2), b"b\nc\n");
        assert_eq!(last_lines(b"a\nb\nc", 2), b"b\nc");
        assert_eq!(last_lines(b"a\nb\nc\n", 5), b"a\nb\nc\n");
        assert_eq!(last_lines(b"a\nb\n", 0), b"");
        assert_eq!(last_lines(b"", 3), b"");
        assert_eq!(last_lines(b"\n\n\n", 1), b"\n");
    }
}
