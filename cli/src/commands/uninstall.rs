//! `uninstall [--purge [--yes]]`: remove the service, the launcher and the
//! snapshots; with `--purge` also the config (and its tokens) and the
//! controller home.
//!
//! What must stay true for `--purge`:
//! - it deletes only after a typed yes on a terminal, or with `--yes`;
//!   without a terminal and without `--yes` it removes nothing and exits 2
//!   (`confirmation_required`), as gh and others refuse;
//! - the controller of the home it deletes is stopped first: a
//!   `serve --background` one here (its pid file, checked as `stop` checks
//!   it), a service manager's by the installer with its unit; one that
//!   answers with neither (a foreground `serve`) is refused, nothing
//!   removed, rather than left running with its home gone.

use std::io::{BufRead, IsTerminal, Write};

use serde_json::json;

use super::background::{self, Stop};
use super::paths::{installer_error, resolve};
use crate::args::{GlobalArgs, UninstallArgs};
use crate::exit::{CliError, CliResult};

pub(super) fn run(global: &GlobalArgs, args: UninstallArgs) -> CliResult {
    let paths = resolve(global, args.home.dir(), args.install_path.as_deref())?;
    if args.purge && !args.yes {
        confirm_purge(&paths)?;
    }
    let stopped = if args.purge {
        stop_controller(global, &args, &paths)?
    } else {
        None
    };
    // Worktrees holding work found nowhere else are deleted only with --yes.
    let report = lapis_installer::uninstall::uninstall_with(&paths, args.purge, args.yes)
        .map_err(installer_error)?;
    if args.out.json {
        crate::output::json(&json!({
            "unit": paths.unit.name,
            "stoppedController": stopped,
            "removedUnit": report.removed_unit,
            "serviceWarning": report.service_warning,
            "removedLauncher": report.removed_launcher,
            "keptForeignLauncher": report.kept_foreign_launcher,
            "removedSnapshots": report.removed_snapshots,
            "keptForInstances": report.kept_for_instances,
            "removedConfig": report.removed_config,
            "removedControllerHome": report.removed_controller_home,
            "removedWorktrees": report.removed_worktrees,
        }))?;
        return Ok(());
    }
    let mut lines = Vec::new();
    if let Some(pid) = stopped {
        lines.push(format!("stopped the background controller (pid {pid})"));
    }
    if report.removed_unit {
        lines.push(format!("removed service {}", paths.unit.name));
    }
    if let Some(w) = &report.service_warning {
        lines.push(format!("warning: {w}"));
    }
    if report.removed_launcher {
        lines.push(format!("removed launcher {}", paths.launcher.display()));
    }
    if let Some(what) = &report.kept_foreign_launcher {
        lines.push(format!(
            "left {} alone: it is {what}, not our launcher",
            paths.launcher.display()
        ));
    }
    if !report.removed_snapshots.is_empty() {
        lines.push(format!(
            "removed {} snapshot(s) from {}",
            report.removed_snapshots.len(),
            paths.releases_root.display()
        ));
    }
    if !report.kept_for_instances.is_empty() {
        lines.push(format!(
            "kept the launcher and snapshots: still used by {}",
            report.kept_for_instances.join(", ")
        ));
    }
    match &report.removed_config {
        Some(p) => lines.push(format!("removed config {}", p.display())),
        None if !args.purge => lines.push(format!(
            "kept config {} and the controller home (use --purge to remove them)",
            paths.config.display()
        )),
        None => {}
    }
    for w in &report.removed_worktrees {
        lines.push(format!(
            "removed worktree {} (git worktree remove; its branch stays)",
            w.display()
        ));
    }
    if let Some(p) = &report.removed_controller_home {
        lines.push(format!("removed controller home {}", p.display()));
    }
    if lines.is_empty() {
        lines.push("nothing was installed".to_owned());
    }
    crate::output::line(lines.join("\n"))?;
    Ok(())
}

/// Stops the controller of the home `--purge` deletes (see the module
/// doc); the pid of a background controller it stopped.
fn stop_controller(
    global: &GlobalArgs,
    args: &UninstallArgs,
    paths: &lapis_installer::paths::Paths,
) -> Result<Option<u32>, CliError> {
    // A broken config still names no other home than the installer's
    // default; nothing answers without the config's token.
    let (home, answering) = match super::connect::target(global, args.home.dir()) {
        Ok(target) => {
            let answering = background::answering_pid(&target);
            (target.home, answering)
        }
        Err(_) => (paths.controller_home_for(None).path, None),
    };
    match background::stop_in(global, &home, answering)? {
        Stop::Stopped(pid) => Ok(Some(pid)),
        Stop::NotRunning | Stop::Stale(_) => Ok(None),
        // The installer stops its service manager's unit before removing.
        Stop::NotBackground(_) if paths.unit.path.exists() => Ok(None),
        Stop::NotBackground(pid) => Err(CliError::failure(
            "controller_running",
            anyhow::anyhow!(
                "the controller (pid {pid}) of {} is running without a service unit or `serve --background` (a foreground `serve`?): stop it first; nothing was removed",
                home.display()
            ),
        )),
    }
}

/// On a terminal (stdin and stderr both), says what `--purge` deletes and
/// goes on only on a typed `y`/`yes`; anything else removes nothing.
/// Without a terminal nobody can answer: refused unless `--yes` was given.
fn confirm_purge(paths: &lapis_installer::paths::Paths) -> CliResult {
    let stdin = std::io::stdin();
    if !(stdin.is_terminal() && std::io::stderr().is_terminal()) {
        return Err(CliError::failure(
            "confirmation_required",
            anyhow::anyhow!(
                "uninstall --purge deletes the configuration {} (with its tokens) and the controller home {} (its database); without a terminal to confirm it, pass --yes. Nothing was removed",
                paths.config.display(),
                paths.controller_home.display()
            ),
        ));
    }
    let mut err = std::io::stderr().lock();
    let _ = write!(
        err,
        "uninstall --purge deletes the configuration {} (with its tokens) and the \
         controller home {} (its database: every thread, turn and journal).\n\
         Delete them? [y/N] ",
        paths.config.display(),
        paths.controller_home.display()
    );
    let _ = err.flush();
    let mut answer = String::new();
    let _ = stdin.lock().read_line(&mut answer);
    if matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes") {
        return Ok(());
    }
    Err(CliError::failure(
        "cancelled",
        anyhow::anyhow!("uninstall --purge: not confirmed; nothing was removed"),
    ))
}
