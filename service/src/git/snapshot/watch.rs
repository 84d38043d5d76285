//! A workspace's watch: inotify on every directory its last snapshot's
//! tree depends on, so the next snapshot can tell that nothing happened in
//! the tree at all without stating a single path ([`Watch::quiet`]).
//!
//! Why a turn needs it: a snapshot of an unchanged tree still stats every
//! path ([`super::seen`]), about 100 ms on a 50,000-file tree, twice a
//! turn; with the watch it is one `read` that finds no event.
//!
//! What must stay true:
//! - the watch answers "quiet" only when every directory of the previous
//!   snapshot's tree (and every directory holding a file that decides what
//!   git ignores or how it hashes) was watched since before that
//!   snapshot began and no event arrived since; a snapshot that had to add
//!   watches (a new directory, a first snapshot) leaves the watch
//!   untrusted, so the one after it states every path again ([`Watch::cover`]);
//! - every doubt counts as an event: a full queue (`IN_Q_OVERFLOW`), a
//!   watch the kernel dropped, a read error, a directory that cannot be
//!   watched (the user's watch limit) — then the snapshot falls back to
//!   stating every path, as it did before the watch;
//! - a directory that only holds rules files counts only events naming
//!   those files (a home directory's other files change all the time).
//!
//! The trust is the kernel's, as git's own fsmonitor trusts a watcher: a
//! write through a hard link from outside the tree, through a shared
//! `mmap`, or on a network file system by another host raises no event
//! here. A workspace where that matters turns the watch off with
//! `evidence: "stat"` (or evidence entirely with `"off"`).
//!
//! Linux only (inotify); elsewhere [`Watch::start`] gives `None` and every
//! snapshot states its paths.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;

/// The directories to watch: each with the names that matter in it
/// (`None`: every name).
pub(super) type Dirs = Vec<(PathBuf, Option<Vec<OsString>>)>;

