//! Which paths a snapshot's tree depends on: the walk of the workspace
//! that leaves out what git ignores, and the rules files outside it.
//!
//! What must stay true: a directory is left out only when git's listing
//! says it is excluded as a whole (so a new file in a directory that only
//! holds ignored files for now is still seen); every `.gitignore` and
//! `.gitattributes` met is kept, ignored or not (it still decides what is
//! ignored); a `.git` below the workspace's top means the tree cannot be
//! watched this way (git records a nested repository's HEAD commit, which
//! moves without anything here changing).

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use super::{Group, Kind};

/// What git's listing of ignored paths (`git ls-files -z -o -i
/// --exclude-standard --directory`, run in the workspace) says to leave
/// out, borrowed from that listing.
pub(super) struct Ignored<'a> {
    /// Directories excluded as a whole (listed, none of their contents
    /// listed: git did not look inside).
    dirs: HashSet<&'a [u8]>,
    /// Ignored files.
    files: HashSet<&'a [u8]>,
}

impl<'a> Ignored<'a> {
    /// The listing `listing` (ignored files, and directories ending in
    /// `/`). A listed directory whose contents are listed one by one only
    /// holds ignored files for now: it is walked, so a new file in it is
    /// seen.
    pub(super) fn parse(listing: &'a [u8]) -> Ignored<'a> {
        let listed: Vec<&[u8]> = listing
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
        let dirs = listed
            .iter()
            .filter_map(|e| e.strip_suffix(b"/"))
            .filter(|d| !has_contents.contains(d))
            .collect();
        let files = listed
            .iter()
            .filter(|e| !e.ends_with(b"/"))
            .copied()
            .collect();
        Ignored { dirs, files }
    }

    /// Whether the path `rel` (relative to the workspace) is left out of
    /// the walk. Rules files never are.
    pub(super) fn skips(&self, rel: &[u8], is_dir: bool) -> bool {
        if is_dir {
            return self.dirs.contains(rel);
        }
        let name = rel.rsplit(|&b| b == b'/').next().unwrap_or(rel);
        self.files.contains(rel) && !is_rules_file(name)
    }
}

/// Whether a file named `name` in the tree decides what git ignores or how
/// it hashes.
pub(super) fn is_rules_file(name: &[u8]) -> bool {
    name == b".gitignore" || name == b".gitattributes"
}

/// `rel` and `name` joined with `/` (`name` alone at the top).
pub(super) fn join(rel: &[u8], name: &[u8]) -> Vec<u8> {
    let mut path = Vec::with_capacity(rel.len() + 1 + name.len());
    if !rel.is_empty() {
        path.extend_from_slice(rel);
        path.push(b'/');
    }
    path.extend_from_slice(name);
    path
}

/// The directory `rel` of the workspace at `root`.
pub(super) fn absolute(root: &Path, rel: &[u8]) -> PathBuf {
    if rel.is_empty() {
        root.to_path_buf()
    } else {
        root.join(OsStr::from_bytes(rel))
    }
}

/// The paths the snapshot of the workspace at `root` depends on, not yet
/// stated: the rules files `extra` (outside the tree), the workspace
/// directory itself, and the walk of the tree from its top. `None` when
/// the tree cannot be watched this way (see [`walk`]).
pub(super) fn observe(
    root: &Path,
    ignored: &Ignored<'_>,
    extra: Vec<PathBuf>,
    max: usize,
) -> Option<Vec<Group>> {
    let mut groups: Vec<Group> = Vec::new();
    let mut outside = extra;
    outside.sort();
    for p in outside {
        let (Some(parent), Some(name)) = (p.parent(), p.file_name()) else {
            continue;
        };
        if !matches!(groups.last(), Some(g) if g.dir == parent) {
            groups.push(Group::new(parent.to_path_buf(), Kind::Rules));
        }
        let group = groups.last_mut()?;
        group.push(name.as_bytes()).then_some(())?;
    }
    let (Some(parent), Some(name)) = (root.parent(), root.file_name()) else {
        return None;
    };
    let mut top = Group::new(parent.to_path_buf(), Kind::Root);
    top.push(name.as_bytes()).then_some(())?;
    groups.push(top);
    let mut count = groups.iter().map(Group::len).sum();
    walk(root, Vec::new(), ignored, &mut groups, &mut count, max)?;
    Some(groups)
}

/// Appends to `groups` the directory `rel` of the workspace at `root` and
/// every directory below it that `ignored` does not leave out, each with
/// its names (not yet stated); `count` is the running total of names.
/// The number of names found that are not directories; `None` for a
/// nested repository, an unreadable directory, a name the kernel cannot
/// be given, or more than `max` names.
pub(super) fn walk(
    root: &Path,
    rel: Vec<u8>,
    ignored: &Ignored<'_>,
    groups: &mut Vec<Group>,
    count: &mut usize,
    max: usize,
) -> Option<usize> {
    let mut files = 0;
    let mut stack: Vec<Vec<u8>> = vec![rel];
    while let Some(rel) = stack.pop() {
        let dir = absolute(root, &rel);
        let mut group = Group::new(dir.clone(), Kind::Tree(rel.clone()));
        for entry in std::fs::read_dir(&dir).ok()? {
            let entry = entry.ok()?;
            let name: OsString = entry.file_name();
            let kind = entry.file_type().ok()?;
            if name == ".git" {
                if !rel.is_empty() {
                    return None;
                }
                if !kind.is_dir() {
                    // A linked worktree's pointer to its repository. The
                    // repository's own directory is not watched: git
                    // writes it on every command.
                    group.push(name.as_bytes()).then_some(())?;
                }
                continue;
            }
            let name = name.into_vec();
            let child = join(&rel, &name);
            if ignored.skips(&child, kind.is_dir()) {
                continue;
            }
            if kind.is_dir() {
                stack.push(child);
            } else {
                files += 1;
            }
            group.push(&name).then_some(())?;
        }
        *count += group.len();
        if *count > max {
            return None;
        }
        groups.push(group);
    }
    Some(files)
}

/// The files outside the tree that decide what git ignores in it or how it
/// hashes it: every configuration file `git config --list --show-origin
/// -z` (run at the repository's top, `toplevel`) read, the excludes and
/// attributes files it names or git's defaults for them, the repository's
/// `info/exclude` and `info/attributes` (`info`), and the `.gitignore`
/// and `.gitattributes` of every directory from the workspace `path` up to
/// the top (the walk covers those inside it).
pub(in crate::git::snapshot) fn rule_files(
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
