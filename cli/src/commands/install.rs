//! `install`: this executable becomes the active release snapshot, the config
//! is created once, and the user service is (re)started.
//!
//! Installs run with `lapis_installer::checkpoint_hook`, which pauses at a
//! named checkpoint only in builds with `lapis-installer/test-support` (the
//! end-to-end suite's), never in a release build.

use std::time::{Duration, Instant};

use lapis_installer::service::{self, Probe, ServiceError};
use lapis_installer::smoke::DEFAULT_SMOKE_TIMEOUT;
use lapis_installer::{InstallError, InstallOptions, InstallReport, Paths, unit};
use serde_json::{Value, json};

use super::paths::{installer_error, millis, resolve};
use crate::args::{GlobalArgs, InstallArgs};
use crate::exit::{CliError, CliResult};
use crate::identity::build_identity;

pub(super) fn run(global: &GlobalArgs, args: InstallArgs) -> CliResult {
    let started = Instant::now();
    let paths = resolve(global, args.home.dir(), args.install_path.as_deref())?;
    let exe = std::env::current_exe().map_err(|e| {
        CliError::failure("io", anyhow::anyhow!("cannot find this executable: {e}"))
    })?;
    let opts = install_options(args.force, true);
    let report = lapis_installer::install_executable(&paths, &exe, &build_identity(), &opts)
        .map_err(installer_error)?;
    finish(&paths, &report, &ServiceStep::of(&args), started)
}

/// The options of every install, update and rollback this binary runs: the
/// fault-pause hook and the ACP smoke turn, with the caller's `force` and
/// config bootstrap.
pub(super) fn install_options(force: bool, bootstrap_config: bool) -> InstallOptions<'static> {
    InstallOptions {
        force,
        bootstrap_config,
        checkpoint: &lapis_installer::checkpoint_hook,
        smoke_turn: Some(&echo_smoke_turn),
        ..InstallOptions::new()
    }
}

/// The second smoke stage: one real ACP turn (initialize, session/new,
/// session/prompt, streamed updates, `end_turn`) against the staged binary's
/// built-in `echo` agent, with the same deadline as the first stage.
fn echo_smoke_turn(bin: &std::path::Path) -> Result<(), String> {
    lapis_service::echo_smoke_turn(bin, DEFAULT_SMOKE_TIMEOUT).map_err(|e| e.to_string())
}

/// What the service step after an install is asked to do.
pub(super) struct ServiceStep {
    /// `--no-service`: neither write nor start the unit.
    pub(crate) skip: bool,
    /// `--ready-timeout`.
    pub(crate) ready_timeout: Duration,
    /// `--json`.
    pub(crate) json: bool,
    /// `--start background`: without a service manager, start the
    /// installed launcher's `serve --background`.
    pub(crate) background: bool,
}

impl ServiceStep {
    /// The step as `install`'s flags ask for it.
    pub(super) fn of(args: &InstallArgs) -> ServiceStep {
        ServiceStep {
            skip: args.no_service,
            ready_timeout: Duration::from_secs(args.ready_timeout),
            json: args.out.json,
            background: args.start == crate::args::StartArg::Background,
        }
    }
}

