//! The smoke test: before a snapshot is activated, its own binary must run
//! and say it is the build its manifest claims.
//!
//! The binary runs as `version --json` with an empty environment except a
//! throw-away `HOME` and a minimal `PATH`, so nothing from the installing
//! shell (tokens, config overrides) can make it pass or leak into it, and
//! with a deadline after which it is killed. Later work extends this one
//! function (for example to run one echo turn); callers only see pass/fail.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lapis_release::BuildIdentity;
use thiserror::Error;

/// Default deadline for the smoke test.
pub const DEFAULT_SMOKE_TIMEOUT: Duration = Duration::from_secs(10);
/// At most this much stderr is quoted in an error.
const STDERR_QUOTE: usize = 400;

/// Why the staged binary failed its smoke test.
#[derive(Debug, Error)]
pub enum SmokeError {
    /// It could not be started at all.
    #[error("smoke test could not start {bin}: {source}")]
    Spawn {
        /// The binary.
        bin: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It did not finish in time and was killed.
    #[error("smoke test timed out after {0:?}; the binary was killed")]
    Timeout(Duration),
    /// It exited unsuccessfully.
    #[error("smoke test `version --json` exited with {status}: {stderr}")]
    Failed {
        /// Exit status as text.
        status: String,
        /// The start of its stderr.
        stderr: String,
    },
    /// Its output was not the expected JSON.
    #[error("smoke test output is not a version document: {0}")]
    BadOutput(String),
    /// It reported another build than the manifest.
    #[error("smoke test reported build {found}, but the manifest says {expected}")]
    WrongBuild {
        /// From the manifest.
        expected: String,
        /// From the binary.
        found: String,
    },
}

/// Runs `bin version --json` in a clean environment with `timeout` and
/// checks that it reports `expected`. Returns how long it took.
pub fn smoke_test(
    bin: &Path,
    expected: &BuildIdentity,
    timeout: Duration,
) -> Result<Duration, SmokeError> {
    let started = Instant::now();
    let spawn_err = |source| SmokeError::Spawn {
        bin: bin.display().to_string(),
        source,
    };
    let home = tempfile::Builder::new()
        .prefix("lapis-smoke-")
        .tempdir()
        .map_err(spawn_err)?;
    let mut command = Command::new(bin);
    command
        .args(["version", "--json"])
        .env_clear()
        .env("HOME", home.path())
        .env("PATH", "/usr/bin:/bin")
        .current_dir(home.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // A binary that was just written can be "busy" for a moment when another
    // thread of this process forked while its write descriptor was open; the
    // child closes it at exec, so a short retry is enough.
    let mut attempt = 0;
    let mut child = loop {
        match command.spawn() {
            Ok(child) => break child,
            Err(e) if e.raw_os_error() == Some(nix::libc::ETXTBSY) && attempt < 10 => {
                attempt += 1;
                std::thread::sleep(Duration::from_millis(5 * attempt));
            }
            Err(e) => return Err(spawn_err(e)),
        }
    };
    // Drain both pipes on threads so a chatty child cannot block on a full
    // pipe. The stdout reader reports end-of-file, which comes when the child
    // exits, so the wait below wakes at once instead of polling.
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let (eof_tx, eof_rx) = std::sync::mpsc::channel();
    let out_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stdout.by_ref().take(1 << 20).read_to_end(&mut buf);
        let _ = eof_tx.send(());
        buf
    });
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stderr.by_ref().take(1 << 16).read_to_end(&mut buf);
        buf
    });
    let deadline = started + timeout;
    let expired = |child: &mut std::process::Child| {
        let _ = child.kill();
        let _ = child.wait();
        SmokeError::Timeout(timeout)
    };
    if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = eof_rx.recv_timeout(timeout) {
        return Err(expired(&mut child));
    }
    let mut pause = Duration::from_micros(100);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => return Err(expired(&mut child)),
            Ok(None) => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(20));
            }
            Err(source) => return Err(spawn_err(source)),
        }
    };
    let out = out_reader.join().unwrap_or_default();
    let err = err_reader.join().unwrap_or_default();
    if !status.success() {
        let text = String::from_utf8_lossy(&err);
        let mut quote: String = text.trim().chars().take(STDERR_QUOTE).collect();
        if quote.is_empty() {
            quote = "(no output)".to_owned();
        }
        return Err(SmokeError::Failed {
            status: status.to_string(),
            stderr: quote,
        });
    }
    check_output(&out, expected)?;
    Ok(started.elapsed())
}

