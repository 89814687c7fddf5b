//! One AF_XDP socket on one queue of an interface, with its own UMEM and
//! the four rings: UDP payloads go out as frames built in place in the
//! UMEM, frames that the XDP program redirects come back as parsed
//! datagrams. The UMEM is split once: the first half of its frames belongs
//! to the receive side (fill ring, RX ring, back to the fill ring), the
//! second half to the send side (TX ring, completion ring, free list).

use std::fmt;
use std::io;
use std::num::NonZeroU32;
use std::ptr::NonNull;
use std::time::{Duration, Instant};

use linerate_proto::packet::{self, Datagram, FrameTemplate, UdpChecksum, UdpFlow};
use xdpilone::xdp::XdpDesc;
use xdpilone::{DeviceQueue, IfInfo, RingRx, RingTx, Socket, SocketConfig, Umem, UmemConfig, User};

use crate::caps;
use crate::error::errno;
use crate::error::XdpError;
use crate::modes::CopyMode;
use crate::netlink::{self, LinkInfo};

/// Sizes and modes of one queue. Ring sizes are powers of two; frames are
/// a power of two from 2048 bytes to the page size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueOptions {
    pub frame_size: u32,
    /// Frames in the UMEM: half receive, half send.
    pub frame_count: u32,
    pub fill_size: u32,
    pub completion_size: u32,
    pub rx_size: u32,
    pub tx_size: u32,
    /// Exactly this mode; no fallback to the other.
    pub copy: CopyMode,
    /// Bind with XDP_USE_NEED_WAKEUP: the kernel says when a ring needs a
    /// syscall to move, instead of one per batch.
    pub need_wakeup: bool,
}

impl Default for QueueOptions {
    fn default() -> Self {
        QueueOptions {
            frame_size: 2048,
            frame_count: 4096,
            fill_size: 2048,
            completion_size: 2048,
            rx_size: 2048,
            tx_size: 2048,
            copy: CopyMode::ZeroCopy,
            need_wakeup: true,
        }
    }
}

impl QueueOptions {
    fn validate(&self) -> Result<(), XdpError> {
        let page = page_size();
        let pow2 = |name: &str, v: u32| {
            if v.is_power_of_two() {
                Ok(())
            } else {
                Err(XdpError::Options(format!(
                    "{name} {v} is not a power of two"
                )))
            }
        };
        pow2("frame size", self.frame_size)?;
        pow2("fill ring size", self.fill_size)?;
        pow2("completion ring size", self.completion_size)?;
        pow2("rx ring size", self.rx_size)?;
        pow2("tx ring size", self.tx_size)?;
        if self.frame_size < 2048 || self.frame_size as usize > page {
            return Err(XdpError::Options(format!(
                "frame size {} is outside 2048..={page}",
                self.frame_size
            )));
        }
        if self.frame_count < 2 || self.fill_size < self.frame_count / 2 {
            return Err(XdpError::Options(format!(
                "{} frames: need at least 2, and a fill ring ({}) holding the receive half",
                self.frame_count, self.fill_size
            )));
        }
        Ok(())
    }

    /// Bytes of UMEM these options take.
    pub fn umem_bytes(&self) -> usize {
        self.frame_size as usize * self.frame_count as usize
    }
}

/// The socket's drop statistics (`getsockopt(XDP_STATISTICS)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct XdpStats {
    pub rx_dropped: u64,
    pub rx_invalid_descs: u64,
    pub tx_invalid_descs: u64,
    pub rx_ring_full: u64,
    pub fill_ring_empty: u64,
    pub tx_ring_empty: u64,
}

/// What this side of the rings saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueueCounters {
    /// Send calls that found the TX ring full.
    pub tx_ring_full: u64,
    /// Send calls that found no free frame (completions lagging).
    pub tx_no_frame: u64,
    /// Receive calls that found the fill ring empty: the kernel had no
    /// frame to receive into.
    pub fill_starved: u64,
    /// Redirected frames that were not one whole UDP datagram.
    pub rx_unparsed: u64,
    /// Datagrams delivered whose UDP checksum did not match (and was not
    /// an unfinished offload's).
    pub rx_bad_checksum: u64,
    /// Datagrams delivered whose UDP checksum a sender left to an offload
    /// that never finished it (veth): not corruption.
    pub rx_unfinished_checksum: u64,
    /// Syscalls made to move a ring.
    pub wakeups: u64,
}

/// The UMEM's memory: an anonymous mapping, unmapped on drop.
struct Area {
    ptr: NonNull<u8>,
    len: usize,
}

