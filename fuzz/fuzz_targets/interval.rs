//! `cargo fuzz run interval`: see `linerate_proto::fuzz::interval`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| linerate_proto::fuzz::interval(data));
