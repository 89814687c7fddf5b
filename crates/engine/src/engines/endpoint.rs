//! The UDP endpoint: what an engine's datagrams move through, in place of
//! a kernel socket.
//!
//! An endpoint is one connected datagram flow (a local and a peer address,
//! a way to send, a receive queue) as the UDP loops see it: the stream
//! loops ([`crate::udp`]), iperf3's receive loop (in the
//! `linerate-iperf3` crate) and rr's datagrams. The engine's I/O objects
//! ([`super::UdpTx`], [`super::UdpRx`]) move the data batches, each call
//! given the endpoint;
//! the loops themselves use only the endpoint's few methods, none of them
//! per data datagram:
//! - [`UdpEndpoint::send_control`]: a datagram outside the data batches
//!   (the echo of a repeated greeting, rr's empty end-of-phase datagram
//!   and its answers);
//! - [`UdpEndpoint::set_recv_timeout`], [`UdpEndpoint::busy_poll`],
//!   [`Readiness::wait_ready`]: how calls wait (a blocking receive gives up
//!   after the timeout; busy polling spins on calls that return at once
//!   and sleeps in `wait_ready` when its budget is spent);
//! - [`UdpEndpoint::enable_recv_meta`], [`UdpEndpoint::drops`],
//!   [`UdpEndpoint::recv_buffer`]: a stream receiver's per-datagram
//!   metadata (arrival stamps, drop counts, in [`super::RecvMeta`]), its
//!   end-of-stream drop count and buffer size;
//! - [`UdpEndpoint::local_addr`], [`UdpEndpoint::peer_addr`].
//!
//! Each engine names its endpoint type ([`super::Engine::UdpEndpoint`]) and
//! makes it from the kernel socket the control plane attached (greeting
//! handshake, [`crate::udp`]) with [`super::Engine::udp_endpoint`]. The
//! loops are generic over the engine, hence over its endpoint type, and
//! monomorphised: no indirect call, nothing added per datagram. Every
//! kernel engine (syscall, batch, uring, zerocopy) runs on [`KernelUdp`],
//! the attached socket itself. A kernel-bypass engine (AF_XDP) implements
//! [`UdpEndpoint`] on its own queue: it reads the attached socket's
//! addresses in `udp_endpoint` and may then drop the socket (or keep it to
//! hold the port); nothing on its data path needs one.
//!
//! Methods take `&self`: the loops hold the endpoint shared while an I/O
//! object's call uses it too. One thread uses an endpoint at a time (it is
//! made on the thread that runs its loop), so a bypass endpoint may keep
//! mutable state in `Cell`s, or give it to its I/O objects when they are
//! made.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::time::Duration;

use crate::cmsg::{SO_MEMINFO, SO_RXQ_OVFL, SO_TIMESTAMPNS};
use crate::socket::{self, set_int};
use crate::EngineError;

// SO_MEMINFO's array (include/uapi/linux/sock_diag.h).
const SK_MEMINFO_VARS: usize = 9;
const SK_MEMINFO_DROPS: usize = 8;

/// What a wait waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interest {
    /// Something to receive.
    Recv,
    /// Room to send.
    Send,
}

/// What a busy-polling wait sleeps on once its spin budget is spent (a
/// UDP endpoint, a TCP endpoint).
pub trait Readiness {
    /// Sleeps until `interest` can be met (or an error is pending), at
    /// most `timeout`; true when it can. A signal ends the wait early
    /// (false).
    fn wait_ready(&self, interest: Interest, timeout: Duration) -> io::Result<bool>;
}

