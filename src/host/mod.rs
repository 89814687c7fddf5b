//! The host-insight commands (`iface`, `doctor`, `ping`) and the `--iface` counters
//! a test adds to its report. The reading lives in `linerate-host`; this
//! module schedules it and writes the output.

pub mod doctor;
pub mod iface;
pub mod iface_sink;
pub mod ping;

use linerate_report::render::Format;

use crate::cli::HostFormat;

/// The test output format a host command's format corresponds to (for
/// the error record main prints on failure).
pub fn format(f: HostFormat) -> Format {
    match f {
        HostFormat::Human => Format::Human,
        HostFormat::Json => Format::Json,
        HostFormat::JsonLines => Format::JsonLines,
    }
}
