//! `status [--json]`: what the running controller says about itself, next to
//! what is installed (the launcher's snapshot and version) and what the
//! service manager says about the unit, with a warning and the restart
//! command when the running snapshot is not the launcher's. When nothing
//! answers: exit 3 with what to do (start the unit, or run `serve`), never
//! "try status".

use std::path::PathBuf;

use lapis_installer::Paths;
use lapis_installer::inspect;
use lapis_installer::launcher;
use lapis_installer::unit;
use lapis_protocol::params::StatusResult;
use serde::Serialize;
use serde_json::json;

use crate::args::{GlobalArgs, JsonArg};
use crate::exit::{CliError, CliResult};

/// `status --json`: the controller's own answer (unchanged, at the top
/// level) plus the installed side and the service manager's view.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct StatusReport {
    #[serde(flatten)]
    running: StatusResult,
    /// This host's launcher (none over `--host`: the remote one is not
    /// seen through the controller's socket).
    #[serde(skip_serializing_if = "Option::is_none")]
    launcher: Option<LauncherView>,
    /// This host's service manager (none over `--host`).
    #[serde(skip_serializing_if = "Option::is_none")]
    service_manager: Option<ManagerView>,
    /// Over `--host ssh://…`: where the controller that answered runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    remote: Option<RemoteView>,
    /// Things to act on, each with its command.
    warnings: Vec<String>,
}

/// The remote host whose controller answered: every other fact of the
/// report is that controller's own.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct RemoteView {
    /// `ssh://[user@]host[:port]`.
    host: String,
    /// How the launcher and service unit there are seen.
    installed: String,
}

/// What the launcher points at.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct LauncherView {
    path: PathBuf,
    /// The active snapshot's digest (none when the launcher is missing or foreign).
    snapshot: Option<String>,
    /// Its build version, from the snapshot's manifest.
    version: Option<String>,
}

/// The unit as the service manager reports it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ManagerView {
    unit: String,
    /// Whether the unit file exists.
    installed: bool,
    /// `enabled`, `disabled`, … (none when the manager could not be asked).
    enabled: Option<String>,
    /// `active`, `inactive`, `failed`, … (none when the manager could not be asked).
    active: Option<String>,
    /// Why the manager could not be asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

pub(super) fn run(global: &GlobalArgs, out: JsonArg) -> CliResult {
    let target = super::connect::client_target(global)?;
    if let Some(dial) = &target.remote {
        return remote(global, &target, dial, out);
    }
    let installed = launcher_view(&target.paths);
    let manager = manager_view(&target.paths);
    let answer = super::connect::connect_to(&target)
        .and_then(|mut c| c.status().map_err(super::connect::client_error))
        // The `work` counters vary from call to call: the `status` method
        // carries them for scripts and the guards; the CLI's output stays
        // what it was.
        .map(|mut s| {
            s.work = None;
            s
        });
    let running = match answer {
        Ok(s) => s,
        Err(mut err) => {
            // A controller at its connection limit is running: its own
            // headline stands.
            if err.class == crate::exit::ExitClass::Unavailable && err.code != "limit_reached" {
                err = unreachable(err, &target, &installed, &manager);
            }
            return Err(err);
        }
    };
    let mut warnings = common_warnings(
        global,
        &target,
        &running,
        &target.paths.config.display().to_string(),
    );
    if let (Some(run), Some(inst)) = (running.snapshot.as_deref(), installed.snapshot.as_deref())
        && run != inst
    {
        warnings.push(format!(
            "the service runs snapshot {} but the launcher points at {}: restart it with `{}`",
            short(run),
            short(inst),
            unit::restart_command(&target.paths)
        ));
    }
    let report = StatusReport {
        running,
        launcher: Some(installed),
        service_manager: Some(manager),
        remote: None,
        warnings,
    };
    print(&report, out)
}

/// `status --host ssh://…`: the remote controller's answer, and no fact of
/// this host (its launcher and unit say nothing about the remote one).
fn remote(
    global: &GlobalArgs,
    target: &super::connect::Target,
    dial: &lapis_protocol::client::SshDial,
    out: JsonArg,
) -> CliResult {
    let running = super::connect::connect_to(target)
        .and_then(|mut c| c.status().map_err(super::connect::client_error))
        .map(|mut s| {
            s.work = None;
            s
        })?;
    let url = dial.host.url();
    let warnings = common_warnings(
        global,
        target,
        &running,
        &format!("the configuration on {url}"),
    );
    let report = StatusReport {
        running,
        launcher: None,
        service_manager: None,
        remote: Some(RemoteView {
            installed: format!(
                "not shown (this host's launcher and unit say nothing about {url}); `{}` there shows them",
                dial.shell_command("status")
            ),
            host: url,
        }),
        warnings,
    };
    print(&report, out)
}

