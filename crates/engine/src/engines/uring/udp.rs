//! UDP through io_uring: linked sends from staging slots (zero copy from
//! registered slots where the kernel has it and a send is worth it), GSO
//! super-buffers through `SENDMSG` with a `UDP_SEGMENT` control message,
//! and one multishot `RECVMSG` into a provided buffer ring (one plain
//! `RECVMSG` per call when busy-polled), with `UDP_GRO` super-buffers
//! split by the generic receive loop.
//!
//! GSO and GRO follow the `batch` engine's `auto` rule (on where the kernel
//! and the path allow it; the stream's report says why one is off): the
//! `--gso`/`--no-gso` switches belong to `batch`, the engine to compare
//! with and without them.

use std::io;
use std::net::UdpSocket;
use std::os::fd::AsRawFd;

use io_uring::{cqueue, opcode, squeue, types};
use linerate_proto::measure::Batching;

use super::buf_ring::BufRing;
use super::ring::{
    caps, cqe_err, engine_use, register, zc_worth, CancelAfter, Ring, Uring, ZcCount, TAG_CANCEL,
    WAIT, ZC_REPORT_USAGE,
};
use crate::cmsg::{self, ControlBuf, RECV_CMSG};
use crate::engines::batch::mmsg::{SegmentCmsg, GRO_SLOT, GSO_MSGS_PER_CALL};
use crate::engines::batch::{gro_plan, gso_plan, GsoSends};
use crate::engines::lent::leak;
use crate::engines::{KernelUdp, RecvMeta, RecvSlots, TxBatch, UdpRx, UdpTx, Wait};
use crate::EngineError;

/// Most requests one send batch queues without GSO: as many datagrams as
/// `sendmmsg` batches in the batch engine, linked so they leave in order.
const UDP_TX_BATCH: usize = 32;

/// Requests per send batch with GSO: as many super-buffers as the batch
/// engine's `sendmmsg` carries ([`GSO_MSGS_PER_CALL`], chosen there by
/// measurement), so both engines move the same datagrams per wake-up.
const GSO_TX_BATCH: usize = GSO_MSGS_PER_CALL;

/// Staging slots per request of a batch: a zero-copy send's slot stays busy
/// until its notification, so the sender can run 4 batches ahead of them.
const TX_SLOTS_PER_REQUEST: usize = 4;

/// Datagrams handed to the loop per receive call (the CQEs reaped at once).
const RX_SLOTS: usize = 32;

/// Provided buffers: enough for a burst the receiver did not keep up with
/// (a full ring ends the multishot request until buffers come back), sized
/// down for big datagrams so the ring stays near [`RX_RING_BYTES`].
const RX_RING_MAX: usize = 256;
const RX_RING_MIN: usize = 16;
const RX_RING_BYTES: usize = 4 << 20;

/// The buffer group id of the receive ring (one ring per socket).
const BGID: u16 = 0;

/// Room in each provided buffer before the payload: the kernel's
/// `io_uring_recvmsg_out` header, then the control messages.
pub(crate) const RECVMSG_OUT: usize = 16;

/// The message header of one staging slot's GSO send. The kernel reads it
/// (and the iovec and control message it points to, all inside this value)
/// some time between the submission and the completion — for a linked
/// request, only once the one before it is done — so it lives, unmoved, in
/// a boxed slice for as long as the sender, and is rewritten only while its
/// slot is free (after the request's completion and notification).
#[repr(C)]
struct SlotMsg {
    hdr: libc::msghdr,
    iov: libc::iovec,
    cmsg: SegmentCmsg,
}

/// The per-slot headers, `Send` as a whole.
struct SlotMsgs(Box<[SlotMsg]>);

// SAFETY: the raw pointers in each header point into the same slice or at
// the sender's staging buffer, both owned by the sender that owns this
// value and used only by its thread (the kernel reads them through the
// ring).
unsafe impl Send for SlotMsgs {}

