//! Hostile and broken archives, crafted with the `tar` crate's raw header API
//! so that paths and types a well-behaved builder refuses can be written.

use super::*;
use crate::BuildIdentity;
use crate::archive::{archive_bytes, manifest_for_binary};

const TARGET: &str = "x86_64-unknown-linux-gnu";

fn identity(target: &str) -> BuildIdentity {
    BuildIdentity {
        version: "1.0.0".into(),
        commit: "c".into(),
        date: "2026-01-01".into(),
        target: target.into(),
    }
}

fn good() -> Vec<u8> {
    let manifest = manifest_for_binary(b"#!/bin/sh\n", identity(TARGET)).unwrap();
    archive_bytes(b"#!/bin/sh\n", &manifest, 0).unwrap()
}

/// One raw entry: stored path bytes, type, mode, data, link name.
struct Raw<'a>(&'a [u8], tar::EntryType, u32, &'a [u8], &'a [u8]);

fn craft(entries: &[Raw<'_>]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut builder = tar::Builder::new(gz);
    for Raw(path, kind, mode, data, link) in entries {
        let mut header = tar::Header::new_ustar();
        let ustar = header.as_ustar_mut().unwrap();
        ustar.name[..path.len()].copy_from_slice(path);
        ustar.linkname[..link.len()].copy_from_slice(link);
        header.set_entry_type(*kind);
        header.set_mode(*mode);
        header.set_size(data.len() as u64);
        header.set_cksum();
        builder.append(&header, *data).unwrap();
    }
    builder.into_inner().unwrap().finish().unwrap()
}

/// A crafted archive whose manifest matches a one-file tree, plus `extra`.
fn with_valid_manifest(extra: &[Raw<'_>]) -> Vec<u8> {
    let manifest = manifest_for_binary(b"bin", identity(TARGET)).unwrap();
    let json = manifest.to_json();
    let mut entries = vec![
        Raw(
            b"bin/lapis-ai-controller",
            tar::EntryType::Regular,
            0o755,
            b"bin",
            b"",
        ),
        Raw(b"release.json", tar::EntryType::Regular, 0o644, &json, b""),
    ];
    for Raw(a, b, c, d, e) in extra {
        entries.push(Raw(a, *b, *c, d, e));
    }
    craft(&entries)
}

fn extract(bytes: &[u8], parent: &Path) -> Result<ExtractedRelease, ExtractError> {
    extract_with(bytes, parent, &Limits::default())
}

fn extract_with(
    bytes: &[u8],
    parent: &Path,
    limits: &Limits,
) -> Result<ExtractedRelease, ExtractError> {
    // Tests of everything after the checksum vouch for the crafted bytes.
    extract_release(
        bytes,
        "a.tar.gz",
        &Sha256Hex::of(bytes),
        Some(TARGET),
        parent,
        limits,
    )
}

/// Asserts the failure left nothing behind in the staging parent.
#[track_caller]
fn refused(bytes: &[u8]) -> ExtractError {
    let parent = tempfile::tempdir().unwrap();
    let err = extract(bytes, parent.path()).unwrap_err();
    assert_eq!(
        fs::read_dir(parent.path()).unwrap().count(),
        0,
        "staging left behind"
    );
    err
}

#[test]
fn extracts_a_good_archive_with_exact_modes() {
    let parent = tempfile::tempdir().unwrap();
    let bytes = good();
    let tree = extract(&bytes, parent.path()).unwrap();
    let bin = tree.path().join(BINARY_PATH);
    assert_eq!(fs::read(&bin).unwrap(), b"#!/bin/sh\n");
    assert_eq!(
        fs::metadata(&bin).unwrap().permissions().mode() & 0o7777,
        crate::archive::BINARY_MODE
    );
    assert_eq!(tree.manifest().build.target, TARGET);
    assert!(
        tree.path()
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with(STAGING_PREFIX)
    );
    let kept = tree.keep();
    assert!(kept.join("release.json").is_file());
}

#[test]
fn checksum_is_checked_before_parsing() {
    let bytes = good();
    let expected = Sha256Hex::of(&bytes);
    let parent = tempfile::tempdir().unwrap();
    let mut flipped = bytes.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x01;
    let truncated = &bytes[..bytes.len() - 9];
    for bad in [&flipped[..], truncated] {
        let err = extract_release(
            bad,
            "a.tar.gz",
            &expected,
            Some(TARGET),
            parent.path(),
            &Limits::default(),
        )
        .unwrap_err();
        assert!(
            matches!(err, ExtractError::Checksum(ChecksumError::Mismatch { .. })),
            "{err}"
        );
    }
    assert_eq!(
        fs::read_dir(parent.path()).unwrap().count(),
        0,
        "nothing staged"
    );
}

#[test]
fn corrupt_bytes_fail_to_parse_even_with_a_matching_checksum() {
    let bytes = good();
    let err = refused(&bytes[..bytes.len() / 2]);
    assert!(matches!(err, ExtractError::Corrupt(_)), "{err}");
    let err = refused(b"not gzip at all");
    assert!(matches!(err, ExtractError::Corrupt(_)), "{err}");
}

#[test]
fn unsafe_paths_are_refused() {
    for path in [
        &b"../evil"[..],
        b"bin/../../evil",
        b"/etc/evil",
        b"./bin/x",
        b"bin//x",
        b"bin/x\\y",
    ] {
        let archive = with_valid_manifest(&[Raw(path, tar::EntryType::Regular, 0o644, b"x", b"")]);
        let err = refused(&archive);
        assert!(
            matches!(err, ExtractError::UnsafePath { .. }),
            "{path:?}: {err}"
        );
    }
}

#[test]
fn links_devices_fifos_and_extension_headers_are_refused() {
    for (kind, word) in [
        (tar::EntryType::Symlink, "symbolic link"),
        (tar::EntryType::Link, "hard link"),
        (tar::EntryType::Char, "device"),
        (tar::EntryType::Block, "device"),
        (tar::EntryType::Fifo, "fifo"),
        (tar::EntryType::GNULongName, "extended header"),
        (tar::EntryType::XHeader, "extended header"),
    ] {
        let archive =
            with_valid_manifest(&[Raw(b"bin/link", kind, 0o777, b"", b"lapis-ai-controller")]);
        let err = refused(&archive);
        assert!(
            matches!(&err, ExtractError::UnsupportedEntry { kind, .. } if kind == word),
            "{word}: {err}"
        );
    }
}

#[test]
fn duplicates_and_file_directory_clashes_are_refused() {
    let twice = with_valid_manifest(&[Raw(
        b"bin/lapis-ai-controller",
        tar::EntryType::Regular,
        0o755,
        b"bin",
        b"",
    )]);
    assert!(matches!(refused(&twice), ExtractError::Duplicate { .. }));
    let clash = with_valid_manifest(&[Raw(
        b"bin/lapis-ai-controller/x",
        tar::EntryType::Regular,
        0o644,
        b"",
        b"",
    )]);
    assert!(matches!(refused(&clash), ExtractError::Duplicate { .. }));
    let dir_twice = craft(&[
        Raw(b"bin/", tar::EntryType::Directory, 0o755, b"", b""),
        Raw(b"bin/", tar::EntryType::Directory, 0o755, b"", b""),
    ]);
    assert!(matches!(
        refused(&dir_twice),
        ExtractError::Duplicate { .. }
    ));
}

#[test]
fn special_bits_and_limits_are_refused() {
    let manifest = manifest_for_binary(b"bin", identity(TARGET)).unwrap();
    let json = manifest.to_json();
    let setuid = craft(&[
        Raw(
            b"bin/lapis-ai-controller",
            tar::EntryType::Regular,
            0o4755,
            b"bin",
            b"",
        ),
        Raw(b"release.json", tar::EntryType::Regular, 0o644, &json, b""),
    ]);
    assert!(matches!(refused(&setuid), ExtractError::SpecialBits { .. }));

    let parent = tempfile::tempdir().unwrap();
    let bytes = good();
    let tight = |f: fn(&mut Limits)| {
        let mut limits = Limits::default();
        f(&mut limits);
        limits
    };
    for limits in [
        tight(|l| l.max_entry_bytes = 4),
        tight(|l| l.max_total_bytes = 20),
        tight(|l| l.max_entries = 2),
    ] {
        let err = extract_with(&bytes, parent.path(), &limits).unwrap_err();
        assert!(matches!(err, ExtractError::OverLimit { .. }), "{err}");
    }
    let err =
        extract_with(&bytes, parent.path(), &tight(|l| l.max_archive_bytes = 10)).unwrap_err();
    assert!(matches!(err, ExtractError::ArchiveTooLarge { .. }), "{err}");
    assert_eq!(fs::read_dir(parent.path()).unwrap().count(), 0);
}

#[test]
fn manifest_must_match_files_list_the_binary_and_name_the_target() {
    let manifest = manifest_for_binary(b"bin", identity(TARGET)).unwrap();
    let json = manifest.to_json();
    let lying = craft(&[
        Raw(
            b"bin/lapis-ai-controller",
            tar::EntryType::Regular,
            0o755,
            b"evil",
            b"",
        ),
        Raw(b"release.json", tar::EntryType::Regular, 0o644, &json, b""),
    ]);
    let err = refused(&lying);
    assert!(
        matches!(err, ExtractError::Manifest(ManifestError::Mismatch { .. })),
        "{err}"
    );

    let extra =
        with_valid_manifest(&[Raw(b"bin/extra", tar::EntryType::Regular, 0o644, b"x", b"")]);
    let err = refused(&extra);
    assert!(
        matches!(&err, ExtractError::Manifest(ManifestError::Mismatch { reason, .. }) if reason.contains("not in the manifest")),
        "{err}"
    );

    let no_manifest = craft(&[Raw(
        b"bin/lapis-ai-controller",
        tar::EntryType::Regular,
        0o755,
        b"bin",
        b"",
    )]);
    assert!(matches!(
        refused(&no_manifest),
        ExtractError::Manifest(ManifestError::Io { .. })
    ));

    let empty = manifest_for_binary(b"bin", identity(TARGET)).unwrap();
    let empty = crate::Manifest {
        entries: vec![],
        ..empty
    };
    let json = empty.to_json();
    let no_binary = craft(&[Raw(
        b"release.json",
        tar::EntryType::Regular,
        0o644,
        &json,
        b"",
    )]);
    assert!(matches!(refused(&no_binary), ExtractError::NoBinary));

    let other = manifest_for_binary(b"bin", identity("aarch64-apple-darwin")).unwrap();
    let other = archive_bytes(b"bin", &other, 0).unwrap();
    let err = refused(&other);
    assert!(
        matches!(&err, ExtractError::WrongTarget { found, .. } if found == "aarch64-apple-darwin"),
        "{err}"
    );
}

/// Issue 15: a 1 GB gzip bomb used to fit under the default bounds, so all
/// of it was written to staging before the manifest check refused it. The
/// extractor decides from the entry header, which declares the size before
/// any data: here the first MiB of such a bomb (the rest of the stream need
/// not exist, nothing may read it). The default bounds now refuse it before a
/// byte is written, and nothing is left behind.
#[test]
fn a_one_gigabyte_gzip_bomb_is_refused_before_it_reaches_the_disk() {
    const BOMB: u64 = 1_000_000_000;
    let mut header = tar::Header::new_ustar();
    header.set_path(BINARY_PATH).unwrap();
    header.set_entry_type(tar::EntryType::Regular);
    header.set_mode(0o555);
    header.set_size(BOMB);
    header.set_cksum();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(header.as_bytes()).unwrap();
    gz.write_all(&vec![0u8; 1 << 20]).unwrap();
    let bytes = gz.finish().unwrap();

    let limits = Limits::default();

    let parent = tempfile::tempdir().unwrap();
    let err = extract_with(&bytes, parent.path(), &limits).unwrap_err();
    assert!(
        matches!(err, ExtractError::OverLimit { found: BOMB, .. }),
        "{err}"
    );
    assert_eq!(fs::read_dir(parent.path()).unwrap().count(), 0);
}
