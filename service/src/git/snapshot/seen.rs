//! What a workspace's last snapshot saw, so that the next one can tell
//! without running git that nothing changed and answer with the same tree,
//! or tell git exactly which paths changed.
//!
//! A [`Seen`] holds, for the snapshot that built a tree: the stat data of
//! every path the tree depends on (every directory under the workspace
//! that is not ignored, every file in them that is not ignored, and the
//! files that decide what git ignores or how it hashes: `.gitignore` and
//! `.gitattributes` above the workspace up to the repository's top,
//! `info/exclude`, `info/attributes`, every configuration file git read,
//! the excludes and attributes files it names; see [`walk`]), and a
//! *reference second* read from the file system's own clock before git or
//! this module looked at anything.
//!
//! Why that is enough: any change to a path after the reference (a write,
//! a truncate, a chmod, a rename, a `touch` that restores the old mtime)
//! sets that path's ctime, which no program can set back; an entry added
//! to or removed from a directory sets the directory's; and the clock the
//! kernel stamps files with never runs behind a reference it stamped
//! first. So when every path stats as it did and none has a ctime at or
//! after the reference second, nothing changed since before the git run
//! that built the tree, and the tree is still the working tree's. A path
//! stamped in the reference second itself (git's "racy" case) is
//! *suspect*: it counts as changed at the next check. Whole seconds, not
//! nanoseconds, so a workspace on a coarser file system than the
//! controller home compares right.
//!
//! After a change, [`Seen::check`] names the changed paths ([`Verdict`]),
//! [`Seen::changes`] turns them into what git must stage (changed and gone
//! files, gone directories, names new in a changed directory) and
//! [`Seen::refreshed`] updates the same record once git staged them: the
//! changed entries are stated again, new names are added (new directories
//! walked), gone directories dropped, all after a new reference second
//! read before [`Seen::changes`] looked at anything (the check's own stat
//! data only says where to look; a name added to a directory after it was
//! read stamps the directory at or after that reference, so it is suspect
//! next time). Every other path was just checked unchanged, so its entry
//! and the private index's entry for it still hold.
//!
//! What must stay true: a `Seen` answers only for the workspace path it
//! was observed at; any doubt (a path whose kind changed, a rules file
//! changed, a nested repository, more changes than [`MAX_CHANGES`], more
//! entries than the snapshot bound) means the whole tree goes to git;
//! nothing here writes to the workspace. This trusts the file system's
//! timestamps as git's own index does, and assumes the workspace's file
//! system stamps with the same clock as the controller home's (true of
//! local file systems; a network file system whose server clock runs
//! behind is not).
//!
//! Cost: one `fstatat` per path, relative to an `O_PATH` descriptor of its
//! directory, the names stored NUL-terminated so none is copied or built
//! per check, spread over at most [`MAX_THREADS`] threads.

use std::collections::HashSet;
use std::ffi::CStr;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

mod parts;
mod stat;
mod walk;

use parts::{fill_all, in_parts};
pub(super) use stat::Stat;
use stat::open_dir;
use walk::Ignored;
pub(super) use walk::rule_files;

/// What the names of a [`Group`] are to the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Kind {
    /// Files outside the tree that decide what git ignores or how it
    /// hashes: any change sends the whole tree to git.
    Rules,
    /// The workspace directory itself (its one name, in its parent).
    Root,
    /// A directory of the tree, by its path relative to the workspace
    /// (empty at the top).
    Tree(Vec<u8>),
}

/// Paths in one directory, each with its stat data (`None`: it did not
/// exist, so its appearing is a change).
#[derive(Debug, Clone)]
pub(super) struct Group {
    /// The directory.
    dir: PathBuf,
    /// What its names are to the tree.
    kind: Kind,
    /// The names, each ending in NUL (handed to `fstatat` as they are).
    names: Vec<u8>,
    /// Each name's stat data, in the order of `names`.
    stats: Vec<Option<Stat>>,
}

impl Group {
    pub(super) fn new(dir: PathBuf, kind: Kind) -> Group {
        Group {
            dir,
            kind,
            names: Vec::new(),
            stats: Vec::new(),
        }
    }

