//! Datagrams on a UDP endpoint through the engine's UDP I/O: one message
//! per datagram, received with a deadline, waiting by the endpoint's
//! discipline. A batching engine's call may return several datagrams (more
//! than one slot, or a GRO super-buffer): they are handed out one by one,
//! none dropped.

use std::io::ErrorKind;
use std::time::Duration;

use crate::engines::{self, Engine, Interest, RecvSlots, TxBatch, UdpEndpoint, UdpRx, UdpTx};
use crate::stream::{is_timeout, map_err};
use crate::EngineError;

use crate::wait::Waiter;

/// Datagram send and receive on one endpoint.
pub(super) struct DatagramIo<'a, E: Engine> {
    ep: &'a E::UdpEndpoint,
    tx: E::UdpTx,
    rx: E::UdpRx,
    /// The engine's receive slots, filled by one call; every datagram in
    /// them is handed out (a batch may hold several slots, a GRO slot
    /// several datagrams) before the engine is called again.
    slots: RecvSlots,
    /// Slots the last call filled.
    filled: usize,
    /// The next datagram to hand out: slot and byte offset in it.
    next: (usize, usize),
    /// The datagram handed out last: slot, byte offset, length.
    current: (usize, usize, usize),
    pub(super) waiter: Waiter<'a>,
    /// Longest `poll(2)` sleep of a busy-polling wait.
    poll: Duration,
}

/// A send or receive refused: the peer's UDP port is closed.
pub(super) fn port_closed() -> EngineError {
    EngineError::PeerReset("the peer's UDP port is closed".into())
}

