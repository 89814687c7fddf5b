//! The send and receive loops of a UDP stream, generic over the engine.
//!
//! They allocate nothing per datagram. Unlike the TCP loops they read the
//! monotonic clock per datagram: the sender to pace and stamp, the receiver
//! for RFC 3550 jitter (a vDSO call, tens of nanoseconds against
//! microseconds per syscall).

use std::io::ErrorKind;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use linerate_proto::datagram::{
    self, check_pattern, fill_pattern, DatagramHeader, Fault, Header, SeqSchedule, FLAG_PATTERN,
};
use linerate_proto::measure::{UdpRecv, UdpSend};
use linerate_proto::pacing::Pacer;
use linerate_proto::seq::{Jitter, SeqTracker};
use linerate_stats::histogram::Histogram;

use super::{recv_buffer, setsockopt_int, socket_drops, UdpCounters, RECV_POLL};
use crate::cmsg::{SO_RXQ_OVFL, SO_TIMESTAMPNS};
use crate::engines::{with_engine, Engine, EngineKind, RecvSlots, TxBatch, UdpRx, UdpTx, Wait};
use crate::stream::{Signals, StreamCounter, StreamEnd};
use crate::EngineError;

/// A sending UDP stream's parameters.
#[derive(Debug, Clone)]
pub struct SendJob {
    pub stream: u32,
    /// Whole datagram length, header included.
    pub len: usize,
    /// Datagrams per 1000 s; `None`: unpaced.
    pub millipps: Option<u64>,
    pub burst: u32,
    pub verify: bool,
    pub faults: Vec<Fault>,
    /// Sequence numbers to issue (count-limited tests).
    pub limit: Option<u64>,
    /// The test's time zero.
    pub start: Instant,
}

/// A receiving UDP stream's parameters.
#[derive(Debug, Clone)]
pub struct RecvJob {
    pub stream: u32,
    pub len: usize,
    pub verify: bool,
    pub start: Instant,
}

fn ns_since(start: Instant) -> u64 {
    start.elapsed().as_nanos() as u64
}

