//! The `batch` engine: many datagrams or buffers per system call.
//!
//! - UDP send: `sendmmsg` of GSO messages (`UDP_SEGMENT`: one contiguous
//!   run of up to 64 equal datagrams per message, cut by the kernel), or of
//!   one datagram per message without GSO.
//! - UDP receive: `recvmmsg` into a ring of buffers; with `UDP_GRO` the
//!   kernel hands over runs of datagrams as one super-buffer, which is split
//!   by its segment size so every datagram's header, sequence number and
//!   (with `--verify`) payload is checked exactly as the syscall engine
//!   checks them.
//! - TCP send: `writev` of the stream's buffer repeated up to
//!   [`TCP_WRITE_BYTES`] per call. TCP receive: `read`, or with
//!   `--skip-rx-copy` `recv(MSG_TRUNC)`, which consumes data without
//!   copying it.
//!
//! GSO and GRO are each on, off, or `auto` (on where the kernel and the
//! path allow it; the stream's report says why one is off). An option asked
//! for explicitly that the kernel lacks is refused with the reason.
//!
//! Clock reads: one per call (the stamps of a batch share it), not one per
//! datagram; with GRO, the datagrams of a super-buffer share its kernel
//! receive timestamp.

pub mod mmsg;

use std::io::{ErrorKind, IoSlice, Read, Write};
use std::net::{Shutdown, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use linerate_proto::datagram::{self, fill_pattern, Fault, Header, SeqSchedule, FLAG_PATTERN};
use linerate_proto::measure::{Batching, UdpRecv, UdpSend};
use linerate_proto::pacing::Pacer;
use linerate_proto::seq::{Jitter, SeqTracker};
use linerate_stats::histogram::Histogram;

use self::mmsg::{
    enable_gro, enable_rx_meta, path_mtu, recv_discard, segments, segments_per_send, RecvRing,
    SendBatch, GRO_SLOT, GSO_MSGS_PER_CALL, PLAIN_MSGS_PER_CALL, RECV_MSGS_PER_CALL,
};
use crate::caps::caps;
use crate::engine::{is_timeout, map_err, Engine, Idle, Signals, StreamCounter, StreamEnd};
use crate::udp::{
    classify, ns_since, recv_buffer, socket_drops, tighten_timer_slack, wait_until, RecvJob,
    SendJob, UdpCounters, Verdict, RECV_POLL,
};
use crate::EngineError;

/// Bytes per TCP `writev`: the stream's buffer repeated up to this much.
/// 1 MiB writes beat 128 KiB ones by 1.4× on the project's 2-core test
/// machines (issue 8); more only holds the socket lock longer.
pub const TCP_WRITE_BYTES: usize = 1 << 20;

/// Slots of a non-GRO receive ring are one byte longer than a datagram (so
/// a longer one shows as truncated) and never shorter than this, so a
/// control greeting repeated on the data socket fits.
const MIN_SLOT: usize = 128;

/// IPv6 + UDP headers: what a GSO segment adds on the wire at most.
const UDP_IP_HEADERS: usize = 48;

/// On, off, or on where the kernel and path allow it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Toggle {
    #[default]
    Auto,
    On,
    Off,
}

/// The batch engine and its options.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchEngine {
    pub gso: Toggle,
    pub gro: Toggle,
    /// TCP receivers consume data with `MSG_TRUNC` instead of reading it.
    pub skip_rx_copy: bool,
}

impl BatchEngine {
    /// Refuses options asked for explicitly that this kernel lacks.
    pub fn check(&self) -> Result<(), EngineError> {
        let c = caps();
        if let (Toggle::On, Err(e)) = (self.gso, &c.udp_segment) {
            return Err(EngineError::Unsupported(format!("--gso: {e}")));
        }
        if let (Toggle::On, Err(e)) = (self.gro, &c.udp_gro) {
            return Err(EngineError::Unsupported(format!("--gro: {e}")));
        }
        Ok(())
    }

