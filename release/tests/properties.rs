//! Property tests for the parsers that face untrusted input: the checksum
//! list and the archive extractor.

use std::path::Path;

use lapis_release::checksums::{Sha256Hex, Sha256Sums};
use lapis_release::{Limits, extract_release};
use proptest::prelude::*;

fn name() -> impl Strategy<Value = String> {
    "[A-Za-z0-9._+-]{1,40}".prop_filter("not . or ..", |n| n != "." && n != "..")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Whatever is written parses back to the same list.
    #[test]
    fn checksum_lists_round_trip(entries in proptest::collection::btree_map(name(), any::<[u8; 8]>(), 0..8)) {
        let mut sums = Sha256Sums::new();
        for (name, seed) in &entries {
            sums.insert(name.clone(), Sha256Hex::of(seed));
        }
        let parsed = Sha256Sums::parse(sums.to_text().as_bytes()).unwrap();
        prop_assert_eq!(parsed, sums);
    }

    /// Arbitrary bytes never panic the checksum parser, and whatever it
    /// accepts names only bare file names.
    #[test]
    fn checksum_parser_is_total(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        if let Ok(sums) = Sha256Sums::parse(&bytes) {
            for (name, _) in sums.iter() {
                prop_assert!(!name.contains('/') && !name.is_empty());
            }
        }
    }

    /// A tar with one arbitrary entry path never writes outside the staging
    /// directory, whatever the path, and never panics.
    #[test]
    fn extraction_stays_inside_staging(path in "[a-z./]{1,24}", data in proptest::collection::vec(any::<u8>(), 0..64)) {
        let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        let mut builder = tar::Builder::new(gz);
        let mut header = tar::Header::new_ustar();
        let raw = path.as_bytes();
        header.as_ustar_mut().unwrap().name[..raw.len()].copy_from_slice(raw);
        header.set_entry_type(tar::EntryType::Regular);
        header.set_mode(0o644);
        header.set_size(data.len() as u64);
        header.set_cksum();
        builder.append(&header, &data[..]).unwrap();
        let bytes = builder.into_inner().unwrap().finish().unwrap();

        let outer = tempfile::tempdir().unwrap();
        let parent = outer.path().join("parent");
        std::fs::create_dir(&parent).unwrap();
        let result = extract_release(
            &bytes, "a.tar.gz", &Sha256Hex::of(&bytes), None, &parent, &Limits::default(),
        );
        // No manifest in the archive, so it can never succeed...
        prop_assert!(result.is_err());
        // ...and nothing may exist outside the (already removed) staging dir.
        prop_assert_eq!(entries(outer.path()), vec!["parent".to_owned()]);
        prop_assert!(entries(&parent).is_empty());
    }
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}
