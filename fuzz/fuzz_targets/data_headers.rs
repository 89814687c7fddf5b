//! `cargo fuzz run data_headers`: see `linerate_proto::fuzz::data_headers`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| linerate_proto::fuzz::data_headers(data));