#[cfg(target_os = "linux")]
mod imp {
    use super::*;
    use nix::errno::Errno;
    use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};

    /// What a watched directory reports.
    fn mask() -> AddWatchFlags {
        AddWatchFlags::IN_MODIFY
            | AddWatchFlags::IN_ATTRIB
            | AddWatchFlags::IN_CLOSE_WRITE
            | AddWatchFlags::IN_MOVED_FROM
            | AddWatchFlags::IN_MOVED_TO
            | AddWatchFlags::IN_CREATE
            | AddWatchFlags::IN_DELETE
            | AddWatchFlags::IN_DELETE_SELF
            | AddWatchFlags::IN_MOVE_SELF
            | AddWatchFlags::IN_ONLYDIR
            | AddWatchFlags::IN_DONT_FOLLOW
    }

    /// One workspace's inotify instance and its watches.
    #[derive(Debug)]
    pub(in crate::git::snapshot) struct Watch {
        /// The instance (non-blocking).
        fd: Inotify,
        /// Each watch: its directory's names that matter (`None`: all).
        watches: HashMap<WatchDescriptor, Option<Vec<OsString>>>,
        /// The watched directories.
        dirs: HashMap<PathBuf, WatchDescriptor>,
        /// Every directory of the last snapshot was watched since before
        /// it began, and no event was lost: "quiet" can be believed.
        trusted: bool,
    }

    impl Watch {
        /// A new, empty watch (`None` when no inotify instance can be had).
        pub(in crate::git::snapshot) fn start() -> Option<Watch> {
            let fd = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
                .map_err(|e| tracing::debug!(error = %e, "no workspace watch"))
                .ok()?;
            Some(Watch {
                fd,
                watches: HashMap::new(),
                dirs: HashMap::new(),
                trusted: false,
            })
        }

        /// Reads every pending event: `true` when none mattered and the
        /// watch was trusted (nothing in the tree changed since the last
        /// snapshot began). Either way the queue is empty afterwards, so
        /// the snapshot that follows sees only what happens from now on.
        pub(in crate::git::snapshot) fn quiet(&mut self) -> bool {
            let mut quiet = self.trusted;
            loop {
                match self.fd.read_events() {
                    Ok(events) if events.is_empty() => break,
                    Ok(events) => {
                        for e in events {
                            if e.mask.intersects(
                                AddWatchFlags::IN_Q_OVERFLOW | AddWatchFlags::IN_IGNORED,
                            ) {
                                quiet = false;
                                if e.mask.contains(AddWatchFlags::IN_IGNORED) {
                                    self.forget(e.wd);
                                }
                                continue;
                            }
                            let matters = match self.watches.get(&e.wd) {
                                Some(None) => true,
                                Some(Some(names)) => {
                                    e.name.as_ref().is_none_or(|n| names.contains(n))
                                }
                                // A watch removed meanwhile.
                                None => false,
                            };
                            quiet &= !matters;
                        }
                    }
                    Err(Errno::EAGAIN) => break,
                    Err(e) => {
                        tracing::debug!(error = %e, "workspace watch unreadable");
                        quiet = false;
                        break;
                    }
                }
            }
            quiet
        }

        /// Whether the next [`Watch::quiet`] will say so, without reading
        /// anything: trusted, and no event waiting.
        pub(in crate::git::snapshot) fn looks_quiet(&self) -> bool {
            use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
            use std::os::fd::AsFd;
            if !self.trusted {
                return false;
            }
            let mut fds = [PollFd::new(self.fd.as_fd(), PollFlags::POLLIN)];
            matches!(poll(&mut fds, PollTimeout::ZERO), Ok(0))
        }

        fn forget(&mut self, wd: WatchDescriptor) {
            self.watches.remove(&wd);
            self.dirs.retain(|_, w| *w != wd);
        }

        /// Watches every directory in `dirs` (after a snapshot that stated
        /// or staged them); trusted from now on when each was watched
        /// already. `false` when one cannot be watched (the caller drops
        /// the watch).
        pub(in crate::git::snapshot) fn cover(&mut self, dirs: Dirs) -> bool {
            let mut added = false;
            for (dir, names) in dirs {
                if let Some(wd) = self.dirs.get(&dir) {
                    // The same directory may gain names (a new rules file).
                    self.watches.insert(*wd, names);
                    continue;
                }
                match self.fd.add_watch(&dir, mask()) {
                    Ok(wd) => {
                        self.watches.insert(wd, names);
                        self.dirs.insert(dir, wd);
                        added = true;
                    }
                    // Gone since the snapshot: its parent's event says so.
                    Err(Errno::ENOENT) | Err(Errno::ENOTDIR) => added = true,
                    Err(e) => {
                        tracing::debug!(error = %e, dir = %dir.display(), "cannot watch a workspace directory; stating paths instead");
                        return false;
                    }
                }
            }
            self.trusted = !added;
            true
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use super::*;

    /// No watch on this system: every snapshot states its paths.
    #[derive(Debug)]
    pub(in crate::git::snapshot) struct Watch;

    impl Watch {
        pub(in crate::git::snapshot) fn start() -> Option<Watch> {
            None
        }
        pub(in crate::git::snapshot) fn quiet(&mut self) -> bool {
            false
        }
        pub(in crate::git::snapshot) fn looks_quiet(&self) -> bool {
            false
        }
        pub(in crate::git::snapshot) fn cover(&mut self, _: Dirs) -> bool {
            false
        }
    }
}

pub(super) use imp::Watch;

/// Merges entries for one directory: `None` (every name) wins.
pub(super) fn merge(dirs: impl IntoIterator<Item = (PathBuf, Option<Vec<OsString>>)>) -> Dirs {
    let mut by: HashMap<PathBuf, Option<Vec<OsString>>> = HashMap::new();
    for (dir, names) in dirs {
        match (by.get_mut(&dir), names) {
            (None, names) => {
                by.insert(dir, names);
            }
            (Some(slot), None) => *slot = None,
            (Some(Some(have)), Some(more)) => have.extend(more),
            (Some(None), Some(_)) => {}
        }
    }
    by.into_iter().collect()
}
