//! What a workspace's last snapshot saw, so that the next one can tell
//! without running git that nothing changed and answer with the same tree.
//!
//! A [`Seen`] holds, for the snapshot that built a tree: the stat data of
//! every path the tree depends on (every directory under the workspace
//! that is not ignored, every file in them that is not ignored, and the
//! files that decide what git ignores or how it hashes: `.gitignore` and
//! `.gitattributes` above the workspace up to the repository's top,
//! `info/exclude`, `info/attributes`, every configuration file git read,
//! the excludes and attributes files it names), and a *reference second*
//! read from the file system's own clock before git or this module looked
//! at anything.
//!
//! Why that is enough: any change to a path after the reference (a write,
//! a truncate, a chmod, a rename, a `touch` that restores the old mtime)
//! sets that path's ctime, which no program can set back; an entry added
//! to or removed from a directory sets the directory's; and the clock the
//! kernel stamps files with never runs behind a reference it stamped
//! first. So when every path stats as it did and none has a ctime at or
//! after the reference second, nothing changed since before the git run
//! that built the tree, and the tree is still the working tree's. A path
//! stamped in the reference second itself (git's "racy" case) sends the
//! next snapshot to git. Whole seconds, not nanoseconds, so a workspace
//! on a coarser file system than the controller home compares right.
//!
//! What must stay true: a `Seen` answers only for the workspace path it
//! was observed at; any doubt (a path that no longer stats the same, a
//! nested repository whose commits git would record, more entries than the
//! snapshot bound) means git runs; nothing here writes to the workspace.
//! This trusts the file system's timestamps as git's own index does, and
//! assumes the workspace's file system stamps with the same clock as the
//! controller home's (true of local file systems; a network file system
//! whose server clock runs behind is not).

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// The stat data a change to a path shows in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stat {
    dev: u64,
    ino: u64,
    mode: u32,
    uid: u32,
    gid: u32,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stat {
    /// The stat data of `name` in the open directory `dir`, not following
    /// a symbolic link (one path component to resolve, not a whole path);
    /// `None` when it does not exist (or cannot be read).
    fn at(dir: &std::fs::File, name: &OsStr) -> Option<Stat> {
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
}

/// Paths in one directory, each with its stat data (`None`: it did not
/// exist, so its appearing is a change).
#[derive(Debug, Clone)]
pub(super) struct Group {
    /// The directory.
    dir: PathBuf,
    /// Names in it.
    names: Vec<(OsString, Option<Stat>)>,
}

impl Group {
    /// Stats every name now; `f` gets each name's stat data then and now
    /// and says whether to go on.
    fn each(&self, mut f: impl FnMut(&Option<Stat>, Option<Stat>) -> bool) -> bool {
        let Ok(dir) = std::fs::File::open(&self.dir) else {
            return self.names.iter().all(|(_, was)| f(was, None));
        };
        self.names
            .iter()
            .all(|(name, was)| f(was, Stat::at(&dir, name)))
    }
}

/// What one snapshot saw (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    /// The workspace path it was observed at.
    path: PathBuf,
    /// The tree the snapshot built.
    pub(super) tree: String,
    /// The number of files in that tree.
    pub(super) files: u64,
    /// The file system clock's second before anything was looked at.
    reference: i64,
    /// Every path the tree depends on and its stat data, by directory.
    groups: Vec<Group>,
}

/// Below this many paths a check runs on one thread.
const PARALLEL_FROM: usize = 4096;

impl Seen {
    /// What the snapshot of the workspace at `path` into `tree` saw, or
    /// `None` when the observation is already stale (something in it is
    /// stamped at or after `reference`) and would only cost a check.
    pub(super) fn new(
        path: &Path,
        tree: String,
        files: u64,
        reference: i64,
        groups: Vec<Group>,
    ) -> Option<Seen> {
        let settled = groups.iter().all(|g| {
            g.names
                .iter()
                .all(|(_, s)| s.is_none_or(|s| s.ctime.0 < reference))
        });
        settled.then(|| Seen {
            path: path.to_path_buf(),
            tree,
            files,
            reference,
            groups,
        })
    }

