//! Registering, starting, restarting, waiting for and removing the user
//! service.
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
    ready: impl FnMut() -> Probe,
) -> Result<(), ServiceError> {
    write_unit(paths)?;
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
        }
        ServiceKind::Launchd => {
            let domain = launchd_domain();
            let target = launchd_target(paths);
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
        }
    }
    restart_and_wait(paths, ready_timeout, ready)
}

/// Restarts the registered service (`systemctl --user restart UNIT`,
/// `launchctl kickstart -k gui/<uid>/LABEL`) and waits, at most
/// `ready_timeout`, until the manager reports it running and `ready` says it
/// is ready. The restart always replaces a running process, so the service
/// runs whatever the launcher points at afterwards.
fn restart_and_wait(
    paths: &Paths,
    ready_timeout: Duration,
    mut ready: impl FnMut() -> Probe,
) -> Result<(), ServiceError> {
    let (program, args) = restart_argv(paths);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run_ok(program, &args)?;
    let started = Instant::now();
    let name = paths.unit.name.as_str();
    let target = launchd_target(paths);
    wait_ready(
        ready_timeout,
        || {
            let manager = match paths.unit.kind {
                ServiceKind::Systemd => systemd_probe(name),
                ServiceKind::Launchd => launchd_probe(&target),
            };
            match manager {
                Probe::Ready => ready(),
                other => other,
            }
        },
        std::thread::sleep,
        || started.elapsed(),
    )
}

/// The service manager call that restarts the instance's service.
fn restart_argv(paths: &Paths) -> (&'static str, Vec<String>) {
    match paths.unit.kind {
        ServiceKind::Systemd => (
            "systemctl",
            vec!["--user".into(), "restart".into(), paths.unit.name.clone()],
        ),
        ServiceKind::Launchd => (
            "launchctl",
            vec!["kickstart".into(), "-k".into(), launchd_target(paths)],
        ),
    }
}

/// The restart command as a person would type it (printed when a restart is
/// skipped or failed); the same call [`restart_installed`] makes.
pub fn restart_command(paths: &Paths) -> String {
    let (program, args) = restart_argv(paths);
    std::iter::once(program.to_owned())
        .chain(args)
        .collect::<Vec<_>>()
        .join(" ")
}

/// What [`restart_installed`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Restart {
    /// No unit file or plist is installed for the instance; nothing was run.
    NotInstalled,
    /// The service was restarted and reported ready.
    Restarted,
}

/// Restarts the instance's user service when its unit file (or plist) is
/// installed, and waits for it as [`install_and_start`] does; used after a
/// `rollback` so the service runs the re-activated snapshot. Without an
/// installed unit nothing is run: the service was never registered (or was
/// removed), and starting it is `install`'s job.
pub fn restart_installed(
    paths: &Paths,
    ready_timeout: Duration,
    ready: impl FnMut() -> Probe,
) -> Result<Restart, ServiceError> {
    if !paths.unit.path.is_file() {
        return Ok(Restart::NotInstalled);
    }
    restart_and_wait(paths, ready_timeout, ready)?;
    Ok(Restart::Restarted)
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

/// The user's GUI domain, where a user agent is bootstrapped.
pub(crate) fn launchd_domain() -> String {
    format!("gui/{}", nix::unistd::getuid())
}

/// The service target `gui/<uid>/LABEL`.
fn launchd_target(paths: &Paths) -> String {
    format!("{}/{}", launchd_domain(), paths.unit.name)
}

/// What [`stop_and_remove`] did.
#[derive(Debug, Default)]
pub struct RemoveReport {
    /// Whether a unit file was removed.
    pub(crate) removed_unit: bool,
    /// A service manager problem that did not stop the removal.
    pub(crate) warning: Option<String>,
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
        ServiceKind::Launchd => run("launchctl", &["bootout", &launchd_target(paths)]).map(drop),
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
    use crate::paths::{PathOptions, test_paths};
    use std::cell::Cell;

    #[test]
    fn restart_command_names_the_instance_service() {
        let home = tempfile::tempdir().unwrap();
        let paths = test_paths(home.path());
        assert_eq!(
            restart_command(&paths),
            "systemctl --user restart lapis-ai-controller.service"
        );
        let launchd = Paths::resolve(&PathOptions {
            home: home.path().to_path_buf(),
            cwd: home.path().to_path_buf(),
            instance: Some("w1".into()),
            service_kind: Some(ServiceKind::Launchd),
            ..PathOptions::default()
        })
        .unwrap();
        assert_eq!(
            restart_command(&launchd),
            format!(
                "launchctl kickstart -k gui/{}/ai.lapis.controller.w1",
                nix::unistd::getuid()
            )
        );
    }

    #[test]
    fn restart_without_a_unit_file_runs_nothing() {
        let home = tempfile::tempdir().unwrap();
        let paths = test_paths(home.path());
        let outcome = restart_installed(&paths, Duration::ZERO, || {
            panic!("nothing to wait for without a unit")
        })
        .unwrap();
        assert_eq!(outcome, Restart::NotInstalled);
    }

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
