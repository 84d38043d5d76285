//! Immutable, digest-addressed release snapshots under the releases root.
//!
//! A snapshot directory `releases/<digest>` only ever appears by a rename of a
//! complete, fsynced and verified staging directory, so a directory with a
//! digest name is never partial. Its `release.json` is the manifest whose
//! digest is the directory name; [`verify`] re-checks both the name and every
//! byte, so a snapshot modified after install is recognised and never reused
//! or re-activated.
//!
//! Names under the releases root:
//!
//! - `<64 hex>`: a complete snapshot (directories sealed 0555).
//! - `.staging-<random>`: a tree being assembled. Its creator holds an `flock`
//!   on the directory for as long as it works on it, so cleanup can tell an
//!   abandoned one (lock free: its owner died) from one in use.
//! - `.quarantine-<digest>-<n>`: a snapshot that failed verification, moved
//!   aside so it can be inspected; `releases gc` removes them.
//! - `.trash-<random>`: a snapshot being deleted (renamed first, so a partial
//!   delete never sits under a digest name).
//! - `.lock`, `state.json`: the releases lock and the activation history.

use std::fs::{self, File};
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use lapis_release::{BuildIdentity, Entry, MANIFEST_FILE, Manifest, ManifestError};
use thiserror::Error;

use crate::fsx::{self, FsError, IoContext, LockGuard};
use crate::paths::{PRODUCT, Paths, is_digest};

/// Mode of the binary in a snapshot built from a local executable.
pub const BIN_MODE: u32 = 0o755;
/// Mode of `release.json` and of sealed snapshot directories.
const MANIFEST_MODE: u32 = 0o444;
const SEALED_DIR_MODE: u32 = 0o555;

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
/// directory and that the tree matches it byte for byte.
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
    Ok(manifest)
}

/// What is at `releases/<digest>` before an install.
#[derive(Debug)]
pub enum Existing {
    /// Nothing.
    Missing,
    /// A complete snapshot that verifies.
    Verified,
    /// Something that does not verify; the reason names the first difference.
    Tampered(String),
}