/// Everything after the release is active: the service step and the report.
/// Shared by every install source, so they all say the same things.
pub(super) fn finish(
    paths: &Paths,
    report: &InstallReport,
    step: &ServiceStep,
    started: Instant,
) -> CliResult {
    let install_time = started.elapsed();
    let service_started = Instant::now();
    let service = if step.skip {
        Ok(false)
    } else {
        service::install_and_start(paths, step.ready_timeout, || status_probe(paths, None))
            .map(|_| true)
    };
    // No service manager, and asked to run without one: the installed
    // launcher's `serve --background` (it exits 0 once `status` answers).
    let background = match &service {
        Err(ServiceError::Unavailable(why)) if step.background => {
            Some(start_background(paths, why))
        }
        _ => None,
    };
    let service_time = service_started.elapsed();
    let manual = unit::serve_command_line(paths);
    if let Some(Ok(pid)) = &background {
        let stop = format!("{} stop", stop_prefix(paths));
        let doc = document(
            paths,
            report,
            json!({ "status": "background", "pid": pid, "stop": stop }),
        );
        if step.json {
            crate::output::json(&doc)?;
        } else {
            print_plain(
                paths,
                report,
                &format!(
                    "started in the background (pid {pid}; no service manager); `{stop}` ends it"
                ),
            )?;
        }
        return Ok(());
    }
    if let Some(Err(why)) = &background {
        eprintln!("warning: serve --background did not start: {why}");
    }
    let service_doc = match &service {
        Ok(false) => json!({ "status": "skipped" }),
        Ok(true) => json!({ "status": "started" }),
        Err(ServiceError::Unavailable(why)) => json!({
            "status": "unavailable", "message": why, "manualStart": manual,
        }),
        Err(e) => json!({ "status": "failed", "message": e.to_string(), "manualStart": manual }),
    };
    let mut doc = document(paths, report, service_doc);
    doc["timings"] = json!({
        "installMs": millis(install_time),
        "smokeMs": millis(report.smoke),
        "serviceMs": millis(service_time),
    });
    match service {
        Ok(started) => {
            if step.json {
                crate::output::json(&doc)?;
            } else {
                print_plain(
                    paths,
                    report,
                    if started {
                        "started"
                    } else {
                        "skipped (--no-service)"
                    },
                )?;
            }
            Ok(())
        }
        Err(err) => {
            if !step.json {
                print_plain(paths, report, "not started")?;
            }
            let hint = match &err {
                ServiceError::Unavailable(_) => format!(
                    "the release and config are installed, but no service manager answers: start the controller in the background with `{manual} --background` (`install --start background` does it), or by hand in the foreground with: {manual}"
                ),
                _ => format!(
                    "the release and config are installed; start the controller by hand with: {manual}"
                ),
            };
            let mut err = installer_error(InstallError::Service(err));
            err.error = err.error.context(hint);
            Err(err.with_details(doc))
        }
    }
}

/// Runs `<launcher> serve --background` for `paths` (the service manager
/// being unavailable because `why`); its pid, or why it did not start.
fn start_background(paths: &Paths, why: &str) -> Result<u32, String> {
    eprintln!("no service manager ({why}): starting `serve --background`");
    let args = unit::serve_args(paths);
    let out = std::process::Command::new(&args[0])
        .args(&args[1..])
        .arg("--background")
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        let text = String::from_utf8_lossy(&out.stdout);
        return text
            .trim()
            .parse()
            .map_err(|_| format!("unexpected output {text:?}"));
    }
    Err(crate::terminal::safe(String::from_utf8_lossy(&out.stderr).trim()).into_owned())
}

/// `lapis-ai-controller [--config …] [--instance …]` for `paths`.
fn stop_prefix(paths: &Paths) -> String {
    let args = unit::serve_args(paths);
    let mut words = vec![lapis_installer::paths::PRODUCT.to_owned()];
    words.extend(args[2..].iter().cloned());
    words.join(" ")
}

/// Bound of one `status --json` probe; a controller that accepts but never
/// answers is "not ready yet", and the overall wait stays bounded.
const STATUS_PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Readiness as the installed launcher sees it: `status --json` exits 0 and
/// reports the wire protocol (and, with `snapshot`, runs from that snapshot,
/// so a restart is not "ready" while the old process still answers). Exit 3
/// (nothing answers yet) and any other failure are "not yet"; the last
/// message is kept for the timeout error.
pub(super) fn status_probe(paths: &Paths, snapshot: Option<&str>) -> Probe {
    let mut cmd = std::process::Command::new(&paths.launcher);
    cmd.arg("status")
        .arg("--json")
        .arg("--config")
        .arg(&paths.config);
    if let Some(name) = paths.instance.name() {
        cmd.arg("--instance").arg(name);
    }
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => return Probe::NotYet(format!("cannot run the launcher's status: {e}")),
    };
    // The status document is far below a pipe's buffer, so polling for exit
    // before reading cannot deadlock.
    let deadline = Instant::now() + STATUS_PROBE_TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Probe::NotYet("status did not answer in time".to_owned());
            }
            Err(e) => return Probe::NotYet(format!("status probe failed: {e}")),
        }
    }
    let output = match child.wait_with_output() {
        Ok(output) => output,
        Err(e) => return Probe::NotYet(format!("status probe failed: {e}")),
    };
    if output.status.success() {
        let doc: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
        if doc["protocol"] == lapis_protocol::PROTOCOL {
            return match snapshot {
                Some(want) if doc["snapshot"] != want => Probe::NotYet(format!(
                    "the service still runs snapshot {}",
                    doc["snapshot"].as_str().unwrap_or("none")
                )),
                _ => Probe::Ready,
            };
        }
        return Probe::NotYet("status answered without the expected protocol".to_owned());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    Probe::NotYet(
        stderr
            .lines()
            .next()
            .unwrap_or("the controller does not answer yet")
            .trim_start_matches("error: ")
            .to_owned(),
    )
}