    /// Datagrams per send for this stream: 1 without GSO. Explains in
    /// `notes` why `auto` left GSO off; refuses an explicit `--gso` the
    /// kernel or path cannot do.
    fn gso_segments(
        &self,
        sock: &UdpSocket,
        len: usize,
        notes: &mut Vec<String>,
    ) -> Result<usize, EngineError> {
        if self.gso == Toggle::Off {
            return Ok(1);
        }
        let mut refuse = |why: String| -> Result<usize, EngineError> {
            if self.gso == Toggle::On {
                Err(EngineError::Unsupported(format!("--gso: {why}")))
            } else {
                notes.push(format!("GSO off: {why}"));
                Ok(1)
            }
        };
        if let Err(e) = &caps().udp_segment {
            return refuse(e.to_string());
        }
        let v6 = sock.peer_addr().is_ok_and(|a| a.is_ipv6());
        let mtu = path_mtu(sock, v6).unwrap_or(0);
        if len + UDP_IP_HEADERS > mtu {
            return refuse(format!(
                "{len}-byte datagrams do not fit the path MTU ({mtu}); \
                 the kernel segments only datagrams that need no IP fragmentation"
            ));
        }
        let segs = segments_per_send(len);
        if segs < 2 {
            return refuse(format!(
                "{len}-byte datagrams leave no room for two per send"
            ));
        }
        Ok(segs)
    }

    /// Turns GRO on for a receiving socket as asked.
    fn gro(&self, sock: &UdpSocket, notes: &mut Vec<String>) -> Result<bool, EngineError> {
        if self.gro == Toggle::Off {
            return Ok(false);
        }
        let r = caps()
            .udp_gro
            .clone()
            .map_err(|e| e.to_string())
            .and_then(|()| enable_gro(sock).map_err(|e| format!("UDP_GRO: {e}")));
        match (r, self.gro) {
            (Ok(()), _) => Ok(true),
            (Err(why), Toggle::On) => Err(EngineError::Unsupported(format!("--gro: {why}"))),
            (Err(why), _) => {
                notes.push(format!("GRO off: {why}"));
                Ok(false)
            }
        }
    }
}

impl Engine for BatchEngine {
    fn name(&self) -> &'static str {
        "batch"
    }

    fn send(
        &self,
        sock: &TcpStream,
        buf: &[u8],
        limit: Option<u64>,
        counter: &StreamCounter,
        signals: &Signals,
    ) -> StreamEnd {
        // The same buffer several times: one writev moves up to 1 MiB.
        let copies = (TCP_WRITE_BYTES / buf.len().max(1)).clamp(1, 1024);
        let slices: Vec<IoSlice<'_>> = (0..copies).map(|_| IoSlice::new(buf)).collect();
        let batch = (buf.len() * copies) as u64;
        let mut calls = 0u64;
        let mut remaining = limit.unwrap_or(u64::MAX);
        let mut idle = Idle(None);
        let mut w = sock;
        let result = loop {
            if remaining == 0 || signals.stopping() {
                break sock
                    .shutdown(Shutdown::Write)
                    .map_err(|e| map_err("shutdown", e));
            }
            if signals.aborted() {
                break Ok(());
            }
            calls += 1;
            let r = if remaining >= batch {
                w.write_vectored(&slices)
            } else {
                let n = buf
                    .len()
                    .min(usize::try_from(remaining).unwrap_or(usize::MAX));
                w.write(&buf[..n])
            };
            match r {
                Ok(0) => break Err(EngineError::PeerReset("write returned 0".into())),
                Ok(k) => {
                    counter.add(k as u64);
                    remaining -= k as u64;
                    idle.progressed();
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) => {
                    if let Err(e) = idle.timed_out() {
                        break Err(e);
                    }
                }
                Err(e) => break Err(map_err("writev", e)),
            }
        };
        StreamEnd { calls, result }
    }

    fn recv(
        &self,
        sock: &TcpStream,
        buf: &mut [u8],
        counter: &StreamCounter,
        signals: &Signals,
    ) -> StreamEnd {
        let mut calls = 0u64;
        let mut idle = Idle(None);
        let mut r = sock;
        let result = loop {
            if signals.aborted() {
                break Ok(());
            }
            calls += 1;
            let got = if self.skip_rx_copy {
                recv_discard(sock, buf)
            } else {
                r.read(buf)
            };
            match got {
                Ok(0) => break Ok(()),
                Ok(k) => {
                    counter.add(k as u64);
                    idle.progressed();
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) => {
                    if let Err(e) = idle.timed_out() {
                        break Err(e);
                    }
                }
                Err(e) => break Err(map_err("read", e)),
            }
        };
        StreamEnd { calls, result }
    }

    fn udp_send(
        &self,
        sock: &UdpSocket,
        job: &SendJob,
        counter: &StreamCounter,
        live: &UdpCounters,
        signals: &Signals,
    ) -> (UdpSend, StreamEnd) {
        let mut notes = Vec::new();
        match self.gso_segments(sock, job.len, &mut notes) {
            Ok(segs) => send_loop(sock, job, segs, notes, counter, live, signals),
            Err(e) => (
                UdpSend::default(),
                StreamEnd {
                    calls: 0,
                    result: Err(e),
                },
            ),
        }
    }

    fn udp_recv(
        &self,
        sock: &UdpSocket,
        job: &RecvJob,
        counter: &StreamCounter,
        live: &UdpCounters,
        signals: &Signals,
    ) -> (UdpRecv, StreamEnd) {
        let mut notes = Vec::new();
        match self.gro(sock, &mut notes) {
            Ok(gro) => recv_loop(sock, job, gro, notes, counter, live, signals),
            Err(e) => (
                UdpRecv::default(),
                StreamEnd {
                    calls: 0,
                    result: Err(e),
                },
            ),
        }
    }
}

