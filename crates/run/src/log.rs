//! Log lines on standard error that never panic, and in a server never
//! wait. `eprintln!` panics when stderr is closed (`linerate … 2>&1 |
//! head`), which would take a server or embedded-server thread down
//! mid-test; a log line that cannot be written is dropped instead (issue
//! 13).
//!
//! A server's stderr is often its stdout's reader too (`linerate server
//! 2>&1 | less`, paused): a log line written there by the thread that
//! logged it waited as long as the reader did, and the accept loop, which
//! logs a refused address or a full connection table, stopped accepting
//! (the next client timed out), while a test thread logging its failure
//! held the log throttle's lock for every other thread (issue 28). So a
//! server hands its log lines to a printer of its own ([`start_server_log`],
//! the mechanism its reports go through: [`crate::printer`]), which writes
//! them in order off the threads that log, and leaves lines out (said once
//! it writes again) beyond the printer's bound instead of waiting. Only a
//! closed stderr stops it; a line whose write fails otherwise (EAGAIN on
//! a stderr a supervisor made non-blocking) is left out and said, and
//! later lines still go (issue 28).

use std::io::{self, Write as _};
use std::sync::OnceLock;
use std::time::Duration;

use crate::printer::Printer;

/// The server's log printer, once [`start_server_log`] started it.
static SERVER_LOG: OnceLock<Printer<io::Stderr>> = OnceLock::new();

/// `eprintln!` without the panic, nor, in a server, the wait: formats one
/// line and writes it to stderr ([`write_line`]).
macro_rules! log {
    ($($arg:tt)*) => {
        $crate::log::write_line(format_args!($($arg)*))
    };
}
pub(crate) use log;

/// Writes `line` to stderr: handed to the server's log printer where one
/// runs, else written here, a closed or full stream ignored.
pub(crate) fn write_line(line: std::fmt::Arguments<'_>) {
    match SERVER_LOG.get() {
        Some(p) => {
            let text = line.to_string();
            // Only a closed stderr comes back: the line is dropped, as here.
            let _ = p.send_bounded(1, move |err| writeln!(err, "{text}"));
        }
        None => {
            let _ = writeln!(io::stderr().lock(), "{line}");
        }
    }
}

/// From now on this process's log lines are written by a printer thread
/// (a server's: its lines never wait for stderr's reader).
pub(crate) fn start_server_log() -> io::Result<()> {
    if SERVER_LOG.get().is_none() {
        let _ = SERVER_LOG.set(Printer::spawn_log(io::stderr)?);
    }
    Ok(())
}

/// Waits until the log lines so far are written, `wait` at most (`None`:
/// as long as it takes); past it they are abandoned to the process's exit.
pub(crate) fn finish_server_log(wait: Option<Duration>) {
    if let Some(p) = SERVER_LOG.get() {
        let _ = p.flush_within(wait);
    }
}
