//! `cargo fuzz run rr_flow`: see `linerate_proto::fuzz::rr_flow`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| linerate_proto::fuzz::rr_flow(data));
