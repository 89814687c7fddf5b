//! rr over TCP with many flows on a few event-loop threads (`rr --flows N
//! --threads T`): each flow keeps its own sans-IO cores — the client's
//! [`RrClient`], [`Tally`] and [`PhaseClock`], the server's [`RrServer`] —
//! exactly as a flow thread does ([`super::exchange`], [`super::serve`]);
//! the loop ([`crate::event_loop::drive`]) only moves the bytes, a
//! message at a time, without blocking. A phase per size (no load: the
//! negotiation refuses it with flows for now): each loop runs its flows
//! through the phases, and the client's flows move from one to the next
//! together, as flow threads do (the side's coordinator opens each). A
//! paced client flow (`rr --rate N`) waits for its next slot on the
//! loop's timer heap ([`Turn::Until`]), as a paced UDP flow waits for its
//! next datagram.
//!
//! The phase ends as on a flow thread: the client shuts down its write
//! side after its last transaction, the server answers by closing, the
//! client reads to end of stream.
//!
//! rr over UDP runs the same side ([`super::udp_loops`] drives its
//! flows): a datagram per message, its client core with its timeouts.
//!
//! crr (`crr --flows N --threads T`) runs the same client flows with a
//! connection per transaction, as [`super::crr`] does on a thread: a
//! non-blocking connect (the loop watches each new socket), the greeting
//! and request in one write, the response, then the server's close; the
//! clock is read before the connect and after the close. The server
//! answers them with its crr pools ([`super::CrrPool`]), as for crr on
//! threads, accepting on as many threads as it has loops.

use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

use linerate_proto::measure::{RrFlowMeasurement, RrMeasurement, SideResults};
use linerate_proto::rr_flow::{RrServer, Transaction};
use linerate_proto::spec::RrPhase;
use linerate_proto::wire::{DataHello, Side};
use linerate_stats::histogram::Histogram;

use crate::clock::mono_ns;
use crate::engines::{with_engine, Engine, EngineKind, TcpRx, TcpTx, Wait};
use crate::event_loop::{self, drive, LoopFlow, Turn};
use crate::runner::{spawn_side, SideRun};
use crate::stream::{is_timeout, map_err, Signals};
use crate::{socket, EngineError};

use super::client::coordinate;
use super::conns::{Conn, RrConns};
use super::crr::{CrrTarget, CONNECT_TIMEOUT};
use super::exchange::reliable_answer;
use super::gate::Gate;
use super::loop_tally::{failed, served, with_loop_rtt, LoopCtx, Role, Transactions};
use super::params::RrParams;
use super::side::{run_threads, CpuStart, FlowEnd, LoadEnd};
use super::watch::Watch;

/// Calls one ready flow gets per turn (a message is one or two calls).
const CALLS_PER_TURN: u32 = 8;

/// Starts the client side of an rr test on `threads` event loops.
pub fn start_client(engine: EngineKind, conns: RrConns, p: RrParams, threads: usize) -> SideRun {
    start(engine, Flows::Rr(conns), p, threads, Role::Client)
}

/// Starts the server side of an rr test on `threads` event loops.
pub fn start_server(engine: EngineKind, conns: RrConns, p: RrParams, threads: usize) -> SideRun {
    start(engine, Flows::Rr(conns), p, threads, Role::Server)
}

/// Starts the client side of a crr test on `threads` event loops: each
/// flow a connection per transaction to `target`.
pub fn start_crr_client(
    engine: EngineKind,
    target: CrrTarget,
    p: RrParams,
    threads: usize,
) -> SideRun {
    start(engine, Flows::Crr(target), p, threads, Role::Client)
}

/// What a side's flows run on: rr's connections (TCP, or UDP sockets run
/// by [`super::udp_loops`]), attached before the test; crr's target,
/// connected to once per transaction.
enum Flows {
    Rr(RrConns),
    Crr(CrrTarget),
}

fn start(engine: EngineKind, flows: Flows, p: RrParams, threads: usize, role: Role) -> SideRun {
    let udp = matches!(&flows, Flows::Rr(c) if c.datagrams());
    // rr's loops are epoll loops whatever the engine (io_uring has no rr
    // loop): TCP flows run the engine where it fits one, UDP flows the
    // syscall engine (`udp_loops`), and the side is named for that.
    let engine = if udp {
        event_loop::udp::ENGINE
    } else {
        event_loop::tcp::engine_for(engine)
    };
    let (tx, rx) = mpsc::channel();
    let run = spawn_side(engine.name(), move |signals| {
        run_side(engine, flows, &p, (threads, udp), (role, &tx), signals)
    });
    match role {
        Role::Client => run.with_phases(rx),
        Role::Server => run,
    }
}

