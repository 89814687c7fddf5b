//! One interface's AF_XDP side in this process: the XDP program attached
//! to it and an AF_XDP socket per queue in use, shared by every flow of
//! this process that leaves by it (`-P N`, `--bidir`, a server's
//! concurrent tests). An interface takes one XDP program, which redirects
//! each flow's local address and port (a key of its filter map) to the
//! socket of the queue the datagram arrived on (XSKMAP by
//! `rx_queue_index`); a queue with no socket passes it to the kernel,
//! where the flow's kernel socket receives it (`via_kernel`).
//!
//! Each flow gets a queue of its own to send on while the interface has
//! one left (`ethtool -l`; the socket is opened when the flow comes),
//! else shares the least used one. A queue whose socket cannot be opened
//! (another program holds it, the driver refuses it) is tried once (a try
//! can take a second: a busy queue is retried) and skipped from then on,
//! the flow taking the next queue; the report's notes say why, and what
//! the kernel steers to that queue reaches the flows' kernel sockets
//! (`via_kernel`). Each socket has its own UMEM: the
//! simpler correct choice, as no frame ever moves between queues (a
//! shared UMEM, `XDP_SHARED_UMEM`, would need one fill and completion
//! ring pair per queue anyway, and frame ownership across sockets).
//! Sockets are locked one by one, so flows on different queues send and
//! receive in parallel.
//!
//! Where a flow's datagrams arrive is the sender's or the NIC's choice
//! (over veth with native XDP: the queue the peer sent on; generic XDP:
//! queue 0). A reader reads the queue its flow's datagrams were last seen
//! on, and, when that one is empty, the others, at most every
//! [`SWEEP_EVERY`] (a spinning reader would otherwise take every other
//! queue's lock on each pass, against the flows reading and sending
//! there); a datagram of another flow it takes off a ring goes to that
//! flow's inbox, and tells it which queue to read. Inboxes
//! are filled and read only under the lock of the queue read, after the
//! reader's own inbox is found empty, so no flow sees the datagrams of
//! one queue out of order.
//!
//! Ports live while a flow (or a preparation) holds them: the last one
//! gone detaches the program and closes the socket. A preparation lives
//! as long as the kernel socket it was made for (an rr test prepares
//! every phase's socket at once, so the port stays attached from the
//! first phase to the last): a reaper thread, running while any
//! preparation is kept, drops those whose socket is closed (a test that
//! ended before its phases or streams ran, a peer killed mid-test).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::time::{Duration, Instant};

use linerate_xdp::{
    AttachMode, Datagram, Path, Program, ProgramOptions, Queue, QueueOptions, XdpStats,
};

use super::options::{xdp_error, Xdp};
use crate::EngineError;

/// Datagrams an inbox holds for a flow whose reader lags; past this they
/// are dropped and counted in that flow's drops.
const INBOX_MAX: usize = 8192;
/// How often the reaper looks for preparations whose socket is closed.
const REAP_EVERY: Duration = Duration::from_millis(250);
/// How often a reader whose queue is empty looks at the port's other
/// queues (module docs). Another flow's reader that takes this flow's
/// datagrams off its ring tells it at once (the inbox, `learned`); a
/// sweep finds those on a queue nobody reads, the first time within
/// this, and from then on the reader reads that queue first.
pub(super) const SWEEP_EVERY: Duration = Duration::from_micros(200);

/// (network namespace inode, interface index): an interface, process-wide.
type PortKey = (u64, u32);

/// A flow on a port: where it sends, where its datagrams were last seen
/// arriving, and its datagrams read off a ring by another flow's reader.
#[derive(Default)]
struct Flow {
    peer: Option<SocketAddr>,
    /// The queue it sends on, and first reads.
    home: u32,
    /// The queue its datagrams were last seen arriving on (read first).
    learned: Arc<AtomicU32>,
    queued: VecDeque<Vec<u8>>,
    /// Buffers given back by the owner, reused for the next copies.
    spare: Vec<Vec<u8>>,
    dropped: u64,
    /// Each open socket's statistics when the flow joined (index: queue
    /// id; a socket opened later, or a queue without one, from zero).
    base: Vec<XdpStats>,
}

