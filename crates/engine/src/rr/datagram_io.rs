//! Datagrams on a connected UDP socket: one message per datagram, received
//! with a deadline, waiting by the socket's discipline.

use std::io::ErrorKind;
use std::net::UdpSocket;
use std::time::Duration;

use crate::stream::{is_timeout, map_err};
use crate::EngineError;

use super::wait::Waiter;

/// Datagram send and receive on one socket.
pub(super) struct DatagramIo<'a> {
    pub(super) sock: &'a UdpSocket,
    pub(super) waiter: Waiter<'a>,
    /// Longest `poll(2)` sleep of a busy-polling wait.
    poll: Duration,
    blocking: bool,
}

fn port_closed() -> EngineError {
    EngineError::PeerReset("the peer's UDP port is closed".into())
}

impl<'a> DatagramIo<'a> {
    pub(super) fn new(
        sock: &'a UdpSocket,
        waiter: Waiter<'a>,
        poll: Duration,
        blocking: bool,
    ) -> Self {
        DatagramIo {
            sock,
            waiter,
            poll,
            blocking,
        }
    }

    pub(super) fn send(&mut self, buf: &[u8]) -> Result<(), EngineError> {
        loop {
            match self.sock.send(buf) {
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // A full send buffer empties in microseconds: spin.
                Err(e) if is_timeout(&e) => {
                    self.waiter.aborted()?;
                    std::hint::spin_loop();
                }
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => return Err(port_closed()),
                Err(e) => return Err(map_err("send", e)),
            }
        }
    }

    /// Receives one datagram into `buf`. `Ok(None)` when `deadline_ns`
    /// (monotonic) passes first.
    pub(super) fn recv(
        &mut self,
        buf: &mut [u8],
        deadline_ns: Option<u64>,
    ) -> Result<Option<usize>, EngineError> {
        loop {
            match self.sock.recv(buf) {
                Ok(n) => {
                    self.waiter.progressed();
                    return Ok(Some(n));
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                // A refused earlier send: the peer's port closed.
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => return Err(port_closed()),
                Err(e) if is_timeout(&e) => {}
                Err(e) => return Err(map_err("recv", e)),
            }
            let (sock, poll) = (self.sock, self.poll);
            if self
                .waiter
                .would_block(sock, libc::POLLIN, poll, deadline_ns)?
            {
                return Ok(None);
            }
        }
    }

    /// Reads whatever is queued without waiting (late responses after a
    /// loss), so they cannot be taken for the next transaction's.
    pub(super) fn drain(&mut self, buf: &mut [u8]) {
        let _ = self.sock.set_nonblocking(true);
        while self.sock.recv(buf).is_ok() {}
        if self.blocking {
            let _ = self.sock.set_nonblocking(false);
        }
    }
}