    /// Whether the workspace at `path` is, as far as its tree goes, as it
    /// was seen: every path stats the same and none was touched at or
    /// after the reference second. Blocking (one `fstatat` per path,
    /// spread over the machine's cores).
    pub(super) fn unchanged(&self, path: &Path) -> bool {
        if self.path != path {
            return false;
        }
        let changed = AtomicBool::new(false);
        let check = |part: &[Group]| {
            for g in part {
                let same = g.each(|was, now| {
                    !changed.load(Ordering::Relaxed)
                        && now == *was
                        && now.is_none_or(|s| s.ctime.0 < self.reference)
                });
                if !same {
                    changed.store(true, Ordering::Relaxed);
                    return;
                }
            }
        };
        in_parts(&self.groups, |part| check(part)).is_some() && !changed.load(Ordering::Relaxed)
    }
}

/// Runs `f` on parts of `groups` holding about as many names each, one
/// part per core (at most 4), on scoped threads; on this thread alone
/// when there are few names. The results in order, `None` if a thread
/// panicked.
fn in_parts<T: Send>(groups: &[Group], f: impl Fn(&[Group]) -> T + Sync) -> Option<Vec<T>> {
    let total: usize = groups.iter().map(|g| g.names.len()).sum();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(4);
    if threads == 1 || total < PARALLEL_FROM {
        return Some(vec![f(groups)]);
    }
    let per = total.div_ceil(threads);
    let mut parts = Vec::new();
    let (mut start, mut count) = (0, 0);
    for (i, g) in groups.iter().enumerate() {
        count += g.names.len();
        if count >= per {
            parts.push(&groups[start..=i]);
            (start, count) = (i + 1, 0);
        }
    }
    if start < groups.len() {
        parts.push(&groups[start..]);
    }
    let f = &f;
    std::thread::scope(|s| {
        let handles: Vec<_> = parts.into_iter().map(|p| s.spawn(move || f(p))).collect();
        handles.into_iter().map(|h| h.join().ok()).collect()
    })
}

/// The file system clock's current second, as it stamps a marker file
/// written in `dir` (the snapshot state directory; never the workspace).
pub(super) fn reference(dir: &Path) -> Option<i64> {
    let mut f = std::fs::File::create(dir.join("seen")).ok()?;
    f.write_all(b"1").ok()?;
    Some(f.metadata().ok()?.mtime())
}

/// The paths the snapshot of the workspace at `root` depends on, and their
/// stat data now; `None` when the tree cannot be watched this way (a
/// nested repository, an unreadable directory, more than `max` paths).
///
/// `ignored` is `git ls-files -z -o -i --exclude-standard --directory` run
/// in `root`: ignored files, and directories ending in `/`. A listed
/// directory none of whose contents are listed is excluded as a whole
/// (git did not look inside), so its contents are skipped; one whose
/// contents are listed one by one only holds ignored files for now, so it
/// is walked and a new file in it is seen. `extra` are the files outside
/// the tree that decide what git ignores or how it hashes.
pub(super) fn observe(
    root: &Path,
    ignored: &[u8],
    extra: Vec<PathBuf>,
    max: u64,
) -> Option<Vec<Group>> {
    let listed: Vec<&[u8]> = ignored
        .split(|&b| b == 0)
        .filter(|e| !e.is_empty())
        .collect();
    let mut has_contents: HashSet<&[u8]> = HashSet::new();
    for e in &listed {
        let e = e.strip_suffix(b"/").unwrap_or(e);
        for (i, _) in e.iter().enumerate().filter(|(_, b)| **b == b'/') {
            has_contents.insert(&e[..i]);
        }
    }
    let skip_dirs: HashSet<&[u8]> = listed
        .iter()
        .filter_map(|e| e.strip_suffix(b"/"))
        .filter(|d| !has_contents.contains(d))
        .collect();
    let skip_files: HashSet<&[u8]> = listed
        .iter()
        .filter(|e| !e.ends_with(b"/"))
        .copied()
        .collect();

    let max = usize::try_from(max).unwrap_or(usize::MAX);
    let mut groups: Vec<Group> = Vec::new();
    let mut count = 0usize;
    // The rules files and the workspace directory itself, by parent.
    let mut outside: Vec<PathBuf> = extra;
    outside.push(root.to_path_buf());
    outside.sort();
    for p in outside {
        let (Some(parent), Some(name)) = (p.parent(), p.file_name()) else {
            continue;
        };
        match groups.last_mut() {
            Some(g) if g.dir == parent => g.names.push((name.to_owned(), None)),
            _ => groups.push(Group {
                dir: parent.to_path_buf(),
                names: vec![(name.to_owned(), None)],
            }),
        }
        count += 1;
    }
    let mut stack: Vec<(PathBuf, Vec<u8>)> = vec![(root.to_path_buf(), Vec::new())];
    while let Some((dir, rel)) = stack.pop() {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&dir).ok()? {
            let entry = entry.ok()?;
            let name = entry.file_name();
            let kind = entry.file_type().ok()?;
            if name == ".git" {
                if !rel.is_empty() {
                    // A nested repository: git records its HEAD commit,
                    // which moves without anything here changing.
                    return None;
                }
                if !kind.is_dir() {
                    // A linked worktree's pointer to its repository. The
                    // repository's own directory is not watched: git
                    // writes it on every command.
                    names.push((name, None));
                }
                continue;
            }
            let mut child = rel.clone();
            if !child.is_empty() {
                child.push(b'/');
            }
            child.extend_from_slice(name.as_bytes());
            if kind.is_dir() {
                if skip_dirs.contains(child.as_slice()) {
                    continue;
                }
                stack.push((entry.path(), child));
                names.push((name, None));
            } else if !skip_files.contains(child.as_slice())
                || name == ".gitignore"
                || name == ".gitattributes"
            {
                // An ignored rules file still decides what is ignored.
                names.push((name, None));
            }
        }
        count += names.len();
        if count > max {
            return None;
        }
        groups.push(Group { dir, names });
    }
    let stats = in_parts(&groups, |part| {
        part.iter()
            .map(|g| {
                let mut stats = Vec::with_capacity(g.names.len());
                g.each(|_, now| {
                    stats.push(now);
                    true
                });
                stats
            })
            .collect::<Vec<_>>()
    })?;
    for (g, stats) in groups.iter_mut().zip(stats.into_iter().flatten()) {
        for ((_, slot), now) in g.names.iter_mut().zip(stats) {
            *slot = now;
        }
    }
    Some(groups)
}

