//! Log lines on standard error that never panic. `eprintln!` panics when
//! stderr is closed (`linerate … 2>&1 | head`), which would take a server or
//! embedded-server thread down mid-test; a log line that cannot be written
//! is dropped instead (issue 13).

/// `eprintln!` without the panic: formats one line and writes it to stderr,
/// ignoring a closed or full stream.
macro_rules! log {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}
pub(crate) use log;
