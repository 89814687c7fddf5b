//! The engine interface: the [`Engine`] trait, the traits of the I/O
//! objects it makes, how a call waits, and the send and receive batches
//! they take.

use std::io;
use std::net::UdpSocket;

use linerate_proto::measure::Batching;

use super::endpoint::UdpEndpoint;
use super::tcp_endpoint::TcpEndpoint;
use crate::EngineError;

/// Bytes per receive slot: the largest datagram a receiver takes without
/// truncation (a UDP payload cannot be larger).
pub const RECV_BUF: usize = 65536;

/// How one I/O call waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Block until the socket or endpoint is ready or its timeout
    /// (`SO_RCVTIMEO` / `SO_SNDTIMEO`, set when the socket was prepared:
    /// [`crate::stream::POLL`] for TCP streams; an endpoint's
    /// [`UdpEndpoint::set_recv_timeout`], [`crate::udp::RECV_POLL`] for UDP
    /// receivers) passes, then report `WouldBlock`.
    Block,
    /// Return at once (`MSG_DONTWAIT`): busy polling, or draining what is
    /// already queued.
    DontWait,
}

/// A way of moving data: per transport, an I/O object made once per socket
/// (where the engine keeps its per-socket state: message headers, rings,
/// completion tracking) whose methods each do one batch of I/O.
///
/// Engines are small `Copy` values (their options, if any); the generic
/// loops take `E: Engine` and are monomorphised, so calls are direct.
pub trait Engine: Copy + Send + Sync + 'static {
    /// What this engine's datagrams move through ([`endpoint`](super::endpoint)): the
    /// kernel's socket ([`KernelUdp`](super::KernelUdp)) for every engine here.
    type UdpEndpoint: UdpEndpoint;
    type UdpTx: UdpTx<Self::UdpEndpoint>;
    type UdpRx: UdpRx<Self::UdpEndpoint>;
    type TcpTx: TcpTx;
    type TcpRx: TcpRx;

    /// Whether a TCP writer and reader of this engine may go on to another
    /// socket (a crr flow's next connection): making them set nothing on
    /// the socket, and nothing they still await is tied to it. Plain
    /// writes qualify, and io_uring rings (the fd goes with each request;
    /// notifications arrive on the ring). `MSG_ZEROCOPY` does not
    /// (`SO_ZEROCOPY` is set per socket, completions arrive on the
    /// socket's error queue), nor `splice` (its reader caches the socket's
    /// blocking mode). Default: no, a new pair per socket.
    const TCP_IO_OUTLIVES_SOCKET: bool = false;

    /// Takes over a UDP socket the control plane attached (connected to
    /// the peer's; a stream's, or an rr phase's) as this engine's endpoint.
    fn udp_endpoint(self, sock: UdpSocket) -> Result<Self::UdpEndpoint, EngineError>;
    /// Whether this side's rr flows and UDP stream receivers spin
    /// (non-blocking calls within the spin budget, the crate's `Waiter`)
    /// without `--busy-poll`: `xdp` polls its rings unless `--xdp-sleep`,
    /// as a kernel-bypass path does. Default: no, they block unless the
    /// test asks.
    fn spins(self) -> bool {
        false
    }
    /// Prepares `ep` for sending datagrams of `len` bytes.
    fn udp_tx(self, ep: &Self::UdpEndpoint, len: usize) -> Result<Self::UdpTx, EngineError>;
    /// Prepares `ep` for receiving datagrams of up to `len` bytes.
    fn udp_rx(self, ep: &Self::UdpEndpoint, len: usize) -> Result<Self::UdpRx, EngineError>;
    /// Sets the receive options that must be on before the first datagram
    /// arrives (`UDP_GRO`: datagrams queued before it are delivered one by
    /// one), and what takes long to set up (`xdp`'s program and socket):
    /// called on the connected kernel socket when the control plane
    /// attaches it (the client before its greeting, the server once the
    /// greeting connected it), before the test starts and before
    /// [`Self::udp_endpoint`]. Best effort and idempotent: [`Self::udp_rx`]
    /// sets them again and reports or refuses what failed. Default:
    /// nothing to set.
    fn udp_rx_attach(self, _sock: &UdpSocket) {}
    /// The greeting handshake on a receiving socket is done (the client
    /// had its echo; the server accepted it): what arrives from now on is
    /// the test's, and the peer may start sending at once. `xdp`
    /// redirects the flow to its prepared AF_XDP socket here (the echo
    /// had to reach the kernel socket). Best effort, like
    /// [`Self::udp_rx_attach`]. Default: nothing to do.
    fn udp_rx_greeted(self, _sock: &UdpSocket) {}
    /// Prepares what a sender's endpoint needs that takes long to set up
    /// (`xdp`'s program), on the connected kernel socket when a side
    /// attaches it (the client before its greeting, the server once the
    /// greeting connected it), before the test starts, so
    /// the sender's time is not spent on it. Best effort:
    /// [`Self::udp_endpoint`] sets up what was not prepared. Default:
    /// nothing to prepare.
    fn udp_tx_attach(self, _sock: &UdpSocket) {}
    /// Prepares a TCP endpoint ([`tcp_endpoint`](super::tcp_endpoint): the
    /// kernel's `TcpStream` for every engine here) for writing. The TCP
    /// calls are generic over the endpoint, monomorphised like the loops.
    fn tcp_tx<S: TcpEndpoint>(self, sock: &S) -> Result<Self::TcpTx, EngineError>;
    /// Prepares a TCP endpoint for reading; `skip_copy`: consume the bytes
    /// without copying them (`MSG_TRUNC`, `--skip-rx-copy`).
    fn tcp_rx<S: TcpEndpoint>(self, sock: &S, skip_copy: bool) -> Result<Self::TcpRx, EngineError>;
    /// Prepares a TCP stream for a stream loop's writer, which writes only
    /// `buf` (or a prefix of it: a byte limit's last write), unchanged, on
    /// every call ([`crate::tcp`]): an engine may keep those bytes where
    /// the kernel can send them without a copy (`zerocopy:sendfile`'s
    /// memory file). Other writers (rr's messages) use [`Self::tcp_tx`].
    /// Default: [`Self::tcp_tx`].
    fn tcp_tx_stream<S: TcpEndpoint>(
        self,
        sock: &S,
        _buf: &[u8],
    ) -> Result<Self::TcpTx, EngineError> {
        self.tcp_tx(sock)
    }
    /// Prepares a TCP stream for a stream loop's reader, which never looks
    /// at the bytes — where `--skip-rx-copy` is allowed; rr's framed
    /// messages use [`Self::tcp_rx`]. An engine may then keep every byte
    /// out of user space even without `skip_copy` (`zerocopy:sendfile`'s
    /// `splice`). Default: [`Self::tcp_rx`].
    fn tcp_rx_stream<S: TcpEndpoint>(
        self,
        sock: &S,
        skip_copy: bool,
    ) -> Result<Self::TcpRx, EngineError> {
        self.tcp_rx(sock, skip_copy)
    }
}

