//! Re-checking a directory of built archives before anything is published.
//!
//! `lapis-release verify DIR` is the gate in CI between building and
//! publishing: `SHA256SUMS` must list exactly the archives in the directory,
//! each archive must hash to its entry and extract safely into a tree that
//! matches its `release.json`, each archive's name must be the one its
//! manifest implies, each must carry the licence files
//! ([`crate::shipped::LICENSE_FILES`]), and all archives must carry one
//! version. (Extraction alone accepts any tree that matches its manifest, so
//! archives published before the licences were added still install.)

use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::archive::{archive_name, archive_names};
use crate::checksums::{CHECKSUMS_FILE, ChecksumError, Sha256Hex, Sha256Sums};
use crate::extract::{ExtractError, Limits, extract_release, read_archive};

/// One archive that passed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifiedArchive {
    /// File name.
    pub name: String,
    /// Its SHA-256 (as listed and as computed).
    pub sha256: Sha256Hex,
    /// Version from its manifest.
    pub version: String,
    /// Target from its manifest.
    pub target: String,
    /// Tree digest: the snapshot name it installs as.
    pub digest: String,
}

/// Why a release directory failed verification.
#[derive(Debug, Error)]
pub enum VerifyError {
    /// Reading the directory or `SHA256SUMS` failed.
    #[error("cannot read {path}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// `SHA256SUMS` is malformed.
    #[error("{CHECKSUMS_FILE} is not a valid checksum list")]
    Checksums(#[from] ChecksumError),
    /// The directory holds no archive.
    #[error("no lapis-ai-controller-*.tar.gz archive in {0}")]
    Empty(PathBuf),
    /// `SHA256SUMS` lists a file that is not there.
    #[error("{CHECKSUMS_FILE} lists {0:?}, which is not in the directory")]
    Listed(String),
    /// An archive is refused.
    #[error("{name} is refused")]
    Archive {
        /// The archive's file name.
        name: String,
        /// Why.
        #[source]
        source: ExtractError,
    },
    /// An archive's name is not the one its manifest implies.
    #[error("{found} should be named {expected} according to its release.json")]
    Misnamed {
        /// The actual name.
        found: String,
        /// The name its manifest implies.
        expected: String,
    },
    /// An archive's release tree lacks a licence file.
    #[error("{name} does not carry {path}")]
    MissingLicence {
        /// The archive's file name.
        name: String,
        /// The missing file.
        path: &'static str,
    },
    /// The archives carry different versions.
    #[error("archives carry different versions: {0} and {1}")]
    MixedVersions(String, String),
}

/// Verifies every archive in `dir` against `dir/SHA256SUMS` (see module docs).
pub fn verify_dir(dir: &Path, limits: &Limits) -> Result<Vec<VerifiedArchive>, VerifyError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| VerifyError::Io { path, source }
    };
    let sums_path = dir.join(CHECKSUMS_FILE);
    let sums = Sha256Sums::parse(&std::fs::read(&sums_path).map_err(io(&sums_path))?)?;
    let names = archive_names(dir).map_err(io(dir))?;
    if names.is_empty() {
        return Err(VerifyError::Empty(dir.to_path_buf()));
    }
    for (listed, _) in sums.iter() {
        if !dir.join(listed).is_file() {
            return Err(VerifyError::Listed(listed.to_owned()));
        }
    }
    let scratch = tempfile::tempdir().map_err(io(&std::env::temp_dir()))?;
    let mut out: Vec<VerifiedArchive> = Vec::new();
    for name in names {
        let archive_err = |source| VerifyError::Archive {
            name: name.clone(),
            source,
        };
        let expected = sums
            .get(&name)
            .map_err(|e| archive_err(ExtractError::Checksum(e)))?;
        let bytes = read_archive(&dir.join(&name), limits).map_err(archive_err)?;
        let tree = extract_release(&bytes, &name, expected, None, scratch.path(), limits)
            .map_err(archive_err)?;
        let build = &tree.manifest().build;
        let implied = archive_name(&build.version, &build.target);
        if implied != name {
            return Err(VerifyError::Misnamed {
                found: name,
                expected: implied,
            });
        }
        for licence in crate::shipped::LICENSE_FILES {
            if !tree
                .manifest()
                .entries
                .iter()
                .any(|e| e.path() == licence.path)
            {
                return Err(VerifyError::MissingLicence {
                    name,
                    path: licence.path,
                });
            }
        }
        if let Some(first) = out.first()
            && first.version != build.version
        {
            return Err(VerifyError::MixedVersions(
                first.version.clone(),
                build.version.clone(),
            ));
        }
        out.push(VerifiedArchive {
            name: name.clone(),
            sha256: expected.clone(),
            version: build.version.clone(),
            target: build.target.clone(),
            digest: tree.manifest().digest(),
        });
    }
    Ok(out)
}
