//! UDP data sockets: binding and connecting them, buffer sizes, the attach
//! handshake, and the plain-syscall send and receive loops of a UDP stream.
//!
//! Attach handshake (reusable by any datagram test): the server binds one
//! socket per stream on an ephemeral port and sends the ports in its Accept.
//! The client connects a socket to each and sends the stream's `DataHello`
//! control frame as a datagram, every [`GREET_EVERY`] until the server echoes
//! it back byte for byte (at most [`GREET_TRIES`] times). The server checks
//! the token and stream, connects its socket to the greeting's source (from
//! then on the kernel drops datagrams from anyone else) and echoes. Should
//! the echo of the last greeting be lost after the test started, a
//! receiving server echoes repeated greetings from its receive loop, and a
//! client whose server already sends data takes that as the answer.
//!
//! The loops do one syscall per datagram and allocate nothing per datagram.
//! Unlike the TCP loops they read the monotonic clock per datagram: the
//! sender to pace and stamp, the receiver for RFC 3550 jitter (a vDSO call,
//! tens of nanoseconds against microseconds per syscall).

use std::io::ErrorKind;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use linerate_proto::datagram::{
    self, check_pattern, fill_pattern, DatagramHeader, Fault, Header, SeqSchedule, FLAG_PATTERN,
};
use linerate_proto::measure::{UdpRecv, UdpSend};
use linerate_proto::pacing::Pacer;
use linerate_proto::seq::{Jitter, SeqTracker};
use linerate_stats::histogram::Histogram;

use crate::engine::{Signals, StreamCounter, StreamEnd};
use crate::EngineError;

/// How often the client repeats an unanswered greeting.
pub const GREET_EVERY: Duration = Duration::from_millis(100);
/// Greetings sent before the client gives up on a stream.
pub const GREET_TRIES: u32 = 50;
/// Receive timeout of UDP receivers: how often an idle receiver checks its
/// drain deadline and the abort flag.
pub const RECV_POLL: Duration = Duration::from_millis(10);
/// Largest datagram a receiver accepts without truncation.
pub const RECV_BUF: usize = 65536;

// Socket options from include/uapi/asm-generic/socket.h (the values every
// architecture linerate builds for uses).
const SO_SNDBUFFORCE: libc::c_int = 32;
const SO_RCVBUFFORCE: libc::c_int = 33;
const SO_TIMESTAMPNS: libc::c_int = 35;
const SO_RXQ_OVFL: libc::c_int = 40;
const SO_MEMINFO: libc::c_int = 55;
const SK_MEMINFO_VARS: usize = 9;
const SK_MEMINFO_DROPS: usize = 8;

fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// Binds a data socket to `local` (canonicalised: an IPv4-mapped address
/// gets an IPv4 socket) on an ephemeral port.
pub fn bind(local: IpAddr) -> Result<UdpSocket, EngineError> {
    let addr = SocketAddr::new(canonical_ip(local), 0);
    UdpSocket::bind(addr).map_err(|e| EngineError::io(format!("bind UDP {addr}"), e))
}

/// A socket connected to `peer` (from an ephemeral local port).
pub fn connect(peer: SocketAddr) -> Result<UdpSocket, EngineError> {
    let peer = SocketAddr::new(canonical_ip(peer.ip()), peer.port());
    let any: IpAddr = match peer {
        SocketAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
        SocketAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
    };
    let sock = UdpSocket::bind(SocketAddr::new(any, 0))
        .map_err(|e| EngineError::io("bind UDP socket", e))?;
    sock.connect(peer)
        .map_err(|e| EngineError::io(format!("connect UDP to {peer}"), e))?;
    Ok(sock)
}

fn setsockopt_int(sock: &UdpSocket, opt: libc::c_int, v: libc::c_int) -> std::io::Result<()> {
    // SAFETY: a valid fd and a pointer to an int of the given size.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            opt,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Sets SO_SNDBUF and SO_RCVBUF to `bytes`: with the FORCE variants first
/// (root may exceed wmem_max/rmem_max), else the plain ones (capped by the
/// sysctls). Returns a note with what the kernel granted.
pub fn set_buffers(sock: &UdpSocket, bytes: u32) -> Result<String, EngineError> {
    let v = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    let mut forced = true;
    for (force, plain, name) in [
        (SO_SNDBUFFORCE, libc::SO_SNDBUF, "SO_SNDBUF"),
        (SO_RCVBUFFORCE, libc::SO_RCVBUF, "SO_RCVBUF"),
    ] {
        if setsockopt_int(sock, force, v).is_err() {
            forced = false;
            setsockopt_int(sock, plain, v).map_err(|e| EngineError::io(name, e))?;
        }
    }
    let s = socket2::SockRef::from(sock);
    let snd = s.send_buffer_size().unwrap_or(0);
    let rcv = s.recv_buffer_size().unwrap_or(0);
    Ok(format!(
        "UDP socket buffers: {bytes} bytes requested, SO_SNDBUF {snd} / SO_RCVBUF {rcv} granted ({})",
        if forced {
            "forced past the sysctl limits; the kernel doubles the request"
        } else {
            "not root: capped at wmem_max/rmem_max; the kernel doubles the request"
        }
    ))
}

/// SO_RCVBUF in effect.
pub fn recv_buffer(sock: &UdpSocket) -> Option<u64> {
    socket2::SockRef::from(sock)
        .recv_buffer_size()
        .ok()
        .map(|b| b as u64)
}

/// Datagrams this socket dropped because its receive buffer was full
/// (`SO_MEMINFO`'s drop counter, the same one SO_RXQ_OVFL reports).
pub fn socket_drops(sock: &impl AsRawFd) -> Option<u64> {
    let mut info = [0u32; SK_MEMINFO_VARS];
    let mut len = std::mem::size_of_val(&info) as libc::socklen_t;
    // SAFETY: info is valid for len bytes.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_MEMINFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 || (len as usize) < (SK_MEMINFO_DROPS + 1) * 4 {
        return None;
    }
    Some(u64::from(info[SK_MEMINFO_DROPS]))
}

