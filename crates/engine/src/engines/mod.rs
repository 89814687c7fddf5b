//! Engines: the I/O primitives of the data path, one file per engine, behind
//! one batch-shaped trait.
//!
//! An engine does only I/O: per transport a few small functions that move a
//! batch of buffers (send these datagrams, receive into these slots, write or
//! read this buffer) in the way it knows best — one syscall per buffer
//! ([`syscall`]), `sendmmsg`/`recvmmsg` with segmentation offload, io_uring,
//! zero copy. Everything else — pacing, sequence numbers, fault injection,
//! classification, loss and jitter accounting, interval records — lives in
//! the sans-IO cores of `linerate_proto` and in the generic loops of
//! [`crate::tcp`] and [`crate::udp`], which drive a core and call the engine
//! for I/O only. A new engine is therefore a few functions, not a copy of
//! every loop.
//!
//! UDP I/O runs on the engine's own endpoint type ([`endpoint`]: the kernel
//! socket for every engine here, [`KernelUdp`]; a queue for a kernel-bypass
//! engine), which the UDP loops use for everything outside the data
//! batches, so no UDP loop names a kernel socket. TCP I/O takes the
//! `TcpStream`.
//!
//! Engines are chosen once, as an [`EngineKind`] in the validated config, and
//! dispatched statically (`with_engine!`) at the top of a stream's thread:
//! no indirect call per buffer or datagram.

pub mod auto;
pub mod batch;
pub mod endpoint;
pub mod sendfile;
pub mod syscall;
pub mod uring;
pub mod xdp;
pub mod zerocopy;

use std::fmt;
use std::io;
use std::net::{TcpStream, UdpSocket};
use std::str::FromStr;

pub use batch::Batch;
pub use endpoint::{Interest, KernelUdp, Readiness, UdpEndpoint};
pub use sendfile::SendFile;
pub use syscall::Syscall;
pub use uring::Uring;
pub use xdp::{Xdp, XdpMode};
pub use zerocopy::ZeroCopy;

use linerate_proto::measure::{Batching, CallsBytes, EngineUse, ZeroCopyUse};
use linerate_proto::spec::{Protocol, TestKind, TestSpec};
use linerate_proto::test_type::Workload;

use crate::EngineError;

/// Bytes per receive slot: the largest datagram a receiver takes without
/// truncation (a UDP payload cannot be larger).
pub const RECV_BUF: usize = 65536;

/// The engine a side runs: parsed from `--engine` once, carried as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum EngineKind {
    /// One `read`/`write`/`send`/`recv` per buffer or datagram: the engine
    /// that works everywhere, under LD_PRELOAD kernel-bypass libraries too.
    #[default]
    Syscall,
    /// io_uring: registered buffers, multishot receive into a provided
    /// buffer ring, zero-copy sends (`SEND_ZC`) of 10 KiB and more;
    /// `uring:sqpoll` adds a
    /// kernel submission-polling thread.
    Uring { sqpoll: bool },
    /// `MSG_ZEROCOPY` sends with completions read from the error queue;
    /// receives as `syscall`. `zerocopy:sendfile` (TCP streams only)
    /// instead sends with `sendfile(2)` from a memory file holding the
    /// stream's buffer and receives with `splice(2)` into `/dev/null`
    /// ([`sendfile`]).
    ZeroCopy { sendfile: bool },
    /// `sendmmsg`/`recvmmsg` with UDP GSO/GRO, `writev` of large TCP
    /// writes, optionally `MSG_TRUNC` TCP receives; with its options.
    Batch(Batch),
    /// AF_XDP: UDP datagrams as frames through an AF_XDP socket on the
    /// peer's interface, past the kernel's UDP/IP stack; with its modes.
    /// Never picked by `auto` (it takes over a queue of an interface).
    Xdp(Xdp),
}