/// `(threads, udp)`: the side's loops, and whether its flows are UDP;
/// `(role, phases)`: the side, and where a client sends each phase's
/// measurements as the phase ends (JSON Lines' rr_phase records).
fn run_side(
    engine: EngineKind,
    flows: Flows,
    p: &RrParams,
    (threads, udp): (usize, bool),
    (role, phases): (Role, &mpsc::Sender<Vec<RrFlowMeasurement>>),
    signals: &Signals,
) -> SideResults {
    let start = CpuStart::now();
    let watch = Watch::new(p.plan.flows as usize);
    let (socks, crr) = match flows {
        Flows::Rr(conns) => (per_flow(conns), None),
        // crr flows connect as they go.
        Flows::Crr(target) => {
            let socks = (0..p.plan.flows).map(|f| (f, Vec::new())).collect();
            (socks, Some(target))
        }
    };
    let (gate, ended) = (Gate::default(), Mutex::new(Vec::new()));
    let side = Phases {
        p,
        signals,
        watch: &watch,
        crr: crr.as_ref(),
        gate: (role == Role::Client).then_some(&gate),
        ended: &ended,
    };
    let side = &side;
    let runs: Vec<_> = event_loop::split(socks, threads)
        .into_iter()
        .enumerate()
        .map(|(t, share)| {
            let label = event_loop::label(t, share.len());
            move || {
                let cpu0 = crate::cpu::thread();
                let measurements = side.run_phases(share, |share, cx| {
                    if udp {
                        super::udp_loops::run_loop(share, cx, role)
                    } else {
                        with_engine!(engine, e => run_loop(e, share, cx, role))
                    }
                });
                FlowEnd {
                    measurements,
                    cpu: crate::cpu::thread().saturating_sub(cpu0),
                    busy_poll: None,
                    engine_use: crate::engines::take_use(),
                    label: Some(label),
                }
            }
        })
        .collect();
    let no_load: Vec<(u32, fn() -> LoadEnd)> = Vec::new();
    let g = run_threads(signals, &watch, runs, no_load, |dog| {
        if role == Role::Client {
            // The flows move from phase to phase together, as flow
            // threads do.
            coordinate(p, signals, &gate, &watch, dog, || {
                if let Ok(mut v) = ended.lock() {
                    let _ = phases.send(std::mem::take(&mut *v));
                }
            });
            gate.update(|s| s.closed = true);
        }
    });
    start.results(
        engine.name(),
        p.cpu_scope,
        g.threads_cpu,
        g.busiest,
        RrMeasurement {
            flows: g.flows,
            engine_use: g.engine_use,
            clock: match role {
                Role::Client => p.clock,
                Role::Server => None,
            },
            ..RrMeasurement::default()
        },
    )
}

/// Every rr flow's connections, one per phase in phase order.
fn per_flow(conns: RrConns) -> Vec<(u32, Vec<Conn>)> {
    conns
        .flows
        .into_iter()
        .enumerate()
        .map(|(f, phases)| (f as u32, phases))
        .collect()
}

/// What a side's loops share across phases.
struct Phases<'a> {
    p: &'a RrParams,
    signals: &'a Signals,
    watch: &'a Watch,
    crr: Option<&'a CrrTarget>,
    /// Client: the phases open one after the other, each when every flow
    /// has ended the one before (the side's coordinator opens them).
    gate: Option<&'a Gate>,
    /// Client: the flows' measurements of the phase that is ending.
    ended: &'a Mutex<Vec<RrFlowMeasurement>>,
}

