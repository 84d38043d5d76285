//! Read-only questions to the service manager, for `logs` and `doctor`:
//! where the service log is, whether the unit is enabled and active, and
//! whether the user's services outlive a logout (lingering).
//!
//! Like [`crate::service`], everything goes through the manager's own tools
//! found on `PATH` (`systemctl`, `journalctl`, `loginctl`, `launchctl`), so
//! the tests substitute recording stand-ins. Nothing here changes state.

use std::path::PathBuf;

use thiserror::Error;

use crate::paths::{Paths, ServiceKind};
use crate::service::{ServiceError, first_line, launchd_domain, run};

/// Where the service log is read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogSource {
    /// The user journal: run `journalctl` with these arguments.
    Journal(Vec<String>),
    /// The file the launchd agent sends stdout and stderr to.
    File(PathBuf),
}

/// There is no service log to read.
#[derive(Debug, Error)]
#[error("no service log: {} does not exist (the launchd agent has not run yet)", path.display())]
pub struct NoServiceLog {
    /// The log file the plist names.
    pub(crate) path: PathBuf,
}

/// The service log of `paths`' unit: `journalctl --user --unit UNIT
/// --no-pager --lines N [--follow]` under systemd, the plist's log file under
/// launchd.
pub fn log_source(paths: &Paths, lines: usize, follow: bool) -> Result<LogSource, NoServiceLog> {
    match paths.unit.kind {
        ServiceKind::Systemd => {
            let mut args: Vec<String> = [
                "--user",
                "--unit",
                paths.unit.name.as_str(),
                "--no-pager",
                "--lines",
            ]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
            args.push(lines.to_string());
            if follow {
                args.push("--follow".to_owned());
            }
            Ok(LogSource::Journal(args))
        }
        ServiceKind::Launchd => {
            let path = paths.launchd_log();
            if path.is_file() {
                Ok(LogSource::File(path))
            } else {
                Err(NoServiceLog { path })
            }
        }
    }
}

/// What the service manager says about the unit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnitState {
    /// `enabled`, `disabled`, `not-found`, … (systemd's words; `loaded` or
    /// `not loaded` under launchd).
    pub enabled: String,
    /// `active`, `inactive`, `failed`, `activating`, … (`running` or the
    /// launchd state).
    pub active: String,
}

impl UnitState {
    /// Whether the unit starts with the user session.
    pub fn is_enabled(&self) -> bool {
        matches!(self.enabled.as_str(), "enabled" | "loaded")
    }

    /// Whether the unit is running.
    pub fn is_active(&self) -> bool {
        matches!(self.active.as_str(), "active" | "running")
    }
}

/// Asks the service manager for the unit's state. Unreachable manager →
/// [`ServiceError::Unavailable`].
pub fn unit_state(paths: &Paths) -> Result<UnitState, ServiceError> {
    match paths.unit.kind {
        ServiceKind::Systemd => {
            let name = paths.unit.name.as_str();
            // Both exit non-zero for "disabled"/"inactive" and still print
            // the state; no output at all means the manager did not answer.
            let word = |verb: &str| -> Result<String, ServiceError> {
                let out = run("systemctl", &["--user", verb, name])?;
                let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
                if text.is_empty() {
                    return Err(ServiceError::Unavailable(format!(
                        "`systemctl --user {verb}` answered nothing: {}",
                        first_line(&out.stderr)
                    )));
                }
                Ok(text.lines().next().unwrap_or_default().to_owned())
            };
            Ok(UnitState {
                enabled: word("is-enabled")?,
                active: word("is-active")?,
            })
        }
        ServiceKind::Launchd => {
            let target = format!("{}/{}", launchd_domain(), paths.unit.name);
            let out = run("launchctl", &["print", &target])?;
            if !out.status.success() {
                return Ok(UnitState {
                    enabled: "not loaded".to_owned(),
                    active: "not loaded".to_owned(),
                });
            }
            let text = String::from_utf8_lossy(&out.stdout);
            let state = text
                .lines()
                .find_map(|l| l.trim_start().strip_prefix("state = "))
                .unwrap_or("unknown")
                .trim()
                .to_owned();
            Ok(UnitState {
                enabled: "loaded".to_owned(),
                active: state,
            })
        }
    }
}