fn document(paths: &Paths, report: &InstallReport, service: Value) -> Value {
    let (found, quarantined) = match &report.snapshot {
        lapis_installer::SnapshotOutcome::Restaged { found, quarantined } => {
            (Some(found.clone()), Some(quarantined.display().to_string()))
        }
        _ => (None, None),
    };
    let (config, controller_home) = match &report.config {
        Some((outcome, summary)) => (
            Some(outcome.as_str()),
            paths
                .controller_home_for(summary.controller_home.as_deref())
                .path,
        ),
        None => (None, paths.controller_home.clone()),
    };
    let mut service = service;
    service["manager"] = json!(paths.unit.kind.as_str());
    service["unit"] = json!(paths.unit.name);
    json!({
        "digest": report.digest,
        "snapshot": report.snapshot.as_str(),
        "found": found,
        "quarantined": quarantined,
        "previousDigest": report.previous,
        "replaced": report.replaced,
        "version": report.build.version,
        "build": report.build,
        "instance": paths.instance.as_str(),
        "config": config,
        "paths": {
            "launcher": paths.launcher,
            "snapshot": paths.snapshot_dir(&report.digest),
            "releasesRoot": paths.releases_root,
            "config": paths.config,
            "controllerHome": controller_home,
            "unit": paths.unit.path,
        },
        "service": service,
        "cleaned": report.cleaned,
    })
}

fn print_plain(paths: &Paths, report: &InstallReport, service: &str) -> std::io::Result<()> {
    let b = &report.build;
    let mut lines = vec![format!(
        "installed {} {} ({} {} {})",
        lapis_installer::paths::PRODUCT,
        b.version,
        b.commit,
        b.date,
        b.target
    )];
    let snapshot = match &report.snapshot {
        lapis_installer::SnapshotOutcome::Restaged { found, quarantined } => format!(
            "restaged: the existing copy did not verify ({found}); moved it to {}",
            quarantined.display()
        ),
        other => other.as_str().to_owned(),
    };
    lines.push(format!("  snapshot  {} ({snapshot})", report.digest));
    lines.push(format!(
        "  previous  {}",
        report.previous.as_deref().unwrap_or("none")
    ));
    if let Some(what) = &report.replaced {
        lines.push(format!("  replaced  {what} (--force)"));
    }
    lines.push(format!(
        "  launcher  {} -> {}",
        paths.launcher.display(),
        paths.snapshot_bin(&report.digest).display()
    ));
    if let Some((outcome, summary)) = &report.config {
        lines.push(format!(
            "  config    {} ({})",
            paths.config.display(),
            outcome.as_str()
        ));
        let home = paths
            .controller_home_for(summary.controller_home.as_deref())
            .path;
        lines.push(format!("  home      {}", home.display()));
    }
    lines.push(format!("  service   {} {service}", paths.unit.name));
    for path in &report.cleaned {
        lines.push(format!("  cleaned   {}", path.display()));
    }
    if let Some(dir) = paths.launcher.parent()
        && !std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d == dir))
    {
        lines.push(format!(
            "note: {} is not on PATH; add it to run `{}` by name",
            dir.display(),
            lapis_installer::paths::PRODUCT
        ));
    }
    crate::output::line(lines.join("\n"))
}