fn print(report: &StatusReport, out: JsonArg) -> CliResult {
    if out.json {
        crate::output::json(report)?;
        return Ok(());
    }
    crate::output::line(plain(report))?;
    Ok(())
}

/// The warnings that hold wherever the controller runs: a refused file, a
/// refused or restart-needing reload, fenced turns.
fn common_warnings(
    global: &GlobalArgs,
    target: &super::connect::Target,
    running: &StatusResult,
    config_file: &str,
) -> Vec<String> {
    let mut warnings = Vec::new();
    if let Some((_, problem)) = &target.problem {
        warnings.push(format!(
            "the configuration file is refused ({problem}): the service keeps running with the last good one, but will not start or reload with this one; check it with `{} config validate`",
            lapis_release::PRODUCT
        ));
    }
    if let Some(reload) = &running.last_reload {
        if !reload.applied {
            warnings.push(format!(
                "the last config reload was refused ({}); fix {} and reload again with `{} config reload`",
                reload.error.as_deref().unwrap_or("no reason given"),
                config_file,
                lapis_release::PRODUCT
            ));
        } else if !reload.restart_needed.is_empty() {
            warnings.push(format!(
                "changes to {} take effect after a restart: `{}`",
                reload.restart_needed.join(", "),
                unit::restart_command(&target.paths)
            ));
        }
    }
    for f in &running.fences {
        // What changed since the fence's boundary (the owner's CLI reads
        // another application's fenced turn too, `turns:resolve-any`).
        let evidence = super::connect::connect_to(target)
            .ok()
            .and_then(|mut c| {
                c.turns_get_with(&lapis_protocol::params::TurnsGet {
                    turn_id: Some(f.turn.clone()),
                    command_id: None,
                })
                .ok()
            })
            .and_then(|got| {
                got.evidence
                    .as_ref()
                    .and_then(super::evidence::since_summary)
            })
            .map(|said| format!("; {}", crate::terminal::safe(&said)))
            .unwrap_or_default();
        warnings.push(super::fences::sentence(
            &super::permissions::command_prefix(global),
            f,
            &evidence,
        ));
    }
    warnings
}

/// Exit 3 whose first line says what to do (start the unit, or run
/// `serve`), with the manager's view in the message and, with `--json`, in
/// `error.details`.
fn unreachable(
    err: CliError,
    target: &super::connect::Target,
    installed: &LauncherView,
    manager: &ManagerView,
) -> CliError {
    let paths = &target.paths;
    let state = match (&manager.active, &manager.error) {
        _ if !manager.installed => format!("no service unit {} is installed", manager.unit),
        (Some(active), _) => format!("the unit {} is {active}", manager.unit),
        (None, Some(e)) => format!("the service manager cannot be asked: {e}"),
        (None, None) => format!("the state of {} is unknown", manager.unit),
    };
    let socket = target.home.join("controller.sock");
    let cause = anyhow::anyhow!(
        "nothing answers on {}: {}",
        socket.display(),
        err.error.root_cause()
    );
    let serve = unit::serve_command_line(paths);
    // Without a unit or a reachable manager, the unit's start command
    // cannot work: the controller runs detached from its own launcher.
    let what = if !manager.installed || (manager.active.is_none() && manager.error.is_some()) {
        format!(
            "the controller is not running ({state}): without a service manager, start it with `{serve} --background` (`stop` ends it), or in the foreground with `{serve}`; \
             `lapis-ai-controller logs` shows its log"
        )
    } else {
        format!(
            "the controller is not running ({state}): start it with `{}`, or run `{serve}`, or without the service `{serve} --background`; \
             `lapis-ai-controller logs` shows the service log",
            unit::start_command(paths),
        )
    };
    CliError::unavailable(err.code, cause.context(what))
        .with_details(json!({ "launcher": installed, "serviceManager": manager }))
}

fn launcher_view(paths: &Paths) -> LauncherView {
    let snapshot = launcher::state(paths)
        .ok()
        .and_then(|s| s.digest().map(str::to_owned));
    let version = snapshot.as_deref().and_then(|d| {
        lapis_release::Manifest::read_from(&paths.snapshot_dir(d))
            .ok()
            .map(|m| m.build.version)
    });
    LauncherView {
        path: paths.launcher.clone(),
        snapshot,
        version,
    }
}

fn manager_view(paths: &Paths) -> ManagerView {
    let installed = paths.unit.path.is_file();
    let (enabled, active, error) = if installed {
        match inspect::unit_state(paths) {
            Ok(s) => (Some(s.enabled), Some(s.active), None),
            Err(e) => (None, None, Some(e.to_string())),
        }
    } else {
        (None, None, None)
    };
    ManagerView {
        unit: paths.unit.name.clone(),
        installed,
        enabled,
        active,
        error,
    }
}

