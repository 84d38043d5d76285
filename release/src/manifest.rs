//! `release.json`: the manifest of a release tree and its digest.
//!
//! The manifest lists every regular file (relative path, permission bits,
//! size, SHA-256) and every symbolic link (relative path, target) in the tree,
//! sorted by path, plus the build identity. The *digest* of a tree is the
//! lowercase hex SHA-256 of the manifest's canonical form, which covers only
//! the tree entries: one line per entry, in path order,
//!
//! ```text
//! file <mode, octal> <sha256> <path>\n
//! link <target> <path>\n
//! ```
//!
//! Invariants kept by [`Manifest::parse`] and [`Manifest::from_tree`]: paths are
//! relative, normalised (no `.`/`..`/empty components), free of control
//! characters, unique and sorted; link targets are relative and resolve inside
//! the tree; hashes are 64 lowercase hex digits; modes are permission bits only.
//! `release.json` itself is never an entry.
//!
//! What a tree must be to match a manifest ([`Manifest::verify_tree`]): the
//! same entries and nothing else. Modes are compared in full, as read from
//! the file system (setuid, setgid and sticky included), so a file that gained
//! a special bit no longer matches the permission bits its manifest holds.
//! Directories are not entries: each one must lie on the path of some entry,
//! so an extra directory, even an empty one, is a difference too.

use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use thiserror::Error;

use crate::BuildIdentity;

/// File name of the manifest at the root of every release tree.
pub const MANIFEST_FILE: &str = "release.json";
/// Manifest schema this build writes and accepts.
pub const MANIFEST_SCHEMA: u32 = 1;
/// Product name recorded in every manifest.
pub const PRODUCT: &str = "lapis-ai-controller";

/// Upper bound on the size of a `release.json` accepted by [`Manifest::parse`].
const MAX_MANIFEST_BYTES: usize = 1 << 20;

/// One tree entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Entry {
    /// A regular file.
    File {
        /// Relative, normalised path.
        path: String,
        /// Permission bits (at most `0o777`: a manifest never grants setuid,
        /// setgid or sticky bits, so the full mode of a matching file is this).
        mode: u32,
        /// Length in bytes.
        size: u64,
        /// Lowercase hex SHA-256 of the contents.
        sha256: String,
    },
    /// A symbolic link whose target stays inside the tree.
    Link {
        /// Relative, normalised path of the link itself.
        path: String,
        /// Relative link target, as stored in the link.
        target: String,
    },
}

impl Entry {
    /// The entry's relative path.
    pub fn path(&self) -> &str {
        match self {
            Entry::File { path, .. } | Entry::Link { path, .. } => path,
        }
    }
}

/// The parsed contents of `release.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Always [`MANIFEST_SCHEMA`].
    pub schema: u32,
    /// Always [`PRODUCT`].
    pub name: String,
    /// Identity of the build that produced the binary.
    pub build: BuildIdentity,
    /// Tree entries, sorted by path, unique.
    pub entries: Vec<Entry>,
}

/// Why a manifest or a tree was refused. Messages name paths, never contents.
#[derive(Debug, Error)]
pub enum ManifestError {
    /// An I/O failure while reading the tree.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path that failed.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// `release.json` is not valid JSON of the expected shape.
    #[error("release.json is malformed: {0}")]
    Malformed(String),
    /// The manifest names a schema this build does not know.
    #[error("release.json has schema {found}; this build understands schema {MANIFEST_SCHEMA}")]
    UnknownSchema {
        /// The schema found.
        found: u32,
    },
    /// An entry path or link target breaks the invariants.
    #[error("invalid entry {path:?}: {reason}")]
    InvalidEntry {
        /// The offending relative path.
        path: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The tree holds something other than regular files, directories and links.
    #[error("unsupported file type at {0:?}")]
    UnsupportedFileType(String),
    /// The tree on disk does not match the manifest.
    #[error("tree does not match release.json at {path:?}: {reason}")]
    Mismatch {
        /// The first path that differs.
        path: String,
        /// How it differs.
        reason: &'static str,
    },
}

impl Manifest {
    /// Builds the manifest of the tree at `root` (skipping a root-level
    /// `release.json`) for the given build identity.
    pub fn from_tree(root: &Path, build: BuildIdentity) -> Result<Manifest, ManifestError> {
        let tree = scan_tree(root)?;
        // A manifest describes the tree it was made from, or nothing.
        tree.check_dirs(&tree.entries)?;
        let entries = tree.entries;
        let manifest = Manifest {
            schema: MANIFEST_SCHEMA,
            name: PRODUCT.to_owned(),
            build,
            entries,
        };
        manifest.validate()?;
        Ok(manifest)
    }

