//! The host-insight commands (`iface`, `doctor`, `ping`) and the `--iface` counters
//! a test adds to its report. The reading lives in `linerate-host`; this
//! module schedules it and writes the output.

pub mod doctor;
pub mod iface;
pub mod iface_sink;
pub mod ping;
