//! Reproducible release archives.
//!
//! `lapis-ai-controller-<version>-<target>.tar.gz` holds exactly
//!
//! ```text
//! LICENSE-APACHE            regular file, 0444
//! LICENSE-MIT               regular file, 0444
//! bin/                      directory, 0755
//! bin/lapis-ai-controller   regular file, 0555
//! release.json              regular file, 0644 (the installer's manifest)
//! ```
//!
//! in that (sorted) order; every file but `release.json` is an entry of the
//! manifest (see [`crate::shipped`]). What must stay true for two builds from the same
//! binary and identity to be byte-identical: every header is ustar with uid
//! and gid 0, no user or group names, the same fixed mtime
//! (`SOURCE_DATE_EPOCH`, else 0) and fixed modes; nothing is read from the
//! file system besides the binary's bytes; the gzip header carries no time,
//! no file name and the "unknown" OS byte; the compression level is pinned by
//! [`COMPRESSION_LEVEL`] and the deflate implementation by `Cargo.lock`.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use flate2::{Compression, GzBuilder};
use thiserror::Error;

use crate::checksums::{CHECKSUMS_FILE, Sha256Hex, Sha256Sums};
use crate::{BuildIdentity, Entry, MANIFEST_FILE, Manifest, ManifestError, PRODUCT};

pub use crate::shipped::{BINARY_MODE, BINARY_PATH};
/// Permission bits of `release.json` in every archive.
pub const MANIFEST_MODE: u32 = 0o644;
/// Pinned deflate level. Changing it changes every archive's bytes.
pub const COMPRESSION_LEVEL: u32 = 6;
/// File name suffix of release archives.
pub const ARCHIVE_SUFFIX: &str = ".tar.gz";

/// The archive file name for a version and target.
pub fn archive_name(version: &str, target: &str) -> String {
    format!("{PRODUCT}-{version}-{target}{ARCHIVE_SUFFIX}")
}

/// Why an archive could not be built.
#[derive(Debug, Error)]
pub enum ArchiveError {
    /// Reading the binary or writing the output failed.
    #[error("{action} {path}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A version or target would not make a safe, single-component file name.
    #[error("{field} {value:?} cannot be part of an archive name")]
    InvalidName {
        /// `version` or `target`.
        field: &'static str,
        /// The offending value.
        value: String,
    },
    /// The manifest built for the binary is invalid.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
}

/// An archive written to disk.
#[derive(Debug, Clone)]
pub struct BuiltArchive {
    /// Where it was written.
    pub path: PathBuf,
    /// Its file name (the `SHA256SUMS` key).
    pub name: String,
    /// SHA-256 of the archive file.
    pub sha256: Sha256Hex,
    /// The manifest stored inside as `release.json`.
    pub manifest: Manifest,
}

/// The manifest of a tree holding only `binary` (its bytes): the smallest
/// tree extraction accepts, for tests of the archive format. Releases are
/// built with [`manifest_for_release`].
pub fn manifest_for_binary(binary: &[u8], build: BuildIdentity) -> Result<Manifest, ManifestError> {
    manifest_of(
        vec![Entry::File {
            path: BINARY_PATH.to_owned(),
            mode: BINARY_MODE,
            size: binary.len() as u64,
            sha256: Sha256Hex::of(binary).as_str().to_owned(),
        }],
        build,
    )
}

/// The manifest of the full release tree for `binary`: the binary and the
/// licence files ([`crate::shipped::release_entries`]).
pub fn manifest_for_release(
    binary: &[u8],
    build: BuildIdentity,
) -> Result<Manifest, ManifestError> {
    let entries = crate::shipped::release_entries(binary.len() as u64, &Sha256Hex::of(binary));
    manifest_of(entries, build)
}

fn manifest_of(entries: Vec<Entry>, build: BuildIdentity) -> Result<Manifest, ManifestError> {
    let manifest = Manifest {
        schema: crate::MANIFEST_SCHEMA,
        name: PRODUCT.to_owned(),
        build,
        entries,
    };
    // Round-trip through the parser so the same invariants hold as for a
    // manifest read back from an archive.
    Manifest::parse(&manifest.to_json())
}