/// A UDP socket's sending ring.
pub struct UringUdpTx {
    ring: Ring,
    fd: types::Fd,
    /// [`TX_SLOTS_PER_REQUEST`] × `reqs` slots of `slot` bytes,
    /// registered as fixed buffer 0 without GSO.
    staging: Vec<u8>,
    slot: usize,
    /// Datagrams per GSO send (1: GSO off), and what the first sends taught.
    gso: GsoSends,
    /// Requests per batch.
    reqs: usize,
    /// With GSO: each slot's `SENDMSG` header.
    msgs: Option<SlotMsgs>,
    /// Slot i is in flight (awaiting its result or its notification).
    busy: Vec<bool>,
    /// Slot i's zero-copy send succeeded: its notification counts.
    zc_sent: Vec<bool>,
    /// Slot i's request copies only because it is under `ZC_MIN_LEN`.
    small: Vec<bool>,
    next: usize,
    /// Results of the current batch: `Some(res)` once its CQE arrived.
    results: Vec<Option<i32>>,
    batch_slots: Vec<usize>,
    /// Datagrams in each request of the current batch.
    batch_counts: Vec<usize>,
    /// The batch's requests, queued together (allocated once).
    entries: Vec<squeue::Entry>,
    zc: Option<ZcCount>,
    /// `SENDMSG_ZC` (Linux 6.1) for GSO sends.
    zc_msg: bool,
    registered: bool,
    used: Batching,
    notes: Vec<String>,
}

impl std::fmt::Debug for UringUdpTx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UringUdpTx")
            .field("ring", &self.ring)
            .field("segs", &self.gso.segs)
            .finish()
    }
}

/// Tags: the low bits carry the slot, this bit marks a send.
const TAG_SEND: u64 = 1 << 32;

impl UringUdpTx {
    pub(super) fn new(engine: Uring, sock: &UdpSocket, len: usize) -> Result<Self, EngineError> {
        let caps = caps()?;
        let ring = Ring::new(engine)?;
        let len = len.max(1);
        let mut batch_notes = Vec::new();
        let segs = gso_plan(sock, len).unwrap_or_else(|why| {
            batch_notes.push(format!("GSO off: {why}"));
            1
        });
        let reqs = if segs > 1 { GSO_TX_BATCH } else { UDP_TX_BATCH };
        let slots = TX_SLOTS_PER_REQUEST * reqs;
        let slot = segs * len;
        let staging = vec![0u8; slot * slots];
        let mut notes = Vec::new();
        let zc = if caps.send_zc {
            Some(ZcCount::default())
        } else {
            notes.push("this kernel has no IORING_OP_SEND_ZC (Linux 6.0): sends copy".into());
            None
        };
        // Only zero-copy sends of one datagram read a registered buffer
        // (GSO sends go through SENDMSG, which takes none; a datagram under
        // ZC_MIN_LEN goes through a plain SEND): otherwise registering
        // would pin memory nothing uses.
        let registered = segs == 1
            && zc.is_some()
            && zc_worth(len)
            && match register(&ring.ring, &staging) {
                Ok(()) => true,
                Err(e) => {
                    notes.push(format!("buffers not registered: {e}"));
                    false
                }
            };
        let zc_msg = caps.sendmsg_zc && zc.is_some();
        if segs > 1 && zc.is_some() && !zc_msg {
            notes
                .push("this kernel has no IORING_OP_SENDMSG_ZC (Linux 6.1): GSO sends copy".into());
        }
        let msgs = (segs > 1).then(|| {
            SlotMsgs(
                (0..slots)
                    .map(|_| SlotMsg {
                        // SAFETY: msghdr and iovec are plain C data; all-zero
                        // is a valid empty value (pointers set per send).
                        hdr: unsafe { std::mem::zeroed() },
                        iov: libc::iovec {
                            iov_base: std::ptr::null_mut(),
                            iov_len: 0,
                        },
                        cmsg: SegmentCmsg::new(0),
                    })
                    .collect(),
            )
        });
        Ok(UringUdpTx {
            ring,
            fd: types::Fd(sock.as_raw_fd()),
            staging,
            slot,
            gso: GsoSends::new(segs),
            reqs,
            msgs,
            busy: vec![false; slots],
            zc_sent: vec![false; slots],
            small: vec![false; slots],
            next: 0,
            results: Vec::with_capacity(reqs),
            batch_slots: Vec::with_capacity(reqs),
            batch_counts: Vec::with_capacity(reqs),
            entries: Vec::with_capacity(reqs),
            zc,
            zc_msg,
            registered,
            used: Batching {
                messages_per_call: reqs as u32,
                gso_segments: (segs > 1).then_some(segs as u32),
                notes: batch_notes,
                ..Batching::default()
            },
            notes,
        })
    }

