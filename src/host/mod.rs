//! The host-insight commands (`iface`, `doctor`, `ping`) and the `--iface` counters
//! a test adds to its report. The reading lives in `linerate-host`; this
//! module schedules it and writes the output.

pub mod doctor;
pub mod iface;
pub mod iface_sink;
pub mod ping;

use std::io::{self, Write};

use linerate_proto::sanitize::sanitize_lines;
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

/// A host command's human output with every system-supplied string made
/// safe for a terminal ([`sanitize_lines`]: an interface may be named with
/// ESC or BEL, and a driver string is whatever the driver says). Lines stay
/// lines.
#[derive(Debug)]
pub struct Clean<W: Write>(pub W);

impl<W: Write> Write for Clean<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // `write!` hands over whole `str` pieces, so no character is split.
        let text = String::from_utf8_lossy(buf);
        self.0.write_all(sanitize_lines(&text).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue_28_host_output_escapes_control_characters_but_keeps_lines() {
        let mut out = Clean(Vec::new());
        writeln!(out, "ev\x1b[31mil\x07: up").expect("write");
        writeln!(out, "  driver veth").expect("write");
        assert_eq!(
            String::from_utf8(out.0).expect("utf-8"),
            "ev\\u{1b}[31mil\\u{7}: up\n  driver veth\n"
        );
    }
}