    /// Adds `name`, not yet stated; `false` when the kernel cannot be
    /// given it (it holds a NUL).
    pub(super) fn push(&mut self, name: &[u8]) -> bool {
        if name.contains(&0) {
            return false;
        }
        self.names.extend_from_slice(name);
        self.names.push(0);
        self.stats.push(None);
        true
    }

    pub(super) fn len(&self) -> usize {
        self.stats.len()
    }

    /// The names, in order, each with its NUL.
    fn names(&self) -> impl Iterator<Item = &CStr> {
        self.names
            .split_inclusive(|&b| b == 0)
            .filter_map(|n| CStr::from_bytes_with_nul(n).ok())
    }

    /// Stats the names from index `from` on; `f` gets each one's index
    /// and stat data now.
    fn each(&self, from: usize, mut f: impl FnMut(usize, Option<Stat>)) {
        let dir = open_dir(&self.dir);
        for (i, name) in self.names().enumerate().skip(from) {
            f(i, dir.as_ref().and_then(|d| Stat::at(d, name)));
        }
    }

    /// Records the stat data of the names from index `from` on.
    fn fill(&mut self, from: usize) {
        let mut now = Vec::with_capacity(self.len().saturating_sub(from));
        self.each(from, |_, s| now.push(s));
        for (slot, s) in self.stats[from..].iter_mut().zip(now) {
            *slot = s;
        }
    }
}

/// At most this many threads state paths (the build machine and most
/// laptops have 2–8 cores; past 4 the kernel's own locks gain little).
pub(super) const MAX_THREADS: usize = 4;

/// Below this many paths a check runs on one thread.
const PARALLEL_FROM: usize = 4096;

/// More changed paths than this and the whole tree goes to git (which is
/// then as cheap as staging them one by one, and the command line stays
/// short).
pub(super) const MAX_CHANGES: usize = 512;

/// A path whose stat data differs from what was seen, or is suspect.
#[derive(Debug, Clone, Copy)]
pub(super) struct Dirty {
    /// Its group in [`Seen::groups`].
    group: usize,
    /// Its index in that group.
    entry: usize,
    /// Its stat data at the check.
    now: Option<Stat>,
}

/// What a check found.
#[derive(Debug)]
pub(super) enum Verdict {
    /// Nothing the tree depends on changed.
    Same,
    /// These paths changed (at most [`MAX_CHANGES`]).
    Changed(Vec<Dirty>),
    /// The whole tree must go to git.
    Unknown,
}

/// What git must stage after a change (see [`Seen::changes`]).
#[derive(Debug)]
pub(super) struct Changes {
    /// The changed entries, stated again by [`Seen::refreshed`].
    dirty: Vec<Dirty>,
    /// Files that changed or went, relative to the workspace (the files
    /// of a directory that went are among them: each one went).
    files: Vec<Vec<u8>>,
    /// Directories that went (their groups are dropped).
    gone: Vec<Vec<u8>>,
    /// Paths new to the tree.
    new: Vec<New>,
    /// The new directories' own directories, walked by [`Seen::stage`].
    walked: Vec<Group>,
}

/// A path new to the tree: a name new in a changed directory, or a
/// directory where nothing was.
#[derive(Debug)]
struct New {
    /// The group of its directory.
    group: usize,
    /// Its path relative to the workspace.
    path: Vec<u8>,
    /// Whether it is a directory (walked when git does not ignore it).
    is_dir: bool,
    /// Whether its group already names it (as a path that did not exist).
    named: bool,
}