    /// Handles one completion: a send's result or a notification that
    /// frees its slot.
    fn complete(&mut self, c: &cqueue::Entry) {
        let ud = c.user_data();
        if ud == TAG_CANCEL || ud & TAG_SEND == 0 {
            return;
        }
        let slot = (ud & 0xffff_ffff) as usize;
        if cqueue::notif(c.flags()) {
            if let (Some(z), true) = (&mut self.zc, self.zc_sent[slot]) {
                z.notified(c.result());
            }
            self.busy[slot] = false;
            return;
        }
        if let Some(i) = self.batch_slots.iter().position(|&s| s == slot) {
            self.results[i] = Some(c.result());
        }
        // A zero-copy request posts a notification whenever its result says
        // more follows — a failed or cancelled one too — and only that
        // notification frees the slot. Only sends that went out count.
        self.zc_sent[slot] = c.result() >= 0 && cqueue::more(c.flags());
        if let Some(z) = &mut self.zc {
            if self.zc_sent[slot] {
                z.sends += 1;
            } else if self.small[slot] && c.result() >= 0 {
                z.small += 1;
            }
        }
        if !cqueue::more(c.flags()) {
            self.busy[slot] = false;
        }
    }

    fn reap(&mut self) {
        while let Some(c) = self.ring.next() {
            self.complete(&c);
        }
    }

    /// Waits until slot `i` is free (its notification arrived).
    fn wait_free(&mut self, i: usize) -> io::Result<()> {
        while self.busy[i] {
            self.ring.submit_wait(1, Some(WAIT))?;
            self.reap();
        }
        Ok(())
    }

    fn batch_done(&self) -> bool {
        self.results.iter().all(Option::is_some)
    }

    /// The batch's requests were never queued (an error before the
    /// submission): no completion will free their slots, so free them.
    fn unsubmitted(&mut self) {
        for &i in &self.batch_slots {
            self.busy[i] = false;
        }
        self.batch_slots.clear();
        self.results.clear();
    }

    /// Copies `chunk` (datagrams of `segment` bytes) into slot `i` and
    /// builds its request: a plain send for one datagram, a `SENDMSG` with
    /// a `UDP_SEGMENT` control message for a run of them.
    fn request(&mut self, i: usize, chunk: &[u8], segment: usize, flags: i32) -> squeue::Entry {
        let at = i * self.slot;
        let n = chunk.len().min(self.slot);
        self.staging[at..at + n].copy_from_slice(&chunk[..n]);
        let ptr = self.staging[at..].as_ptr();
        let flags = flags | libc::MSG_NOSIGNAL;
        if let (Some(msgs), true) = (&mut self.msgs, n > segment) {
            let m = &mut msgs.0[i];
            m.iov = libc::iovec {
                iov_base: ptr as *mut libc::c_void,
                iov_len: n,
            };
            m.cmsg = SegmentCmsg::new(u16::try_from(segment).unwrap_or(u16::MAX));
            m.hdr.msg_iov = &mut m.iov;
            m.hdr.msg_iovlen = 1;
            m.hdr.msg_control = (&mut m.cmsg as *mut SegmentCmsg).cast();
            m.hdr.msg_controllen = std::mem::size_of::<SegmentCmsg>() as _;
            let hdr: *const libc::msghdr = &m.hdr;
            let zc = self.zc_msg && zc_worth(n);
            self.small[i] = self.zc_msg && !zc;
            return if zc {
                opcode::SendMsgZc::new(self.fd, hdr)
                    .flags(flags as u32)
                    // SENDMSG_ZC reads its zero-copy flags from `ioprio`.
                    .ioprio(ZC_REPORT_USAGE)
                    .build()
            } else {
                opcode::SendMsg::new(self.fd, hdr)
                    .flags(flags as u32)
                    .build()
            };
        }
        let zc = self.zc.is_some() && zc_worth(n);
        self.small[i] = self.zc.is_some() && !zc;
        if zc {
            opcode::SendZc::new(self.fd, ptr, n as u32)
                .buf_index(self.registered.then_some(0))
                .flags(flags)
                .zc_flags(ZC_REPORT_USAGE)
                .build()
        } else {
            opcode::Send::new(self.fd, ptr, n as u32)
                .flags(flags)
                .build()
        }
    }

