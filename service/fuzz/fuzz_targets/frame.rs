//! `cargo fuzz run frame --features libfuzzer`: frame decoding and `hello`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    lapis_service_fuzz::frames_and_hello(data);
});