impl Area {
    fn new(len: usize) -> io::Result<Area> {
        // SAFETY: a fresh private anonymous mapping; no existing memory is
        // touched.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr =
            NonNull::new(ptr.cast::<u8>()).ok_or_else(|| io::Error::other("mmap gave NULL"))?;
        Ok(Area { ptr, len })
    }

    fn as_slice_ptr(&self) -> NonNull<[u8]> {
        NonNull::slice_from_raw_parts(self.ptr, self.len)
    }

    /// The `len` bytes at `addr`, clamped to the area.
    ///
    /// # Safety
    /// The frame at `addr` must be this side's at the moment (not in any
    /// ring the kernel reads or writes), and no other slice of it live.
    unsafe fn bytes(&mut self, addr: u64, len: usize) -> &mut [u8] {
        let start = usize::try_from(addr).unwrap_or(self.len).min(self.len);
        let len = len.min(self.len - start);
        // SAFETY: in bounds by the clamps; exclusivity is the caller's.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().add(start), len) }
    }
}

impl Drop for Area {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// One AF_XDP socket bound to (interface, queue).
pub struct Queue {
    // Rings and sockets first: dropped (closed) before the UMEM's memory.
    rx: RingRx,
    tx: RingTx,
    device: DeviceQueue,
    user: User,
    _socket: Socket,
    _umem: Umem,
    area: Area,
    /// Send frames not in the TX or completion ring.
    free_tx: Vec<u64>,
    /// Receive frames read and not yet back in the fill ring.
    refill: Vec<u64>,
    /// The headers of the last flow and payload length sent: a frame
    /// copies them and sums its payload (most sends repeat them).
    template: Option<FrameTemplate>,
    link: LinkInfo,
    queue_id: u32,
    opts: QueueOptions,
    counters: QueueCounters,
}

// SAFETY: a Queue owns its sockets, rings and memory outright; nothing in
// it is tied to the thread that made it (xdpilone's raw ring pointers are
// what keep it from being Send automatically).
unsafe impl Send for Queue {}

impl fmt::Debug for Queue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Queue")
            .field("iface", &self.link.name)
            .field("queue_id", &self.queue_id)
            .field("opts", &self.opts)
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).unwrap_or(4096)
}

/// Refuses on a kernel without AF_XDP, before any other setup.
pub(crate) fn probe_af_xdp() -> Result<(), XdpError> {
    // SAFETY: plain socket(2); the descriptor is closed right away.
    let fd = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::EPERM | libc::EACCES) => XdpError::Capabilities {
                missing: "CAP_NET_RAW".into(),
            },
            _ => XdpError::NoAfXdp(e),
        });
    }
    // SAFETY: `fd` is ours and open.
    unsafe { libc::close(fd) };
    Ok(())
}

impl Queue {
    /// Opens an AF_XDP socket on queue `queue_id` of interface `iface` (in
    /// this thread's network namespace), in exactly the mode asked.
    pub fn open(iface: &str, queue_id: u32, opts: &QueueOptions) -> Result<Queue, XdpError> {
        caps::check()?;
        opts.validate()?;
        let link = netlink::link_by_name(iface)?;
        if link.loopback {
            return Err(XdpError::Loopback(link.name));
        }
        probe_af_xdp()?;
        let sock_err = |step, e: xdpilone::Errno| XdpError::Socket {
            iface: link.name.clone(),
            queue: queue_id,
            step,
            source: errno(e),
        };
        let bytes = opts.umem_bytes();
        let area = Area::new(bytes).map_err(|source| XdpError::Umem { bytes, source })?;
        let config = UmemConfig {
            fill_size: opts.fill_size,
            complete_size: opts.completion_size,
            frame_size: opts.frame_size,
            headroom: 0,
            flags: 0,
        };
        // SAFETY: `area` is page-aligned, `bytes` long, and outlives the
        // UMEM (declared after it in `Queue`, so dropped after it).
        let umem =
            unsafe { Umem::new(config, area.as_slice_ptr()) }.map_err(|e| XdpError::Umem {
                bytes,
                source: errno(e),
            })?;
        let mut info = IfInfo::invalid();
        info.from_ifindex(link.ifindex)
            .map_err(|e| sock_err("interface", e))?;
        info.set_queue(queue_id);
        let socket = Socket::with_shared(&info, &umem).map_err(|e| sock_err("socket", e))?;
        let device = umem
            .fq_cq(&socket)
            .map_err(|e| sock_err("fill/completion rings", e))?;
        let mut bind_flags = match opts.copy {
            CopyMode::ZeroCopy => SocketConfig::XDP_BIND_ZEROCOPY,
            CopyMode::Copy => SocketConfig::XDP_BIND_COPY,
        };
        if opts.need_wakeup {
            bind_flags |= SocketConfig::XDP_BIND_NEED_WAKEUP;
        }
        let config = SocketConfig {
            rx_size: NonZeroU32::new(opts.rx_size),
            tx_size: NonZeroU32::new(opts.tx_size),
            bind_flags,
        };
        let user = umem
            .rx_tx(&socket, &config)
            .map_err(|e| sock_err("rx/tx rings", e))?;
        let rx = user
            .map_rx()
            .map_err(|e| sock_err("mapping the rx ring", e))?;
        let tx = user
            .map_tx()
            .map_err(|e| sock_err("mapping the tx ring", e))?;
        bind(&umem, &user).map_err(|e| bind_error(&link, queue_id, opts.copy, e))?;
        let frame = u64::from(opts.frame_size);
        let half = u64::from(opts.frame_count / 2);
        let mut queue = Queue {
            rx,
            tx,
            device,
            user,
            _socket: socket,
            _umem: umem,
            area,
            free_tx: (half..u64::from(opts.frame_count))
                .map(|i| i * frame)
                .collect(),
            refill: (0..half).map(|i| i * frame).collect(),
            template: None,
            link,
            queue_id,
            opts: *opts,
            counters: QueueCounters::default(),
        };
        queue.refill();
        Ok(queue)
    }

