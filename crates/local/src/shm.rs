//! Shared-memory transport between two processes: one memfd segment per
//! channel holding a request ring, an acknowledgement ring and (bulk) the
//! payload region, with a futex doorbell per ring (see [`crate::ring`]).
//!
//! - `direct`: the sender copies the message into a request-ring slot;
//!   the receiver copies it out. A message longer than a slot is refused,
//!   naming the limit.
//! - `bulk`: the sender copies the message into the shared region and
//!   queues a 16-byte descriptor (offset, length); the receiver reads the
//!   payload in place (no copy) and answers. The sender does not touch
//!   the region again before that answer, so the receiver's view is
//!   never written under it.
//!
//! Waiting: a receiver of either ring spins on it within the spin budget
//! ([`crate::wait`]: adaptive, yielding when the CPUs may be shared), then
//! sleeps on the ring's futex (see [`crate::ring`] for the lost-wake-up
//! argument) for at most [`PEER_CHECK`] at a time, and between sleeps
//! looks at the control socket, whose hang-up means the other process is
//! gone. A sleep costs the receiver one system call (`FUTEX_WAIT`) where
//! it was two (`poll(2)` on an eventfd and the control socket, then a
//! `read` to clear the eventfd), and a ring costs the sender one either
//! way (docs/design/local.md, shm section, has the counts and times); the
//! price is that a dead peer is noticed within [`PEER_CHECK`] instead of
//! at once. The segment has no name: it lives as long as a process
//! maps it or holds its descriptor.

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use memmap2::MmapMut;

use crate::ring::{self, Consumer, Producer, Shape};
use crate::wait::{Spin, Spinner, WaitStats};
use crate::{Channel, LocalError, Transport};

/// The longest a receiver sleeps before it looks whether the peer process
/// still lives (its futex cannot watch the control socket).
pub const PEER_CHECK: Duration = Duration::from_millis(50);
/// Ring checks between clock reads while spinning (a check is a load from
/// a cache line the sender writes: nanoseconds).
const SPIN_CHECK: u32 = 64;

/// Request-ring slots (one message is outstanding per channel at a time;
/// the depth leaves room for batching without waiting for space).
const REQ_SLOTS: u32 = 64;
/// Descriptor bytes in a bulk slot: offset and length, u64 each.
const DESCRIPTOR: usize = 16;
/// Slots of the reverse ring.
const ACK_SLOTS: u32 = 16;

/// A segment's shape: both rings and the bulk region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub bulk: bool,
    /// Bytes per direct slot, header included (multiple of 8, ≥ 16).
    pub slot_size: u32,
    /// Bytes of the bulk region (0 for direct).
    pub region: usize,
    /// Bytes per slot of the reverse ring, header included: 16 for the
    /// 8-byte words of `msg`; a direct slot's size where responses travel
    /// back whole (`rr`).
    pub ack_slot: u32,
}

impl Layout {
    fn req(self) -> Shape {
        Shape {
            slots: REQ_SLOTS,
            slot_size: if self.bulk {
                (ring::SLOT_HEADER + DESCRIPTOR) as u32
            } else {
                self.slot_size
            },
        }
    }

    fn ack(self) -> Shape {
        Shape {
            slots: ACK_SLOTS,
            slot_size: self.ack_slot.max(16),
        }
    }

    fn ack_off(self) -> usize {
        self.req().bytes().next_multiple_of(64)
    }

    fn region_off(self) -> usize {
        (self.ack_off() + self.ack().bytes()).next_multiple_of(4096)
    }

    /// Bytes of the segment.
    pub fn bytes(self) -> usize {
        self.region_off() + self.region
    }

    /// The largest message the channel carries whole.
    pub fn limit(self) -> usize {
        if self.bulk {
            self.region
        } else {
            self.req().payload()
        }
    }
}

fn memfd(bytes: usize) -> Result<File, LocalError> {
    let name = c"linerate-msg";
    // SAFETY: a NUL-terminated name and flags; on success the descriptor
    // is new and ours.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(LocalError::io("memfd_create")(
            std::io::Error::last_os_error(),
        ));
    }
    // SAFETY: fd is a fresh descriptor we own (checked above).
    let f = unsafe { File::from_raw_fd(fd) };
    f.set_len(bytes as u64)
        .map_err(LocalError::io("memfd size"))?;
    Ok(f)
}

/// Which end of a channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Sender,
    Receiver,
}

