//! The syscalls of iperf3 interoperability: the UDP stream handshake on
//! iperf3's port, and the UDP loops of streams that speak iperf3's datagram
//! format, run by the ordinary runner when its [`crate::runner::UdpParams`]
//! carry an [`Iperf3Format`] (threads, interval records, CPU accounting,
//! stop and drain signals are the runner's as for any test).
//!
//! The datagrams carry iperf3's header (send time, sequence number from 1,
//! 32 or 64 bits). The receiver keeps two accounts of every stream side by
//! side: linerate's exact one ([`linerate_proto::seq`]: distinct received,
//! duplicates, reordered) and iperf3's own rules
//! ([`linerate_proto::iperf3::udp::Iperf3Receiver`]), which is what an
//! iperf3 peer must be sent; the latter travels in [`UdpRecv::iperf3`].
//! These loops make one plain syscall per datagram whatever `--engine` says
//! (iperf3 streams are not batched yet).

use std::io::ErrorKind;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use linerate_proto::iperf3::udp::{self as wire, Header, Iperf3Receiver};
use linerate_proto::measure::{UdpRecv, UdpSend};
use linerate_proto::pacing::Pacer;
use linerate_proto::seq::{Jitter, SeqTracker};
use linerate_proto::udp_receiver::LiveCounts;
use linerate_stats::histogram::Histogram;

use crate::clock;
use crate::stream::{Signals, StreamCounter, StreamEnd};
use crate::udp::{self, RecvJob, SendJob, UdpCounters, RECV_POLL};
use crate::EngineError;

/// The receive buffer: room for the largest datagram.
const RECV_BUF: usize = 65536;

/// How a side's iperf3 UDP streams run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Iperf3Format {
    /// `udp_counters_64bit`: 64-bit sequence numbers in the header.
    pub counters_64bit: bool,
    /// The omit period: iperf3's counters restart at its end.
    pub omit: Duration,
}

/// The UDP socket an iperf3 server listens on for connect datagrams: the
/// control connection's local address and the server's port, with
/// SO_REUSEADDR (each accepted stream keeps the port, connected to its
/// client, while a fresh socket takes the next client).
pub fn udp_listener(local: SocketAddr) -> Result<UdpSocket, EngineError> {
    let local = crate::socket::canonical(local);
    let domain = socket2::Domain::for_address(local);
    let s = socket2::Socket::new(domain, socket2::Type::DGRAM, Some(socket2::Protocol::UDP))
        .map_err(|e| EngineError::io("UDP socket", e))?;
    s.set_reuse_address(true)
        .map_err(|e| EngineError::io("SO_REUSEADDR", e))?;
    s.bind(&local.into())
        .map_err(|e| EngineError::io(format!("bind UDP {local}"), e))?;
    Ok(s.into())
}

/// Waits up to `wait` for a client's connect datagram on `listener`. On
/// one, connects `listener` to that client (it becomes the stream's
/// socket), opens the next listener on the same address, then replies
/// "6789" — in that order, so the next client's datagram always finds a
/// socket. Returns the stream socket and the new listener.
pub fn udp_accept(
    listener: UdpSocket,
    wait: Duration,
) -> Result<Result<(UdpSocket, UdpSocket), UdpSocket>, EngineError> {
    listener
        .set_read_timeout(Some(wait.max(Duration::from_millis(1))))
        .map_err(|e| EngineError::io("UDP read timeout", e))?;
    let mut buf = [0u8; 64];
    let peer = match listener.recv_from(&mut buf) {
        Ok((_, peer)) => peer,
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            return Ok(Err(listener))
        }
        Err(e) if e.kind() == ErrorKind::Interrupted => return Ok(Err(listener)),
        Err(e) => return Err(EngineError::io("UDP connect datagram", e)),
    };
    let local = listener
        .local_addr()
        .map_err(|e| EngineError::io("UDP local address", e))?;
    listener
        .connect(peer)
        .map_err(|e| EngineError::io(format!("connect UDP to {peer}"), e))?;
    let next = udp_listener(local)?;
    listener
        .send(&wire::REPLY)
        .map_err(|e| EngineError::io("UDP connect reply", e))?;
    Ok(Ok((listener, next)))
}

/// Shuts down the read side of a TCP stream: a receiver blocked in read
/// sees end of stream and ends cleanly (iperf3 ends receivers at TEST_END,
/// not at the peer's close).
pub fn end_tcp_receiver(sock: &TcpStream) {
    let _ = sock.shutdown(std::net::Shutdown::Read);
}

fn ns_since(start: Instant) -> u64 {
    start.elapsed().as_nanos() as u64
}

