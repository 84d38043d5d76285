//! `rollback [--to DIGEST] [--no-restart]`: re-activate the previous (or a
//! named) snapshot after re-verifying it, then restart the installed user
//! service so it runs that snapshot ([`service::restart_installed`]).
//!
//! The restart happens only when the instance's unit file (or plist) is
//! installed; without one there is nothing to restart and the output says so.
//! `--no-restart` skips it and prints the command instead. A restart that
//! fails leaves the rollback in place and exits 3, naming the command to run.

use lapis_installer::service::{self, DEFAULT_READY_TIMEOUT, Restart, ServiceError};
use lapis_installer::{InstallError, releases};
use serde_json::json;

use super::install::{install_options, status_probe};
use super::paths::{installer_error, resolve};
use crate::args::{GlobalArgs, RollbackArgs};
use crate::exit::CliResult;

pub(super) fn run(global: &GlobalArgs, args: RollbackArgs) -> CliResult {
    let paths = resolve(global, None, args.install_path.as_deref())?;
    let opts = install_options(false, false);
    let report = releases::rollback(&paths, args.to.as_deref(), &opts).map_err(installer_error)?;
    let command = service::restart_command(&paths);
    let restart = if args.no_restart {
        None
    } else {
        Some(service::restart_installed(
            &paths,
            DEFAULT_READY_TIMEOUT,
            || status_probe(&paths, Some(&report.to)),
        ))
    };
    let (status, line) = match &restart {
        None => (
            "skipped",
            format!("restart a running service to use it: {command}"),
        ),
        Some(Ok(Restart::NotInstalled)) => (
            "not_installed",
            format!(
                "  service   {} is not installed; nothing to restart",
                paths.unit.name
            ),
        ),
        Some(Ok(Restart::Restarted)) => (
            "restarted",
            format!("  service   {} restarted", paths.unit.name),
        ),
        Some(Err(ServiceError::Unavailable(_))) => (
            "unavailable",
            format!("  service   {} not restarted", paths.unit.name),
        ),
        Some(Err(_)) => (
            "failed",
            format!("  service   {} not restarted", paths.unit.name),
        ),
    };
    let mut service_doc = json!({
        "status": status,
        "manager": paths.unit.kind.as_str(),
        "unit": paths.unit.name,
        "restartCommand": command,
    });
    if let Some(Err(e)) = &restart {
        service_doc["message"] = json!(e.to_string());
    }
    let doc = json!({
        "from": report.from,
        "to": report.to,
        "build": report.build,
        "launcher": paths.launcher,
        "snapshot": paths.snapshot_dir(&report.to),
        "restartService": command,
        "service": service_doc,
    });
    let failed = matches!(restart, Some(Err(_)));
    if args.out.json {
        if !failed {
            crate::output::json(&doc)?;
        }
    } else {
        crate::output::line(format!(
            "rolled back to {} ({} {}), was {}\n  launcher  {} -> {}\n{line}",
            report.to,
            report.build.version,
            report.build.commit,
            report.from.as_deref().unwrap_or("none"),
            paths.launcher.display(),
            paths.snapshot_bin(&report.to).display(),
        ))?;
    }
    match restart {
        Some(Err(err)) => {
            let mut err = installer_error(InstallError::Service(err));
            err.error = err.error.context(format!(
                "rolled back to {}; restart the service by hand with: {command}",
                report.to
            ));
            Err(err.with_details(doc))
        }
        _ => Ok(()),
    }
}
