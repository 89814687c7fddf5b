//! Datagrams on a connected UDP socket through the engine's UDP I/O: one
//! message per datagram, received with a deadline, waiting by the socket's
//! discipline.

use std::io::ErrorKind;
use std::net::UdpSocket;
use std::time::Duration;

use crate::engines::{self, Engine, RecvSlots, TxBatch, UdpRx, UdpTx};
use crate::stream::{is_timeout, map_err};
use crate::EngineError;

use crate::wait::Waiter;

/// Datagram send and receive on one socket.
pub(super) struct DatagramIo<'a, E: Engine> {
    pub(super) sock: &'a UdpSocket,
    tx: E::UdpTx,
    rx: E::UdpRx,
    /// The engine's receive slots; a datagram is read from the first.
    slots: RecvSlots,
    pub(super) waiter: Waiter<'a>,
    /// Longest `poll(2)` sleep of a busy-polling wait.
    poll: Duration,
}

fn port_closed() -> EngineError {
    EngineError::PeerReset("the peer's UDP port is closed".into())
}

impl<'a, E: Engine> DatagramIo<'a, E> {
    /// For datagrams of up to `len` bytes (a longer one is seen as such).
    pub(super) fn new(
        engine: E,
        sock: &'a UdpSocket,
        len: usize,
        waiter: Waiter<'a>,
        poll: Duration,
    ) -> Result<Self, EngineError> {
        let rx = engine.udp_rx(sock, len)?;
        Ok(DatagramIo {
            sock,
            tx: engine.udp_tx(sock, len)?,
            slots: rx.slots(),
            rx,
            waiter,
            poll,
        })
    }

    /// Sends `buf` as one datagram.
    pub(super) fn send(&mut self, buf: &[u8]) -> Result<(), EngineError> {
        loop {
            let r = self
                .tx
                .send_batch(self.sock, TxBatch::new(buf, buf.len()), self.waiter.call());
            match r {
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

    /// Sends the empty datagram that ends a phase (and answers that end).
    /// It carries no message, so it bypasses the engine, whose batches
    /// hold datagrams of at least one byte.
    pub(super) fn send_end(&self) -> Result<(), EngineError> {
        match self.sock.send(&[]) {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => Err(port_closed()),
            Err(e) => Err(map_err("send", e)),
        }
    }

    /// Receives one datagram (see [`Self::received`]) and returns its
    /// length. `Ok(None)` when `deadline_ns` (monotonic) passes first.
    pub(super) fn recv(&mut self, deadline_ns: Option<u64>) -> Result<Option<usize>, EngineError> {
        loop {
            match self
                .rx
                .recv_batch(self.sock, &mut self.slots, self.waiter.call())
            {
                Ok(_) => {
                    self.waiter.progressed();
                    return Ok(Some(self.received().len()));
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

    /// The datagram [`Self::recv`] received.
    pub(super) fn received(&self) -> &[u8] {
        self.slots.get(0).0
    }

    /// Reads whatever is queued without waiting (late responses after a
    /// loss), so they cannot be taken for the next transaction's.
    pub(super) fn drain(&mut self) {
        while self
            .rx
            .recv_batch(self.sock, &mut self.slots, engines::Wait::DontWait)
            .is_ok()
        {}
    }
}
