//! The `batch` engine's system calls: many datagrams per call.
//!
//! - [`MmsgTx`]: `sendmmsg(2)` of messages that each carry one contiguous
//!   run of equal datagrams and a `UDP_SEGMENT` control message (generic
//!   segmentation offload: the kernel cuts the run into datagrams as late as
//!   it can), or one datagram per message without GSO.
//! - [`MmsgRx`]: `recvmmsg(2)` into caller-owned slots. With `UDP_GRO` on,
//!   the kernel hands over runs of equal datagrams as one super-buffer with
//!   the segment size in a control message (the last segment may be short;
//!   [`RecvSlots::datagrams`](crate::engines::RecvSlots::datagrams) splits
//!   it). Each message also carries its kernel receive timestamp
//!   (`SO_TIMESTAMPNS`) and the socket's drop counter (`SO_RXQ_OVFL`).
//!
//! Nothing here allocates after construction. The header arrays are
//! rebuilt from live borrows right before each call, so no raw pointer
//! outlives the borrow it came from.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::AsRawFd;

use crate::cmsg::{self, ControlBuf, RECV_CMSG};
use crate::engines::RecvMeta;
use crate::socket::set_int;

/// Largest UDP payload of one IPv4 datagram (65535 − 20 IP − 8 UDP). A GSO
/// send is one such datagram until the kernel segments it, so its segments
/// add up to at most this (IPv6 would allow 20 bytes more; one limit keeps
/// both families simple).
pub const GSO_MAX_BYTES: usize = 65_507;

/// Segments per GSO send, as far as the kernel takes them: its
/// `UDP_MAX_SEGMENTS` is 128 on recent kernels (6.18 here) and 64 on older ones (a send of more
/// is refused with `EINVAL`, nothing sent). The sender starts with 128 and
/// drops to [`GSO_PORTABLE_SEGMENTS`] if its first send is refused so (see
/// `BatchUdpTx::send_batch`; the report says so). Measured at 64 B on an
/// idle 2-vCPU VM (kernel 6.18, loopback, sender and receiver on CPUs of
/// their own, 4 runs each, interleaved, 2026-11-23): 128 segments received
/// 15.6–20.2 M datagrams/s (median 17.7 M) with no loss against 8.1–14.5 M
/// (median 12.8 M) for 64 — what iperf3 3.21 `--gsro` sends per call
/// (8 KiB of 64-byte datagrams) on this kernel too.
pub const GSO_MAX_SEGMENTS: usize = 128;

/// Segments per GSO send that every kernel with `UDP_SEGMENT` (4.18+)
/// takes.
pub const GSO_PORTABLE_SEGMENTS: usize = 64;

// How the per-call counts below were chosen (issue 8): `linerate udp -b 0
// -l 64|1472|8972 -t 2` on loopback, release build, batch engine on both
// sides, each variant alternated with the others, 3 runs each, on a shared
// 2-CPU VM (load average 16: spreads of 3× between runs of one variant).
// Median received datagrams/s:
//
// | variant (GSO msgs/call, recvmmsg msgs) | 64 B   | 1472 B | 8972 B |
// |----------------------------------------|--------|--------|--------|
// | syscall engine                         | 0.11 M | 0.11 M | 0.10 M |
// | 4 / 64 (chosen)                        | 4.17 M | 1.60 M | 0.26 M |
// | 1 / 64                                 | 2.25 M | 1.57 M |   –    |
// | 16 / 64                                | 0.88 M | 1.26 M | 0.18 M |
// | 4 / 16                                 | 2.25 M | 1.77 M |   –    |
//
// 16 messages per call was worse at every size (bigger bursts overflow
// the receiver's buffer sooner); 1 and 4, and 16 or 64 receive messages,
// are within the noise of each other: 4 and 64 had the best or a
// near-best median everywhere.

/// Messages per `sendmmsg` with GSO: up to 4 × 64 KiB per call.
pub const GSO_MSGS_PER_CALL: usize = 4;

/// Messages (= datagrams) per `sendmmsg` without GSO: as many datagrams as
/// one GSO message carries at 64 B.
pub const PLAIN_MSGS_PER_CALL: usize = 64;

/// Messages per `recvmmsg`. With GRO each holds up to 64 KiB.
pub const RECV_MSGS_PER_CALL: usize = 64;

