//! What the fuzz targets exercise, as plain functions so they also compile
//! (and run in unit tests) on stable without libFuzzer.
//!
//! Invariants checked on every input:
//! - `Manifest::parse` never panics; a manifest it accepts round-trips
//!   through `to_json` to an equal manifest with the same digest;
//! - extraction never panics and never writes outside its staging
//!   directory; it either fails or yields a tree its manifest verifies.

use std::io::Write;

use lapis_release::{Limits, Manifest, Sha256Hex, archive_name, extract_into};

/// `release.json` parsing.
pub fn manifest(data: &[u8]) {
    let Ok(m) = Manifest::parse(data) else {
        return;
    };
    let again = Manifest::parse(&m.to_json()).expect("a parsed manifest re-parses");
    assert_eq!(again, m, "manifest round trip");
    assert_eq!(again.digest(), m.digest(), "digest is stable");
}

/// Archive extraction. The first byte picks the framing: odd = the rest
/// is a tar stream that is gzipped here (so the fuzzer reaches the tar
/// parser), even = the rest is used as the archive file as is. The
/// checksum always matches, so the checks past it are exercised.
pub fn extract(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let bytes = if mode & 1 == 1 {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(rest).expect("in memory");
        gz.finish().expect("in memory")
    } else {
        rest.to_vec()
    };
    let parent = tempfile::tempdir().expect("temp dir");
    let staging = parent.path().join("staging");
    std::fs::create_dir(&staging).expect("staging dir");
    let limits = Limits {
        max_archive_bytes: 1 << 20,
        max_entry_bytes: 1 << 20,
        max_total_bytes: 4 << 20,
        max_entries: 64,
    };
    let name = archive_name("1.0.0", "x86_64-unknown-linux-gnu");
    let expected = Sha256Hex::of(&bytes);
    let result = extract_into(&bytes, &name, &expected, None, &staging, &limits);
    let siblings: Vec<_> = std::fs::read_dir(parent.path())
        .expect("list parent")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(
        siblings,
        vec![std::ffi::OsString::from("staging")],
        "wrote outside staging"
    );
    if let Ok(m) = result {
        m.verify_tree(&staging).expect("an accepted tree verifies");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_do_not_panic() {
        manifest(b"{}");
        manifest(b"\xff");
        manifest(br#"{"schema":1,"product":"lapis-ai-controller","entries":[]}"#);
        extract(b"");
        extract(b"\x00not gzip");
        extract(b"\x01not tar");
        let mut tar = vec![1u8];
        tar.extend_from_slice(&[0u8; 1024]);
        extract(&tar);
    }
}
