//! `doctor [--json]`: one line per check of what a working installation
//! needs — launcher on PATH, active snapshot verifies, unit installed /
//! enabled / active, lingering, config valid, every provider starts and
//! answers `initialize` (as `providers check` runs it),
//! socket answering, free space in the controller home. Each line says `ok`,
//! `warn` or `fail` and, unless ok, what to do. Exit 1 when any check fails
//! (warnings alone exit 0).
//!
//! Checks are independent: one that cannot run (no config → no socket to
//! ask) says so and fails or is skipped, never aborts the others.

use std::path::{Path, PathBuf};

use lapis_installer::inspect::{self, UnitState};
use lapis_installer::launcher::{self, LauncherState};
use lapis_installer::paths::{PRODUCT, Paths, ServiceKind};
use lapis_installer::{snapshot, unit};
use lapis_protocol::config::{Config, ProviderSpec};
use serde::Serialize;

use crate::args::{GlobalArgs, JsonArg};
use crate::exit::{CliError, CliResult};

/// Less free space than this in the controller home fails (the journal and
/// its WAL cannot grow).
const FREE_FAIL: u64 = 100 << 20;
/// Less than this warns.
const FREE_WARN: u64 = 1 << 30;
/// Seconds a provider's start and `initialize` may take.
const PROBE_SECS: u64 = 20;

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
    launcher_checks(&paths, &mut checks);
    service_checks(&paths, &mut checks);
    let config = config_check(&paths, &mut checks);
    if let Some(config) = &config {
        provider_checks(&paths, config, &mut checks);
        checks.push(socket_check(&paths, config));
    }
    let home = config
        .as_ref()
        .map(|c| c.controller_home.clone())
        .unwrap_or_else(|| paths.controller_home.clone());
    checks.push(disk_check(&home));

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

/// The launcher exists, is ours, is what `PATH` finds first, and its
/// snapshot verifies.
fn launcher_checks(paths: &Paths, checks: &mut Vec<Check>) {
    let shown = paths.launcher.display().to_string();
    let digest = match launcher::state(paths) {
        Ok(LauncherState::Ours { digest }) => digest,
        Ok(LauncherState::Missing) => {
            checks.push(Check::bad(
                Status::Fail,
                "launcher",
                format!("no launcher at {shown}"),
                format!("run `{PRODUCT} install`"),
            ));
            return;
        }
        Ok(LauncherState::Foreign { what, .. }) => {
            checks.push(Check::bad(
                Status::Fail,
                "launcher",
                format!("{shown} is {what}, not an installed launcher"),
                format!("run `{PRODUCT} install --force` to replace it"),
            ));
            return;
        }
        Err(e) => {
            checks.push(Check::bad(
                Status::Fail,
                "launcher",
                format!("cannot read {shown}: {e}"),
                format!("run `{PRODUCT} install`"),
            ));
            return;
        }
    };
    let dir = paths.launcher.parent().unwrap_or(Path::new("/"));
    checks.push(match first_on_path(PRODUCT) {
        Some(found) if same_file(&found, &paths.launcher) => {
            Check::ok("launcher", format!("{shown} is on PATH"))
        }
        Some(found) => Check::bad(
            Status::Warn,
            "launcher",
            format!(
                "`{PRODUCT}` on PATH is {}, not the launcher {shown}",
                found.display()
            ),
            format!(
                "put {} before {} in PATH, or remove the other copy",
                dir.display(),
                found.parent().unwrap_or(Path::new("/")).display()
            ),
        ),
        None => Check::bad(
            Status::Warn,
            "launcher",
            format!("{shown} is not on PATH"),
            format!(
                "add it to your shell profile: export PATH=\"{}:$PATH\"",
                dir.display()
            ),
        ),
    });
    let short = &digest[..12.min(digest.len())];
    checks.push(match snapshot::verify(paths, &digest) {
        Ok(manifest) => Check::ok(
            "snapshot",
            format!(
                "releases/{short}… verifies (version {})",
                manifest.build.version
            ),
        ),
        Err(e) => Check::bad(
            Status::Fail,
            "snapshot",
            format!("active snapshot {short}… does not verify: {e}"),
            format!("run `{PRODUCT} rollback` or reinstall with `{PRODUCT} install`"),
        ),
    });
}