/// A flow's hold on its port's queues (what [`Port::add_flow`] gives).
#[derive(Debug, Clone)]
pub(super) struct FlowQueues {
    /// The queue the flow sends on.
    pub(super) home: u32,
    /// Where its datagrams were last seen arriving (read first).
    pub(super) learned: Arc<AtomicU32>,
}

/// When a reader last looked at its port's other queues ([`SWEEP_EVERY`]).
#[derive(Debug, Default)]
pub(super) struct Sweeps {
    last: std::cell::Cell<Option<Instant>>,
}

impl Sweeps {
    /// Whether a reader whose queue is empty looks at the others now
    /// (at `now`): the first time, then at most every [`SWEEP_EVERY`].
    fn due(&self, now: Instant) -> bool {
        match self.last.get() {
            Some(t) if now.saturating_duration_since(t) < SWEEP_EVERY => false,
            _ => {
                self.last.set(Some(now));
                true
            }
        }
    }
}

/// One AF_XDP socket of a port, bound to queue `id` of its interface.
pub(super) struct Slot {
    pub(super) id: u32,
    queue: Mutex<Queue>,
    fd: i32,
    /// The socket's statistics went into one receiving flow's drops.
    drops_claimed: AtomicBool,
    /// The most flows that sent on it at once.
    peak_flows: AtomicU32,
}

impl Slot {
    pub(super) fn queue(&self) -> MutexGuard<'_, Queue> {
        lock(&self.queue)
    }

    pub(super) fn fd(&self) -> i32 {
        self.fd
    }

    pub(super) fn peak_flows(&self) -> u32 {
        self.peak_flows.load(Ordering::Relaxed)
    }
}

/// The program and sockets of one interface (module docs).
pub(super) struct Port {
    key: PortKey,
    pub(super) opts: Xdp,
    pub(super) mode: AttachMode,
    pub(super) queue_opts: QueueOptions,
    // Dropped in this order: the program first (nothing more redirected),
    // then the AF_XDP sockets.
    program: Mutex<Program>,
    /// One per queue the interface has (index: queue id), opened in
    /// order as flows need them.
    slots: Vec<OnceLock<Slot>>,
    /// The queues whose socket could not be opened, and why (each tried
    /// once; written under `adding`).
    refused: Mutex<BTreeMap<u32, String>>,
    /// By the flow's local UDP port.
    flows: Mutex<HashMap<u16, Flow>>,
    /// Held while a flow is added (its queue chosen, a socket opened).
    adding: Mutex<()>,
}

/// The live ports, by interface.
static PORTS: Mutex<Vec<Weak<Port>>> = Mutex::new(Vec::new());

/// A port prepared for a flow before its test started, until the flow's
/// endpoint takes it (`Engine::udp_rx_attach`) or its socket closes.
struct Prepared {
    opts: Xdp,
    local: SocketAddr,
    peer: SocketAddr,
    sock: SockId,
    /// `None` once taken.
    port: Option<Arc<Port>>,
    /// Whether the flow was redirected: undone if nobody takes it.
    redirected: bool,
}

impl Drop for Prepared {
    fn drop(&mut self) {
        if let Some(port) = self.port.take().filter(|_| self.redirected) {
            port.remove_flow(self.local);
        }
    }
}

static PREPARED: Mutex<Vec<Prepared>> = Mutex::new(Vec::new());
/// Whether the reaper thread runs (it stops once no preparation is left).
static REAPING: AtomicBool = AtomicBool::new(false);

/// A kernel socket's descriptor and inode: a descriptor closed, or reused
/// by another socket (another inode), no longer names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SockId {
    fd: RawFd,
    ino: u64,
}

impl SockId {
    fn of(sock: &UdpSocket) -> Option<SockId> {
        let fd = sock.as_raw_fd();
        Some(SockId {
            fd,
            ino: inode(fd)?,
        })
    }

