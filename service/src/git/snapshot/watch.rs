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
//! - a watch is the directory's, not its path's: a watched directory that
//!   is moved or deleted forgets its path and every path below it, so a
//!   directory put in its place is watched anew (and the watch untrusted
//!   once), and watches the tree no longer needs are removed;
//! - a rules file whose directory does not exist (`~/.config/git/` on most
//!   machines) is watched through its nearest existing ancestor, for the
//!   one name that would lead to it, and a symbolic link on the way to a
//!   rules directory in its parent, for its own name ([`resolve`]): the
//!   directory appearing or the link moving is an event. (Before this the
//!   missing directory failed its watch at every snapshot, and a watch
//!   that failed was never trusted: the watch never answered.)
//! - a tree with more directories than the watch may take (a quarter of
//!   `fs.inotify.max_user_watches`, at most [`MAX_DIRS`]) is not watched,
//!   and a watch the kernel refuses (`ENOSPC` once other programs took the
//!   user's watches) is given up for good in this process: its snapshots
//!   state paths, never retrying thousands of watches per turn;
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

    /// Why a watch gave up (it then holds no inotify instance).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Refused {
        /// The tree had more directories than the watch may take: tried
        /// again once it has few enough.
        TooMany,
        /// The kernel refused an instance or a watch: never tried again.
        Failed,
    }

    /// One workspace's inotify instance and its watches.
    #[derive(Debug)]
    pub(in crate::git::snapshot) struct Watch {
        /// The instance (non-blocking); `None` once refused.
        fd: Option<Inotify>,
        /// Each watch: its directory's names that matter (`None`: all).
        watches: HashMap<WatchDescriptor, Option<Vec<OsString>>>,
        /// The watched directories, by the path they were watched at.
        dirs: HashMap<PathBuf, WatchDescriptor>,
        /// Every directory of the last snapshot was watched since before
        /// it began, and no event was lost: "quiet" can be believed.
        trusted: bool,
        /// Why the watch gave up, if it did.
        refused: Option<Refused>,
    }

    fn instance() -> Option<Inotify> {
        Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
            .map_err(|e| tracing::debug!(error = %e, "no workspace watch"))
            .ok()
    }

    impl Watch {
        /// A new, empty watch (`None` when no inotify instance can be had).
        pub(in crate::git::snapshot) fn start() -> Option<Watch> {
            Some(Watch {
                fd: Some(instance()?),
                watches: HashMap::new(),
                dirs: HashMap::new(),
                trusted: false,
                refused: None,
            })
        }

        /// Reads every pending event: `true` when none mattered and the
        /// watch was trusted (nothing in the tree changed since the last
        /// snapshot began). Either way the queue is empty afterwards, so
        /// the snapshot that follows sees only what happens from now on.
        pub(in crate::git::snapshot) fn quiet(&mut self) -> bool {
            let Some(fd) = &self.fd else {
                return false;
            };
            let mut quiet = self.trusted;
            let mut gone = Vec::new();
            loop {
                match fd.read_events() {
                    Ok(events) if events.is_empty() => break,
                    Ok(events) => {
                        for e in events {
                            if e.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                                quiet = false;
                                continue;
                            }
                            // A watch the tree no longer needs (removed by
                            // `cover`, or forgotten below).
                            let Some(names) = self.watches.get(&e.wd) else {
                                continue;
                            };
                            if e.mask.intersects(
                                AddWatchFlags::IN_IGNORED
                                    | AddWatchFlags::IN_DELETE_SELF
                                    | AddWatchFlags::IN_MOVE_SELF,
                            ) {
                                quiet = false;
                                gone.push(e.wd);
                                continue;
                            }
                            let matters = match names {
                                None => true,
                                Some(names) => e.name.as_ref().is_none_or(|n| names.contains(n)),
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
            for wd in gone {
                self.forget(wd);
            }
            quiet
        }

        /// Whether the next [`Watch::quiet`] will say so, without reading
        /// anything: trusted, and no event waiting.
        pub(in crate::git::snapshot) fn looks_quiet(&self) -> bool {
            use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
            use std::os::fd::AsFd;
            let Some(fd) = &self.fd else {
                return false;
            };
            if !self.trusted {
                return false;
            }
            let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
            matches!(poll(&mut fds, PollTimeout::ZERO), Ok(0))
        }

        /// A directory moved or deleted: its path, and every path below
        /// it, no longer name what is watched (a directory put there is
        /// watched anew by the next [`Watch::cover`]).
        fn forget(&mut self, wd: WatchDescriptor) {
            self.watches.remove(&wd);
            let roots: Vec<PathBuf> = (self.dirs.iter())
                .filter(|(_, w)| **w == wd)
                .map(|(d, _)| d.clone())
                .collect();
            let mut loose = vec![wd];
            self.dirs.retain(|d, w| {
                let keep = !roots.iter().any(|r| d.starts_with(r));
                if !keep {
                    loose.push(*w);
                }
                keep
            });
            // Released, wherever those directories are now (a directory
            // found again in the tree is watched anew); their
            // `IN_IGNORED` is no event, no longer in `watches`.
            for wd in loose {
                self.watches.remove(&wd);
                if let Some(fd) = &self.fd {
                    let _ = fd.rm_watch(wd);
                }
            }
        }

        /// Gives up: every watch released (the instance closed), every
        /// later snapshot states paths.
        fn refuse(&mut self, why: Refused) {
            if self.refused != Some(why) {
                tracing::debug!(?why, "workspace watch given up; stating paths instead");
            }
            self.fd = None;
            self.watches.clear();
            self.dirs.clear();
            self.trusted = false;
            self.refused = Some(why);
        }

        /// Watches every directory in `dirs` (after a snapshot that stated
        /// or staged them) and no other; trusted from now on when each was
        /// watched already. More than `cap` directories, or one the kernel
        /// will not watch, and the watch gives up instead.
        pub(in crate::git::snapshot) fn cover(&mut self, dirs: Dirs, cap: usize) {
            if self.refused == Some(Refused::Failed) {
                return;
            }
            let dirs = merge(dirs.into_iter().flat_map(|(d, n)| resolve(d, n)));
            if dirs.len() > cap {
                return self.refuse(Refused::TooMany);
            }
            if self.fd.is_none() {
                match (self.refused, instance()) {
                    (Some(Refused::TooMany), Some(fd)) => self.fd = Some(fd),
                    _ => return self.refuse(Refused::Failed),
                }
                self.refused = None;
            }
            let Some(fd) = &self.fd else { return };
            let mut added = false;
            let mut watches: HashMap<WatchDescriptor, Option<Vec<OsString>>> = HashMap::new();
            let mut watched = HashMap::new();
            for (dir, names) in dirs {
                let wd = match self.dirs.get(&dir) {
                    Some(wd) => *wd,
                    None => match fd.add_watch(&dir, mask()) {
                        Ok(wd) => {
                            added = true;
                            wd
                        }
                        // Gone since the snapshot: its parent's event says so.
                        Err(Errno::ENOENT) | Err(Errno::ENOTDIR) => {
                            added = true;
                            continue;
                        }
                        Err(e) => {
                            tracing::debug!(error = %e, dir = %dir.display(), "cannot watch a workspace directory");
                            return self.refuse(Refused::Failed);
                        }
                    },
                };
                watched.insert(dir, wd);
                // Two paths to one directory (a link resolved) share its
                // watch: every name either needs matters.
                match (watches.get_mut(&wd), names) {
                    (None, names) => {
                        watches.insert(wd, names);
                    }
                    (Some(slot), None) => *slot = None,
                    (Some(Some(have)), Some(more)) => have.extend(more),
                    (Some(None), Some(_)) => {}
                }
            }
            for wd in self.dirs.values() {
                if !watches.contains_key(wd) {
                    // Its `IN_IGNORED` is then no event: no longer in `watches`.
                    let _ = fd.rm_watch(*wd);
                }
            }
            self.dirs = watched;
            self.watches = watches;
            self.trusted = !added;
        }
    }

    /// The most directories one workspace's watch takes: a quarter of the
    /// user's `fs.inotify.max_user_watches` (other programs need theirs),
    /// at most [`MAX_DIRS`].
    pub(in crate::git::snapshot) fn max_dirs() -> usize {
        static CAP: std::sync::LazyLock<usize> = std::sync::LazyLock::new(|| {
            std::fs::read_to_string("/proc/sys/fs/inotify/max_user_watches")
                .ok()
                .and_then(|s| s.trim().parse::<usize>().ok())
                .map_or(MAX_DIRS, |n| (n / 4).min(MAX_DIRS))
        });
        *CAP
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
        pub(in crate::git::snapshot) fn cover(&mut self, _: Dirs, _: usize) {}
    }

    pub(in crate::git::snapshot) fn max_dirs() -> usize {
        0
    }
}

#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
/// At most this many directories are watched for one workspace (about
/// 1 KiB of kernel memory each); a larger tree states its paths.
pub(super) const MAX_DIRS: usize = 16_384;

pub(super) use imp::{Watch, max_dirs};

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

/// Where the watch for `dir` goes (see the module docs): a directory of
/// the tree (`names` `None`) as it is; a rules directory by its resolved
/// path, or, when it does not exist, its nearest existing ancestor for the
/// one name that leads to it; and every symbolic link on the way, in its
/// parent for its own name.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn resolve(dir: PathBuf, names: Option<Vec<OsString>>) -> Dirs {
    if names.is_none() {
        return vec![(dir, None)];
    }
    let (mut at, mut names) = (dir.as_path(), names);
    while !at.is_dir() {
        let (Some(parent), Some(name)) = (at.parent(), at.file_name()) else {
            return Vec::new();
        };
        names = Some(vec![name.to_owned()]);
        at = parent;
    }
    let real = |p: &std::path::Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let mut out = Vec::new();
    let mut walked = PathBuf::new();
    for c in at.components() {
        walked.push(c);
        let link = std::fs::symlink_metadata(&walked).is_ok_and(|m| m.file_type().is_symlink());
        if let (true, Some(parent), Some(name)) = (link, walked.parent(), walked.file_name()) {
            out.push((real(parent), Some(vec![name.to_owned()])));
        }
    }
    out.push((real(at), names));
    out
}
