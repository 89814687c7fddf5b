//! `xdp`: UDP datagrams through an AF_XDP socket (issue 25), the kernel's
//! own bypass path, on any interface with an XDP path (a NIC, veth).
//!
//! The endpoint ([`XdpEndpoint`]) is made from the kernel socket the
//! control plane attached: its local and peer addresses give the route
//! and the next hop's MAC ([`linerate_xdp::path_to`]); an AF_XDP socket
//! ([`Queue`]) is bound to queue 0 of the interface the route leaves by,
//! and the XDP program ([`Program`], attached through a BPF link, so gone
//! when the process is, however it ends) redirects datagrams to the
//! socket's local address and port to it. The kernel socket stays bound:
//! it holds the port, and whatever reached it before the program was
//! attached is still received from it (counted as `via_kernel`). Frames
//! are built in place in the UMEM; received datagrams are copied into the
//! receive slots, so the same receive core counts loss, reordering,
//! duplicates and corruption as for every engine.
//!
//! Modes: what `--xdp-mode` and `--xdp-copy`/`--xdp-zerocopy` ask for,
//! exactly; unasked, the fastest the driver says it has (native XDP where
//! it redirects, zero-copy where it offers it; tried where the kernel does
//! not say). What fails is refused with the reason and the option to ask
//! for instead, never replaced by another mode or engine.

use std::cell::{Cell, RefCell, RefMut};
use std::io;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use linerate_proto::measure::{EngineUse, XdpStatistics, XdpUse};
use linerate_xdp::{
    path_to, AttachMode, CopyMode, Program, ProgramOptions, Queue, QueueOptions, UdpFlow, XdpError,
};

use super::syscall::{SyscallTcp, SyscallTcpRx};
use super::{
    Engine, Interest, Readiness, RecvMeta, RecvSlots, Syscall, TxBatch, UdpEndpoint, UdpRx, UdpTx,
    Wait,
};
use crate::EngineError;

/// Datagrams per send or receive call.
const BATCH: usize = 64;
/// How long the next hop's MAC may take to resolve.
const RESOLVE: Duration = Duration::from_secs(3);
/// How long a blocking send waits for a free frame before `WouldBlock`.
const SEND_WAIT: Duration = Duration::from_millis(10);
/// How long a closing endpoint waits for its frames to leave.
const FLUSH: Duration = Duration::from_secs(1);
/// The queue a stream's socket binds to: one stream per side this round,
/// and a NIC's flow must be steered there (`ethtool -N`, README).
const QUEUE_ID: u32 = 0;

/// Where the XDP program runs (`--xdp-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum XdpMode {
    Native,
    Generic,
}

/// The `xdp` engine and its options; `None`: the fastest the driver has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Xdp {
    pub mode: Option<XdpMode>,
    /// `Some(true)`: `--xdp-zerocopy`; `Some(false)`: `--xdp-copy`.
    pub zero_copy: Option<bool>,
}

impl Xdp {
    /// The options as flags, for reports (`xdp --xdp-mode generic`).
    pub fn flags(self) -> Vec<&'static str> {
        let mut f = Vec::new();
        match self.mode {
            Some(XdpMode::Native) => f.push("--xdp-mode native"),
            Some(XdpMode::Generic) => f.push("--xdp-mode generic"),
            None => {}
        }
        match self.zero_copy {
            Some(true) => f.push("--xdp-zerocopy"),
            Some(false) => f.push("--xdp-copy"),
            None => {}
        }
        f
    }

    /// This host can use AF_XDP at all (capabilities, the kernel's socket
    /// family); the interface is known only per stream.
    pub fn check(self) -> Result<(), EngineError> {
        linerate_xdp::check_host().map_err(|e| xdp_error(e, self))
    }

    /// The modes to use on `iface`: as asked, else the fastest its driver
    /// says it has.
    fn modes(self, iface: &str) -> (AttachMode, CopyMode) {
        let found = (self.mode.is_none() || self.zero_copy.is_none())
            .then(|| linerate_xdp::readiness(iface));
        let mode = match (self.mode, found.as_ref().and_then(|r| r.native)) {
            (Some(XdpMode::Native), _) | (None, Some(true) | None) => AttachMode::Native,
            (Some(XdpMode::Generic), _) | (None, Some(false)) => AttachMode::Generic,
        };
        let copy = match (self.zero_copy, found.as_ref().and_then(|r| r.zero_copy)) {
            (Some(true), _) | (None, Some(true) | None) => CopyMode::ZeroCopy,
            (Some(false), _) | (None, Some(false)) => CopyMode::Copy,
        };
        (mode, copy)
    }
}

