//! The io_uring engine: every data-path send and receive is a request on a
//! per-socket ring (through the `io-uring` crate's bindings; no hand-written
//! ring code).
//!
//! What it uses, where the kernel has it (each probed once per process; a
//! feature the kernel lacks is reported as off with the reason, and io_uring
//! itself missing refuses the engine):
//! - registered buffers (`IORING_REGISTER_BUFFERS`): the TCP stream buffer
//!   and the UDP send staging slots that zero-copy sends read are pinned
//!   once, not per call;
//! - zero-copy sends (`IORING_OP_SEND_ZC`) of `ring::ZC_MIN_LEN` and more (a
//!   smaller send copies, which costs less), with completion tracking: a
//!   buffer is reused only after its notification CQE, and the notifications
//!   say whether the kernel copied anyway (loopback always does);
//! - UDP segmentation offload: GSO sends (`SENDMSG`/`SENDMSG_ZC` with a
//!   `UDP_SEGMENT` control message, up to 128 datagrams each) and `UDP_GRO`
//!   receives, by the `batch` engine's `auto` rule;
//! - UDP receive through one multishot `RECVMSG` into a provided buffer ring
//!   (`IORING_REGISTER_PBUF_RING`), with the kernel's timestamp, drop
//!   counter and GRO segment size in each buffer's control data (a
//!   busy-polled receiver takes one non-blocking `RECVMSG` per call
//!   instead);
//! - optionally a kernel submission-polling thread (`uring:sqpoll`).
//!
//! A blocking wait is bounded by `ring::WAIT` like the syscall engine's socket
//! timeouts (io_uring ignores `SO_RCVTIMEO`): a request still pending then
//! is cancelled and its final completion awaited, so a datagram or a byte is
//! never both reported unsent and sent.

pub(crate) mod buf_ring;
mod ring;
mod tcp;
mod udp;

use super::tcp_endpoint::TcpEndpoint;
use super::{Engine, KernelUdp};
use crate::EngineError;

pub(crate) use super::lent::leak;
pub use ring::{caps, Uring, UringCaps};
pub(crate) use ring::{Ring, TAG_CANCEL};
pub use tcp::{UringTcpRx, UringTcpTx};
pub(crate) use udp::{fill, RECVMSG_OUT};
pub use udp::{UringUdpRx, UringUdpTx};

impl Engine for Uring {
    type UdpEndpoint = KernelUdp;
    type UdpTx = UringUdpTx;
    type UdpRx = UringUdpRx;
    type TcpTx = UringTcpTx;
    type TcpRx = UringTcpRx;
    const TCP_IO_OUTLIVES_SOCKET: bool = true;

    fn udp_endpoint(self, sock: std::net::UdpSocket) -> Result<KernelUdp, EngineError> {
        Ok(KernelUdp::new(sock))
    }
    fn udp_tx(self, ep: &KernelUdp, len: usize) -> Result<UringUdpTx, EngineError> {
        UringUdpTx::new(self, ep.socket(), len)
    }
    fn udp_rx(self, ep: &KernelUdp, len: usize) -> Result<UringUdpRx, EngineError> {
        UringUdpRx::new(self, ep.socket(), len)
    }
    /// `UDP_GRO` before the first datagram, as the `batch` engine does.
    fn udp_rx_attach(self, sock: &std::net::UdpSocket) {
        // A failure is reported by `udp_rx`, which tries again.
        let _ = crate::engines::batch::gro_plan(sock);
    }
    fn tcp_tx<S: TcpEndpoint>(self, _sock: &S) -> Result<UringTcpTx, EngineError> {
        UringTcpTx::new(self)
    }
    fn tcp_rx<S: TcpEndpoint>(self, _sock: &S, skip_copy: bool) -> Result<UringTcpRx, EngineError> {
        UringTcpRx::new(self, skip_copy)
    }
}

#[cfg(test)]
mod tests;
