//! The `batch` engine: many datagrams or buffers per system call.
//!
//! - UDP send: `sendmmsg` of GSO messages (`UDP_SEGMENT`: one contiguous
//!   run of up to 128 equal datagrams per message, 64 on older kernels, cut
//!   by the kernel), or of one datagram per message without GSO.
//! - UDP receive: `recvmmsg` into a ring of slots; with `UDP_GRO` the kernel
//!   hands over runs of datagrams as one super-buffer with the segment size
//!   in its [`RecvMeta`](super::RecvMeta), which the generic receive loop splits, so every
//!   datagram's header, sequence number and (with `--verify`) payload is
//!   checked exactly as with the syscall engine.
//! - TCP send: `write`, and one `writev` of the stream's buffer repeated up
//!   to [`TCP_WRITE_BYTES`] where the loop allows it. TCP receive: the
//!   syscall engine's (`read`, or `recv(MSG_TRUNC)` with `--skip-rx-copy`,
//!   which every engine offers).
//!
//! GSO and GRO are each on, off, or `auto` (on where the kernel and the
//! path allow it; the stream's report says why one is off). An option asked
//! for explicitly that the kernel lacks is refused with the reason, never
//! replaced.

pub mod mmsg;

use std::io::{self, IoSlice};
use std::net::UdpSocket;

use linerate_proto::measure::Batching;

use self::mmsg::{
    enable_gro, path_mtu, segments_per_send, MmsgRx, MmsgTx, GRO_SLOT, GSO_MAX_SEGMENTS,
    GSO_MSGS_PER_CALL, GSO_PORTABLE_SEGMENTS, PLAIN_MSGS_PER_CALL, RECV_MSGS_PER_CALL,
};
use super::tcp_endpoint::TcpEndpoint;
use super::{Engine, EngineKind, KernelUdp, RecvSlots, TcpTx, TxBatch, UdpRx, UdpTx, Wait};
use crate::caps::caps;
use crate::EngineError;

/// Bytes per TCP `writev`: the stream's buffer repeated up to this much.
/// 1 MiB is also `linerate tcp`'s default `--len` (the least CPU per byte
/// on both sides on an idle 2-core VM; docs/design/numbers.md, "Defaults and
/// why"), so with the default length this engine writes what `syscall`
/// does; it matters for shorter `--len`. More only holds the socket lock
/// longer.
pub const TCP_WRITE_BYTES: usize = 1 << 20;

/// Slots of a non-GRO receive ring are one byte longer than a datagram (so
/// a longer one shows as truncated) and never shorter than this, so a
/// control greeting repeated on the data socket fits.
const MIN_SLOT: usize = 128;

/// What a UDP datagram adds on the wire: 8 bytes of UDP header after an
/// IPv4 header of 20 bytes (no options) or an IPv6 header of 40. A
/// segment fits the path when its payload and these fit the MTU — 1472
/// bytes on a 1500-byte IPv4 path, 1452 over IPv6.
const UDP_IPV4_HEADERS: usize = 28;
const UDP_IPV6_HEADERS: usize = 48;

/// On, off, or on where the kernel and path allow it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Toggle {
    #[default]
    Auto,
    On,
    Off,
}

/// The batch engine and its options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Batch {
    /// UDP senders: `UDP_SEGMENT`.
    pub gso: Toggle,
    /// UDP receivers: `UDP_GRO`.
    pub gro: Toggle,
}

impl Batch {
    /// Everything on where possible.
    pub const AUTO: Batch = Batch {
        gso: Toggle::Auto,
        gro: Toggle::Auto,
    };

