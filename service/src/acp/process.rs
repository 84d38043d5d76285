//! Launching an agent process and tearing its whole process group down.
//!
//! What must stay true: the agent sees only the environment its spec grants;
//! it runs in its own process group so that teardown reaches everything it
//! spawned; its stderr goes to the service log, bounded per line and in total,
//! and its last redacted lines to a [`StderrTail`];
//! and no process of the group survives [`AgentProcess::shutdown`].

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::BufReader;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use super::lines::{BoundedLines, LineError};
use super::registry::{AgentRecord, AgentRegistry};
use super::stderr_tail::StderrTail;
use lapis_protocol::OutcomeCode;
use lapis_protocol::config::{CommandLookup, ProviderError, ProviderSpec};

/// How long teardown waits at each step.
#[derive(Debug, Clone, Copy)]
pub struct TeardownLimits {
    /// After stdin is closed, how long the agent may take to exit by itself.
    pub exit_grace: Duration,
    /// After SIGTERM to the group, how long before SIGKILL.
    pub term_grace: Duration,
}

/// Bounds on what the agent's stderr may put into the service log.
#[derive(Debug, Clone, Copy)]
pub struct StderrLimits {
    /// Longest stderr line logged; longer lines are cut.
    pub(crate) line_bytes: usize,
    /// Total stderr bytes logged per agent; the rest is counted, not logged.
    pub(crate) total_bytes: usize,
    /// Whether stderr is logged at all: false for a metadata-only thread,
    /// whose agent's stderr is drained and discarded unread.
    pub(crate) keep: bool,
}