/// Most messages one call of [`MmsgTx`] or [`MmsgRx`] carries: their
/// header arrays live on the stack of each call (built from live borrows
/// right before the syscall, so no raw pointer is kept between calls),
/// uninitialised but for the entries the call uses: zeroing all 64 (5 KiB)
/// on every call was 44% of a paced receiver's user-space instructions,
/// where a call returns one datagram (callgrind, issue 24's bench).
pub const MAX_MSGS_PER_CALL: usize = 64;

/// Header arrays for one call, none initialised.
fn uninit_headers() -> (
    [MaybeUninit<libc::mmsghdr>; MAX_MSGS_PER_CALL],
    [MaybeUninit<libc::iovec>; MAX_MSGS_PER_CALL],
) {
    (
        [const { MaybeUninit::uninit() }; MAX_MSGS_PER_CALL],
        [const { MaybeUninit::uninit() }; MAX_MSGS_PER_CALL],
    )
}

/// Receive slot with GRO: the largest super-buffer the kernel builds (one
/// GSO send, ≤ 65535 bytes), so none is ever truncated.
pub const GRO_SLOT: usize = 65_536;

/// Segments per GSO message for datagrams of `len` bytes, at most `max`
/// ([`GSO_MAX_SEGMENTS`], or [`GSO_PORTABLE_SEGMENTS`] on older kernels).
pub fn segments_per_send(len: usize, max: usize) -> usize {
    (GSO_MAX_BYTES / len.max(1)).clamp(1, max.max(1))
}

/// Control message carrying the GSO segment size: exactly the bytes of
/// `CMSG_SPACE(sizeof(u16))` (a 16-byte `cmsghdr`, 2 bytes of data, padding
/// to 8), laid out by `repr(C)` so it needs no pointer arithmetic.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct SegmentCmsg {
    hdr: libc::cmsghdr,
    size: u16,
    _pad: [u8; 6],
}

impl SegmentCmsg {
    pub(crate) fn new(size: u16) -> Self {
        // CMSG_LEN(2): header plus the data, without trailing padding.
        let len = std::mem::size_of::<libc::cmsghdr>() + std::mem::size_of::<u16>();
        // SAFETY: cmsghdr is plain integers, valid all zero; zeroed rather
        // than a struct literal because musl's has padding fields (the
        // static build).
        let mut hdr: libc::cmsghdr = unsafe { std::mem::zeroed() };
        hdr.cmsg_len = len as _;
        hdr.cmsg_level = libc::SOL_UDP;
        hdr.cmsg_type = libc::UDP_SEGMENT;
        SegmentCmsg {
            hdr,
            size,
            _pad: [0; 6],
        }
    }
}

/// A zeroed `mmsghdr`: plain data whose pointers are null.
fn empty_mmsghdr() -> libc::mmsghdr {
    // SAFETY: mmsghdr is a C struct of integers and pointers, for which
    // all-zero bytes are a valid (null, empty) value.
    unsafe { std::mem::zeroed() }
}

/// `sendmmsg` of a contiguous buffer of datagrams as up to `max_msgs`
/// messages, each a run of datagrams with one `UDP_SEGMENT` control message
/// (GSO) or a single datagram.
#[derive(Debug, Clone, Copy)]
pub struct MmsgTx {
    max_msgs: usize,
    /// Send flags added to every call (the zero-copy engine's
    /// `MSG_ZEROCOPY`).
    flags: libc::c_int,
}

impl MmsgTx {
    /// Up to `max_msgs` messages per call (at most [`MAX_MSGS_PER_CALL`]).
    pub fn new(max_msgs: usize) -> Self {
        MmsgTx {
            max_msgs: max_msgs.clamp(1, MAX_MSGS_PER_CALL),
            flags: 0,
        }
    }

    /// The same, with `flags` added to every send.
    pub fn with_flags(self, flags: libc::c_int) -> Self {
        MmsgTx { flags, ..self }
    }

    /// Most messages per call.
    pub fn max_msgs(&self) -> usize {
        self.max_msgs
    }

