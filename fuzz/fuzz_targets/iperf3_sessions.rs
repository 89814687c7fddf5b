//! `cargo fuzz run iperf3_sessions`: see `linerate_iperf3::fuzz::iperf3_sessions`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| linerate_iperf3::fuzz::iperf3_sessions(data));