/// One connected datagram flow, as the UDP loops see it (module docs).
pub trait UdpEndpoint: Readiness {
    /// This end's address.
    fn local_addr(&self) -> io::Result<SocketAddr>;
    /// The peer's address.
    fn peer_addr(&self) -> io::Result<SocketAddr>;
    /// Sends one datagram outside the engine's data batches: the echo of a
    /// repeated greeting, rr's empty end-of-phase datagram. May be empty.
    /// Rare, so it may be slow; it must not disturb the I/O objects'
    /// batches in flight.
    fn send_control(&self, datagram: &[u8]) -> io::Result<()>;
    /// Reads one datagram that arrived outside the engine's data batches,
    /// without waiting: a sending stream's look for its receiver's beats
    /// ([`linerate_proto::data_beat`]). `Ok(None)`: nothing is queued, or
    /// the endpoint cannot read beside its engine (then its sender hears
    /// its peer only on the control connection).
    fn recv_control(&self, _buf: &mut [u8]) -> io::Result<Option<usize>> {
        Ok(None)
    }
    /// A stream receiver's endpoint: attach to each received buffer what
    /// [`super::RecvMeta`] can carry (arrival time, cumulative drops), as
    /// far as the endpoint can. Best effort and idempotent; called before
    /// the receiver's I/O object is made. rr's endpoints never ask.
    fn enable_recv_meta(&self);
    /// A blocking receive ([`super::Wait::Block`]) returns `WouldBlock`
    /// or `TimedOut` after `poll` with nothing received, so the loop can
    /// look at its deadlines and the stop flags.
    fn set_recv_timeout(&self, poll: Duration) -> io::Result<()>;
    /// Switches to busy polling (`--busy-poll`): the loops call with
    /// [`super::Wait::DontWait`] and spin, sleeping in
    /// [`Readiness::wait_ready`] when the spin budget is spent. Returns
    /// what the endpoint was granted, for the report.
    fn busy_poll(&self) -> Result<String, EngineError>;
    /// Datagrams dropped on arrival because the receive queue was full,
    /// since the endpoint was made (`None`: not known).
    fn drops(&self) -> Option<u64>;
    /// The receive queue's size in bytes (`None`: not known): reported,
    /// and whether a receiver coalesces its wake-ups depends on it.
    fn recv_buffer(&self) -> Option<u64>;
}

/// The kernel's UDP socket as an endpoint: what every kernel engine runs on.
#[derive(Debug)]
pub struct KernelUdp(UdpSocket);

impl KernelUdp {
    /// The attached (connected) socket as an endpoint.
    pub fn new(sock: UdpSocket) -> Self {
        KernelUdp(sock)
    }

    /// The socket, for the kernel engines' calls.
    pub fn socket(&self) -> &UdpSocket {
        &self.0
    }
}

impl AsRawFd for KernelUdp {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

impl AsFd for KernelUdp {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

pub(super) fn poll_events(interest: Interest) -> libc::c_short {
    match interest {
        Interest::Recv => libc::POLLIN,
        Interest::Send => libc::POLLOUT,
    }
}

impl Readiness for KernelUdp {
    fn wait_ready(&self, interest: Interest, timeout: Duration) -> io::Result<bool> {
        socket::wait_ready(&self.0, poll_events(interest), timeout)
    }
}

impl UdpEndpoint for KernelUdp {
    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }

    fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.0.peer_addr()
    }

    fn send_control(&self, datagram: &[u8]) -> io::Result<()> {
        self.0.send(datagram).map(|_| ())
    }

    fn recv_control(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        // SAFETY: `buf` is valid for writes of its length; the fd is ours.
        let n = unsafe {
            libc::recv(
                self.0.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if let Ok(n) = usize::try_from(n) {
            return Ok(Some(n));
        }
        match io::Error::last_os_error() {
            e if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            e => Err(e),
        }
    }

    fn enable_recv_meta(&self) {
        enable_recv_meta(&self.0);
    }

    fn set_recv_timeout(&self, poll: Duration) -> io::Result<()> {
        self.0.set_read_timeout(Some(poll))
    }

    fn busy_poll(&self) -> Result<String, EngineError> {
        socket::prepare_stream(&self.0)
    }

    fn drops(&self) -> Option<u64> {
        socket_drops(&self.0)
    }

    fn recv_buffer(&self) -> Option<u64> {
        socket2::SockRef::from(&self.0)
            .recv_buffer_size()
            .ok()
            .map(|b| b as u64)
    }
}

/// Asks the kernel for the drop counter (`SO_RXQ_OVFL`) and arrival times
/// (`SO_TIMESTAMPNS`) on every datagram `sock` receives. Without
/// SO_RXQ_OVFL the drop count still comes from `SO_MEMINFO` at the end.
pub(crate) fn enable_recv_meta(sock: &UdpSocket) {
    let _ = set_int(sock, libc::SOL_SOCKET, SO_RXQ_OVFL, 1);
    let _ = set_int(sock, libc::SOL_SOCKET, SO_TIMESTAMPNS, 1);
}

/// Datagrams this socket dropped because its receive buffer was full
/// (`SO_MEMINFO`'s drop counter, the same one SO_RXQ_OVFL reports).
pub(crate) fn socket_drops(sock: &impl AsRawFd) -> Option<u64> {
    let mut info = [0u32; SK_MEMINFO_VARS];
    let mut len = std::mem::size_of_val(&info) as libc::socklen_t;
    // SAFETY: info is valid for len bytes.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_MEMINFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 || (len as usize) < (SK_MEMINFO_DROPS + 1) * 4 {
        return None;
    }
    Some(u64::from(info[SK_MEMINFO_DROPS]))
}
