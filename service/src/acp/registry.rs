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

use std::path::{Path, PathBuf};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

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
        AgentRegistry::new(home.join("agents"))
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// How many agents are recorded as running now (one record per live
    /// process group; a record goes when its group is torn down).
    pub(crate) fn live(&self) -> usize {
        std::fs::read_dir(&self.dir)
            .map(|entries| {
                entries
                    .flatten()
                    .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
                    .count()
            })
            .unwrap_or(0)
    }

    /// Records a freshly spawned group. Best effort: a failure is logged and
    /// only loses crash cleanup for this agent.
    pub fn record(&self, pgid: u32) -> AgentRecord {
        let attempt = || -> std::io::Result<PathBuf> {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&self.dir)?;
            let start = start_time(pgid).ok_or_else(|| std::io::Error::other("no start time"))?;
            let path = self.dir.join(pgid.to_string());
            std::fs::write(&path, start.to_string())?;
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
    /// all records. Returns the group ids signalled. Call once at startup,
    /// before any agent is launched.
    pub fn reap_orphans(&self) -> Vec<u32> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut killed = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            let pgid = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok());
            let recorded = std::fs::read_to_string(&path)
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok());
            let _ = std::fs::remove_file(&path);
            let (Some(pgid), Some(recorded)) = (pgid, recorded) else {
                continue;
            };
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
