//! Safe extraction of a release archive into a fresh staging directory.
//!
//! The order is the security argument, so it must stay:
//!
//! 1. the archive is read into memory once (bounded by
//!    [`Limits::max_archive_bytes`]) and its SHA-256 compared with the
//!    expected value **before** a single byte is parsed, so every later step
//!    works on exactly the bytes that were vouched for;
//! 2. tar headers are read raw (no GNU long-name or PAX processing): only
//!    regular files and directories are accepted; links, devices, fifos and
//!    extension headers are refused, as are absolute paths, `.`/`..`/empty
//!    components, permission bits beyond `0o777`, duplicate paths, and
//!    entries or totals over the limits. The limits are checked against each
//!    entry's declared size *before* any of its data is written, and the tar
//!    reader never yields more than the declared size, so the bytes written
//!    while streaming never exceed [`Limits::max_total_bytes`] (a gzip bomb
//!    stops at its header). Nothing is ever skipped: an entry that cannot be
//!    extracted fails the whole extraction;
//! 3. files are created with `create_new` inside a new directory made for
//!    this extraction (no link can exist there to be followed), fsynced, and
//!    given exactly the header's permission bits;
//! 4. `release.json` must parse, the tree must match it byte for byte, it must
//!    list `bin/lapis-ai-controller`, and its target must be the one expected.
//!
//! On any failure the staging directory is removed.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use flate2::read::GzDecoder;
use thiserror::Error;

use crate::archive::BINARY_PATH;
use crate::checksums::{ChecksumError, Sha256Hex, check_bytes};
use crate::{Entry, Manifest, ManifestError};

mod rules;
use rules::{Seen, describe, normalise, record};

/// Prefix of the staging directories made by [`extract_release`]; a later
/// install may remove leftovers with this prefix.
pub(crate) const STAGING_PREFIX: &str = ".extract-";

/// Bounds on what an archive may contain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest archive file accepted, compressed.
    pub max_archive_bytes: u64,
    /// Largest single entry, uncompressed.
    pub max_entry_bytes: u64,
    /// Largest sum of all entries, uncompressed.
    pub max_total_bytes: u64,
    /// Most entries (files and directories) accepted.
    pub max_entries: usize,
}

impl Default for Limits {
    /// Generous for a single binary (a release build is tens of MiB, an
    /// unoptimised debug build under 200 MiB), small enough that a hostile
    /// archive cannot fill a disk: 256 MiB compressed (also the download
    /// bound), 256 MiB per entry and in total, 64 entries. A 1 GB gzip bomb
    /// is refused at its entry header, before any of it is written.
    fn default() -> Limits {
        Limits {
            max_archive_bytes: 256 << 20,
            max_entry_bytes: 256 << 20,
            max_total_bytes: 256 << 20,
            max_entries: 64,
        }
    }
}