/// Why a test over loopback cannot run on `xdp`, for a refusal before
/// any connection.
pub fn loopback_refusal() -> String {
    XdpError::Loopback("lo".into()).to_string()
}

/// An AF_XDP failure as an engine refusal, with the option that asks for
/// the other mode where the mode was the trouble.
fn xdp_error(e: XdpError, opts: Xdp) -> EngineError {
    let hint = match &e {
        XdpError::Attach {
            mode: AttachMode::Native,
            ..
        } if opts.mode.is_none() => "; --xdp-mode generic asks for generic XDP",
        XdpError::Bind {
            copy: CopyMode::ZeroCopy,
            ..
        } if opts.zero_copy.is_none() => "; --xdp-copy asks for copy mode",
        _ => "",
    };
    EngineError::Xdp(format!("{e}{hint}"))
}

fn io_error(e: XdpError) -> io::Error {
    io::Error::other(e.to_string())
}

/// What an endpoint is made of besides the kernel socket: the program
/// attached, the AF_XDP socket registered with it (the flow is allowed,
/// so redirected, only when the endpoint is made).
/// Loading and attaching take about half a second, so a receiver's are
/// made when the control plane attaches its socket, before the test
/// starts ([`Engine::udp_rx_attach`]), and kept in [`PREPARED`] until its
/// endpoint takes them.
struct Parts {
    // Dropped in this order: the program first (nothing more redirected),
    // then the AF_XDP socket.
    program: Program,
    queue: Queue,
    flow: UdpFlow,
    mode: AttachMode,
}

impl Parts {
    fn new(opts: Xdp, local: SocketAddr, peer: SocketAddr) -> Result<Parts, EngineError> {
        let fail = |e| xdp_error(e, opts);
        let path = path_to(peer.ip(), RESOLVE).map_err(fail)?;
        let iface = path.link.name.clone();
        let (mode, copy) = opts.modes(&iface);
        let mut program = Program::attach(
            &iface,
            &ProgramOptions {
                mode,
                replace: false,
            },
        )
        .map_err(fail)?;
        let queue = Queue::open(
            &iface,
            QUEUE_ID,
            &QueueOptions {
                copy,
                ..QueueOptions::default()
            },
        )
        .map_err(fail)?;
        program.register(&queue).map_err(fail)?;
        Ok(Parts {
            program,
            queue,
            flow: UdpFlow {
                src_mac: path.src_mac,
                dst_mac: path.dst_mac,
                src: local,
                dst: peer,
            },
            mode,
        })
    }
}

/// Receivers' parts made before their test started, by flow and options.
/// A new preparation drops those nobody took (a test that ended before
/// its streams ran), so no program stays attached past the next test.
static PREPARED: Mutex<Vec<(Xdp, UdpFlowKey, Parts)>> = Mutex::new(Vec::new());

/// A flow's addresses: (local, peer).
type UdpFlowKey = (SocketAddr, SocketAddr);

/// The parts prepared for this flow and options, if any.
fn take_prepared(opts: Xdp, key: UdpFlowKey) -> Option<Parts> {
    let mut prepared = PREPARED.lock().ok()?;
    let i = prepared
        .iter()
        .position(|(o, k, _)| *o == opts && *k == key)?;
    Some(prepared.swap_remove(i).2)
}

/// The socket's local and peer addresses.
fn flow_key(sock: &UdpSocket) -> Result<UdpFlowKey, EngineError> {
    let local = sock
        .local_addr()
        .map_err(|e| EngineError::io("udp local address", e))?;
    let peer = sock
        .peer_addr()
        .map_err(|e| EngineError::io("udp peer address", e))?;
    Ok((local, peer))
}

/// Makes a connected socket's parts now and keeps them for its endpoint
/// (see [`Parts`]), dropping those nobody took.
fn prepare(opts: Xdp, sock: &UdpSocket) {
    let Ok(key) = flow_key(sock) else {
        return;
    };
    let Ok(mut prepared) = PREPARED.lock() else {
        return;
    };
    prepared.clear();
    if let Ok(parts) = Parts::new(opts, key.0, key.1) {
        prepared.push((opts, key, parts));
    }
}

/// One stream's AF_XDP socket, program and flow (module docs).
pub struct XdpEndpoint {
    parts: RefCell<Parts>,
    flow: UdpFlow,
    mode: AttachMode,
    sock: UdpSocket,
    timeout: Cell<Duration>,
    /// Datagrams that reached the kernel socket before the program was
    /// attached are older than any on the RX ring: read first, until the
    /// socket is found empty once.
    kernel_drained: Cell<bool>,
    foreign: Cell<u64>,
    via_kernel: Cell<u64>,
}