impl<'a, E: Engine> DatagramIo<'a, E> {
    /// For datagrams of up to `len` bytes (a longer one is seen as such).
    pub(super) fn new(
        engine: E,
        ep: &'a E::UdpEndpoint,
        len: usize,
        waiter: Waiter<'a>,
        poll: Duration,
    ) -> Result<Self, EngineError> {
        let rx = engine.udp_rx(ep, len)?;
        Ok(DatagramIo {
            ep,
            tx: engine.udp_tx(ep, len)?,
            slots: rx.slots(),
            filled: 0,
            next: (0, 0),
            current: (0, 0, 0),
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
                .send_batch(self.ep, TxBatch::new(buf, buf.len()), self.waiter.call());
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
    /// It carries no message, so it goes as the endpoint's control
    /// datagram, not in the engine's batches (whose datagrams hold at
    /// least one byte).
    pub(super) fn send_end(&self) -> Result<(), EngineError> {
        match self.ep.send_control(&[]) {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => Err(port_closed()),
            Err(e) => Err(map_err("send", e)),
        }
    }

    /// Receives one datagram (see [`Self::received`]) and returns its
    /// length. `Ok(None)` when `deadline_ns` (monotonic) passes first.
    pub(super) fn recv(&mut self, deadline_ns: Option<u64>) -> Result<Option<usize>, EngineError> {
        loop {
            if let Some(n) = self.take() {
                return Ok(Some(n));
            }
            match self
                .rx
                .recv_batch(self.ep, &mut self.slots, self.waiter.call())
            {
                Ok(filled) => {
                    self.waiter.progressed();
                    self.filled = filled;
                    self.next = (0, 0);
                    continue;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                // A refused earlier send: the peer's port closed.
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => return Err(port_closed()),
                Err(e) if is_timeout(&e) => {}
                Err(e) => return Err(map_err("recv", e)),
            }
            let (ep, poll) = (self.ep, self.poll);
            if self
                .waiter
                .would_block(ep, Interest::Recv, poll, deadline_ns)?
            {
                return Ok(None);
            }
        }
    }

    /// Hands out the next datagram of the last call's slots (split as
    /// [`RecvSlots::datagrams`] splits them); its length, `None` when every
    /// one has been.
    fn take(&mut self) -> Option<usize> {
        while self.next.0 < self.filled {
            let (slot, at) = self.next;
            let total = self.slots.get(slot).0.len();
            let Some(d) = self.slots.datagrams_from(slot, at).next() else {
                self.next = (slot + 1, 0);
                continue;
            };
            let len = d.len();
            // The slot's last datagram (an empty one included) moves on to
            // the next slot.
            self.next = if at + len >= total {
                (slot + 1, 0)
            } else {
                (slot, at + len)
            };
            self.current = (slot, at, len);
            return Some(len);
        }
        None
    }

    /// The datagram [`Self::recv`] received.
    pub(super) fn received(&self) -> &[u8] {
        let (slot, at, len) = self.current;
        self.slots.get(slot).0.get(at..at + len).unwrap_or_default()
    }

    /// Drops what was received and not handed out, and reads whatever is
    /// queued without waiting (late responses after a loss), so they
    /// cannot be taken for the next transaction's.
    pub(super) fn drain(&mut self) {
        self.filled = 0;
        while self
            .rx
            .recv_batch(self.ep, &mut self.slots, engines::Wait::DontWait)
            .is_ok()
        {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::caps::caps;
    use crate::clock::mono_ns;
    use crate::engines::batch::mmsg::{enable_gro, MmsgTx};
    use crate::engines::batch::{Batch, Toggle};
    use crate::engines::KernelUdp;
    use crate::stream::Signals;
    use crate::test_pair::udp_pair;
    use crate::wait::{prepare_udp, Wait};

    const LEN: usize = 100;

    /// `LEN`-byte datagrams whose first byte is `tag`.
    fn datagram(tag: u8) -> [u8; LEN] {
        let mut d = [0u8; LEN];
        d[0] = tag;
        d
    }

    /// Receives with a 300 ms deadline: the first byte of each datagram
    /// and its length, until a receive times out.
    fn receive_all(io: &mut DatagramIo<'_, Batch>) -> Vec<(u8, usize)> {
        let mut got = Vec::new();
        while let Some(n) = io.recv(Some(mono_ns() + 300_000_000)).expect("receive") {
            got.push((io.received().first().copied().unwrap_or(0), n));
        }
        got
    }

    #[test]
    fn issue_24_rr_datagram_receive_consumes_every_slot() {
        let (tx, rx) = udp_pair();
        let rx = KernelUdp::new(rx);
        let signals = Signals::default();
        let (wait, _) = prepare_udp(&rx, None, Duration::from_millis(20)).expect("prepare");
        assert_eq!(wait, Wait::Block);
        let engine = Batch {
            gro: Toggle::Off,
            ..Batch::AUTO
        };
        let waiter = Waiter::new(wait, &signals, false);
        let mut io =
            DatagramIo::new(engine, &rx, LEN, waiter, Duration::from_millis(20)).expect("engine");
        // Both queued before the receive: one `recvmmsg` fills two slots
        // (a late response arriving with the current one).
        tx.send(&datagram(1)).expect("send");
        tx.send(&datagram(2)).expect("send");
        assert_eq!(receive_all(&mut io), vec![(1, LEN), (2, LEN)]);
    }

    #[test]
    fn issue_24_rr_datagram_receive_splits_a_gro_buffer() {
        let c = caps();
        if let Err(e) = c.udp_segment.as_ref().and(c.udp_gro.as_ref()) {
            eprintln!("SKIPPED: needs UDP_SEGMENT and UDP_GRO: {e}");
            return;
        }
        let (tx, rx) = udp_pair();
        // On before anything is sent, so the GSO send arrives merged.
        enable_gro(&rx).expect("UDP_GRO");
        let rx = KernelUdp::new(rx);
        let signals = Signals::default();
        let (wait, _) = prepare_udp(&rx, None, Duration::from_millis(20)).expect("prepare");
        let engine = Batch {
            gro: Toggle::On,
            ..Batch::AUTO
        };
        let waiter = Waiter::new(wait, &signals, false);
        let mut io =
            DatagramIo::new(engine, &rx, LEN, waiter, Duration::from_millis(20)).expect("engine");
        let mut buf = datagram(1).to_vec();
        buf.extend_from_slice(&datagram(2));
        let n = MmsgTx::new(1)
            .send(&tx, &buf, LEN, 2, false)
            .expect("GSO send");
        assert_eq!(n, 2);
        assert_eq!(receive_all(&mut io), vec![(1, LEN), (2, LEN)]);
    }
}