impl EngineKind {
    /// Every engine this build has, in the order `--engine` lists them.
    pub const ALL: &'static [EngineKind] = &[
        EngineKind::Syscall,
        EngineKind::Batch(Batch::AUTO),
        EngineKind::Uring { sqpoll: false },
        EngineKind::Uring { sqpoll: true },
        EngineKind::ZeroCopy { sendfile: false },
        EngineKind::ZeroCopy { sendfile: true },
        EngineKind::Xdp(Xdp {
            mode: None,
            zero_copy: None,
        }),
    ];

    /// The name in `--engine` and in reports.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Syscall => "syscall",
            EngineKind::Uring { sqpoll: false } => "uring",
            EngineKind::Uring { sqpoll: true } => "uring:sqpoll",
            EngineKind::ZeroCopy { sendfile: false } => "zerocopy",
            EngineKind::ZeroCopy { sendfile: true } => "zerocopy:sendfile",
            EngineKind::Batch(_) => "batch",
            EngineKind::Xdp(_) => "xdp",
        }
    }

    /// What the engine does, in one line (for `--help`).
    pub fn summary(self) -> &'static str {
        match self {
            EngineKind::Syscall => {
                "one call per buffer or datagram; works under LD_PRELOAD kernel-bypass libraries"
            }
            EngineKind::Batch(_) => {
                "sendmmsg/recvmmsg with UDP GSO/GRO; large TCP writes, optional MSG_TRUNC receive"
            }
            EngineKind::Uring { sqpoll: false } => {
                "io_uring: registered buffers, zero-copy sends of 10 KiB and more, multishot receive into a provided-buffer ring, UDP GSO/GRO"
            }
            EngineKind::Uring { sqpoll: true } => {
                "io_uring with a kernel submission-polling thread (SQPOLL)"
            }
            EngineKind::ZeroCopy { sendfile: false } => {
                "MSG_ZEROCOPY sends (UDP in GSO runs), completions tracked on the error queue (loopback copies anyway)"
            }
            EngineKind::ZeroCopy { sendfile: true } => {
                "TCP streams only: sendfile(2) from a memory file holding the send buffer, splice(2) receive into /dev/null"
            }
            EngineKind::Xdp(_) => {
                "UDP streams (-P N, --bidir) and UDP rr: AF_XDP socket on the peer's interface (a NIC or veth, not loopback), past the kernel's UDP/IP stack; needs root or CAP_NET_RAW+CAP_NET_ADMIN+CAP_BPF"
            }
        }
    }

    /// The names of [`Self::ALL`], comma-separated (for help and errors).
    pub fn names() -> String {
        Self::ALL
            .iter()
            .map(|k| k.name())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Checks that this kernel can run the engine (a refusal says why).
    /// The plain syscall engine runs everywhere.
    pub fn check(self) -> Result<EngineKind, EngineError> {
        match self {
            EngineKind::Syscall => Ok(self),
            EngineKind::Uring { .. } => uring::caps().map(|_| self),
            EngineKind::ZeroCopy { sendfile: false } => zerocopy::check().map(|()| self),
            EngineKind::ZeroCopy { sendfile: true } => sendfile::check().map(|()| self),
            EngineKind::Xdp(x) => x.check().map(|()| self),
            EngineKind::Batch(b) => match b.unavailable() {
                None => Ok(self),
                Some(reason) => Err(EngineError::EngineUnavailable {
                    engine: self,
                    reason,
                }),
            },
        }
    }

    /// Why this engine cannot run `spec`'s test at all, whatever the
    /// kernel (`None`: it can). Only `zerocopy:sendfile` is so limited: it
    /// sends one unchanging buffer from a file, which is a TCP stream's
    /// bytes and nothing else (a UDP datagram or an rr message changes on
    /// every send). Refused by name, never replaced by another engine.
    /// `uring` with `--flows` runs the completion loop, which covers the
    /// kinds of flows [`crate::event_loop::ring::refusal`] says, where
    /// this kernel has multishot receives.
    pub fn refusal(self, spec: &TestSpec) -> Option<String> {
        if let EngineKind::Xdp(_) = self {
            return xdp_refusal(spec);
        }
        if let (EngineKind::Uring { .. }, Some(_)) = (self, spec.flows) {
            return crate::event_loop::ring::refusal(spec);
        }
        if self != (EngineKind::ZeroCopy { sendfile: true }) {
            return None;
        }
        match (Workload::of(spec), spec.protocol) {
            (Workload::TcpStream, _) => None,
            // Worded by what moves: datagrams, or changing messages.
            (_, Protocol::Udp) => Some(format!(
                "{}: TCP stream tests only (sendfile and splice move a byte stream; \
                 for UDP zero-copy sends use --engine zerocopy)",
                self.name()
            )),
            _ => Some(format!(
                "{}: TCP stream tests only (sendfile sends one unchanging buffer; \
                 request/response messages change with every send)",
                self.name()
            )),
        }
    }
}