impl std::fmt::Debug for XdpEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpEndpoint")
            .field("flow", &self.flow)
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl XdpEndpoint {
    fn new(opts: Xdp, sock: UdpSocket) -> Result<XdpEndpoint, EngineError> {
        let key = flow_key(&sock)?;
        let mut parts = match take_prepared(opts, key) {
            Some(p) => p,
            None => Parts::new(opts, key.0, key.1)?,
        };
        // Only now: until here the flow's datagrams (the greeting
        // handshake's included) belong to the kernel socket.
        parts.program.allow(key.0).map_err(|e| xdp_error(e, opts))?;
        sock.set_nonblocking(true)
            .map_err(|e| EngineError::io("udp set_nonblocking", e))?;
        Ok(XdpEndpoint {
            flow: parts.flow,
            mode: parts.mode,
            parts: RefCell::new(parts),
            sock,
            timeout: Cell::new(Duration::from_millis(100)),
            kernel_drained: Cell::new(false),
            foreign: Cell::new(0),
            via_kernel: Cell::new(0),
        })
    }

    /// The AF_XDP socket.
    fn queue(&self) -> RefMut<'_, Queue> {
        RefMut::map(self.parts.borrow_mut(), |p| &mut p.queue)
    }

    /// Sends `payloads` as frames; how many went, from the first on.
    fn send(&self, payloads: &[&[u8]], wait: Wait) -> io::Result<usize> {
        let mut q = self.queue();
        let start = Instant::now();
        loop {
            let n = q.send(&self.flow, payloads).map_err(io_error)?;
            if n > 0 {
                return Ok(n);
            }
            if wait == Wait::DontWait || start.elapsed() >= SEND_WAIT {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            // Frames come free as the kernel completes sends (`send`
            // collects completions and kicks the TX ring each time).
            std::thread::yield_now();
        }
    }

    /// Moves this flow's received datagrams into the slots.
    fn take(&self, slots: &mut RecvSlots) -> usize {
        let (local, peer) = (self.flow.src, self.flow.dst);
        let max = u32::try_from(slots.count()).unwrap_or(u32::MAX);
        let (mut filled, mut foreign) = (0, 0);
        self.queue().recv(max, |d| {
            if d.dst.port() != local.port()
                || d.src.port() != peer.port()
                || d.src.ip() != peer.ip()
            {
                foreign += 1;
                return;
            }
            let (buf, meta) = slots.slot_mut(filled);
            let len = d.payload.len().min(buf.len());
            buf[..len].copy_from_slice(&d.payload[..len]);
            *meta = RecvMeta {
                len,
                truncated: d.payload.len() > buf.len(),
                ..RecvMeta::default()
            };
            filled += 1;
        });
        self.foreign.set(self.foreign.get() + foreign);
        filled
    }

    /// A datagram that reached the kernel socket (before the program was
    /// attached), if any.
    fn take_from_kernel(&self, slots: &mut RecvSlots) -> io::Result<usize> {
        let (buf, meta) = slots.slot_mut(0);
        match self.sock.recv(buf) {
            Ok(len) => {
                *meta = RecvMeta {
                    len,
                    ..RecvMeta::default()
                };
                self.via_kernel.set(self.via_kernel.get() + 1);
                Ok(1)
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
            Err(e) => Err(e),
        }
    }

    fn recv(&self, slots: &mut RecvSlots, wait: Wait) -> io::Result<usize> {
        let start = Instant::now();
        loop {
            if !self.kernel_drained.get() {
                if self.take_from_kernel(slots)? > 0 {
                    return Ok(1);
                }
                self.kernel_drained.set(true);
            }
            let n = self.take(slots);
            if n > 0 {
                return Ok(n);
            }
            let left = self.timeout.get().saturating_sub(start.elapsed());
            if wait == Wait::DontWait || left.is_zero() {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            self.wait_ready(Interest::Recv, left)?;
        }
    }

    /// What this endpoint used and counted, for the stream's report.
    fn engine_use(&self) -> EngineUse {
        let q = self.queue();
        let (o, c) = (q.options(), q.counters());
        let stats = q.stats().ok().map(|s| XdpStatistics {
            rx_dropped: s.rx_dropped,
            rx_invalid_descs: s.rx_invalid_descs,
            tx_invalid_descs: s.tx_invalid_descs,
            rx_ring_full: s.rx_ring_full,
            fill_ring_empty: s.fill_ring_empty,
            tx_ring_empty: s.tx_ring_empty,
        });
        EngineUse {
            engine: "xdp".into(),
            xdp: Some(XdpUse {
                iface: q.link().name.clone(),
                queue: q.queue_id(),
                mode: self.mode.to_string(),
                copy: o.copy.to_string(),
                need_wakeup: o.need_wakeup,
                umem_bytes: o.umem_bytes() as u64,
                frame_size: o.frame_size,
                fill_ring: o.fill_size,
                completion_ring: o.completion_size,
                rx_ring: o.rx_size,
                tx_ring: o.tx_size,
                tx_ring_full: c.tx_ring_full,
                tx_no_frame: c.tx_no_frame,
                fill_starved: c.fill_starved,
                rx_unparsed: c.rx_unparsed,
                rx_foreign: self.foreign.get(),
                rx_bad_checksum: c.rx_bad_checksum,
                via_kernel: self.via_kernel.get(),
                wakeups: c.wakeups,
                stats,
            }),
            ..EngineUse::default()
        }
    }
}

impl Drop for XdpEndpoint {
    fn drop(&mut self) {
        // Frames still in the TX ring leave only while the socket is open.
        let start = Instant::now();
        let q = &mut self.parts.get_mut().queue;
        while q.in_flight() > 0 && start.elapsed() < FLUSH {
            q.complete();
            std::thread::yield_now();
        }
        super::record_use(self.engine_use());
    }
}

impl Readiness for XdpEndpoint {
    fn wait_ready(&self, interest: Interest, timeout: Duration) -> io::Result<bool> {
        if interest == Interest::Send {
            // Room comes from completions, which `send` collects itself.
            std::thread::yield_now();
            return Ok(true);
        }
        let mut fds = [
            libc::pollfd {
                fd: self.queue().as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: self.sock.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let ms = timeout.as_millis().clamp(1, i32::MAX as u128) as libc::c_int;
        // SAFETY: two valid pollfds.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
        match rc {
            r if r < 0 => {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    Ok(false)
                } else {
                    Err(e)
                }
            }
            0 => Ok(false),
            _ => Ok(true),
        }
    }
}

impl UdpEndpoint for XdpEndpoint {
    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.flow.src)
    }

    fn peer_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.flow.dst)
    }

    fn send_control(&self, datagram: &[u8]) -> io::Result<()> {
        let start = Instant::now();
        loop {
            match self.send(&[datagram], Wait::Block) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && start.elapsed() < FLUSH => {}
                other => return other.map(drop),
            }
        }
    }

    fn enable_recv_meta(&self) {}

    fn set_recv_timeout(&self, poll: Duration) -> io::Result<()> {
        self.timeout.set(poll);
        Ok(())
    }

    fn busy_poll(&self) -> Result<String, EngineError> {
        Ok("spinning on the AF_XDP rings".into())
    }

    /// The AF_XDP socket's drops, and the kernel socket's (what arrived
    /// before the program redirected the flow and overflowed it).
    fn drops(&self) -> Option<u64> {
        let s = self.queue().stats().ok()?;
        let kernel = super::endpoint::socket_drops(&self.sock).unwrap_or(0);
        Some(s.rx_dropped + s.rx_ring_full + kernel)
    }

    fn recv_buffer(&self) -> Option<u64> {
        None
    }
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

    /// A receiver's parts are made now, before the test starts (their
    /// loading takes about half a second, during which the flow would
    /// reach only the kernel socket, which overflows); best effort: the
    /// endpoint makes them itself, and reports the failure, when none were
    /// prepared. The socket is connected (the client's before its
    /// greeting, the server's once the greeting came, before its Start):
    /// the route to the peer names the interface.
    fn udp_rx_attach(self, sock: &UdpSocket) {
        prepare(self, sock);
    }

    fn udp_tx_attach(self, sock: &UdpSocket) {
        prepare(self, sock);
    }

    fn udp_tx(self, ep: &XdpEndpoint, len: usize) -> Result<XdpTx, EngineError> {
        let frame = ep.queue().options().frame_size as usize;
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
        let frame = ep.queue().options().frame_size as usize;
        Ok(XdpRx {
            size: (len + 1).min(frame),
        })
    }

    fn tcp_tx(self, sock: &TcpStream) -> Result<SyscallTcp, EngineError> {
        Syscall.tcp_tx(sock)
    }

    fn tcp_rx(self, sock: &TcpStream, skip_copy: bool) -> Result<SyscallTcpRx, EngineError> {
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