impl Phases<'_> {
    /// One loop's flows (`share`: each flow's connections, by phase)
    /// through every phase, each driven to its end by `run`.
    fn run_phases(
        &self,
        share: Vec<(u32, Vec<Conn>)>,
        run: impl Fn(Vec<(u32, Option<Conn>)>, &LoopCtx<'_>) -> Vec<RrFlowMeasurement>,
    ) -> Vec<RrFlowMeasurement> {
        let mut conns: Vec<_> = share.into_iter().map(|(f, c)| (f, c.into_iter())).collect();
        let mut out = Vec::new();
        for phase in &self.p.plan.phases {
            if let Some(g) = self.gate {
                if !g.wait(self.signals, |g| g.open > phase.index) {
                    break;
                }
            }
            let this: Vec<_> = conns.iter_mut().map(|(f, c)| (*f, c.next())).collect();
            let n = this.len() as u32;
            let cx = LoopCtx {
                p: self.p,
                phase,
                signals: self.signals,
                watch: self.watch,
                crr: self.crr,
            };
            let m = run(this, &cx);
            if let Some(g) = self.gate {
                if let Ok(mut v) = self.ended.lock() {
                    v.extend(m.iter().cloned());
                }
                g.update(|g| g.done += n);
            }
            out.extend(m);
        }
        out
    }
}

/// One loop: its flows of `phase`, driven to their ends.
fn run_loop<E: Engine>(
    engine: E,
    share: Vec<(u32, Option<Conn>)>,
    cx: &LoopCtx<'_>,
    role: Role,
) -> Vec<RrFlowMeasurement> {
    let (phase, signals, watch) = (cx.phase, cx.signals, cx.watch);
    let mut out = Vec::with_capacity(share.len());
    let mut flows = Vec::with_capacity(share.len());
    for (flow, sock) in share {
        let mut io = Msg::new(engine, flow, phase, cx.crr.map(|t| (t, cx.p)));
        let opened = match (sock, cx.crr) {
            (Some(Conn::Tcp(sock)), _) => io.attach(sock),
            (None, Some(_)) => Ok(()),
            (Some(Conn::Udp(_)), _) | (None, None) => Err(EngineError::Protocol(
                "no TCP connection for this flow".into(),
            )),
        };
        match opened {
            Ok(()) => flows.push(io),
            Err(e) => out.push(failed(phase, flow, &e.to_string())),
        }
    }
    let per_message = cx.p.plan.per_message();
    match role {
        Role::Client => {
            let mut v: Vec<ClientFlow<E>> = flows
                .into_iter()
                .map(|io| ClientFlow::new(io, cx))
                .collect();
            // The loop's round trips at full precision, for the phase's
            // percentiles; each flow keeps a coarse histogram of its own.
            let mut overall = Histogram::new();
            drive(&mut v, &mut overall, signals);
            let first = out.len();
            out.extend(v.into_iter().map(|c| c.measurement(phase)));
            with_loop_rtt(&mut out[first..], &overall);
        }
        Role::Server => {
            let mut v: Vec<ServerFlow<E>> = flows
                .into_iter()
                .map(|io| ServerFlow::new(io, phase, per_message, watch))
                .collect();
            drive(&mut v, &mut (), signals);
            out.extend(v.into_iter().map(|s| s.measurement(phase)));
        }
    }
    out
}

/// A flow's socket, engine I/O and message buffers: moves one whole
/// message at a time in pieces, without blocking.
struct Msg<E: Engine> {
    flow: u32,
    engine: E,
    /// Its connection (crr: the transaction's; none between two).
    sock: Option<TcpStream>,
    /// The engine's writer and reader, made on the first connection and
    /// kept for the next (they take the socket on every call).
    io: Option<(E::TcpTx, E::TcpRx)>,
    /// The request ([`REQ`]: crr's greeting first) and the response
    /// ([`RESP`]).
    bufs: [Vec<u8>; 2],
    /// Where the request starts in its buffer (after crr's greeting).
    hello_len: usize,
    /// How much of the message in flight is done.
    off: usize,
}

const REQ: usize = 0;
const RESP: usize = 1;

/// What a piece of a message came to.
enum Piece {
    Whole,
    Partial,
    WouldBlock,
    /// The peer ended the stream.
    End,
}

impl<E: Engine> Msg<E> {
    /// A flow without a connection yet; crr's request buffer starts with
    /// the flow's greeting (the test's token and the flow's stream id).
    fn new(engine: E, flow: u32, phase: &RrPhase, crr: Option<(&CrrTarget, &RrParams)>) -> Self {
        let mut req = Vec::new();
        if let Some((t, p)) = crr {
            DataHello {
                token: t.token,
                stream: p.plan.conn_id(phase.index, flow),
                sender: Side::Client,
            }
            .encode(&mut req);
        }
        let hello_len = req.len();
        req.resize(hello_len + phase.request as usize, 0);
        Msg {
            flow,
            engine,
            sock: None,
            io: None,
            bufs: [req, vec![0; phase.response as usize]],
            hello_len,
            off: 0,
        }
    }

