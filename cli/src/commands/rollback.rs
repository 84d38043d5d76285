//! `rollback [--to DIGEST]`: re-activate the previous (or a named) snapshot
//! after re-verifying it.

use lapis_installer::install::unix_now;
use lapis_installer::releases;
use lapis_installer::smoke::DEFAULT_SMOKE_TIMEOUT;
use lapis_installer::{InstallOptions, ServiceKind};
use serde_json::json;

use super::paths::{installer_error, resolve};
use crate::args::{GlobalArgs, RollbackArgs};
use crate::exit::CliResult;

pub fn run(global: &GlobalArgs, args: RollbackArgs) -> CliResult {
    let paths = resolve(global, None, args.install_path.as_deref())?;
    let hook = super::install::fault_hook();
    let opts = InstallOptions {
        force: false,
        bootstrap_config: false,
        now: unix_now(),
        smoke_timeout: DEFAULT_SMOKE_TIMEOUT,
        checkpoint: &hook,
        smoke_turn: Some(&super::install::echo_smoke_turn),
    };
    let report = releases::rollback(&paths, args.to.as_deref(), &opts).map_err(installer_error)?;
    let restart = match paths.unit.kind {
        ServiceKind::Systemd => format!("systemctl --user restart {}", paths.unit.name),
        ServiceKind::Launchd => format!("launchctl kickstart -k gui/$(id -u)/{}", paths.unit.name),
    };
    if args.out.json {
        crate::output::json(&json!({
            "from": report.from,
            "to": report.to,
            "build": report.build,
            "launcher": paths.launcher,
            "snapshot": paths.snapshot_dir(&report.to),
            "restartService": restart,
        }))?;
    } else {
        crate::output::line(format!(
            "rolled back to {} ({} {}), was {}\n  launcher  {} -> {}\nrestart a running service to use it: {restart}",
            report.to,
            report.build.version,
            report.build.commit,
            report.from.as_deref().unwrap_or("none"),
            paths.launcher.display(),
            paths.snapshot_bin(&report.to).display(),
        ))?;
    }
    Ok(())
}