    /// Queues one batch and waits for every request's result; returns the
    /// datagrams of the successful prefix, or the first request's error.
    fn send_once(&mut self, batch: &TxBatch<'_>, wait: Wait) -> Result<usize, i32> {
        self.results.clear();
        self.batch_slots.clear();
        self.batch_counts.clear();
        self.entries.clear();
        let flags = match wait {
            Wait::Block => 0,
            Wait::DontWait => libc::MSG_DONTWAIT,
        };
        let segment = batch.segment();
        let per_req = self.gso.per_send(segment, self.slot);
        let chunks = batch.bytes().chunks(per_req * segment).take(self.reqs);
        let count = chunks.len();
        for (k, chunk) in chunks.enumerate() {
            let i = self.next;
            if let Err(e) = self.wait_free(i) {
                self.unsubmitted();
                return Err(-e.raw_os_error().unwrap_or(libc::EIO));
            }
            self.next = (i + 1) % self.busy.len();
            let e = self.request(i, chunk, segment, flags);
            // Linked: the datagrams leave in order, and a failure cancels
            // the rest of the batch (which the loop offers again).
            let e = if k + 1 < count {
                e.flags(squeue::Flags::IO_LINK)
            } else {
                e
            };
            self.busy[i] = true;
            self.batch_slots.push(i);
            self.batch_counts.push(chunk.len().div_ceil(segment));
            self.results.push(None);
            self.entries.push(e.user_data(TAG_SEND | i as u64));
        }
        let pushed = self.ring.push_all(&self.entries);
        self.entries.clear();
        if let Err(e) = pushed {
            self.unsubmitted();
            return Err(-e.raw_os_error().unwrap_or(libc::EIO));
        }
        let mut cancel = CancelAfter::default();
        while !self.batch_done() {
            if let Err(e) = self.ring.submit_wait(1, Some(WAIT)) {
                return Err(-e.raw_os_error().unwrap_or(libc::EIO));
            }
            self.reap();
            if !self.batch_done() && cancel.due() {
                // Still pending after a full wait: cancel what is left and
                // take its final answer, so nothing counts twice.
                for k in 0..self.results.len() {
                    if self.results[k].is_none()
                        && self
                            .ring
                            .cancel(TAG_SEND | self.batch_slots[k] as u64)
                            .is_err()
                    {
                        break;
                    }
                }
            }
        }
        let sent: usize = self
            .results
            .iter()
            .zip(&self.batch_counts)
            .take_while(|(r, _)| r.is_some_and(|r| r >= 0))
            .map(|(_, &n)| n)
            .sum();
        if sent > 0 {
            return Ok(sent);
        }
        Err(self
            .results
            .first()
            .copied()
            .flatten()
            .unwrap_or(-libc::EAGAIN))
    }
}

impl UdpTx<KernelUdp> for UringUdpTx {
    fn max_batch(&self) -> usize {
        self.reqs * self.gso.segs
    }