/// Why a send failed, in the words the report needs.
fn send_error(e: std::io::Error, gso: bool, first: bool) -> EngineError {
    let code = e.raw_os_error();
    if gso && first && matches!(code, Some(libc::EINVAL | libc::EMSGSIZE | libc::EIO)) {
        return EngineError::Unsupported(format!(
            "the kernel refused a UDP GSO send on this path ({e}); run with --no-gso"
        ));
    }
    if e.kind() == ErrorKind::ConnectionRefused {
        return EngineError::PeerReset(
            "the receiver's UDP port is closed (ICMP port unreachable)".into(),
        );
    }
    EngineError::io("UDP sendmmsg", e)
}

/// The batch engine's UDP send loop: fills as many datagrams as are due
/// (all it has room for when unpaced), then sends them in one `sendmmsg`.
fn send_loop(
    sock: &UdpSocket,
    job: &SendJob,
    segs: usize,
    notes: Vec<String>,
    bytes: &StreamCounter,
    live: &UdpCounters,
    signals: &Signals,
) -> (UdpSend, StreamEnd) {
    tighten_timer_slack();
    let msgs = if segs > 1 {
        GSO_MSGS_PER_CALL
    } else {
        PLAIN_MSGS_PER_CALL
    };
    let mut batch = SendBatch::new(job.len, segs, msgs);
    let cap = batch.capacity();
    let header = Header {
        flags: if job.verify { FLAG_PATTERN } else { 0 },
        stream: job.stream,
        seq: 0,
        send_ns: 0,
        len: job.len as u32,
    };
    for i in 0..cap {
        header.emit(batch.datagram_mut(i));
    }
    let malformed: Vec<Fault> = job
        .faults
        .iter()
        .copied()
        .filter(|f| f.kind.is_malformed())
        .collect();
    let mut junk = vec![0u8; if malformed.is_empty() { 0 } else { job.len }];
    let mut next_junk = 0usize;
    let mut sched = SeqSchedule::new(job.faults.clone());
    let mut pacer = Pacer::new(job.millipps, job.burst);
    let mut gaps = Histogram::new();
    let mut out = UdpSend {
        requested_pps: pacer.pps(),
        requested_gap_ns: pacer.gap_ns(),
        burst: job.burst.max(1),
        kept_up: true,
        batching: Some(Batching {
            messages_per_call: msgs as u32,
            gso_segments: (segs > 1).then_some(segs as u32),
            notes,
            ..Batching::default()
        }),
        ..UdpSend::default()
    };
    let mut last_send: Option<u64> = None;
    let mut calls = 0u64;
    let limit = job.limit.unwrap_or(u64::MAX);
    let result = 'run: loop {
        if signals.aborted() || signals.stopping() {
            break Ok(());
        }
        if sched.issued() >= limit && sched.idle() {
            break Ok(());
        }
        let due = pacer.due_ns();
        if due > 0 && !wait_until(job.start, due, signals) {
            continue;
        }
        let now = ns_since(job.start);
        // Everything due by now, at most a batch.
        let want = pacer
            .due_count(now)
            .map_or(cap as u64, |d| d.saturating_sub(pacer.count()))
            .clamp(1, cap as u64) as usize;
        let mut filled = 0usize;
        while filled < want && !(sched.issued() >= limit && sched.idle()) {
            let seq = sched.current();
            if let Some(f) = malformed.get(next_junk).filter(|f| f.seq <= seq) {
                // A scheduled malformed datagram goes just before this one,
                // on its own: flush what is filled first.
                if filled > 0 {
                    break;
                }
                let good = batch.datagram_mut(0);
                Header::stamp(good, seq, now);
                let n = datagram::malformed(f.kind, good, &mut junk);
                let _ = sock.send(&junk[..n]);
                next_junk += 1;
            }
            let d = batch.datagram_mut(filled);
            Header::stamp(d, seq, now);
            if job.verify {
                fill_pattern(&mut d[datagram::HEADER_LEN..], seq);
            }
            sched.advance();
            filled += 1;
        }
        // Numbers are used up once filled, so every filled datagram is sent
        // (retried on a full buffer), even after a stop request.
        let mut at = 0usize;
        while at < filled {
            if signals.aborted() {
                break 'run Ok(());
            }
            calls += 1;
            match batch.send_from(sock, at, filled) {
                Ok(n) => {
                    at += n;
                    for _ in 0..n {
                        pacer.sent();
                    }
                    bytes.add((n * job.len) as u64);
                    out.datagrams += n as u64;
                    match last_send {
                        Some(prev) => gaps.record(now.saturating_sub(prev)),
                        None => out.first_send_ns = now,
                    }
                    // The rest of a batch leaves back to back.
                    gaps.record_n(0, n.saturating_sub(1) as u64);
                    last_send = Some(now);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    out.send_errors += 1;
                    std::thread::yield_now();
                }
                Err(e) => break 'run Err(send_error(e, segs > 1, out.datagrams == 0)),
            }
        }
        live.datagrams.store(out.datagrams, Ordering::Relaxed);
    };
    let end = ns_since(job.start);
    out.issued = sched.issued();
    out.gaps = gaps.summary();
    out.behind = match job.limit {
        Some(l) => pacer.behind(end).min(l.saturating_sub(sched.issued())),
        None => pacer.behind(end),
    };
    out.kept_up = pacer.within_tolerance(out.behind);
    out.last_send_ns = last_send.unwrap_or(0);
    (out, StreamEnd { calls, result })
}

