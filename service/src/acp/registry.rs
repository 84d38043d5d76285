//! A directory of running agents' process groups, so that agents orphaned by
//! a controller crash (SIGKILL, OOM, power loss of the parent only) are
//! killed when the controller starts again instead of running on unseen.
//!
//! One file per agent, named by its process group id and holding the group
//! leader's start time (from `/proc/<pid>/stat`). At reaping, a group is
//! killed only when that identity still holds: the leader is alive with the
//! recorded start time, or the leader is gone (a process group id is never
//! reused while any member lives, so a non-empty group is still ours). A
//! leader pid that now belongs to a different process is left alone.
//!
//! Only the registry's own records are ever read or removed: regular files
//! (never links) whose name is a canonical pid and whose content is a
//! canonical start time. Anything else in the directory stays, and a
//! directory that is a link is neither swept nor written to.

use std::path::{Path, PathBuf};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// The records directory's name inside the controller home.
pub(crate) const AGENTS_DIR: &str = "agents";

/// Where agent records live (the controller home's `agents/`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentRegistry {
    /// The directory (mode 0700).
    dir: PathBuf,
}

/// Removes the record when the agent's group has been torn down.
#[derive(Debug)]
pub struct AgentRecord {
    /// The record file; `None` when recording failed (best effort).
    path: Option<PathBuf>,
}

impl Drop for AgentRecord {
    fn drop(&mut self) {
        if let Some(p) = &self.path {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// A leader's start time in clock ticks since boot (`/proc/<pid>/stat`
/// field 22), which tells a pid's owner apart from a later reuse.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    rest.split_whitespace().nth(19)?.parse().ok()
}

impl AgentRegistry {
    /// A registry in `dir` (created 0700 on first use).
    pub fn new(dir: impl Into<PathBuf>) -> AgentRegistry {
        AgentRegistry { dir: dir.into() }
    }

    /// The registry of the controller home `home` (its `agents/`).
    pub(crate) fn of_home(home: &Path) -> AgentRegistry {
        AgentRegistry::new(home.join(AGENTS_DIR))
    }

    /// The directory.
    #[cfg(any(test, feature = "test-support"))]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// How many agents are recorded as running now (one record per live
    /// process group; a record goes when its group is torn down).
    pub(crate) fn live(&self) -> usize {
        self.records().len()
    }

    /// The records in the directory: regular files (never links) whose
    /// name is a canonical pid and whose content is a canonical start time.
    /// Anything else is not ours and is never touched. A linked directory
    /// yields nothing.
    fn records(&self) -> Vec<(PathBuf, u32, u64)> {
        match std::fs::symlink_metadata(&self.dir) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                tracing::warn!(dir = %self.dir.display(), "agent records directory is not a directory (a link?); left alone");
                return Vec::new();
            }
            Err(_) => return Vec::new(),
        }
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|entry| {
                if !entry.file_type().ok()?.is_file() {
                    return None;
                }
                let pgid = parse_canonical::<u32>(entry.file_name().to_str()?)?;
                let recorded = parse_canonical::<u64>(read_small(&entry.path())?.trim_end())?;
                Some((entry.path(), pgid, recorded))
            })
            .collect()
    }

    /// Records a freshly spawned group. Best effort: a failure is logged and
    /// only loses crash cleanup for this agent. A linked directory is
    /// refused (records are only ever written into the home's own
    /// `agents/`).
    pub fn record(&self, pgid: u32) -> AgentRecord {
        let attempt = || -> std::io::Result<PathBuf> {
            use std::io::Write;
            use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&self.dir)?;
            if !std::fs::symlink_metadata(&self.dir)?.is_dir() {
                return Err(std::io::Error::other("agents directory is a link"));
            }
            let start = start_time(pgid).ok_or_else(|| std::io::Error::other("no start time"))?;
            let path = self.dir.join(pgid.to_string());
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .custom_flags(nix::libc::O_NOFOLLOW)
                .open(&path)?;
            file.write_all(start.to_string().as_bytes())?;
            Ok(path)
        };
        match attempt() {
            Ok(path) => AgentRecord { path: Some(path) },
            Err(err) => {
                tracing::warn!(pgid, error = %err, "could not record agent process group");
                AgentRecord { path: None }
            }
        }
    }

    /// Kills every recorded group whose identity still holds and removes
    /// its record. Returns the group ids signalled. Only the registry's own
    /// records are read or removed (see `records`); other files stay. Call
    /// once at startup, before any agent is launched.
    pub fn reap_orphans(&self) -> Vec<u32> {
        let mut killed = Vec::new();
        for (path, pgid, recorded) in self.records() {
            let _ = std::fs::remove_file(&path);
            if pgid <= 1 {
                continue;
            }
            let ours = match start_time(pgid) {
                Some(now) => now == recorded,
                None => true, // leader gone: only its own group can hold this id
            };
            if ours && killpg(Pid::from_raw(pgid as i32), Signal::SIGKILL).is_ok() {
                tracing::warn!(
                    pgid,
                    "killed an agent process group orphaned by a previous controller"
                );
                killed.push(pgid);
            }
        }
        killed
    }
}

/// `text` as a number only when it is the number's own spelling (no sign,
/// no leading zero, no space): `"0012"` or `"+5"` name no record.
fn parse_canonical<T: std::str::FromStr + ToString>(text: &str) -> Option<T> {
    let value = text.parse::<T>().ok()?;
    (value.to_string() == text).then_some(value)
}

/// A record's content: at most 32 bytes of UTF-8, read without following
/// a link; anything longer or unreadable is not a record.
fn read_small(path: &Path) -> Option<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let mut text = String::new();
    file.take(33).read_to_string(&mut text).ok()?;
    (text.len() <= 32).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sweep_removes_only_its_own_records_and_never_follows_links() {
        let dir = tempfile::tempdir().unwrap();
        let agents = dir.path().join("agents");
        std::fs::create_dir(&agents).unwrap();
        // Not records: foreign names, foreign content, non-canonical spellings.
        let keep = [
            ("notes.md", "mine"),
            ("123", "hello"),
            ("0123", "5"),
            ("+77", "5"),
            ("88", " 5"),
        ];
        for (name, text) in keep {
            std::fs::write(agents.join(name), text).unwrap();
        }
        // A record of a group that cannot exist (above the kernel's PID_MAX_LIMIT, 2^22).
        std::fs::write(agents.join("4294000"), "12345").unwrap();
        // A link named like a record, pointing outside.
        let outside = dir.path().join("outside");
        std::fs::write(&outside, "12345").unwrap();
        std::os::unix::fs::symlink(&outside, agents.join("4294001")).unwrap();
        let registry = AgentRegistry::new(&agents);
        assert_eq!(registry.live(), 1);
        registry.reap_orphans();
        for (name, text) in keep {
            assert_eq!(std::fs::read_to_string(agents.join(name)).unwrap(), text);
        }
        assert!(!agents.join("4294000").exists());
        assert!(agents.join("4294001").symlink_metadata().is_ok());
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "12345");
    }

    #[test]
    fn a_linked_records_directory_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("project");
        std::fs::create_dir(&project).unwrap();
        std::fs::write(project.join("4294000"), "12345").unwrap();
        let agents = dir.path().join("agents");
        std::os::unix::fs::symlink(&project, &agents).unwrap();
        let registry = AgentRegistry::new(&agents);
        assert_eq!(registry.live(), 0);
        registry.reap_orphans();
        assert!(project.join("4294000").exists());
        drop(registry.record(std::process::id()));
        assert!(!project.join(std::process::id().to_string()).exists());
    }
}
