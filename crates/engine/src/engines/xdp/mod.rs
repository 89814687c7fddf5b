//! `xdp`: UDP datagrams through an AF_XDP socket (issue 25), the kernel's
//! own bypass path, on any interface with an XDP path (a NIC, veth).
//!
//! The endpoint ([`XdpEndpoint`]) is made from the kernel socket the
//! control plane attached: its local and peer addresses give the route
//! and the next hop's MAC ([`linerate_xdp::path_to`]). The interface the
//! route leaves by has one port in this process (`port.rs`): the XDP
//! program ([`linerate_xdp::Program`], attached through a BPF link, so
//! gone when the process is, however it ends) and an AF_XDP socket
//! ([`linerate_xdp::Queue`]) per queue in use, each flow (`-P N`,
//! `--bidir`) sending on a queue of its own while the interface has one
//! left; the program redirects each flow's local address and port to the
//! socket of the queue it arrives on. The kernel socket stays bound: it holds the
//! port, and whatever reached it before the flow was redirected is still
//! received from it (counted as `via_kernel`). Frames
//! are built in place in the UMEM; received datagrams are copied into the
//! receive slots, so the same receive core counts loss, reordering,
//! duplicates and corruption as for every engine.
//!
//! Modes: what `--xdp-mode` and `--xdp-copy`/`--xdp-zerocopy` ask for,
//! exactly; unasked, the fastest the driver says it has (native XDP where
//! it redirects, zero-copy where it offers it; tried where the kernel does
//! not say). What fails is refused with the reason and the option to ask
//! for instead, never replaced by another mode or engine.

mod endpoint;
mod kernel;
mod options;
mod port;

use std::io;
use std::net::UdpSocket;

use linerate_xdp::XdpError;

pub use endpoint::XdpEndpoint;
use endpoint::BATCH;
pub use options::{Xdp, XdpMode};

use super::syscall::{SyscallTcp, SyscallTcpRx};
use super::tcp_endpoint::TcpEndpoint;
use super::{Engine, RecvSlots, Syscall, TxBatch, UdpRx, UdpTx, Wait};
use crate::EngineError;

/// Why a test over loopback cannot run on `xdp`, for a refusal before
/// any connection.
pub fn loopback_refusal() -> String {
    XdpError::Loopback("lo".into()).to_string()
}

/// Sends datagrams as frames built in the UMEM.
#[derive(Debug)]
pub struct XdpTx;

/// Receives the flow's datagrams from the RX ring.
#[derive(Debug)]
pub struct XdpRx {
    size: usize,
}

impl Engine for Xdp {
    type UdpEndpoint = XdpEndpoint;
    type UdpTx = XdpTx;
    type UdpRx = XdpRx;
    type TcpTx = SyscallTcp;
    type TcpRx = SyscallTcpRx;

    fn udp_endpoint(self, sock: UdpSocket) -> Result<XdpEndpoint, EngineError> {
        XdpEndpoint::new(self, sock)
    }

    /// rr and stream receivers over AF_XDP poll their rings (issue 25)
    /// unless `--xdp-sleep`.
    fn spins(self) -> bool {
        Xdp::spins(self)
    }

    /// The interface's port (program and AF_XDP socket) is attached now,
    /// before the test starts (loading takes about half a second, during
    /// which the flow would reach only the kernel socket, which
    /// overflows). Best effort: the endpoint attaches what was not
    /// prepared, and reports the failure. The socket is connected: the
    /// route to the peer names the interface.
    fn udp_rx_attach(self, sock: &UdpSocket) {
        endpoint::prepare(self, sock);
    }

    /// The flow goes to the prepared port from now on, not only from when
    /// its endpoint is made (the peer may send before that).
    fn udp_rx_greeted(self, sock: &UdpSocket) {
        endpoint::redirect(self, sock);
    }

    fn udp_tx_attach(self, sock: &UdpSocket) {
        endpoint::prepare(self, sock);
    }

    fn udp_tx(self, ep: &XdpEndpoint, len: usize) -> Result<XdpTx, EngineError> {
        let frame = ep.frame_size();
        if len + ep.flow.header_len() > frame {
            return Err(EngineError::Xdp(format!(
                "a {len}-byte datagram does not fit a {frame}-byte AF_XDP frame with its \
                 {}-byte headers",
                ep.flow.header_len()
            )));
        }
        Ok(XdpTx)
    }

    fn udp_rx(self, ep: &XdpEndpoint, len: usize) -> Result<XdpRx, EngineError> {
        let frame = ep.frame_size();
        Ok(XdpRx {
            size: (len + 1).min(frame),
        })
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

impl UdpTx<XdpEndpoint> for XdpTx {
    fn max_batch(&self) -> usize {
        BATCH
    }

    fn send_batch(
        &mut self,
        ep: &XdpEndpoint,
        batch: TxBatch<'_>,
        wait: Wait,
    ) -> io::Result<usize> {
        let mut refs: [&[u8]; BATCH] = [&[]; BATCH];
        let mut n = 0;
        for (slot, d) in refs.iter_mut().zip(batch.datagrams()) {
            *slot = d;
            n += 1;
        }
        ep.send(&refs[..n], wait)
    }
}

impl UdpRx<XdpEndpoint> for XdpRx {
    fn slots(&self) -> RecvSlots {
        RecvSlots::new(BATCH, self.size)
    }

    fn recv_batch(
        &mut self,
        ep: &XdpEndpoint,
        slots: &mut RecvSlots,
        wait: Wait,
    ) -> io::Result<usize> {
        ep.recv(slots, wait)
    }

    fn short_batch_empties_socket(&self) -> bool {
        true
    }
}