/// The files outside the tree that decide what git ignores in it or how it
/// hashes it: every configuration file `git config --list --show-origin
/// -z` (run at the repository's top, `toplevel`) read, the excludes and
/// attributes files it names or git's defaults for them, the repository's
/// `info/exclude` and `info/attributes` (`info`), and the `.gitignore`
/// and `.gitattributes` of every directory from the workspace `path` up to
/// the top (the walk covers those inside it).
pub(super) fn rule_files(
    path: &Path,
    toplevel: &Path,
    info: &[PathBuf],
    config_list: &[u8],
) -> Vec<PathBuf> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let xdg = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".config")));
    let expand = |value: &[u8]| -> PathBuf {
        let value = PathBuf::from(OsString::from_vec(value.to_vec()));
        match (value.strip_prefix("~"), &home) {
            (Ok(rest), Some(h)) => h.join(rest),
            _ if value.is_relative() => toplevel.join(value),
            _ => value,
        }
    };
    let mut files: Vec<PathBuf> = info.to_vec();
    files.push(PathBuf::from("/etc/gitconfig"));
    files.push(PathBuf::from("/etc/gitattributes"));
    if let Some(h) = &home {
        files.push(h.join(".gitconfig"));
    }
    if let Some(x) = &xdg {
        for name in ["config", "ignore", "attributes"] {
            files.push(x.join("git").join(name));
        }
    }
    // Records are `origin\0key\nvalue\0`.
    let mut fields = config_list.split(|&b| b == 0);
    while let (Some(origin), Some(entry)) = (fields.next(), fields.next()) {
        if let Some(file) = origin.strip_prefix(b"file:") {
            files.push(expand(file));
        }
        let (key, value) = match entry.iter().position(|&b| b == b'\n') {
            Some(i) => (&entry[..i], &entry[i + 1..]),
            None => (entry, &b""[..]),
        };
        if key == b"core.excludesfile" || key == b"core.attributesfile" {
            files.push(expand(value));
        }
    }
    for dir in path.ancestors() {
        files.push(dir.join(".gitignore"));
        files.push(dir.join(".gitattributes"));
        if dir == toplevel {
            break;
        }
    }
    files.sort();
    files.dedup();
    files
}
