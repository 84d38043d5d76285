//! Registering, starting, waiting for and removing the user service.
//!
//! The service manager is driven through its own command-line tool
//! (`systemctl --user`, `launchctl`) found on `PATH`, which is also how the
//! tests substitute a recording stand-in. "No service manager" (the tool is
//! missing, or it cannot reach the user manager, as in containers and SSH
//! sessions without a user bus) is its own error so the CLI can keep the
//! installed release and config, say how to run `serve` by hand, and exit 3.
//!
//! Readiness is a separate, bounded wait ([`wait_ready`]) over a probe closure.
//! The manager's own state is checked first (a failed unit ends the wait at
//! once); once the manager calls the unit running, the caller's probe decides
//! — the CLI asks the installed launcher for `status --json` and waits for it
//! to report the protocol, so "ready" means the controller answers on its
//! socket, not merely that a process exists.

use std::fs;
use std::io;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::fsx::{self, FsError};
use crate::paths::{Paths, ServiceKind};
use crate::unit::{self, UnitPathError};

/// Default bound of the readiness wait.
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(60);

/// Why the service step failed.
#[derive(Debug, Error)]
pub enum ServiceError {
    /// The service manager cannot be reached at all.
    #[error("no service manager reachable: {0}")]
    Unavailable(String),
    /// A service manager command failed.
    #[error("`{command}` failed ({status}): {stderr}")]
    Command {
        /// The command line.
        command: String,
        /// Exit status text.
        status: String,
        /// The start of its stderr.
        stderr: String,
    },
    /// The service did not become ready in time.
    #[error("the service did not become ready within {timeout:?}: {last}")]
    NotReady {
        /// The bound.
        timeout: Duration,
        /// The last state the probe saw.
        last: String,
    },
    /// The service failed while starting.
    #[error("the service failed to start: {0}")]
    Failed(String),
    /// A path cannot be put in a unit file.
    #[error(transparent)]
    UnitPath(#[from] UnitPathError),
    /// Writing or removing the unit file failed.
    #[error(transparent)]
    Fs(#[from] FsError),
}

/// What one readiness probe saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Probe {
    /// Ready to serve.
    Ready,
    /// Still starting; the text says what state it is in.
    NotYet(String),
    /// Given up (failed unit); waiting longer will not help.
    Failed(String),
}

/// Calls `probe` until it reports ready, fails, or `timeout` has passed
/// (`sleep` pauses between probes; at least one probe always runs).
pub fn wait_ready(
    timeout: Duration,
    mut probe: impl FnMut() -> Probe,
    mut sleep: impl FnMut(Duration),
    mut elapsed: impl FnMut() -> Duration,
) -> Result<(), ServiceError> {
    let mut pause = Duration::from_millis(50);
    loop {
        match probe() {
            Probe::Ready => return Ok(()),
            Probe::Failed(why) => return Err(ServiceError::Failed(why)),
            Probe::NotYet(last) => {
                let spent = elapsed();
                if spent >= timeout {
                    return Err(ServiceError::NotReady { timeout, last });
                }
                sleep(pause.min(timeout - spent));
                pause = (pause * 2).min(Duration::from_millis(500));
            }
        }
    }
}

/// Runs a service manager tool; `NotFound` becomes [`ServiceError::Unavailable`].
pub(crate) fn run(program: &str, args: &[&str]) -> Result<Output, ServiceError> {
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => {
                ServiceError::Unavailable(format!("`{program}` is not installed"))
            }
            _ => ServiceError::Unavailable(format!("cannot run `{program}`: {e}")),
        })
}

fn command_text(program: &str, args: &[&str]) -> String {
    std::iter::once(program)
        .chain(args.iter().copied())
        .collect::<Vec<_>>()
        .join(" ")
}

pub(crate) fn first_line(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let line: String = line.trim().chars().take(300).collect();
    if line.is_empty() {
        "(no output)".to_owned()
    } else {
        line
    }
}

/// Runs a command that must succeed.
fn run_ok(program: &str, args: &[&str]) -> Result<Output, ServiceError> {
    let out = run(program, args)?;
    if out.status.success() {
        return Ok(out);
    }
    Err(ServiceError::Command {
        command: command_text(program, args),
        status: out.status.to_string(),
        stderr: first_line(&out.stderr),
    })
}

