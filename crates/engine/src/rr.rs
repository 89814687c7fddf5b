//! Request/response (rr) and connect/request/response (crr) loops.
//!
//! One thread per flow on each side. The client writes a request of exactly
//! the phase's size and reads a response of exactly the response size
//! (TCP framing by known size: no length prefix, nothing else on the
//! connection), timing each transaction with a pair of `CLOCK_MONOTONIC`
//! reads, or each batch of K back-to-back transactions with one pair
//! (`batch`), into an HDR histogram. The server reads a request, stamps its
//! arrival and the response's departure into the response header (when the
//! sizes leave room, see `linerate_proto::rr`), and writes the response.
//!
//! A test runs phases (each size, then each size again under load). In rr,
//! every flow has its own connection per phase: the client ends a phase by
//! shutting down its write side, the server answers end of stream by
//! closing, and the client reads that close, so both ends count the same
//! transactions and no phase's messages can be mistaken for another's.
//! Flows move from phase to phase together (a [`Gate`] run by the side's
//! coordinator thread), so the load streams run exactly while the loaded
//! phases do. In crr each transaction is a new connection, greeted with the
//! test's token and the (phase, flow) stream id, then one request, one
//! response, and the server's close.
//!
//! Over UDP (`--proto udp`) each message is one datagram on a socket per
//! (phase, flow), attached with the UDP tests' greeting handshake
//! (`crate::udp`). A phase ends with an empty datagram, which the server
//! answers with empty datagrams before it moves on. A response that does
//! not come within [`UDP_RESPONSE_TIMEOUT`] is counted as lost (and left
//! out of the distribution); a late one is recognised by its sequence
//! number, when the response is large enough to carry a header, and
//! dropped.
//!
//! Nothing allocates per transaction: buffers are per flow, histograms are
//! fixed-size. `busy_poll` makes the sockets non-blocking and spins on
//! `EAGAIN` (checking the stop flags every [`SPIN_CHECK`] spins), and asks
//! the kernel for `SO_BUSY_POLL`; whether the kernel accepted is reported.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use linerate_proto::clock::ClockOffset;
use linerate_proto::measure::{
    CpuMeasurement, OneWayMeasurement, RrFlowMeasurement, RrMeasurement, SideResults,
    StreamMeasurement,
};
use linerate_proto::rr::{
    self as msg, RequestRepr, ResponseRepr, RrHeader, REQUEST_HEADER_LEN, RESPONSE_HEADER_LEN,
};
use linerate_proto::spec::{RrConn, RrLimit, RrPhase, TcpOptions, TestSpec};
use linerate_proto::wire::{self, DataHello, Message, Side, Token};
use linerate_stats::histogram::Histogram;

use crate::clock::mono_ns;
use crate::cpu::{self, CpuTime};
use crate::engines::EngineKind;
use crate::runner::{spawn_side, CpuScope, DataSocket, SideRun, StreamSetup};
use crate::stream::{is_timeout, map_err, Idle, Signals, StreamCounter, IDLE_LIMIT, POLL};
use crate::tcp;
use crate::{socket, tcp_info, EngineError};

/// Spins between check points in busy-poll mode (a power of two: the check
/// is a mask). Each spin is a non-blocking `read`/`recv` (hundreds of ns),
/// so a check point (a clock read, tens of ns, and a yield) every few spins
/// costs little, and a peer sharing the CPU waits microseconds, not tens.
pub const SPIN_CHECK: u32 = 4;
/// How long a busy-polling wait spins before it blocks in `poll(2)` until
/// the socket is ready: the same budget as the kernel's `SO_BUSY_POLL`, so a
/// peer that is slow (or descheduled on a crowded host) costs a sleep, not a
/// CPU taken from it.
pub const SPIN_BUDGET: Duration = Duration::from_micros(socket::BUSY_POLL_US as u64);
/// The shortest spin an adapted budget keeps.
const SPIN_MIN: Duration = Duration::from_micros(1);
/// Every this many waits (a power of two) spin the full budget again, to
/// find out whether spinning has started to pay (the peer moved to another
/// CPU).
const SPIN_PROBE_EVERY: u32 = 64;

/// A connection's busy-poll budget, adapted to whether spinning pays.
///
/// Spinning only shortens a wait when the peer runs on another CPU; when
/// both ends spin on one CPU, the spinner keeps the peer from answering
/// until it gives up. So a wait that outlasts its budget halves the budget
/// (down to [`SPIN_MIN`]) and a wait that ends while spinning restores the
/// full [`SPIN_BUDGET`]; every [`SPIN_PROBE_EVERY`]th wait spins the full
/// budget. While spinning, each check point also yields the CPU, so a peer
/// queued on it runs at once.
#[derive(Debug)]
struct Spin {
    budget_ns: u64,
    /// This wait's budget and start (monotonic ns), while waiting.
    current: Option<(u64, u64)>,
    waits: u32,
}

impl Spin {
    fn new() -> Self {
        Spin {
            budget_ns: SPIN_BUDGET.as_nanos() as u64,
            current: None,
            waits: 0,
        }
    }

    /// At a check point of a wait: true to keep spinning, false to block.
    fn keep_spinning(&mut self, now: u64) -> bool {
        let full = SPIN_BUDGET.as_nanos() as u64;
        let (budget, since) = *self.current.get_or_insert_with(|| {
            self.waits = self.waits.wrapping_add(1);
            // SPIN_PROBE_EVERY is a power of two: a mask picks every Nth.
            let b = if self.waits & (SPIN_PROBE_EVERY - 1) == 0 {
                full
            } else {
                self.budget_ns
            };
            (b, now)
        });
        if now.saturating_sub(since) < budget {
            std::thread::yield_now();
            return true;
        }
        self.budget_ns = (self.budget_ns / 2).max(SPIN_MIN.as_nanos() as u64);
        self.current = None;
        false
    }

    /// The wait ended with data (while spinning: spinning paid).
    fn done(&mut self) {
        if self.current.take().is_some() {
            self.budget_ns = SPIN_BUDGET.as_nanos() as u64;
        }
    }
}
/// How long the load runs before the first loaded phase starts, so the
/// loaded figures see a load in its steady state rather than its ramp.
pub const LOAD_WARMUP: Duration = Duration::from_millis(250);
/// How long a UDP client waits for a response before counting it lost.
pub const UDP_RESPONSE_TIMEOUT: Duration = Duration::from_secs(1);
/// Receive timeout of blocking UDP sockets: how often a waiting flow looks
/// at its deadline and the stop flags.
const UDP_POLL: Duration = Duration::from_millis(20);
/// How often (and how many times) a UDP client repeats its end-of-phase
/// datagram until the server answers.
const UDP_END_EVERY: Duration = Duration::from_millis(100);
const UDP_END_TRIES: u32 = 50;
/// Empty datagrams a UDP server sends to answer an end of phase (any one
/// arriving is enough).
const UDP_END_ACKS: u32 = 3;
/// How long a crr transaction's connect may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How often waiting threads look at the stop flags.
const WAKE: Duration = Duration::from_millis(100);

/// How one side runs a request/response test.
#[derive(Debug, Clone)]
pub struct RrParams {
    pub phases: Vec<RrPhase>,
    pub flows: u32,
    pub limit: RrLimit,
    pub batch: u32,
    pub busy_poll: bool,
    /// Bytes per write of the load streams.
    pub load_len: usize,
    /// Pin flow `i` to `cpus[i % cpus.len()]` when not empty.
    pub cpus: Vec<usize>,
    pub cpu_scope: CpuScope,
    /// Client: the clock offset to the server, for one-way delays.
    pub clock: Option<ClockOffset>,
}