/// Sleeps (then spins the last stretch) until `due_ns` after `start`.
/// Returns false when a stop or abort arrived meanwhile.
fn wait_until(start: Instant, due_ns: u64, signals: &Signals) -> bool {
    // Sleep until this close, then spin: nanosleep with 1 ns timer slack
    // overshoots by a few µs on an idle host; spinning longer would burn a
    // CPU the receiver may need (loopback tests share the host).
    const SPIN: u64 = 30_000;
    const MAX_SLEEP: u64 = 20_000_000;
    loop {
        let now = ns_since(start);
        if now >= due_ns {
            return true;
        }
        let left = due_ns - now;
        if left > SPIN {
            std::thread::sleep(Duration::from_nanos((left - SPIN).min(MAX_SLEEP)));
            if signals.stopping() || signals.aborted() {
                return false;
            }
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Lets this thread's sleeps end within about a microsecond of their due
/// time instead of the default 50 µs timer slack.
fn tighten_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes an unsigned long; no pointers.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
    }
}

/// Sends paced, numbered datagrams on `sock` with engine `kind` until
/// stopped or the count is issued.
pub fn send(
    kind: EngineKind,
    sock: &UdpSocket,
    job: &SendJob,
    bytes: &StreamCounter,
    live: &UdpCounters,
    signals: &Signals,
) -> (UdpSend, StreamEnd) {
    with_engine!(kind, e => send_loop(e, sock, job, bytes, live, signals))
}

/// Receives and checks datagrams on `sock` with engine `kind` until the
/// drain deadline or abort.
pub fn recv(
    kind: EngineKind,
    sock: &UdpSocket,
    job: &RecvJob,
    bytes: &StreamCounter,
    live: &UdpCounters,
    signals: &Signals,
) -> (UdpRecv, StreamEnd) {
    with_engine!(kind, e => recv_loop(e, sock, job, bytes, live, signals))
}

fn failed<T: Default>(e: EngineError) -> (T, StreamEnd) {
    (
        T::default(),
        StreamEnd {
            calls: 0,
            result: Err(e),
        },
    )
}

fn send_loop<E: Engine>(
    engine: E,
    sock: &UdpSocket,
    job: &SendJob,
    bytes: &StreamCounter,
    live: &UdpCounters,
    signals: &Signals,
) -> (UdpSend, StreamEnd) {
    let mut io = match engine.udp_tx(sock, job.len) {
        Ok(io) => io,
        Err(e) => return failed(e),
    };
    tighten_timer_slack();
    let mut buf = vec![0u8; job.len];
    let header = Header {
        flags: if job.verify { FLAG_PATTERN } else { 0 },
        stream: job.stream,
        seq: 0,
        send_ns: 0,
        len: job.len as u32,
    };
    header.emit(&mut buf);
    let malformed: Vec<Fault> = job
        .faults
        .iter()
        .copied()
        .filter(|f| f.kind.is_malformed())
        .collect();
    let mut junk = if malformed.is_empty() {
        Vec::new()
    } else {
        vec![0u8; job.len]
    };
    let mut next_junk = 0usize;
    let mut sched = SeqSchedule::new(job.faults.clone());
    let mut pacer = Pacer::new(job.millipps, job.burst);
    let mut gaps = Histogram::new();
    let mut out = UdpSend {
        requested_pps: pacer.pps(),
        requested_gap_ns: pacer.gap_ns(),
        burst: job.burst.max(1),
        kept_up: true,
        ..UdpSend::default()
    };
    let mut last_send: Option<u64> = None;
    let mut calls = 0u64;
    let limit = job.limit.unwrap_or(u64::MAX);
    let result = loop {
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
        let seq = sched.current();
        let now = ns_since(job.start);
        Header::stamp(&mut buf, seq, now);
        if job.verify {
            fill_pattern(&mut buf[datagram::HEADER_LEN..], seq);
        }
        // A scheduled malformed datagram goes just before this one.
        if let Some(f) = malformed.get(next_junk).filter(|f| f.seq <= seq) {
            let n = datagram::malformed(f.kind, &buf, &mut junk);
            let _ = io.send_batch(sock, TxBatch::new(&junk[..n], n), Wait::Block);
            next_junk += 1;
        }
        calls += 1;
        match io.send_batch(sock, TxBatch::new(&buf, buf.len()), Wait::Block) {
            Ok(_) => {
                let n = buf.len();
                sched.advance();
                pacer.sent();
                bytes.add(n as u64);
                out.datagrams += 1;
                live.datagrams.store(out.datagrams, Ordering::Relaxed);
                if let Some(prev) = last_send {
                    gaps.record(now - prev);
                } else {
                    out.first_send_ns = now;
                }
                last_send = Some(now);
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                out.send_errors += 1;
                std::thread::yield_now();
            }
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                break Err(EngineError::PeerReset(
                    "the receiver's UDP port is closed (ICMP port unreachable)".into(),
                ))
            }
            Err(e) => break Err(EngineError::io("UDP send", e)),
        }
    };
    let end = ns_since(job.start);
    out.issued = sched.issued();
    out.gaps = gaps.summary();
    // A count-limited sender is never behind on datagrams past its count.
    out.behind = match job.limit {
        Some(l) => pacer.behind(end).min(l.saturating_sub(sched.issued())),
        None => pacer.behind(end),
    };
    out.kept_up = pacer.within_tolerance(out.behind);
    out.last_send_ns = last_send.unwrap_or(0);
    (out, StreamEnd { calls, result })
}