/// The batch engine's UDP receive loop: like the syscall engine's (same
/// checks, same drain rule, same counters), one `recvmmsg` per call.
fn recv_loop(
    sock: &UdpSocket,
    job: &RecvJob,
    gro: bool,
    notes: Vec<String>,
    bytes: &StreamCounter,
    live: &UdpCounters,
    signals: &Signals,
) -> (UdpRecv, StreamEnd) {
    // Without SO_RXQ_OVFL the drop count still comes from SO_MEMINFO below.
    let _ = enable_rx_meta(sock);
    let realtime_at_start = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
        .saturating_sub(ns_since(job.start));
    let _ = sock.set_read_timeout(Some(RECV_POLL));
    let slot = if gro {
        GRO_SLOT
    } else {
        (job.len + 1).max(MIN_SLOT)
    };
    let mut ring = RecvRing::new(RECV_MSGS_PER_CALL, slot);
    let mut tracker = SeqTracker::default();
    let mut jitter = Jitter::default();
    let mut out = UdpRecv {
        rcvbuf: recv_buffer(sock),
        ..UdpRecv::default()
    };
    let mut use_ = Batching {
        messages_per_call: RECV_MSGS_PER_CALL as u32,
        gro,
        notes,
        ..Batching::default()
    };
    let mut cmsg_drops: Option<u32> = None;
    let mut calls = 0u64;
    let mut draining = false;
    let mut late = false;
    let result = loop {
        if signals.aborted() {
            break Ok(());
        }
        calls += 1;
        let r = ring.recv(sock, draining);
        let now = ns_since(job.start);
        if !draining && signals.drain_passed(now) {
            draining = true;
        }
        match r {
            Ok(n) => {
                let mut moved = 0u64;
                for i in 0..n {
                    let (buf, m) = ring.message(i);
                    if m.drops.is_some() {
                        cmsg_drops = m.drops;
                    }
                    let arrival = m
                        .stamp_ns
                        .map_or(now, |t| t.saturating_sub(realtime_at_start));
                    if !late && signals.drain_passed(arrival) {
                        // The queue is in arrival order: everything after is late too.
                        tracker.close();
                        late = true;
                    }
                    if m.segment.is_some_and(|s| m.len > s) {
                        use_.gro_super_buffers += 1;
                    }
                    for d in segments(buf, m.segment) {
                        match classify(d, m.truncated, job) {
                            Verdict::Data(h) => {
                                tracker.record(h.seq);
                                if !late {
                                    jitter.record(h.send_ns, arrival);
                                    out.last_recv_ns = arrival;
                                }
                                out.datagrams += 1;
                                moved += d.len() as u64;
                                if out.first_recv_ns == 0 {
                                    out.first_recv_ns = arrival;
                                }
                            }
                            // A repeated greeting: the client missed our echo.
                            Verdict::Ignored => {
                                let _ = sock.send(d);
                            }
                            Verdict::Corrupt(why) => {
                                out.corrupt += 1;
                                if out.first_corrupt.is_none() {
                                    out.first_corrupt = Some(why);
                                }
                            }
                        }
                    }
                }
                bytes.add(moved);
                publish(live, &out, &tracker, &jitter, cmsg_drops);
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if draining {
                    break Ok(());
                }
            }
            // An ICMP error queued on the connected socket: not data.
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {}
            Err(e) => break Err(EngineError::io("UDP recvmmsg", e)),
        }
    };
    let c = tracker.counts();
    out.received = c.received;
    out.duplicates = c.duplicates;
    out.reordered = c.reordered;
    out.max_reorder_distance = c.max_reorder_distance;
    out.late = c.late;
    out.beyond_window = c.beyond_window;
    out.next_expected = c.next_expected;
    out.jitter_ns = jitter.ns();
    out.issued = live.issued();
    out.lost = out.issued.map(|i| c.lost(i));
    let cmsg_drops = cmsg_drops.map(u64::from);
    out.socket_drops = socket_drops(sock)
        .map(|m| m.max(cmsg_drops.unwrap_or(0)))
        .or(cmsg_drops);
    out.batching = Some(use_);
    (out, StreamEnd { calls, result })
}