    fn send_batch(&mut self, _ep: &KernelUdp, batch: TxBatch<'_>, wait: Wait) -> io::Result<usize> {
        let mut r = self.send_once(&batch, wait);
        if self
            .gso
            .retry_smaller(&batch, r.err().map(|res| -res), &mut self.used)
        {
            r = self.send_once(&batch, wait);
        }
        let r = r.map_err(|res| match -res {
            libc::ECANCELED | libc::EAGAIN => io::ErrorKind::WouldBlock.into(),
            _ => cqe_err(res),
        });
        self.gso.outcome(&batch, r)
    }

    fn batching(&self) -> Option<Batching> {
        Some(self.used.clone())
    }
}

impl Drop for UringUdpTx {
    fn drop(&mut self) {
        // Every slot's notification must arrive before the staging buffer
        // goes: bounded, so a vanished peer cannot hold the thread.
        let deadline = std::time::Instant::now() + 10 * WAIT;
        while self.busy.iter().any(|&b| b) && std::time::Instant::now() < deadline {
            if self.ring.submit_wait(1, Some(WAIT)).is_err() {
                break;
            }
            self.reap();
        }
        if self.busy.iter().any(|&b| b) {
            // A send the kernel has not answered may still read its slot
            // (and its header): they stay allocated.
            leak(std::mem::take(&mut self.staging));
            leak(self.msgs.take());
        }
        if let Some(z) = &self.zc {
            if z.completed < z.sends {
                self.notes.push(format!(
                    "{} zero-copy notifications had not arrived when the stream ended",
                    z.sends - z.completed
                ));
            }
        }
        crate::engines::record_use(engine_use(
            self.ring.sqpoll,
            self.registered,
            false,
            self.zc,
            std::mem::take(&mut self.notes),
        ));
    }
}

/// The template `msghdr` of a multishot `RECVMSG`: only its name and
/// control lengths matter (connected sockets need no name).
struct MsgTemplate(Box<libc::msghdr>);

// SAFETY: plain data with null pointers; the kernel reads it on the
// owning thread's submissions only.
unsafe impl Send for MsgTemplate {}

/// The header of a single `RECVMSG` (without buffer rings): the kernel
/// writes `msg_flags` and `msg_controllen` back when the receive completes,
/// so it lives beside the receiver, not on a call's stack.
struct OneMsg(Box<(libc::msghdr, libc::iovec)>);

// SAFETY: plain data whose pointers are set right before each request, to
// memory the receiver's caller and the receiver own; used only by the
// owning thread.
unsafe impl Send for OneMsg {}

/// A UDP socket's receiving ring.
pub struct UringUdpRx {
    // Field order matters: the ring (and its registration) goes before the
    // buffer memory it points to.
    ring: Ring,
    fd: types::Fd,
    bufs: Option<BufRing>,
    msg: MsgTemplate,
    /// Fallback without buffer rings: one `RECVMSG` into slot 0.
    one: OneMsg,
    control: Box<ControlBuf>,
    armed: bool,
    /// The multishot receive was armed at least once (for the report).
    multishot_used: bool,
    /// A busy-polled call took one `RECVMSG` although a buffer ring was
    /// there (for the report).
    polled_one: bool,
    slot: usize,
    used: Batching,
    notes: Vec<String>,
}

impl std::fmt::Debug for UringUdpRx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UringUdpRx")
            .field("ring", &self.ring)
            .finish()
    }
}

const TAG_RECV: u64 = 1;

