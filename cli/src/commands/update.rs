//! `update [--version V] [--check] [--json]`: install a published release
//! through the verified install path ([`lapis_installer::update`]).
//!
//! The release list comes from the GitHub API (`LAPIS_AI_CONTROLLER_UPDATE_API`
//! overrides the base URL, `LAPIS_AI_CONTROLLER_UPDATE_REPO` the repository;
//! `GH_TOKEN`/`GITHUB_TOKEN` lifts rate limits). Only the archive named
//! exactly for this binary's target is taken, it must be listed in the
//! release's `SHA256SUMS`, and it becomes a new snapshot through the same
//! staging → verify → smoke-test → activate sequence as `install --from`:
//! the running binary is never overwritten, and `rollback` undoes an update.
//! `--check` only reports. A downgrade happens only with `--version`.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use lapis_installer::{UpdateReport, UpdateRequest};
use serde_json::json;

use super::install::{ServiceStep, finish, install_options};
use super::paths::{installer_error, resolve};
use crate::args::{GlobalArgs, UpdateArgs};
use crate::exit::CliResult;
use crate::identity::build_identity;

pub(super) fn run(global: &GlobalArgs, args: UpdateArgs) -> CliResult {
    let started = Instant::now();
    let build = build_identity();
    let source = lapis_installer::archive::update_source().map_err(installer_error)?;
    let paths = resolve(global, None, args.install_path.as_deref())?;
    let request = UpdateRequest {
        source: &source,
        current: &build,
        version: args.version.as_deref(),
        check_only: args.check,
        progress: !args.out.json && std::io::stderr().is_terminal(),
    };
    let report = lapis_installer::update(&paths, &request, &install_options(false, true))
        .map_err(installer_error)?;
    let (candidate, downgrade, archive) = match report {
        UpdateReport::UpToDate { latest } => {
            return report_only(&args, &build.version, latest.as_deref(), None, false);
        }
        UpdateReport::Available {
            candidate,
            downgrade,
        } => {
            return report_only(
                &args,
                &build.version,
                Some(&candidate.version),
                Some(&candidate.archive.name),
                downgrade,
            );
        }
        UpdateReport::Installed {
            candidate,
            downgrade,
            archive,
        } => (candidate, downgrade, archive),
    };
    if !args.out.json {
        crate::output::line(format!(
            "{} {} -> {} ({}, sha256 {})",
            if downgrade { "downgraded" } else { "updated" },
            build.version,
            candidate.version,
            archive.name,
            archive.sha256,
        ))?;
    }
    let step = ServiceStep {
        skip: args.no_service,
        ready_timeout: Duration::from_secs(args.ready_timeout),
        json: args.out.json,
        background: false,
    };
    finish(&paths, &archive.install, &step, started)
}

/// `--check`, or nothing to do: one report, exit 0.
fn report_only(
    args: &UpdateArgs,
    current: &str,
    latest: Option<&str>,
    archive: Option<&str>,
    downgrade: bool,
) -> CliResult {
    let available = archive.is_some();
    if args.out.json {
        crate::output::json(&json!({
            "current": current,
            "latest": latest,
            "updateAvailable": available,
            "downgrade": downgrade,
            "archive": archive,
            "installed": false,
        }))?;
    } else if let (true, Some(latest)) = (available, latest) {
        crate::output::line(format!(
            "{} {latest} is available (running {current}); run `lapis-ai-controller update{}` to install it",
            if downgrade { "older version" } else { "update" },
            if downgrade {
                format!(" --version {latest}")
            } else {
                String::new()
            },
        ))?;
    } else {
        crate::output::line(format!(
            "up to date: running {current}, latest published {}",
            latest.unwrap_or("none")
        ))?;
    }
    Ok(())
}
