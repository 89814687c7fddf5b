//! One stream's side over AF_XDP: its flow on the interface's [`Port`]
//! (sending on its own queue's socket where the interface has one for
//! it), and the kernel socket the control plane attached (it holds
//! the port number; what reached it before the flow was redirected is
//! received from it first: `kernel.rs`).

use std::cell::Cell;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use linerate_proto::measure::{EngineUse, XdpStatistics, XdpUse};
use linerate_xdp::{path_to, UdpFlow};

use super::kernel::KernelSocket;
use super::options::{io_error, xdp_error, Xdp};
use super::port::{FlowQueues, Port, Slot, Sweeps};
use crate::engines::{Interest, Readiness, RecvMeta, RecvSlots, UdpEndpoint, Wait};
use crate::EngineError;

/// Datagrams per send or receive call (the AF_XDP rings' batches and the
/// kernel socket's, for datagrams on a queue without a socket).
pub(super) const BATCH: usize = 64;

/// How long the next hop's MAC may take to resolve.
const RESOLVE: Duration = Duration::from_secs(3);
/// How long a blocking send waits for a free frame before `WouldBlock`.
const SEND_WAIT: Duration = Duration::from_millis(10);
/// How long a closing endpoint waits for its frames to leave.
const FLUSH: Duration = Duration::from_secs(1);
/// The longest a reader sleeps in poll while another flow shares its
/// port, or the port has several queues: another flow's reader may move
/// this one's datagrams to its inbox, or they may arrive on another
/// queue, neither of which wakes its poll.
const SHARED_POLL: Duration = Duration::from_millis(1);

/// The socket's local and peer addresses.
fn flow_addrs(sock: &UdpSocket) -> Result<(SocketAddr, SocketAddr), EngineError> {
    let local = sock
        .local_addr()
        .map_err(|e| EngineError::io("udp local address", e))?;
    let peer = sock
        .peer_addr()
        .map_err(|e| EngineError::io("udp peer address", e))?;
    Ok((local, peer))
}

/// The port of the interface the route to `peer` leaves by (attached now
/// where none is live), and the flow's frame addresses.
fn port_for(
    opts: Xdp,
    local: SocketAddr,
    peer: SocketAddr,
) -> Result<(Arc<Port>, UdpFlow), EngineError> {
    let path = path_to(peer.ip(), RESOLVE).map_err(|e| xdp_error(e, opts))?;
    let flow = UdpFlow {
        src_mac: path.src_mac,
        dst_mac: path.dst_mac,
        src: local,
        dst: peer,
    };
    Ok((Port::get(opts, &path)?, flow))
}

/// Attaches a connected socket's port now, before its test starts, and
/// keeps it for the endpoint (best effort: the endpoint attaches what was
/// not prepared, and reports the failure).
pub(super) fn prepare(opts: Xdp, sock: &UdpSocket) {
    let Ok((local, peer)) = flow_addrs(sock) else {
        return;
    };
    if let Ok((port, _)) = port_for(opts, local, peer) {
        Port::keep_prepared(opts, sock, local, peer, port);
    }
}

/// Redirects a prepared flow to its port now (best effort: the endpoint
/// does it where this did not).
pub(super) fn redirect(opts: Xdp, sock: &UdpSocket) {
    if let Ok((local, peer)) = flow_addrs(sock) {
        Port::redirect_prepared(opts, local, peer);
    }
}

/// One stream's AF_XDP side (module docs).
pub struct XdpEndpoint {
    port: Arc<Port>,
    /// The queue it sends on, and where its datagrams arrive.
    queues: FlowQueues,
    pub(super) flow: UdpFlow,
    kernel: KernelSocket,
    /// When its reader last looked at the port's other queues.
    sweeps: Sweeps,
    timeout: Cell<Duration>,
    /// How its receives wait, once set: `spin` ([`UdpEndpoint::busy_poll`])
    /// or `poll` ([`UdpEndpoint::set_recv_timeout`]), for the report.
    wait: Cell<Option<&'static str>>,
    foreign: Cell<u64>,
    /// This flow's send calls that found the TX ring full, or no free
    /// frame (the queue counts the socket's).
    tx_ring_full: Cell<u64>,
    tx_no_frame: Cell<u64>,
    /// This flow's drops took a socket's own ([`Port::drops`]).
    drops_claimed: Cell<bool>,
}