    /// Sends `buf`, datagrams of `segment` bytes (the last may be shorter),
    /// `per_msg` datagrams per message (`per_msg > 1`: GSO; the caller keeps
    /// `per_msg × segment` within [`GSO_MAX_BYTES`] and `per_msg` within
    /// [`GSO_MAX_SEGMENTS`]), in one `sendmmsg` of at most
    /// [`Self::max_msgs`] messages. Returns how many datagrams the kernel
    /// took — whole messages, so a prefix of `buf` — or an error when it
    /// took none.
    pub fn send(
        &mut self,
        sock: &impl AsRawFd,
        buf: &[u8],
        segment: usize,
        per_msg: usize,
        dontwait: bool,
    ) -> io::Result<usize> {
        let segment = segment.max(1);
        let per_msg = if segment > usize::from(u16::MAX) {
            1
        } else {
            per_msg.max(1)
        };
        let datagrams = buf.len().div_ceil(segment);
        if datagrams == 0 {
            return Ok(0);
        }
        // One control message for every message: all segments of a call
        // have the same size, and the kernel only reads it.
        let mut cmsg = SegmentCmsg::new(u16::try_from(segment).unwrap_or(u16::MAX));
        let cmsg: *mut SegmentCmsg = &mut cmsg;
        let (mut hdrs, mut iovs) = uninit_headers();
        let msg_bytes = segment * per_msg;
        let mut nmsgs = 0usize;
        for (chunk, (h, iov)) in buf
            .chunks(msg_bytes)
            .zip(hdrs.iter_mut().zip(iovs.iter_mut()))
            .take(self.max_msgs)
        {
            let iov = iov.write(libc::iovec {
                iov_base: chunk.as_ptr() as *mut libc::c_void,
                iov_len: chunk.len(),
            });
            let h = &mut h.write(empty_mmsghdr()).msg_hdr;
            h.msg_iov = iov;
            h.msg_iovlen = 1;
            // A lone datagram needs no segmentation (and skips the GSO checks).
            if chunk.len() > segment {
                h.msg_control = cmsg.cast();
                h.msg_controllen = std::mem::size_of::<SegmentCmsg>() as _;
            } else {
                h.msg_control = std::ptr::null_mut();
                h.msg_controllen = 0;
            }
            nmsgs += 1;
        }
        let flags = self.flags | if dontwait { libc::MSG_DONTWAIT } else { 0 };
        // SAFETY: hdrs[..nmsgs] are initialised (the loop above wrote each)
        // and point at iovecs and a control message on this stack frame and
        // at disjoint ranges of buf, all live for the call; msg_name is
        // null (the socket is connected). The kernel reads only the first
        // nmsgs entries, and only reads through them (the *mut casts are
        // sendmmsg's C types).
        let rc = unsafe {
            libc::sendmmsg(
                sock.as_raw_fd(),
                hdrs.as_mut_ptr().cast::<libc::mmsghdr>(),
                nmsgs as _,
                flags as _,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((rc as usize * per_msg).min(datagrams))
    }
}

/// `recvmmsg` into caller-owned slots, with a control buffer per message.
pub struct MmsgRx {
    ctrl: Vec<ControlBuf>,
}

impl std::fmt::Debug for MmsgRx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MmsgRx({} messages)", self.ctrl.len())
    }
}

impl MmsgRx {
    /// Up to `max_msgs` messages per call (at most [`MAX_MSGS_PER_CALL`]).
    pub fn new(max_msgs: usize) -> Self {
        MmsgRx {
            ctrl: vec![[0; RECV_CMSG]; max_msgs.clamp(1, MAX_MSGS_PER_CALL)],
        }
    }