    /// The options that differ from [`Self::AUTO`], as flags.
    pub fn flags(self) -> impl Iterator<Item = &'static str> {
        let toggle = |t: Toggle, on: &'static str, off: &'static str| match t {
            Toggle::Auto => None,
            Toggle::On => Some(on),
            Toggle::Off => Some(off),
        };
        [
            toggle(self.gso, "--gso", "--no-gso"),
            toggle(self.gro, "--gro", "--no-gro"),
        ]
        .into_iter()
        .flatten()
    }

    /// Why this kernel cannot run these options (`None`: it can): an
    /// option asked for explicitly that the kernel lacks.
    pub fn unavailable(self) -> Option<String> {
        let c = caps();
        if let (Toggle::On, Err(e)) = (self.gso, &c.udp_segment) {
            return Some(format!("--gso: {e}"));
        }
        if let (Toggle::On, Err(e)) = (self.gro, &c.udp_gro) {
            return Some(format!("--gro: {e}"));
        }
        None
    }

    /// Datagrams per GSO message for this stream (1: no GSO). `notes` gets
    /// why `auto` left GSO off; an explicit `--gso` the kernel or path
    /// cannot do is refused.
    fn gso_segments(
        self,
        sock: &UdpSocket,
        len: usize,
        notes: &mut Vec<String>,
    ) -> Result<usize, EngineError> {
        if self.gso == Toggle::Off {
            return Ok(1);
        }
        match (gso_plan(sock, len), self.gso) {
            (Ok(segs), _) => Ok(segs),
            (Err(why), Toggle::On) => Err(unavailable(self, format!("--gso: {why}"))),
            (Err(why), _) => {
                notes.push(format!("GSO off: {why}"));
                Ok(1)
            }
        }
    }

    /// Turns GRO on for a receiving socket as asked.
    fn gro(self, sock: &UdpSocket, notes: &mut Vec<String>) -> Result<bool, EngineError> {
        if self.gro == Toggle::Off {
            return Ok(false);
        }
        match (gro_plan(sock), self.gro) {
            (Ok(()), _) => Ok(true),
            (Err(why), Toggle::On) => Err(unavailable(self, format!("--gro: {why}"))),
            (Err(why), _) => {
                notes.push(format!("GRO off: {why}"));
                Ok(false)
            }
        }
    }
}

/// Datagrams of `len` bytes per GSO send on `sock` (at least 2), or why
/// GSO cannot be used there: the kernel lacks `UDP_SEGMENT`, the datagrams
/// do not fit the path MTU, or two do not fit one send. Shared by every
/// engine that segments (`batch`, `uring`).
pub(crate) fn gso_plan(sock: &UdpSocket, len: usize) -> Result<usize, String> {
    if let Err(e) = &caps().udp_segment {
        return Err(e.to_string());
    }
    let v6 = sock.peer_addr().is_ok_and(|a| a.is_ipv6());
    let mtu = path_mtu(sock, v6).unwrap_or(0);
    // An IPv6 socket talking to a v4-mapped address sends IPv4 packets.
    let v6_wire = sock.peer_addr().is_ok_and(|a| match a {
        std::net::SocketAddr::V6(a) => a.ip().to_ipv4_mapped().is_none(),
        std::net::SocketAddr::V4(_) => false,
    });
    let headers = if v6_wire {
        UDP_IPV6_HEADERS
    } else {
        UDP_IPV4_HEADERS
    };
    if len + headers > mtu {
        return Err(format!(
            "{len}-byte datagrams do not fit the path MTU ({mtu} bytes); \
             the kernel segments only datagrams that need no IP fragmentation"
        ));
    }
    let segs = segments_per_send(len, GSO_MAX_SEGMENTS);
    if segs < 2 {
        return Err(format!(
            "{len}-byte datagrams leave no room for two in one send"
        ));
    }
    Ok(segs)
}

/// Turns `UDP_GRO` on for `sock`, or says why it cannot be.
pub(crate) fn gro_plan(sock: &UdpSocket) -> Result<(), String> {
    caps()
        .udp_gro
        .clone()
        .map_err(|e| e.to_string())
        .and_then(|()| enable_gro(sock).map_err(|e| format!("UDP_GRO: {e}")))
}