/// Why an agent could not be started.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The command did not resolve to an executable.
    #[error(transparent)]
    Command(#[from] ProviderError),
    /// The workspace directory is missing.
    #[error("workspace directory is not available")]
    Workspace,
    /// `spawn` failed.
    #[error("spawn failed: {0}")]
    Spawn(#[source] std::io::Error),
}

impl LaunchError {
    /// Short stable code for the turn's outcome.
    pub(crate) fn code(&self) -> OutcomeCode {
        match self {
            LaunchError::Command(ProviderError::CommandNotFound { .. }) => {
                OutcomeCode::CommandNotFound
            }
            LaunchError::Command(_) => OutcomeCode::CommandNotExecutable,
            LaunchError::Workspace => OutcomeCode::WorkspaceUnavailable,
            LaunchError::Spawn(_) => OutcomeCode::SpawnFailed,
        }
    }
}

/// A running agent: the process group leader plus the pipes the runner uses.
#[derive(Debug)]
pub(super) struct AgentProcess {
    /// The group leader; its pid is the group id.
    child: Child,
    /// Process group id (= leader pid).
    pgid: Pid,
    /// Provider name, for log lines.
    provider: String,
    /// Set by [`AgentProcess::shutdown`]; otherwise drop kills the group.
    shut_down: bool,
    /// Crash-cleanup record, removed (dropped) after the group is gone.
    _record: Option<AgentRecord>,
    /// The last redacted stderr lines (see `stderr_tail.rs`).
    tail: StderrTail,
    /// The task copying stderr; it ends at the pipe's end of file.
    stderr_task: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for AgentProcess {
    /// A runner task aborted mid-turn (controller shutdown) must not leave
    /// the agent's group behind: kill it outright.
    fn drop(&mut self) {
        if !self.shut_down {
            let _ = killpg(self.pgid, Signal::SIGKILL);
        }
    }
}

/// The agent's stdio as handed to the protocol layer.
#[derive(Debug)]
pub(super) struct AgentPipes {
    /// Requests and answers to the agent.
    pub(crate) stdin: ChildStdin,
    /// Bounded line reader over the agent's stdout.
    pub(crate) stdout: BoundedLines<BufReader<ChildStdout>>,
    /// Turns `true` once the group leader has exited (see `leader`).
    pub(crate) leader_exit: Option<tokio::sync::watch::Receiver<bool>>,
}

impl AgentProcess {
    /// The agent's stderr tail, and the task that fills it (await it, after
    /// the group is gone, to have every line).
    pub(super) fn stderr_watch(&mut self) -> (StderrTail, Option<tokio::task::JoinHandle<()>>) {
        (self.tail.clone(), self.stderr_task.take())
    }

    /// Starts the agent in `workspace` with an environment rebuilt from the
    /// spec (nothing inherited) in a new process group.
    pub(super) fn spawn(
        spec: &ProviderSpec,
        workspace: &Path,
        lookup: &CommandLookup,
        max_line: usize,
        stderr: StderrLimits,
        registry: Option<&AgentRegistry>,
    ) -> Result<(AgentProcess, AgentPipes), LaunchError> {
        let program = spec.resolve_command(lookup)?;
        if !workspace.is_dir() {
            return Err(LaunchError::Workspace);
        }
        let mut cmd = Command::new(&program);
        cmd.args(&spec.args)
            .env_clear()
            .envs(spec.agent_env(|k| lookup.env_value(k)))
            .current_dir(workspace)
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Last resort only: shutdown() is the real teardown.
            .kill_on_drop(true);
        let mut child = crate::children::spawn(crate::children::Purpose::Agent, &mut cmd)
            .map_err(LaunchError::Spawn)?;
        let pid = child.id().ok_or_else(|| {
            LaunchError::Spawn(std::io::Error::other(
                "agent exited before its pid was read",
            ))
        })?;
        let (Some(stdin), Some(stdout), Some(err)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(LaunchError::Spawn(std::io::Error::other(
                "agent stdio was not captured",
            )));
        };
        let provider = spec.name.clone();
        let record = registry.map(|r| r.record(pid));
        tracing::info!(provider = %provider, pid, "agent started");
        let tail = StderrTail::default();
        let stderr_task =
            tokio::spawn(log_stderr(provider.clone(), pid, err, stderr, tail.clone()));
        let pgid = Pid::from_raw(pid as i32);
        Ok((
            AgentProcess {
                child,
                pgid,
                provider,
                shut_down: false,
                _record: record,
                tail,
                stderr_task: Some(stderr_task),
            },
            AgentPipes {
                stdin,
                stdout: BoundedLines::new(BufReader::with_capacity(64 * 1024, stdout), max_line),
                leader_exit: super::leader::watch_exit(pid),
            },
        ))
    }

    /// Whether the group leader has exited (it is reaped if so).
    pub(super) fn exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    /// Ends the agent and everything in its group. The caller has already
    /// dropped stdin (that is the polite request to exit); this waits
    /// `exit_grace` for the leader, then TERMs the group, waits `term_grace`,
    /// KILLs it, and reaps the leader. Grandchildren are signalled even when
    /// the leader exited on its own.
    ///
    /// The leader is reaped *while* the group is watched: an exited but
    /// unreaped leader is a zombie that keeps its group "alive", which once
    /// made every lingering agent cost the full TERM grace and be reported
    /// as having ignored SIGTERM. What is logged (and returned) is what the
    /// leader's wait status says happened.
    pub(super) async fn shutdown(mut self, limits: TeardownLimits) -> Stopped {
        let mut status = tokio::time::timeout(limits.exit_grace, self.child.wait())
            .await
            .ok()
            .and_then(Result::ok);
        let mut escalated = Escalation::None;
        // The group id cannot be reused while any member lives, so signalling
        // it after the leader was reaped reaches only its own descendants.
        if group_alive(self.pgid) {
            let _ = killpg(self.pgid, Signal::SIGTERM);
            escalated = Escalation::Term;
            if !self.reap_until_gone(&mut status, limits.term_grace).await {
                tracing::warn!(provider = %self.provider, pgid = self.pgid.as_raw(), "agent group outlived SIGTERM; killing");
                let _ = killpg(self.pgid, Signal::SIGKILL);
                escalated = Escalation::Kill;
            }
        }
        if status.is_none() {
            status = self.child.wait().await.ok();
        }
        // Zombies of orphaned grandchildren are reaped by init; wait briefly
        // so callers observe an empty group.
        if !self
            .reap_until_gone(&mut status, Duration::from_secs(2))
            .await
        {
            let _ = killpg(self.pgid, Signal::SIGKILL);
            tracing::warn!(provider = %self.provider, pgid = self.pgid.as_raw(), "agent group still has members after SIGKILL");
        }
        self.shut_down = true;
        let stopped = Stopped::from_status(status, escalated);
        tracing::info!(provider = %self.provider, pid = self.pgid.as_raw(), how = stopped.as_str(), status = ?status, "agent stopped");
        stopped
    }

    /// Polls until the group is empty or `limit` passes, reaping the leader
    /// as soon as it exits; true when empty.
    async fn reap_until_gone(
        &mut self,
        status: &mut Option<std::process::ExitStatus>,
        limit: Duration,
    ) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        let mut step = Duration::from_millis(1);
        loop {
            if status.is_none()
                && let Ok(Some(s)) = self.child.try_wait()
            {
                *status = Some(s);
            }
            if !group_alive(self.pgid) {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(step).await;
            step = (step * 2).min(Duration::from_millis(25));
        }
    }
}

/// Which signals teardown had to send to the group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Escalation {
    None,
    Term,
    Kill,
}

/// What ended the agent, as its wait status tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// It exited by itself after stdin closed (any exit code).
    Exited,
    /// It died of the SIGTERM teardown sent.
    Terminated,
    /// The group needed SIGKILL (or the agent died of another signal).
    Killed,
    /// Its status could not be read.
    Unknown,
}

