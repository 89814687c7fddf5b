//! `--transport unix` on the server: a test's data connections arrive on a
//! Unix stream listener at a fresh random abstract name
//! (`wire::unix_data_name`; no file, gone when the listener closes, which
//! it does with the test). The name travels to the client in the Accept;
//! it is not derived from the token, because every local user can read
//! bound names in `/proc/net/unix`.
//!
//! Reading the name is not enough to take a stream: a connection is kept
//! only when `SO_PEERCRED` (set by the kernel, not forgeable) shows the
//! uid the client announced in its Hello. Another local user's connection
//! is closed at accept; a process of the client's own uid could ptrace the
//! client anyway, so the uid is the boundary that matters (a pid check
//! would add nothing against it and break clients in another pid
//! namespace sharing the network namespace).
//!
//! Accepting and reading the greetings never blocks the control loop: a
//! connection waits in a list until its 21-byte `DataHello` is in, for at
//! most [`HELLO_WAIT`].

use std::io::Read;
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::{Duration, Instant};

use crate::error::{no_randomness, Context as _, Result};
use linerate_engine::socket;
use linerate_proto::wire::{self, DataHello, Message, DATA_HELLO_LEN, HEADER_LEN};

/// How long a connection may take to send its greeting.
const HELLO_WAIT: Duration = Duration::from_secs(10);
/// The greeting's frame: the frame header and the record.
const HELLO_FRAME: usize = HEADER_LEN + DATA_HELLO_LEN;

/// A test's Unix data listener and the connections not yet greeted.
#[derive(Debug)]
pub(super) struct UnixData {
    listener: UnixListener,
    /// The only uid connections are taken from (the client's).
    uid: u32,
    /// Connections waiting for their greeting at once: the test's own
    /// (more are closed; only the client's uid gets this far).
    max_pending: usize,
    pending: Vec<(UnixStream, Vec<u8>, Instant)>,
}

impl UnixData {
    /// Listens at a fresh random abstract name for `connections` data
    /// connections from processes of `uid`; the name, for the Accept.
    pub(super) fn bind(uid: u32, connections: usize) -> Result<(UnixData, String)> {
        let mut random = [0u8; wire::UNIX_NAME_RANDOM];
        getrandom::fill(&mut random).map_err(|e| no_randomness("the Unix data socket name", e))?;
        let name = wire::unix_data_name(&random);
        let listener = UnixListener::bind_addr(&socket::unix_abstract(&name)?)
            .with_context(|| format!("binding the Unix data socket @{name}"))?;
        listener
            .set_nonblocking(true)
            .context("Unix data socket non-blocking")?;
        let data = UnixData {
            listener,
            uid,
            max_pending: connections.max(1),
            pending: Vec::new(),
        };
        Ok((data, name))
    }

    /// Takes what waits on the listener: connections from the client's uid
    /// join the pending list; others are closed, with a line for the log.
    fn accept_all(&mut self, now: Instant, problems: &mut Vec<String>) {
        while let Ok((s, _)) = self.listener.accept() {
            match socket::unix_peer_uid(&s) {
                Ok(uid) if uid == self.uid => {}
                Ok(uid) => {
                    problems.push(format!(
                        "Unix data connection from uid {uid}, not the client's ({}): closed",
                        self.uid
                    ));
                    continue;
                }
                Err(e) => {
                    problems.push(format!("Unix data connection: {e}"));
                    continue;
                }
            }
            if self.pending.len() >= self.max_pending {
                problems.push("too many Unix data connections waiting, closing one".into());
                continue;
            }
            match s.set_nonblocking(true) {
                Ok(()) => self.pending.push((s, Vec::with_capacity(HELLO_FRAME), now)),
                Err(e) => problems.push(format!("Unix data connection: {e}")),
            }
        }
    }

    /// The connections whose greeting arrived since the last call, with
    /// it; what went wrong with the others, for the log.
    pub(super) fn poll(&mut self, now: Instant) -> (Vec<(DataHello, UnixStream)>, Vec<String>) {
        let mut problems = Vec::new();
        self.accept_all(now, &mut problems);
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
