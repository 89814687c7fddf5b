//! `cargo fuzz run udp_receiver`: see `linerate_proto::fuzz::udp_receiver`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| linerate_proto::fuzz::udp_receiver(data));
