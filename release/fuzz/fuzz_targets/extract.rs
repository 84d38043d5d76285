//! `cargo fuzz run extract --features libfuzzer`: archive extraction.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    lapis_release_fuzz::extract(data);
});