    /// Parses and validates `release.json` bytes.
    pub fn parse(bytes: &[u8]) -> Result<Manifest, ManifestError> {
        if bytes.len() > MAX_MANIFEST_BYTES {
            return Err(ManifestError::Malformed(format!(
                "{} bytes exceeds the {} byte limit",
                bytes.len(),
                MAX_MANIFEST_BYTES
            )));
        }
        // Peek at the schema first so a newer manifest says so instead of
        // failing on a field this build does not know.
        #[derive(Deserialize)]
        struct Probe {
            schema: u32,
        }
        let probe: Probe =
            serde_json::from_slice(bytes).map_err(|e| ManifestError::Malformed(e.to_string()))?;
        if probe.schema != MANIFEST_SCHEMA {
            return Err(ManifestError::UnknownSchema {
                found: probe.schema,
            });
        }
        let manifest: Manifest =
            serde_json::from_slice(bytes).map_err(|e| ManifestError::Malformed(e.to_string()))?;
        manifest.validate()?;
        Ok(manifest)
    }

    /// Reads and parses `<root>/release.json`.
    pub fn read_from(root: &Path) -> Result<Manifest, ManifestError> {
        let path = root.join(MANIFEST_FILE);
        let bytes = fs::read(&path).map_err(|source| ManifestError::Io { path, source })?;
        Manifest::parse(&bytes)
    }

    /// Pretty JSON with a trailing newline: the bytes written as `release.json`.
    pub fn to_json(&self) -> Vec<u8> {
        let mut out = serde_json::to_vec_pretty(self).expect("manifest serialises");
        out.push(b'\n');
        out
    }

    /// The canonical form hashed into the digest (see the module docs).
    pub(crate) fn canonical(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.entries.len() * 96);
        for entry in &self.entries {
            match entry {
                Entry::File {
                    path, mode, sha256, ..
                } => out.extend_from_slice(format!("file {mode:o} {sha256} {path}\n").as_bytes()),
                Entry::Link { path, target } => {
                    out.extend_from_slice(format!("link {target} {path}\n").as_bytes())
                }
            }
        }
        out
    }

    /// Lowercase hex SHA-256 of [`Manifest::canonical`]: the snapshot's name.
    pub fn digest(&self) -> String {
        hex::encode(Sha256::digest(self.canonical()))
    }

    /// Checks that the tree at `root` holds exactly these entries, byte for
    /// byte and full mode, besides `release.json`, and no directory that no
    /// entry lies under. Reports the first difference by path.
    pub fn verify_tree(&self, root: &Path) -> Result<(), ManifestError> {
        let actual = scan_tree(root)?;
        let mut expected = self.entries.iter();
        let mut found = actual.entries.iter();
        loop {
            match (expected.next(), found.next()) {
                (None, None) => return actual.check_dirs(&self.entries),
                (Some(e), None) => return Err(mismatch(e.path(), "missing")),
                (None, Some(f)) => return Err(mismatch(f.path(), "not in the manifest")),
                (Some(e), Some(f)) if e.path() != f.path() => {
                    let (path, reason) = if e.path() < f.path() {
                        (e.path(), "missing")
                    } else {
                        (f.path(), "not in the manifest")
                    };
                    return Err(mismatch(path, reason));
                }
                (Some(e), Some(f)) => {
                    if let Some(reason) = entry_difference(e, f) {
                        return Err(mismatch(e.path(), reason));
                    }
                }
            }
        }
    }

    fn validate(&self) -> Result<(), ManifestError> {
        if self.schema != MANIFEST_SCHEMA {
            return Err(ManifestError::UnknownSchema { found: self.schema });
        }
        if self.name != PRODUCT {
            return Err(ManifestError::Malformed(format!(
                "product is {:?}, expected {PRODUCT:?}",
                self.name
            )));
        }
        let mut previous: Option<&str> = None;
        for entry in &self.entries {
            let path = entry.path();
            check_relative_path(path)?;
            if path == MANIFEST_FILE {
                return Err(invalid(path, "release.json cannot list itself"));
            }
            if previous.is_some_and(|prev| prev >= path) {
                return Err(invalid(path, "entries are not sorted and unique"));
            }
            previous = Some(path);
            match entry {
                Entry::File { mode, sha256, .. } => {
                    if *mode & !0o777 != 0 {
                        return Err(invalid(path, "mode has bits beyond 0o777"));
                    }
                    if sha256.len() != 64
                        || !sha256
                            .bytes()
                            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
                    {
                        return Err(invalid(path, "sha256 is not 64 lowercase hex digits"));
                    }
                }
                Entry::Link { target, .. } => check_link_target(path, target)?,
            }
        }
        Ok(())
    }
}

/// Streams a file through SHA-256; returns the lowercase hex digest and length.
pub fn sha256_file(path: &Path) -> io::Result<(String, u64)> {
    let mut file = fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut len = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        len += n as u64;
    }
    Ok((hex::encode(hasher.finalize()), len))
}

/// What is on disk under a root: its entries (files with their full mode)
/// and its directories (relative paths, parents before children).
struct Scanned {
    /// Files and links, sorted by path.
    entries: Vec<Entry>,
    /// Every directory below the root.
    dirs: Vec<String>,
}