/// A GSO send refused as the first of a stream: the kernel checks GSO
/// against the route only when sending, so this is about GSO on the path
/// (`EINVAL`, `EMSGSIZE`, `EIO`); other errors pass through.
pub(crate) fn gso_refused(e: io::Error) -> io::Error {
    if matches!(
        e.raw_os_error(),
        Some(libc::EINVAL | libc::EMSGSIZE | libc::EIO)
    ) {
        io::Error::new(
            e.kind(),
            format!("the kernel refused UDP GSO on this path ({e}); run with --no-gso"),
        )
    } else {
        e
    }
}

/// What a GSO sender learns from its first sends, shared by the engines
/// that segment (`batch`, `uring`): the segments per send, dropped once to
/// [`GSO_PORTABLE_SEGMENTS`] where the kernel refuses more, and a first
/// send's refusal explained as GSO on this path.
#[derive(Debug)]
pub(crate) struct GsoSends {
    /// Datagrams per send (1: no GSO).
    pub segs: usize,
    /// No send has succeeded yet (a GSO refusal then means the path).
    first: bool,
    /// A send of more than [`GSO_PORTABLE_SEGMENTS`] segments went out.
    big_ok: bool,
}

impl GsoSends {
    pub fn new(segs: usize) -> Self {
        GsoSends {
            segs,
            first: true,
            big_ok: false,
        }
    }

    /// Datagrams of `segment` bytes per send, when a send's staging room
    /// holds `room` bytes: the GSO segments as far as they fit (1 without
    /// GSO, or for a segment size `UDP_SEGMENT` cannot carry).
    pub fn per_send(&self, segment: usize, room: usize) -> usize {
        if self.segs > 1 && segment <= usize::from(u16::MAX) {
            self.segs.min(room / segment.max(1)).max(1)
        } else {
            1
        }
    }

    fn big(batch: &TxBatch<'_>) -> bool {
        batch.bytes().len() > GSO_PORTABLE_SEGMENTS * batch.segment()
    }

    /// After `batch` failed with errno `err`: whether to send it again
    /// with fewer segments per send. An older kernel takes at most 64 and
    /// refuses more with `EINVAL`, sending nothing: drop to 64 once,
    /// before any send of more has succeeded, and say so in `used`.
    pub fn retry_smaller(
        &mut self,
        batch: &TxBatch<'_>,
        err: Option<i32>,
        used: &mut Batching,
    ) -> bool {
        if !Self::big(batch)
            || self.big_ok
            || self.segs <= GSO_PORTABLE_SEGMENTS
            || err != Some(libc::EINVAL)
        {
            return false;
        }
        self.segs = GSO_PORTABLE_SEGMENTS;
        used.gso_segments = Some(self.segs as u32);
        used.notes.push(format!(
            "GSO: the kernel refused {GSO_MAX_SEGMENTS} segments per send \
             (its UDP_MAX_SEGMENTS is 64); {GSO_PORTABLE_SEGMENTS} used"
        ));
        true
    }

    /// The send's outcome as the loop should see it: a success teaches
    /// that GSO works here; the first send's refusal is about the path.
    pub fn outcome(&mut self, batch: &TxBatch<'_>, r: io::Result<usize>) -> io::Result<usize> {
        match r {
            Ok(n) => {
                self.first = false;
                self.big_ok |= Self::big(batch);
                Ok(n)
            }
            Err(e) if self.first && self.segs > 1 && batch.bytes().len() > batch.segment() => {
                Err(gso_refused(e))
            }
            Err(e) => Err(e),
        }
    }
}

fn unavailable(b: Batch, reason: String) -> EngineError {
    EngineError::EngineUnavailable {
        engine: EngineKind::Batch(b),
        reason,
    }
}

impl Engine for Batch {
    type UdpEndpoint = KernelUdp;
    type UdpTx = BatchUdpTx;
    type UdpRx = BatchUdpRx;
    type TcpTx = BatchTcpTx;
    type TcpRx = super::syscall::SyscallTcpRx;
    const TCP_IO_OUTLIVES_SOCKET: bool = true;

