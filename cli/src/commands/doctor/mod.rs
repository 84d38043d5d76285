//! `doctor [--json]`: one line per check of what a working installation
//! needs — launcher on PATH, active snapshot verifies, unit installed /
//! enabled / active, lingering, config valid, every provider starts and
//! answers `initialize` (as `providers check` runs it),
//! socket answering, free space in the controller home. Each line says `ok`,
//! `warn` or `fail` and, unless ok, what to do. Exit 1 when any check fails
//! (warnings alone exit 0). When the socket answers, the service manager's
//! checks only warn: a controller run without one (`serve --background`)
//! works.
//!
//! Checks are independent: one that cannot run (no config → no socket to
//! ask) says so and fails or is skipped, never aborts the others. The
//! checks of the installation (launcher, snapshot, unit, lingering) are in
//! `install`, those of the configured controller (config, providers,
//! socket, disk) in `controller`; this file owns the report and its order.

mod controller;
mod install;

use serde::Serialize;

use crate::args::{GlobalArgs, JsonArg};
use crate::exit::{CliError, CliResult};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Status {
    Ok,
    Warn,
    Fail,
}

/// One line of the report.
#[derive(Debug, Serialize)]
struct Check {
    /// Stable check name (`launcher`, `provider:claude`, …).
    name: String,
    status: Status,
    /// What was found.
    summary: String,
    /// What to do, for warn and fail.
    #[serde(skip_serializing_if = "Option::is_none")]
    fix: Option<String>,
}

impl Check {
    fn ok(name: impl Into<String>, summary: impl Into<String>) -> Check {
        Check {
            name: name.into(),
            status: Status::Ok,
            summary: summary.into(),
            fix: None,
        }
    }

    fn bad(
        status: Status,
        name: impl Into<String>,
        summary: impl Into<String>,
        fix: impl Into<String>,
    ) -> Check {
        Check {
            name: name.into(),
            status,
            summary: summary.into(),
            fix: Some(fix.into()),
        }
    }
}

#[derive(Debug, Serialize)]
struct Report {
    /// No check failed.
    ok: bool,
    checks: Vec<Check>,
}

pub(super) fn run(global: &GlobalArgs, out: JsonArg) -> CliResult {
    let paths = super::paths::resolve(global, None, None)?;
    let mut checks = Vec::new();
    install::launcher_checks(&paths, &mut checks);
    install::service_checks(&paths, &mut checks);
    let config = controller::config_check(&paths, &mut checks);
    if let Some(config) = &config {
        controller::provider_checks(&paths, config, &mut checks);
        let mut answered = Vec::new();
        if controller::socket_checks(&paths, config, &mut answered) != Status::Fail {
            without_manager(&mut checks);
        }
        checks.append(&mut answered);
    }
    let home = config
        .as_ref()
        .map(|c| c.controller_home.clone())
        .unwrap_or_else(|| paths.controller_home.clone());
    checks.push(controller::disk_check(&home));

    let failed = checks.iter().filter(|c| c.status == Status::Fail).count();
    let report = Report {
        ok: failed == 0,
        checks,
    };
    if out.json {
        crate::output::json(&report)?;
    } else {
        for c in &report.checks {
            let status = match c.status {
                Status::Ok => "ok",
                Status::Warn => "warn",
                Status::Fail => "fail",
            };
            let mut line = format!("{status:<4}  {:<10} {}", c.name, c.summary);
            if let Some(fix) = &c.fix {
                line.push_str(" — ");
                line.push_str(fix);
            }
            // A summary may quote an agent (its error, its stderr).
            crate::output::line(crate::terminal::safe(&line))?;
        }
    }
    if failed > 0 {
        return Err(CliError::unhealthy(anyhow::anyhow!(
            "{failed} check{} failed",
            if failed == 1 { "" } else { "s" }
        )));
    }
    Ok(())
}

/// The service manager's checks (`unit`, `service`, `enabled`, `active`)
/// when the controller answers on its socket anyway (`serve --background`,
/// a foreground `serve`): a failure there is a warning, since the controller
/// works; it will not start at login until it is installed as a service.
fn without_manager(checks: &mut [Check]) {
    const MANAGER: [&str; 4] = ["unit", "service", "enabled", "active"];
    for c in checks
        .iter_mut()
        .filter(|c| c.status == Status::Fail && MANAGER.contains(&c.name.as_str()))
    {
        c.status = Status::Warn;
        c.summary
            .push_str(" (the controller answers on its socket without it)");
        // It runs: "run it by hand" would be the wrong thing to do.
        c.fix = Some(format!(
            "nothing to do while it runs; for it to start at login, run `{}` \
             where a user service manager (systemd or launchd) is available",
            format_args!("{} install", lapis_installer::paths::PRODUCT)
        ));
    }
}

#[cfg(test)]
mod tests;
