//! `cargo fuzz run control_frames`: see `linerate_proto::fuzz::control_frames`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| linerate_proto::fuzz::control_frames(data));