/// The first `PATH` entry holding an executable named `name`.
fn first_on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|d| d.is_absolute())
        .map(|d| d.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

fn same_file(a: &Path, b: &Path) -> bool {
    a == b
        || matches!(
            (std::fs::canonicalize(a), std::fs::canonicalize(b)),
            (Ok(x), Ok(y)) if x == y
        )
}

/// The unit file, what the service manager says about it, and lingering.
fn service_checks(paths: &Paths, checks: &mut Vec<Check>) {
    let name = &paths.unit.name;
    let by_hand = unit::serve_command_line(paths);
    let shown = paths.unit.path.display();
    let Ok(current) = std::fs::read(&paths.unit.path) else {
        checks.push(Check::bad(
            Status::Fail,
            "unit",
            format!("no service unit at {shown}"),
            format!("run `{PRODUCT} install` (or run the controller by hand: `{by_hand}`)"),
        ));
        return;
    };
    let expected = match paths.unit.kind {
        ServiceKind::Systemd => unit::systemd_unit(paths),
        ServiceKind::Launchd => unit::launchd_plist(paths),
    };
    checks.push(match expected {
        Ok(text) if text.as_bytes() == current => {
            Check::ok("unit", format!("{shown} is installed"))
        }
        _ => Check::bad(
            Status::Warn,
            "unit",
            format!("{shown} differs from what this version writes"),
            format!("run `{PRODUCT} install` to rewrite it"),
        ),
    });
    let (enable, start) = match paths.unit.kind {
        ServiceKind::Systemd => (
            format!("systemctl --user enable {name}"),
            format!("systemctl --user start {name}"),
        ),
        ServiceKind::Launchd => {
            let bootstrap = format!(
                "launchctl bootstrap gui/$(id -u) {}",
                paths.unit.path.display()
            );
            (bootstrap.clone(), bootstrap)
        }
    };
    match inspect::unit_state(paths) {
        Ok(state) => push_unit_state(&state, &enable, &start, checks),
        Err(e) => checks.push(Check::bad(
            Status::Fail,
            "service",
            format!("cannot ask the service manager: {e}"),
            format!("run the controller by hand: `{by_hand}`"),
        )),
    }
    if paths.unit.kind == ServiceKind::Systemd {
        checks.push(linger_check());
    }
}

fn push_unit_state(state: &UnitState, enable: &str, start: &str, checks: &mut Vec<Check>) {
    checks.push(if state.is_enabled() {
        Check::ok("enabled", format!("the unit is {}", state.enabled))
    } else {
        Check::bad(
            Status::Fail,
            "enabled",
            format!("the unit is {} (it will not start at login)", state.enabled),
            format!("run `{enable}`"),
        )
    });
    checks.push(if state.is_active() {
        Check::ok("active", format!("the unit is {}", state.active))
    } else {
        Check::bad(
            Status::Fail,
            "active",
            format!("the unit is {}", state.active),
            format!("run `{start}`; `{PRODUCT} logs` shows why it stopped"),
        )
    });
}

/// Without lingering, systemd stops user services at logout.
fn linger_check() -> Check {
    let user = std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty())
        .or_else(|| {
            nix::unistd::User::from_uid(nix::unistd::getuid())
                .ok()
                .flatten()
                .map(|u| u.name)
        });
    let Some(user) = user else {
        return Check::bad(
            Status::Warn,
            "linger",
            "cannot tell who the user is (USER is unset)",
            "run `loginctl enable-linger` so the service outlives a logout",
        );
    };
    match inspect::lingering(&user) {
        Ok(true) => Check::ok("linger", format!("lingering is on for {user}")),
        Ok(false) => Check::bad(
            Status::Warn,
            "linger",
            format!("lingering is off for {user}: the service stops at logout"),
            format!("run `loginctl enable-linger {user}`"),
        ),
        Err(e) => Check::bad(
            Status::Warn,
            "linger",
            format!("cannot check lingering: {e}"),
            format!("run `loginctl enable-linger {user}` so the service outlives a logout"),
        ),
    }
}

