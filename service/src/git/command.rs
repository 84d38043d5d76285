//! One bounded `git` invocation.
//!
//! What must stay true: a command that outlives its deadline is killed
//! (the child is dropped with `kill_on_drop`), so a snapshot never holds a
//! turn longer than its bound; the controller's own `GIT_*` environment
//! never reaches the child (a `GIT_DIR` or `GIT_INDEX_FILE` inherited from
//! whoever started `serve` would point git at the user's files); the
//! user's configuration (ignore rules, `core.excludesFile`) still applies.

use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;

/// Why a git command gave no answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GitError {
    /// No `git` executable on `PATH`.
    #[error("git is not installed")]
    Missing,
    /// The path is not inside a git work tree.
    #[error("not a git repository")]
    NotRepository,
    /// The command did not finish in time (it was killed).
    #[error("git did not finish within {0:?}")]
    Timeout(Duration),
    /// The command failed.
    #[error("git {args} failed ({status}): {stderr}")]
    Failed {
        /// The subcommand and its arguments.
        args: String,
        /// Its exit status.
        status: String,
        /// The end of its standard error.
        stderr: String,
    },
    /// Starting it or reading its output failed.
    #[error("running git: {0}")]
    Io(#[from] std::io::Error),
}

/// How much of a failing command's stderr an error keeps.
const STDERR_TAIL: usize = 512;

/// A git command run in `dir` with `env` set (and every inherited `GIT_*`
/// variable removed); its stdout when it exits 0 within `timeout`.
pub(crate) async fn run<A: AsRef<OsStr>>(
    dir: &Path,
    args: &[A],
    env: &[(&str, OsString)],
    timeout: Duration,
) -> Result<Vec<u8>, GitError> {
    let mut cmd = tokio::process::Command::new("git");
    cmd.arg("-C").arg(dir);
    // Never the user's fsmonitor hook, an automatic gc or a shared split
    // index written into their repository; never a prompt.
    cmd.args([
        "-c",
        "core.fsmonitor=false",
        "-c",
        "gc.auto=0",
        "-c",
        "core.splitIndex=false",
    ]);
    cmd.args(args);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("GIT_") {
            cmd.env_remove(key);
        }
    }
    cmd.env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_OPTIONAL_LOCKS", "0");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = match crate::children::spawn(crate::children::Purpose::Git, &mut cmd) {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(GitError::Missing),
        Err(e) => return Err(e.into()),
    };
    let (mut out, mut err) = (child.stdout.take(), child.stderr.take());
    let work = async {
        let (mut o, mut e) = (Vec::new(), Vec::new());
        let read_out = async {
            if let Some(s) = out.as_mut() {
                s.read_to_end(&mut o).await?;
            }
            Ok::<_, std::io::Error>(())
        };
        let read_err = async {
            if let Some(s) = err.as_mut() {
                s.read_to_end(&mut e).await?;
            }
            Ok::<_, std::io::Error>(())
        };
        let (a, b) = tokio::join!(read_out, read_err);
        a?;
        b?;
        let status = child.wait().await?;
        Ok::<_, std::io::Error>((status, o, e))
    };
    let (status, stdout, stderr) = match tokio::time::timeout(timeout, work).await {
        Ok(r) => r?,
        // Dropping `work` drops the child, which kills it.
        Err(_) => return Err(GitError::Timeout(timeout)),
    };
    if status.success() {
        return Ok(stdout);
    }
    let stderr = String::from_utf8_lossy(&stderr);
    if stderr.contains("not a git repository") {
        return Err(GitError::NotRepository);
    }
    let tail: String = {
        let s = stderr.trim();
        let start = s.len().saturating_sub(STDERR_TAIL);
        let start = (start..s.len())
            .find(|&i| s.is_char_boundary(i))
            .unwrap_or(s.len());
        s[start..].to_owned()
    };
    Err(GitError::Failed {
        args: args
            .first()
            .map(|a| a.as_ref().to_string_lossy().into_owned())
            .unwrap_or_default(),
        status: status.to_string(),
        stderr: tail,
    })
}

/// `out` as one trimmed UTF-8 line.
pub(crate) fn line(out: &[u8]) -> String {
    String::from_utf8_lossy(out).trim().to_owned()
}