    pub fn link(&self) -> &LinkInfo {
        &self.link
    }

    pub fn queue_id(&self) -> u32 {
        self.queue_id
    }

    pub fn options(&self) -> &QueueOptions {
        &self.opts
    }

    pub fn counters(&self) -> QueueCounters {
        self.counters
    }

    /// The socket's descriptor (for the XSKMAP and for poll).
    pub fn as_raw_fd(&self) -> i32 {
        self.rx.as_raw_fd()
    }

    /// The kernel's drop statistics for this socket.
    pub fn stats(&self) -> Result<XdpStats, XdpError> {
        let s = self.user.statistics_v2().map_err(|e| XdpError::Socket {
            iface: self.link.name.clone(),
            queue: self.queue_id,
            step: "XDP_STATISTICS",
            source: errno(e),
        })?;
        Ok(XdpStats {
            rx_dropped: s.rx_dropped,
            rx_invalid_descs: s.rx_invalid_descs,
            tx_invalid_descs: s.tx_invalid_descs,
            rx_ring_full: s.rx_ring_full,
            fill_ring_empty: s.rx_fill_ring_empty_descs,
            tx_ring_empty: s.tx_ring_empty_descs,
        })
    }

    /// Sends one frame per payload to `flow` (built in place in the
    /// UMEM); returns how many the TX ring took, from the first on. Fewer
    /// than asked when the ring or the send frames are full: call again.
    pub fn send(&mut self, flow: &UdpFlow, payloads: &[&[u8]]) -> Result<usize, XdpError> {
        let room = self.opts.frame_size as usize - flow.header_len();
        if let Some(p) = payloads.iter().find(|p| p.len() > room) {
            return Err(XdpError::Options(format!(
                "a {}-byte payload does not fit a {}-byte frame",
                p.len(),
                self.opts.frame_size
            )));
        }
        self.complete();
        let want = payloads.len().min(self.free_tx.len());
        if want < payloads.len() {
            self.counters.tx_no_frame += 1;
        }
        let mut writer = self.tx.transmit(u32::try_from(want).unwrap_or(u32::MAX));
        let took = writer.capacity() as usize;
        if took < payloads.len() && want == payloads.len() {
            self.counters.tx_ring_full += 1;
        }
        let mut sent = 0;
        for payload in &payloads[..took] {
            let Some(addr) = self.free_tx.pop() else {
                break;
            };
            let fits = |t: &FrameTemplate| t.fits(flow, payload.len());
            let template = match &mut self.template {
                Some(t) if fits(t) => t,
                slot => match FrameTemplate::new(flow, payload.len()) {
                    Ok(t) => slot.insert(t),
                    Err(_) => {
                        // Mixed address families; keep the frame.
                        self.free_tx.push(addr);
                        break;
                    }
                },
            };
            // SAFETY: `addr` came off the free list: no ring holds it.
            let frame = unsafe { self.area.bytes(addr, self.opts.frame_size as usize) };
            let len = match template.emit(frame, payload) {
                Ok(len) => len,
                Err(_) => {
                    // Unreachable after the size check above; keep the
                    // frame and stop rather than send a broken one.
                    self.free_tx.push(addr);
                    break;
                }
            };
            // `len` fits a frame, and frames are at most a page.
            writer.insert_once(XdpDesc {
                addr,
                len: len as u32,
                options: 0,
            });
            sent += 1;
        }
        writer.commit();
        drop(writer);
        self.kick_tx();
        Ok(sent)
    }