fn config_check(paths: &Paths, checks: &mut Vec<Check>) -> Option<Config> {
    let shown = paths.config.display();
    match Config::load(&paths.config) {
        Ok(config) => {
            checks.push(Check::ok(
                "config",
                format!(
                    "{shown} is valid ({} provider{}, {} workspace{})",
                    config.providers.len(),
                    plural(config.providers.len()),
                    config.workspaces.len(),
                    plural(config.workspaces.len()),
                ),
            ));
            Some(config)
        }
        Err(e) => {
            checks.push(Check::bad(
                Status::Fail,
                "config",
                e.to_string(),
                format!("fix {shown} (or run `{PRODUCT} install` to create it)"),
            ));
            None
        }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Each configured provider, started as the service starts it (the same
/// resolution and environment rule, through the runner's own launch code)
/// and asked `initialize`: "found" is not "starts". A failure quotes the
/// agent's last stderr lines.
fn provider_checks(paths: &Paths, config: &Config, checks: &mut Vec<Check>) {
    let lookup = match super::providers_check::service_lookup(&paths.config) {
        Ok(lookup) => lookup,
        Err(e) => {
            checks.push(Check::bad(
                Status::Fail,
                "providers",
                format!("{:#}", e.error),
                "fix the env file beside the config (see `config validate`)",
            ));
            return;
        }
    };
    for (name, provider) in &config.providers {
        let check_name = format!("provider:{name}");
        let spec = match ProviderSpec::from_config(name, provider) {
            Ok(spec) => spec,
            Err(e) => {
                checks.push(Check::bad(
                    Status::Fail,
                    check_name,
                    e.to_string(),
                    format!("fix providers.{name} in {}", paths.config.display()),
                ));
                continue;
            }
        };
        let started = super::providers_check::start(spec, lookup.clone(), false, PROBE_SECS);
        checks.push(match started {
            Ok(report) => {
                let agent = report
                    .agent_info
                    .as_ref()
                    .and_then(|i| i.get("name"))
                    .and_then(serde_json::Value::as_str)
                    .map(|n| format!(" ({n})"))
                    .unwrap_or_default();
                Check::ok(
                    check_name,
                    format!(
                        "`{}` is {} and answers initialize{agent}",
                        provider.command,
                        report.command.display()
                    ),
                )
            }
            Err(failure) => {
                let not_found = matches!(
                    failure.error,
                    lapis_service::ProbeError::Launch(_)
                );
                let fix = if not_found {
                    format!(
                        "install the agent, or set providers.{name}.command in {} to its absolute path",
                        paths.config.display()
                    )
                } else {
                    format!(
                        "{}; details: `{PRODUCT} providers check {name}`",
                        super::providers_check::agent_said(&failure.stderr)
                    )
                };
                Check::bad(Status::Fail, check_name, failure.error.to_string(), fix)
            }
        });
    }
}

/// The controller answers on its socket; a running snapshot other than the
/// launcher's warns with the restart command.
fn socket_check(paths: &Paths, config: &Config) -> Check {
    let socket = config
        .controller_home
        .join(lapis_protocol::home::SOCKET_FILE);
    let start = unit::start_command(paths);
    let target = super::connect::Target {
        config: config.clone(),
        home: config.controller_home.clone(),
        paths: paths.clone(),
        problem: None,
    };
    let status = super::connect::connect_to(&target)
        .and_then(|mut c| c.status().map_err(super::connect::client_error));
    match status {
        Ok(s) => {
            let running = s.snapshot.as_deref();
            let installed = launcher::state(paths)
                .ok()
                .and_then(|l| l.digest().map(str::to_owned));
            match (running, installed.as_deref()) {
                (Some(r), Some(i)) if r != i => Check::bad(
                    Status::Warn,
                    "socket",
                    format!(
                        "answers (pid {}), but runs snapshot {}… while the launcher points at {}…",
                        s.pid,
                        &r[..12.min(r.len())],
                        &i[..12.min(i.len())]
                    ),
                    format!("restart it: `{}`", unit::restart_command(paths)),
                ),
                _ => Check::ok(
                    "socket",
                    format!(
                        "{} answers (version {}, pid {}, up {} s)",
                        socket.display(),
                        s.version,
                        s.pid,
                        s.uptime_seconds
                    ),
                ),
            }
        }
        Err(e) => Check::bad(
            Status::Fail,
            "socket",
            format!(
                "nothing answers on {}: {}",
                socket.display(),
                e.error.root_cause()
            ),
            format!(
                "start it: `{start}`, or run `{}`",
                unit::serve_command_line(paths)
            ),
        ),
    }
}

fn disk_check(home: &Path) -> Check {
    let shown = home.display();
    match inspect::free_space(home) {
        Ok(free) if free < FREE_FAIL => Check::bad(
            Status::Fail,
            "disk",
            format!("only {} free for {shown}", human(free)),
            "free space: the journal cannot grow and writes will fail",
        ),
        Ok(free) if free < FREE_WARN => Check::bad(
            Status::Warn,
            "disk",
            format!("only {} free for {shown}", human(free)),
            "free some space before the journal needs it",
        ),
        Ok(free) => Check::ok("disk", format!("{} free for {shown}", human(free))),
        Err(e) => Check::bad(
            Status::Warn,
            "disk",
            format!("cannot read free space for {shown}: {e}"),
            "check that the controller home's file system is mounted",
        ),
    }
}

/// Bytes in MiB or GiB, one decimal.
fn human(bytes: u64) -> String {
    if bytes >= 1 << 30 {
        format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
    } else {
        format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
    }
}

#[cfg(test)]
mod tests;