    /// Makes `sock` the flow's connection, non-blocking.
    fn attach(&mut self, sock: TcpStream) -> Result<(), EngineError> {
        sock.set_nonblocking(true)
            .map_err(|e| EngineError::io("making a flow's socket non-blocking", e))?;
        if self.io.is_none() {
            self.io = Some((
                self.engine.tcp_tx(&sock)?,
                self.engine.tcp_rx(&sock, false)?,
            ));
        }
        self.sock = Some(sock);
        Ok(())
    }

    /// Writes on from buffer `b` (all of it makes the message whole).
    fn write(&mut self, b: usize) -> Result<Piece, EngineError> {
        let len = self.bufs[b].len();
        let off = self.off;
        let (sock, (tx, _)) = conn::<E>(&self.sock, &mut self.io)?;
        match tx.write(sock, &self.bufs[b][off..], Wait::DontWait) {
            Ok(0) => Err(EngineError::PeerReset("write returned 0".into())),
            Ok(k) => Ok(self.advance(k, len)),
            Err(e) if is_timeout(&e) || e.kind() == std::io::ErrorKind::Interrupted => {
                Ok(Piece::WouldBlock)
            }
            Err(e) => Err(map_err("write", e)),
        }
    }

    /// Reads on into buffer `b` (full makes the message whole).
    fn read(&mut self, b: usize) -> Result<Piece, EngineError> {
        let len = self.bufs[b].len();
        let off = self.off;
        let (sock, (_, rx)) = conn::<E>(&self.sock, &mut self.io)?;
        match rx.read(sock, &mut self.bufs[b][off..], Wait::DontWait) {
            Ok(0) => Ok(Piece::End),
            Ok(k) => Ok(self.advance(k, len)),
            Err(e) if is_timeout(&e) || e.kind() == std::io::ErrorKind::Interrupted => {
                Ok(Piece::WouldBlock)
            }
            Err(e) => Err(map_err("read", e)),
        }
    }

    fn advance(&mut self, k: usize, len: usize) -> Piece {
        self.off += k;
        if self.off >= len {
            self.off = 0;
            Piece::Whole
        } else {
            Piece::Partial
        }
    }
}

/// A flow's connection and the engine's writer and reader on it (apart
/// from the buffers, which a call borrows beside them).
#[allow(clippy::type_complexity)]
fn conn<'a, E: Engine>(
    sock: &'a Option<TcpStream>,
    io: &'a mut Option<(E::TcpTx, E::TcpRx)>,
) -> Result<(&'a TcpStream, &'a mut (E::TcpTx, E::TcpRx)), EngineError> {
    match (sock, io) {
        (Some(sock), Some(io)) => Ok((sock, io)),
        _ => Err(EngineError::Protocol("the flow has no connection".into())),
    }
}

/// Where a client flow is in its transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Choosing the next request (or ending the phase).
    Next,
    /// crr: the transaction's connection is being made (since when).
    Connecting(Instant),
    Request,
    Response,
    /// Reading to the server's close: after crr's response (its answer
    /// is counted then), or after rr's last one (its write side shut).
    Closing,
    Done,
}

struct ClientFlow<'a, E: Engine> {
    io: Msg<E>,
    /// Its core, tally, phase clock and open batch.
    tx: Transactions<'a>,
    step: Step,
    /// crr: where each transaction connects.
    crr: Option<&'a CrrTarget>,
    /// crr: the response read, counted once the server has closed.
    answer: Option<Transaction>,
    error: Option<EngineError>,
}

impl<'a, E: Engine> ClientFlow<'a, E> {
    fn new(io: Msg<E>, cx: &LoopCtx<'a>) -> Self {
        ClientFlow {
            tx: Transactions::new(io.flow, cx.phase, cx.p, cx.watch, None),
            step: Step::Next,
            crr: cx.crr,
            answer: None,
            error: None,
            io,
        }
    }

    /// Starts the next request; false when the phase is over.
    fn next_request(&mut self) -> bool {
        let hello = self.io.hello_len;
        self.tx.next_request(&mut self.io.bufs[REQ][hello..])
    }

    /// A transaction is done (see [`Transactions::complete`]).
    fn complete(&mut self, t: Transaction, overall: &mut Histogram) {
        self.tx.complete(t, overall);
    }