impl UringUdpRx {
    pub(super) fn new(engine: Uring, sock: &UdpSocket, len: usize) -> Result<Self, EngineError> {
        let caps = caps()?;
        let ring = Ring::new(engine)?;
        let mut batch_notes = Vec::new();
        let gro = gro_plan(sock)
            .map_err(|why| batch_notes.push(format!("GRO off: {why}")))
            .is_ok();
        // A whole GRO super-buffer; without GRO one more byte than the
        // test's datagrams, so a longer one shows as truncated, and at
        // least a greeting's worth.
        let slot = if gro { GRO_SLOT } else { (len + 1).max(64) };
        let size = RECVMSG_OUT + RECV_CMSG + slot;
        let entries = (RX_RING_BYTES / size).clamp(RX_RING_MIN, RX_RING_MAX);
        let entries = 1u16 << (usize::BITS - 1 - entries.leading_zeros());
        let mut notes = Vec::new();
        let bufs = match &caps.multishot {
            Ok(()) => match BufRing::new(&ring.ring, entries, size, BGID) {
                Ok(b) => Some(b),
                Err(e) => {
                    notes.push(format!(
                        "no provided buffer ring ({e}): one receive per call"
                    ));
                    None
                }
            },
            Err(why) => {
                notes.push(format!("{why}: one receive per call"));
                None
            }
        };
        // SAFETY: msghdr is plain data; all-zero is a valid empty one.
        let mut msg: Box<libc::msghdr> = Box::new(unsafe { std::mem::zeroed() });
        msg.msg_controllen = RECV_CMSG as _;
        Ok(UringUdpRx {
            ring,
            fd: types::Fd(sock.as_raw_fd()),
            bufs,
            msg: MsgTemplate(msg),
            // SAFETY: msghdr and iovec are plain data; all-zero is empty.
            one: OneMsg(Box::new(unsafe { std::mem::zeroed() })),
            control: Box::new([0; RECV_CMSG]),
            armed: false,
            multishot_used: false,
            polled_one: false,
            slot,
            used: Batching {
                messages_per_call: RX_SLOTS as u32,
                gro,
                notes: batch_notes,
                ..Batching::default()
            },
            notes,
        })
    }

    /// (Re)arms the multishot receive when the kernel ended it.
    fn arm(&mut self) -> io::Result<()> {
        if self.armed {
            return Ok(());
        }
        let e = opcode::RecvMsgMulti::new(self.fd, &*self.msg.0, BGID)
            .build()
            .user_data(TAG_RECV);
        self.ring.push(&e)?;
        self.armed = true;
        self.multishot_used = true;
        Ok(())
    }

    /// Moves completed receives into `slots`; returns how many were
    /// filled, or the first error when none was.
    fn reap(&mut self, slots: &mut RecvSlots) -> io::Result<usize> {
        let mut filled = 0;
        let mut err = None;
        while filled < slots.count() {
            let Some(c) = self.ring.next() else { break };
            if c.user_data() != TAG_RECV {
                continue;
            }
            if !cqueue::more(c.flags()) {
                self.armed = false;
            }
            let res = c.result();
            if res < 0 {
                // -ENOBUFS: the buffer ring ran dry; the datagrams wait in
                // the socket until it is re-armed. Other errors (an ICMP
                // error on the connected socket) go to the loop.
                if res != -libc::ENOBUFS && err.is_none() {
                    err = Some(cqe_err(res));
                }
                continue;
            }
            let (Some(bufs), Some(bid)) = (self.bufs.as_mut(), cqueue::buffer_select(c.flags()))
            else {
                continue;
            };
            let meta = fill(bufs.get(bid, res as usize), &self.msg.0, slots, filled);
            bufs.provide(bid);
            if let Some(m) = meta {
                if m.segment.is_some_and(|s| m.len > s) {
                    self.used.gro_super_buffers += 1;
                }
                *slots.slot_mut(filled).1 = m;
                filled += 1;
            }
        }
        match (filled, err) {
            (0, Some(e)) => Err(e),
            _ => Ok(filled),
        }
    }

    /// Without a buffer ring: one `RECVMSG` into slot 0, waited for.
    fn recv_one(&mut self, slots: &mut RecvSlots, wait: Wait) -> io::Result<usize> {
        let (buf, meta) = slots.slot_mut(0);
        let (msg, iov) = &mut *self.one.0;
        *iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        msg.msg_iov = iov;
        msg.msg_iovlen = 1;
        msg.msg_control = self.control.as_mut_ptr().cast();
        msg.msg_controllen = RECV_CMSG as _;
        msg.msg_flags = 0;
        let flags = match wait {
            Wait::Block => 0,
            Wait::DontWait => libc::MSG_DONTWAIT as u32,
        };
        let e = opcode::RecvMsg::new(self.fd, msg)
            .flags(flags)
            .build()
            .user_data(TAG_RECV);
        self.ring.push(&e)?;
        let res = wait_one(&mut self.ring, TAG_RECV)?;
        if res < 0 {
            return Err(cqe_err(res));
        }
        let msg = &self.one.0 .0;
        // usize on glibc, u32 on musl.
        #[allow(clippy::unnecessary_cast)]
        let clen = (msg.msg_controllen as usize).min(RECV_CMSG);
        *meta = RecvMeta {
            len: res as usize,
            truncated: msg.msg_flags & libc::MSG_TRUNC != 0,
            ..cmsg::parse(&self.control[..clen])
        };
        if meta.segment.is_some_and(|s| meta.len > s) {
            self.used.gro_super_buffers += 1;
        }
        Ok(1)
    }
}