/// One end of a shared-memory channel.
#[derive(Debug)]
pub struct ShmChan {
    /// Keeps the mapping alive while the rings point into it.
    map: Arc<MmapMut>,
    layout: Layout,
    /// Sender: the request ring; receiver: the acknowledgement ring.
    tx: Producer,
    /// Sender: the acknowledgement ring; receiver: the request ring.
    rx: Consumer,
    /// The control socket: readable or hung up when the peer is gone.
    ctl: OwnedFd,
    spinner: Spinner,
    buf: Vec<u8>,
}

/// Creates a channel: this process's sending end and the segment's
/// descriptor for the far end.
pub fn create(layout: Layout, ctl: OwnedFd, spin: Spin) -> Result<(ShmChan, OwnedFd), LocalError> {
    let f = memfd(layout.bytes())?;
    let map = map(&f)?;
    let base = map.as_ptr() as *mut u8;
    // SAFETY: the mapping is layout.bytes() long and page-aligned, so both
    // rings (at offsets 0 and ack_off, multiples of 64) fit and are
    // aligned; no one else uses the fresh segment yet.
    unsafe {
        ring::init(base, layout.req());
        ring::init(base.add(layout.ack_off()), layout.ack());
    }
    let chan = ShmChan::new(map, layout, Role::Sender, ctl, spin);
    Ok((chan, f.into()))
}

/// The receiving end over the segment from [`create`]'s process.
pub fn open(
    layout: Layout,
    memfd: OwnedFd,
    ctl: OwnedFd,
    spin: Spin,
) -> Result<ShmChan, LocalError> {
    let f = File::from(memfd);
    let len = f.metadata().map_err(LocalError::io("memfd"))?.len();
    if len != layout.bytes() as u64 {
        return Err(LocalError::Protocol(format!(
            "shared segment is {len} bytes, the layout needs {}",
            layout.bytes()
        )));
    }
    let map = map(&f)?;
    Ok(ShmChan::new(map, layout, Role::Receiver, ctl, spin))
}

fn map(f: &File) -> Result<Arc<MmapMut>, LocalError> {
    // SAFETY: the segment is a memfd shared only with our own child
    // process, which follows the ring protocol; no one truncates it while
    // mapped (its size is fixed at creation).
    let m = unsafe { MmapMut::map_mut(f) }.map_err(LocalError::io("mmap"))?;
    Ok(Arc::new(m))
}

impl ShmChan {
    fn new(map: Arc<MmapMut>, layout: Layout, role: Role, ctl: OwnedFd, spin: Spin) -> ShmChan {
        let base = map.as_ptr() as *mut u8;
        // SAFETY: both rings were initialised by `create` in this layout;
        // the mapping lives in `map`, held by the channel as long as the
        // ends; the sender takes the request producer and ack consumer, the
        // receiver the other two, so each ring has one producer and one
        // consumer.
        let ((req_p, req_c), (ack_p, ack_c)) = unsafe {
            (
                ring::ends(base, layout.req()),
                ring::ends(base.add(layout.ack_off()), layout.ack()),
            )
        };
        let (tx, rx) = match role {
            Role::Sender => (req_p, ack_c),
            Role::Receiver => (ack_p, req_c),
        };
        ShmChan {
            map,
            layout,
            tx,
            rx,
            ctl,
            spinner: Spinner::new(spin),
            buf: vec![
                0;
                layout
                    .req()
                    .payload()
                    .max(layout.ack().payload())
                    .max(DESCRIPTOR)
            ],
        }
    }

    fn transport(&self) -> Transport {
        if self.layout.bulk {
            Transport::ShmBulk
        } else {
            Transport::ShmDirect
        }
    }

    fn push(&mut self, entry: &[u8]) -> Result<(), LocalError> {
        let mut since: Option<Instant> = None;
        loop {
            match self.tx.try_push(entry) {
                Ok(true) => break,
                Ok(false) => {
                    // Full: the peer is behind. Yield, and check now and
                    // then that it still lives.
                    let t = *since.get_or_insert_with(Instant::now);
                    if t.elapsed() > Duration::from_millis(100) {
                        self.peer_alive()?;
                        since = Some(Instant::now());
                    }
                    std::thread::yield_now();
                }
                Err(e) => {
                    return Err(LocalError::TooLong {
                        transport: self.transport(),
                        len: e.len,
                        limit: e.limit,
                        why: "a direct message travels in one ring slot: raise --shm-slot or use shm-bulk",
                    })
                }
            }
        }
        self.tx
            .wake_consumer()
            .map_err(LocalError::io("futex wake"))?;
        Ok(())
    }

