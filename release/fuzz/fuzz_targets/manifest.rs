//! `cargo fuzz run manifest --features libfuzzer`: `release.json` parsing.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    lapis_release_fuzz::manifest(data);
});
