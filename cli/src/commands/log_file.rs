//! The size-capped log of a controller `serve --background` started: its
//! `serve.log` never grows past [`MAX_BYTES`] by more than one line, and
//! the last [`KEEP`] full ones stay beside it as `serve.log.1` (newest) …
//!
//! Rotation is copy-then-truncate, as logrotate's `copytruncate`: the
//! process's stdout and stderr are the same file (the parent opened it in
//! append mode, so a panic or an early error lands there too), and an
//! append-mode descriptor writes at the new end after a truncate, so
//! nothing has to be reopened or re-pointed. A small writer rather than a
//! crate: tracing-appender rotates by time only, and a size-rotating
//! crate would be a new dependency for what this one type does.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Largest `serve.log` before it is rotated.
pub(super) const MAX_BYTES: u64 = 10 * 1024 * 1024;

/// Rotated logs kept (`serve.log.1` … `serve.log.KEEP`).
pub(super) const KEEP: usize = 2;

/// A log file that rotates itself at a size (see the module docs).
#[derive(Debug)]
pub(super) struct SizeCappedLog {
    /// The live log (`serve.log`).
    path: PathBuf,
    /// Its append-mode handle.
    file: File,
    /// Its length as last seen (refreshed at each rotation check).
    len: u64,
    /// Rotate before a write would pass this.
    max: u64,
    /// Rotated copies kept.
    keep: usize,
}

impl SizeCappedLog {
    /// Opens (or creates, 0600) `path` for appending.
    pub(super) fn open(path: &Path, max: u64, keep: usize) -> io::Result<SizeCappedLog> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)?;
        let len = file.metadata()?.len();
        Ok(SizeCappedLog {
            path: path.to_owned(),
            file,
            len,
            max,
            keep,
        })
    }

    fn rotated(&self, n: usize) -> PathBuf {
        let mut name = self.path.clone().into_os_string();
        name.push(format!(".{n}"));
        PathBuf::from(name)
    }

    /// Shifts `.1` … to `.2` …, drops the oldest, copies the live log to
    /// `.1` (its mode with it) and truncates the live one.
    fn rotate(&mut self) -> io::Result<()> {
        if self.keep == 0 {
            return self.file.set_len(0);
        }
        for n in (1..self.keep).rev() {
            match std::fs::rename(self.rotated(n), self.rotated(n + 1)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        std::fs::copy(&self.path, self.rotated(1))?;
        self.file.set_len(0)
    }
}

impl Write for SizeCappedLog {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // Other writers (stderr) append to the same file: read its length.
        self.len = self.file.metadata().map_or(self.len, |m| m.len());
        if self.len > 0 && self.len + buf.len() as u64 > self.max {
            // A log that cannot rotate still logs: the cap is best effort.
            if self.rotate().is_ok() {
                self.len = 0;
            }
        }
        let n = self.file.write(buf)?;
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;

    use super::SizeCappedLog;

    #[test]
    fn the_log_rotates_at_its_cap_and_keeps_the_newest_copies() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("serve.log");
        let mut log = SizeCappedLog::open(&path, 100, 2).unwrap();
        for i in 0..30 {
            writeln!(log, "line {i:02} of the controller's log").unwrap();
        }
        let live = std::fs::read_to_string(&path).unwrap();
        assert!(live.len() <= 100, "{live}");
        assert!(
            live.ends_with("line 29 of the controller's log\n"),
            "{live}"
        );
        let one = std::fs::read_to_string(dir.path().join("serve.log.1")).unwrap();
        let two = std::fs::read_to_string(dir.path().join("serve.log.2")).unwrap();
        assert!(one.len() <= 100 && two.len() <= 100);
        // Newest first, no line lost between the live log and `.1`.
        let last_of_one = one.lines().last().unwrap();
        let first_of_live = live.lines().next().unwrap();
        let n = |l: &str| l[5..7].parse::<u32>().unwrap();
        assert_eq!(n(last_of_one) + 1, n(first_of_live));
        assert!(n(two.lines().last().unwrap()) < n(one.lines().next().unwrap()));
        assert!(!dir.path().join("serve.log.3").exists());
        for p in ["serve.log", "serve.log.1", "serve.log.2"] {
            let mode = std::fs::metadata(dir.path().join(p))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{p}");
        }
    }
}