    /// One `recvmmsg` into `slots`, one message per slot (at most
    /// `meta.len()` and [`Self::new`]'s count): waits (up to the socket's
    /// receive timeout) for the first message unless `dontwait`, then takes
    /// whatever else is queued. Fills `meta[i]` for each message received
    /// and returns how many; an error when none was.
    pub fn recv<'a>(
        &mut self,
        sock: &impl AsRawFd,
        slots: impl Iterator<Item = &'a mut [u8]>,
        meta: &mut [RecvMeta],
        dontwait: bool,
    ) -> io::Result<usize> {
        let (mut hdrs, mut iovs) = uninit_headers();
        let mut n = 0usize;
        for ((slot, ctrl), (h, iov)) in slots
            .zip(self.ctrl.iter_mut())
            .zip(hdrs.iter_mut().zip(iovs.iter_mut()))
            .take(meta.len())
        {
            let iov = iov.write(libc::iovec {
                iov_base: slot.as_mut_ptr().cast(),
                iov_len: slot.len(),
            });
            let h = h.write(empty_mmsghdr());
            h.msg_len = 0;
            h.msg_hdr.msg_name = std::ptr::null_mut();
            h.msg_hdr.msg_namelen = 0;
            h.msg_hdr.msg_iov = iov;
            h.msg_hdr.msg_iovlen = 1;
            h.msg_hdr.msg_control = ctrl.as_mut_ptr().cast();
            h.msg_hdr.msg_controllen = RECV_CMSG as _;
            h.msg_hdr.msg_flags = 0;
            n += 1;
        }
        if n == 0 {
            return Ok(0);
        }
        let flags = libc::MSG_WAITFORONE | if dontwait { libc::MSG_DONTWAIT } else { 0 };
        // SAFETY: hdrs[..n] are initialised (the loop above wrote each) and
        // point at their own iovec and control buffer (on this stack frame
        // and in self) and at a distinct caller slot, each borrowed mutably
        // for the call with its true length; the kernel touches only the
        // first n entries; no timeout pointer (the socket's SO_RCVTIMEO
        // bounds the wait).
        let rc = unsafe {
            libc::recvmmsg(
                sock.as_raw_fd(),
                hdrs.as_mut_ptr().cast::<libc::mmsghdr>(),
                n as _,
                flags as _,
                std::ptr::null_mut(),
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        let got = (rc as usize).min(n);
        for (((h, iov), ctrl), m) in hdrs
            .iter()
            .zip(&iovs)
            .zip(&self.ctrl)
            .zip(meta.iter_mut())
            .take(got)
        {
            // SAFETY: got ≤ n, and the loop above initialised the first n.
            let (h, iov) = unsafe { (h.assume_init_ref(), iov.assume_init_ref()) };
            // usize on glibc, u32 on musl.
            #[allow(clippy::unnecessary_cast)]
            let controllen = (h.msg_hdr.msg_controllen as usize).min(RECV_CMSG);
            *m = cmsg::parse(&ctrl[..controllen]);
            m.len = (h.msg_len as usize).min(iov.iov_len);
            m.truncated = h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
        }
        Ok(got)
    }
}

/// Turns on UDP GRO for `sock`: the kernel may then deliver runs of equal
/// datagrams as one message (see `segments`).
pub fn enable_gro(sock: &impl AsRawFd) -> io::Result<()> {
    set_int(sock, libc::SOL_UDP, libc::UDP_GRO, 1)
}

/// The path MTU of a connected socket (`IP_MTU` / `IPV6_MTU`), which bounds
/// a GSO segment: the kernel refuses a send whose segment and headers
/// exceed it.
pub fn path_mtu(sock: &impl AsRawFd, ipv6: bool) -> io::Result<usize> {
    let (level, opt) = if ipv6 {
        (libc::IPPROTO_IPV6, libc::IPV6_MTU)
    } else {
        (libc::IPPROTO_IP, libc::IP_MTU)
    };
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: v is a live int and len its size; the kernel writes at most len bytes.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            level,
            opt,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(usize::try_from(v).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::caps::caps;
    use crate::engines::RecvSlots;
    use linerate_proto::datagram::{
        check_pattern, fill_pattern, DatagramHeader, Header, FLAG_PATTERN, HEADER_LEN,
    };
    use std::net::UdpSocket;
    use std::time::Duration;

    fn pair() -> (UdpSocket, UdpSocket) {
        let (tx, rx) = crate::test_pair::udp_pair();
        rx.set_read_timeout(Some(Duration::from_secs(2)))
            .expect("timeout");
        (tx, rx)
    }

    /// `count` test datagrams of `len` bytes from sequence `first` on, back
    /// to back in one buffer.
    fn datagrams(len: usize, first: u64, count: u64) -> Vec<u8> {
        let mut buf = vec![0u8; len * count as usize];
        for (d, seq) in buf.chunks_mut(len).zip(first..) {
            Header {
                flags: FLAG_PATTERN,
                stream: 7,
                seq,
                send_ns: seq * 10,
                len: len as u32,
            }
            .emit(d);
            fill_pattern(&mut d[HEADER_LEN..], seq);
        }
        buf
    }

    fn check(d: &[u8], seq: u64, len: usize) {
        assert_eq!(d.len(), len);
        let h = DatagramHeader::new_checked(d)
            .and_then(|v| v.parse())
            .expect("valid header");
        assert_eq!((h.stream, h.seq, h.send_ns), (7, seq, seq * 10));
        check_pattern(&d[HEADER_LEN..], seq).expect("payload intact");
    }

    fn recv(rx: &mut MmsgRx, sock: &UdpSocket, slots: &mut RecvSlots) -> usize {
        let (bufs, meta) = slots.parts_mut();
        rx.recv(sock, bufs, meta, false).expect("recvmmsg")
    }

    fn skip(why: &str) {
        eprintln!("SKIPPED: {why}");
    }

    fn enable_rx_meta(sock: &UdpSocket) {
        set_int(sock, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1).expect("SO_TIMESTAMPNS");
        set_int(sock, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1).expect("SO_RXQ_OVFL");
    }

    #[test]
    fn segments_per_send_respects_both_limits() {
        assert_eq!(segments_per_send(64, GSO_MAX_SEGMENTS), 128);
        assert_eq!(segments_per_send(64, GSO_PORTABLE_SEGMENTS), 64);
        assert_eq!(segments_per_send(1472, GSO_MAX_SEGMENTS), 44);
        assert_eq!(segments_per_send(8972, GSO_MAX_SEGMENTS), 7);
        assert_eq!(segments_per_send(65507, GSO_MAX_SEGMENTS), 1);
        assert_eq!(segments_per_send(0, GSO_PORTABLE_SEGMENTS), 64);
    }

    #[test]
    fn gso_send_arrives_as_separate_datagrams_with_correct_headers() {
        if let Err(e) = &caps().udp_segment {
            return skip(&format!("no GSO: {e}"));
        }
        let (tx, rx) = pair();
        let len = 1000;
        // 25 datagrams, 10 per message: two full messages and one of five.
        let buf = datagrams(len, 0, 25);
        let mut out = MmsgTx::new(3);
        assert_eq!(out.send(&tx, &buf, len, 10, false).expect("sendmmsg"), 25);
        // Without GRO on the receiver, every datagram arrives on its own.
        let mut inp = MmsgRx::new(8);
        let mut slots = RecvSlots::new(8, 2048);
        let mut seq = 0u64;
        while seq < 25 {
            let n = recv(&mut inp, &rx, &mut slots);
            for i in 0..n {
                let (d, m) = slots.get(i);
                assert_eq!((m.segment, m.truncated), (None, false));
                check(d, seq, len);
                seq += 1;
            }
        }
        let (bufs, meta) = slots.parts_mut();
        assert!(
            inp.recv(&rx, bufs, meta, true).is_err(),
            "nothing more queued"
        );
    }

    #[test]
    fn sendmmsg_takes_at_most_its_message_count() {
        let (tx, rx) = pair();
        let buf = datagrams(200, 100, 20);
        // Without GSO: one datagram per message, 16 messages per call.
        let mut out = MmsgTx::new(16);
        assert_eq!(out.send(&tx, &buf, 200, 1, false).expect("sendmmsg"), 16);
        assert_eq!(
            out.send(&tx, &buf[16 * 200..], 200, 1, false)
                .expect("rest"),
            4
        );
        let mut inp = MmsgRx::new(32);
        let mut slots = RecvSlots::new(32, 256);
        let mut got = 0;
        while got < 20 {
            let n = recv(&mut inp, &rx, &mut slots);
            for i in 0..n {
                check(slots.get(i).0, 100 + got, 200);
                got += 1;
            }
        }
    }

    #[test]
    fn gro_receive_splits_a_super_buffer_with_a_short_last_segment() {
        if let Err(e) = caps().udp_segment.as_ref().and(caps().udp_gro.as_ref()) {
            return skip(&format!("no GSO/GRO: {e}"));
        }
        let (tx, rx) = pair();
        enable_gro(&rx).expect("UDP_GRO");
        enable_rx_meta(&rx);
        // Five 1000-byte datagrams and a 300-byte one in one GSO send: the
        // kernel takes a short last segment.
        let mut sent = vec![0u8; 5300];
        for (i, d) in sent.chunks_mut(1000).enumerate() {
            d.fill(i as u8 + 1);
        }
        let mut one = MmsgTx::new(1);
        assert_eq!(one.send(&tx, &sent, 1000, 64, false).expect("GSO send"), 6);
        let mut inp = MmsgRx::new(4);
        let mut slots = RecvSlots::new(4, GRO_SLOT);
        assert_eq!(
            recv(&mut inp, &rx, &mut slots),
            1,
            "loopback keeps the run as one super-buffer"
        );
        let m = *slots.get(0).1;
        assert_eq!((m.len, m.segment, m.truncated), (5300, Some(1000), false));
        assert!(m.stamp_ns.is_some(), "SO_TIMESTAMPNS per message");
        assert_eq!(m.drops, None, "no drop yet: the kernel attaches no counter");
        let segs: Vec<&[u8]> = slots.datagrams(0).collect();
        assert_eq!(
            segs.iter().map(|s| s.len()).collect::<Vec<_>>(),
            [1000, 1000, 1000, 1000, 1000, 300]
        );
        for (i, s) in segs.iter().enumerate() {
            assert!(s.iter().all(|&b| b == i as u8 + 1), "segment {i} intact");
        }
    }

    #[test]
    fn gso_and_gro_together_keep_verify_payloads_intact() {
        if let Err(e) = caps().udp_segment.as_ref().and(caps().udp_gro.as_ref()) {
            return skip(&format!("no GSO/GRO: {e}"));
        }
        let (tx, rx) = pair();
        enable_gro(&rx).expect("UDP_GRO");
        crate::udp::set_buffers(&rx, 8 << 20).expect("buffers");
        let len = 1472;
        let per_call = segments_per_send(len, GSO_PORTABLE_SEGMENTS) * GSO_MSGS_PER_CALL;
        let mut out = MmsgTx::new(GSO_MSGS_PER_CALL);
        let mut next_send = 0u64;
        for _ in 0..4 {
            let buf = datagrams(len, next_send, per_call as u64);
            let n = out
                .send(
                    &tx,
                    &buf,
                    len,
                    segments_per_send(len, GSO_PORTABLE_SEGMENTS),
                    false,
                )
                .expect("send");
            assert_eq!(n, per_call);
            next_send += per_call as u64;
        }
        let mut inp = MmsgRx::new(RECV_MSGS_PER_CALL);
        let mut slots = RecvSlots::new(RECV_MSGS_PER_CALL, GRO_SLOT);
        let mut next_recv = 0u64;
        while next_recv < next_send {
            let n = recv(&mut inp, &rx, &mut slots);
            for i in 0..n {
                for d in slots.datagrams(i) {
                    check(d, next_recv, len);
                    next_recv += 1;
                }
            }
        }
        assert_eq!(next_recv, next_send);
    }

    #[test]
    fn each_message_carries_the_drop_counter_once_drops_happened() {
        let (tx, rx) = pair();
        enable_rx_meta(&rx);
        // The smallest receive buffer the kernel allows holds a few datagrams.
        socket2::SockRef::from(&rx)
            .set_recv_buffer_size(1)
            .expect("rcvbuf");
        let buf = datagrams(1000, 0, 64);
        let mut out = MmsgTx::new(64);
        assert_eq!(out.send(&tx, &buf, 1000, 1, false).expect("send"), 64);
        let mut inp = MmsgRx::new(64);
        let mut slots = RecvSlots::new(64, 2048);
        let n = recv(&mut inp, &rx, &mut slots);
        assert!(n < 64, "some datagrams were dropped");
        let dropped = crate::engines::endpoint::socket_drops(&rx).expect("SO_MEMINFO");
        assert_eq!(dropped, 64 - n as u64);
        // Those queued before the drops carry no counter; the next one does.
        assert_eq!(
            out.send(&tx, &buf[..1000], 1000, 1, false).expect("send"),
            1
        );
        assert_eq!(recv(&mut inp, &rx, &mut slots), 1);
        let m = slots.get(0).1;
        assert_eq!(m.drops, Some(dropped as u32));
        assert!(m.stamp_ns.is_some());
    }
}