    fn udp_endpoint(self, sock: UdpSocket) -> Result<KernelUdp, EngineError> {
        Ok(KernelUdp::new(sock))
    }
    fn udp_tx(self, ep: &KernelUdp, len: usize) -> Result<BatchUdpTx, EngineError> {
        let sock = ep.socket();
        let mut notes = Vec::new();
        let segs = self.gso_segments(sock, len, &mut notes)?;
        let msgs = if segs > 1 {
            GSO_MSGS_PER_CALL
        } else {
            PLAIN_MSGS_PER_CALL
        };
        Ok(BatchUdpTx {
            tx: MmsgTx::new(msgs),
            gso: GsoSends::new(segs),
            used: Batching {
                messages_per_call: msgs as u32,
                gso_segments: (segs > 1).then_some(segs as u32),
                notes,
                ..Batching::default()
            },
        })
    }

    fn udp_rx(self, ep: &KernelUdp, len: usize) -> Result<BatchUdpRx, EngineError> {
        let sock = ep.socket();
        let mut notes = Vec::new();
        let gro = self.gro(sock, &mut notes)?;
        Ok(BatchUdpRx {
            rx: MmsgRx::new(RECV_MSGS_PER_CALL),
            slot: if gro {
                GRO_SLOT
            } else {
                (len + 1).max(MIN_SLOT)
            },
            used: Batching {
                messages_per_call: RECV_MSGS_PER_CALL as u32,
                gro,
                notes,
                ..Batching::default()
            },
        })
    }

    fn udp_rx_attach(self, sock: &UdpSocket) {
        if self.gro != Toggle::Off && caps().udp_gro.is_ok() {
            // A failure is reported (or refused) by `udp_rx`, which tries again.
            let _ = enable_gro(sock);
        }
    }

    fn tcp_tx<S: TcpEndpoint>(self, _sock: &S) -> Result<BatchTcpTx, EngineError> {
        Ok(BatchTcpTx)
    }

    fn tcp_rx<S: TcpEndpoint>(
        self,
        sock: &S,
        skip_copy: bool,
    ) -> Result<super::syscall::SyscallTcpRx, EngineError> {
        super::Syscall.tcp_rx(sock, skip_copy)
    }
}

/// UDP sending state: `sendmmsg` headers and the GSO segment count.
#[derive(Debug)]
pub struct BatchUdpTx {
    tx: MmsgTx,
    gso: GsoSends,
    used: Batching,
}

impl UdpTx<KernelUdp> for BatchUdpTx {
    fn max_batch(&self) -> usize {
        self.gso.segs * self.tx.max_msgs()
    }

    fn send_batch(&mut self, ep: &KernelUdp, batch: TxBatch<'_>, wait: Wait) -> io::Result<usize> {
        let sock = ep.socket();
        let dontwait = wait == Wait::DontWait;
        let send =
            |tx: &mut MmsgTx, segs| tx.send(sock, batch.bytes(), batch.segment(), segs, dontwait);
        let mut r = send(&mut self.tx, self.gso.segs);
        let err = r.as_ref().err().and_then(io::Error::raw_os_error);
        if self.gso.retry_smaller(&batch, err, &mut self.used) {
            r = send(&mut self.tx, self.gso.segs);
        }
        self.gso.outcome(&batch, r)
    }

    fn batching(&self) -> Option<Batching> {
        Some(self.used.clone())
    }
}

/// UDP receiving state: `recvmmsg` headers and control buffers.
#[derive(Debug)]
pub struct BatchUdpRx {
    rx: MmsgRx,
    /// Bytes per slot: a whole GRO super-buffer, or one datagram + 1.
    slot: usize,
    used: Batching,
}

impl UdpRx<KernelUdp> for BatchUdpRx {
    fn slots(&self) -> RecvSlots {
        RecvSlots::new(RECV_MSGS_PER_CALL, self.slot)
    }

    fn recv_batch(
        &mut self,
        ep: &KernelUdp,
        slots: &mut RecvSlots,
        wait: Wait,
    ) -> io::Result<usize> {
        let sock = ep.socket();
        let (bufs, meta) = slots.parts_mut();
        let n = self.rx.recv(sock, bufs, meta, wait == Wait::DontWait)?;
        self.used.gro_super_buffers += meta[..n]
            .iter()
            .filter(|m| m.segment.is_some_and(|s| m.len > s))
            .count() as u64;
        Ok(n)
    }