/// Sleeps, then spins the last 30 µs, until `due_ns` after `start`; false
/// when a stop or abort arrived meanwhile.
fn wait_until(start: Instant, due_ns: u64, signals: &Signals) -> bool {
    loop {
        let now = ns_since(start);
        if now >= due_ns {
            return true;
        }
        let left = due_ns - now;
        if left > 30_000 {
            std::thread::sleep(Duration::from_nanos((left - 30_000).min(20_000_000)));
            if signals.stopping() || signals.aborted() {
                return false;
            }
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Fills a payload with a fixed pseudo-random pattern (iperf3 sends random
/// bytes; receivers never look at them).
fn fill(buf: &mut [u8]) {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for b in buf.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
}

/// Sends iperf3 datagrams, paced, until stopped or `job.limit` are sent.
pub fn send(
    sock: &UdpSocket,
    job: &SendJob,
    cfg: Iperf3Format,
    bytes: &StreamCounter,
    live: &UdpCounters,
    signals: &Signals,
) -> (UdpSend, StreamEnd) {
    let mut buf = vec![0u8; job.len.max(wire::header_len(cfg.counters_64bit))];
    fill(&mut buf);
    let mut pacer = Pacer::new(job.millipps, job.burst);
    let mut gaps = Histogram::new();
    let mut out = UdpSend {
        requested_pps: pacer.pps(),
        requested_gap_ns: pacer.gap_ns(),
        burst: job.burst.max(1),
        kept_up: true,
        ..UdpSend::default()
    };
    // iperf3 numbers from 1; a failed send does not use a number up.
    let mut seq: u64 = 1;
    let limit = job.limit.unwrap_or(u64::MAX);
    let mut last_send: Option<u64> = None;
    let mut calls = 0u64;
    let result = loop {
        if signals.aborted() || signals.stopping() || seq > limit {
            break Ok(());
        }
        let due = pacer.due_ns();
        if due > 0 && !wait_until(job.start, due, signals) {
            continue;
        }
        let now = ns_since(job.start);
        wire::write_header(
            &mut buf,
            &Header::at_ns(clock::mono_ns(), seq),
            cfg.counters_64bit,
        );
        calls += 1;
        match sock.send(&buf) {
            Ok(n) if n == buf.len() => {
                seq += 1;
                pacer.sent();
                bytes.add(n as u64);
                out.datagrams += 1;
                live.datagrams.store(out.datagrams, Ordering::Relaxed);
                match last_send {
                    Some(prev) => gaps.record(now - prev),
                    None => out.first_send_ns = now,
                }
                last_send = Some(now);
            }
            Ok(n) => {
                break Err(EngineError::Protocol(format!(
                    "UDP send wrote {n} of {} bytes",
                    buf.len()
                )))
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                out.send_errors += 1;
                std::thread::yield_now();
            }
            // The iperf3 client closed its socket at the end of the test.
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => break Ok(()),
            Err(e) => break Err(EngineError::io("UDP send", e)),
        }
    };
    let end = ns_since(job.start);
    out.issued = seq - 1;
    out.gaps = gaps.summary();
    out.behind = pacer.behind(end);
    out.kept_up = pacer.within_tolerance(out.behind);
    out.last_send_ns = last_send.unwrap_or(0);
    (
        out,
        StreamEnd {
            calls,
            poll_sleeps: None,
            result,
        },
    )
}

/// Receives iperf3 datagrams until the drain deadline (then reads what is
/// queued) or abort, counting them both ways.
pub fn recv(
    sock: &UdpSocket,
    job: &RecvJob,
    cfg: Iperf3Format,
    bytes: &StreamCounter,
    live: &UdpCounters,
    signals: &Signals,
) -> (UdpRecv, StreamEnd) {
    let _ = sock.set_read_timeout(Some(RECV_POLL));
    let mut buf = vec![0u8; RECV_BUF.max(job.len + 1)];
    let mut iperf = Iperf3Receiver::new(cfg.counters_64bit);
    let mut tracker = SeqTracker::default();
    let mut jitter = Jitter::default();
    let omit_ns = cfg.omit.as_nanos() as u64;
    let mut omitting = omit_ns > 0;
    let mut out = UdpRecv {
        rcvbuf: udp::recv_buffer(sock),
        ..UdpRecv::default()
    };
    let mut calls = 0u64;
    let mut draining = false;
    let result = loop {
        if signals.aborted() {
            break Ok(());
        }
        calls += 1;
        let r = sock.recv(&mut buf);
        let now = ns_since(job.start);
        if !draining && now >= signals.drain_deadline() {
            // Read what is queued, then stop.
            draining = true;
            if let Err(e) = sock.set_nonblocking(true) {
                break Err(EngineError::io("UDP non-blocking", e));
            }
        }
        match r {
            Ok(n) => {
                let d = &buf[..n];
                if omitting && now >= omit_ns {
                    omitting = false;
                    iperf.omit_ended();
                }
                let arrival = clock::mono_ns();
                iperf.datagram(d, arrival as f64 / 1e9);
                bytes.add(n as u64);
                let header = wire::read_header(d, cfg.counters_64bit).filter(|h| h.seq > 0);
                match header {
                    Some(h) if n == job.len => {
                        tracker.record(h.seq - 1);
                        let sent = u64::from(h.sec) * 1_000_000_000 + u64::from(h.usec) * 1000;
                        jitter.record(sent, arrival);
                        out.datagrams += 1;
                        if out.first_recv_ns == 0 {
                            out.first_recv_ns = now;
                        }
                        out.last_recv_ns = now;
                        let c = tracker.counts();
                        live.publish(&LiveCounts {
                            datagrams: out.datagrams,
                            received: c.received,
                            next_expected: c.next_expected,
                            duplicates: c.duplicates,
                            reordered: c.reordered,
                            late: c.late,
                            corrupt: out.corrupt,
                            jitter_ns: jitter.ns(),
                            socket_drops: None,
                        });
                    }
                    _ => {
                        out.corrupt += 1;
                        live.corrupt.store(out.corrupt, Ordering::Relaxed);
                        if out.first_corrupt.is_none() {
                            out.first_corrupt = Some(format!(
                                "{n}-byte datagram, the test sends {} with a sequence number from 1",
                                job.len
                            ));
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
    out.socket_drops = udp::socket_drops(sock);
    out.iperf3 = Some(iperf.counts());
    (
        out,
        StreamEnd {
            calls,
            poll_sleeps: None,
            result,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn udp_handshake_connects_replies_and_reopens_the_port() {
        let first = udp_listener("127.0.0.1:0".parse().expect("addr")).expect("bind");
        let addr = first.local_addr().expect("addr");
        let c1 = udp::connect(addr).expect("client 1");
        let c2 = udp::connect(addr).expect("client 2");
        c1.send(&wire::CONNECT).expect("send");
        let (s1, next) = udp_accept(first, Duration::from_secs(2))
            .expect("io")
            .expect("datagram");
        c1.set_read_timeout(Some(Duration::from_secs(2)))
            .expect("timeout");
        let mut b = [0u8; 8];
        let n = c1.recv(&mut b).expect("reply");
        assert_eq!(&b[..n], b"6789");
        c2.send(&wire::CONNECT).expect("send");
        let (s2, _next) = udp_accept(next, Duration::from_secs(2))
            .expect("io")
            .expect("second datagram reaches the new listener");
        assert_eq!(s1.peer_addr().expect("peer"), c1.local_addr().expect("c1"));
        assert_eq!(s2.peer_addr().expect("peer"), c2.local_addr().expect("c2"));
        // Data from client 1 goes to its stream socket.
        c1.send(b"data").expect("send");
        s1.set_read_timeout(Some(Duration::from_secs(2)))
            .expect("timeout");
        assert_eq!(s1.recv(&mut b).expect("data"), 4);
    }

    #[test]
    fn iperf3_datagrams_counted_both_ways_on_loopback() {
        let rx = udp::bind("127.0.0.1".parse().expect("ip")).expect("bind");
        let tx = udp::connect(rx.local_addr().expect("addr")).expect("connect");
        rx.connect(tx.local_addr().expect("addr"))
            .expect("connect back");
        let cfg = Iperf3Format {
            counters_64bit: true,
            omit: Duration::ZERO,
        };
        let start = Instant::now();
        let signals = Arc::new(Signals::default());
        let s2 = Arc::clone(&signals);
        let job = RecvJob {
            stream: 1,
            len: 100,
            verify: false,
            start,
        };
        let receiver = std::thread::spawn(move || {
            recv(
                &rx,
                &job,
                cfg,
                &StreamCounter::default(),
                &UdpCounters::default(),
                &s2,
            )
        });
        let job = SendJob {
            stream: 1,
            len: 100,
            millipps: Some(10_000_000),
            burst: 1,
            verify: false,
            faults: Vec::new(),
            limit: Some(50),
            start,
        };
        let (sent, end) = send(
            &tx,
            &job,
            cfg,
            &StreamCounter::default(),
            &UdpCounters::default(),
            &signals,
        );
        end.result.expect("sent");
        assert_eq!((sent.issued, sent.datagrams), (50, 50));
        signals.drain_at(ns_since(start) + 50_000_000);
        let (got, end) = receiver.join().expect("receiver");
        end.result.expect("received");
        assert_eq!((got.received, got.next_expected, got.corrupt), (50, 50, 0));
        let c = got.iperf3.expect("iperf3 counts");
        assert_eq!(
            (c.max_seq, c.lost, c.out_of_order, c.bytes),
            (50, 0, 0, 5000)
        );
    }
}