/// Why `xdp` cannot run `spec` (`None`: it can): UDP streams, any number
/// and both directions, and UDP request/response (the flows of one
/// interface share its AF_XDP socket on queue 0: `engines/xdp/port.rs`).
fn xdp_refusal(spec: &TestSpec) -> Option<String> {
    match (spec.protocol, spec.kind) {
        (Protocol::Udp, TestKind::Stream | TestKind::Rr) => None,
        _ => Some(
            "xdp: UDP tests only (streams and request/response; TCP has no AF_XDP \
             path in linerate)"
                .into(),
        ),
    }
}

/// The name and the options that differ from the engine's defaults, as
/// flags (`batch --no-gso`): what reports name as a side's engine.
impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())?;
        let flags = match self {
            EngineKind::Batch(b) => b.flags().collect(),
            EngineKind::Xdp(x) => x.flags(),
            _ => Vec::new(),
        };
        for flag in flags {
            write!(f, " {flag}")?;
        }
        Ok(())
    }
}

impl FromStr for EngineKind {
    type Err = EngineError;

    fn from_str(s: &str) -> Result<Self, EngineError> {
        Self::ALL
            .iter()
            .copied()
            .find(|k| k.name() == s)
            .ok_or_else(|| EngineError::UnknownEngine {
                name: s.into(),
                known: Self::names(),
            })
    }
}

/// Runs `$body` with `$e` bound to the engine value of `$kind` (a
/// [`EngineKind`]): the one place that maps kinds to engine types, so the
/// generic loops are monomorphised per engine and call it directly.
/// Exported for loops built outside this crate (iperf3's, and their tests).
#[macro_export]
macro_rules! with_engine {
    ($kind:expr, $e:ident => $body:expr) => {
        match $kind {
            $crate::engines::EngineKind::Syscall => {
                let $e = $crate::engines::Syscall;
                $body
            }
            $crate::engines::EngineKind::Uring { sqpoll } => {
                let $e = $crate::engines::Uring { sqpoll };
                $body
            }
            $crate::engines::EngineKind::ZeroCopy { sendfile: false } => {
                let $e = $crate::engines::ZeroCopy;
                $body
            }
            $crate::engines::EngineKind::ZeroCopy { sendfile: true } => {
                let $e = $crate::engines::SendFile;
                $body
            }
            $crate::engines::EngineKind::Batch(options) => {
                let $e = options;
                $body
            }
            $crate::engines::EngineKind::Xdp(options) => {
                let $e = options;
                $body
            }
        }
    };
}
pub use crate::with_engine;

thread_local! {
    /// What the engine's I/O objects on this thread used, merged: each
    /// stream (and rr flow) runs on its own thread, so the runner collects
    /// it after the loop returns without every loop passing it back.
    static USED: std::cell::RefCell<Option<EngineUse>> = const { std::cell::RefCell::new(None) };
}

/// Records what an engine's I/O object used (called as it is dropped).
pub(crate) fn record_use(u: EngineUse) {
    USED.with(|cell| merge_use(&mut cell.borrow_mut(), u));
}

/// Merges `u` into `into`: a feature used by either, zero-copy counts
/// added, notes once each.
pub(crate) fn merge_use(into: &mut Option<EngineUse>, u: EngineUse) {
    *into = Some(match into.take() {
        None => u,
        Some(mut a) => {
            a.registered_buffers |= u.registered_buffers;
            a.sqpoll |= u.sqpoll;
            a.multishot_recv |= u.multishot_recv;
            a.zerocopy = match (a.zerocopy, u.zerocopy) {
                (Some(x), Some(y)) => Some(ZeroCopyUse {
                    sends: x.sends + y.sends,
                    completed: x.completed + y.completed,
                    copied: x.copied + y.copied,
                    under_threshold: x.under_threshold + y.under_threshold,
                }),
                (x, y) => x.or(y),
            };
            a.sendfile = add_calls(a.sendfile, u.sendfile);
            a.splice_recv = add_calls(a.splice_recv, u.splice_recv);
            a.xdp = match (a.xdp, u.xdp) {
                (Some(mut x), Some(y)) => {
                    x.merge(&y);
                    Some(x)
                }
                (x, y) => x.or(y),
            };
            for n in u.notes {
                if !a.notes.contains(&n) {
                    a.notes.push(n);
                }
            }
            a
        }
    });
}

