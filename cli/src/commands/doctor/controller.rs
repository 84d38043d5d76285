//! The configured controller's checks: the config loads, every provider
//! starts and answers `initialize`, the socket answers, the controller
//! home has room.
//!
//! What must stay true: a provider is checked the way a turn would start
//! it (by the running controller when one answers), and a failure quotes
//! the agent's own stderr lines, made terminal-safe by the caller.

use std::path::Path;

use lapis_installer::inspect;
use lapis_installer::launcher;
use lapis_installer::paths::{PRODUCT, Paths};
use lapis_installer::unit;
use lapis_protocol::config::{Config, ProviderSpec};

use super::{Check, Status};

/// Less free space than this in the controller home fails (the journal and
/// its WAL cannot grow).
const FREE_FAIL: u64 = 100 << 20;
/// Less than this warns.
const FREE_WARN: u64 = 1 << 30;
/// Seconds a provider's start and `initialize` may take.
const PROBE_SECS: u64 = 20;

pub(super) fn config_check(paths: &Paths, checks: &mut Vec<Check>) -> Option<Config> {
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

/// Each configured provider, started as the service starts it and asked
/// `initialize`: "found" is not "starts". With a controller running the
/// controller itself starts it (`providers.check`: its PATH and
/// environment); otherwise it is started here through the runner's own
/// launch code. A failure quotes the agent's last stderr lines.
pub(super) fn provider_checks(paths: &Paths, config: &Config, checks: &mut Vec<Check>) {
    let target = crate::commands::connect::Target {
        config: config.clone(),
        home: config.controller_home.clone(),
        paths: paths.clone(),
        problem: None,
        remote: None,
    };
    let mut client = crate::commands::connect::connect_to(&target).ok();
    let lookup = match client.is_some() {
        true => None,
        false => match crate::commands::providers_check::service_lookup(&paths.config) {
            Ok(lookup) => Some(lookup),
            Err(e) => {
                checks.push(Check::bad(
                    Status::Fail,
                    "providers",
                    format!("{:#}", e.error),
                    "fix the env file beside the config (see `config validate`)",
                ));
                return;
            }
        },
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
        let checked = crate::commands::providers_check::check_with(
            client.as_mut(),
            name,
            spec,
            crate::commands::providers_check::Check::default(),
            PROBE_SECS,
            || {
                Ok(lookup
                    .clone()
                    .unwrap_or_else(lapis_protocol::config::CommandLookup::from_env))
            },
        );
        let by = match &checked {
            Ok((_, "service")) => " (checked by the running controller)",
            Ok((_, crate::commands::providers_check::UNLOADED)) => {
                " (checked here: the running controller has not loaded it yet; `config reload`)"
            }
            _ => "",
        };
        checks.push(match checked {
            Ok((Ok(report), _)) => {
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
                        "`{}` is {} and answers initialize{agent}{by}",
                        provider.command,
                        report.command.display()
                    ),
                )
            }
            Ok((Err(failure), _)) => {
                let fix = if crate::commands::providers_check::never_started(&failure.code) {
                    format!(
                        "install the agent, or set providers.{name}.command in {} to its absolute path",
                        paths.config.display()
                    )
                } else {
                    format!(
                        "{}; details: `{PRODUCT} providers check {name}`",
                        crate::commands::providers_check::agent_said(&failure.stderr)
                    )
                };
                Check::bad(Status::Fail, check_name, format!("{}{by}", failure.message), fix)
            }
            Err(e) => Check::bad(
                Status::Fail,
                check_name,
                format!("{:#}", e.error),
                format!("`{PRODUCT} providers check {name}`"),
            ),
        });
    }
    if let Some(client) = client.as_mut() {
        approval_checks(client, config, checks);
    }
}