impl Stopped {
    fn from_status(status: Option<std::process::ExitStatus>, escalated: Escalation) -> Stopped {
        use std::os::unix::process::ExitStatusExt;
        let Some(status) = status else {
            return Stopped::Unknown;
        };
        if escalated == Escalation::Kill {
            return Stopped::Killed;
        }
        match status.signal() {
            None => Stopped::Exited,
            Some(sig) if sig == Signal::SIGTERM as i32 && escalated != Escalation::None => {
                Stopped::Terminated
            }
            Some(_) => Stopped::Killed,
        }
    }

    /// Stable name for the log.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Stopped::Exited => "exited",
            Stopped::Terminated => "sigterm",
            Stopped::Killed => "sigkill",
            Stopped::Unknown => "unknown",
        }
    }
}

/// Whether any process (zombies included) is in the group.
fn group_alive(pgid: Pid) -> bool {
    !matches!(killpg(pgid, None), Err(Errno::ESRCH))
}

/// Copies the agent's stderr into the log, line by line, within the limits,
/// each line redacted ([`crate::redact::StderrRedactor`]) before it is
/// logged; when `limits.keep` is false it is drained and nothing is logged.
async fn log_stderr(
    provider: String,
    pid: u32,
    stderr: tokio::process::ChildStderr,
    limits: StderrLimits,
    tail: StderrTail,
) {
    // Lines longer than the bound are cut by reading them through a reader
    // with a large bound and truncating; a line past even that ends logging.
    if !limits.keep {
        let mut sink = tokio::io::sink();
        let mut stderr = stderr;
        let _ = tokio::io::copy(&mut stderr, &mut sink).await;
        return;
    }
    let mut lines = BoundedLines::new(BufReader::new(stderr), limits.line_bytes.max(1) * 16);
    let mut redact = crate::redact::StderrRedactor::default();
    let mut logged = 0usize;
    let mut dropped = 0usize;
    loop {
        match lines.next_line().await {
            Ok(Some(line)) => {
                // Redacted whole, then cut: a cut never splits a secret.
                let text = String::from_utf8_lossy(&line);
                let Some(text) = redact.line(&text) else {
                    continue;
                };
                let mut end = text.len().min(limits.line_bytes);
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                let cut = &text[..end];
                tail.push(cut);
                if logged + cut.len() <= limits.total_bytes {
                    logged += cut.len();
                    tracing::info!(target: "lapis_service::agent_stderr", provider = %provider, pid, line = %cut);
                } else {
                    dropped += line.len();
                }
            }
            Ok(None) => break,
            Err(LineError::TooLong { .. }) | Err(LineError::Io(_)) => {
                // Keep draining so the agent never blocks on a full pipe.
                let mut sink = tokio::io::sink();
                let mut rest = lines.into_inner();
                let _ = tokio::io::copy(&mut rest, &mut sink).await;
                dropped += 1;
                break;
            }
        }
    }
    if dropped > 0 {
        tracing::warn!(provider = %provider, pid, dropped_bytes = dropped, "agent stderr beyond the log bound was discarded");
    }
}
