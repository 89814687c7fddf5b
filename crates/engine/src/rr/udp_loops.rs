//! rr's UDP flows on epoll loops (`rr --proto udp --flows N --threads T`
//! with any engine but `uring`): the flows of [`super::udp_flows`], their
//! datagrams moved by the `syscall` engine over non-blocking sockets, as
//! UDP stream flows are ([`crate::event_loop::udp`]): one datagram per
//! call, no slot arrays per socket; one receive buffer per loop, shared
//! by its flows.

use std::io::ErrorKind;
use std::net::UdpSocket;

use linerate_proto::measure::RrFlowMeasurement;
use linerate_stats::histogram::Histogram;

use crate::engines::syscall::{Syscall, SyscallUdpRx, SyscallUdpTx};
use crate::engines::{Engine, KernelUdp, RecvSlots, TxBatch, UdpRx, UdpTx, Wait};
use crate::event_loop::drive;
use crate::stream::{map_err, Signals};
use crate::EngineError;

use super::conns::Conn;
use super::datagram_io::port_closed;
use super::loop_tally::{LoopCtx, Role};
use super::udp_flows::{self, Datagrams, UdpClient, UdpDrive, UdpServer};

/// One epoll loop: its UDP flows of `cx.phase`, driven to their ends.
pub(super) fn run_loop(
    share: Vec<(u32, Option<Conn>)>,
    cx: &LoopCtx<'_>,
    role: Role,
) -> Vec<RrFlowMeasurement> {
    let phase = cx.phase;
    let len = (phase.request as usize).max(phase.response as usize);
    let open = |_, sock| Dgram::open(sock, len);
    udp_flows::run_loop(share, cx, role, open, Epoll(cx.signals))
}

/// A flow's socket as the engine's endpoint, and the engine's I/O on it.
pub(super) struct Dgram {
    ep: KernelUdp,
    tx: SyscallUdpTx,
    rx: SyscallUdpRx,
}

impl Dgram {
    /// `sock`, non-blocking, for datagrams of up to `len` bytes.
    fn open(sock: UdpSocket, len: usize) -> Result<Dgram, EngineError> {
        sock.set_nonblocking(true)
            .map_err(|e| EngineError::io("making a flow's UDP socket non-blocking", e))?;
        let ep = Syscall.udp_endpoint(sock)?;
        Ok(Dgram {
            tx: Syscall.udp_tx(&ep, len)?,
            rx: Syscall.udp_rx(&ep, len)?,
            ep,
        })
    }
}

impl Datagrams for Dgram {
    /// The loop's receive buffer.
    type Cx = RecvSlots;

    fn socket(&self) -> &UdpSocket {
        self.ep.socket()
    }

    /// False when the socket's buffer is full (its next edge says when
    /// there is room).
    fn send(&mut self, _: &mut RecvSlots, buf: &[u8]) -> Result<bool, EngineError> {
        let batch = TxBatch::new(buf, buf.len());
        match self.tx.send_batch(&self.ep, batch, Wait::DontWait) {
            Ok(n) => Ok(n > 0),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
                Ok(false)
            }
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => Err(port_closed()),
            Err(e) => Err(map_err("send", e)),
        }
    }

    /// The next queued datagram, received into the loop's `slots`.
    fn recv<'s>(&'s mut self, slots: &'s mut RecvSlots) -> Result<Option<&'s [u8]>, EngineError> {
        loop {
            match self.rx.recv_batch(&self.ep, slots, Wait::DontWait) {
                Ok(_) => return Ok(Some(slots.get(0).0)),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(None),
                // A refused earlier send: the peer's port closed.
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => return Err(port_closed()),
                Err(e) => return Err(map_err("recv", e)),
            }
        }
    }
}

/// Drives a loop's flows on epoll ([`drive`]), with one receive buffer
/// for all of them.
struct Epoll<'s>(&'s Signals);

/// The receive buffer of a loop whose first flow is `first`.
fn slots_for(first: Option<&Dgram>) -> RecvSlots {
    first.map_or_else(|| RecvSlots::new(1, 1), |io| io.rx.slots())
}

impl UdpDrive<Dgram> for Epoll<'_> {
    fn clients(&mut self, flows: &mut [UdpClient<'_, Dgram>]) -> Histogram {
        let mut sh = (slots_for(flows.first().map(|f| &f.io)), Histogram::new());
        drive(flows, &mut sh, self.0);
        sh.1
    }

    fn servers(&mut self, flows: &mut [UdpServer<'_, Dgram>]) {
        let mut sh = (slots_for(flows.first().map(|f| &f.io)), ());
        drive(flows, &mut sh, self.0);
    }
}
