//! What every release tree ships: the binary (its path and mode) and, beside
//! it, the licence texts of the workspace's `MIT OR Apache-2.0`.
//!
//! The texts are compiled in from the repository root, so the archive builder
//! (`lapis-release build`) and the installer (`install` from the running
//! executable) write the same bytes. What must stay true: a release tree built
//! from one binary has one manifest, and so one digest, whether it was
//! installed from the executable or from an archive of it; both paths build
//! their entries through [`release_entries`].

use crate::{Entry, Sha256Hex};

/// Relative path of the executable inside a release tree.
pub const BINARY_PATH: &str = "bin/lapis-ai-controller";
/// Permission bits of the executable in every release tree: in archives and
/// in every installed snapshot, whichever way it was installed. Read-only
/// (a snapshot is immutable) and part of the digest, so this one value is
/// what keeps one binary at one digest.
pub const BINARY_MODE: u32 = 0o555;

/// One file shipped beside the binary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShippedFile {
    /// Relative path in the release tree.
    pub path: &'static str,
    /// Contents.
    pub bytes: &'static [u8],
}

/// Permission bits of every shipped file: documents, read-only like the
/// rest of a sealed snapshot (the binary is 0555, `release.json` 0444).
pub const SHIPPED_FILE_MODE: u32 = 0o444;

/// The licence files, sorted by path. A published archive must carry each of
/// them (checked by [`crate::verify::verify_dir`]).
pub const LICENSE_FILES: [ShippedFile; 2] = [
    ShippedFile {
        path: "LICENSE-APACHE",
        bytes: include_bytes!("../../LICENSE-APACHE"),
    },
    ShippedFile {
        path: "LICENSE-MIT",
        bytes: include_bytes!("../../LICENSE-MIT"),
    },
];

/// The manifest entries of a full release tree around a binary of `size`
/// bytes hashing to `sha256`: the binary (mode
/// [`BINARY_MODE`]) and every [`LICENSE_FILES`] entry, sorted
/// by path.
pub fn release_entries(size: u64, sha256: &Sha256Hex) -> Vec<Entry> {
    let mut entries: Vec<Entry> = LICENSE_FILES
        .iter()
        .map(|file| Entry::File {
            path: file.path.to_owned(),
            mode: SHIPPED_FILE_MODE,
            size: file.bytes.len() as u64,
            sha256: Sha256Hex::of(file.bytes).as_str().to_owned(),
        })
        .collect();
    entries.push(Entry::File {
        path: BINARY_PATH.to_owned(),
        mode: BINARY_MODE,
        size,
        sha256: sha256.as_str().to_owned(),
    });
    entries.sort_by(|a, b| a.path().cmp(b.path()));
    entries
}

/// The contents of a shipped file by its relative path.
pub(crate) fn shipped_bytes(path: &str) -> Option<&'static [u8]> {
    LICENSE_FILES
        .iter()
        .find(|file| file.path == path)
        .map(|file| file.bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn licences_are_the_real_texts_and_entries_are_sorted() {
        let mit = shipped_bytes("LICENSE-MIT").unwrap();
        let apache = shipped_bytes("LICENSE-APACHE").unwrap();
        assert!(
            std::str::from_utf8(mit)
                .unwrap()
                .contains("Copyright (c) The lapis-ai-controller developers")
        );
        assert!(std::str::from_utf8(mit).unwrap().contains("MIT License"));
        assert!(
            std::str::from_utf8(apache)
                .unwrap()
                .contains("Version 2.0, January 2004")
        );
        let entries = release_entries(3, &Sha256Hex::of(b"abc"));
        let paths: Vec<_> = entries.iter().map(Entry::path).collect();
        assert_eq!(paths, ["LICENSE-APACHE", "LICENSE-MIT", BINARY_PATH]);
        assert_eq!(shipped_bytes(BINARY_PATH), None);
    }
}
