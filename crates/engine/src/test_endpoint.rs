//! Unit-test stand-in for a kernel-bypass engine: [`Mem`], whose UDP
//! endpoint ([`MemEndpoint`]) is a pair of in-memory queues, with no
//! socket at all. The UDP loops run on it unchanged, which is what an
//! AF_XDP engine needs of them.

use std::cell::Cell;
use std::collections::VecDeque;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::engines::syscall::{SyscallTcp, SyscallTcpRx};
use crate::engines::{
    Engine, Interest, Readiness, RecvMeta, RecvSlots, Syscall, TcpEndpoint, TxBatch, UdpEndpoint,
    UdpRx, UdpTx, Wait,
};
use crate::EngineError;

/// Datagrams one way, and a wake-up for a receiver waiting on them.
#[derive(Default)]
struct Queue {
    datagrams: Mutex<VecDeque<Vec<u8>>>,
    ready: Condvar,
}

impl Queue {
    fn push(&self, d: &[u8]) {
        if let Ok(mut q) = self.datagrams.lock() {
            q.push_back(d.to_vec());
        }
        self.ready.notify_one();
    }

    /// Waits up to `timeout` for a datagram; true when one is queued.
    fn wait(&self, timeout: Duration) -> bool {
        let Ok(q) = self.datagrams.lock() else {
            return false;
        };
        self.ready
            .wait_timeout_while(q, timeout, |q| q.is_empty())
            .is_ok_and(|(q, _)| !q.is_empty())
    }
}

/// One end of an in-memory datagram pair.
pub(crate) struct MemEndpoint {
    rx: Arc<Queue>,
    tx: Arc<Queue>,
    timeout: Cell<Duration>,
    /// Control datagrams sent (greeting echoes, ends of phase).
    pub(crate) controls: Cell<u64>,
    /// Data-path beats sent ([`linerate_proto::data_beat`]).
    pub(crate) beats: Cell<u64>,
}

/// Two connected in-memory endpoints.
pub(crate) fn mem_pair() -> (MemEndpoint, MemEndpoint) {
    let (a, b) = (Arc::new(Queue::default()), Arc::new(Queue::default()));
    let end = |rx: &Arc<Queue>, tx: &Arc<Queue>| MemEndpoint {
        rx: Arc::clone(rx),
        tx: Arc::clone(tx),
        timeout: Cell::new(Duration::from_millis(10)),
        controls: Cell::new(0),
        beats: Cell::new(0),
    };
    (end(&a, &b), end(&b, &a))
}

impl MemEndpoint {
    /// Queues `d` for the peer, as a peer outside the engine would send it.
    pub(crate) fn inject(&self, d: &[u8]) {
        self.tx.push(d);
    }
}

impl Readiness for MemEndpoint {
    fn wait_ready(&self, interest: Interest, timeout: Duration) -> io::Result<bool> {
        Ok(match interest {
            Interest::Send => true,
            Interest::Recv => self.rx.wait(timeout),
        })
    }
}

impl UdpEndpoint for MemEndpoint {
    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(SocketAddr::from(([198, 18, 0, 1], 1)))
    }
    fn peer_addr(&self) -> io::Result<SocketAddr> {
        Ok(SocketAddr::from(([198, 18, 0, 2], 1)))
    }
    fn send_control(&self, datagram: &[u8]) -> io::Result<()> {
        // Beats are counted apart: how many a receiver sends depends on
        // how long it ran.
        if linerate_proto::data_beat::is_beat(datagram) {
            self.beats.set(self.beats.get() + 1);
        } else {
            self.controls.set(self.controls.get() + 1);
        }
        self.tx.push(datagram);
        Ok(())
    }
    fn enable_recv_meta(&self) {}
    fn set_recv_timeout(&self, poll: Duration) -> io::Result<()> {
        self.timeout.set(poll);
        Ok(())
    }
    fn busy_poll(&self) -> Result<String, EngineError> {
        Ok("in-memory queue, polled".into())
    }
    fn drops(&self) -> Option<u64> {
        Some(0)
    }
    fn recv_buffer(&self) -> Option<u64> {
        None
    }
}

/// The in-memory engine (UDP only; its TCP is `syscall`'s).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mem;

/// Sending on a [`MemEndpoint`]: every datagram queued.
pub(crate) struct MemTx;

/// Receiving on a [`MemEndpoint`]: up to 4 datagrams per call.
pub(crate) struct MemRx {
    slot: usize,
}

impl Engine for Mem {
    type UdpEndpoint = MemEndpoint;
    type UdpTx = MemTx;
    type UdpRx = MemRx;
    type TcpTx = SyscallTcp;
    type TcpRx = SyscallTcpRx;

    fn udp_endpoint(self, _sock: UdpSocket) -> Result<MemEndpoint, EngineError> {
        Err(EngineError::Protocol(
            "in-memory endpoints come in pairs".into(),
        ))
    }
    fn udp_tx(self, _ep: &MemEndpoint, _len: usize) -> Result<MemTx, EngineError> {
        Ok(MemTx)
    }
    fn udp_rx(self, _ep: &MemEndpoint, len: usize) -> Result<MemRx, EngineError> {
        Ok(MemRx { slot: len + 1 })
    }
    fn tcp_tx<S: TcpEndpoint>(self, sock: &S) -> Result<SyscallTcp, EngineError> {
        Syscall.tcp_tx(sock)
    }
    fn tcp_rx<S: TcpEndpoint>(
        self,
        sock: &S,
        skip_copy: bool,
    ) -> Result<SyscallTcpRx, EngineError> {
        Syscall.tcp_rx(sock, skip_copy)
    }
}

impl UdpTx<MemEndpoint> for MemTx {
    fn max_batch(&self) -> usize {
        8
    }
    fn send_batch(&mut self, ep: &MemEndpoint, batch: TxBatch<'_>, _: Wait) -> io::Result<usize> {
        for d in batch.datagrams() {
            ep.tx.push(d);
        }
        Ok(batch.count())
    }
}

impl UdpRx<MemEndpoint> for MemRx {
    fn slots(&self) -> RecvSlots {
        RecvSlots::new(4, self.slot)
    }
    fn recv_batch(
        &mut self,
        ep: &MemEndpoint,
        slots: &mut RecvSlots,
        wait: Wait,
    ) -> io::Result<usize> {
        if wait == Wait::Block {
            ep.rx.wait(ep.timeout.get());
        }
        let mut q = ep
            .rx
            .datagrams
            .lock()
            .map_err(|_| io::Error::other("queue poisoned"))?;
        let mut filled = 0;
        while filled < slots.count() {
            let Some(d) = q.pop_front() else { break };
            let (buf, meta) = slots.slot_mut(filled);
            let n = d.len().min(buf.len());
            buf[..n].copy_from_slice(&d[..n]);
            *meta = RecvMeta {
                len: n,
                truncated: d.len() > n,
                ..RecvMeta::default()
            };
            filled += 1;
        }
        if filled == 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(filled)
    }
}