/// What [`install_and_start`] did.
#[derive(Debug)]
pub struct ServiceReport {
    /// Whether the unit file content changed.
    pub unit_changed: bool,
}

/// Writes the unit file (atomically; an unchanged one is left alone). This
/// step does not need the service manager.
pub fn write_unit(paths: &Paths) -> Result<bool, ServiceError> {
    let text = match paths.unit.kind {
        ServiceKind::Systemd => unit::systemd_unit(paths)?,
        ServiceKind::Launchd => unit::launchd_plist(paths)?,
    };
    if fs::read(&paths.unit.path).is_ok_and(|old| old == text.as_bytes()) {
        return Ok(false);
    }
    fsx::create_dir_all_mode(fsx::parent_of(&paths.unit.path), 0o755)?;
    fsx::write_atomic(&paths.unit.path, text.as_bytes(), 0o644)?;
    Ok(true)
}

/// Writes the unit, registers it with the service manager, restarts it and
/// waits (at most `ready_timeout`) until the manager reports it running and
/// `ready` (the controller's own answer) says it is ready.
pub fn install_and_start(
    paths: &Paths,
    ready_timeout: Duration,
    mut ready: impl FnMut() -> Probe,
) -> Result<ServiceReport, ServiceError> {
    let unit_changed = write_unit(paths)?;
    match paths.unit.kind {
        ServiceKind::Systemd => {
            let name = paths.unit.name.as_str();
            // A failing daemon-reload means the user manager is unreachable
            // (no user bus); that is "unavailable", not a broken install.
            let reload = run("systemctl", &["--user", "daemon-reload"])?;
            if !reload.status.success() {
                return Err(ServiceError::Unavailable(format!(
                    "`systemctl --user daemon-reload` failed: {}",
                    first_line(&reload.stderr)
                )));
            }
            run_ok("systemctl", &["--user", "enable", name])?;
            run_ok("systemctl", &["--user", "restart", name])?;
            let started = Instant::now();
            wait_ready(
                ready_timeout,
                || match systemd_probe(name) {
                    Probe::Ready => ready(),
                    other => other,
                },
                std::thread::sleep,
                || started.elapsed(),
            )?;
        }
        ServiceKind::Launchd => {
            let domain = launchd_domain();
            let target = format!("{domain}/{}", paths.unit.name);
            let plist = paths.unit.path.display().to_string();
            // bootout fails when the agent was not loaded; that is fine.
            let _ = run("launchctl", &["bootout", &target])?;
            let boot = run("launchctl", &["bootstrap", &domain, &plist])?;
            if !boot.status.success() {
                return Err(ServiceError::Unavailable(format!(
                    "`launchctl bootstrap` failed: {}",
                    first_line(&boot.stderr)
                )));
            }
            run_ok("launchctl", &["kickstart", "-k", &target])?;
            let started = Instant::now();
            wait_ready(
                ready_timeout,
                || match launchd_probe(&target) {
                    Probe::Ready => ready(),
                    other => other,
                },
                std::thread::sleep,
                || started.elapsed(),
            )?;
        }
    }
    Ok(ServiceReport { unit_changed })
}

/// `systemctl --user is-active UNIT`: `active` is ready, `failed` gives up.
fn systemd_probe(name: &str) -> Probe {
    match run("systemctl", &["--user", "is-active", name]) {
        Err(e) => Probe::Failed(e.to_string()),
        Ok(out) => {
            let state = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            match state.as_str() {
                "active" => Probe::Ready,
                "failed" => Probe::Failed(format!(
                    "{name} is failed; see `journalctl --user -u {name}`"
                )),
                "" => Probe::NotYet("unknown".to_owned()),
                other => Probe::NotYet(other.to_owned()),
            }
        }
    }
}

