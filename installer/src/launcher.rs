//! The launcher: one symlink on `PATH` that points into the active snapshot.
//!
//! The launcher is the source of truth for which snapshot is active. It only
//! ever moves by an atomic symlink swap ([`crate::fsx::swap_symlink`]), so at
//! every instant it points at the old complete snapshot or the new one. A
//! path this installer did not create (anything but a symlink to
//! `releases/<digest>/bin/lapis-ai-controller`) is never replaced without
//! `--force`.

use std::fs::{self, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::fsx::{self, FsError};
use crate::paths::{PRODUCT, Paths, is_digest};

/// What is at the launcher path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LauncherState {
    /// Nothing.
    Missing,
    /// Our symlink, pointing at `releases/<digest>/bin/lapis-ai-controller`.
    Ours {
        /// The active snapshot.
        digest: String,
    },
    /// Something else; the text says what (for the refusal message).
    Foreign {
        /// `a regular file`, `a directory`, `a symlink to …`.
        what: String,
        /// Whether it is a directory (never replaced, even with `--force`).
        is_dir: bool,
    },
}

impl LauncherState {
    /// The active digest, when the launcher is ours.
    pub fn digest(&self) -> Option<&str> {
        match self {
            LauncherState::Ours { digest } => Some(digest),
            _ => None,
        }
    }
}

/// Why the launcher could not be placed.
#[derive(Debug, Error)]
pub enum LauncherError {
    /// The path holds something this installer did not create.
    #[error(
        "{path} is {what}, not a launcher this installer created; pass --force to replace it or --install-path to use another path"
    )]
    Foreign {
        /// The launcher path.
        path: PathBuf,
        /// What is there.
        what: String,
    },
    /// The path is a directory.
    #[error("{path} is a directory; choose another --install-path")]
    Directory {
        /// The launcher path.
        path: PathBuf,
    },
    /// The directory of the launcher cannot be written.
    #[error("cannot write the launcher directory {dir}: {source}")]
    Unwritable {
        /// The directory (or its nearest existing ancestor).
        dir: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Another file-system failure.
    #[error(transparent)]
    Fs(#[from] FsError),
}

/// Reads the launcher path without following it.
pub fn state(paths: &Paths) -> Result<LauncherState, FsError> {
    let path = &paths.launcher;
    let meta = match fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(LauncherState::Missing),
        Err(e) => return Err(FsError::new("inspect", path, e)),
        Ok(m) => m,
    };
    if meta.file_type().is_symlink() {
        let target = fs::read_link(path).map_err(|e| FsError::new("read link", path, e))?;
        if let Some(digest) = digest_of_target(paths, &target) {
            return Ok(LauncherState::Ours { digest });
        }
        return Ok(LauncherState::Foreign {
            what: format!("a symlink to {}", target.display()),
            is_dir: false,
        });
    }
    let is_dir = meta.is_dir();
    Ok(LauncherState::Foreign {
        what: if is_dir {
            "a directory".to_owned()
        } else {
            "a regular file".to_owned()
        },
        is_dir,
    })
}

/// The digest when `target` is exactly `<releases root>/<digest>/bin/<product>`.
pub fn digest_of_target(paths: &Paths, target: &Path) -> Option<String> {
    let rel = target.strip_prefix(&paths.releases_root).ok()?;
    let parts: Vec<&str> = rel.iter().map(|c| c.to_str()).collect::<Option<_>>()?;
    match parts.as_slice() {
        [digest, "bin", name] if is_digest(digest) && *name == PRODUCT => {
            Some((*digest).to_owned())
        }
        _ => None,
    }
}

/// Checks, before anything changes, that the launcher can be placed: the
/// path is ours, missing, or `force` allows replacing it, and its directory
/// (or the nearest existing ancestor that would hold it) is writable.
pub fn preflight(paths: &Paths, force: bool) -> Result<LauncherState, LauncherError> {
    let current = state(paths)?;
    match &current {
        LauncherState::Foreign { is_dir: true, .. } => {
            return Err(LauncherError::Directory {
                path: paths.launcher.clone(),
            });
        }
        LauncherState::Foreign { what, .. } if !force => {
            return Err(LauncherError::Foreign {
                path: paths.launcher.clone(),
                what: what.clone(),
            });
        }
        _ => {}
    }
    let mut dir = fsx::parent_of(&paths.launcher).to_path_buf();
    while !dir.exists() {
        match dir.parent() {
            Some(p) => dir = p.to_path_buf(),
            None => break,
        }
    }
    probe_writable(&dir).map_err(|source| LauncherError::Unwritable { dir, source })?;
    Ok(current)
}

/// Creates and removes a probe file: the only reliable test (permission bits
/// say nothing for root, immutable directories or read-only mounts).
fn probe_writable(dir: &Path) -> io::Result<()> {
    if !dir.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotADirectory,
            "not a directory",
        ));
    }
    let probe = dir.join(format!(".lapis-probe-{}", fsx::random_suffix()));
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)?;
    fs::remove_file(&probe)
}

/// Points the launcher at `releases/<digest>` atomically (creating its
/// directory if needed). `before_rename` runs once the temporary link exists.
pub fn activate(paths: &Paths, digest: &str, before_rename: &dyn Fn()) -> Result<(), FsError> {
    fsx::create_dir_all_mode(fsx::parent_of(&paths.launcher), 0o755)?;
    fsx::swap_symlink(&paths.launcher, &paths.snapshot_bin(digest), before_rename)
}

/// Removes the launcher if it is ours. Returns whether it was removed.
pub fn remove_if_ours(paths: &Paths) -> Result<bool, FsError> {
    if let LauncherState::Ours { .. } = state(paths)? {
        fs::remove_file(&paths.launcher).map_err(|e| FsError::new("remove", &paths.launcher, e))?;
        fsx::fsync_dir(fsx::parent_of(&paths.launcher))?;
        return Ok(true);
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::paths::test_paths as paths;

    #[test]
    fn classifies_launcher_paths() {
        let dir = tempfile::tempdir().unwrap();
        let p = paths(dir.path());
        assert_eq!(state(&p).unwrap(), LauncherState::Missing);
        let d = "ab".repeat(32);
        activate(&p, &d, &|| {}).unwrap();
        assert_eq!(
            state(&p).unwrap(),
            LauncherState::Ours { digest: d.clone() }
        );
        assert!(preflight(&p, false).is_ok());

        fs::remove_file(&p.launcher).unwrap();
        std::os::unix::fs::symlink("/usr/bin/true", &p.launcher).unwrap();
        let err = preflight(&p, false).unwrap_err().to_string();
        assert!(err.contains("a symlink to /usr/bin/true"), "{err}");
        assert!(err.contains("--force"), "{err}");
        assert!(preflight(&p, true).is_ok());

        fs::remove_file(&p.launcher).unwrap();
        fs::create_dir(&p.launcher).unwrap();
        assert!(matches!(
            preflight(&p, true),
            Err(LauncherError::Directory { .. })
        ));
    }

    #[test]
    fn target_shape_is_exact() {
        let dir = tempfile::tempdir().unwrap();
        let p = paths(dir.path());
        let d = "0".repeat(64);
        assert_eq!(digest_of_target(&p, &p.snapshot_bin(&d)), Some(d.clone()));
        assert_eq!(
            digest_of_target(&p, &p.snapshot_dir(&d).join("bin/other")),
            None
        );
        assert_eq!(digest_of_target(&p, Path::new("/usr/bin/x")), None);
        assert_eq!(
            digest_of_target(&p, &p.releases_root.join(".staging-x/bin").join(PRODUCT)),
            None
        );
    }
}