    /// crr: opens the next transaction's connection, non-blocking; the
    /// loop watches it from now on.
    fn connect(&mut self, target: &CrrTarget) -> Result<Turn, EngineError> {
        let (sock, _) = socket::start_connect(target.addr, &target.tcp)?;
        self.io.attach(sock)?;
        let now = Instant::now();
        self.step = Step::Connecting(now);
        Ok(Turn::Watch(now + CONNECT_TIMEOUT))
    }

    /// crr: whether the connection begun at `since` is made (an error if
    /// it failed or took too long); `Some(turn)` while it is not.
    fn connected(&mut self, since: Instant) -> Result<Option<Turn>, EngineError> {
        let (Some(sock), Some(target)) = (&self.io.sock, self.crr) else {
            return Err(EngineError::Protocol("the flow has no connection".into()));
        };
        let ready = socket::wait_ready(sock, libc::POLLOUT, Duration::ZERO)
            .map_err(|e| socket::connect_error(target.addr, e))?;
        if !ready {
            let due = since + CONNECT_TIMEOUT;
            if Instant::now() >= due {
                return Err(socket::connect_error(
                    target.addr,
                    std::io::ErrorKind::TimedOut.into(),
                ));
            }
            return Ok(Some(Turn::Until(due)));
        }
        socket::finish_connect(sock, target.addr, &target.tcp)?;
        Ok(None)
    }

    fn step(&mut self, overall: &mut Histogram) -> Result<Turn, EngineError> {
        for _ in 0..CALLS_PER_TURN {
            match self.step {
                Step::Next => {
                    if let Some(wait) = self.tx.pace_wait() {
                        return Ok(Turn::Until(Instant::now() + wait));
                    }
                    if !self.next_request() {
                        return self.end_phase();
                    }
                    match self.crr {
                        Some(target) => return self.connect(target),
                        None => self.step = Step::Request,
                    }
                }
                Step::Connecting(since) => match self.connected(since)? {
                    Some(turn) => return Ok(turn),
                    None => self.step = Step::Request,
                },
                Step::Request => match self.io.write(REQ)? {
                    Piece::Whole => self.step = Step::Response,
                    Piece::Partial => {}
                    Piece::WouldBlock => return Ok(Turn::Wait),
                    Piece::End => unreachable_end()?,
                },
                Step::Response => match self.io.read(RESP)? {
                    Piece::Whole => {
                        let r = self.tx.core.on_response(&self.io.bufs[RESP])?;
                        let t = reliable_answer(r)?;
                        if self.crr.is_some() {
                            // The server closes first: counted after that.
                            self.answer = Some(t);
                            self.step = Step::Closing;
                        } else {
                            self.complete(t, overall);
                            self.step = Step::Next;
                        }
                    }
                    Piece::Partial => {}
                    Piece::WouldBlock => return Ok(Turn::Wait),
                    Piece::End => {
                        return Err(EngineError::PeerReset(
                            "server closed the connection mid-phase".into(),
                        ))
                    }
                },
                Step::Closing => match self.io.read(RESP)? {
                    Piece::End => {
                        // Closed here, after the server: no TIME_WAIT on
                        // this side.
                        self.io.sock = None;
                        let Some(t) = self.answer.take() else {
                            self.step = Step::Done;
                            return Ok(Turn::Done);
                        };
                        self.complete(t, overall);
                        self.step = Step::Next;
                    }
                    Piece::WouldBlock => return Ok(Turn::Wait),
                    Piece::Whole | Piece::Partial => {
                        return Err(EngineError::Protocol(
                            "the server sent bytes after its response".into(),
                        ))
                    }
                },
                Step::Done => return Ok(Turn::Done),
            }
        }
        Ok(Turn::Again)
    }

    /// The phase's last transaction is done: rr shuts down its write side
    /// and reads to the server's close; crr has no connection left.
    fn end_phase(&mut self) -> Result<Turn, EngineError> {
        match (&self.io.sock, self.crr) {
            (Some(sock), None) => {
                sock.shutdown(Shutdown::Write)
                    .map_err(|e| map_err("shutdown", e))?;
                self.step = Step::Closing;
                Ok(Turn::Again)
            }
            _ => {
                self.step = Step::Done;
                Ok(Turn::Done)
            }
        }
    }

    fn measurement(self, phase: &RrPhase) -> RrFlowMeasurement {
        self.tx
            .measurement(phase, self.error.map(|e| e.to_string()))
    }
}