    /// Moves frames the kernel finished sending back to the free list, and
    /// kicks the kernel when the TX ring still holds frames (in copy mode
    /// one syscall sends a bounded batch); returns how many completed.
    pub fn complete(&mut self) -> usize {
        if self.tx.pending() > 0 {
            self.kick_tx();
        }
        let mut reader = self.device.complete(self.opts.completion_size);
        let before = self.free_tx.len();
        while let Some(addr) = reader.read() {
            self.free_tx.push(addr);
        }
        reader.release();
        self.free_tx.len() - before
    }

    /// Wakes the kernel's TX processing when it asks (or always, without
    /// need-wakeup).
    fn kick_tx(&mut self) {
        if !self.opts.need_wakeup || self.tx.needs_wakeup() {
            self.tx.wake();
            self.counters.wakeups += 1;
        }
    }

    /// Frames sent and not yet completed.
    pub fn in_flight(&self) -> usize {
        (self.opts.frame_count - self.opts.frame_count / 2) as usize - self.free_tx.len()
    }

    /// Receives up to `max` frames, calling `each` with every one that is
    /// a whole UDP datagram; returns how many it was called with.
    pub fn recv(&mut self, max: u32, mut each: impl FnMut(Datagram<'_>)) -> usize {
        let mut delivered = 0;
        let mask = !(u64::from(self.opts.frame_size) - 1);
        let mut reader = self.rx.receive(max);
        while let Some(desc) = reader.read() {
            // SAFETY: the kernel handed this frame over on the RX ring; it
            // is ours until it goes back to the fill ring below.
            let frame = unsafe { self.area.bytes(desc.addr, desc.len as usize) };
            match packet::parse(frame) {
                Ok(d) => {
                    match d.checksum {
                        UdpChecksum::Invalid => self.counters.rx_bad_checksum += 1,
                        UdpChecksum::Unfinished => self.counters.rx_unfinished_checksum += 1,
                        UdpChecksum::Valid | UdpChecksum::Absent => {}
                    }
                    each(d);
                    delivered += 1;
                }
                Err(_) => self.counters.rx_unparsed += 1,
            }
            // In aligned mode the chunk is the address rounded down.
            self.refill.push(desc.addr & mask);
        }
        reader.release();
        drop(reader);
        if !self.refill.is_empty() {
            if self.device.pending() == 0 {
                self.counters.fill_starved += 1;
            }
            self.refill();
        }
        delivered
    }

    /// Returns read frames to the fill ring, waking the driver if it asks.
    fn refill(&mut self) {
        let mut writer = self
            .device
            .fill(u32::try_from(self.refill.len()).unwrap_or(u32::MAX));
        let put = writer.insert(self.refill.iter().copied()) as usize;
        writer.commit();
        drop(writer);
        self.refill.drain(..put);
        if self.opts.need_wakeup && self.device.needs_wakeup() {
            self.device.wake();
            self.counters.wakeups += 1;
        }
    }
}

/// How long a bind retries while the queue is busy.
const BUSY_RETRY: Duration = Duration::from_secs(1);

/// Binds, retrying on EBUSY for up to [`BUSY_RETRY`]: the kernel releases
/// a closed AF_XDP socket's hold on its queue in deferred work, so a queue
/// closed a moment ago can still read as taken.
fn bind(umem: &Umem, user: &User) -> Result<(), io::Error> {
    let start = Instant::now();
    loop {
        match umem.bind(user).map_err(errno) {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && start.elapsed() < BUSY_RETRY => {
                std::thread::sleep(Duration::from_millis(10));
            }
            other => return other,
        }
    }
}

/// The bind failure, with what to do about the usual causes.
fn bind_error(link: &LinkInfo, queue: u32, copy: CopyMode, source: io::Error) -> XdpError {
    let hint = match (source.raw_os_error(), copy) {
        (Some(libc::EOPNOTSUPP), CopyMode::ZeroCopy) => {
            " (the driver has no AF_XDP zero-copy: ask for copy mode)"
        }
        (Some(libc::EINVAL), _) if link.rx_queues.is_some_and(|n| queue >= n) => {
            " (no such queue: see `ethtool -l`)"
        }
        (Some(libc::EBUSY), _) => " (another AF_XDP socket held this queue for a second)",
        (Some(libc::ENETDOWN), _) => " (the interface is down)",
        _ => "",
    };
    XdpError::Bind {
        iface: link.name.clone(),
        queue,
        copy,
        source,
        hint,
    }
}
