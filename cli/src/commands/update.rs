//! `update [--version V] [--check] [--json]`: install a published release
//! through the verified install path.
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
use std::time::Instant;

use lapis_installer::InstallOptions;
use lapis_installer::install::{preflight, unix_now};
use lapis_installer::smoke::DEFAULT_SMOKE_TIMEOUT;
use lapis_release::update::{Plan, UpdateError, UpdateSource, candidates, download_verified, plan};
use lapis_release::{Limits, checksums::ChecksumError};
use serde_json::json;

use super::install_from::{fetch_error, install_archive};
use super::paths::{installer_error, resolve};
use crate::args::{GlobalArgs, HomeArg, InstallArgs, UpdateArgs};
use crate::exit::{CliError, CliResult};
use crate::identity::build_identity;

pub fn run(global: &GlobalArgs, args: UpdateArgs) -> CliResult {
    let started = Instant::now();
    let build = build_identity();
    let source = UpdateSource::from_env().map_err(update_error)?;
    let list = candidates(&source, &build.target).map_err(update_error)?;
    let plan = plan(
        &list,
        &build.version,
        args.version.as_deref(),
        &build.target,
    )
    .map_err(update_error)?;
    let (candidate, downgrade) = match plan {
        Plan::UpToDate { latest } => {
            return report_only(&args, &build.version, latest.as_deref(), None, false);
        }
        Plan::Install {
            candidate,
            downgrade,
        } => (candidate, downgrade),
    };
    if args.check {
        return report_only(
            &args,
            &build.version,
            Some(&candidate.version),
            Some(&candidate.archive.name),
            downgrade,
        );
    }
    let paths = resolve(global, None, args.install_path.as_deref())?;
    let hook = super::install::fault_hook();
    let opts = InstallOptions {
        force: false,
        bootstrap_config: true,
        now: unix_now(),
        smoke_timeout: DEFAULT_SMOKE_TIMEOUT,
        checkpoint: &hook,
    };
    preflight(&paths, &opts).map_err(installer_error)?;
    let limits = Limits::default();
    let progress = !args.out.json && std::io::stderr().is_terminal();
    let (bytes, sha256) =
        download_verified(&source, &candidate, limits.max_archive_bytes, progress)
            .map_err(update_error)?;
    let report = install_archive(
        &paths,
        &bytes,
        &candidate.archive.name,
        &sha256,
        &limits,
        &opts,
    )?;
    if !args.out.json {
        crate::output::line(format!(
            "{} {} -> {} ({}, sha256 {sha256})",
            if downgrade { "downgraded" } else { "updated" },
            build.version,
            candidate.version,
            candidate.archive.name
        ))?;
    }
    let install_args = InstallArgs {
        home: HomeArg::default(),
        install_path: args.install_path.clone(),
        no_service: args.no_service,
        force: false,
        from: None,
        sha256: None,
        checksums: None,
        ready_timeout: args.ready_timeout,
        out: args.out,
    };
    super::install::finish(&paths, &report, &install_args, started)
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

fn update_error(err: UpdateError) -> CliError {
    let err = match err {
        UpdateError::Fetch(inner) => return fetch_error(inner),
        other => other,
    };
    let code = match &err {
        UpdateError::BadRepo(_) | UpdateError::BadVersion(_) => "invalid_request",
        UpdateError::List { .. } => "update_source_unavailable",
        UpdateError::NoRelease { .. } | UpdateError::VersionNotFound { .. } => "not_found",
        UpdateError::Checksum(ChecksumError::Missing { .. }) => "checksum_missing",
        UpdateError::Checksum(ChecksumError::Mismatch { .. }) => "checksum_mismatch",
        UpdateError::Checksum(_) | UpdateError::Fetch(_) => "invalid_checksums",
    };
    CliError::failure(code, err)
}
