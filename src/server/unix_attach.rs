//! `--transport unix` on the server: a test's data connections arrive on a
//! Unix stream listener at the abstract name derived from its token
//! (`wire::unix_data_name`; no file, gone when the listener closes, which
//! it does with the test). Accepting and reading the greetings never
//! blocks the control loop: a connection waits in a list until its 21-byte
//! `DataHello` is in, for at most [`HELLO_WAIT`].

use std::io::Read;
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use linerate_engine::socket;
use linerate_proto::wire::{self, DataHello, Message, Token, DATA_HELLO_LEN, HEADER_LEN};

/// How long a connection may take to send its greeting.
const HELLO_WAIT: Duration = Duration::from_secs(10);
/// Connections waiting for their greeting at once (more are closed: a
/// local process cannot hold the test's listener with idle connections).
const MAX_PENDING: usize = 64;
/// The greeting's frame: the frame header and the record.
const HELLO_FRAME: usize = HEADER_LEN + DATA_HELLO_LEN;

/// A test's Unix data listener and the connections not yet greeted.
#[derive(Debug)]
pub(super) struct UnixData {
    listener: UnixListener,
    pending: Vec<(UnixStream, Vec<u8>, Instant)>,
}

impl UnixData {
    /// Listens at the test's abstract name.
    pub(super) fn bind(token: &Token) -> Result<UnixData> {
        let name = linerate_proto::wire::unix_data_name(token);
        let listener = UnixListener::bind_addr(&socket::unix_abstract(&name)?)
            .with_context(|| format!("binding the Unix data socket @{name}"))?;
        listener
            .set_nonblocking(true)
            .context("Unix data socket non-blocking")?;
        Ok(UnixData {
            listener,
            pending: Vec::new(),
        })
    }

    /// The connections whose greeting arrived since the last call, with
    /// it; what went wrong with the others, for the log.
    pub(super) fn poll(&mut self, now: Instant) -> (Vec<(DataHello, UnixStream)>, Vec<String>) {
        let mut problems = Vec::new();
        while let Ok((s, _)) = self.listener.accept() {
            if self.pending.len() >= MAX_PENDING {
                problems.push("too many Unix data connections waiting, closing one".into());
                continue;
            }
            match s.set_nonblocking(true) {
                Ok(()) => self.pending.push((s, Vec::with_capacity(HELLO_FRAME), now)),
                Err(e) => problems.push(format!("Unix data connection: {e}")),
            }
        }
        let mut greeted = Vec::new();
        let mut keep = Vec::new();
        for (mut s, mut buf, since) in std::mem::take(&mut self.pending) {
            let mut chunk = [0u8; HELLO_FRAME];
            let want = HELLO_FRAME - buf.len();
            match s.read(&mut chunk[..want]) {
                Ok(0) => {
                    problems.push("Unix data connection closed before its greeting".into());
                    continue;
                }
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => {
                    problems.push(format!("Unix data connection: {e}"));
                    continue;
                }
            }
            if buf.len() < HELLO_FRAME {
                if now.duration_since(since) < HELLO_WAIT {
                    keep.push((s, buf, since));
                } else {
                    problems.push("Unix data connection sent no greeting in 10 s".into());
                }
                continue;
            }
            match wire::decode(&buf) {
                Ok(Some((Message::DataHello(h), used))) if used == buf.len() => {
                    match s.set_nonblocking(false) {
                        Ok(()) => greeted.push((h, s)),
                        Err(e) => problems.push(format!("Unix data connection: {e}")),
                    }
                }
                _ => problems.push("Unix data connection: not a data greeting".into()),
            }
        }
        self.pending = keep;
        (greeted, problems)
    }
}