/// The archive bytes for `binary` with `manifest`, every entry stamped
/// `mtime`. Writes exactly the manifest's files: the binary at
/// [`BINARY_PATH`] and shipped files ([`crate::shipped`]) by path; any other
/// entry is refused (`InvalidInput`), so an archive never lists a file it
/// does not carry.
pub fn archive_bytes(binary: &[u8], manifest: &Manifest, mtime: u64) -> io::Result<Vec<u8>> {
    let gz = GzBuilder::new()
        .mtime(0)
        .operating_system(255)
        .write(Vec::new(), Compression::new(COMPRESSION_LEVEL));
    let mut tar = tar::Builder::new(gz);
    let manifest_json = manifest.to_json();
    let mut entries: Vec<(&str, tar::EntryType, u32, &[u8])> =
        vec![("bin/", tar::EntryType::Directory, 0o755, &[])];
    for entry in &manifest.entries {
        let (path, mode) = match entry {
            Entry::File { path, mode, .. } => (path.as_str(), *mode),
            Entry::Link { path, .. } => return Err(not_writable(path)),
        };
        let data = if path == BINARY_PATH {
            binary
        } else {
            crate::shipped::shipped_bytes(path).ok_or_else(|| not_writable(path))?
        };
        entries.push((path, tar::EntryType::Regular, mode, data));
    }
    entries.push((
        MANIFEST_FILE,
        tar::EntryType::Regular,
        MANIFEST_MODE,
        &manifest_json,
    ));
    // Byte order of the stored paths, so the archive is sorted like the tree.
    entries.sort_by(|a, b| a.0.cmp(b.0));
    for (path, kind, mode, data) in entries {
        let mut header = tar::Header::new_ustar();
        header.set_entry_type(kind);
        header.set_mode(mode);
        header.set_size(data.len() as u64);
        header.set_mtime(mtime);
        header.set_uid(0);
        header.set_gid(0);
        tar.append_data(&mut header, path, data)?;
    }
    let gz = tar.into_inner()?;
    let mut bytes = gz.finish()?;
    bytes.flush()?;
    Ok(bytes)
}

fn not_writable(path: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("the manifest lists {path:?}, which an archive cannot carry"),
    )
}

/// Builds `<out_dir>/lapis-ai-controller-<version>-<target>.tar.gz` from the
/// executable at `binary`, replacing an existing file of that name
/// atomically. Does not touch `SHA256SUMS` (see [`write_checksums`]).
pub fn build_archive(
    binary: &Path,
    build: BuildIdentity,
    out_dir: &Path,
    mtime: u64,
) -> Result<BuiltArchive, ArchiveError> {
    check_name_part("version", &build.version)?;
    check_name_part("target", &build.target)?;
    let name = archive_name(&build.version, &build.target);
    let bytes = fs::read(binary).map_err(|source| ArchiveError::Io {
        action: "cannot read the binary",
        path: binary.to_path_buf(),
        source,
    })?;
    let manifest = manifest_for_release(&bytes, build)?;
    let archive = archive_bytes(&bytes, &manifest, mtime).map_err(|source| ArchiveError::Io {
        action: "cannot build the archive for",
        path: binary.to_path_buf(),
        source,
    })?;
    let path = out_dir.join(&name);
    write_atomic(&path, &archive)?;
    Ok(BuiltArchive {
        path,
        name,
        sha256: Sha256Hex::of(&archive),
        manifest,
    })
}

/// Writes `<dir>/SHA256SUMS` listing every release archive in `dir`
/// (`lapis-ai-controller-*.tar.gz`), sorted by name. Returns the list.
pub fn write_checksums(dir: &Path) -> Result<Sha256Sums, ArchiveError> {
    let io_err = |action, path: &Path| {
        let path = path.to_path_buf();
        move |source| ArchiveError::Io {
            action,
            path,
            source,
        }
    };
    let mut sums = Sha256Sums::new();
    for name in archive_names(dir).map_err(io_err("cannot list", dir))? {
        let path = dir.join(&name);
        let (hex, _) = crate::sha256_file(&path).map_err(io_err("cannot read", &path))?;
        sums.insert(
            name,
            Sha256Hex::parse(&hex).expect("sha256_file yields hex"),
        );
    }
    write_atomic(&dir.join(CHECKSUMS_FILE), sums.to_text().as_bytes())?;
    Ok(sums)
}

/// Names of the release archives directly in `dir`, sorted.
pub fn archive_names(dir: &Path) -> io::Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if !entry.file_type()?.is_file() {
            continue;
        }
        if let Some(name) = entry.file_name().to_str()
            && name.starts_with(&format!("{PRODUCT}-"))
            && name.ends_with(ARCHIVE_SUFFIX)
        {
            names.push(name.to_owned());
        }
    }
    names.sort();
    Ok(names)
}

fn check_name_part(field: &'static str, value: &str) -> Result<(), ArchiveError> {
    let ok = !value.is_empty()
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'+'))
        && !value.starts_with('.');
    if ok {
        Ok(())
    } else {
        Err(ArchiveError::InvalidName {
            field,
            value: value.to_owned(),
        })
    }
}