/// Copies one provided buffer's datagram into slot `i`; returns its
/// metadata (`None`: a malformed buffer, which the kernel never writes).
pub(crate) fn fill(
    buf: &[u8],
    tmpl: &libc::msghdr,
    slots: &mut RecvSlots,
    i: usize,
) -> Option<RecvMeta> {
    let out = types::RecvMsgOut::parse(buf, tmpl).ok()?;
    let payload = out.payload_data();
    let (dst, _) = slots.slot_mut(i);
    let n = payload.len().min(dst.len());
    dst[..n].copy_from_slice(&payload[..n]);
    // The walk reads the control messages as bytes: a provided buffer's
    // control area need not be aligned for `cmsghdr`.
    Some(RecvMeta {
        len: n,
        truncated: out.is_payload_truncated() || n < payload.len(),
        ..cmsg::parse(out.control_data())
    })
}

/// Waits for the request tagged `tag` to complete: up to [`WAIT`], then
/// cancels it and waits for its final result (`-ECANCELED` reads as
/// `WouldBlock`). Other completions are dropped (the callers have none).
///
/// It never returns while the request is still in the kernel: the request
/// writes into the caller's buffer, which the caller may reuse or free once
/// this returns. On an error of the ring itself it cancels the request and
/// waits (bounded) for its completion before it returns the error; a ring
/// that cannot even say the request has ended ends the process (the only
/// alternative is letting the kernel write into memory Rust has given back).
fn wait_one(ring: &mut Ring, tag: u64) -> io::Result<i32> {
    let mut cancel = CancelAfter::default();
    loop {
        if let Err(e) = ring.submit_wait(1, Some(WAIT)) {
            settle_one(ring, tag, &e);
            return Err(e);
        }
        if let Some(r) = completion_of(ring, tag) {
            if r == -libc::ECANCELED || r == -libc::EAGAIN {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            return Ok(r);
        }
        if cancel.due() {
            if let Err(e) = ring.cancel(tag) {
                settle_one(ring, tag, &e);
                return Err(e);
            }
        }
    }
}

/// The result of `tag`'s completion, if it is among those queued (the
/// others are dropped).
fn completion_of(ring: &mut Ring, tag: u64) -> Option<i32> {
    let mut found = None;
    while let Some(c) = ring.next() {
        if c.user_data() == tag {
            found = Some(c.result());
        }
    }
    found
}

/// After `err` from the ring: cancels `tag`'s request and waits for its
/// completion, ten rounds of [`WAIT`] at most; aborts if it never comes.
fn settle_one(ring: &mut Ring, tag: u64, err: &io::Error) {
    // A failed cancel may still have been queued; the waits below decide.
    let _ = ring.cancel(tag);
    for _ in 0..10 {
        // An error here is the same broken ring: wait a round and look again.
        if ring.submit_wait(1, Some(WAIT)).is_err() {
            std::thread::sleep(WAIT);
        }
        if completion_of(ring, tag).is_some() {
            return;
        }
    }
    eprintln!(
        "linerate: io_uring failed ({err}) with a receive still in the kernel; \
         stopping rather than letting it write into freed memory"
    );
    std::process::abort();
}

/// Whether a datagram waits in `sock`'s receive queue (`SIOCINQ`: the
/// next datagram's size; an empty datagram reads as none, which only
/// shortens a drain by a datagram linerate never sends as data).
fn queued(sock: &UdpSocket) -> bool {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int through the pointer.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), libc::FIONREAD, &mut n) };
    rc == 0 && n > 0
}

