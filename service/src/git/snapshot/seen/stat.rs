//! One path's stat data ([`Stat`]), read relative to a descriptor of its
//! directory so no whole path is resolved per name.
//!
//! What must stay true: a symbolic link is stated itself, never followed;
//! what cannot be read is `None` (to the check, a change), never an error
//! that stops it.

use std::ffi::CStr;
use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The stat data a change to a path shows in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::git::snapshot) struct Stat {
    pub(super) dev: u64,
    pub(super) ino: u64,
    pub(super) mode: u32,
    pub(super) uid: u32,
    pub(super) gid: u32,
    pub(super) size: u64,
    pub(super) mtime: (i64, i64),
    pub(super) ctime: (i64, i64),
}

impl Stat {
    /// The stat data of `name` in the directory `dir`, not following a
    /// symbolic link (one path component to resolve, not a whole path);
    /// `None` when it does not exist (or cannot be read).
    pub(super) fn at(dir: &OwnedFd, name: &CStr) -> Option<Stat> {
        use nix::fcntl::AtFlags;
        let m = nix::sys::stat::fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW).ok()?;
        Some(Stat {
            dev: m.st_dev,
            ino: m.st_ino,
            mode: m.st_mode,
            uid: m.st_uid,
            gid: m.st_gid,
            size: u64::try_from(m.st_size).unwrap_or(u64::MAX),
            mtime: (m.st_mtime, m.st_mtime_nsec),
            ctime: (m.st_ctime, m.st_ctime_nsec),
        })
    }

    pub(super) fn is_dir(&self) -> bool {
        self.mode & nix::libc::S_IFMT == nix::libc::S_IFDIR
    }
}

/// A descriptor for stating names in `dir` (`O_PATH`: nothing is read
/// through it), `None` when it cannot be opened.
pub(super) fn open_dir(dir: &Path) -> Option<OwnedFd> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_PATH | nix::libc::O_DIRECTORY)
        .open(dir)
        .ok()
        .map(OwnedFd::from)
}
