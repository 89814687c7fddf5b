//! `cargo fuzz run iperf3_json`: see `linerate_iperf3::fuzz::iperf3_json`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| linerate_iperf3::fuzz::iperf3_json(data));
