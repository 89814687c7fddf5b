//! `cargo fuzz run auth`: see `linerate_proto::fuzz::auth`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| linerate_proto::fuzz::auth(data));