/// Client side of the attach handshake: greets until the echo arrives.
pub fn greet(sock: &UdpSocket, hello: &[u8]) -> Result<(), EngineError> {
    sock.set_read_timeout(Some(GREET_EVERY))
        .map_err(|e| EngineError::io("UDP read timeout", e))?;
    let mut buf = [0u8; 128];
    for _ in 0..GREET_TRIES {
        match sock.send(hello) {
            Ok(_) => {}
            // A refused greeting (no socket yet, ICMP) is retried like a lost one.
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {}
            Err(e) => return Err(EngineError::io("send UDP greeting", e)),
        }
        let until = Instant::now() + GREET_EVERY;
        while Instant::now() < until {
            // Peek first: a data datagram must stay queued for the test.
            match sock.peek(&mut buf) {
                Ok(n) if buf.get(..n) == Some(hello) => {
                    let _ = sock.recv(&mut buf);
                    return Ok(());
                }
                // The server already sends data on this stream, so it took
                // our greeting (its echo was lost).
                Ok(n) if n >= 2 && buf[..2] == datagram::MAGIC => return Ok(()),
                Ok(_) => {
                    let _ = sock.recv(&mut buf);
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::WouldBlock
                            | ErrorKind::TimedOut
                            | ErrorKind::Interrupted
                            | ErrorKind::ConnectionRefused
                    ) =>
                {
                    if e.kind() != ErrorKind::Interrupted {
                        break;
                    }
                }
                Err(e) => return Err(EngineError::io("receive UDP greeting echo", e)),
            }
        }
    }
    Err(EngineError::Unsupported(format!(
        "the server did not answer {GREET_TRIES} UDP greetings over {:.1} s (is UDP to its port blocked?)",
        (GREET_EVERY * GREET_TRIES).as_secs_f64()
    )))
}

/// Server side: one pending datagram on an unattached socket, if any.
pub fn poll_greeting(sock: &UdpSocket, buf: &mut [u8]) -> Option<(usize, SocketAddr)> {
    let _ = sock.set_nonblocking(true);
    let r = sock.recv_from(buf).ok();
    let _ = sock.set_nonblocking(false);
    r
}

/// Server side: the greeting from `from` was accepted; connect to it and
/// echo the greeting back.
pub fn accept_greeting(
    sock: &UdpSocket,
    from: SocketAddr,
    greeting: &[u8],
) -> Result<(), EngineError> {
    sock.connect(from)
        .map_err(|e| EngineError::io(format!("connect UDP to {from}"), e))?;
    sock.send(greeting)
        .map_err(|e| EngineError::io("echo UDP greeting", e))?;
    Ok(())
}

/// Live counters of one UDP stream, for the sampler's interval records.
/// Only the stream's own thread writes them.
#[derive(Debug)]
#[repr(align(64))]
pub struct UdpCounters {
    /// Datagrams sent, or valid datagrams read.
    pub datagrams: AtomicU64,
    pub received: AtomicU64,
    pub next_expected: AtomicU64,
    pub duplicates: AtomicU64,
    pub reordered: AtomicU64,
    pub late: AtomicU64,
    pub corrupt: AtomicU64,
    /// f64 bits of the current jitter, ns.
    pub jitter_bits: AtomicU64,
    pub socket_drops: AtomicU64,
    /// The peer's issued count for this stream, once its SendDone came
    /// (`u64::MAX` before).
    pub issued: AtomicU64,
}

impl Default for UdpCounters {
    fn default() -> Self {
        UdpCounters {
            datagrams: AtomicU64::new(0),
            received: AtomicU64::new(0),
            next_expected: AtomicU64::new(0),
            duplicates: AtomicU64::new(0),
            reordered: AtomicU64::new(0),
            late: AtomicU64::new(0),
            corrupt: AtomicU64::new(0),
            jitter_bits: AtomicU64::new(0),
            socket_drops: AtomicU64::new(0),
            issued: AtomicU64::new(u64::MAX),
        }
    }
}