/// Two counts of the same calls, summed (absent where neither was used).
fn add_calls(a: Option<CallsBytes>, b: Option<CallsBytes>) -> Option<CallsBytes> {
    match (a, b) {
        (Some(x), Some(y)) => Some(CallsBytes {
            calls: x.calls + y.calls,
            bytes: x.bytes + y.bytes,
        }),
        (x, y) => x.or(y),
    }
}

/// Takes what the engines on this thread recorded since the last take.
pub fn take_use() -> Option<EngineUse> {
    USED.with(|cell| cell.borrow_mut().take())
}

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
    /// What this engine's datagrams move through ([`endpoint`]): the
    /// kernel's socket ([`KernelUdp`]) for every engine here.
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
    /// Prepares a TCP stream for writing.
    fn tcp_tx(self, sock: &TcpStream) -> Result<Self::TcpTx, EngineError>;
    /// Prepares a TCP stream for reading; `skip_copy`: consume the bytes
    /// without copying them (`MSG_TRUNC`, `--skip-rx-copy`).
    fn tcp_rx(self, sock: &TcpStream, skip_copy: bool) -> Result<Self::TcpRx, EngineError>;
    /// Prepares a TCP stream for a stream loop's writer, which writes only
    /// `buf` (or a prefix of it: a byte limit's last write), unchanged, on
    /// every call ([`crate::tcp`]): an engine may keep those bytes where
    /// the kernel can send them without a copy (`zerocopy:sendfile`'s
    /// memory file). Other writers (rr's messages) use [`Self::tcp_tx`].
    /// Default: [`Self::tcp_tx`].
    fn tcp_tx_stream(self, sock: &TcpStream, _buf: &[u8]) -> Result<Self::TcpTx, EngineError> {
        self.tcp_tx(sock)
    }
    /// Prepares a TCP stream for a stream loop's reader, which never looks
    /// at the bytes — where `--skip-rx-copy` is allowed; rr's framed
    /// messages use [`Self::tcp_rx`]. An engine may then keep every byte
    /// out of user space even without `skip_copy` (`zerocopy:sendfile`'s
    /// `splice`). Default: [`Self::tcp_rx`].
    fn tcp_rx_stream(self, sock: &TcpStream, skip_copy: bool) -> Result<Self::TcpRx, EngineError> {
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

/// Writing a TCP byte stream.
pub trait TcpTx: Send {
    /// Writes from `buf`; returns the bytes the kernel took (0: the
    /// connection can take no more).
    fn write(&mut self, sock: &TcpStream, buf: &[u8], wait: Wait) -> io::Result<usize>;
    /// Writes `buf` up to `times` times over in one call where the engine
    /// batches writes (the stream's bytes are the buffer repeated, so this
    /// is the same stream with fewer calls); returns the bytes taken. The
    /// default writes it once.
    fn write_repeated(
        &mut self,
        sock: &TcpStream,
        buf: &[u8],
        _times: usize,
        wait: Wait,
    ) -> io::Result<usize> {
        self.write(sock, buf, wait)
    }
    /// Before the write side is shut down: completes what is outstanding
    /// (zero-copy completions). Plain writes have nothing to complete.
    fn finish(&mut self, _sock: &TcpStream) -> io::Result<()> {
        Ok(())
    }
    /// The connection's exchange is over (a crr transaction, answered and
    /// closed by the peer): takes what has already arrived for it (zero-copy
    /// completions), without waiting. Plain writes have nothing to take.
    fn collect(&mut self, _sock: &TcpStream) -> io::Result<()> {
        Ok(())
    }
}

/// Reading a TCP byte stream.
pub trait TcpRx: Send {
    /// Consumes up to `buf.len()` bytes; returns how many (0: end of
    /// stream). An engine that skips the copy (`MSG_TRUNC`) may leave `buf`
    /// untouched: the stream loops never look at the bytes.
    fn read(&mut self, sock: &TcpStream, buf: &mut [u8], wait: Wait) -> io::Result<usize>;
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

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_proto::spec::TestKind;

    #[test]
    fn kinds_parse_from_their_names_and_unknown_names_are_refused() {
        for k in EngineKind::ALL {
            assert_eq!(k.name().parse::<EngineKind>().expect("known"), *k);
        }
        let e = "warp".parse::<EngineKind>().expect_err("unknown");
        assert_eq!(
            e.to_string(),
            "unknown engine \"warp\"; this build has: syscall, batch, uring, uring:sqpoll, zerocopy, zerocopy:sendfile, xdp"
        );
    }

    #[test]
    fn issue_26_uring_flows_run_streams_and_refuse_rr_and_crr_by_name() {
        use linerate_proto::spec::Flows;
        let uring = EngineKind::Uring { sqpoll: false };
        let flows = Some(Flows {
            count: 8,
            threads: 2,
        });
        // Where this kernel runs them, TCP and UDP stream flows run.
        let here = crate::event_loop::ring::unavailable();
        for protocol in [Protocol::Tcp, Protocol::Udp] {
            let spec = TestSpec {
                protocol,
                flows,
                ..TestSpec::default()
            };
            assert_eq!(uring.refusal(&spec), here, "{protocol:?}");
        }
        for kind in [TestKind::Rr, TestKind::Crr] {
            let spec = TestSpec {
                kind,
                flows,
                ..TestSpec::default()
            };
            let why = uring.refusal(&spec).expect("refused");
            assert!(
                why.contains("rr and crr flows have no completion loop"),
                "{why}"
            );
            // Without --flows, uring runs rr on its own threads.
            let one = TestSpec {
                flows: None,
                ..spec
            };
            assert_eq!(uring.refusal(&one), None);
        }
    }

    #[test]
    fn issue_25_xdp_runs_udp_streams_and_rr_and_refuses_the_rest_by_name() {
        use linerate_proto::spec::Direction;
        let xdp = EngineKind::Xdp(Xdp::default());
        let udp = TestSpec {
            protocol: Protocol::Udp,
            ..TestSpec::default()
        };
        assert_eq!(xdp.refusal(&udp), None);
        let reverse = TestSpec {
            direction: Direction::Reverse,
            ..udp.clone()
        };
        assert_eq!(xdp.refusal(&reverse), None);
        let tcp = TestSpec::default();
        assert!(xdp
            .refusal(&tcp)
            .is_some_and(|w| w.contains("UDP tests only")));
        let rr = TestSpec {
            kind: TestKind::Rr,
            ..udp.clone()
        };
        assert_eq!(xdp.refusal(&rr), None);
        for kind in [TestKind::Rr, TestKind::Crr] {
            let tcp = TestSpec {
                kind,
                ..TestSpec::default()
            };
            assert!(xdp
                .refusal(&tcp)
                .is_some_and(|w| w.contains("UDP tests only")));
        }
        let two = TestSpec {
            streams: 2,
            ..udp.clone()
        };
        assert_eq!(xdp.refusal(&two), None);
        let bidir = TestSpec {
            direction: Direction::Bidir,
            streams: 2,
            ..udp
        };
        assert_eq!(xdp.refusal(&bidir), None);
        // The options a report names, as flags.
        let k = EngineKind::Xdp(Xdp {
            mode: Some(XdpMode::Generic),
            zero_copy: Some(false),
        });
        assert_eq!(k.to_string(), "xdp --xdp-mode generic --xdp-copy");
        assert_eq!(xdp.to_string(), "xdp");
    }

    #[test]
    fn a_batch_cuts_its_buffer_into_segments_with_a_short_last_one() {
        let buf = [0u8; 10];
        let b = TxBatch::new(&buf, 4);
        assert_eq!(b.count(), 3);
        let lens: Vec<usize> = b.datagrams().map(<[u8]>::len).collect();
        assert_eq!(lens, vec![4, 4, 2]);
    }

    #[test]
    fn a_gro_slot_splits_at_its_segment_size() {
        let mut s = RecvSlots::new(2, 100);
        let (_, m) = s.slot_mut(1);
        *m = RecvMeta {
            len: 70,
            segment: Some(32),
            ..RecvMeta::default()
        };
        let lens: Vec<usize> = s.datagrams(1).map(<[u8]>::len).collect();
        assert_eq!(lens, vec![32, 32, 6]);
        let (_, m) = s.slot_mut(0);
        m.len = 5;
        assert_eq!(s.datagrams(0).count(), 1);
        // An empty datagram is still one datagram (a corrupt one).
        s.slot_mut(0).1.len = 0;
        assert_eq!(s.datagrams(0).count(), 1);
        // A super-buffer of whole segments has no empty tail.
        s.slot_mut(1).1.len = 64;
        assert_eq!(s.datagrams(1).count(), 2);
    }
}
