//! Staging: where a release tree is assembled and verified before it gets
//! its digest name.
//!
//! A staging directory `releases/.staging-<random>` is locked (`flock` on the
//! directory) by the process filling it for as long as it exists, so
//! [`cleanup_leftovers`] removes only the ones whose owner died (a killed
//! install) and never one still being filled, even by a process that does not
//! hold the releases lock (an archive being extracted). A staging directory
//! becomes a snapshot only by one rename, after every file was fsynced and
//! verified against the manifest and the directories were sealed read-only.

use std::fs::{self, File};
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use lapis_release::archive::BINARY_MODE;
use lapis_release::{Entry, MANIFEST_FILE, Manifest, ManifestError};

use crate::fsx::{self, FsError, IoContext, LockGuard};
use crate::paths::{PRODUCT, Paths};
use crate::snapshot::{MANIFEST_MODE, SEALED_DIR_MODE, SnapshotError};

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

    /// Renames the staging directory to `to`; it is no longer ours.
    /// The new name becomes durable when the caller fsyncs the releases
    /// root, which the install sequence does before the launcher moves.
    pub(crate) fn commit(mut self, to: &Path) -> Result<(), FsError> {
        fsx::rename_deferred(&self.path, to)?;
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
            let file_name = entry.file_name().to_string_lossy().into_owned();
            let is_link = entry.file_type().map(|t| t.is_symlink()).unwrap_or(false);
            // Temporary launcher links, and write probes of a killed preflight.
            if (is_link && file_name.starts_with(&prefix)) || file_name.starts_with(".lapis-probe-")
            {
                let path = entry.path();
                fs::remove_file(&path).at("remove", &path)?;
                cleanup.removed.push(path);
            }
        }
    }
    Ok(cleanup)
}

/// Fills `staging` with `exe` and the licence files as the release tree
/// described by `manifest` (from [`manifest_for_executable`]). `after_copy` runs once the bytes are
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
    fs::set_permissions(&bin, fs::Permissions::from_mode(BINARY_MODE)).at("chmod", &bin)?;
    after_copy();
    // write_new_file syncs each licence file itself.
    for licence in lapis_release::LICENSE_FILES {
        let path = staging.path().join(licence.path);
        fsx::write_new_file(&path, licence.bytes, lapis_release::SHIPPED_FILE_MODE)?;
    }
    // The staging dir is private (locked, unnamed), so release.json needs no
    // atomic replace, only durability before the directory gets its name.
    let json = staging.path().join(MANIFEST_FILE);
    fs::write(&json, manifest.to_json()).at("write", &json)?;
    fsx::fsync_all(&[&bin, &json, &bin_dir, staging.path()])?;
    Ok(())
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
    // The source must match its own manifest exactly (nothing extra either);
    // the copy is verified again before it is named.
    manifest.verify_tree(tree).map_err(bad)?;
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
            }
            Entry::Link { target, .. } => {
                std::os::unix::fs::symlink(target, &dst).at("create symlink", &dst)?;
            }
        }
    }
    // Durability comes later, once for the whole tree (`install_staged`).
    fsx::write_new_file(
        &staging.path().join(MANIFEST_FILE),
        &manifest.to_json(),
        MANIFEST_MODE,
    )?;
    Ok(manifest)
}

/// Fsyncs every regular file and directory under `dir` (children first), so
/// a tree filled by someone else (an archive extraction) is durable before
/// it is renamed into place.
pub fn sync_tree(dir: &Path) -> Result<(), FsError> {
    let mut paths = Vec::new();
    collect_tree(dir, &mut paths)?;
    let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    fsx::fsync_all(&refs)
}

/// Regular files and directories under `dir`, and `dir` itself.
fn collect_tree(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), FsError> {
    for entry in fs::read_dir(dir).at("read directory", dir)? {
        let entry = entry.at("read directory", dir)?;
        let path = entry.path();
        let kind = entry.file_type().at("inspect", &path)?;
        if kind.is_dir() {
            collect_tree(&path, out)?;
        } else if kind.is_file() {
            out.push(path);
        }
    }
    out.push(dir.to_path_buf());
    Ok(())
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