/// Sending datagrams on one UDP endpoint `P`.
pub trait UdpTx<P>: Send {
    /// Most datagrams one [`Self::send_batch`] call takes; the sender
    /// core hands out batches of at most this many.
    fn max_batch(&self) -> usize;
    /// Sends the batch's datagrams in order. Returns how many were
    /// accepted (a prefix of the batch, at least one); an error only when
    /// not even the first was accepted (the rest is offered again).
    fn send_batch(&mut self, ep: &P, batch: TxBatch<'_>, wait: Wait) -> io::Result<usize>;
    /// What a batching engine did, for the stream's report (`None`: one
    /// datagram per call).
    fn batching(&self) -> Option<Batching> {
        None
    }
}

/// Receiving datagrams on one UDP endpoint `P`.
pub trait UdpRx<P>: Send {
    /// The receive slots this engine fills (allocated once per stream).
    fn slots(&self) -> RecvSlots;
    /// Receives into `slots` from slot 0 on; returns how many slots were
    /// filled (at least one), each with its [`RecvMeta`]. An error (e.g.
    /// `WouldBlock` when the endpoint's receive timeout passed) only when
    /// none was.
    fn recv_batch(&mut self, ep: &P, slots: &mut RecvSlots, wait: Wait) -> io::Result<usize>;
    /// Whether a batch that filled fewer slots than there are means the
    /// endpoint had nothing more queued (what receive coalescing waits
    /// on). False where a short batch says nothing of the sort: one slot
    /// per call, or completions that trail the socket (io_uring).
    fn short_batch_empties_socket(&self) -> bool {
        false
    }
    /// What a batching engine did, for the stream's report (`None`: one
    /// datagram per call).
    fn batching(&self) -> Option<Batching> {
        None
    }
}

/// Writing a TCP byte stream, on the endpoint each call is given.
pub trait TcpTx: Send {
    /// Writes from `buf`; returns the bytes the kernel took (0: the
    /// connection can take no more).
    fn write<S: TcpEndpoint>(&mut self, sock: &S, buf: &[u8], wait: Wait) -> io::Result<usize>;
    /// Writes `buf` up to `times` times over in one call where the engine
    /// batches writes (the stream's bytes are the buffer repeated, so this
    /// is the same stream with fewer calls); returns the bytes taken. The
    /// default writes it once.
    fn write_repeated<S: TcpEndpoint>(
        &mut self,
        sock: &S,
        buf: &[u8],
        _times: usize,
        wait: Wait,
    ) -> io::Result<usize> {
        self.write(sock, buf, wait)
    }
    /// Whether the kernel may still read a buffer this sender was given
    /// (zero-copy sends whose completion has not come): its owner must then
    /// never free or reuse it (`engines::lent`). Copying writes lend nothing.
    fn lent(&self) -> bool {
        false
    }
    /// Before the write side is shut down: completes what is outstanding
    /// (zero-copy completions). Plain writes have nothing to complete.
    fn finish<S: TcpEndpoint>(&mut self, _sock: &S) -> io::Result<()> {
        Ok(())
    }
    /// The connection's exchange is over (a crr transaction, answered and
    /// closed by the peer): takes what has already arrived for it (zero-copy
    /// completions), without waiting. Plain writes have nothing to take.
    fn collect<S: TcpEndpoint>(&mut self, _sock: &S) -> io::Result<()> {
        Ok(())
    }
}

/// Reading a TCP byte stream, on the endpoint each call is given.
pub trait TcpRx: Send {
    /// Consumes up to `buf.len()` bytes; returns how many (0: end of
    /// stream). An engine that skips the copy (`MSG_TRUNC`) may leave `buf`
    /// untouched: the stream loops never look at the bytes.
    fn read<S: TcpEndpoint>(&mut self, sock: &S, buf: &mut [u8], wait: Wait) -> io::Result<usize>;
}

/// Datagrams to send: one contiguous buffer of `segment`-byte datagrams,
/// the last one possibly shorter — the layout `UDP_SEGMENT` (GSO) sends in
/// one call, and one `sendmmsg` vector element per datagram otherwise.
#[derive(Debug, Clone, Copy)]
pub struct TxBatch<'a> {
    buf: &'a [u8],
    segment: usize,
}

