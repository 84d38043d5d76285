//! A worktree's `setup` or `teardown` command (config `worktrees`).
//!
//! What must stay true: argv is the configured `args` alone; the
//! environment holds only the `envAllowlist` names (from the controller's
//! environment) and `LAPIS_WORKSPACE_ID`, `LAPIS_WORKTREE`,
//! `LAPIS_REPOSITORY`; the command runs in the worktree in its own process
//! group, which is killed past the timeout; each output line goes to the
//! service log redacted and bounded, never to a client.

use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use lapis_protocol::config::HookCommand;
use tokio::io::{AsyncBufReadExt, BufReader};

/// Log lines kept per run (the rest are counted).
const MAX_LOGGED_LINES: usize = 200;

/// Why a hook failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HookFailure {
    /// It did not start.
    #[error("the {which} command did not start: {error}")]
    Start {
        /// `setup` or `teardown`.
        which: &'static str,
        /// Why.
        error: std::io::Error,
    },
    /// It exited unsuccessfully.
    #[error("the {which} command failed ({status}); its output is in the service log")]
    Failed {
        /// `setup` or `teardown`.
        which: &'static str,
        /// Its exit status.
        status: String,
    },
    /// It outlived its timeout (its process group was killed).
    #[error(
        "the {which} command did not finish within {seconds} s and was killed; its output is in the service log"
    )]
    Timeout {
        /// `setup` or `teardown`.
        which: &'static str,
        /// The timeout.
        seconds: u64,
    },
}

/// What the hook is told about the worktree.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HookSubject<'a> {
    /// The workspace id.
    pub(crate) workspace: &'a str,
    /// The worktree (the command's working directory).
    pub(crate) worktree: &'a Path,
    /// The repository it was made of.
    pub(crate) repository: &'a Path,
}

/// Runs `hook` (`which` is `setup` or `teardown`) for `subject`.
pub(crate) async fn run(
    which: &'static str,
    hook: &HookCommand,
    subject: HookSubject<'_>,
) -> Result<(), HookFailure> {
    let mut cmd = tokio::process::Command::new(&hook.command);
    cmd.args(&hook.args)
        .current_dir(subject.worktree)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for name in &hook.env_allowlist {
        if let Some(value) = std::env::var_os(name) {
            cmd.env(name, value);
        }
    }
    cmd.env("LAPIS_WORKSPACE_ID", subject.workspace)
        .env("LAPIS_WORKTREE", subject.worktree)
        .env("LAPIS_REPOSITORY", subject.repository);
    // Its own process group, so a timeout kills what it started too.
    cmd.as_std_mut().process_group(0);
    let mut child = crate::children::spawn(crate::children::Purpose::Hook, &mut cmd)
        .map_err(|error| HookFailure::Start { which, error })?;
    let pid = child.id();
    let workspace = subject.workspace.to_owned();
    let log = |stream: &'static str,
               reader: Option<Box<dyn tokio::io::AsyncRead + Unpin + Send>>| {
        let workspace = workspace.clone();
        async move {
            let Some(reader) = reader else { return };
            let mut lines = BufReader::new(reader).lines();
            let mut n = 0usize;
            while let Ok(Some(line)) = lines.next_line().await {
                n += 1;
                if n <= MAX_LOGGED_LINES {
                    let (text, _) = crate::redact::redactor().redact_str(&line);
                    tracing::info!(workspace = %workspace, hook = which, stream, line = %text, "worktree hook output");
                }
            }
            if n > MAX_LOGGED_LINES {
                tracing::info!(workspace = %workspace, hook = which, stream, lines = n, "worktree hook output cut");
            }
        }
    };
    let out = log(
        "stdout",
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Unpin + Send>),
    );
    let err = log(
        "stderr",
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Unpin + Send>),
    );
    let seconds = hook.timeout_seconds();
    let work = async {
        let (_, _, status) = tokio::join!(out, err, child.wait());
        status
    };
    match tokio::time::timeout(Duration::from_secs(seconds), work).await {
        Ok(Ok(status)) if status.success() => {
            tracing::info!(workspace = %subject.workspace, hook = which, "worktree hook finished");
            Ok(())
        }
        Ok(Ok(status)) => Err(HookFailure::Failed {
            which,
            status: status.to_string(),
        }),
        Ok(Err(error)) => Err(HookFailure::Start { which, error }),
        Err(_) => {
            if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            Err(HookFailure::Timeout { which, seconds })
        }
    }
}