/// Checks a `version --json` document against the expected build.
fn check_output(stdout: &[u8], expected: &BuildIdentity) -> Result<(), SmokeError> {
    let doc: serde_json::Value =
        serde_json::from_slice(stdout).map_err(|e| SmokeError::BadOutput(e.to_string()))?;
    if doc.get("name").and_then(|n| n.as_str()) != Some(lapis_release::PRODUCT) {
        return Err(SmokeError::BadOutput(
            "`name` is not lapis-ai-controller".into(),
        ));
    }
    let build = doc
        .get("build")
        .cloned()
        .ok_or_else(|| SmokeError::BadOutput("no `build`".into()))?;
    let found: BuildIdentity =
        serde_json::from_value(build).map_err(|e| SmokeError::BadOutput(e.to_string()))?;
    if &found != expected {
        return Err(SmokeError::WrongBuild {
            expected: describe(expected),
            found: describe(&found),
        });
    }
    Ok(())
}

fn describe(b: &BuildIdentity) -> String {
    format!("{} ({} {} {})", b.version, b.commit, b.date, b.target)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn build() -> BuildIdentity {
        BuildIdentity {
            version: "0.1.0".into(),
            commit: "dev".into(),
            date: "dev".into(),
            target: "t".into(),
        }
    }

    fn script(dir: &Path, body: &str) -> std::path::PathBuf {
        let path = dir.join("bin");
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[test]
    fn passes_only_for_the_expected_build() {
        let dir = tempfile::tempdir().unwrap();
        let ok = r#"echo '{"name":"lapis-ai-controller","build":{"version":"0.1.0","commit":"dev","date":"dev","target":"t"}}'"#;
        let bin = script(dir.path(), ok);
        smoke_test(&bin, &build(), DEFAULT_SMOKE_TIMEOUT).unwrap();
        let mut other = build();
        other.commit = "abc".into();
        let err = smoke_test(&bin, &other, DEFAULT_SMOKE_TIMEOUT).unwrap_err();
        assert!(matches!(err, SmokeError::WrongBuild { .. }), "{err}");
    }

    #[test]
    fn environment_is_cleared() {
        let dir = tempfile::tempdir().unwrap();
        // Fails if any variable besides HOME and PATH (and the shell's own
        // PWD/SHLVL/_) reaches the child.
        let bin = script(
            dir.path(),
            "env | grep -v -E '^(HOME|PATH|PWD|SHLVL|_)=' | grep . >&2 && exit 1; echo '{}'",
        );
        let err = smoke_test(&bin, &build(), DEFAULT_SMOKE_TIMEOUT).unwrap_err();
        assert!(matches!(err, SmokeError::BadOutput(_)), "{err}");
    }

    #[test]
    fn failures_and_timeouts_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        let bin = script(dir.path(), "echo boom >&2; exit 4");
        let err = smoke_test(&bin, &build(), DEFAULT_SMOKE_TIMEOUT).unwrap_err();
        assert!(err.to_string().contains("boom"), "{err}");
        let bin = script(dir.path(), "exec sleep 30");
        let err = smoke_test(&bin, &build(), Duration::from_millis(50)).unwrap_err();
        assert!(matches!(err, SmokeError::Timeout(_)), "{err}");
        let bin = script(dir.path(), "echo not-json");
        let err = smoke_test(&bin, &build(), DEFAULT_SMOKE_TIMEOUT).unwrap_err();
        assert!(matches!(err, SmokeError::BadOutput(_)), "{err}");
    }
}