/// The receive loop. Runs until the drain
/// deadline in `signals` passes, then reads what is already queued, and
/// stops; or until the test is aborted.
///
/// Arrival times are the kernel's receive timestamps (SO_TIMESTAMPNS,
/// converted from CLOCK_REALTIME to "ns since Start" once, at the start), so
/// a datagram that arrived before the deadline but waited in the socket
/// buffer is on time, and jitter excludes this thread's scheduling delays.
/// Where the kernel gives no timestamp the read time stands in.
fn recv_loop<E: Engine>(
    engine: E,
    sock: &UdpSocket,
    job: &RecvJob,
    bytes: &StreamCounter,
    live: &UdpCounters,
    signals: &Signals,
) -> (UdpRecv, StreamEnd) {
    // Without SO_RXQ_OVFL the drop count still comes from SO_MEMINFO below.
    let _ = setsockopt_int(sock, SO_RXQ_OVFL, 1);
    let _ = setsockopt_int(sock, SO_TIMESTAMPNS, 1);
    let realtime_at_start = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
        .saturating_sub(ns_since(job.start));
    let _ = sock.set_read_timeout(Some(RECV_POLL));
    let mut io = match engine.udp_rx(sock, job.len) {
        Ok(io) => io,
        Err(e) => return failed(e),
    };
    let mut slots: RecvSlots = io.slots();
    let mut tracker = SeqTracker::default();
    let mut jitter = Jitter::default();
    let mut out = UdpRecv {
        rcvbuf: recv_buffer(sock),
        ..UdpRecv::default()
    };
    let mut cmsg_drops: Option<u32> = None;
    let mut calls = 0u64;
    // Past the deadline by the clock: read what is queued, then stop.
    let mut draining = false;
    // Past the deadline by arrival time: what arrives now is late.
    let mut late = false;
    let result = loop {
        if signals.aborted() {
            break Ok(());
        }
        let wait = if draining {
            Wait::DontWait
        } else {
            Wait::Block
        };
        calls += 1;
        let r = io.recv_batch(sock, &mut slots, wait);
        let now = ns_since(job.start);
        if !draining && signals.drain_passed(now) {
            draining = true;
        }
        match r {
            Ok(filled) => {
                for slot in 0..filled {
                    let (_, m) = slots.get(slot);
                    let (truncated, drops, stamp) = (m.truncated, m.drops, m.stamp_ns);
                    for d in slots.datagrams(slot) {
                        let n = d.len();
                        if drops.is_some() {
                            cmsg_drops = drops;
                        }
                        let arrival = stamp.map_or(now, |t| t.saturating_sub(realtime_at_start));
                        if !late && signals.drain_passed(arrival) {
                            // The queue is in arrival order: everything after is late too.
                            tracker.close();
                            late = true;
                        }
                        match classify(d, truncated, job) {
                            Verdict::Data(h) => {
                                tracker.record(h.seq);
                                if !late {
                                    jitter.record(h.send_ns, arrival);
                                }
                                out.datagrams += 1;
                                bytes.add(n as u64);
                                if out.first_recv_ns == 0 {
                                    out.first_recv_ns = arrival;
                                }
                                if !late {
                                    out.last_recv_ns = arrival;
                                }
                                let c = tracker.counts();
                                let st = |a: &AtomicU64, v: u64| a.store(v, Ordering::Relaxed);
                                st(&live.datagrams, out.datagrams);
                                st(&live.received, c.received);
                                st(&live.next_expected, c.next_expected);
                                st(&live.duplicates, c.duplicates);
                                st(&live.reordered, c.reordered);
                                st(&live.late, c.late);
                                st(&live.jitter_bits, jitter.ns().to_bits());
                                if let Some(d) = cmsg_drops {
                                    st(&live.socket_drops, u64::from(d));
                                }
                            }
                            Verdict::Ignored => {
                                // A repeated greeting: the client missed our echo
                                // (the socket is connected, so it can only be the
                                // client's). Echo it again.
                                let _ = sock.send(d);
                            }
                            Verdict::Corrupt(why) => {
                                out.corrupt += 1;
                                live.corrupt.store(out.corrupt, Ordering::Relaxed);
                                if out.first_corrupt.is_none() {
                                    out.first_corrupt = Some(why);
                                }
                            }
                        }
                    }
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if draining {
                    break Ok(());
                }
            }
            // An ICMP error queued on the connected socket: not data.
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {}
            Err(e) => break Err(EngineError::io("UDP receive", e)),
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
    // SO_MEMINFO also sees drops after the last datagram delivered (the
    // SO_RXQ_OVFL message only rides on delivered ones).
    let cmsg_drops = cmsg_drops.map(u64::from);
    out.socket_drops = socket_drops(sock)
        .map(|m| m.max(cmsg_drops.unwrap_or(0)))
        .or(cmsg_drops);
    (out, StreamEnd { calls, result })
}

enum Verdict {
    Data(Header),
    /// Not data and not corrupt: a repeated control greeting.
    Ignored,
    Corrupt(String),
}

fn classify(d: &[u8], truncated: bool, job: &RecvJob) -> Verdict {
    if truncated {
        return Verdict::Corrupt(format!(
            "datagram longer than the {}-byte receive buffer",
            d.len()
        ));
    }
    if d.starts_with(&linerate_proto::wire::MAGIC) {
        return Verdict::Ignored;
    }
    let h = match DatagramHeader::new_checked(d).and_then(|v| v.parse()) {
        Ok(h) => h,
        Err(e) => return Verdict::Corrupt(e.to_string()),
    };
    if h.stream != job.stream {
        return Verdict::Corrupt(format!(
            "stream id {} on stream {}'s socket",
            h.stream, job.stream
        ));
    }
    if d.len() != job.len {
        return Verdict::Corrupt(format!("{} bytes, the test sends {}", d.len(), job.len));
    }
    if job.verify {
        if h.flags & FLAG_PATTERN == 0 {
            return Verdict::Corrupt("no payload pattern to verify".into());
        }
        if let Err(e) = check_pattern(&d[datagram::HEADER_LEN..], h.seq) {
            return Verdict::Corrupt(e.to_string());
        }
    }
    Verdict::Data(h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use crate::engines::Syscall;
    use crate::udp::{accept_greeting, bind, connect, greet, poll_greeting, set_buffers};
    use std::net::SocketAddr;

    #[test]
    fn greeting_is_echoed_and_connects_the_server_socket() {
        let server = bind("127.0.0.1".parse().expect("ip")).expect("bind");
        let port = server.local_addr().expect("addr").port();
        let client = connect(SocketAddr::from(([127, 0, 0, 1], port))).expect("connect");
        let t = std::thread::spawn(move || {
            let mut buf = [0u8; 64];
            for _ in 0..200 {
                if let Some((n, from)) = poll_greeting(&server, &mut buf) {
                    accept_greeting(&server, from, &buf[..n]).expect("echo");
                    return;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            panic!("no greeting");
        });
        greet(&client, b"LR hello").expect("echoed");
        t.join().expect("server thread");
    }

    #[test]
    fn data_from_the_server_answers_a_greeting_and_stays_queued() {
        let server = bind("127.0.0.1".parse().expect("ip")).expect("bind");
        let client = connect(server.local_addr().expect("addr")).expect("connect");
        server
            .connect(client.local_addr().expect("addr"))
            .expect("connect back");
        // The server attached this stream and started; the echo was lost.
        server.send(b"LU data").expect("send");
        greet(&client, b"LR hello").expect("data counts as the answer");
        let mut buf = [0u8; 16];
        let n = client.recv(&mut buf).expect("still queued");
        assert_eq!(&buf[..n], b"LU data");
    }

    #[test]
    fn loops_count_faults_exactly_on_loopback() {
        let rx = bind("127.0.0.1".parse().expect("ip")).expect("bind");
        let tx = connect(rx.local_addr().expect("addr")).expect("connect");
        rx.connect(tx.local_addr().expect("addr"))
            .expect("connect back");
        set_buffers(&rx, 4 << 20).expect("buffers");
        let start = Instant::now();
        let signals = Arc::new(Signals::default());
        let live_rx = Arc::new(UdpCounters::default());
        let job = RecvJob {
            stream: 1,
            len: 200,
            verify: true,
            start,
        };
        let (s2, l2) = (Arc::clone(&signals), Arc::clone(&live_rx));
        let receiver = std::thread::spawn(move || {
            recv_loop(Syscall, &rx, &job, &StreamCounter::default(), &l2, &s2)
        });
        let send = SendJob {
            stream: 1,
            len: 200,
            millipps: Some(20_000_000),
            burst: 1,
            verify: true,
            faults: datagram::parse_faults("skip:3,dup:10,swap:20,magic:30,payload:40,stream:50")
                .expect("faults"),
            limit: Some(100),
            start,
        };
        let (sent, end) = send_loop(
            Syscall,
            &tx,
            &send,
            &StreamCounter::default(),
            &UdpCounters::default(),
            &signals,
        );
        end.result.expect("sent");
        assert_eq!(sent.issued, 100);
        assert_eq!(sent.datagrams, 100);
        live_rx.set_issued(sent.issued);
        signals.drain_at(ns_since(start) + 100_000_000);
        let (got, end) = receiver.join().expect("receiver");
        end.result.expect("received");
        assert_eq!(got.lost, Some(1));
        assert_eq!(got.duplicates, 1);
        assert_eq!(got.reordered, 1);
        assert_eq!(got.max_reorder_distance, 1);
        assert_eq!(got.corrupt, 3);
        assert_eq!(got.received, 99);
        assert_eq!(got.socket_drops, Some(0));
    }
}