impl UdpRx<KernelUdp> for UringUdpRx {
    fn slots(&self) -> RecvSlots {
        RecvSlots::new(RX_SLOTS, self.slot)
    }

    fn recv_batch(
        &mut self,
        ep: &KernelUdp,
        slots: &mut RecvSlots,
        wait: Wait,
    ) -> io::Result<usize> {
        let sock = ep.socket();
        if self.bufs.is_none() {
            return self.recv_one(slots, wait);
        }
        if wait == Wait::DontWait && !self.multishot_used {
            // Busy polling (only non-blocking calls so far): one
            // non-blocking RECVMSG per call. An armed multishot receive
            // would queue task work for every datagram and interrupt the
            // spinning thread to run it (an IPI each): a 64-byte UDP
            // `rr --busy-poll` took 27 µs per round trip that way, 9.5 µs
            // this way. GRO still hands over a run of datagrams per call.
            // A receiver that has blocked once (a drain after a blocking
            // receive) goes on with the multishot request.
            if !self.polled_one {
                self.polled_one = true;
                self.used.messages_per_call = 1;
            }
            return self.recv_one(slots, wait);
        }
        let n = self.reap(slots)?;
        if n > 0 {
            return Ok(n);
        }
        self.arm()?;
        // Entering the kernel runs the pending receive work, so a
        // non-blocking call still sees what is queued in the socket.
        let timeout = match wait {
            Wait::Block => Some(WAIT),
            Wait::DontWait => None,
        };
        self.ring.submit_wait(1, timeout)?;
        let n = self.reap(slots)?;
        if n > 0 {
            return Ok(n);
        }
        if !self.armed || (wait == Wait::DontWait && queued(sock)) {
            // The request ended while we waited (buffers ran dry), or the
            // socket still holds datagrams the kernel has not moved to the
            // ring yet (with SQPOLL its thread does that, when it runs):
            // a drain must not stop before they are read. Re-arm and wait.
            self.arm()?;
            self.ring.submit_wait(1, Some(WAIT))?;
            let n = self.reap(slots)?;
            if n > 0 {
                return Ok(n);
            }
        }
        Err(io::ErrorKind::WouldBlock.into())
    }

    fn batching(&self) -> Option<Batching> {
        Some(self.used.clone())
    }
}

impl UringUdpRx {
    /// Cancels the multishot receive and waits (bounded) for its last
    /// completion, so the kernel writes no buffer after this returns.
    fn disarm(&mut self) {
        if !self.armed || self.ring.cancel(TAG_RECV).is_err() {
            return;
        }
        for _ in 0..10 {
            if self.ring.submit_wait(1, Some(WAIT)).is_err() {
                return;
            }
            while let Some(c) = self.ring.next() {
                if c.user_data() == TAG_RECV && !cqueue::more(c.flags()) {
                    self.armed = false;
                }
                if let (Some(b), Some(bid)) = (self.bufs.as_mut(), cqueue::buffer_select(c.flags()))
                {
                    b.provide(bid);
                }
            }
            if !self.armed {
                return;
            }
        }
    }
}

impl Drop for UringUdpRx {
    fn drop(&mut self) {
        self.disarm();
        let multishot = self.multishot_used;
        if self.polled_one {
            self.notes.push(
                "non-blocking (busy-polled) calls: one RECVMSG each, no multishot receive".into(),
            );
        }
        if let Some(b) = self.bufs.take() {
            if self.armed {
                // The kernel may still own buffers: leave the memory to the
                // process rather than free what it could write.
                std::mem::forget(b);
            } else {
                b.unregister(&self.ring.ring);
            }
        }
        crate::engines::record_use(engine_use(
            self.ring.sqpoll,
            false,
            multishot,
            None,
            std::mem::take(&mut self.notes),
        ));
    }
}