/// Live counters for the sampler, once per receive call.
fn publish(
    live: &UdpCounters,
    out: &UdpRecv,
    tracker: &SeqTracker,
    jitter: &Jitter,
    drops: Option<u32>,
) {
    let c = tracker.counts();
    let st = |a: &AtomicU64, v: u64| a.store(v, Ordering::Relaxed);
    st(&live.datagrams, out.datagrams);
    st(&live.received, c.received);
    st(&live.next_expected, c.next_expected);
    st(&live.duplicates, c.duplicates);
    st(&live.reordered, c.reordered);
    st(&live.late, c.late);
    st(&live.corrupt, out.corrupt);
    st(&live.jitter_bits, jitter.ns().to_bits());
    if let Some(d) = drops {
        st(&live.socket_drops, u64::from(d));
    }
}

#[cfg(test)]
mod tests {
    use super::mmsg::MmsgTx;
    use super::*;
    use crate::udp;
    use linerate_proto::datagram::HEADER_LEN;
    use std::sync::Arc;
    use std::time::Instant;

    fn skip(why: &str) {
        eprintln!("SKIPPED: {why}");
    }

    /// A valid test datagram of `len` bytes with sequence `seq`.
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
        // On before anything is sent (the receiving thread turns it on again):
        // datagrams queued before are segmented on arrival.
        enable_gro(&rx).expect("UDP_GRO");
        let len = 200;
        // Three GSO sends; on loopback each reaches a GRO socket as one
        // super-buffer of 200-byte segments:
        // 1. 0..10 with 4 twice (duplicate) and 7 before 6 (reorder);
        // 2. 10..20 without 13 (lost), ending in a 100-byte segment (the
        //    kernel's short last segment, here a truncated datagram: corrupt);
        // 3. 20..30 with a payload byte flipped in 25 (corrupt).
        let mut sends: Vec<Vec<u8>> = vec![Vec::new(); 3];
        for seq in [0, 1, 2, 3, 4, 4, 5, 7, 6, 8, 9] {
            datagram_into(&mut sends[0], len, seq);
        }
        for seq in (10..20).filter(|&s| s != 13) {
            datagram_into(&mut sends[1], len, seq);
        }
        datagram_into(&mut sends[1], len, 20);
        let short = sends[1].len() - 100;
        sends[1].truncate(short);
        for seq in 21..30 {
            datagram_into(&mut sends[2], len, seq);
        }
        let flip = 4 * len + HEADER_LEN + 7;
        sends[2][flip] ^= 0xff;

        let start = Instant::now();
        let signals = Arc::new(Signals::default());
        let live = Arc::new(UdpCounters::default());
        let job = RecvJob {
            stream: 1,
            len,
            verify: true,
            start,
        };
        let engine = BatchEngine {
            gro: Toggle::On,
            ..BatchEngine::default()
        };
        let (s2, l2) = (Arc::clone(&signals), Arc::clone(&live));
        let receiver = std::thread::spawn(move || {
            engine.udp_recv(&rx, &job, &StreamCounter::default(), &l2, &s2)
        });
        let mut gso = MmsgTx::new(1);
        for s in &sends {
            let n = gso.send(&tx, s, len, 64, false).expect("GSO send");
            assert_eq!(n, s.len().div_ceil(len));
        }
        // 0..30 were issued (20 went out truncated, 13 never).
        live.set_issued(30);
        signals.drain_at(udp::ns_since(start) + 200_000_000);
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
        // Distinct good numbers: 0..30 minus 13, 20 (truncated) and 25 (corrupt).
        assert_eq!(got.received, 27);
        assert_eq!(got.lost, Some(3));
    }
}
