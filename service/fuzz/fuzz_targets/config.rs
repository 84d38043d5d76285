//! `cargo fuzz run config --features libfuzzer`: config parsing.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    lapis_service_fuzz::config::config(data);
});