    /// Fails when the control socket is readable or hung up and the ring
    /// holds nothing: the peer process is gone (or failing).
    fn peer_alive(&self) -> Result<(), LocalError> {
        let mut fd = libc::pollfd {
            fd: self.ctl.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: fd is one live pollfd record.
        let n = unsafe { libc::poll(&mut fd, 1, 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                return Ok(());
            }
            return Err(LocalError::io("poll")(e));
        }
        if fd.revents != 0 && !self.rx.ready() {
            return Err(LocalError::PeerGone("shared memory"));
        }
        Ok(())
    }

    /// Waits until the receiving ring holds an entry: spin, then sleep.
    fn wait(&mut self) -> Result<(), LocalError> {
        if self.rx.ready() {
            return Ok(());
        }
        let rx = &self.rx;
        if self.spinner.spin(SPIN_CHECK, || rx.ready()) {
            return Ok(());
        }
        while !self
            .rx
            .sleep(PEER_CHECK)
            .map_err(LocalError::io("futex wait"))?
        {
            self.peer_alive()?;
        }
        Ok(())
    }

    fn pop(&mut self) -> Result<usize, LocalError> {
        self.wait()?;
        self.rx
            .try_pop(&mut self.buf)
            .ok_or_else(|| LocalError::Protocol("ring entry vanished".into()))
    }

    fn region(&self) -> *mut u8 {
        // SAFETY: region_off + region ≤ the mapping's length (Layout::bytes).
        unsafe { (self.map.as_ptr() as *mut u8).add(self.layout.region_off()) }
    }
}

impl Channel for ShmChan {
    fn send(&mut self, msg: &[u8]) -> Result<(), LocalError> {
        if !self.layout.bulk {
            return self.push(msg);
        }
        if msg.len() > self.layout.region {
            return Err(LocalError::TooLong {
                transport: Transport::ShmBulk,
                len: msg.len(),
                limit: self.layout.region,
                why: "the shared region is sized for the largest message asked for",
            });
        }
        // SAFETY: msg fits the region (checked); the receiver reads the
        // region only between the descriptor below and its answer, which
        // the sender awaits before the next send, so no one reads it now.
        unsafe { std::ptr::copy_nonoverlapping(msg.as_ptr(), self.region(), msg.len()) };
        let mut d = [0u8; DESCRIPTOR];
        d[8..].copy_from_slice(&(msg.len() as u64).to_le_bytes());
        self.push(&d)
    }

    fn recv(&mut self, len: usize) -> Result<(), LocalError> {
        let n = self.pop()?;
        if !self.layout.bulk {
            if n != len {
                return Err(LocalError::Protocol(format!(
                    "a {n}-byte message where {len} were expected"
                )));
            }
            return Ok(());
        }
        let mut w = [0u8; 8];
        w.copy_from_slice(&self.buf[8..16]);
        let got = u64::from_le_bytes(w) as usize;
        if n != DESCRIPTOR || got != len || len > self.layout.region {
            return Err(LocalError::Protocol(format!(
                "bad bulk descriptor: {got} bytes where {len} were expected"
            )));
        }
        Ok(())
    }

    fn last(&self, len: usize) -> &[u8] {
        if !self.layout.bulk {
            return &self.buf[..len.min(self.buf.len())];
        }
        let len = len.min(self.layout.region);
        // SAFETY: len ≤ region (clamped); the sender wrote these bytes
        // before queueing the descriptor (Release/Acquire through the ring)
        // and does not write them again before this end's last word for
        // the message, which comes after the caller is done with the view.
        unsafe { std::slice::from_raw_parts(self.region(), len) }
    }

    fn send_word(&mut self, w: u64) -> Result<(), LocalError> {
        self.push(&w.to_le_bytes())
    }

    fn wait_stats(&self) -> Option<WaitStats> {
        Some(self.spinner.stats())
    }

    fn recv_word(&mut self) -> Result<u64, LocalError> {
        let n = self.pop()?;
        if n != 8 {
            return Err(LocalError::Protocol(format!("a {n}-byte word")));
        }
        let mut w = [0u8; 8];
        w.copy_from_slice(&self.buf[..8]);
        Ok(u64::from_le_bytes(w))
    }
}
