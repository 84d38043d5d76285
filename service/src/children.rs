//! Every child process the controller starts, counted by what it is for.
//!
//! The counts are guards, not metrics for their own sake: a warm turn in a
//! plain directory starts no process at all (its agent is already running),
//! and a test reads these counts (`status`'s `work.processes`) around a run
//! of turns to prove it, at turn 10 as at turn 1,000.
//!
//! What must stay true: nothing in this crate starts a process except
//! through [`spawn`] or [`spawn_std`] (`service/clippy.toml` disallows
//! `Command::spawn`, `output` and `status` elsewhere), so a process the
//! counts do not show cannot exist.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

use lapis_protocol::params::ProcessCounts;

/// What a child process is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// An ACP agent (a turn's, a probe's or a smoke turn's).
    Agent,
    /// A git command (evidence snapshots, worktrees).
    Git,
    /// A configured notification command.
    Notify,
    /// A configured worktree hook.
    Hook,
}

static STARTED: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];

#[cfg(test)]
thread_local! {
    /// The git processes this thread started (unit tests run in parallel
    /// in one process, so only a thread's own count is exact for a test;
    /// a current-thread runtime starts its children on the test's thread).
    static GIT_HERE: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The git processes started on this thread so far (see [`GIT_HERE`]).
#[cfg(test)]
pub(crate) fn git_started_here() -> u64 {
    GIT_HERE.with(std::cell::Cell::get)
}

tokio::task_local! {
    /// git processes started by the task running inside [`tally_git`].
    static GIT_IN_TASK: std::cell::Cell<u64>;
}

/// Runs `fut` and counts the git processes it starts in its own task (an
/// evidence snapshot's cost; a process started from another task or a
/// blocking thread is counted only in the totals).
pub(crate) async fn tally_git<T>(fut: impl std::future::Future<Output = T>) -> (T, u64) {
    GIT_IN_TASK
        .scope(std::cell::Cell::new(0), async move {
            let out = fut.await;
            (out, GIT_IN_TASK.with(std::cell::Cell::get))
        })
        .await
}

fn counted(purpose: Purpose) {
    if purpose == Purpose::Git {
        #[cfg(test)]
        GIT_HERE.with(|n| n.set(n.get() + 1));
        let _ = GIT_IN_TASK.try_with(|n| n.set(n.get() + 1));
    }
    let slot = match purpose {
        Purpose::Agent => 0,
        Purpose::Git => 1,
        Purpose::Notify => 2,
        Purpose::Hook => 3,
    };
    STARTED[slot].fetch_add(1, Ordering::Relaxed);
}

/// Starts `cmd` (tokio), counted as `purpose` when it started.
#[allow(clippy::disallowed_methods)] // the one place that may
pub(crate) fn spawn(
    purpose: Purpose,
    cmd: &mut tokio::process::Command,
) -> io::Result<tokio::process::Child> {
    let child = cmd.spawn()?;
    counted(purpose);
    Ok(child)
}

/// Starts `cmd` (std), counted as `purpose` when it started.
#[allow(clippy::disallowed_methods)] // the one place that may
pub(crate) fn spawn_std(
    purpose: Purpose,
    cmd: &mut std::process::Command,
) -> io::Result<std::process::Child> {
    let child = cmd.spawn()?;
    counted(purpose);
    Ok(child)
}

/// The processes this process has started so far, by purpose.
pub(crate) fn counts() -> ProcessCounts {
    let n = |i: usize| STARTED[i].load(Ordering::Relaxed);
    ProcessCounts {
        agents: n(0),
        git: n(1),
        notify: n(2),
        hooks: n(3),
    }
}