    /// `recvmmsg` with `MSG_WAITFORONE` takes what is queued after the
    /// first datagram without waiting: fewer than asked for means no more.
    fn short_batch_empties_socket(&self) -> bool {
        true
    }

    fn batching(&self) -> Option<Batching> {
        Some(self.used.clone())
    }
}

/// TCP sending state: none (the repeated buffer is built per call from
/// borrowed slices, which costs no allocation: see [`TcpTx::write_repeated`]).
#[derive(Debug)]
pub struct BatchTcpTx;

impl TcpTx for BatchTcpTx {
    fn write<S: TcpEndpoint>(&mut self, sock: &S, buf: &[u8], wait: Wait) -> io::Result<usize> {
        self.write_repeated(sock, buf, 1, wait)
    }

    fn write_repeated<S: TcpEndpoint>(
        &mut self,
        sock: &S,
        buf: &[u8],
        times: usize,
        wait: Wait,
    ) -> io::Result<usize> {
        // One writev of up to TCP_WRITE_BYTES, the same buffer each time.
        const MAX_IOV: usize = 64;
        let copies = times
            .min(TCP_WRITE_BYTES / buf.len().max(1))
            .clamp(1, MAX_IOV);
        let slices = [IoSlice::new(buf); MAX_IOV];
        match wait {
            Wait::Block => {
                // SAFETY: `IoSlice` is ABI-compatible with `iovec`; the
                // slices borrow `buf`, valid for the call.
                let n = unsafe {
                    libc::writev(
                        sock.as_raw_fd(),
                        slices.as_ptr().cast(),
                        copies as libc::c_int,
                    )
                };
                usize::try_from(n).map_err(|_| io::Error::last_os_error())
            }
            // Busy polling: one non-blocking buffer at a time.
            Wait::DontWait => super::syscall::SyscallTcp.write(sock, buf, wait),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::{Signals, StreamCounter};
    use crate::udp::{self, RecvJob, UdpCounters};
    use linerate_proto::datagram::{fill_pattern, Header, FLAG_PATTERN, HEADER_LEN};
    use std::sync::Arc;
    use std::time::Instant;

    fn skip(why: &str) {
        eprintln!("SKIPPED: {why}");
    }

    /// Appends a valid test datagram of `len` bytes with sequence `seq`.
    fn datagram_into(out: &mut Vec<u8>, len: usize, seq: u64) {
        let at = out.len();
        out.resize(at + len, 0);
        let d = &mut out[at..];
        Header {
            flags: FLAG_PATTERN,
            stream: 1,
            seq,
            send_ns: 1000 + seq,
            len: len as u32,
        }
        .emit(d);
        fill_pattern(&mut d[HEADER_LEN..], seq);
    }

    #[test]
    fn issue_8_gro_super_buffers_with_dups_reorders_and_a_short_tail_count_exactly() {
        let c = caps();
        if let Err(e) = c.udp_segment.as_ref().and(c.udp_gro.as_ref()) {
            return skip(&format!(
                "GRO receive test needs UDP_SEGMENT and UDP_GRO: {e}"
            ));
        }
        let rx = udp::bind("127.0.0.1".parse().expect("ip")).expect("bind");
        let tx = udp::connect(rx.local_addr().expect("addr")).expect("connect");
        rx.connect(tx.local_addr().expect("addr")).expect("connect");
        udp::set_buffers(&rx, 4 << 20).expect("buffers");
        // On before anything is sent (the receiving thread turns it on
        // again): datagrams queued before would be segmented on arrival.
        enable_gro(&rx).expect("UDP_GRO");
        let len = 200;
        // Three GSO sends; on loopback each reaches a GRO socket as one
        // super-buffer of 200-byte segments:
        // 1. 0..10 with 4 twice (duplicate) and 7 before 6 (reorder);
        // 2. 10..20 without 13 (lost), ending in 100 bytes of 20 (the
        //    kernel's short last segment, here a truncated datagram: corrupt);
        // 3. 21..30 with a payload byte of 25 flipped (corrupt).
        let mut sends: Vec<Vec<u8>> = vec![Vec::new(); 3];
        for seq in [0, 1, 2, 3, 4, 4, 5, 7, 6, 8, 9] {
            datagram_into(&mut sends[0], len, seq);
        }
        for seq in (10..21).filter(|&s| s != 13) {
            datagram_into(&mut sends[1], len, seq);
        }
        let short = sends[1].len() - 100;
        sends[1].truncate(short);
        for seq in 21..30 {
            datagram_into(&mut sends[2], len, seq);
        }
        sends[2][4 * len + HEADER_LEN + 7] ^= 0xff;

        let start = Instant::now();
        let signals = Arc::new(Signals::default());
        let live = Arc::new(UdpCounters::default());
        let job = RecvJob {
            stream: 1,
            len,
            verify: true,
            start,
            omit_ns: 0,
        };
        let kind = Batch {
            gro: Toggle::On,
            ..Batch::AUTO
        };
        let (s2, l2) = (Arc::clone(&signals), Arc::clone(&live));
        let receiver = std::thread::spawn(move || {
            let rx = KernelUdp::new(rx);
            udp::recv(udp::RecvStream {
                engine: kind,
                ep: &rx,
                job: &job,
                bytes: &StreamCounter::default(),
                live: &l2,
                signals: &s2,
                wait: crate::wait::Wait::Block,
            })
        });
        let mut gso = MmsgTx::new(1);
        for s in &sends {
            let n = gso.send(&tx, s, len, 64, false).expect("GSO send");
            assert_eq!(n, s.len().div_ceil(len));
        }
        // 0..30 were issued (13 never went out, 20 went out truncated).
        live.set_issued(30);
        signals.drain_at(start.elapsed().as_nanos() as u64 + 200_000_000);
        let (got, end) = receiver.join().expect("receiver");
        end.result.expect("received");
        let b = got.batching.clone().expect("batching reported");
        assert!(b.gro, "GRO was on");
        assert_eq!(
            b.gro_super_buffers, 3,
            "each send arrived as one super-buffer"
        );
        assert_eq!(got.datagrams, 11 + 9 + 8, "valid datagrams read");
        assert_eq!(got.duplicates, 1);
        assert_eq!(got.reordered, 1);
        assert_eq!(got.corrupt, 2, "the short tail and the flipped byte");
        // Distinct good numbers: 0..30 minus 13, 20 (short) and 25 (corrupt).
        assert_eq!(got.received, 27);
        assert_eq!(got.lost, Some(3));
    }

    #[test]
    fn an_explicit_option_the_path_cannot_do_is_refused_with_the_reason() {
        if let Err(e) = &caps().udp_segment {
            return skip(&format!("no UDP_SEGMENT: {e}"));
        }
        let rx = udp::bind("127.0.0.1".parse().expect("ip")).expect("bind");
        let tx = udp::connect(rx.local_addr().expect("addr")).expect("connect");
        let tx = KernelUdp::new(tx);
        let on = Batch {
            gso: Toggle::On,
            ..Batch::AUTO
        };
        // 40000-byte datagrams fit loopback's MTU, but no two fit one send.
        let e = on.udp_tx(&tx, 40_000).expect_err("refused");
        assert!(
            e.to_string().contains("--gso") && e.to_string().contains("no room for two"),
            "{e}"
        );
        // Auto leaves GSO off and says why.
        let io = Batch::AUTO.udp_tx(&tx, 40_000).expect("auto");
        let b = io.batching().expect("batching");
        assert_eq!(b.gso_segments, None);
        assert!(b.notes.iter().any(|n| n.starts_with("GSO off")), "{b:?}");
        // 1472-byte datagrams on loopback: 44 per send.
        let io = on.udp_tx(&tx, 1472).expect("GSO on");
        assert_eq!(io.max_batch(), 44 * GSO_MSGS_PER_CALL);
    }
}