impl RrParams {
    /// Parameters from the agreed spec; `None` if it is not an rr/crr spec.
    pub fn from_spec(
        spec: &TestSpec,
        cpus: &[usize],
        cpu_scope: CpuScope,
        clock: Option<ClockOffset>,
    ) -> Option<RrParams> {
        let rr = spec.rr.as_ref()?;
        Some(RrParams {
            phases: rr.phases(),
            flows: u32::from(spec.streams.max(1)),
            limit: rr.limit,
            batch: rr.batch.max(1),
            busy_poll: rr.busy_poll,
            load_len: spec.len as usize,
            cpus: cpus.to_vec(),
            cpu_scope,
            clock,
        })
    }

    fn per_message(&self) -> bool {
        self.batch <= 1
    }

    fn max_sizes(&self) -> (usize, usize) {
        let req = self.phases.iter().map(|p| p.request).max().unwrap_or(1);
        let resp = self.phases.iter().map(|p| p.response).max().unwrap_or(1);
        (req as usize, resp as usize)
    }
}

/// A flow's socket for one phase.
#[derive(Debug)]
enum Conn {
    Tcp(TcpStream),
    /// Connected to the peer's socket of the same (phase, flow).
    Udp(UdpSocket),
}

/// An rr test's connections, sorted by what they carry.
#[derive(Debug, Default)]
pub struct RrConns {
    /// `flows[f][phase]`.
    flows: Vec<Vec<Conn>>,
    load: Vec<(u32, TcpStream)>,
}

