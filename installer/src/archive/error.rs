//! Why an archive was not installed, with its stable codes.
//!
//! What must stay true: this file imports nothing of the crate. The
//! crate's [`crate::InstallError`] wraps it, and the archive flows return
//! that wrapper, so the refusal lives apart from both.

use lapis_release::update::UpdateError;
use lapis_release::{ChecksumError, ExtractError, FetchError};
use thiserror::Error;

/// Why an archive was not installed (before the install sequence proper; its
/// own failures are the other [`InstallError`] variants). Nothing changed.
#[derive(Debug, Error)]
pub enum ArchiveError {
    /// The archive location does not end in a file name.
    #[error("{0} does not name an archive file")]
    NotAnArchive(String),
    /// Neither an expected checksum nor a checksum list was given.
    #[error(
        "install --from needs --sha256 HEX or --checksums SHA256SUMS; \
         an archive is never installed unverified"
    )]
    ChecksumRequired,
    /// The expected checksum is not a SHA-256.
    #[error("--sha256: {0}")]
    BadChecksum(ChecksumError),
    /// The checksum list is malformed or does not list the archive.
    #[error("checksum list {list}")]
    ChecksumList {
        /// Where the list came from, as given.
        list: String,
        /// What is wrong.
        #[source]
        source: ChecksumError,
    },
    /// The archive or its checksum list could not be fetched.
    #[error(transparent)]
    Fetch(#[from] FetchError),
    /// The archive failed its checksum or is not a valid release archive.
    #[error("refused the release archive; nothing was changed")]
    Refused(#[source] ExtractError),
    /// No published release could be found, planned or downloaded.
    #[error(transparent)]
    Update(UpdateError),
}

impl ArchiveError {
    /// Stable machine-readable code.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            ArchiveError::NotAnArchive(_) => "invalid_archive",
            ArchiveError::ChecksumRequired => "checksum_required",
            ArchiveError::BadChecksum(_) => "invalid_checksum",
            ArchiveError::ChecksumList { source, .. } => checksum_code(source),
            ArchiveError::Fetch(e) => fetch_code(e),
            ArchiveError::Refused(e) => match e {
                ExtractError::Checksum(c) => checksum_code(c),
                ExtractError::WrongTarget { .. } => "wrong_target",
                ExtractError::ReadArchive { .. } | ExtractError::Write { .. } => "io",
                _ => "invalid_archive",
            },
            ArchiveError::Update(e) => match e {
                UpdateError::BadRepo(_) | UpdateError::BadVersion(_) => "invalid_request",
                UpdateError::List { .. } => "update_source_unavailable",
                UpdateError::NoRelease { .. } | UpdateError::VersionNotFound { .. } => "not_found",
                UpdateError::Checksum(c) => checksum_code(c),
                UpdateError::Fetch(f) => fetch_code(f),
            },
        }
    }
}

impl From<UpdateError> for ArchiveError {
    /// A fetch failure is a fetch failure wherever it happened.
    fn from(err: UpdateError) -> ArchiveError {
        match err {
            UpdateError::Fetch(inner) => ArchiveError::Fetch(inner),
            other => ArchiveError::Update(other),
        }
    }
}

fn checksum_code(err: &ChecksumError) -> &'static str {
    match err {
        ChecksumError::Missing { .. } => "checksum_missing",
        ChecksumError::Mismatch { .. } => "checksum_mismatch",
        _ => "invalid_checksums",
    }
}

fn fetch_code(err: &FetchError) -> &'static str {
    match err {
        FetchError::InsecureUrl { .. } => "insecure_url",
        FetchError::Read { .. } => "io",
        FetchError::Download { .. } => "download_failed",
        FetchError::TooLarge { .. } => "invalid_archive",
    }
}