impl<'a> TxBatch<'a> {
    /// `buf` cut into datagrams of `segment` bytes (at least 1).
    pub fn new(buf: &'a [u8], segment: usize) -> Self {
        TxBatch {
            buf,
            segment: segment.max(1),
        }
    }
    /// The whole buffer.
    pub fn bytes(&self) -> &'a [u8] {
        self.buf
    }
    /// Bytes per datagram (the last may be shorter).
    pub fn segment(&self) -> usize {
        self.segment
    }
    /// Datagrams in the batch.
    pub fn count(&self) -> usize {
        self.buf.len().div_ceil(self.segment)
    }
    /// The datagrams, in order.
    pub fn datagrams(&self) -> std::slice::Chunks<'a, u8> {
        self.buf.chunks(self.segment)
    }
}

/// What the kernel said about one received buffer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecvMeta {
    /// Bytes received into the slot.
    pub len: usize,
    /// The datagram was longer than the slot (`MSG_TRUNC`).
    pub truncated: bool,
    /// The kernel's arrival time (`SO_TIMESTAMPNS`, CLOCK_REALTIME ns), if
    /// it attached one.
    pub stamp_ns: Option<u64>,
    /// The socket's cumulative drop counter (`SO_RXQ_OVFL`), if attached.
    pub drops: Option<u32>,
    /// `UDP_GRO`: the slot holds several datagrams of this many bytes each
    /// (the last possibly shorter); `None`: one datagram.
    pub segment: Option<usize>,
}