/// `launchctl print`: `state = running` is ready.
fn launchd_probe(target: &str) -> Probe {
    match run("launchctl", &["print", target]) {
        Err(e) => Probe::Failed(e.to_string()),
        Ok(out) => {
            let text = String::from_utf8_lossy(&out.stdout);
            if text.contains("state = running") {
                Probe::Ready
            } else {
                Probe::NotYet(
                    text.lines()
                        .find(|l| l.trim_start().starts_with("state ="))
                        .unwrap_or("not running")
                        .trim()
                        .to_owned(),
                )
            }
        }
    }
}

pub(crate) fn launchd_domain() -> String {
    format!("gui/{}", nix::unistd::getuid())
}

/// What [`stop_and_remove`] did.
#[derive(Debug, Default)]
pub struct RemoveReport {
    /// Whether a unit file was removed.
    pub removed_unit: bool,
    /// A service manager problem that did not stop the removal.
    pub warning: Option<String>,
}

/// Stops and disables the service (best effort: an unreachable manager is a
/// warning) and removes the unit file.
pub fn stop_and_remove(paths: &Paths) -> Result<RemoveReport, ServiceError> {
    let mut report = RemoveReport::default();
    if !paths.unit.path.exists() {
        return Ok(report);
    }
    let result = match paths.unit.kind {
        ServiceKind::Systemd => run_ok(
            "systemctl",
            &["--user", "disable", "--now", &paths.unit.name],
        )
        .map(drop),
        ServiceKind::Launchd => {
            let target = format!("{}/{}", launchd_domain(), paths.unit.name);
            run("launchctl", &["bootout", &target]).map(drop)
        }
    };
    if let Err(e) = result {
        report.warning = Some(e.to_string());
    }
    fs::remove_file(&paths.unit.path).map_err(|e| FsError::new("remove", &paths.unit.path, e))?;
    fsx::fsync_dir(fsx::parent_of(&paths.unit.path))?;
    report.removed_unit = true;
    if paths.unit.kind == ServiceKind::Systemd
        && report.warning.is_none()
        && let Err(e) = run_ok("systemctl", &["--user", "daemon-reload"])
    {
        report.warning = Some(e.to_string());
    }
    Ok(report)
}

/// Names of other instances' unit files in the same unit directory.
pub fn other_instance_units(paths: &Paths) -> Vec<String> {
    let own = paths
        .unit
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned());
    let Ok(rd) = fs::read_dir(fsx::parent_of(&paths.unit.path)) else {
        return Vec::new();
    };
    let mut out: Vec<String> = rd
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| unit::is_our_unit_name(n) && Some(n) != own.as_ref())
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn wait_ready_returns_when_ready() {
        let calls = Cell::new(0);
        let slept = Cell::new(Duration::ZERO);
        let result = wait_ready(
            Duration::from_secs(60),
            || {
                calls.set(calls.get() + 1);
                if calls.get() < 4 {
                    Probe::NotYet("activating".into())
                } else {
                    Probe::Ready
                }
            },
            |d| slept.set(slept.get() + d),
            || slept.get(),
        );
        assert!(result.is_ok());
        assert_eq!(calls.get(), 4);
    }

    #[test]
    fn wait_ready_is_bounded_by_the_timeout() {
        let slept = Cell::new(Duration::ZERO);
        let calls = Cell::new(0);
        let err = wait_ready(
            Duration::from_secs(3),
            || {
                calls.set(calls.get() + 1);
                Probe::NotYet("activating".into())
            },
            |d| slept.set(slept.get() + d),
            || slept.get(),
        )
        .unwrap_err();
        assert!(matches!(err, ServiceError::NotReady { ref last, .. } if last == "activating"));
        assert_eq!(slept.get(), Duration::from_secs(3));
        assert!(calls.get() > 1);
    }

    #[test]
    fn wait_ready_stops_on_failure_and_probes_at_least_once() {
        let err = wait_ready(
            Duration::ZERO,
            || Probe::Failed("unit failed".into()),
            |_| panic!("no sleep after a failure"),
            || Duration::ZERO,
        )
        .unwrap_err();
        assert!(matches!(err, ServiceError::Failed(_)));
        assert!(wait_ready(Duration::ZERO, || Probe::Ready, |_| {}, || Duration::ZERO).is_ok());
    }
}