/// Why an archive was refused. Messages name entries and limits, never
/// contents.
#[derive(Debug, Error)]
pub enum ExtractError {
    /// Reading the archive file failed.
    #[error("cannot read archive {path}")]
    ReadArchive {
        /// The archive path.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The archive file is larger than [`Limits::max_archive_bytes`].
    #[error("archive is larger than the {limit} byte limit")]
    ArchiveTooLarge {
        /// The limit.
        limit: u64,
    },
    /// The archive's checksum does not match (checked before parsing).
    #[error("archive failed checksum verification")]
    Checksum(#[from] ChecksumError),
    /// The bytes are not a well-formed gzip-compressed tar.
    #[error("archive is not a well-formed .tar.gz")]
    Corrupt(#[source] io::Error),
    /// An entry of a type other than regular file or directory.
    #[error("archive entry {path:?} is a {kind}; only regular files and directories are allowed")]
    UnsupportedEntry {
        /// The entry's path as stored.
        path: String,
        /// What it is.
        kind: String,
    },
    /// An entry path that could land outside the staging directory or is not
    /// in normal form.
    #[error("archive entry {path:?} has an unsafe path: {reason}")]
    UnsafePath {
        /// The entry's path as stored.
        path: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The same path appears twice (or as both a file and a directory).
    #[error("archive entry {path:?} appears more than once")]
    Duplicate {
        /// The repeated path.
        path: String,
    },
    /// Setuid, setgid or sticky bits.
    #[error("archive entry {path:?} has special permission bits {mode:o}")]
    SpecialBits {
        /// The entry path.
        path: String,
        /// The mode found.
        mode: u32,
    },
    /// An entry, the total, or the entry count exceeds the limits.
    #[error("archive exceeds a limit: {what} ({found} > {limit})")]
    OverLimit {
        /// Which limit.
        what: &'static str,
        /// The value found.
        found: u64,
        /// The limit.
        limit: u64,
    },
    /// Writing the staging tree failed.
    #[error("cannot write {path}")]
    Write {
        /// The path being written.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// `release.json` is missing, malformed, or disagrees with the files.
    #[error("archive does not verify against its release.json")]
    Manifest(#[from] ManifestError),
    /// The manifest does not list the executable.
    #[error("archive has no {BINARY_PATH}")]
    NoBinary,
    /// The release was built for another target.
    #[error("archive is for target {found}, but this machine needs {expected}")]
    WrongTarget {
        /// The target this binary runs on.
        expected: String,
        /// The target in the archive's manifest.
        found: String,
    },
}

/// A verified release tree in a staging directory that is removed on drop
/// unless `ExtractedRelease::keep` (tests) is called.
#[derive(Debug)]
pub struct ExtractedRelease {
    /// The staging directory (the tree's root), held so that dropping the
    /// release removes it; only the unit tests read it.
    #[cfg_attr(not(test), allow(dead_code))]
    dir: Option<tempfile::TempDir>,
    /// The verified `release.json`.
    manifest: Manifest,
}

impl ExtractedRelease {
    /// Root of the extracted tree.
    #[cfg(test)]
    pub(crate) fn path(&self) -> &Path {
        self.dir.as_ref().expect("present until keep").path()
    }

    /// The verified manifest.
    pub(crate) fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Stops the automatic removal and returns the tree's root, for a caller
    /// that renames the tree into place.
    #[cfg(test)]
    pub(crate) fn keep(mut self) -> PathBuf {
        self.dir.take().expect("present until keep").keep()
    }
}

/// Reads an archive file into memory, refusing one over `limits`.
pub(crate) fn read_archive(path: &Path, limits: &Limits) -> Result<Vec<u8>, ExtractError> {
    let err = |source| ExtractError::ReadArchive {
        path: path.to_path_buf(),
        source,
    };
    let file = fs::File::open(path).map_err(err)?;
    let mut bytes = Vec::new();
    file.take(limits.max_archive_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(err)?;
    if bytes.len() as u64 > limits.max_archive_bytes {
        return Err(ExtractError::ArchiveTooLarge {
            limit: limits.max_archive_bytes,
        });
    }
    Ok(bytes)
}

/// Verifies `bytes` against `expected` (naming `name` in errors), then
/// extracts them into a new directory under `staging_parent` and verifies
/// the tree against its manifest and, when given, `target` (only
/// `lapis-release verify` passes `None`, and checks the archive name
/// instead). See the module docs.
pub fn extract_release(
    bytes: &[u8],
    name: &str,
    expected: &Sha256Hex,
    target: Option<&str>,
    staging_parent: &Path,
    limits: &Limits,
) -> Result<ExtractedRelease, ExtractError> {
    check_archive(bytes, name, expected, limits)?;
    let dir = tempfile::Builder::new()
        .prefix(STAGING_PREFIX)
        .tempdir_in(staging_parent)
        .map_err(|source| ExtractError::Write {
            path: staging_parent.to_path_buf(),
            source,
        })?;
    let manifest = extract_into(bytes, name, expected, target, dir.path(), limits)?;
    Ok(ExtractedRelease {
        dir: Some(dir),
        manifest,
    })
}

/// Like [`extract_release`], into `dir`, an empty directory the caller made
/// and removes on failure (the installer's staging directory, so the tree is
/// renamed into place without a copy). Returns the verified manifest.
pub fn extract_into(
    bytes: &[u8],
    name: &str,
    expected: &Sha256Hex,
    target: Option<&str>,
    dir: &Path,
    limits: &Limits,
) -> Result<Manifest, ExtractError> {
    check_archive(bytes, name, expected, limits)?;
    let not_empty = fs::read_dir(dir)
        .map_err(|source| ExtractError::Write {
            path: dir.to_path_buf(),
            source,
        })?
        .next()
        .is_some();
    if not_empty {
        return Err(ExtractError::Write {
            path: dir.to_path_buf(),
            source: io::Error::new(
                io::ErrorKind::AlreadyExists,
                "staging directory is not empty",
            ),
        });
    }
    unpack(bytes, dir, limits)?;
    let manifest = Manifest::read_from(dir)?;
    manifest.verify_tree(dir)?;
    if !manifest
        .entries
        .iter()
        .any(|e| matches!(e, Entry::File { path, .. } if path == BINARY_PATH))
    {
        return Err(ExtractError::NoBinary);
    }
    if let Some(target) = target
        && manifest.build.target != target
    {
        return Err(ExtractError::WrongTarget {
            expected: target.to_owned(),
            found: manifest.build.target.clone(),
        });
    }
    Ok(manifest)
}

/// Size bound, then checksum: nothing is parsed before both pass.
fn check_archive(
    bytes: &[u8],
    name: &str,
    expected: &Sha256Hex,
    limits: &Limits,
) -> Result<(), ExtractError> {
    if bytes.len() as u64 > limits.max_archive_bytes {
        return Err(ExtractError::ArchiveTooLarge {
            limit: limits.max_archive_bytes,
        });
    }
    check_bytes(name, bytes, expected)?;
    Ok(())
}

fn unpack(bytes: &[u8], root: &Path, limits: &Limits) -> Result<(), ExtractError> {
    let mut archive = tar::Archive::new(GzDecoder::new(bytes));
    let entries = archive.entries().map_err(ExtractError::Corrupt)?.raw(true);
    let mut seen: BTreeMap<String, Seen> = BTreeMap::new();
    let mut total: u64 = 0;
    let mut count: u64 = 0;
    for entry in entries {
        let mut entry = entry.map_err(ExtractError::Corrupt)?;
        count += 1;
        if count > limits.max_entries as u64 {
            return Err(ExtractError::OverLimit {
                what: "number of entries",
                found: count,
                limit: limits.max_entries as u64,
            });
        }
        let raw_path = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let kind = entry.header().entry_type();
        let is_dir = match kind {
            tar::EntryType::Regular => false,
            tar::EntryType::Directory => true,
            other => {
                return Err(ExtractError::UnsupportedEntry {
                    path: raw_path,
                    kind: describe(other),
                });
            }
        };
        let rel = normalise(&raw_path, is_dir)?;
        record(&mut seen, &rel, is_dir, &raw_path)?;
        let dest = root.join(&rel);
        if is_dir {
            create_dirs(root, &dest)?;
            continue;
        }
        let mode = entry.header().mode().map_err(ExtractError::Corrupt)?;
        if mode & !0o777 != 0 {
            return Err(ExtractError::SpecialBits {
                path: raw_path,
                mode,
            });
        }
        let size = entry.header().size().map_err(ExtractError::Corrupt)?;
        if size > limits.max_entry_bytes {
            return Err(ExtractError::OverLimit {
                what: "entry size",
                found: size,
                limit: limits.max_entry_bytes,
            });
        }
        total = total.saturating_add(size);
        if total > limits.max_total_bytes {
            return Err(ExtractError::OverLimit {
                what: "total size",
                found: total,
                limit: limits.max_total_bytes,
            });
        }
        if let Some(parent) = dest.parent() {
            create_dirs(root, parent)?;
        }
        write_file(&mut entry, &dest, size, mode)?;
    }
    fsync_dirs(root, &seen)
}

fn write_file(
    entry: &mut impl Read,
    dest: &Path,
    size: u64,
    mode: u32,
) -> Result<(), ExtractError> {
    let err = |source| ExtractError::Write {
        path: dest.to_path_buf(),
        source,
    };
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(dest)
        .map_err(err)?;
    let mut buf = vec![0u8; 256 * 1024];
    let mut written: u64 = 0;
    loop {
        let n = entry.read(&mut buf).map_err(ExtractError::Corrupt)?;
        if n == 0 {
            break;
        }
        file.write_all(&buf[..n]).map_err(err)?;
        written += n as u64;
    }
    if written != size {
        return Err(ExtractError::Corrupt(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("entry {} is truncated", dest.display()),
        )));
    }
    // Exact bits, independent of the umask.
    file.set_permissions(fs::Permissions::from_mode(mode))
        .map_err(err)?;
    file.sync_all().map_err(err)
}

fn create_dirs(root: &Path, dir: &Path) -> Result<(), ExtractError> {
    debug_assert!(dir.starts_with(root));
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir)
        .map_err(|source| ExtractError::Write {
            path: dir.to_path_buf(),
            source,
        })
}

fn fsync_dirs(root: &Path, seen: &BTreeMap<String, Seen>) -> Result<(), ExtractError> {
    let dirs = seen
        .iter()
        .filter(|(_, s)| **s != Seen::File)
        .map(|(p, _)| root.join(p))
        .chain(std::iter::once(root.to_path_buf()));
    for dir in dirs {
        fs::File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(|source| ExtractError::Write { path: dir, source })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
