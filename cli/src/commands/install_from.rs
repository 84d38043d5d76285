//! `install --from ARCHIVE [--sha256 HEX | --checksums SHA256SUMS]`: a release
//! archive (path or URL) becomes the active release.
//!
//! Fails closed: without a checksum nothing is read, and the archive's
//! SHA-256 is compared before it is parsed. The archive is extracted straight
//! into the installer's staging directory beside `releases/` and handed to the
//! same verify → smoke-test → activate sequence as a plain `install`, so the
//! active release, launcher and config are untouched by any refusal.

use std::io::IsTerminal;
use std::time::Instant;

use anyhow::anyhow;
use lapis_installer::install::{preflight, unix_now};
use lapis_installer::smoke::DEFAULT_SMOKE_TIMEOUT;
use lapis_installer::{InstallOptions, Paths, StagingDir};
use lapis_release::checksums::ChecksumError;
use lapis_release::{
    ExtractError, FetchError, FetchOptions, Limits, Location, Sha256Hex, Sha256Sums, extract_into,
    fetch,
};

use super::paths::{installer_error, resolve};
use crate::args::{GlobalArgs, InstallArgs};
use crate::exit::{CliError, CliResult};
use crate::identity::build_identity;

/// Largest checksum list read.
const MAX_CHECKSUMS_BYTES: u64 = 1 << 20;

pub fn run(global: &GlobalArgs, args: InstallArgs) -> CliResult {
    let started = Instant::now();
    let from = args.from.clone().expect("dispatched only with --from");
    let paths = resolve(
        global,
        args.home.workspace.as_deref(),
        args.install_path.as_deref(),
    )?;
    let location = Location::parse(&from).map_err(fetch_error)?;
    let name = location.file_name().ok_or_else(|| {
        CliError::failure(
            "invalid_archive",
            anyhow!("{from} does not name an archive file"),
        )
    })?;
    let expected = expected_checksum(&args, &name)?;
    let hook = super::install::fault_hook();
    let opts = InstallOptions {
        force: args.force,
        bootstrap_config: true,
        now: unix_now(),
        smoke_timeout: DEFAULT_SMOKE_TIMEOUT,
        checkpoint: &hook,
    };
    // Refuse what can be refused before downloading anything.
    preflight(&paths, &opts).map_err(installer_error)?;
    let limits = Limits::default();
    let progress = !args.out.json && std::io::stderr().is_terminal();
    let bytes = fetch(
        &location,
        limits.max_archive_bytes,
        &FetchOptions {
            progress,
            ..FetchOptions::default()
        },
    )
    .map_err(fetch_error)?;
    let report = install_archive(&paths, &bytes, &name, &expected, &limits, &opts)?;
    if !args.out.json {
        crate::output::line(format!("verified {name} sha256 {expected}"))?;
    }
    super::install::finish(&paths, &report, &args, started)
}

/// Checks, extracts into a fresh staging directory, and installs through the
/// installer. Shared with `update`.
pub fn install_archive(
    paths: &Paths,
    bytes: &[u8],
    name: &str,
    expected: &Sha256Hex,
    limits: &Limits,
    opts: &InstallOptions<'_>,
) -> Result<lapis_installer::InstallReport, CliError> {
    let target = build_identity().target;
    let staging = StagingDir::create(paths).map_err(|e| installer_error(e.into()))?;
    extract_into(bytes, name, expected, Some(&target), staging.path(), limits)
        .map_err(extract_error)?;
    lapis_installer::install_staged(paths, staging, opts).map_err(installer_error)
}

/// The checksum the archive must have: `--sha256`, or its entry in
/// `--checksums`. Neither is an error: nothing is installed unverified.
fn expected_checksum(args: &InstallArgs, name: &str) -> Result<Sha256Hex, CliError> {
    if let Some(hex) = &args.sha256 {
        return Sha256Hex::parse(hex)
            .map_err(|e| CliError::failure("invalid_checksum", anyhow!("--sha256: {e}")));
    }
    let Some(list) = &args.checksums else {
        return Err(CliError::failure(
            "checksum_required",
            anyhow!(
                "install --from needs --sha256 HEX or --checksums SHA256SUMS; \
                 an archive is never installed unverified"
            ),
        ));
    };
    let location = Location::parse(list).map_err(fetch_error)?;
    let text =
        fetch(&location, MAX_CHECKSUMS_BYTES, &FetchOptions::default()).map_err(fetch_error)?;
    let sums = Sha256Sums::parse(&text).map_err(|e| checksum_error(e, list))?;
    sums.get(name).cloned().map_err(|e| checksum_error(e, list))
}

fn checksum_error(err: ChecksumError, list: &str) -> CliError {
    let code = match err {
        ChecksumError::Missing { .. } => "checksum_missing",
        ChecksumError::Mismatch { .. } => "checksum_mismatch",
        _ => "invalid_checksums",
    };
    CliError::failure(
        code,
        anyhow::Error::new(err).context(format!("checksum list {list}")),
    )
}

/// A fetch failure; every one is exit 2 with a stable code.
pub fn fetch_error(err: FetchError) -> CliError {
    let code = match err {
        FetchError::InsecureUrl { .. } => "insecure_url",
        FetchError::Read { .. } => "io",
        FetchError::Download { .. } => "download_failed",
        FetchError::TooLarge { .. } => "invalid_archive",
    };
    CliError::failure(code, err)
}

/// An extraction failure: nothing was installed.
pub fn extract_error(err: ExtractError) -> CliError {
    let code = match &err {
        ExtractError::Checksum(ChecksumError::Mismatch { .. }) => "checksum_mismatch",
        ExtractError::Checksum(ChecksumError::Missing { .. }) => "checksum_missing",
        ExtractError::Checksum(_) => "invalid_checksums",
        ExtractError::WrongTarget { .. } => "wrong_target",
        ExtractError::ReadArchive { .. } | ExtractError::Write { .. } => "io",
        _ => "invalid_archive",
    };
    CliError::failure(
        code,
        anyhow::Error::new(err).context("refused the release archive; nothing was changed"),
    )
}