    fn open(self) -> bool {
        inode(self.fd) == Some(self.ino)
    }
}

/// The inode of descriptor `fd`, if it is open.
fn inode(fd: RawFd) -> Option<u64> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::zeroed();
    // SAFETY: fstat writes at most one `stat` into the buffer; a closed
    // descriptor is answered with EBADF, nothing written.
    let rc = unsafe { libc::fstat(fd, st.as_mut_ptr()) };
    // SAFETY: fstat succeeded, so it filled the buffer (zeroed before).
    (rc == 0).then(|| unsafe { st.assume_init() }.st_ino)
}

/// Drops, every [`REAP_EVERY`], the preparations whose socket is closed
/// (their ports detach with the last holder); runs while any is kept.
/// Called after a preparation was added.
fn reap_closed() {
    if REAPING.swap(true, Ordering::AcqRel) {
        return;
    }
    let reaper = std::thread::Builder::new()
        .name("xdp-prepared".into())
        .spawn(|| loop {
            std::thread::sleep(REAP_EVERY);
            let mut prepared = lock(&PREPARED);
            prepared.retain(|p| p.sock.open());
            if prepared.is_empty() {
                // Under the lock: a preparation added after this starts
                // another reaper.
                REAPING.store(false, Ordering::Release);
                return;
            }
        });
    if reaper.is_err() {
        // Without a reaper, closed sockets' preparations go when the next
        // one is kept (`Port::keep_prepared`).
        REAPING.store(false, Ordering::Release);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// This thread's network namespace (0 where it cannot be read).
fn netns() -> u64 {
    std::fs::metadata("/proc/thread-self/ns/net").map_or(0, |m| m.ino())
}

impl Port {
    /// The port of `path`'s interface: the live one, or a new one attached
    /// now (about half a second). Refused where a live one runs with other
    /// options.
    pub(super) fn get(opts: Xdp, path: &Path) -> Result<Arc<Port>, EngineError> {
        let opts = opts.for_port();
        let key = (netns(), path.link.ifindex);
        let mut ports = lock(&PORTS);
        ports.retain(|w| w.strong_count() > 0);
        if let Some(p) = ports
            .iter()
            .filter_map(Weak::upgrade)
            .find(|p| p.key == key)
        {
            if p.opts != opts {
                return Err(EngineError::Xdp(format!(
                    "{} is in use by another test of this process as `{}`; one interface \
                     takes one XDP program, so its tests share the options",
                    path.link.name,
                    crate::engines::EngineKind::Xdp(p.opts)
                )));
            }
            return Ok(p);
        }
        let fail = |e| xdp_error(e, opts);
        let iface = &path.link.name;
        let (mode, copy) = opts.modes(iface);
        let mut program = Program::attach(
            iface,
            &ProgramOptions {
                mode,
                replace: false,
            },
        )
        .map_err(fail)?;
        let queue_opts = QueueOptions {
            copy,
            ..QueueOptions::default()
        };
        // Queue 0 now (the slow part, before the test); the others as
        // flows come. A driver that does not answer `ethtool -l` gets
        // queue 0 only: the one every interface has.
        let queues = linerate_xdp::queue_count(iface).unwrap_or(1);
        let first = open_slot(iface, 0, &queue_opts, &mut program).map_err(fail)?;
        let slots: Vec<OnceLock<Slot>> = (0..queues).map(|_| OnceLock::new()).collect();
        let _ = slots[0].set(first);
        let port = Arc::new(Port {
            key,
            opts,
            mode,
            queue_opts,
            program: Mutex::new(program),
            slots,
            refused: Mutex::new(BTreeMap::new()),
            flows: Mutex::new(HashMap::new()),
            adding: Mutex::new(()),
        });
        ports.push(Arc::downgrade(&port));
        Ok(port)
    }

    /// Keeps `port` for the flow (local, peer) of `sock` until its
    /// endpoint takes it or `sock` is closed; drops the preparations whose
    /// socket is closed.
    pub(super) fn keep_prepared(
        opts: Xdp,
        sock: &UdpSocket,
        local: SocketAddr,
        peer: SocketAddr,
        port: Arc<Port>,
    ) {
        let Some(id) = SockId::of(sock) else {
            return;
        };
        {
            let mut prepared = lock(&PREPARED);
            prepared.retain(|p| p.sock.open());
            if prepared
                .iter()
                .any(|p| (p.opts, p.local, p.peer) == (opts, local, peer))
            {
                return;
            }
            prepared.push(Prepared {
                opts,
                local,
                peer,
                sock: id,
                port: Some(port),
                redirected: false,
            });
        }
        reap_closed();
    }

    /// Redirects the prepared flow (local, peer) to its port now.
    pub(super) fn redirect_prepared(opts: Xdp, local: SocketAddr, peer: SocketAddr) {
        let mut prepared = lock(&PREPARED);
        let Some(p) = prepared
            .iter_mut()
            .find(|p| (p.opts, p.local, p.peer) == (opts, local, peer))
        else {
            return;
        };
        if let Some(port) = &p.port {
            // Marked first: a failure half way is undone with the rest.
            p.redirected = true;
            let _ = port.add_flow(local, peer);
        }
    }

    /// The port prepared for this flow and options, if any.
    pub(super) fn take_prepared(
        opts: Xdp,
        local: SocketAddr,
        peer: SocketAddr,
    ) -> Option<Arc<Port>> {
        let mut prepared = lock(&PREPARED);
        let i = prepared
            .iter()
            .position(|p| (p.opts, p.local, p.peer) == (opts, local, peer))?;
        prepared.swap_remove(i).port.take()
    }

    /// The interface's queues (what `ethtool -l` said; 1 where it could
    /// not be read).
    pub(super) fn queue_count(&self) -> u32 {
        u32::try_from(self.slots.len()).unwrap_or(u32::MAX)
    }

    /// The sockets open now, by queue (a refused queue leaves a gap).
    fn open_slots(&self) -> impl Iterator<Item = &Slot> {
        self.slots.iter().filter_map(OnceLock::get)
    }

    /// The queues with a socket now.
    pub(super) fn open_queues(&self) -> Vec<u32> {
        self.open_slots().map(|s| s.id).collect()
    }

    /// The socket on queue `id` (one the flow was given: open).
    pub(super) fn slot(&self, id: u32) -> &Slot {
        self.slots[id as usize]
            .get()
            .unwrap_or_else(|| unreachable!("a flow's queue has a socket"))
    }

    /// The queue a new flow sends on (called under `adding`): a queue of
    /// its own while the interface has one left (its socket opened now),
    /// else the open one fewest flows use (lowest first), shared. A queue
    /// whose socket cannot be opened is skipped, now and from then on
    /// (each try can take a second: a busy queue is retried), with the
    /// reason kept for the report ([`Port::notes`]), and the next one is
    /// tried.
    fn pick_home(&self) -> u32 {
        let mut counts: BTreeMap<u32, u32> = self.open_slots().map(|s| (s.id, 0)).collect();
        for f in lock(&self.flows).values() {
            *counts.entry(f.home).or_default() += 1;
        }
        if counts.values().all(|&c| c > 0) {
            let iface = self.program_link_name();
            let mut refused = lock(&self.refused);
            while let Some(id) = next_untried(self.queue_count(), &counts, &refused) {
                match open_slot(&iface, id, &self.queue_opts, &mut lock(&self.program)) {
                    Ok(slot) => {
                        let _ = self.slots[id as usize].set(slot);
                        return id;
                    }
                    Err(e) => {
                        let why = format!(
                            "xdp: no AF_XDP socket on {iface} queue {id} ({}), so flows use the \
                             other queues' sockets (what arrives on queue {id} reaches the flows' \
                             kernel sockets)",
                            xdp_error(e, self.opts)
                        );
                        refused.insert(id, why);
                    }
                }
            }
        }
        least_used(&counts)
    }

    /// What the report should know about the port: why some of the
    /// interface's queues have no socket.
    pub(super) fn notes(&self) -> Vec<String> {
        lock(&self.refused).values().cloned().collect()
    }

    fn program_link_name(&self) -> String {
        lock(&self.program).link().name.clone()
    }

    /// Redirects the flow (local, peer) to this port (from now on, or
    /// still: a flow added already keeps its queue and inbox), and gives
    /// it a queue to send on (module docs).
    pub(super) fn add_flow(
        &self,
        local: SocketAddr,
        peer: SocketAddr,
    ) -> Result<FlowQueues, EngineError> {
        let _adding = lock(&self.adding);
        let known = lock(&self.flows).get_mut(&local.port()).map(|f| {
            f.peer = Some(peer);
            FlowQueues {
                home: f.home,
                learned: Arc::clone(&f.learned),
            }
        });
        let held = match known {
            Some(held) => held,
            None => {
                let home = self.pick_home();
                // Read with no flow lock held: a reader takes its queue's
                // lock, then the flows'.
                let mut base = vec![XdpStats::default(); self.slots.len()];
                for s in self.open_slots() {
                    base[s.id as usize] = s.queue().stats().unwrap_or_default();
                }
                let learned = Arc::new(AtomicU32::new(home));
                let mut flows = lock(&self.flows);
                flows.insert(
                    local.port(),
                    Flow {
                        peer: Some(peer),
                        home,
                        learned: Arc::clone(&learned),
                        base,
                        ..Flow::default()
                    },
                );
                let on_home = flows.values().filter(|f| f.home == home).count();
                self.slot(home).peak_flows.fetch_max(
                    u32::try_from(on_home).unwrap_or(u32::MAX),
                    Ordering::Relaxed,
                );
                FlowQueues { home, learned }
            }
        };
        lock(&self.program)
            .allow(local)
            .map_err(|e| xdp_error(e, self.opts))?;
        Ok(held)
    }

    /// Stops redirecting the flow with this local address.
    pub(super) fn remove_flow(&self, local: SocketAddr) {
        let _ = lock(&self.program).disallow(local);
        lock(&self.flows).remove(&local.port());
    }

    /// Whether a reader should not sleep long in poll on its one queue:
    /// another flow's reader may move this flow's datagrams to its inbox,
    /// or they may arrive on another queue, neither of which wakes it.
    pub(super) fn short_poll(&self) -> bool {
        lock(&self.flows).len() > 1 || self.open_slots().nth(1).is_some()
    }

    /// Whether the flow with this local port has datagrams in its inbox.
    pub(super) fn has_queued(&self, local: u16) -> bool {
        lock(&self.flows)
            .get(&local)
            .is_some_and(|b| !b.queued.is_empty())
    }

    /// The flow's drops past the kernel socket: its inbox's, and, for the
    /// first flow that asks of each socket, that socket's since the flow
    /// joined (module docs); and whether this flow took any socket's.
    pub(super) fn drops(&self, local: u16) -> (u64, bool) {
        // Each socket's statistics first, no flow lock held (lock order).
        let stats: Vec<(&Slot, Option<XdpStats>)> = self
            .open_slots()
            .map(|s| (s, s.queue().stats().ok()))
            .collect();
        let flows = lock(&self.flows);
        let Some(flow) = flows.get(&local) else {
            return (0, false);
        };
        let (mut own, mut claimed) = (0, false);
        for (slot, s) in stats {
            let Some(s) = s else { continue };
            if slot.drops_claimed.swap(true, Ordering::AcqRel) {
                continue;
            }
            claimed = true;
            let b = flow.base.get(slot.id as usize).copied().unwrap_or_default();
            own += (s.rx_dropped + s.rx_ring_full).saturating_sub(b.rx_dropped + b.rx_ring_full);
        }
        (flow.dropped + own, claimed)
    }

    /// Up to `max` of the flow (`local` port, from `peer`)'s datagrams, in
    /// arrival order per queue, to `each`: from its inbox, else off the RX
    /// ring of the queue they were last seen on, else, when `sweeps` says
    /// it is time, off the others', leaving other flows' in their inboxes.
    /// Returns (delivered, foreign): how many went to `each`, and how many
    /// belonged to no flow.
    pub(super) fn recv(
        &self,
        (local, peer): (u16, SocketAddr),
        (learned, sweeps): (&AtomicU32, &Sweeps),
        max: usize,
        mut each: impl FnMut(&[u8]),
    ) -> (usize, u64) {
        let first = learned.load(Ordering::Relaxed);
        let (n, mut foreign) = self.recv_on(self.slot(first), local, peer, max, &mut each);
        if n > 0 || self.open_slots().nth(1).is_none() || !sweeps.due(Instant::now()) {
            return (n, foreign);
        }
        for slot in self.open_slots().filter(|s| s.id != first) {
            let (n, f) = self.recv_on(slot, local, peer, max, &mut each);
            foreign += f;
            if n > 0 {
                learned.store(slot.id, Ordering::Relaxed);
                return (n, foreign);
            }
        }
        (0, foreign)
    }

    /// [`Port::recv`] on one queue. Under that queue's lock, the flow's
    /// inbox is read first: what another reader took off this ring for it
    /// is older than what the ring still holds.
    fn recv_on(
        &self,
        slot: &Slot,
        local: u16,
        peer: SocketAddr,
        max: usize,
        each: &mut dyn FnMut(&[u8]),
    ) -> (usize, u64) {
        let mut queue = slot.queue();
        if let Some(own) = lock(&self.flows).get_mut(&local) {
            let mut n = 0;
            while n < max {
                let Some(d) = own.queued.pop_front() else {
                    break;
                };
                each(&d);
                own.spare.push(d);
                n += 1;
            }
            if n > 0 {
                return (n, 0);
            }
        }
        let (mut n, mut foreign) = (0, 0);
        let mut flows = None;
        let max = u32::try_from(max).unwrap_or(u32::MAX);
        queue.recv(max, |d: Datagram<'_>| {
            let port = d.dst.port();
            if port == local && d.src == peer {
                each(d.payload);
                n += 1;
                return;
            }
            let flows = flows.get_or_insert_with(|| lock(&self.flows));
            match flows.get_mut(&port) {
                Some(b) if b.peer == Some(d.src) => {
                    b.keep(d.payload);
                    b.learned.store(slot.id, Ordering::Relaxed);
                }
                _ => foreign += 1,
            }
        });
        (n, foreign)
    }
}

/// Opens the AF_XDP socket on queue `id` of `iface` and has the program
/// redirect what arrives on that queue to it.
fn open_slot(
    iface: &str,
    id: u32,
    opts: &QueueOptions,
    program: &mut Program,
) -> Result<Slot, linerate_xdp::XdpError> {
    let queue = Queue::open(iface, id, opts)?;
    program.register(&queue)?;
    Ok(Slot {
        id,
        fd: queue.as_raw_fd(),
        queue: Mutex::new(queue),
        drops_claimed: AtomicBool::new(false),
        peak_flows: AtomicU32::new(0),
    })
}

/// The lowest of the interface's `queues` that has no socket (`open`:
/// the open ones, by id) and was not refused: the next one a new flow
/// opens, when every open one sends for a flow already.
fn next_untried<T, U>(
    queues: u32,
    open: &BTreeMap<u32, T>,
    refused: &BTreeMap<u32, U>,
) -> Option<u32> {
    (0..queues).find(|id| !open.contains_key(id) && !refused.contains_key(id))
}

/// The open queue fewest flows send on (`counts`: flows by queue id; the
/// lowest id of those), to share.
fn least_used(counts: &BTreeMap<u32, u32>) -> u32 {
    counts
        .iter()
        .min_by_key(|&(&id, &n)| (n, id))
        .map_or(0, |(&id, _)| id)
}

impl Flow {
    fn keep(&mut self, payload: &[u8]) {
        if self.queued.len() >= INBOX_MAX {
            self.dropped += 1;
            return;
        }
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(payload);
        self.queued.push_back(buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A preparation lives as long as its kernel socket: once the socket
    /// is closed (its descriptor free, or reused by another socket), the
    /// reaper drops it and its hold on the port.
    #[test]
    fn issue_25_a_preparation_knows_when_its_socket_is_closed() {
        let sock = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let id = SockId::of(&sock).expect("an open socket's id");
        assert!(id.open());
        drop(sock);
        assert!(!id.open());
    }

    fn counts(c: &[(u32, u32)]) -> BTreeMap<u32, u32> {
        c.iter().copied().collect()
    }

    /// A new flow opens the lowest queue with no socket that was not
    /// refused; with none left it shares the least used open one.
    #[test]
    fn issue_25_a_flow_shares_the_least_used_queue_when_no_other_can_open() {
        let none = BTreeMap::<u32, String>::new();
        // One open queue with a flow, of two: open the second.
        assert_eq!(next_untried(2, &counts(&[(0, 1)]), &none), Some(1));
        // Every queue open: share the least used (lowest first).
        assert_eq!(next_untried(2, &counts(&[(0, 1), (1, 1)]), &none), None);
        assert_eq!(least_used(&counts(&[(0, 2), (1, 1)])), 1);
        assert_eq!(least_used(&counts(&[(0, 1), (1, 1)])), 0);
        assert_eq!(least_used(&counts(&[(0, 1), (1, 0)])), 1);
        assert_eq!(least_used(&BTreeMap::new()), 0);
    }

    /// A queue whose socket could not be opened is skipped, not the end
    /// of the interface's queues: the next flow opens the one after it,
    /// and once none is left flows share the open ones, gap and all.
    #[test]
    fn issue_28_queues_past_a_refused_one_are_still_opened() {
        let refused: BTreeMap<u32, &str> = [(1, "busy")].into_iter().collect();
        assert_eq!(next_untried(4, &counts(&[(0, 1)]), &refused), Some(2));
        assert_eq!(
            next_untried(4, &counts(&[(0, 1), (2, 1)]), &refused),
            Some(3)
        );
        let all = counts(&[(0, 1), (2, 1), (3, 1)]);
        assert_eq!(next_untried(4, &all, &refused), None);
        assert_eq!(least_used(&counts(&[(0, 2), (2, 1), (3, 2)])), 2);
    }

    /// An idle reader looks at the other queues the first time, then at
    /// most every SWEEP_EVERY, not on every pass (each look takes every
    /// other queue's lock).
    #[test]
    fn issue_25_an_idle_reader_sweeps_the_other_queues_only_now_and_then() {
        let sweeps = Sweeps::default();
        let t0 = Instant::now();
        assert!(sweeps.due(t0), "the first pass sweeps");
        assert!(!sweeps.due(t0), "the next pass does not");
        assert!(!sweeps.due(t0 + SWEEP_EVERY / 2));
        assert!(sweeps.due(t0 + SWEEP_EVERY), "after SWEEP_EVERY it does");
        assert!(!sweeps.due(t0 + SWEEP_EVERY + SWEEP_EVERY / 2));
    }

    #[test]
    fn issue_25_an_inbox_keeps_arrival_order_and_counts_what_overflows() {
        let mut inbox = Flow::default();
        for i in 0..INBOX_MAX + 3 {
            inbox.keep(&(i as u64).to_be_bytes());
        }
        assert_eq!(inbox.queued.len(), INBOX_MAX);
        assert_eq!(inbox.dropped, 3);
        let first = inbox.queued.pop_front().unwrap_or_default();
        assert_eq!(first, 0u64.to_be_bytes());
        assert_eq!(inbox.queued[0], 1u64.to_be_bytes());
        // A buffer given back is reused for the next copy.
        inbox.spare.push(first);
        inbox.queued.clear();
        inbox.keep(b"x");
        assert!(inbox.spare.is_empty());
        assert_eq!(inbox.queued[0], b"x");
    }
}