/// Temp file in the same directory, fsync, rename, fsync the directory.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ArchiveError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let err = |action| {
        move |source| ArchiveError::Io {
            action,
            path: path.to_path_buf(),
            source,
        }
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".lapis-release-")
        .tempfile_in(dir)
        .map_err(err("cannot create a temporary file for"))?;
    tmp.write_all(bytes).map_err(err("cannot write"))?;
    tmp.as_file().sync_all().map_err(err("cannot sync"))?;
    // Archives are published files: world-readable like any download.
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o644))
        .map_err(err("cannot set permissions on"))?;
    tmp.persist(path)
        .map_err(|e| e.error)
        .map_err(err("cannot rename into place"))?;
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(err("cannot sync the directory of"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(target: &str) -> BuildIdentity {
        BuildIdentity {
            version: "1.2.3".into(),
            commit: "abc".into(),
            date: "2026-01-01".into(),
            target: target.into(),
        }
    }

    #[test]
    fn building_twice_is_byte_identical() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        fs::write(&bin, b"\x7fELF pretend binary").unwrap();
        let out1 = dir.path().join("one");
        let out2 = dir.path().join("two");
        fs::create_dir_all(&out1).unwrap();
        fs::create_dir_all(&out2).unwrap();
        let a = build_archive(
            &bin,
            build("x86_64-unknown-linux-gnu"),
            &out1,
            1_700_000_000,
        )
        .unwrap();
        // A different mode and mtime on the input must not leak into the output.
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&bin, fs::Permissions::from_mode(0o700)).unwrap();
        let b = build_archive(
            &bin,
            build("x86_64-unknown-linux-gnu"),
            &out2,
            1_700_000_000,
        )
        .unwrap();
        assert_eq!(
            a.name,
            "lapis-ai-controller-1.2.3-x86_64-unknown-linux-gnu.tar.gz"
        );
        assert_eq!(fs::read(&a.path).unwrap(), fs::read(&b.path).unwrap());
        assert_eq!(a.sha256, b.sha256);
        let c = build_archive(&bin, build("x86_64-unknown-linux-gnu"), &out2, 0).unwrap();
        assert_ne!(a.sha256, c.sha256, "mtime is part of the archive");
    }

    #[test]
    fn headers_are_normalised_and_sorted() {
        let manifest = manifest_for_release(b"bin", build("t")).unwrap();
        let bytes = archive_bytes(b"bin", &manifest, 42).unwrap();
        // gzip header: magic, method, flags = 0 (no name), mtime = 0, OS = 255.
        assert_eq!(&bytes[..4], &[0x1f, 0x8b, 8, 0]);
        assert_eq!(&bytes[4..8], &[0, 0, 0, 0]);
        assert_eq!(bytes[9], 255);
        let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(&bytes[..]));
        let mut seen = Vec::new();
        for entry in archive.entries().unwrap() {
            let entry = entry.unwrap();
            let h = entry.header();
            assert_eq!(h.uid().unwrap(), 0);
            assert_eq!(h.gid().unwrap(), 0);
            assert_eq!(h.mtime().unwrap(), 42);
            assert_eq!(h.username_bytes(), Some(&b""[..]));
            assert_eq!(h.groupname_bytes(), Some(&b""[..]));
            seen.push((
                String::from_utf8(entry.path_bytes().into_owned()).unwrap(),
                h.mode().unwrap(),
            ));
        }
        assert_eq!(
            seen,
            vec![
                ("LICENSE-APACHE".to_owned(), 0o444),
                ("LICENSE-MIT".to_owned(), 0o444),
                ("bin/".to_owned(), 0o755),
                (BINARY_PATH.to_owned(), 0o555),
                (MANIFEST_FILE.to_owned(), 0o644),
            ]
        );
    }

    #[test]
    fn an_archive_never_lists_a_file_it_cannot_carry() {
        let mut manifest = manifest_for_release(b"bin", build("t")).unwrap();
        manifest.entries.insert(
            0,
            Entry::File {
                path: "EXTRA".into(),
                mode: 0o644,
                size: 1,
                sha256: Sha256Hex::of(b"x").as_str().to_owned(),
            },
        );
        let err = archive_bytes(b"bin", &manifest, 0).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{err}");
    }

    #[test]
    fn checksums_cover_every_archive_and_names_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("binary");
        fs::write(&bin, b"x").unwrap();
        let out = dir.path().join("out");
        fs::create_dir_all(&out).unwrap();
        let a = build_archive(&bin, build("a-target"), &out, 0).unwrap();
        let b = build_archive(&bin, build("b-target"), &out, 0).unwrap();
        fs::write(out.join("unrelated.txt"), b"x").unwrap();
        let sums = write_checksums(&out).unwrap();
        assert_eq!(sums.len(), 2);
        assert_eq!(sums.get(&a.name).unwrap(), &a.sha256);
        assert_eq!(sums.get(&b.name).unwrap(), &b.sha256);
        let err = build_archive(&bin, build("../evil"), &out, 0).unwrap_err();
        assert!(matches!(err, ArchiveError::InvalidName { .. }), "{err}");
    }
}