impl Scanned {
    /// Every directory must lie on the path of one of `entries`; reports the
    /// first (outermost) one that does not.
    fn check_dirs(&self, entries: &[Entry]) -> Result<(), ManifestError> {
        let implied: std::collections::BTreeSet<&str> = entries
            .iter()
            .flat_map(|e| {
                let path = e.path();
                path.match_indices('/').map(move |(i, _)| &path[..i])
            })
            .collect();
        match self.dirs.iter().find(|d| !implied.contains(d.as_str())) {
            Some(extra) => Err(mismatch(extra, "directory not in the manifest")),
            None => Ok(()),
        }
    }
}

fn scan_tree(root: &Path) -> Result<Scanned, ManifestError> {
    let io_err = |path: &Path, source: io::Error| ManifestError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut entries = Vec::new();
    let mut dirs = Vec::new();
    let walker = walkdir::WalkDir::new(root)
        .follow_links(false)
        .sort_by_file_name()
        .min_depth(1);
    for item in walker {
        let item = item.map_err(|e| {
            let path = e.path().unwrap_or(root).to_path_buf();
            ManifestError::Io {
                path,
                source: e.into(),
            }
        })?;
        let rel = item
            .path()
            .strip_prefix(root)
            .expect("walkdir yields paths under the root");
        let rel = rel
            .to_str()
            .ok_or_else(|| invalid(&rel.to_string_lossy(), "path is not UTF-8"))?
            .to_owned();
        if rel == MANIFEST_FILE {
            continue;
        }
        let file_type = item.file_type();
        if file_type.is_dir() {
            dirs.push(rel);
        } else if file_type.is_file() {
            let meta = item.metadata().map_err(|e| io_err(item.path(), e.into()))?;
            let (sha256, size) = sha256_file(item.path()).map_err(|e| io_err(item.path(), e))?;
            entries.push(Entry::File {
                path: rel,
                // The full mode: a special bit must show as a difference.
                mode: meta.permissions().mode() & 0o7777,
                size,
                sha256,
            });
        } else if file_type.is_symlink() {
            let target = fs::read_link(item.path()).map_err(|e| io_err(item.path(), e))?;
            let target = target
                .to_str()
                .ok_or_else(|| invalid(&rel, "link target is not UTF-8"))?
                .to_owned();
            entries.push(Entry::Link { path: rel, target });
        } else {
            return Err(ManifestError::UnsupportedFileType(rel));
        }
    }
    // walkdir sorts per directory by file name; the manifest order is by full
    // path string, which differs when a name sorts around `/`.
    entries.sort_by(|a, b| a.path().cmp(b.path()));
    Ok(Scanned { entries, dirs })
}

fn entry_difference(expected: &Entry, found: &Entry) -> Option<&'static str> {
    match (expected, found) {
        (
            Entry::File {
                mode: m1,
                size: s1,
                sha256: h1,
                ..
            },
            Entry::File {
                mode: m2,
                size: s2,
                sha256: h2,
                ..
            },
        ) => {
            if s1 != s2 {
                Some("size differs")
            } else if h1 != h2 {
                Some("contents differ")
            } else if m1 != m2 {
                Some("mode differs")
            } else {
                None
            }
        }
        (Entry::Link { target: t1, .. }, Entry::Link { target: t2, .. }) => {
            (t1 != t2).then_some("link target differs")
        }
        _ => Some("file type differs"),
    }
}

fn check_relative_path(path: &str) -> Result<(), ManifestError> {
    if path.is_empty() {
        return Err(invalid(path, "empty path"));
    }
    if path.chars().any(|c| c.is_control()) {
        return Err(invalid(path, "control character in path"));
    }
    if path.starts_with('/') || path.ends_with('/') || path.contains("//") {
        return Err(invalid(path, "path is not relative and normalised"));
    }
    for component in Path::new(path).components() {
        if !matches!(component, Component::Normal(_)) {
            return Err(invalid(path, "path is not relative and normalised"));
        }
    }
    if path.split('/').any(|c| c == "." || c == "..") {
        return Err(invalid(path, "path is not relative and normalised"));
    }
    Ok(())
}

fn check_link_target(path: &str, target: &str) -> Result<(), ManifestError> {
    if target.is_empty() || target.starts_with('/') || target.chars().any(|c| c.is_control()) {
        return Err(invalid(path, "link target must be relative"));
    }
    // Resolve lexically from the link's directory; never climb above the root.
    let mut depth: i64 = path.split('/').count() as i64 - 1;
    for component in target.split('/') {
        match component {
            "" | "." => {}
            ".." => {
                depth -= 1;
                if depth < 0 {
                    return Err(invalid(path, "link target escapes the release tree"));
                }
            }
            _ => depth += 1,
        }
    }
    Ok(())
}

fn invalid(path: &str, reason: &'static str) -> ManifestError {
    ManifestError::InvalidEntry {
        path: path.to_owned(),
        reason,
    }
}

fn mismatch(path: &str, reason: &'static str) -> ManifestError {
    ManifestError::Mismatch {
        path: path.to_owned(),
        reason,
    }
}

#[cfg(test)]
mod tests;
