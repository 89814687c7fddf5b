//! `cargo fuzz run udp_sender`: see `linerate_proto::fuzz::udp_sender`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| linerate_proto::fuzz::udp_sender(data));