impl std::fmt::Debug for XdpEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpEndpoint")
            .field("flow", &self.flow)
            .field("mode", &self.port.mode)
            .finish_non_exhaustive()
    }
}

impl XdpEndpoint {
    pub(super) fn new(opts: Xdp, sock: UdpSocket) -> Result<XdpEndpoint, EngineError> {
        let (local, peer) = flow_addrs(&sock)?;
        let (port, flow) = match Port::take_prepared(opts, local, peer) {
            // The path again (a netlink read): the port was all that took long.
            Some(port) => (port, port_for(opts, local, peer)?.1),
            None => port_for(opts, local, peer)?,
        };
        // Not before the greeting: its echo belongs to the kernel socket.
        // (Where it was prepared for a receiver, the flow is redirected
        // already; adding it again keeps its inbox.)
        let queues = port.add_flow(local, peer)?;
        sock.set_nonblocking(true)
            .map_err(|e| EngineError::io("udp set_nonblocking", e))?;
        Ok(XdpEndpoint {
            port,
            queues,
            flow,
            kernel: KernelSocket::new(sock, BATCH),
            sweeps: Sweeps::default(),
            timeout: Cell::new(Duration::from_millis(100)),
            wait: Cell::new(None),
            foreign: Cell::new(0),
            tx_ring_full: Cell::new(0),
            tx_no_frame: Cell::new(0),
            drops_claimed: Cell::new(false),
        })
    }

    /// The socket of the queue this flow sends on.
    fn home(&self) -> &Slot {
        self.port.slot(self.queues.home)
    }

    /// The AF_XDP socket's frame size.
    pub(super) fn frame_size(&self) -> usize {
        self.port.queue_opts.frame_size as usize
    }