/// Whether systemd keeps `user`'s services running without a login session
/// (`loginctl show-user USER --property=Linger`). Without lingering, user
/// services stop at logout.
pub fn lingering(user: &str) -> Result<bool, ServiceError> {
    let out = run("loginctl", &["show-user", user, "--property=Linger"])?;
    let text = String::from_utf8_lossy(&out.stdout);
    match text.lines().find_map(|l| l.trim().strip_prefix("Linger=")) {
        Some("yes") => Ok(true),
        Some(_) => Ok(false),
        None => Err(ServiceError::Unavailable(format!(
            "`loginctl show-user {user}` did not say: {}",
            first_line(&out.stderr)
        ))),
    }
}

/// Bytes available to this user on the file system holding `path`, or its
/// nearest existing ancestor (the controller home may not exist yet).
pub fn free_space(path: &std::path::Path) -> std::io::Result<u64> {
    let mut at = path;
    while !at.exists() {
        at = match at.parent() {
            Some(p) => p,
            None => break,
        };
    }
    let stat = nix::sys::statvfs::statvfs(at).map_err(std::io::Error::from)?;
    // The field widths differ between platforms (u32 block counts on macOS).
    #[allow(clippy::useless_conversion)]
    Ok(u64::from(stat.blocks_available()).saturating_mul(u64::from(stat.fragment_size())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paths::PathOptions;

    fn paths(kind: ServiceKind, home: &std::path::Path) -> Paths {
        Paths::resolve(&PathOptions {
            home: home.into(),
            cwd: "/".into(),
            service_kind: Some(kind),
            ..PathOptions::default()
        })
        .unwrap()
    }

    #[test]
    fn systemd_log_is_the_user_journal_of_the_unit() {
        let p = paths(ServiceKind::Systemd, "/home/u".as_ref());
        assert_eq!(
            log_source(&p, 50, true).unwrap(),
            LogSource::Journal(
                [
                    "--user",
                    "--unit",
                    "lapis-ai-controller.service",
                    "--no-pager",
                    "--lines",
                    "50",
                    "--follow"
                ]
                .map(str::to_owned)
                .to_vec()
            )
        );
        let LogSource::Journal(args) = log_source(&p, 7, false).unwrap() else {
            panic!("journal expected");
        };
        assert_eq!(args.last().map(String::as_str), Some("7"));
    }

    #[test]
    fn launchd_log_is_the_plist_file_once_it_exists() {
        let dir = tempfile::tempdir().unwrap();
        let p = paths(ServiceKind::Launchd, dir.path());
        let err = log_source(&p, 10, false).unwrap_err();
        assert_eq!(
            err.path,
            dir.path().join("Library/Logs/ai.lapis.controller.log")
        );
        assert!(
            crate::unit::launchd_plist(&p)
                .unwrap()
                .contains(&format!("<string>{}</string>", err.path.display()))
        );
        std::fs::create_dir_all(err.path.parent().unwrap()).unwrap();
        std::fs::write(&err.path, "line\n").unwrap();
        assert_eq!(
            log_source(&p, 10, false).unwrap(),
            LogSource::File(err.path)
        );
    }

    #[test]
    fn free_space_reads_the_nearest_existing_directory() {
        let dir = tempfile::tempdir().unwrap();
        let here = free_space(dir.path()).unwrap();
        assert!(here > 0);
        let deeper = free_space(&dir.path().join("not/yet/there")).unwrap();
        // Same file system; other writers may change it slightly in between.
        assert!(deeper.abs_diff(here) < here / 2 + (64 << 20));
    }

    #[test]
    fn unit_state_words() {
        let s = UnitState {
            enabled: "enabled".into(),
            active: "active".into(),
        };
        assert!(s.is_enabled() && s.is_active());
        let s = UnitState {
            enabled: "disabled".into(),
            active: "failed".into(),
        };
        assert!(!s.is_enabled() && !s.is_active());
    }
}