/// Classifies `releases/<digest>`.
pub fn existing(paths: &Paths, digest: &str) -> Result<Existing, SnapshotError> {
    let dir = paths.snapshot_dir(digest);
    match fs::symlink_metadata(&dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Existing::Missing),
        Err(e) => return Err(FsError::new("inspect", dir, e).into()),
        Ok(_) => {}
    }
    match verify(paths, digest) {
        Ok(_) => Ok(Existing::Verified),
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

/// A staging directory `releases/.staging-<random>`, locked by this process
/// until dropped. Dropping it without [`StagingDir::commit`] removes it.
///
/// This is also the entry point for installing a release archive: extract
/// into [`StagingDir::path`], then hand the directory to
/// [`crate::install_staged`], which verifies it and renames it into place
/// without copying.
#[derive(Debug)]
pub struct StagingDir {
    /// The directory.
    path: PathBuf,
    /// Held while the directory is ours; cleanup skips locked staging dirs.
    _lock: Option<LockGuard>,
    /// Set once the directory was renamed away; nothing left to remove.
    done: bool,
}

impl StagingDir {
    /// Creates a fresh, locked staging directory under the releases root
    /// (creating the root if needed).
    pub fn create(paths: &Paths) -> Result<StagingDir, FsError> {
        use std::os::unix::fs::MetadataExt;
        fsx::create_dir_all_mode(&paths.releases_root, 0o755)?;
        // A concurrent cleanup may lock and delete a staging dir between our
        // mkdir and our lock; then the lock fails or the directory we locked
        // is gone from its name, and we simply try a fresh name.
        let mut attempts = 0;
        loop {
            attempts += 1;
            let path = paths
                .releases_root
                .join(format!(".staging-{}", fsx::random_suffix()));
            fs::DirBuilder::new()
                .create(&path)
                .at("create directory", &path)?;
            let file = File::open(&path).at("open", &path)?;
            let ino = file.metadata().at("inspect", &path)?.ino();
            if let Some(lock) = LockGuard::try_exclusive(file, &path)?
                && fs::metadata(&path).is_ok_and(|m| m.ino() == ino)
            {
                return Ok(StagingDir {
                    path,
                    _lock: Some(lock),
                    done: false,
                });
            }
            if attempts >= 8 {
                return Err(FsError::new(
                    "lock staging directory",
                    path,
                    io::Error::from(io::ErrorKind::WouldBlock),
                ));
            }
        }
    }

    /// The directory to fill.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Renames the staging directory to `to` (durably); it is no longer ours.
    pub(crate) fn commit(mut self, to: &Path) -> Result<(), FsError> {
        fsx::rename_durable(&self.path, to)?;
        self.done = true;
        Ok(())
    }

    /// Exchanges the staging directory with the existing `to`; afterwards
    /// this directory holds what `to` held.
    pub(crate) fn exchange(&self, to: &Path) -> Result<(), FsError> {
        fsx::exchange(&self.path, to)
    }

    /// Renames what the staging directory now holds to `to` and lets go.
    pub(crate) fn move_to(self, to: &Path) -> Result<(), FsError> {
        self.commit(to)
    }
}

impl Drop for StagingDir {
    fn drop(&mut self) {
        if !self.done {
            let _ = fsx::remove_tree(&self.path);
        }
    }
}

/// What a cleanup removed.
#[derive(Debug, Default)]
pub struct Cleanup {
    /// Paths removed.
    pub removed: Vec<PathBuf>,
}

/// Removes what interrupted installs left behind: unlocked `.staging-*`
/// directories, `.trash-*` directories and temporary files under the releases
/// root, and temporary launcher links. Call with the releases lock held.
pub fn cleanup_leftovers(paths: &Paths) -> Result<Cleanup, FsError> {
    let mut cleanup = Cleanup::default();
    let root = &paths.releases_root;
    let rd = match fs::read_dir(root) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(cleanup),
        other => other.at("read directory", root)?,
    };
    for entry in rd {
        let entry = entry.at("read directory", root)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if name.starts_with(".staging-") {
            // A staging dir whose lock we can take has no living owner.
            let Ok(file) = File::open(&path) else {
                continue;
            };
            if let Some(_guard) = LockGuard::try_exclusive(file, &path)? {
                fsx::remove_tree(&path)?;
                cleanup.removed.push(path);
            }
        } else if name.starts_with(".trash-") || (name.starts_with('.') && name.contains(".tmp-")) {
            fsx::remove_tree(&path)?;
            cleanup.removed.push(path);
        }
    }
    let launcher_dir = fsx::parent_of(&paths.launcher);
    if let (Some(name), Ok(rd)) = (paths.launcher.file_name(), fs::read_dir(launcher_dir)) {
        let prefix = format!(".{}.tmp-", name.to_string_lossy());
        for entry in rd.flatten() {
            let is_link = entry.file_type().map(|t| t.is_symlink()).unwrap_or(false);
            if is_link && entry.file_name().to_string_lossy().starts_with(&prefix) {
                let path = entry.path();
                fs::remove_file(&path).at("remove", &path)?;
                cleanup.removed.push(path);
            }
        }
    }
    Ok(cleanup)
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

/// The manifest of a release tree holding only `exe` as
/// `bin/lapis-ai-controller` (mode [`BIN_MODE`]), without copying anything.
pub fn manifest_for_executable(
    exe: &Path,
    build: &BuildIdentity,
) -> Result<Manifest, SnapshotError> {
    let (sha256, size) = lapis_release::sha256_file(exe).at("read", exe)?;
    let entries = vec![Entry::File {
        path: format!("bin/{PRODUCT}"),
        mode: BIN_MODE,
        size,
        sha256,
    }];
    let manifest = Manifest {
        schema: lapis_release::MANIFEST_SCHEMA,
        name: PRODUCT.to_owned(),
        build: build.clone(),
        entries,
    };
    // Round-trip through the parser so the invariants are checked once.
    Manifest::parse(&manifest.to_json()).map_err(|source| SnapshotError::BadTree {
        path: exe.to_path_buf(),
        source,
    })
}

/// Fills `staging` with `exe` as the release tree described by `manifest`
/// (from [`manifest_for_executable`]). `after_copy` runs once the bytes are
/// written but not yet synced (fault injection).
pub fn stage_executable(
    staging: &StagingDir,
    exe: &Path,
    manifest: &Manifest,
    after_copy: &dyn Fn(),
) -> Result<(), SnapshotError> {
    let bin_dir = staging.path().join("bin");
    fs::create_dir(&bin_dir).at("create directory", &bin_dir)?;
    let bin = bin_dir.join(PRODUCT);
    fs::copy(exe, &bin).at("copy", exe)?;
    fs::set_permissions(&bin, fs::Permissions::from_mode(BIN_MODE)).at("chmod", &bin)?;
    after_copy();
    File::open(&bin)
        .and_then(|f| f.sync_all())
        .at("fsync", &bin)?;
    fsx::fsync_dir(&bin_dir)?;
    write_manifest(staging, manifest)
}

/// Copies the release tree at `tree` (with its own `release.json`) into
/// `staging`: files with their manifest modes, links as links, nothing else.
/// Returns the tree's manifest; `staging` is verified later.
pub fn stage_tree(staging: &StagingDir, tree: &Path) -> Result<Manifest, SnapshotError> {
    let bad = |source| SnapshotError::BadTree {
        path: tree.to_path_buf(),
        source,
    };
    let manifest = Manifest::read_from(tree).map_err(bad)?;
    for entry in &manifest.entries {
        let rel = Path::new(entry.path());
        let dst = staging.path().join(rel);
        if let Some(parent) = rel.parent().filter(|p| !p.as_os_str().is_empty()) {
            let dir = staging.path().join(parent);
            fs::create_dir_all(&dir).at("create directory", &dir)?;
        }
        match entry {
            Entry::File { mode, .. } => {
                let src = tree.join(rel);
                let meta = fs::symlink_metadata(&src).at("inspect", &src)?;
                if !meta.is_file() {
                    return Err(bad(ManifestError::Mismatch {
                        path: entry.path().to_owned(),
                        reason: "not a regular file",
                    }));
                }
                fs::copy(&src, &dst).at("copy", &src)?;
                fs::set_permissions(&dst, fs::Permissions::from_mode(*mode)).at("chmod", &dst)?;
                File::open(&dst)
                    .and_then(|f| f.sync_all())
                    .at("fsync", &dst)?;
            }
            Entry::Link { target, .. } => {
                std::os::unix::fs::symlink(target, &dst).at("create symlink", &dst)?;
            }
        }
    }
    write_manifest(staging, &manifest)?;
    Ok(manifest)
}

/// Writes `release.json` into the staging dir and syncs every directory.
fn write_manifest(staging: &StagingDir, manifest: &Manifest) -> Result<(), SnapshotError> {
    let path = staging.path().join(MANIFEST_FILE);
    if !path.exists() {
        fsx::write_atomic(&path, &manifest.to_json(), MANIFEST_MODE)?;
    }
    sync_dirs(staging.path())?;
    Ok(())
}

fn sync_dirs(dir: &Path) -> Result<(), FsError> {
    for entry in fs::read_dir(dir).at("read directory", dir)? {
        let entry = entry.at("read directory", dir)?;
        if entry.file_type().at("inspect", &entry.path())?.is_dir() {
            sync_dirs(&entry.path())?;
        }
    }
    fsx::fsync_dir(dir)
}

/// Verifies a filled staging dir against `manifest` (every file and link,
/// nothing extra; links stay inside the tree) and seals it read-only.
pub fn verify_staged(staging: &StagingDir, manifest: &Manifest) -> Result<(), SnapshotError> {
    let bad = |source| SnapshotError::BadTree {
        path: staging.path().to_path_buf(),
        source,
    };
    let on_disk = Manifest::read_from(staging.path()).map_err(bad)?;
    if on_disk != *manifest {
        return Err(bad(ManifestError::Mismatch {
            path: MANIFEST_FILE.to_owned(),
            reason: "differs from the manifest being installed",
        }));
    }
    manifest.verify_tree(staging.path()).map_err(bad)?;
    let bin = staging.path().join("bin").join(PRODUCT);
    if !bin.is_file() {
        return Err(bad(ManifestError::Mismatch {
            path: format!("bin/{PRODUCT}"),
            reason: "the release has no binary",
        }));
    }
    let json = staging.path().join(MANIFEST_FILE);
    fs::set_permissions(&json, fs::Permissions::from_mode(MANIFEST_MODE)).at("chmod", &json)?;
    fsx::set_dir_modes(staging.path(), SEALED_DIR_MODE)?;
    Ok(())
}