/// Receive buffers: `count` slots of `size` bytes each, allocated once per
/// stream, with the kernel's [`RecvMeta`] per slot.
#[derive(Debug)]
pub struct RecvSlots {
    buf: Vec<u8>,
    size: usize,
    meta: Vec<RecvMeta>,
}

impl RecvSlots {
    /// `count` slots of `size` bytes (both at least 1).
    pub fn new(count: usize, size: usize) -> Self {
        let (count, size) = (count.max(1), size.max(1));
        RecvSlots {
            buf: vec![0; count * size],
            size,
            meta: vec![RecvMeta::default(); count],
        }
    }
    /// Number of slots.
    pub fn count(&self) -> usize {
        self.meta.len()
    }
    /// Bytes per slot.
    pub fn size(&self) -> usize {
        self.size
    }
    /// Slot `i`'s received bytes and metadata.
    #[inline]
    pub fn get(&self, i: usize) -> (&[u8], &RecvMeta) {
        let m = &self.meta[i];
        let at = i * self.size;
        (&self.buf[at..at + m.len.min(self.size)], m)
    }
    /// Slot `i`'s whole buffer and metadata, for an engine to fill.
    #[inline]
    pub fn slot_mut(&mut self, i: usize) -> (&mut [u8], &mut RecvMeta) {
        let at = i * self.size;
        (&mut self.buf[at..at + self.size], &mut self.meta[i])
    }
    /// Every slot's buffer and metadata at once (for engines that hand the
    /// kernel a vector of buffers, as `recvmmsg` does).
    pub fn parts_mut(&mut self) -> (std::slice::ChunksExactMut<'_, u8>, &mut [RecvMeta]) {
        (self.buf.chunks_exact_mut(self.size), &mut self.meta)
    }
    /// Slot `i`'s datagrams: one (an empty datagram included), or a GRO
    /// super-buffer cut at its segment size (the last possibly shorter).
    #[inline]
    pub fn datagrams(&self, i: usize) -> Segments<'_> {
        self.datagrams_from(i, 0)
    }
    /// Slot `i`'s datagrams from byte `at` on (a segment boundary), for a
    /// reader that takes them one call at a time.
    #[inline]
    pub fn datagrams_from(&self, i: usize, at: usize) -> Segments<'_> {
        let (data, m) = self.get(i);
        Segments {
            rest: data.get(at..),
            segment: m.segment.unwrap_or(usize::MAX).max(1),
        }
    }
}

/// The datagrams of one receive slot (see [`RecvSlots::datagrams`]).
#[derive(Debug, Clone)]
pub struct Segments<'a> {
    rest: Option<&'a [u8]>,
    segment: usize,
}

impl<'a> Iterator for Segments<'a> {
    type Item = &'a [u8];

    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        let rest = self.rest?;
        if rest.len() <= self.segment {
            self.rest = None;
            return Some(rest);
        }
        let (d, tail) = rest.split_at(self.segment);
        self.rest = Some(tail);
        Some(d)
    }
}
