//! Immutable, digest-addressed release snapshots under the releases root.
//!
//! A snapshot directory `releases/<digest>` only ever appears by a rename of a
//! complete, fsynced and verified staging directory, so a directory with a
//! digest name is never partial. Its `release.json` is the manifest whose
//! digest is the directory name; [`verify`] re-checks the name, every byte
//! and full mode of every entry (setuid, setgid and sticky bits included),
//! that no extra directory exists, and the seal (directories 0555,
//! `release.json` a 0444 regular file), so a snapshot modified after install
//! is recognised and never reused or re-activated. The digest does not cover
//! the build identity in `release.json`; [`existing`] compares it with the
//! release being installed, and `rollback` has the binary confirm it in the
//! smoke test.
//!
//! Names under the releases root:
//!
//! - `<64 hex>`: a complete snapshot (directories sealed 0555).
//! - `.staging-<random>`: a tree being assembled, locked by its creator
//!   (see [`crate::staging`]).
//! - `.quarantine-<digest>-<n>`: a snapshot that failed verification, moved
//!   aside so it can be inspected; `releases gc` removes them.
//! - `.trash-<random>`: a snapshot being deleted (renamed first, so a partial
//!   delete never sits under a digest name).
//! - `.lock`, `state.json`: the releases lock and the activation history.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use lapis_release::{BuildIdentity, MANIFEST_FILE, Manifest, ManifestError};
use thiserror::Error;

use crate::fsx::{self, FsError, IoContext};
use crate::paths::{PRODUCT, Paths, is_digest};

/// Mode of `release.json` in a sealed snapshot.
pub(crate) const MANIFEST_MODE: u32 = 0o444;
/// Mode of every directory of a sealed snapshot, its root included.
pub(crate) const SEALED_DIR_MODE: u32 = 0o555;

/// Why a snapshot could not be built, found or trusted.
#[derive(Debug, Error)]
pub enum SnapshotError {
    /// The tree or its manifest does not verify.
    #[error("snapshot {digest} does not verify: {source}")]
    Tampered {
        /// Digest (directory name) of the snapshot.
        digest: String,
        /// What differs.
        #[source]
        source: ManifestError,
    },
    /// A release tree to install does not match its own manifest.
    #[error("release tree {path} does not verify: {source}")]
    BadTree {
        /// The tree.
        path: PathBuf,
        /// What differs.
        #[source]
        source: ManifestError,
    },
    /// No snapshot matches the requested digest or prefix.
    #[error("no installed snapshot matches {0:?}")]
    NotFound(String),
    /// A digest prefix matches several snapshots.
    #[error("{0:?} matches more than one snapshot; give more digits")]
    Ambiguous(String),
    /// File-system failure.
    #[error(transparent)]
    Fs(#[from] FsError),
}

/// Reads `releases/<digest>/release.json` and checks that it names the
/// directory, that the tree matches it byte for byte and mode for mode, and
/// that the snapshot is still sealed.
pub fn verify(paths: &Paths, digest: &str) -> Result<Manifest, SnapshotError> {
    let dir = paths.snapshot_dir(digest);
    let tampered = |source| SnapshotError::Tampered {
        digest: digest.to_owned(),
        source,
    };
    let manifest = Manifest::read_from(&dir).map_err(tampered)?;
    if manifest.digest() != digest {
        return Err(tampered(ManifestError::Mismatch {
            path: MANIFEST_FILE.to_owned(),
            reason: "manifest digest differs from the snapshot name",
        }));
    }
    manifest.verify_tree(&dir).map_err(tampered)?;
    check_sealed(&dir, Path::new("")).map_err(|e| match e {
        Sealed::Mismatch(source) => tampered(source),
        Sealed::Fs(e) => e.into(),
    })?;
    Ok(manifest)
}

/// Why [`check_sealed`] failed.
enum Sealed {
    /// The seal is broken.
    Mismatch(ManifestError),
    /// The tree could not be read.
    Fs(FsError),
}

/// Every directory under and including `root.join(rel)` has the full mode
/// [`SEALED_DIR_MODE`] (no write bit, no sticky bit), `release.json` at
/// the root is a regular file with the full mode [`MANIFEST_MODE`], and
/// every regular file has exactly one link (`st_nlink == 1`): a file
/// hard-linked from outside the snapshot can be changed through that other
/// name, so it is not sealed. Entries themselves are checked by
/// [`Manifest::verify_tree`].
fn check_sealed(root: &Path, rel: &Path) -> Result<(), Sealed> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let broken = |rel: &Path, reason| {
        let path = match rel.to_string_lossy() {
            p if p.is_empty() => ".".to_owned(),
            p => p.into_owned(),
        };
        Sealed::Mismatch(ManifestError::Mismatch { path, reason })
    };
    let dir = root.join(rel);
    let meta = fs::symlink_metadata(&dir)
        .at("inspect", &dir)
        .map_err(Sealed::Fs)?;
    if meta.permissions().mode() & 0o7777 != SEALED_DIR_MODE {
        return Err(broken(rel, "directory mode differs from the sealed 0555"));
    }
    if rel.as_os_str().is_empty() {
        let json = dir.join(MANIFEST_FILE);
        let meta = fs::symlink_metadata(&json)
            .at("inspect", &json)
            .map_err(Sealed::Fs)?;
        if !meta.is_file() || meta.permissions().mode() & 0o7777 != MANIFEST_MODE {
            return Err(broken(
                Path::new(MANIFEST_FILE),
                "not a regular file with the sealed mode 0444",
            ));
        }
    }
    for entry in fs::read_dir(&dir)
        .at("read directory", &dir)
        .map_err(Sealed::Fs)?
    {
        let entry = entry.at("read directory", &dir).map_err(Sealed::Fs)?;
        let kind = entry
            .file_type()
            .at("inspect", &entry.path())
            .map_err(Sealed::Fs)?;
        if kind.is_dir() {
            check_sealed(root, &rel.join(entry.file_name()))?;
        } else if kind.is_file() {
            let meta = entry
                .metadata()
                .at("inspect", &entry.path())
                .map_err(Sealed::Fs)?;
            if meta.nlink() != 1 {
                return Err(broken(
                    &rel.join(entry.file_name()),
                    "a file with another hard link (st_nlink is not 1)",
                ));
            }
        }
    }
    Ok(())
}

