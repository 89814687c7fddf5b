//! `cargo fuzz run iperf3_datagrams`: see `linerate_iperf3::fuzz::iperf3_datagrams`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| linerate_iperf3::fuzz::iperf3_datagrams(data));
