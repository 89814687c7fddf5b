//! `cargo fuzz run server_session`: see `linerate_proto::fuzz::server_session`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| linerate_proto::fuzz::server_session(data));