    /// Sends `payloads` as frames; how many went, from the first on.
    pub(super) fn send(&self, payloads: &[&[u8]], wait: Wait) -> io::Result<usize> {
        let start = Instant::now();
        loop {
            let n = self.send_once(payloads)?;
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

    /// One send on its queue's socket (maybe shared); what its ring
    /// counted on this call (TX ring full, no free frame) is this flow's.
    fn send_once(&self, payloads: &[&[u8]]) -> io::Result<usize> {
        let mut q = self.home().queue();
        let before = q.counters();
        let n = q.send(&self.flow, payloads).map_err(io_error)?;
        let after = q.counters();
        let add = |c: &Cell<u64>, by: u64| c.set(c.get() + by);
        add(&self.tx_ring_full, after.tx_ring_full - before.tx_ring_full);
        add(&self.tx_no_frame, after.tx_no_frame - before.tx_no_frame);
        Ok(n)
    }

    /// Moves this flow's received datagrams into the slots.
    fn take(&self, slots: &mut RecvSlots) -> usize {
        let mut filled = 0;
        let (_, foreign) = self.port.recv(
            (self.flow.src.port(), self.flow.dst),
            (&self.queues.learned, &self.sweeps),
            slots.count(),
            |payload| {
                let (buf, meta) = slots.slot_mut(filled);
                let len = payload.len().min(buf.len());
                buf[..len].copy_from_slice(&payload[..len]);
                *meta = RecvMeta {
                    len,
                    truncated: payload.len() > buf.len(),
                    ..RecvMeta::default()
                };
                filled += 1;
            },
        );
        self.foreign.set(self.foreign.get() + foreign);
        filled
    }

    pub(super) fn recv(&self, slots: &mut RecvSlots, wait: Wait) -> io::Result<usize> {
        let start = Instant::now();
        loop {
            // What reached the kernel socket (before the flow was
            // redirected, or on a queue without an AF_XDP socket) first.
            let n = self.kernel.take(slots)?;
            if n > 0 {
                return Ok(n);
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

    /// What this endpoint used and counted, for the stream's report (this
    /// flow's own counts, and its queue's socket's: [`XdpUse`]).
    fn engine_use(&self) -> EngineUse {
        let home = self.home();
        let q = home.queue();
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
                queues: self.port.open_queues(),
                iface_queues: self.port.queue_count(),
                mode: self.port.mode.to_string(),
                copy: o.copy.to_string(),
                need_wakeup: o.need_wakeup,
                wait: self.wait.get().map(str::to_string),
                umem_bytes: o.umem_bytes() as u64,
                frame_size: o.frame_size,
                fill_ring: o.fill_size,
                completion_ring: o.completion_size,
                rx_ring: o.rx_size,
                tx_ring: o.tx_size,
                flows: home.peak_flows(),
                tx_ring_full: self.tx_ring_full.get(),
                tx_no_frame: self.tx_no_frame.get(),
                fill_starved: c.fill_starved,
                rx_unparsed: c.rx_unparsed,
                rx_foreign: self.foreign.get(),
                rx_bad_checksum: c.rx_bad_checksum,
                rx_unfinished_checksum: c.rx_unfinished_checksum,
                via_kernel: self.kernel.received(),
                wakeups: c.wakeups,
                stats,
                socket_drops_claimed: self.drops_claimed.get(),
            }),
            notes: self.port.notes(),
            ..EngineUse::default()
        }
    }
}

impl Drop for XdpEndpoint {
    fn drop(&mut self) {
        self.port.remove_flow(self.flow.src);
        // Frames still in the TX ring leave only while the socket is open
        // (the queue's other flows' frames are waited for too: bounded).
        let start = Instant::now();
        loop {
            let mut q = self.home().queue();
            if q.in_flight() == 0 || start.elapsed() >= FLUSH {
                break;
            }
            q.complete();
            drop(q);
            std::thread::yield_now();
        }
        crate::engines::record_use(self.engine_use());
    }
}

impl Readiness for XdpEndpoint {
    fn wait_ready(&self, interest: Interest, timeout: Duration) -> io::Result<bool> {
        if interest == Interest::Send {
            // Room comes from completions, which `send` collects itself.
            std::thread::yield_now();
            return Ok(true);
        }
        if self.port.has_queued(self.flow.src.port()) {
            return Ok(true);
        }
        let timeout = if self.port.short_poll() {
            timeout.min(SHARED_POLL)
        } else {
            timeout
        };
        let learned = self.queues.learned.load(Ordering::Relaxed);
        self.kernel.wait(self.port.slot(learned).fd(), timeout)
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

    /// A sender's beats ([`linerate_proto::data_beat`]) come on its
    /// redirected flow, as a receiver's data does: from the kernel socket
    /// while it holds any (sent before the redirect), then from the flow's
    /// inbox or the RX ring. A sender's flow has no data to take for it.
    fn recv_control(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        match self.kernel.sock.recv(buf) {
            Ok(n) => return Ok(Some(n)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
        let mut got = None;
        let (_, foreign) = self.port.recv(
            (self.flow.src.port(), self.flow.dst),
            (&self.queues.learned, &self.sweeps),
            1,
            |payload| {
                let n = payload.len().min(buf.len());
                buf[..n].copy_from_slice(&payload[..n]);
                got = Some(n);
            },
        );
        self.foreign.set(self.foreign.get() + foreign);
        Ok(got)
    }

    fn enable_recv_meta(&self) {}

    /// The longest sleep in `poll(2)`; the flow waits there unless it
    /// spins (a stream receiver set to spin first keeps `spin`: the
    /// timeout only bounds the sleep once its spin budget is spent).
    fn set_recv_timeout(&self, poll: Duration) -> io::Result<()> {
        self.timeout.set(poll);
        if self.wait.get() != Some("spin") {
            self.wait.set(Some("poll"));
        }
        Ok(())
    }

    fn busy_poll(&self) -> Result<String, EngineError> {
        self.wait.set(Some("spin"));
        Ok("spinning on the AF_XDP rings".into())
    }

    /// The kernel socket's drops (what arrived before the flow was
    /// redirected and overflowed it), and the port's for this flow
    /// (`Port::drops`).
    fn drops(&self) -> Option<u64> {
        let kernel = crate::engines::endpoint::socket_drops(&self.kernel.sock).unwrap_or(0);
        let (port, claimed) = self.port.drops(self.flow.src.port());
        self.drops_claimed.set(self.drops_claimed.get() || claimed);
        Some(kernel + port)
    }

    fn recv_buffer(&self) -> Option<u64> {
        None
    }
}
