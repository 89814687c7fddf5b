//! One interface's AF_XDP side in this process: the XDP program attached
//! to it and one AF_XDP socket on its queue 0, shared by every flow of
//! this process that leaves by it (`-P N`, `--bidir`, a server's
//! concurrent tests). An interface takes one XDP program, and a queue one
//! socket without a shared UMEM, so the flows share both: the program
//! redirects each flow's local address and port (a key of its filter map),
//! and a reader that takes another flow's datagram off the RX ring leaves
//! a copy in that flow's inbox, in arrival order. Inboxes are filled and
//! read only under the queue's lock, after the reader's own inbox is
//! found empty, so no flow sees its datagrams out of order.
//!
//! Ports live while a flow (or a preparation) holds them: the last one
//! gone detaches the program and closes the socket. A preparation lives
//! as long as the kernel socket it was made for (an rr test prepares
//! every phase's socket at once, so the port stays attached from the
//! first phase to the last): a reaper thread, running while any
//! preparation is kept, drops those whose socket is closed (a test that
//! ended before its phases or streams ran, a peer killed mid-test).

use std::collections::{HashMap, VecDeque};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use linerate_xdp::{
    AttachMode, Datagram, Path, Program, ProgramOptions, Queue, QueueOptions, XdpStats,
};

use super::options::{xdp_error, Xdp};
use crate::EngineError;

/// The queue a port's socket binds to; a NIC's flows must be steered
/// there (`ethtool -N`, README).
const QUEUE_ID: u32 = 0;
/// Datagrams an inbox holds for a flow whose reader lags; past this they
/// are dropped and counted in that flow's drops.
const INBOX_MAX: usize = 8192;
/// How often the reaper looks for preparations whose socket is closed.
const REAP_EVERY: Duration = Duration::from_millis(250);

/// (network namespace inode, interface index): an interface, process-wide.
type PortKey = (u64, u32);

/// A flow's datagrams read off the ring by another flow's reader.
#[derive(Default)]
struct Inbox {
    peer: Option<SocketAddr>,
    queued: VecDeque<Vec<u8>>,
    /// Buffers given back by the owner, reused for the next copies.
    spare: Vec<Vec<u8>>,
    dropped: u64,
    /// The socket's statistics when the flow joined it.
    base: XdpStats,
}

/// The program and socket of one interface (module docs).
pub(super) struct Port {
    key: PortKey,
    pub(super) opts: Xdp,
    pub(super) mode: AttachMode,
    pub(super) queue_opts: QueueOptions,
    // Dropped in this order: the program first (nothing more redirected),
    // then the AF_XDP socket.
    program: Mutex<Program>,
    queue: Mutex<Queue>,
    /// By the flow's local UDP port.
    inboxes: Mutex<HashMap<u16, Inbox>>,
    /// The socket's statistics belong to every flow on it: the first
    /// receiver that reports its drops takes the socket's too, so a sum
    /// over the streams counts them once.
    drops_claimed: Mutex<bool>,
    /// The most flows redirected to it at once (for the report: how many
    /// shared the socket's counts).
    peak_flows: AtomicU32,
    fd: i32,
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
        let queue = Queue::open(iface, QUEUE_ID, &queue_opts).map_err(fail)?;
        program.register(&queue).map_err(fail)?;
        let port = Arc::new(Port {
            key,
            opts,
            mode,
            queue_opts: *queue.options(),
            fd: queue.as_raw_fd(),
            program: Mutex::new(program),
            queue: Mutex::new(queue),
            inboxes: Mutex::new(HashMap::new()),
            drops_claimed: Mutex::new(false),
            peak_flows: AtomicU32::new(0),
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

    /// The AF_XDP socket.
    pub(super) fn queue(&self) -> MutexGuard<'_, Queue> {
        lock(&self.queue)
    }

    /// The socket's descriptor (for poll).
    pub(super) fn fd(&self) -> i32 {
        self.fd
    }

    /// Redirects the flow (local, peer) to this port (from now on, or
    /// still: a flow added already keeps its inbox).
    pub(super) fn add_flow(&self, local: SocketAddr, peer: SocketAddr) -> Result<(), EngineError> {
        let base = self.queue().stats().unwrap_or_default();
        let mut inboxes = lock(&self.inboxes);
        inboxes
            .entry(local.port())
            .or_insert_with(|| Inbox {
                base,
                ..Inbox::default()
            })
            .peer = Some(peer);
        let flows = u32::try_from(inboxes.len()).unwrap_or(u32::MAX);
        self.peak_flows.fetch_max(flows, Ordering::Relaxed);
        drop(inboxes);
        lock(&self.program)
            .allow(local)
            .map_err(|e| xdp_error(e, self.opts))
    }

    /// Stops redirecting the flow with this local address.
    pub(super) fn remove_flow(&self, local: SocketAddr) {
        let _ = lock(&self.program).disallow(local);
        lock(&self.inboxes).remove(&local.port());
    }

    /// Whether another flow shares this port (its reader may take this
    /// flow's datagrams, which poll on the socket then does not see).
    pub(super) fn shared(&self) -> bool {
        lock(&self.inboxes).len() > 1
    }

    /// Whether the flow with this local port has datagrams in its inbox.
    pub(super) fn has_queued(&self, local: u16) -> bool {
        lock(&self.inboxes)
            .get(&local)
            .is_some_and(|b| !b.queued.is_empty())
    }

    /// The most flows that shared this port at once.
    pub(super) fn peak_flows(&self) -> u32 {
        self.peak_flows.load(Ordering::Relaxed)
    }

    /// The flow's drops past the kernel socket: its inbox's, and the
    /// AF_XDP socket's since the flow joined it for the first flow that
    /// asks (module docs), none for the others; and whether this flow took
    /// the socket's.
    pub(super) fn drops(&self, local: u16) -> (u64, bool) {
        let socket = self.queue().stats().ok();
        let inboxes = lock(&self.inboxes);
        let Some(inbox) = inboxes.get(&local) else {
            return (0, false);
        };
        let mut claimed = lock(&self.drops_claimed);
        let own = match socket {
            Some(s) if !*claimed => {
                *claimed = true;
                let b = inbox.base;
                Some((s.rx_dropped + s.rx_ring_full).saturating_sub(b.rx_dropped + b.rx_ring_full))
            }
            _ => None,
        };
        (inbox.dropped + own.unwrap_or(0), own.is_some())
    }

    /// Up to `max` of the flow (`local` port, from `peer`)'s datagrams, in
    /// arrival order, to `each`: from its inbox, else off the RX ring,
    /// leaving other flows' in theirs. Returns (delivered, foreign): how
    /// many went to `each`, and how many belonged to no flow.
    pub(super) fn recv(
        &self,
        local: u16,
        peer: SocketAddr,
        max: usize,
        mut each: impl FnMut(&[u8]),
    ) -> (usize, u64) {
        let mut queue = self.queue();
        let mut inboxes = lock(&self.inboxes);
        if let Some(own) = inboxes.get_mut(&local) {
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
        let max = u32::try_from(max).unwrap_or(u32::MAX);
        queue.recv(max, |d: Datagram<'_>| {
            let port = d.dst.port();
            if port == local && d.src == peer {
                each(d.payload);
                n += 1;
                return;
            }
            match inboxes.get_mut(&port) {
                Some(b) if b.peer == Some(d.src) => b.keep(d.payload),
                _ => foreign += 1,
            }
        });
        (n, foreign)
    }
}

impl Inbox {
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

    #[test]
    fn issue_25_an_inbox_keeps_arrival_order_and_counts_what_overflows() {
        let mut inbox = Inbox::default();
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
