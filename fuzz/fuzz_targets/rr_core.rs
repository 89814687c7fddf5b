//! `cargo fuzz run rr_core`: see `linerate_proto::fuzz::rr_core`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| linerate_proto::fuzz::rr_core(data));
