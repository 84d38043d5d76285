//! Installing a release archive: `install --from ARCHIVE` and `update`.
//!
//! Both are fetch → checksum → extract → install, and both end in the same
//! stage → verify → smoke-test → activate sequence as an install of the
//! running executable ([`crate::install_staged`]). What must stay true:
//!
//! - nothing is installed unverified: without an expected checksum nothing is
//!   fetched, and the archive's SHA-256 is compared before it is parsed;
//! - whatever can be refused is refused before anything is downloaded
//!   ([`crate::install::preflight`]);
//! - a refusal at any step leaves the active release, the launcher and the
//!   config untouched (the archive is extracted into the installer's own
//!   staging directory, which is removed on failure).

use lapis_release::update::{self, Candidate, Plan, UpdateSource};
use lapis_release::{
    BuildIdentity, FetchOptions, Limits, Location, Sha256Hex, Sha256Sums, extract_into, fetch,
};

use crate::error::InstallError;
use crate::install::{InstallOptions, InstallReport, install_staged, preflight};
use crate::paths::Paths;
use crate::staging::StagingDir;

mod error;

pub use error::ArchiveError;

/// Largest checksum list read.
const MAX_CHECKSUMS_BYTES: u64 = 1 << 20;

/// How the archive's expected SHA-256 is known.
#[derive(Clone, Debug)]
pub enum Expected {
    /// Given directly (`--sha256 HEX`), as typed.
    Sha256(String),
    /// The archive's line in a `SHA256SUMS` list (`--checksums`), a path or
    /// URL.
    Checksums(String),
}

/// What an archive install did.
#[derive(Clone, Debug)]
pub struct ArchiveReport {
    /// The archive's file name.
    pub name: String,
    /// Its verified SHA-256.
    pub sha256: Sha256Hex,
    /// The install sequence's report.
    pub install: InstallReport,
}

/// Installs the archive at `from` (a path, or an `https://` / loopback
/// `http://` URL) after checking it against `expected`, for this machine's
/// `target`. `progress` draws a download bar on stderr.
///
/// Order: the checksum is known first (`None` fails before anything is
/// fetched), then [`preflight`], then the archive is fetched, checked,
/// extracted into a staging directory and installed.
pub fn install_archive(
    paths: &Paths,
    from: &str,
    expected: Option<&Expected>,
    target: &str,
    progress: bool,
    opts: &InstallOptions<'_>,
) -> Result<ArchiveReport, InstallError> {
    let location = Location::parse(from).map_err(ArchiveError::Fetch)?;
    let name = location
        .file_name()
        .ok_or_else(|| ArchiveError::NotAnArchive(from.to_owned()))?;
    let sha256 = expected_checksum(expected.ok_or(ArchiveError::ChecksumRequired)?, &name)?;
    preflight(paths, opts)?;
    let limits = Limits::default();
    let bytes = fetch(
        &location,
        limits.max_archive_bytes,
        &FetchOptions {
            progress,
            ..FetchOptions::default()
        },
    )
    .map_err(ArchiveError::Fetch)?;
    let install = install_bytes(paths, &bytes, &name, &sha256, target, &limits, opts)?;
    Ok(ArchiveReport {
        name,
        sha256,
        install,
    })
}

/// The checksum the archive must have.
fn expected_checksum(expected: &Expected, name: &str) -> Result<Sha256Hex, ArchiveError> {
    match expected {
        Expected::Sha256(hex) => Sha256Hex::parse(hex).map_err(ArchiveError::BadChecksum),
        Expected::Checksums(list) => {
            let location = Location::parse(list)?;
            let text = fetch(&location, MAX_CHECKSUMS_BYTES, &FetchOptions::default())?;
            let listed = |source| ArchiveError::ChecksumList {
                list: list.clone(),
                source,
            };
            let sums = Sha256Sums::parse(&text).map_err(listed)?;
            sums.get(name).cloned().map_err(listed)
        }
    }
}

/// Checks, extracts into a fresh staging directory, and installs.
fn install_bytes(
    paths: &Paths,
    bytes: &[u8],
    name: &str,
    expected: &Sha256Hex,
    target: &str,
    limits: &Limits,
    opts: &InstallOptions<'_>,
) -> Result<InstallReport, InstallError> {
    let staging = StagingDir::create(paths)?;
    extract_into(bytes, name, expected, Some(target), staging.path(), limits)
        .map_err(ArchiveError::Refused)?;
    install_staged(paths, staging, opts)
}

/// Where `update` looks for releases, as the environment configures it
/// ([`UpdateSource::from_env`]).
pub fn update_source() -> Result<UpdateSource, InstallError> {
    Ok(UpdateSource::from_env().map_err(ArchiveError::from)?)
}

/// What `update` is asked to do.
#[derive(Clone, Copy, Debug)]
pub struct UpdateRequest<'a> {
    /// Where releases are published.
    pub source: &'a UpdateSource,
    /// The running build (its version is compared, its target selects the
    /// archive).
    pub current: &'a BuildIdentity,
    /// An exact version to install (the only way to downgrade).
    pub version: Option<&'a str>,
    /// Only report what would be installed.
    pub check_only: bool,
    /// Draw a download bar on stderr.
    pub progress: bool,
}

/// What `update` found or did.
#[derive(Clone, Debug)]
pub enum UpdateReport {
    /// Nothing to install: the newest (or requested) version is running.
    UpToDate {
        /// The newest published version for this target, if any.
        latest: Option<String>,
    },
    /// `check_only`: this release would be installed.
    Available {
        /// The release.
        candidate: Candidate,
        /// Whether it is older than the running version.
        downgrade: bool,
    },
    /// The release was installed.
    Installed {
        /// The release.
        candidate: Candidate,
        /// Whether it is older than the running version.
        downgrade: bool,
        /// The archive install (boxed: it is by far the largest variant).
        archive: Box<ArchiveReport>,
    },
}

/// Finds the release to install for `request.current` and, unless
/// `check_only`, installs it: its archive must be listed in the release's
/// `SHA256SUMS` and match it, and it becomes a new snapshot like any archive
/// (the running binary is never overwritten; `rollback` undoes an update).
pub fn update(
    paths: &Paths,
    request: &UpdateRequest<'_>,
    opts: &InstallOptions<'_>,
) -> Result<UpdateReport, InstallError> {
    let build = request.current;
    let list = update::candidates(request.source, &build.target).map_err(ArchiveError::from)?;
    let plan = update::plan(&list, &build.version, request.version, &build.target)
        .map_err(ArchiveError::from)?;
    let (candidate, downgrade) = match plan {
        Plan::UpToDate { latest } => return Ok(UpdateReport::UpToDate { latest }),
        Plan::Install {
            candidate,
            downgrade,
        } => (candidate, downgrade),
    };
    if request.check_only {
        return Ok(UpdateReport::Available {
            candidate,
            downgrade,
        });
    }
    preflight(paths, opts)?;
    let limits = Limits::default();
    let (bytes, sha256) = update::download_verified(
        request.source,
        &candidate,
        limits.max_archive_bytes,
        request.progress,
    )
    .map_err(ArchiveError::from)?;
    let name = candidate.archive.name.clone();
    let install = install_bytes(paths, &bytes, &name, &sha256, &build.target, &limits, opts)?;
    Ok(UpdateReport::Installed {
        candidate,
        downgrade,
        archive: Box::new(ArchiveReport {
            name,
            sha256,
            install,
        }),
    })
}