/// What is at `releases/<digest>` before an install of the release
/// `expected` describes.
#[derive(Debug)]
pub enum Existing {
    /// Nothing.
    Missing,
    /// A complete snapshot that verifies and whose `release.json` is the
    /// one being installed (build identity included).
    Verified,
    /// Something that does not verify; the reason names the first difference.
    Tampered(String),
}

/// Classifies `releases/<digest>` for the release `expected` describes (the
/// digest is `expected`'s). The digest does not cover the build identity, so
/// a snapshot whose `release.json` differs from `expected` in any field is
/// not the release being installed and counts as tampered, never reused.
pub fn existing(paths: &Paths, expected: &Manifest) -> Result<Existing, SnapshotError> {
    let digest = &expected.digest();
    let dir = paths.snapshot_dir(digest);
    match fs::symlink_metadata(&dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Existing::Missing),
        Err(e) => return Err(FsError::new("inspect", dir, e).into()),
        Ok(_) => {}
    }
    match verify(paths, digest) {
        Ok(found) if found == *expected => Ok(Existing::Verified),
        Ok(found) => {
            let what = if found.build != expected.build {
                "build identity differs from the release being installed"
            } else {
                "differs from the release being installed"
            };
            Ok(Existing::Tampered(
                ManifestError::Mismatch {
                    path: MANIFEST_FILE.to_owned(),
                    reason: what,
                }
                .to_string(),
            ))
        }
        Err(SnapshotError::Tampered { source, .. }) => Ok(Existing::Tampered(source.to_string())),
        Err(other) => Err(other),
    }
}

/// Installed snapshot digests (directory names), sorted.
pub fn list_digests(paths: &Paths) -> Result<Vec<String>, SnapshotError> {
    let mut out = Vec::new();
    let rd = match fs::read_dir(&paths.releases_root) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
        other => other.at("read directory", &paths.releases_root)?,
    };
    for entry in rd {
        let entry = entry.at("read directory", &paths.releases_root)?;
        if let Some(name) = entry.file_name().to_str()
            && is_digest(name)
        {
            out.push(name.to_owned());
        }
    }
    out.sort();
    Ok(out)
}

/// Resolves a full digest or a unique prefix of an installed snapshot.
pub fn resolve_digest(paths: &Paths, wanted: &str) -> Result<String, SnapshotError> {
    let wanted = wanted.trim().to_ascii_lowercase();
    if wanted.is_empty() || !wanted.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(SnapshotError::NotFound(wanted));
    }
    let matches: Vec<String> = list_digests(paths)?
        .into_iter()
        .filter(|d| d.starts_with(&wanted))
        .collect();
    match matches.len() {
        0 => Err(SnapshotError::NotFound(wanted)),
        1 => Ok(matches.into_iter().next().expect("one match")),
        _ => Err(SnapshotError::Ambiguous(wanted)),
    }
}

/// Moves a snapshot directory aside to `.quarantine-<digest>-<n>` and returns
/// the new path.
pub fn quarantine_path(paths: &Paths, digest: &str) -> PathBuf {
    let mut n = 1u32;
    loop {
        let path = paths
            .releases_root
            .join(format!(".quarantine-{digest}-{n}"));
        if fs::symlink_metadata(&path).is_err() {
            return path;
        }
        n += 1;
    }
}

/// Removes snapshot `digest`: renamed to `.trash-*` first, then deleted.
pub fn remove_snapshot(paths: &Paths, digest: &str) -> Result<(), FsError> {
    let dir = paths.snapshot_dir(digest);
    let trash = paths
        .releases_root
        .join(format!(".trash-{}", fsx::random_suffix()));
    fsx::rename_durable(&dir, &trash)?;
    fsx::remove_tree(&trash)
}

/// The manifest of the release tree for `exe`, without copying anything:
/// `exe` as `bin/lapis-ai-controller` (mode [`lapis_release::archive::BINARY_MODE`]) plus the licence
/// files compiled into `lapis-release`, the same entries an archive of `exe`
/// lists ([`lapis_release::release_entries`]), so one binary has one digest
/// whether it is installed from itself or from its archive.
pub fn manifest_for_executable(
    exe: &Path,
    build: &BuildIdentity,
) -> Result<Manifest, SnapshotError> {
    let (sha256, size) = lapis_release::sha256_file(exe).at("read", exe)?;
    let sha256 = lapis_release::Sha256Hex::parse(&sha256).expect("sha256_file yields hex");
    let manifest = Manifest {
        schema: lapis_release::MANIFEST_SCHEMA,
        name: PRODUCT.to_owned(),
        build: build.clone(),
        entries: lapis_release::release_entries(size, &sha256),
    };
    // Round-trip through the parser so the invariants are checked once.
    Manifest::parse(&manifest.to_json()).map_err(|source| SnapshotError::BadTree {
        path: exe.to_path_buf(),
        source,
    })
}