/// A write never reports end of stream.
fn unreachable_end() -> Result<(), EngineError> {
    Err(EngineError::Protocol("a write saw end of stream".into()))
}

impl<E: Engine> LoopFlow for ClientFlow<'_, E> {
    /// The loop's full-precision round-trip histogram.
    type Shared = Histogram;

    fn sock(&self) -> Option<BorrowedFd<'_>> {
        self.io.sock.as_ref().map(AsFd::as_fd)
    }

    fn ended(&self) -> bool {
        self.step == Step::Done
    }

    fn turn(&mut self, overall: &mut Histogram) -> Turn {
        match self.step(overall) {
            Ok(t) => t,
            Err(e) => {
                self.fail(e);
                Turn::Done
            }
        }
    }

    /// The user stopped the test: the phase ends after the open batch.
    fn stop(&mut self, _: &mut Histogram) -> bool {
        self.tx.stopping = true;
        false
    }

    fn fail(&mut self, e: EngineError) {
        self.error = Some(e);
        self.step = Step::Done;
        // A crr connection in flight closes now.
        self.io.sock = None;
    }

    fn progress(&self) -> u64 {
        self.tx.answered()
    }
}

struct ServerFlow<'a, E: Engine> {
    io: Msg<E>,
    core: RrServer,
    /// Reading a request (else writing its response).
    reading: bool,
    done: bool,
    timed: bool,
    answered: u64,
    first: Option<Instant>,
    elapsed_ns: u64,
    watch: &'a Watch,
    error: Option<EngineError>,
}

impl<'a, E: Engine> ServerFlow<'a, E> {
    fn new(io: Msg<E>, phase: &RrPhase, timed: bool, watch: &'a Watch) -> Self {
        ServerFlow {
            core: RrServer::new(io.flow, phase.request as usize, true),
            reading: true,
            done: false,
            timed,
            answered: 0,
            first: None,
            elapsed_ns: 0,
            watch,
            error: None,
            io,
        }
    }

    fn step(&mut self) -> Result<Turn, EngineError> {
        for _ in 0..CALLS_PER_TURN {
            if self.reading {
                match self.io.read(REQ)? {
                    Piece::Whole => {
                        let t_rx = self.timed.then(mono_ns);
                        self.first.get_or_insert_with(Instant::now);
                        let [req, resp] = &mut self.io.bufs;
                        self.core.on_request(req, t_rx, mono_ns, resp)?;
                        self.reading = false;
                    }
                    Piece::Partial => {}
                    Piece::WouldBlock => return Ok(Turn::Wait),
                    Piece::End if self.io.off == 0 => {
                        // The client ended the phase: answer by closing.
                        self.elapsed_ns = self.first.map_or(0, |f| f.elapsed().as_nanos() as u64);
                        if let Some(sock) = &self.io.sock {
                            let _ = sock.shutdown(Shutdown::Both);
                        }
                        self.done = true;
                        return Ok(Turn::Done);
                    }
                    Piece::End => {
                        return Err(EngineError::PeerReset(
                            "client closed the connection mid-request".into(),
                        ))
                    }
                }
            } else {
                match self.io.write(RESP)? {
                    Piece::Whole => {
                        self.answered += 1;
                        self.watch.tick(self.io.flow);
                        self.reading = true;
                    }
                    Piece::Partial => {}
                    Piece::WouldBlock => return Ok(Turn::Wait),
                    Piece::End => unreachable_end()?,
                }
            }
        }
        Ok(Turn::Again)
    }

    fn measurement(self, phase: &RrPhase) -> RrFlowMeasurement {
        let error = self.error.map(|e| e.to_string());
        served(phase, self.io.flow, self.answered, self.elapsed_ns, error)
    }
}

impl<E: Engine> LoopFlow for ServerFlow<'_, E> {
    type Shared = ();

    fn sock(&self) -> Option<BorrowedFd<'_>> {
        self.io.sock.as_ref().map(AsFd::as_fd)
    }

    fn ended(&self) -> bool {
        self.done
    }

    fn turn(&mut self, _: &mut ()) -> Turn {
        match self.step() {
            Ok(t) => t,
            Err(e) => {
                self.fail(e);
                Turn::Done
            }
        }
    }

    fn fail(&mut self, e: EngineError) {
        self.elapsed_ns = self.first.map_or(0, |f| f.elapsed().as_nanos() as u64);
        self.error = Some(e);
        self.done = true;
    }

    fn progress(&self) -> u64 {
        self.answered
    }
}