fn manager_line(m: &ManagerView) -> String {
    if !m.installed {
        return format!("{}: not installed (running by hand?)", m.unit);
    }
    match (&m.enabled, &m.active, &m.error) {
        (Some(e), Some(a), _) => format!("{}: {e}, {a}", m.unit),
        (_, _, Some(e)) => format!("{}: cannot ask the service manager: {e}", m.unit),
        _ => format!("{}: unknown", m.unit),
    }
}

fn short(digest: &str) -> &str {
    &digest[..12.min(digest.len())]
}

fn plain(r: &StatusReport) -> String {
    let s = &r.running;
    let installed = match (&r.launcher, &r.service_manager, &r.remote) {
        (Some(l), Some(m), _) => format!(
            "\nlauncher  {} → {} (version {})\nmanager   {}",
            l.path.display(),
            l.snapshot.as_deref().unwrap_or("nothing installed"),
            l.version.as_deref().unwrap_or("unknown"),
            manager_line(m)
        ),
        (_, _, Some(remote)) => format!(
            "\nhost      {} (every fact here is that controller's own)\ninstalled {}",
            remote.host, remote.installed
        ),
        _ => String::new(),
    };
    let build = |key: &str| {
        s.build
            .get(key)
            .and_then(serde_json::Value::as_str)
            .unwrap_or("?")
            .to_owned()
    };
    let mut text = format!(
        "{} running, protocol {}\n\
         service   version {} ({} {} {}), pid {}, up {} s\n\
         snapshot  {}{installed}\n\
         turns     {} running, {} queued (capacity {}), {} live agent{}",
        lapis_release::PRODUCT,
        s.protocol,
        s.version,
        build("commit"),
        build("date"),
        build("target"),
        s.pid,
        s.uptime_seconds,
        s.snapshot
            .as_deref()
            .unwrap_or("none (not running from an installed snapshot)"),
        s.running_turns.len(),
        s.queue.depth,
        s.queue.capacity,
        s.live_agents,
        if s.live_agents == 1 { "" } else { "s" },
    );
    if let Some(a) = &s.agents {
        text.push_str(&format!(
            "\nlimits    {}/{} turns running, {}/{} agents live ({} idle)",
            a.running_turns, a.max_running_turns, a.live, a.max_live, a.idle
        ));
    }
    for t in &s.running_turns {
        text.push_str(&format!(
            "\nrunning   {}: turn {} (thread {}), {} since {}",
            t.workspace,
            t.turn,
            t.thread,
            t.state,
            lapis_protocol::time::format_ms(t.since)
        ));
    }
    if s.fences.is_empty() {
        text.push_str("\nfenced    none");
    }
    for f in &s.fences {
        text.push_str(&format!(
            "\nfenced    {}: turn {} (thread {}, application {}) is {} since {}",
            f.workspace,
            f.turn,
            f.thread,
            f.application,
            f.state,
            lapis_protocol::time::format_ms(f.since),
        ));
    }
    // Shown once any turn recorded usage.
    if s.usage.total.turns > 0 {
        text.push_str(&format!(
            "\nusage     {}",
            super::usage::totals_line(&s.usage.total)
        ));
        for (ws, t) in &s.usage.workspaces {
            text.push_str(&format!(
                "\n  workspace {ws}: {}",
                super::usage::totals_line(t)
            ));
        }
        for (app, t) in &s.usage.applications {
            text.push_str(&format!(
                "\n  application {}: {}",
                crate::terminal::safe(app),
                super::usage::totals_line(t)
            ));
        }
    }
    // Shown only while something waits: an agent blocked on an answer.
    if let Some(oldest) = &s.permissions.oldest {
        let n = s.permissions.pending;
        text.push_str(&format!(
            "\nwaiting   {n} permission request{}; oldest {} of turn {} since {} (see `permissions list`)",
            if n == 1 { "" } else { "s" },
            // The agent chose the request id: terminal-safe.
            crate::terminal::safe(&oldest.request_id),
            oldest.turn_id,
            lapis_protocol::time::format_ms(oldest.requested_at),
        ));
    }
    if let Some(reload) = &s.last_reload {
        let when = lapis_protocol::time::format_ms(reload.at);
        text.push_str(&if reload.applied {
            format!("\nreload    applied at {when}")
        } else {
            format!(
                "\nreload    refused at {when} ({}): {}; the previous configuration is in effect",
                reload.code.as_deref().unwrap_or("error"),
                reload.error.as_deref().unwrap_or("no reason given")
            )
        });
    }
    // What evidence costs, once a workspace took snapshots.
    for c in s.evidence.iter().filter(|c| c.snapshots > 0) {
        text.push_str(&format!(
            "\nevidence  {}: {}",
            c.workspace,
            super::evidence::cost_line(c)
        ));
    }
    if let Some(condition) = &s.storage_fault {
        text.push_str(&format!(
            "\nstorage   cannot write ({condition}); reads work, writes resume when it clears"
        ));
    }
    for w in &r.warnings {
        text.push_str("\nwarning: ");
        text.push_str(w);
    }
    text
}