/// Each configured provider's recorded policy probe (`providers check
/// NAME --policy`), when it has one: honoured is fine, ignored fails (the
/// agent wrote a file whose permission was rejected), inconclusive or a
/// probe of an older definition warns. Kept apart from what agents say:
/// only the controller's own look at the file system decides.
fn approval_checks(
    client: &mut lapis_protocol::client::Client,
    config: &Config,
    checks: &mut Vec<Check>,
) {
    use lapis_protocol::probe::PolicyVerdict;
    let Ok(status) = client.status() else {
        return;
    };
    for name in config.providers.keys() {
        let name_of = format!("approval:{name}");
        let rerun = format!("`{PRODUCT} providers check {name} --policy`");
        let mut records = status.policy_probes.iter().filter(|r| &r.provider == name);
        let Some(record) = records
            .clone()
            .find(|r| r.current)
            .or_else(|| records.next())
        else {
            continue;
        };
        let at = lapis_protocol::time::format_ms(record.checked_at);
        let verdict = record.probe.verdict.as_str();
        checks.push(match (record.current, record.probe.verdict) {
            (false, _) => Check::bad(
                Status::Warn,
                name_of,
                format!("last probed {verdict} at {at}, under an older definition"),
                format!("probe the current one: {rerun}"),
            ),
            (true, PolicyVerdict::Honoured) => Check::ok(
                name_of,
                format!("a rejected write was honoured (probed at {at})"),
            ),
            (true, PolicyVerdict::Ignored) => Check::bad(
                Status::Fail,
                name_of,
                format!("the agent wrote a file whose permission was rejected (probed at {at})"),
                "do not rely on approval for this provider: use restricted threads and a sandbox, or another agent".to_owned(),
            ),
            (true, PolicyVerdict::Inconclusive) => Check::bad(
                Status::Warn,
                name_of,
                format!(
                    "inconclusive (probed at {at}): {}",
                    record.probe.reason.as_deref().unwrap_or("no evidence")
                ),
                format!("rerun {rerun}"),
            ),
        });
    }
}

/// The controller answers on its socket; a running snapshot other than the
/// launcher's warns with the restart command.
/// One check per workspace whose snapshots ran since serve started: what
/// they cost, and a warning with the setting to change when the median is
/// slow (a large tree under `evidence: "stat"`).
fn evidence_checks(
    paths: &Paths,
    s: &lapis_protocol::params::StatusResult,
    checks: &mut Vec<Check>,
) {
    use crate::commands::evidence::{SLOW_SNAPSHOT_MS, cost_line};
    for c in s.evidence.iter().filter(|c| c.snapshots > 0) {
        let name = format!("evidence:{}", c.workspace);
        let slow = c
            .median_micros
            .is_some_and(|us| us >= SLOW_SNAPSHOT_MS * 1000);
        checks.push(if slow {
            Check::bad(
                Status::Warn,
                name,
                format!("{} (two per turn)", cost_line(c)),
                format!(
                    "set `workspaces.{}.evidence` to \"off\" in {} (no snapshots; a fenced turn then has no evidence to show), or try \"watch\"; then `{PRODUCT} config reload`",
                    c.workspace,
                    paths.config.display()
                ),
            )
        } else {
            Check::ok(name, cost_line(c))
        });
    }
}

/// The socket check, then what evidence costs per workspace (from the
/// same `status` answer).
pub(super) fn socket_checks(paths: &Paths, config: &Config, checks: &mut Vec<Check>) -> Status {
    let (socket, status) = socket_check(paths, config);
    let result = socket.status;
    checks.push(socket);
    if let Some(s) = status {
        evidence_checks(paths, &s, checks);
        checks.push(telemetry_check(paths, config, &s));
    }
    result
}

/// Whether the running controller exports OpenTelemetry data and where
/// (as `status` says); configured but not exporting warns.
fn telemetry_check(
    paths: &Paths,
    config: &Config,
    s: &lapis_protocol::params::StatusResult,
) -> Check {
    match (&s.telemetry, &config.telemetry) {
        (Some(t), _) => Check::ok(
            "telemetry",
            format!(
                "on: traces to {}, metrics to {}, as service {}",
                t.traces, t.metrics, t.service_name
            ),
        ),
        (None, Some(_)) => Check::bad(
            Status::Warn,
            "telemetry",
            "configured, but the running controller exports nothing",
            format!(
                "`{PRODUCT} config reload` does not start it: restart the controller (`{}`), and see its log for `telemetry: off`",
                unit::restart_command(paths)
            ),
        ),
        (None, None) => Check::ok("telemetry", "off (no `telemetry` section in the config)"),
    }
}

fn socket_check(
    paths: &Paths,
    config: &Config,
) -> (Check, Option<lapis_protocol::params::StatusResult>) {
    let socket = config
        .controller_home
        .join(lapis_protocol::home::SOCKET_FILE);
    let start = unit::start_command(paths);
    let target = crate::commands::connect::Target {
        config: config.clone(),
        home: config.controller_home.clone(),
        paths: paths.clone(),
        problem: None,
        remote: None,
    };
    let status = crate::commands::connect::connect_to(&target)
        .and_then(|mut c| c.status().map_err(crate::commands::connect::client_error));
    let check = match &status {
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
    };
    (check, status.ok())
}

pub(super) fn disk_check(home: &Path) -> Check {
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
pub(super) fn human(bytes: u64) -> String {
    if bytes >= 1 << 30 {
        format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
    } else {
        format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
    }
}