impl RrConns {
    /// Sorts the attached connections using the spec's numbering; every
    /// (phase, flow) must be present.
    pub fn sort(spec: &TestSpec, streams: Vec<StreamSetup>) -> Result<RrConns, EngineError> {
        let phases = spec.rr.as_ref().map_or(0, |r| r.phases().len());
        let flows = usize::from(spec.streams.max(1));
        let mut grid: Vec<Vec<Option<Conn>>> = (0..flows)
            .map(|_| (0..phases).map(|_| None).collect())
            .collect();
        let mut load = Vec::new();
        for s in streams {
            let conn = match s.sock {
                DataSocket::Tcp(t) => Conn::Tcp(t),
                DataSocket::Udp(u) => Conn::Udp(u),
            };
            match (spec.rr_conn(s.id), conn) {
                (Some(RrConn::Flow { phase, flow }), conn) => {
                    if let Some(slot) = grid
                        .get_mut(flow as usize)
                        .and_then(|f| f.get_mut(phase as usize))
                    {
                        *slot = Some(conn);
                    }
                }
                (Some(RrConn::Load { .. }), Conn::Tcp(sock)) => load.push((s.id, sock)),
                (Some(RrConn::Load { .. }), Conn::Udp(_)) => {
                    return Err(EngineError::Protocol(format!(
                        "load stream {} is not a TCP connection",
                        s.id
                    )))
                }
                (None, _) => {
                    return Err(EngineError::Protocol(format!(
                        "connection {} is not part of this request/response test",
                        s.id
                    )))
                }
            }
        }
        let flows = grid
            .into_iter()
            .enumerate()
            .map(|(f, conns)| {
                conns
                    .into_iter()
                    .enumerate()
                    .map(|(p, c)| {
                        c.ok_or_else(|| {
                            EngineError::Protocol(format!(
                                "flow {f} has no connection for phase {p}"
                            ))
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(RrConns { flows, load })
    }
}

/// Where a crr client connects, and how it greets the server.
#[derive(Debug, Clone)]
pub struct CrrTarget {
    pub addr: SocketAddr,
    pub tcp: TcpOptions,
    pub token: Token,
    /// The spec, for the (phase, flow) stream ids.
    pub spec: TestSpec,
}

// ---------------------------------------------------------------------------
// I/O with the two waiting disciplines
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wait {
    /// Blocking calls with the sockets' [`POLL`] timeout.
    Block,
    /// Non-blocking calls, spinning on `EAGAIN`.
    Spin,
}

/// Whole-message reads and writes on one connection, honouring the stop
/// flags and the idle limit.
struct Io<'a> {
    sock: &'a TcpStream,
    wait: Wait,
    signals: &'a Signals,
    idle: Idle,
    spins: u32,
    spin: Spin,
}

impl<'a> Io<'a> {
    fn new(sock: &'a TcpStream, wait: Wait, signals: &'a Signals) -> Self {
        Io {
            sock,
            wait,
            signals,
            idle: Idle(None),
            spins: 0,
            spin: Spin::new(),
        }
    }

    fn progressed(&mut self) {
        self.idle.progressed();
        self.spin.done();
    }

    /// Called when a call would block (or, with a socket timeout, timed out).
    fn waited(&mut self, events: libc::c_short) -> Result<(), EngineError> {
        if self.wait == Wait::Spin {
            self.spins = self.spins.wrapping_add(1);
            if self.spins & (SPIN_CHECK - 1) != 0 {
                std::hint::spin_loop();
                return Ok(());
            }
            if self.signals.aborted() {
                return Err(EngineError::Aborted);
            }
            if self.spin.keep_spinning(mono_ns()) {
                return Ok(());
            }
            // The budget is spent: sleep until the socket is ready.
            socket::wait_ready(self.sock, events, POLL).map_err(|e| map_err("poll", e))?;
        }
        if self.signals.aborted() {
            return Err(EngineError::Aborted);
        }
        self.idle.timed_out()
    }

    fn write_all(&mut self, mut buf: &[u8]) -> Result<(), EngineError> {
        let mut w = self.sock;
        while !buf.is_empty() {
            match w.write(buf) {
                Ok(0) => return Err(EngineError::PeerReset("write returned 0".into())),
                Ok(n) => {
                    buf = &buf[n..];
                    self.progressed();
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) => self.waited(libc::POLLOUT)?,
                Err(e) => return Err(map_err("write", e)),
            }
        }
        Ok(())
    }

    /// Fills `buf`. `Ok(false)`: the peer closed before its first byte (a
    /// clean end between messages); a close inside a message is an error.
    fn read_exact(&mut self, buf: &mut [u8]) -> Result<bool, EngineError> {
        let mut r = self.sock;
        let mut got = 0;
        while got < buf.len() {
            match r.read(&mut buf[got..]) {
                Ok(0) if got == 0 => return Ok(false),
                Ok(0) => {
                    return Err(EngineError::PeerReset(format!(
                        "connection closed {got} bytes into a {}-byte message",
                        buf.len()
                    )))
                }
                Ok(n) => {
                    got += n;
                    self.progressed();
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) => self.waited(libc::POLLIN)?,
                Err(e) => return Err(map_err("read", e)),
            }
        }
        Ok(true)
    }

    /// Reads to end of stream, which must come without further bytes.
    fn expect_close(&mut self) -> Result<(), EngineError> {
        let mut b = [0u8; 1];
        if self.read_exact(&mut b)? {
            return Err(EngineError::Protocol(
                "peer sent bytes after the last message of the phase".into(),
            ));
        }
        Ok(())
    }
}

/// Prepares a connection for a phase. Blocking mode: no socket timeouts
/// (each blocking read with `SO_RCVTIMEO` arms a kernel timer; the side's
/// [`Watch`] unblocks a stuck flow instead). Busy-poll mode: non-blocking,
/// plus `SO_BUSY_POLL`. Returns the wait discipline and, in busy-poll mode,
/// what the kernel said.
fn prepare(sock: &TcpStream, busy_poll: bool) -> Result<(Wait, Option<String>), EngineError> {
    if !busy_poll {
        sock.set_read_timeout(None)
            .and_then(|()| sock.set_write_timeout(None))
            .map_err(|e| EngineError::io("clearing socket timeouts", e))?;
        return Ok((Wait::Block, None));
    }
    sock.set_nonblocking(true).map_err(|e| EngineError::Io {
        what: "O_NONBLOCK".into(),
        err: e,
    })?;
    let said = match socket::set_busy_poll(sock, socket::BUSY_POLL_US) {
        Ok(()) => format!(
            "SO_BUSY_POLL {} µs accepted by the kernel",
            socket::BUSY_POLL_US
        ),
        Err(e) => format!(
            "SO_BUSY_POLL refused by the kernel ({e}); spinning on non-blocking sockets only"
        ),
    };
    Ok((Wait::Spin, Some(said)))
}

// ---------------------------------------------------------------------------
// Phase gate
// ---------------------------------------------------------------------------

#[derive(Debug, Default)]
struct GateState {
    /// Phases with index < `open` may run.
    open: u32,
    /// (flow, phase) pairs finished.
    done: u32,
    /// The load streams may send.
    load: bool,
    /// The coordinator is done: nothing more will open.
    closed: bool,
}

/// Moves the flows of one side from phase to phase together.
#[derive(Debug, Default)]
struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
}

impl Gate {
    fn update(&self, f: impl FnOnce(&mut GateState)) {
        if let Ok(mut s) = self.state.lock() {
            f(&mut s);
        }
        self.changed.notify_all();
    }

    /// Waits until `cond` holds (true) or the side aborts / the gate closes
    /// (false), calling `tick` every [`WAKE`].
    fn wait_ticking(
        &self,
        signals: &Signals,
        cond: impl Fn(&GateState) -> bool,
        mut tick: impl FnMut(),
    ) -> bool {
        let Ok(mut s) = self.state.lock() else {
            return false;
        };
        loop {
            if cond(&s) {
                return true;
            }
            if s.closed || signals.aborted() {
                return false;
            }
            match self.changed.wait_timeout(s, WAKE) {
                Ok((g, t)) => {
                    s = g;
                    if t.timed_out() {
                        tick();
                    }
                }
                Err(_) => return false,
            }
        }
    }

    fn wait(&self, signals: &Signals, cond: impl Fn(&GateState) -> bool) -> bool {
        self.wait_ticking(signals, cond, || {})
    }
}

// ---------------------------------------------------------------------------
// Watch: unblocking and stall detection without socket timeouts
// ---------------------------------------------------------------------------

/// What the flows of one side share with the thread that watches them.
///
/// Blocking rr sockets have no timeout, so a flow waiting on a silent peer
/// sleeps in the kernel; the watcher ([`Watch::check`], every [`WAKE`])
/// shuts the flows' sockets down when the side aborts, and declares a stall
/// (then aborts) when no flow completes a transaction for [`IDLE_LIMIT`].
#[derive(Debug)]
struct Watch {
    /// Per flow: a duplicate of the connection it is using now.
    socks: Mutex<Vec<Option<TcpStream>>>,
    /// Per flow: transactions completed, on separate cache lines.
    progress: Vec<StreamCounter>,
    stalled: AtomicBool,
}

impl Watch {
    fn new(flows: usize) -> Self {
        Watch {
            socks: Mutex::new((0..flows).map(|_| None).collect()),
            progress: (0..flows).map(|_| StreamCounter::default()).collect(),
            stalled: AtomicBool::new(false),
        }
    }

    fn register(&self, flow: u32, sock: &TcpStream) {
        if let Ok(mut v) = self.socks.lock() {
            if let Some(slot) = v.get_mut(flow as usize) {
                *slot = sock.try_clone().ok();
            }
        }
    }

    /// Drops the flow's duplicate: the connection must close when the flow
    /// closes it (the peer waits for that close to end the phase).
    fn release(&self, flow: u32) {
        if let Ok(mut v) = self.socks.lock() {
            if let Some(slot) = v.get_mut(flow as usize) {
                *slot = None;
            }
        }
    }

    #[inline]
    fn tick(&self, flow: u32) {
        if let Some(c) = self.progress.get(flow as usize) {
            c.add(1);
        }
    }

    fn total(&self) -> u64 {
        self.progress.iter().map(StreamCounter::get).sum()
    }

    fn shutdown_all(&self) {
        if let Ok(v) = self.socks.lock() {
            for s in v.iter().flatten() {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
    }

    /// The error a flow reports after the side was stopped under it.
    fn explain(&self, e: EngineError) -> EngineError {
        if self.stalled.load(Ordering::Acquire) {
            EngineError::Stalled(IDLE_LIMIT.as_secs())
        } else {
            e
        }
    }
}

/// The watcher's memory between checks.
struct Watchdog {
    total: u64,
    since: Instant,
}

impl Watchdog {
    fn new() -> Self {
        Watchdog {
            total: 0,
            since: Instant::now(),
        }
    }

    fn check(&mut self, watch: &Watch, signals: &Signals) {
        if signals.aborted() {
            // Repeated while flows run, so a socket registered just after an
            // abort is shut down too.
            watch.shutdown_all();
            return;
        }
        let total = watch.total();
        if total != self.total {
            self.total = total;
            self.since = Instant::now();
        } else if self.since.elapsed() >= IDLE_LIMIT {
            watch.stalled.store(true, Ordering::Release);
            signals.abort();
            watch.shutdown_all();
        }
    }
}

// ---------------------------------------------------------------------------
// Client
// ---------------------------------------------------------------------------

/// A flow's histograms and counters for one phase.
struct Tally {
    rtt: Histogram,
    c2s: Histogram,
    s2c: Histogram,
    negative: [u64; 2],
    one_way: bool,
    transactions: u64,
    lost: u64,
    first_ns: Option<u64>,
    last_ns: u64,
}

impl Tally {
    fn new() -> Self {
        Tally {
            rtt: Histogram::new(),
            c2s: Histogram::new(),
            s2c: Histogram::new(),
            negative: [0; 2],
            one_way: false,
            transactions: 0,
            lost: 0,
            first_ns: None,
            last_ns: 0,
        }
    }

    fn one_way(h: &mut Histogram, negative: &mut u64, ns: i128) {
        match u64::try_from(ns) {
            Ok(v) => h.record(v),
            Err(_) => *negative += 1,
        }
    }

    fn into_measurement(
        self,
        phase: &RrPhase,
        flow: u32,
        result: Result<(), EngineError>,
    ) -> RrFlowMeasurement {
        let n = self.transactions;
        let one_way = |h: Histogram, negative| {
            self.one_way.then(|| OneWayMeasurement {
                histogram: h.to_buckets(),
                negative,
            })
        };
        RrFlowMeasurement {
            phase: phase.index,
            flow,
            transactions: n,
            bytes_sent: (n + self.lost) * u64::from(phase.request),
            bytes_received: n * u64::from(phase.response),
            elapsed_ns: self.first_ns.map_or(0, |f| self.last_ns.saturating_sub(f)),
            lost: self.lost,
            rtt: self.rtt.to_buckets(),
            client_to_server: one_way(self.c2s, self.negative[0]),
            server_to_client: one_way(self.s2c, self.negative[1]),
            error: result.err().map(|e| e.to_string()),
        }
    }
}

/// A flow's buffers, allocated once.
struct Buffers {
    req: Vec<u8>,
    resp: Vec<u8>,
    /// UDP: room for the largest datagram plus one (to see an oversized one).
    rx: Vec<u8>,
}

impl Buffers {
    fn new(p: &RrParams) -> Self {
        let (req, resp) = p.max_sizes();
        Buffers {
            req: vec![0; req],
            resp: vec![0; resp],
            rx: Vec::new(),
        }
    }

    /// Takes the datagram receive buffer (allocated on first use); give it
    /// back with `self.rx = …` when done.
    fn take_rx(&mut self) -> Vec<u8> {
        if self.rx.is_empty() {
            return vec![0; self.req.len().max(self.resp.len()) + 1];
        }
        std::mem::take(&mut self.rx)
    }
}

/// What a client flow does each transaction: on its phase connection (rr),
/// or on a connection of its own (crr).
enum Transport<'a> {
    Rr(Io<'a>),
    Crr {
        target: &'a CrrTarget,
        /// DataHello + request, written in one call.
        greeting: Vec<u8>,
        signals: &'a Signals,
    },
}

/// The end of this phase's time or count.
struct Budget {
    end_ns: u64,
    count: u64,
}

impl Budget {
    fn new(limit: RrLimit) -> Self {
        match limit {
            RrLimit::TimeMs(t) => Budget {
                end_ns: mono_ns().saturating_add(t.saturating_mul(1_000_000)),
                count: u64::MAX,
            },
            RrLimit::Count(n) => Budget {
                end_ns: u64::MAX,
                count: n,
            },
        }
    }
}

/// One transaction: request out, response in. Returns the server's
/// timestamps when the response carried them.
fn transact(
    t: &mut Transport<'_>,
    flow: u32,
    seq: u64,
    sent_ns: Option<u64>,
    req: &mut [u8],
    resp: &mut [u8],
) -> Result<Option<(u64, u64)>, EngineError> {
    let header = RequestRepr {
        flow,
        sequence: seq,
        sent_ns,
    };
    match t {
        Transport::Rr(io) => {
            header.emit(req);
            io.write_all(req)?;
            if !io.read_exact(resp)? {
                return Err(EngineError::PeerReset(
                    "server closed the connection mid-phase".into(),
                ));
            }
        }
        Transport::Crr {
            target,
            greeting,
            signals,
        } => {
            let hello_len = greeting.len() - req.len();
            header.emit(&mut greeting[hello_len..]);
            let sock = socket::connect(target.addr, &target.tcp, CONNECT_TIMEOUT)?;
            socket::set_io_timeout(&sock, POLL)?;
            let mut io = Io::new(&sock, Wait::Block, signals);
            io.write_all(greeting)?;
            if !io.read_exact(resp)? {
                return Err(EngineError::PeerReset(
                    "server closed the connection before responding".into(),
                ));
            }
            // The server closes first (so this side keeps no TIME_WAIT
            // and cannot run out of ephemeral ports).
            io.expect_close()?;
        }
    }
    if resp.len() >= RESPONSE_HEADER_LEN {
        let r = ResponseRepr::parse(&RrHeader::new_checked(&*resp)?)?;
        msg::expect(flow, seq, r.flow, r.sequence)?;
        return Ok(r.server_ns);
    }
    Ok(None)
}

#[allow(clippy::too_many_arguments)]
fn client_phase(
    t: &mut Transport<'_>,
    phase: &RrPhase,
    flow: u32,
    p: &RrParams,
    signals: &Signals,
    watch: &Watch,
    bufs: &mut Buffers,
    tally: &mut Tally,
) -> Result<(), EngineError> {
    let req = &mut bufs.req[..phase.request as usize];
    let resp = &mut bufs.resp[..phase.response as usize];
    let per_message = p.per_message();
    let clock = p
        .clock
        .filter(|_| per_message && resp.len() >= RESPONSE_HEADER_LEN);
    tally.one_way = clock.is_some();
    let budget = Budget::new(p.limit);
    let mut seq = 0u64;
    while seq < budget.count {
        if signals.aborted() {
            return Err(EngineError::Aborted);
        }
        let k = u64::from(p.batch).min(budget.count - seq);
        let t0 = mono_ns();
        if t0 >= budget.end_ns {
            break;
        }
        tally.first_ns.get_or_insert(t0);
        let mut server_ns = None;
        for _ in 0..k {
            server_ns = transact(t, flow, seq, per_message.then_some(t0), req, resp)?;
            seq += 1;
            tally.transactions = seq;
        }
        let t1 = mono_ns();
        tally.last_ns = t1;
        watch.tick(flow);
        let span = t1.saturating_sub(t0);
        if k == 1 {
            tally.rtt.record(span);
        } else {
            // Batch mode: each transaction counts as its batch's mean.
            tally.rtt.record_n(span / k, k);
        }
        if let (Some(c), Some((rx, tx))) = (clock, server_ns) {
            Tally::one_way(
                &mut tally.c2s,
                &mut tally.negative[0],
                c.to_client(rx) - i128::from(t0),
            );
            Tally::one_way(
                &mut tally.s2c,
                &mut tally.negative[1],
                i128::from(t1) - c.to_client(tx),
            );
        }
    }
    if let Transport::Rr(io) = t {
        // End of phase: the server answers our end of stream by closing.
        io.sock
            .shutdown(Shutdown::Write)
            .map_err(|e| map_err("shutdown", e))?;
        io.expect_close()?;
    }
    Ok(())
}

/// What a client flow thread returns.
struct FlowEnd {
    measurements: Vec<RrFlowMeasurement>,
    cpu: CpuTime,
    busy_poll: Option<String>,
}

fn client_flow(
    flow: u32,
    conns: Option<Vec<Conn>>,
    crr: Option<&CrrTarget>,
    p: &RrParams,
    signals: &Signals,
    gate: &Gate,
    watch: &Watch,
) -> FlowEnd {
    let cpu0 = cpu::thread();
    let mut out = FlowEnd {
        measurements: Vec::new(),
        cpu: CpuTime::default(),
        busy_poll: None,
    };
    let pin_error = pin(p, flow);
    let mut bufs = Buffers::new(p);
    let mut conns = conns.map(Vec::into_iter);
    for phase in &p.phases {
        if !gate.wait(signals, |s| s.open > phase.index) {
            break;
        }
        let mut tally = Tally::new();
        let result = match (&mut conns, crr) {
            (Some(conns), _) => match conns.next() {
                Some(Conn::Tcp(sock)) => {
                    let r = prepare(&sock, p.busy_poll).and_then(|(wait, said)| {
                        out.busy_poll = out.busy_poll.take().or(said);
                        watch.register(flow, &sock);
                        let mut t = Transport::Rr(Io::new(&sock, wait, signals));
                        client_phase(
                            &mut t, phase, flow, p, signals, watch, &mut bufs, &mut tally,
                        )
                    });
                    // The connection closes here: drop the watcher's copy too.
                    watch.release(flow);
                    r
                }
                Some(Conn::Udp(sock)) => {
                    prepare_udp(&sock, p.busy_poll, UDP_POLL).and_then(|(wait, said)| {
                        out.busy_poll = out.busy_poll.take().or(said);
                        let mut u = Udp::new(&sock, wait, signals);
                        udp_client_phase(&mut u, phase, flow, p, watch, &mut bufs, &mut tally)
                    })
                }
                None => Err(EngineError::Protocol(format!(
                    "no connection for phase {}",
                    phase.index
                ))),
            },
            (None, Some(target)) => {
                let mut greeting = wire::to_bytes(&Message::DataHello(DataHello {
                    token: target.token,
                    stream: target.spec.rr_conn_id(phase.index, flow),
                    sender: Side::Client,
                }));
                greeting.extend(std::iter::repeat_n(0u8, phase.request as usize));
                let mut t = Transport::Crr {
                    target,
                    greeting,
                    signals,
                };
                client_phase(
                    &mut t, phase, flow, p, signals, watch, &mut bufs, &mut tally,
                )
            }
            (None, None) => Err(EngineError::Protocol("no transport".into())),
        };
        let result = match (result, &pin_error) {
            (Ok(()), Some(e)) => Err(EngineError::Pin(e.to_string())),
            (r, _) => r.map_err(|e| watch.explain(e)),
        };
        let failed = result.is_err();
        out.measurements
            .push(tally.into_measurement(phase, flow, result));
        if failed {
            signals.abort();
            break;
        }
        gate.update(|s| s.done += 1);
    }
    out.cpu = cpu::thread().saturating_sub(cpu0);
    out
}

fn pin(p: &RrParams, flow: u32) -> Option<std::io::Error> {
    if p.cpus.is_empty() {
        return None;
    }
    cpu::pin_current_thread(p.cpus[flow as usize % p.cpus.len()]).err()
}

/// A load stream's thread on the client: waits for the loaded phases, then
/// sends until told to stop.
fn client_load(
    id: u32,
    sock: TcpStream,
    engine: EngineKind,
    len: usize,
    signals: &Signals,
    load_signals: &Signals,
    gate: &Gate,
) -> (StreamMeasurement, CpuTime) {
    let cpu0 = cpu::thread();
    let counter = StreamCounter::default();
    let mut m = StreamMeasurement {
        id,
        sender: Some(Side::Client),
        ..StreamMeasurement::default()
    };
    if gate.wait(signals, |s| s.load) {
        let buf = vec![0u8; len.max(1)];
        let t0 = Instant::now();
        let end = tcp::send(engine, &sock, &buf, None, &counter, load_signals);
        m.elapsed_ns = t0.elapsed().as_nanos() as u64;
        m.calls = end.calls;
        m.error = end.result.err().map(|e| e.to_string());
        m.tcp = tcp_info::read(&sock);
    } else {
        // No loaded phase ran: end the stream so the server's reader ends.
        let _ = sock.shutdown(Shutdown::Write);
    }
    m.bytes = counter.get();
    (m, cpu::thread().saturating_sub(cpu0))
}

/// Starts the client side of an rr test (`conns`) or a crr test (`crr`).
pub fn start_client(
    engine: EngineKind,
    conns: RrConns,
    crr: Option<CrrTarget>,
    params: RrParams,
) -> SideRun {
    let name = engine.name();
    spawn_side(name, move |signals| {
        run_client(engine, conns, crr, &params, signals)
    })
}

fn run_client(
    engine: EngineKind,
    conns: RrConns,
    crr: Option<CrrTarget>,
    p: &RrParams,
    signals: &Arc<Signals>,
) -> SideResults {
    let proc0 = cpu::process();
    let self0 = cpu::thread();
    let host0 = cpu::host();
    let t_start = Instant::now();
    let gate = Gate::default();
    let watch = Watch::new(p.flows as usize);
    let load_signals = Signals::default();
    let mut load_elapsed = Duration::ZERO;
    let RrConns { flows, load } = conns;
    let mut flow_conns: Vec<Option<Vec<Conn>>> = flows.into_iter().map(Some).collect();
    flow_conns.resize_with(p.flows as usize, || None);
    let (ends, loads) = std::thread::scope(|scope| {
        let gate = &gate;
        let watch = &watch;
        let load_signals = &load_signals;
        let crr = crr.as_ref();
        let mut dog = Watchdog::new();
        let flow_handles: Vec<_> = flow_conns
            .into_iter()
            .enumerate()
            .map(|(f, conns)| {
                std::thread::Builder::new()
                    .name(format!("linerate-rr-{f}"))
                    .spawn_scoped(scope, move || {
                        client_flow(f as u32, conns, crr, p, signals, gate, watch)
                    })
            })
            .collect();
        let load_handles: Vec<_> = load
            .into_iter()
            .map(|(id, sock)| {
                std::thread::Builder::new()
                    .name(format!("linerate-load-{id}"))
                    .spawn_scoped(scope, move || {
                        client_load(id, sock, engine, p.load_len, signals, load_signals, gate)
                    })
            })
            .collect();
        if flow_handles.iter().any(Result::is_err) || load_handles.iter().any(Result::is_err) {
            signals.abort();
        }
        // Coordinate the phases.
        let mut load_started: Option<Instant> = None;
        for phase in &p.phases {
            if phase.loaded && load_started.is_none() {
                load_started = Some(Instant::now());
                gate.update(|s| s.load = true);
                // Sleep through the warm-up, waking for an abort.
                let until = Instant::now() + LOAD_WARMUP;
                while !signals.aborted() {
                    let left = until.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    std::thread::sleep(WAKE.min(left));
                }
            }
            gate.update(|s| s.open = phase.index + 1);
            let target = p.flows * (phase.index + 1);
            if !gate.wait_ticking(signals, |s| s.done >= target, || dog.check(watch, signals)) {
                break;
            }
        }
        if let Some(t) = load_started {
            load_elapsed = t.elapsed();
        }
        load_signals.stop();
        if signals.aborted() {
            load_signals.abort();
        }
        gate.update(|s| s.closed = true);
        while !flow_handles
            .iter()
            .all(|h| h.as_ref().map_or(true, |h| h.is_finished()))
        {
            std::thread::sleep(WAKE);
            dog.check(watch, signals);
        }
        let ends: Vec<FlowEnd> = flow_handles
            .into_iter()
            .filter_map(|h| h.ok().and_then(|h| h.join().ok()))
            .collect();
        let loads: Vec<(StreamMeasurement, CpuTime)> = load_handles
            .into_iter()
            .filter_map(|h| h.ok().and_then(|h| h.join().ok()))
            .collect();
        (ends, loads)
    });
    let mut threads_cpu = CpuTime::default();
    let mut busy_poll = None;
    let mut measurements = Vec::new();
    for e in ends {
        threads_cpu = threads_cpu + e.cpu;
        busy_poll = busy_poll.or(e.busy_poll);
        measurements.extend(e.measurements);
    }
    let mut load_ms = Vec::new();
    for (m, c) in loads {
        threads_cpu = threads_cpu + c;
        load_ms.push(m);
    }
    measurements.sort_by_key(|m| (m.phase, m.flow));
    side_results(
        engine.name(),
        p.cpu_scope,
        (proc0, self0, threads_cpu, host0, t_start),
        RrMeasurement {
            flows: measurements,
            load: load_ms,
            load_elapsed_ns: load_elapsed.as_nanos() as u64,
            busy_poll,
            clock: p.clock,
        },
    )
}

type CpuStart = (
    CpuTime,
    CpuTime,
    CpuTime,
    Option<cpu::HostSnapshot>,
    Instant,
);

fn side_results(
    engine: &str,
    scope: CpuScope,
    (proc0, self0, threads_cpu, host0, t_start): CpuStart,
    rr: RrMeasurement,
) -> SideResults {
    let (scope, used) = match scope {
        CpuScope::Process => ("process", cpu::process().saturating_sub(proc0)),
        CpuScope::Threads => ("threads", threads_cpu + cpu::thread().saturating_sub(self0)),
    };
    SideResults {
        engine: engine.into(),
        cpu: CpuMeasurement {
            scope: scope.into(),
            user_ns: used.user.as_nanos() as u64,
            system_ns: used.system.as_nanos() as u64,
            wall_ns: t_start.elapsed().as_nanos() as u64,
            host: host0.zip(cpu::host()).map(|(a, b)| cpu::host_delta(a, b)),
        },
        rr: Some(rr),
        ..SideResults::default()
    }
}

// ---------------------------------------------------------------------------
// Server (rr)
// ---------------------------------------------------------------------------

/// Answers one request: checks its header, stamps and writes the response.
fn answer(
    flow: u32,
    seq: u64,
    t_rx: Option<u64>,
    req: &[u8],
    resp: &mut [u8],
) -> Result<u64, EngineError> {
    // Echo the request's sequence (crr cannot know it otherwise); rr also
    // checks it against its own count.
    let mut seq_out = seq;
    if req.len() >= REQUEST_HEADER_LEN {
        let q = RequestRepr::parse(&RrHeader::new_checked(req)?)?;
        if q.flow != flow {
            return Err(msg::RrError::WrongFlow {
                expected: flow,
                got: q.flow,
            }
            .into());
        }
        seq_out = q.sequence;
    }
    ResponseRepr {
        flow,
        sequence: seq_out,
        server_ns: t_rx.map(|rx| (rx, mono_ns())),
    }
    .emit(resp);
    Ok(seq_out)
}

fn server_phase(
    sock: &TcpStream,
    phase: &RrPhase,
    flow: u32,
    p: &RrParams,
    signals: &Signals,
    watch: &Watch,
    bufs: &mut Buffers,
) -> PhaseEnd {
    let req = &mut bufs.req[..phase.request as usize];
    let resp = &mut bufs.resp[..phase.response as usize];
    let mut seq = 0u64;
    let mut first: Option<Instant> = None;
    let mut busy_poll = None;
    let result = (|| {
        let (wait, said) = prepare(sock, p.busy_poll)?;
        busy_poll = said;
        watch.register(flow, sock);
        let mut io = Io::new(sock, wait, signals);
        let timed = p.per_message();
        while io.read_exact(req)? {
            let t_rx = timed.then(mono_ns);
            first.get_or_insert_with(Instant::now);
            let got = answer(flow, seq, t_rx, req, resp)?;
            msg::expect(flow, seq, flow, got)?;
            io.write_all(resp)?;
            seq += 1;
            watch.tick(flow);
        }
        Ok(())
    })();
    PhaseEnd {
        transactions: seq,
        elapsed_ns: first.map_or(0, |f| f.elapsed().as_nanos() as u64),
        busy_poll,
        result,
    }
}

/// How a server phase ended.
struct PhaseEnd {
    transactions: u64,
    elapsed_ns: u64,
    busy_poll: Option<String>,
    result: Result<(), EngineError>,
}

fn server_flow(
    flow: u32,
    conns: Vec<Conn>,
    p: &RrParams,
    signals: &Signals,
    watch: &Watch,
) -> FlowEnd {
    let cpu0 = cpu::thread();
    let pin_error = pin(p, flow);
    let mut bufs = Buffers::new(p);
    let mut out = Vec::new();
    let mut busy_poll = None;
    for (phase, conn) in p.phases.iter().zip(conns) {
        let end = match &conn {
            Conn::Tcp(sock) => server_phase(sock, phase, flow, p, signals, watch, &mut bufs),
            Conn::Udp(sock) => udp_server_phase(sock, phase, flow, p, signals, watch, &mut bufs),
        };
        busy_poll = busy_poll.or(end.busy_poll);
        let (n, elapsed) = (end.transactions, end.elapsed_ns);
        let result = match (end.result, &pin_error) {
            (Ok(()), Some(e)) => Err(EngineError::Pin(e.to_string())),
            (r, _) => r.map_err(|e| watch.explain(e)),
        };
        // Closing answers the client's end of stream (the watcher's
        // duplicate first, or the socket would stay open).
        watch.release(flow);
        drop(conn);
        let failed = result.is_err();
        out.push(RrFlowMeasurement {
            phase: phase.index,
            flow,
            transactions: n,
            bytes_sent: n * u64::from(phase.response),
            bytes_received: n * u64::from(phase.request),
            elapsed_ns: elapsed,
            error: result.err().map(|e| e.to_string()),
            ..RrFlowMeasurement::default()
        });
        if failed {
            signals.abort();
            break;
        }
    }
    FlowEnd {
        measurements: out,
        cpu: cpu::thread().saturating_sub(cpu0),
        busy_poll,
    }
}

/// A load stream's thread on the server: reads until end of stream, waiting
/// without an idle limit for the load to begin (the unloaded phases come
/// first and may take long).
fn server_load(
    id: u32,
    sock: TcpStream,
    engine: EngineKind,
    len: usize,
    signals: &Signals,
) -> (StreamMeasurement, CpuTime) {
    let cpu0 = cpu::thread();
    let counter = StreamCounter::default();
    let mut m = StreamMeasurement {
        id,
        sender: Some(Side::Client),
        ..StreamMeasurement::default()
    };
    loop {
        if signals.aborted() {
            m.error = Some("aborted".into());
            return (m, cpu::thread().saturating_sub(cpu0));
        }
        match socket::wait_readable(&sock, POLL) {
            Ok(true) => break,
            Ok(false) => {}
            Err(e) => {
                m.error = Some(format!("poll: {e}"));
                return (m, cpu::thread().saturating_sub(cpu0));
            }
        }
    }
    let mut buf = vec![0u8; len.max(1)];
    let t0 = Instant::now();
    let end = tcp::recv(engine, &sock, &mut buf, &counter, signals);
    m.elapsed_ns = t0.elapsed().as_nanos() as u64;
    m.calls = end.calls;
    m.bytes = counter.get();
    m.error = end.result.err().map(|e| e.to_string());
    (m, cpu::thread().saturating_sub(cpu0))
}

/// Starts the server side of an rr test.
pub fn start_server(engine: EngineKind, conns: RrConns, params: RrParams) -> SideRun {
    spawn_side(engine.name(), move |signals| {
        let proc0 = cpu::process();
        let self0 = cpu::thread();
        let host0 = cpu::host();
        let t_start = Instant::now();
        let p = &params;
        let RrConns { flows, load } = conns;
        let watch = Watch::new(flows.len());
        let (ends, loads) = std::thread::scope(|scope| {
            let watch = &watch;
            let fh: Vec<_> = flows
                .into_iter()
                .enumerate()
                .map(|(f, conns)| {
                    std::thread::Builder::new()
                        .name(format!("linerate-rr-{f}"))
                        .spawn_scoped(scope, move || {
                            server_flow(f as u32, conns, p, signals, watch)
                        })
                })
                .collect();
            let lh: Vec<_> = load
                .into_iter()
                .map(|(id, sock)| {
                    std::thread::Builder::new()
                        .name(format!("linerate-load-{id}"))
                        .spawn_scoped(scope, move || {
                            server_load(id, sock, engine, p.load_len, signals)
                        })
                })
                .collect();
            if fh.iter().any(Result::is_err) || lh.iter().any(Result::is_err) {
                signals.abort();
            }
            let mut dog = Watchdog::new();
            while !fh
                .iter()
                .all(|h| h.as_ref().map_or(true, |h| h.is_finished()))
            {
                std::thread::sleep(WAKE);
                dog.check(watch, signals);
            }
            let ends: Vec<FlowEnd> = fh
                .into_iter()
                .filter_map(|h| h.ok().and_then(|h| h.join().ok()))
                .collect();
            let loads: Vec<_> = lh
                .into_iter()
                .filter_map(|h| h.ok().and_then(|h| h.join().ok()))
                .collect();
            (ends, loads)
        });
        let mut threads_cpu = CpuTime::default();
        let mut busy_poll = None;
        let mut measurements = Vec::new();
        for e in ends {
            threads_cpu = threads_cpu + e.cpu;
            busy_poll = busy_poll.or(e.busy_poll);
            measurements.extend(e.measurements);
        }
        let mut load_ms = Vec::new();
        let mut load_elapsed = 0;
        for (m, c) in loads {
            threads_cpu = threads_cpu + c;
            load_elapsed = load_elapsed.max(m.elapsed_ns);
            load_ms.push(m);
        }
        measurements.sort_by_key(|m| (m.phase, m.flow));
        side_results(
            engine.name(),
            p.cpu_scope,
            (proc0, self0, threads_cpu, host0, t_start),
            RrMeasurement {
                flows: measurements,
                load: load_ms,
                load_elapsed_ns: load_elapsed,
                busy_poll,
                clock: None,
            },
        )
    })
}

// ---------------------------------------------------------------------------
// UDP: one datagram per message
// ---------------------------------------------------------------------------

/// Prepares a UDP socket for a phase: a short receive timeout (blocking) or
/// non-blocking with `SO_BUSY_POLL` (busy poll).
fn prepare_udp(
    sock: &UdpSocket,
    busy_poll: bool,
    poll: Duration,
) -> Result<(Wait, Option<String>), EngineError> {
    if !busy_poll {
        sock.set_read_timeout(Some(poll))
            .map_err(|e| EngineError::io("UDP receive timeout", e))?;
        return Ok((Wait::Block, None));
    }
    sock.set_nonblocking(true)
        .map_err(|e| EngineError::io("O_NONBLOCK", e))?;
    let said = match socket::set_busy_poll(sock, socket::BUSY_POLL_US) {
        Ok(()) => format!(
            "SO_BUSY_POLL {} µs accepted by the kernel",
            socket::BUSY_POLL_US
        ),
        Err(e) => format!(
            "SO_BUSY_POLL refused by the kernel ({e}); spinning on non-blocking sockets only"
        ),
    };
    Ok((Wait::Spin, Some(said)))
}

/// Datagram send and receive with the two waiting disciplines.
struct Udp<'a> {
    sock: &'a UdpSocket,
    wait: Wait,
    signals: &'a Signals,
    idle: Idle,
    spin: Spin,
}

impl<'a> Udp<'a> {
    fn new(sock: &'a UdpSocket, wait: Wait, signals: &'a Signals) -> Self {
        Udp {
            sock,
            wait,
            signals,
            idle: Idle(None),
            spin: Spin::new(),
        }
    }

    fn send(&mut self, buf: &[u8]) -> Result<(), EngineError> {
        loop {
            match self.sock.send(buf) {
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) => {
                    if self.signals.aborted() {
                        return Err(EngineError::Aborted);
                    }
                    std::hint::spin_loop();
                }
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                    return Err(EngineError::PeerReset(
                        "the peer's UDP port is closed".into(),
                    ))
                }
                Err(e) => return Err(map_err("send", e)),
            }
        }
    }

    /// Receives one datagram into `buf`. `Ok(None)` when `deadline_ns`
    /// (monotonic) passes first; with `stall` set, waiting longer than the
    /// idle limit is an error instead.
    fn recv(
        &mut self,
        buf: &mut [u8],
        deadline_ns: u64,
        stall: bool,
    ) -> Result<Option<usize>, EngineError> {
        let mut spins = 0u32;
        loop {
            match self.sock.recv(buf) {
                Ok(n) => {
                    self.idle.progressed();
                    self.spin.done();
                    return Ok(Some(n));
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                // A refused earlier send: the peer's port closed.
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                    return Err(EngineError::PeerReset(
                        "the peer's UDP port is closed".into(),
                    ))
                }
                Err(e) if is_timeout(&e) => {}
                Err(e) => return Err(map_err("recv", e)),
            }
            if self.wait == Wait::Spin {
                spins = spins.wrapping_add(1);
                if spins & (SPIN_CHECK - 1) != 0 {
                    std::hint::spin_loop();
                    continue;
                }
            }
            if self.signals.aborted() {
                return Err(EngineError::Aborted);
            }
            let now = mono_ns();
            if now >= deadline_ns {
                return Ok(None);
            }
            if stall {
                self.idle.timed_out()?;
            }
            if self.wait == Wait::Spin && !self.spin.keep_spinning(now) {
                socket::wait_ready(self.sock, libc::POLLIN, UDP_POLL)
                    .map_err(|e| map_err("poll", e))?;
            }
        }
    }

    /// Reads whatever is queued without waiting (late responses after a
    /// loss), so they cannot be taken for the next transaction's.
    fn drain(&mut self, buf: &mut [u8]) {
        let _ = self.sock.set_nonblocking(true);
        while self.sock.recv(buf).is_ok() {}
        if self.wait == Wait::Block {
            let _ = self.sock.set_nonblocking(false);
        }
    }
}

fn udp_client_phase(
    u: &mut Udp<'_>,
    phase: &RrPhase,
    flow: u32,
    p: &RrParams,
    watch: &Watch,
    bufs: &mut Buffers,
    tally: &mut Tally,
) -> Result<(), EngineError> {
    let (req_len, resp_len) = (phase.request as usize, phase.response as usize);
    let per_message = p.per_message();
    let clock = p
        .clock
        .filter(|_| per_message && resp_len >= RESPONSE_HEADER_LEN);
    tally.one_way = clock.is_some();
    let timeout = UDP_RESPONSE_TIMEOUT.as_nanos() as u64;
    let budget = Budget::new(p.limit);
    let mut rx = bufs.take_rx();
    let req = &mut bufs.req[..req_len];
    let mut seq = 0u64;
    let result = (|| {
        while seq < budget.count {
            if u.signals.aborted() {
                return Err(EngineError::Aborted);
            }
            let k = u64::from(p.batch).min(budget.count - seq);
            let t0 = mono_ns();
            if t0 >= budget.end_ns {
                break;
            }
            tally.first_ns.get_or_insert(t0);
            let mut server_ns = None;
            let mut answered = 0;
            for _ in 0..k {
                RequestRepr {
                    flow,
                    sequence: seq,
                    sent_ns: per_message.then_some(t0),
                }
                .emit(req);
                u.send(req)?;
                let deadline = mono_ns().saturating_add(timeout);
                loop {
                    let Some(n) = u.recv(&mut rx, deadline, false)? else {
                        tally.lost += 1;
                        u.drain(&mut rx);
                        break;
                    };
                    if n == 0 {
                        continue; // a previous phase's late end-of-phase answer
                    }
                    if n != resp_len {
                        return Err(EngineError::Protocol(format!(
                            "a {n}-byte response where {resp_len} bytes were due"
                        )));
                    }
                    if resp_len >= RESPONSE_HEADER_LEN {
                        let r = ResponseRepr::parse(&RrHeader::new_checked(&rx[..n])?)?;
                        if r.flow == flow && r.sequence < seq {
                            continue; // late answer to a request already counted lost
                        }
                        msg::expect(flow, seq, r.flow, r.sequence)?;
                        server_ns = r.server_ns;
                    }
                    answered += 1;
                    break;
                }
                seq += 1;
            }
            let t1 = mono_ns();
            tally.transactions += answered;
            if answered == 0 {
                continue;
            }
            tally.last_ns = t1;
            watch.tick(flow);
            // A batch with a loss in it is not timed: its span holds a timeout.
            if answered == k {
                let span = t1.saturating_sub(t0);
                if k == 1 {
                    tally.rtt.record(span);
                } else {
                    tally.rtt.record_n(span / k, k);
                }
                if let (Some(c), Some((rx_ns, tx_ns))) = (clock, server_ns) {
                    Tally::one_way(
                        &mut tally.c2s,
                        &mut tally.negative[0],
                        c.to_client(rx_ns) - i128::from(t0),
                    );
                    Tally::one_way(
                        &mut tally.s2c,
                        &mut tally.negative[1],
                        i128::from(t1) - c.to_client(tx_ns),
                    );
                }
            }
        }
        // End of phase: an empty datagram, repeated until the server answers
        // with one (it has then counted every request it answered).
        for _ in 0..UDP_END_TRIES {
            u.send(&[])?;
            let deadline = mono_ns().saturating_add(UDP_END_EVERY.as_nanos() as u64);
            while let Some(n) = u.recv(&mut rx, deadline, false)? {
                if n == 0 {
                    return Ok(());
                }
            }
        }
        Err(EngineError::Unanswered(format!(
            "the server did not answer the end of the phase in {} s",
            (UDP_END_EVERY * UDP_END_TRIES).as_secs()
        )))
    })();
    bufs.rx = rx;
    result
}

fn udp_server_phase(
    sock: &UdpSocket,
    phase: &RrPhase,
    flow: u32,
    p: &RrParams,
    signals: &Signals,
    watch: &Watch,
    bufs: &mut Buffers,
) -> PhaseEnd {
    let (req_len, resp_len) = (phase.request as usize, phase.response as usize);
    let mut rx = bufs.take_rx();
    let resp = &mut bufs.resp[..resp_len];
    let mut answered = 0u64;
    let mut first: Option<Instant> = None;
    let mut busy_poll = None;
    let result = (|| {
        let (wait, said) = prepare_udp(sock, p.busy_poll, POLL)?;
        busy_poll = said;
        let mut u = Udp::new(sock, wait, signals);
        let timed = p.per_message();
        loop {
            let Some(n) = u.recv(&mut rx, u64::MAX, true)? else {
                continue;
            };
            if n == 0 {
                // End of phase: answer, more than once since datagrams may
                // drop. Best effort: the client closes its socket as soon as
                // one arrives, and the next may meet a closed port.
                for _ in 0..UDP_END_ACKS {
                    let _ = sock.send(&[]);
                }
                return Ok(());
            }
            if n != req_len {
                return Err(EngineError::Protocol(format!(
                    "a {n}-byte request where {req_len} bytes were due"
                )));
            }
            let t_rx = timed.then(mono_ns);
            first.get_or_insert_with(Instant::now);
            // Requests may be lost on the way: the sequence is echoed, not
            // checked against a count.
            answer(flow, answered, t_rx, &rx[..n], resp)?;
            u.send(resp)?;
            answered += 1;
            watch.tick(flow);
        }
    })();
    bufs.rx = rx;
    PhaseEnd {
        transactions: answered,
        elapsed_ns: first.map_or(0, |f| f.elapsed().as_nanos() as u64),
        busy_poll,
        result,
    }
}

// ---------------------------------------------------------------------------
// Server (crr)
// ---------------------------------------------------------------------------

#[derive(Debug, Default)]
struct CrrCounter {
    transactions: AtomicU64,
    first_ns: AtomicU64,
    last_ns: AtomicU64,
    error: Mutex<Option<String>>,
}

/// The server side of a crr test: each transaction's connection is handed
/// to [`CrrServer::serve`] on the thread that accepted it.
#[derive(Debug)]
pub struct CrrServer {
    spec: TestSpec,
    params: RrParams,
    counters: Vec<CrrCounter>,
    /// Transactions being served right now.
    active: AtomicUsize,
    client_done: AtomicBool,
    signals: Signals,
}

/// Decrements the active count however `serve` ends.
struct Active<'a>(&'a AtomicUsize);

impl Drop for Active<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl CrrServer {
    /// `None` unless `spec` is a crr spec.
    pub fn new(spec: &TestSpec, cpus: &[usize]) -> Option<Arc<CrrServer>> {
        // Transactions run on the server's connection threads, which belong
        // to no test: only the process's CPU time can cover them.
        let params = RrParams::from_spec(spec, cpus, CpuScope::Process, None)?;
        let n = params.phases.len() * params.flows as usize;
        Some(Arc::new(CrrServer {
            spec: spec.clone(),
            params,
            counters: (0..n).map(|_| CrrCounter::default()).collect(),
            active: AtomicUsize::new(0),
            client_done: AtomicBool::new(false),
            signals: Signals::default(),
        }))
    }

    /// Serves one transaction on a connection greeted with `hello`:
    /// reads the request, writes the response, closes.
    pub fn serve(&self, hello: &DataHello, sock: TcpStream) -> Result<(), EngineError> {
        self.active.fetch_add(1, Ordering::AcqRel);
        let _active = Active(&self.active);
        let Some(RrConn::Flow { phase, flow }) = self.spec.rr_conn(hello.stream) else {
            return Err(EngineError::Protocol(format!(
                "crr connection for stream {}, which is not in the test",
                hello.stream
            )));
        };
        let Some(counter) = self.counters.get(hello.stream as usize - 1) else {
            return Err(EngineError::Protocol("stream out of range".into()));
        };
        if self.client_done.load(Ordering::Acquire) || self.signals.aborted() {
            return Err(EngineError::Protocol(
                "crr connection after the test ended".into(),
            ));
        }
        let ph = &self.params.phases[phase as usize];
        let result = (|| {
            socket::set_io_timeout(&sock, POLL)?;
            let mut req = vec![0u8; ph.request as usize];
            let mut resp = vec![0u8; ph.response as usize];
            let mut io = Io::new(&sock, Wait::Block, &self.signals);
            if !io.read_exact(&mut req)? {
                return Err(EngineError::PeerReset(
                    "client closed before its request".into(),
                ));
            }
            answer(flow, 0, None, &req, &mut resp)?;
            io.write_all(&resp)?;
            Ok(())
        })();
        match &result {
            Ok(()) => {
                let now = mono_ns();
                if counter.transactions.fetch_add(1, Ordering::AcqRel) == 0 {
                    counter.first_ns.store(now, Ordering::Release);
                }
                counter.last_ns.fetch_max(now, Ordering::AcqRel);
            }
            Err(e) => {
                if let Ok(mut slot) = counter.error.lock() {
                    slot.get_or_insert_with(|| e.to_string());
                }
            }
        }
        // Dropping `sock` closes: the server closes first.
        result
    }

    /// The client has finished (its results arrived): no more transactions.
    pub fn client_finished(&self) {
        self.client_done.store(true, Ordering::Release);
    }

    /// The side's run: ends when the client has finished (or on abort),
    /// once the transactions in progress are done.
    pub fn start(self: &Arc<Self>) -> SideRun {
        let me = Arc::clone(self);
        spawn_side("syscall", move |signals| {
            let proc0 = cpu::process();
            let host0 = cpu::host();
            let t_start = Instant::now();
            while !me.client_done.load(Ordering::Acquire) {
                if signals.aborted() {
                    me.signals.abort();
                    break;
                }
                std::thread::sleep(WAKE);
            }
            // The client read every response before finishing, so the
            // threads answering them are closing; give them a moment.
            let until = Instant::now() + Duration::from_secs(5);
            while me.active.load(Ordering::Acquire) > 0 && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(1));
            }
            let flows = me.params.flows;
            let measurements = me
                .counters
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let phase = &me.params.phases[i / flows as usize];
                    let n = c.transactions.load(Ordering::Acquire);
                    RrFlowMeasurement {
                        phase: phase.index,
                        flow: i as u32 % flows,
                        transactions: n,
                        bytes_sent: n * u64::from(phase.response),
                        bytes_received: n * u64::from(phase.request),
                        elapsed_ns: c
                            .last_ns
                            .load(Ordering::Acquire)
                            .saturating_sub(c.first_ns.load(Ordering::Acquire)),
                        error: c.error.lock().ok().and_then(|e| e.clone()),
                        ..RrFlowMeasurement::default()
                    }
                })
                .collect();
            side_results(
                "syscall",
                CpuScope::Process,
                (
                    proc0,
                    CpuTime::default(),
                    CpuTime::default(),
                    host0,
                    t_start,
                ),
                RrMeasurement {
                    flows: measurements,
                    ..RrMeasurement::default()
                },
            )
        })
    }
}