impl Changes {
    /// The new paths, for git's listing of which of them it ignores.
    pub(super) fn new_paths(&self) -> impl Iterator<Item = &[u8]> {
        self.new.iter().map(|n| n.path.as_slice())
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

impl Seen {
    /// What the snapshot of the workspace at `path` into `tree` (of
    /// `files` files) saw: the paths `observe` found (see [`walk`]),
    /// stated now. `ignored` is git's listing of what it ignores there,
    /// `extra` the rules files outside the tree; `None` when the tree
    /// cannot be watched this way (more than `max` paths, a nested
    /// repository, an unreadable directory).
    pub(super) fn observe(
        path: &Path,
        (tree, files): (String, u64),
        reference: i64,
        ignored: &[u8],
        extra: Vec<PathBuf>,
        max: u64,
    ) -> Option<Seen> {
        let max = usize::try_from(max).unwrap_or(usize::MAX);
        let ignored = Ignored::parse(ignored);
        let mut groups = walk::observe(path, &ignored, extra, max)?;
        fill_all(&mut groups)?;
        Some(Seen {
            path: path.to_path_buf(),
            tree,
            files,
            reference,
            groups,
        })
    }

    /// Whether this was seen at workspace path `path`.
    pub(super) fn answers_for(&self, path: &Path) -> bool {
        self.path == path
    }

    /// The directories a watch must cover for this tree (see
    /// [`super::watch`]): every directory of the tree with all its names,
    /// and the directories of the workspace itself and of the rules files
    /// with only those names.
    pub(super) fn watch_dirs(&self) -> super::watch::Dirs {
        use std::os::unix::ffi::OsStrExt;
        super::watch::merge(self.groups.iter().map(|g| {
            let names = match g.kind {
                Kind::Tree(_) => None,
                Kind::Rules | Kind::Root => Some(
                    g.names()
                        .map(|n| std::ffi::OsStr::from_bytes(n.to_bytes()).to_owned())
                        .collect(),
                ),
            };
            (g.dir.clone(), names)
        }))
    }

    /// Stats every path the tree depends on (blocking; spread over the
    /// machine's cores) and says whether any changed since it was seen:
    /// its stat data differs, or it was suspect.
    pub(super) fn check(&self, path: &Path) -> Verdict {
        if self.path != path {
            return Verdict::Unknown;
        }
        let parts = in_parts(&self.groups, |first, part| {
            let mut dirty = Vec::new();
            for (j, g) in part.iter().enumerate() {
                g.each(0, |i, now| {
                    let was = g.stats[i];
                    if now != was || was.is_some_and(|s| s.ctime.0 >= self.reference) {
                        dirty.push(Dirty {
                            group: first + j,
                            entry: i,
                            now,
                        });
                    }
                });
                if dirty.len() > MAX_CHANGES {
                    return None;
                }
            }
            Some(dirty)
        });
        let mut dirty = Vec::new();
        for part in parts.into_iter().flatten() {
            let Some(part) = part else {
                return Verdict::Unknown;
            };
            dirty.extend(part);
        }
        match dirty.len() {
            0 => Verdict::Same,
            n if n > MAX_CHANGES => Verdict::Unknown,
            _ => Verdict::Changed(dirty),
        }
    }

    /// What git must stage for the changed paths `dirty`: reads each
    /// changed directory for names that are new to it. `None` when the
    /// whole tree must go to git instead (see the module docs).
    pub(super) fn changes(&self, dirty: Vec<Dirty>) -> Option<Changes> {
        let mut files = Vec::new();
        let mut gone = Vec::new();
        let mut dirs = Vec::new();
        let mut new = Vec::new();
        for d in &dirty {
            let g = &self.groups[d.group];
            let was = g.stats[d.entry].map(|s| s.is_dir());
            let now = d.now.map(|s| s.is_dir());
            let rel = match &g.kind {
                Kind::Rules => return None,
                Kind::Root if (was, now) == (Some(true), Some(true)) => {
                    dirs.push(Vec::new());
                    continue;
                }
                Kind::Root => return None,
                Kind::Tree(rel) => rel,
            };
            let name = g.names().nth(d.entry)?.to_bytes();
            if name == b".git" || walk::is_rules_file(name) {
                return None;
            }
            let path = walk::join(rel, name);
            match (was, now) {
                (Some(true), Some(true)) => dirs.push(path),
                (Some(true), None) => gone.push(path),
                (None, Some(true)) => new.push(New {
                    group: d.group,
                    path,
                    is_dir: true,
                    named: true,
                }),
                (Some(false) | None, Some(false) | None) => files.push(path),
                // A file became a directory or the other way round.
                _ => return None,
            }
        }
        for rel in dirs {
            let g = self
                .groups
                .iter()
                .position(|g| matches!(&g.kind, Kind::Tree(r) if *r == rel))?;
            let known: HashSet<&[u8]> = self.groups[g].names().map(CStr::to_bytes).collect();
            for entry in std::fs::read_dir(walk::absolute(&self.path, &rel)).ok()? {
                let entry = entry.ok()?;
                let name = entry.file_name();
                let name = std::os::unix::ffi::OsStrExt::as_bytes(name.as_os_str());
                let is_dir = entry.file_type().ok()?.is_dir();
                if known.contains(name) || (name == b".git" && rel.is_empty() && is_dir) {
                    continue;
                }
                if name == b".git" || walk::is_rules_file(name) {
                    return None;
                }
                new.push(New {
                    group: g,
                    path: walk::join(&rel, name),
                    is_dir,
                    named: false,
                });
            }
        }
        if files.len() + new.len() > MAX_CHANGES {
            return None;
        }
        Some(Changes {
            dirty,
            files,
            gone,
            new,
            walked: Vec::new(),
        })
    }

    /// Drops from `changes` the new names git's listing `ignored` leaves
    /// out, walks the new directories (see [`walk`]), and gives the paths
    /// for `git add -A`: every changed file, and every new name but a
    /// directory holding no file (git refuses a path it ignores or one
    /// that matches nothing). `None` when the tree can no longer be
    /// watched this way (a nested repository, more than `max` paths).
    pub(super) fn stage(
        &self,
        changes: &mut Changes,
        ignored: &[u8],
        max: u64,
    ) -> Option<Vec<Vec<u8>>> {
        let max = usize::try_from(max).unwrap_or(usize::MAX);
        let ignored = Ignored::parse(ignored);
        let mut count: usize = self.groups.iter().map(Group::len).sum();
        changes.new.retain(|n| !ignored.skips(&n.path, n.is_dir));
        count += changes.new.iter().filter(|n| !n.named).count();
        let mut stage = changes.files.clone();
        for n in &changes.new {
            let holds = match n.is_dir {
                true => walk::walk(
                    &self.path,
                    n.path.clone(),
                    &ignored,
                    &mut changes.walked,
                    &mut count,
                    max,
                )?,
                false => 1,
            };
            if holds > 0 {
                stage.push(n.path.clone());
            }
        }
        (count <= max).then_some(stage)
    }

    /// This record once git staged `changes` (see [`Seen::stage`]) into
    /// `tree` (of `files` files), with the file system clock's second
    /// `reference` read after the check and before [`Seen::changes`]
    /// read the changed directories (so before anything recorded here was
    /// read, git's reads included): changed
    /// entries are stated again, new names added and stated (with the new
    /// directories walked), gone directories dropped. `None` if a name
    /// can no longer be found.
    pub(super) fn refreshed(
        mut self,
        changes: Changes,
        (tree, files): (String, u64),
        reference: i64,
    ) -> Option<Seen> {
        // Stated again below, after `reference` (the check's stat data
        // was read before it).
        let mut restate: Vec<(usize, usize)> =
            changes.dirty.iter().map(|d| (d.group, d.entry)).collect();
        for n in changes.new.iter().filter(|n| !n.named) {
            let name = n.path.rsplit(|&b| b == b'/').next().unwrap_or(&n.path);
            let group = &mut self.groups[n.group];
            group.push(name).then_some(())?;
            restate.push((n.group, group.len() - 1));
        }
        let mut walked = changes.walked;
        restate.sort_unstable();
        for (g, entries) in restate.chunk_by(|a, b| a.0 == b.0).map(|c| (c[0].0, c)) {
            let group = &mut self.groups[g];
            let dir = open_dir(&group.dir);
            for &(_, i) in entries {
                let name = group.names().nth(i)?;
                group.stats[i] = dir.as_ref().and_then(|d| Stat::at(d, name));
            }
        }
        fill_all(&mut walked)?;
        self.groups.append(&mut walked);
        let under = |rel: &[u8], dir: &[u8]| {
            rel.strip_prefix(dir)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(b"/"))
        };
        self.groups.retain(|g| match &g.kind {
            Kind::Tree(rel) => !changes.gone.iter().any(|d| under(rel, d)),
            _ => true,
        });
        self.tree = tree;
        self.files = files;
        self.reference = reference;
        Some(self)
    }
}

/// The file system clock's current second, as it stamps a marker file
/// written in `dir` (the snapshot state directory; never the workspace).
pub(super) fn reference(dir: &Path) -> Option<i64> {
    let mut f = std::fs::File::create(dir.join("seen")).ok()?;
    f.write_all(b"1").ok()?;
    Some(f.metadata().ok()?.mtime())
}
