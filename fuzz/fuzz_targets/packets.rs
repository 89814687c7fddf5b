//! `cargo fuzz run packets`: see `linerate_proto::fuzz::packets`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| linerate_proto::fuzz::packets(data));