fn load(a: &AtomicU64) -> u64 {
    a.load(Ordering::Relaxed)
}

impl UdpCounters {
    pub fn issued(&self) -> Option<u64> {
        Some(load(&self.issued)).filter(|&v| v != u64::MAX)
    }
    pub fn set_issued(&self, n: u64) {
        self.issued.store(n, Ordering::Relaxed);
    }
    pub fn jitter_ns(&self) -> f64 {
        f64::from_bits(load(&self.jitter_bits))
    }
}

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

pub(crate) fn ns_since(start: Instant) -> u64 {
    start.elapsed().as_nanos() as u64
}

/// Sleeps (then spins the last stretch) until `due_ns` after `start`.
/// Returns false when a stop or abort arrived meanwhile.
pub(crate) fn wait_until(start: Instant, due_ns: u64, signals: &Signals) -> bool {
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
pub(crate) fn tighten_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes an unsigned long; no pointers.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
    }
}

/// The send loop of the plain syscall engine.
pub fn send_loop(
    sock: &UdpSocket,
    job: &SendJob,
    bytes: &StreamCounter,
    live: &UdpCounters,
    signals: &Signals,
) -> (UdpSend, StreamEnd) {
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
            let _ = sock.send(&junk[..n]);
            next_junk += 1;
        }
        calls += 1;
        match sock.send(&buf) {
            Ok(n) if n == buf.len() => {
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
            Ok(n) => {
                break Err(EngineError::Unsupported(format!(
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

/// `recvmsg` with room for an SO_RXQ_OVFL control message.
struct RecvMsg {
    control: [u64; 8],
}

impl RecvMsg {
    /// Receives one datagram into `buf` with `flags`. Returns its length,
    /// whether it was truncated, the socket's drop counter if the kernel
    /// attached one, and the kernel's receive timestamp (CLOCK_REALTIME ns)
    /// if it attached one.
    fn recv(
        &mut self,
        sock: &UdpSocket,
        buf: &mut [u8],
        flags: libc::c_int,
    ) -> std::io::Result<(usize, bool, Option<u32>, Option<u64>)> {
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: msghdr is plain data; we point it at live buffers below.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = self.control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&self.control) as _;
        // SAFETY: every pointer in msg refers to a buffer that outlives the call.
        let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, flags) };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut drops = None;
        let mut stamp = None;
        // SAFETY: the CMSG macros walk the control buffer the kernel filled,
        // bounded by msg_controllen; each payload is read unaligned at the
        // size its type defines.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET {
                    match (*c).cmsg_type {
                        SO_RXQ_OVFL => {
                            drops =
                                Some(std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<u32>()));
                        }
                        SO_TIMESTAMPNS => {
                            let ts = std::ptr::read_unaligned(
                                libc::CMSG_DATA(c).cast::<libc::timespec>(),
                            );
                            stamp = Some(
                                (ts.tv_sec.max(0) as u64)
                                    .saturating_mul(1_000_000_000)
                                    .saturating_add(ts.tv_nsec.max(0) as u64),
                            );
                        }
                        _ => {}
                    }
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        Ok((
            n as usize,
            msg.msg_flags & libc::MSG_TRUNC != 0,
            drops,
            stamp,
        ))
    }
}

/// The receive loop of the plain syscall engine. Runs until the drain
/// deadline in `signals` passes, then reads what is already queued, and
/// stops; or until the test is aborted.
///
/// Arrival times are the kernel's receive timestamps (SO_TIMESTAMPNS,
/// converted from CLOCK_REALTIME to "ns since Start" once, at the start), so
/// a datagram that arrived before the deadline but waited in the socket
/// buffer is on time, and jitter excludes this thread's scheduling delays.
/// Where the kernel gives no timestamp the read time stands in.
pub fn recv_loop(
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
    let mut buf = vec![0u8; RECV_BUF.max(job.len + 1)];
    let mut msg = RecvMsg { control: [0; 8] };
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
        let flags = if draining { libc::MSG_DONTWAIT } else { 0 };
        calls += 1;
        let r = msg.recv(sock, &mut buf, flags);
        let now = ns_since(job.start);
        if !draining && signals.drain_passed(now) {
            draining = true;
        }
        match r {
            Ok((n, truncated, drops, stamp)) => {
                if drops.is_some() {
                    cmsg_drops = drops;
                }
                let arrival = stamp.map_or(now, |t| t.saturating_sub(realtime_at_start));
                if !late && signals.drain_passed(arrival) {
                    // The queue is in arrival order: everything after is late too.
                    tracker.close();
                    late = true;
                }
                match classify(&buf[..n], truncated, job) {
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
                        let _ = sock.send(&buf[..n]);
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

pub(crate) enum Verdict {
    Data(Header),
    /// Not data and not corrupt: a repeated control greeting.
    Ignored,
    Corrupt(String),
}

pub(crate) fn classify(d: &[u8], truncated: bool, job: &RecvJob) -> Verdict {
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
        let receiver =
            std::thread::spawn(move || recv_loop(&rx, &job, &StreamCounter::default(), &l2, &s2));
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
