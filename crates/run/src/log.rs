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

use std::io;
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
    let text = format!("{line}\n");
    match SERVER_LOG.get() {
        // Only a closed stderr comes back: the line is dropped, as here.
        Some(p) => drop(p.send_bounded(1, move |err| put(err, &text))),
        None => drop(put(&mut io::stderr().lock(), &text)),
    }
}

/// Writes a whole line, newline included, in one call. Stderr is
/// unbuffered: `writeln!` wrote the text and its newline as two writes,
/// and where stdout shares the stream (`2>&1`) a report line written by
/// another thread between them was glued to the log line (issue 28: a
/// loaded CI run read "… closinglinerate server: udp client→server …").
/// A line up to `PIPE_BUF` (4 KiB) written at once is never split by
/// another writer of the same pipe.
fn put(w: &mut impl io::Write, line: &str) -> io::Result<()> {
    w.write_all(line.as_bytes())
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    /// Records each write call it is given.
    #[derive(Default)]
    struct Calls(Vec<Vec<u8>>);

    impl io::Write for Calls {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.push(buf.to_vec());
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// Issue 28: a log line and its newline leave in one write, so no
    /// other writer of a shared stderr/stdout pipe can come between them.
    #[test]
    fn issue_28_a_log_line_is_one_write() {
        let mut w = Calls::default();
        let peer = "127.0.0.2:55877";
        put(&mut w, &format!("{peer}: address not allowed, closing\n")).expect("write");
        assert_eq!(
            w.0,
            [b"127.0.0.2:55877: address not allowed, closing\n".to_vec()]
        );
        // What the lines were written with before: two writes.
        let mut before = Calls::default();
        writeln!(before, "{peer}: address not allowed, closing").expect("write");
        assert_eq!(before.0.len(), 2, "{:?}", before.0);
    }
}
