//! `cargo fuzz run client_session`: see `linerate_proto::fuzz::client_session`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| linerate_proto::fuzz::client_session(data));
