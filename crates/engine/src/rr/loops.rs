//! rr over TCP with many flows on a few event-loop threads (`rr --flows N
//! --threads T`): each flow keeps its own sans-IO cores — the client's
//! [`RrClient`], [`Tally`] and [`PhaseClock`], the server's [`RrServer`] —
//! exactly as a flow thread does ([`super::exchange`], [`super::serve`]);
//! the loop ([`crate::event_loop::drive`]) only moves the bytes, a
//! message at a time, without blocking. One phase (one size, no load):
//! the negotiation refuses more with flows for now. A paced client flow
//! (`rr --rate N`) waits for its next slot on the loop's timer heap
//! ([`Turn::Until`]), as a paced UDP flow waits for its next datagram.
//!
//! The phase ends as on a flow thread: the client shuts down its write
//! side after its last transaction, the server answers by closing, the
//! client reads to end of stream.
//!
//! crr (`crr --flows N --threads T`) runs the same client flows with a
//! connection per transaction, as [`super::crr`] does on a thread: a
//! non-blocking connect (the loop watches each new socket), the greeting
//! and request in one write, the response, then the server's close; the
//! clock is read before the connect and after the close. The server
//! answers them with its crr pools ([`super::CrrPool`]), as for crr on
//! threads, accepting on as many threads as it has loops.

use std::net::{Shutdown, TcpStream};
use std::ops::Range;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use linerate_proto::measure::{RrFlowMeasurement, RrMeasurement, SideResults};
use linerate_proto::rr::RequestRepr;
use linerate_proto::rr_core::{PhaseClock, Tally};
use linerate_proto::rr_flow::{RrClient, RrServer, Transaction};
use linerate_proto::spec::RrPhase;
use linerate_proto::wire::{DataHello, Side};
use linerate_stats::histogram::Histogram;

use crate::clock::mono_ns;
use crate::engines::{with_engine, Engine, EngineKind, TcpRx, TcpTx, Wait};
use crate::event_loop::{self, drive, LoopFlow, Turn};
use crate::runner::{spawn_side, SideRun};
use crate::stream::{is_timeout, map_err, Signals};
use crate::{socket, EngineError};

use super::conns::{Conn, RrConns};
use super::crr::{CrrTarget, CONNECT_TIMEOUT};
use super::exchange::reliable_answer;
use super::params::RrParams;
use super::side::{run_threads, CpuStart, FlowEnd, LoadEnd};
use super::watch::Watch;

/// Calls one ready flow gets per turn (a message is one or two calls).
const CALLS_PER_TURN: u32 = 8;

/// Which side a loop serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Client,
    Server,
}

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

/// What a side's flows run on: rr's connections, attached before the
/// test; crr's target, connected to once per transaction.
enum Flows {
    Rr(RrConns),
    Crr(CrrTarget),
}

fn start(engine: EngineKind, flows: Flows, p: RrParams, threads: usize, role: Role) -> SideRun {
    let engine = event_loop::tcp::engine_for(engine);
    let (tx, rx) = mpsc::channel();
    let run = spawn_side(engine.name(), move |signals| {
        let r = run_side(engine, flows, &p, threads, role, signals);
        if role == Role::Client {
            // The one phase's measurements, for JSON Lines' rr_phase record.
            let _ = tx.send(r.rr.as_ref().map(|m| m.flows.clone()).unwrap_or_default());
        }
        r
    });
    match role {
        Role::Client => run.with_phases(rx),
        Role::Server => run,
    }
}

fn run_side(
    engine: EngineKind,
    flows: Flows,
    p: &RrParams,
    threads: usize,
    role: Role,
    signals: &Signals,
) -> SideResults {
    let start = CpuStart::now();
    let watch = Watch::new(p.plan.flows as usize);
    let phase = p.plan.phases.first().copied().unwrap_or(RrPhase {
        index: 0,
        request: 1,
        response: 1,
        loaded: false,
    });
    let (socks, crr) = match flows {
        Flows::Rr(conns) => (first_connections(conns), None),
        // crr flows connect as they go.
        Flows::Crr(target) => ((0..p.plan.flows).map(|f| (f, None)).collect(), Some(target)),
    };
    let (watch_ref, crr) = (&watch, crr.as_ref());
    let runs: Vec<_> = event_loop::split(socks, threads)
        .into_iter()
        .enumerate()
        .map(|(t, share)| {
            let label = event_loop::label(t, share.len());
            move || {
                let cpu0 = crate::cpu::thread();
                let measurements = with_engine!(engine, e => {
                    let cx = LoopCtx { p, phase: &phase, signals, watch: watch_ref, crr };
                    run_loop(e, share, &cx, role)
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
    let g = run_threads(signals, &watch, runs, no_load, |_| {});
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

/// Phase 0's connection of every rr flow (the only phase with flows).
fn first_connections(conns: RrConns) -> Vec<(u32, Option<TcpStream>)> {
    conns
        .flows
        .into_iter()
        .enumerate()
        .map(|(f, phases)| {
            let sock = phases.into_iter().next().and_then(|c| match c {
                Conn::Tcp(t) => Some(t),
                Conn::Udp(_) => None,
            });
            (f as u32, sock)
        })
        .collect()
}

/// What every loop of a side shares.
struct LoopCtx<'a> {
    p: &'a RrParams,
    phase: &'a RrPhase,
    signals: &'a Signals,
    watch: &'a Watch,
    /// crr: where each transaction connects.
    crr: Option<&'a CrrTarget>,
}

/// One loop: its flows of `phase`, driven to their ends.
fn run_loop<E: Engine>(
    engine: E,
    share: Vec<(u32, Option<TcpStream>)>,
    cx: &LoopCtx<'_>,
    role: Role,
) -> Vec<RrFlowMeasurement> {
    let (phase, signals, watch) = (cx.phase, cx.signals, cx.watch);
    let mut out = Vec::with_capacity(share.len());
    let mut flows = Vec::with_capacity(share.len());
    for (flow, sock) in share {
        let mut io = Msg::new(engine, flow, phase, cx.crr.map(|t| (t, cx.p)));
        let opened = match (sock, cx.crr) {
            (Some(sock), _) => io.attach(sock),
            (None, Some(_)) => Ok(()),
            (None, None) => Err(EngineError::Protocol(
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
                .map(|io| ClientFlow::new(io, cx, per_message))
                .collect();
            // The loop's round trips at full precision, for the phase's
            // percentiles; each flow keeps a coarse histogram of its own.
            let mut overall = Histogram::new();
            drive(&mut v, &mut overall, signals);
            let first = out.len();
            out.extend(v.into_iter().map(|c| c.measurement(phase)));
            if let Some(m) = out.get_mut(first) {
                m.loop_rtt = overall.to_buckets();
            }
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

fn failed(phase: &RrPhase, flow: u32, why: &str) -> RrFlowMeasurement {
    RrFlowMeasurement {
        phase: phase.index,
        flow,
        error: Some(why.into()),
        ..RrFlowMeasurement::default()
    }
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
    core: RrClient,
    tally: Tally,
    /// The phase's budget, from the flow's first request (as a flow
    /// thread starts its clock when it starts the phase).
    clock: Option<PhaseClock>,
    limit: linerate_proto::spec::RrLimit,
    batch: u32,
    /// [`linerate_proto::rr_core::RrPlan::gap_ns`]: the pace (0: none).
    gap_ns: u64,
    /// The open batch's sequence numbers not yet answered, and its start.
    seqs: Range<u64>,
    t0: u64,
    batch_open: bool,
    step: Step,
    /// crr: where each transaction connects.
    crr: Option<&'a CrrTarget>,
    /// crr: the response read, counted once the server has closed.
    answer: Option<Transaction>,
    stopping: bool,
    per_message: bool,
    watch: &'a Watch,
    error: Option<EngineError>,
}

impl<'a, E: Engine> ClientFlow<'a, E> {
    fn new(io: Msg<E>, cx: &LoopCtx<'a>, per_message: bool) -> Self {
        let flow = io.flow;
        ClientFlow {
            core: RrClient::new(flow, cx.phase.response as usize, None),
            // Round trips only, coarse: one-way delays would add two
            // histograms per flow (the report says why they are absent).
            tally: Tally::coarse(),
            clock: None,
            limit: cx.p.plan.limit,
            batch: cx.p.plan.batch,
            gap_ns: cx.p.plan.gap_ns,
            seqs: 0..0,
            t0: 0,
            batch_open: false,
            step: Step::Next,
            crr: cx.crr,
            answer: None,
            stopping: false,
            per_message,
            watch: cx.watch,
            error: None,
            io,
        }
    }

    /// Starts the next request: the next sequence number of the open
    /// batch, or of a new one; false when the phase is over.
    fn next_request(&mut self) -> bool {
        if self.seqs.is_empty() {
            let now = mono_ns();
            let (limit, batch, gap) = (self.limit, self.batch, self.gap_ns);
            let clock = self
                .clock
                .get_or_insert_with(|| PhaseClock::new(limit, batch, now).paced(gap));
            let next = if self.stopping { None } else { clock.next(now) };
            let Some(batch) = next else {
                return false;
            };
            self.tally.start(batch);
            self.batch_open = true;
            self.seqs = batch.sequences();
            self.t0 = batch.t0;
        }
        let header = RequestRepr {
            flow: self.io.flow,
            sequence: self.seqs.start,
            sent_ns: self.per_message.then_some(self.t0),
        };
        let hello = self.io.hello_len;
        self.core.request(&header, &mut self.io.bufs[REQ][hello..]);
        true
    }

    /// Paced: how long until the next batch is due (none while a batch is
    /// open, before the first, or once stopping ends the phase).
    fn pace_wait(&self) -> Option<Duration> {
        match &self.clock {
            Some(c) if self.seqs.is_empty() && !self.stopping => {
                c.wait_ns(mono_ns()).map(Duration::from_nanos)
            }
            _ => None,
        }
    }

    /// A transaction is done: counted, and a finished batch's round trips
    /// go to `overall` too (the loop's histogram), timed now.
    fn complete(&mut self, t: Transaction, overall: &mut Histogram) {
        self.tally.record(t);
        self.seqs.start += 1;
        if self.seqs.is_empty() && self.batch_open {
            self.batch_open = false;
            if self.tally.finish_into(mono_ns(), overall) {
                self.watch.tick(self.io.flow);
            }
        }
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
                    if let Some(wait) = self.pace_wait() {
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
                        let r = self.core.on_response(&self.io.bufs[RESP])?;
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
        let error = self.error.map(|e| e.to_string());
        self.tally.into_measurement(phase, self.io.flow, error)
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
        self.stopping = true;
        false
    }

    fn fail(&mut self, e: EngineError) {
        self.error = Some(e);
        self.step = Step::Done;
        // A crr connection in flight closes now.
        self.io.sock = None;
    }

    fn progress(&self) -> u64 {
        self.tally.transactions()
    }
}

struct ServerFlow<'a, E: Engine> {
    io: Msg<E>,
    core: RrServer,
    /// Reading a request (else writing its response).
    reading: bool,
    done: bool,
    timed: bool,
    request: usize,
    response: usize,
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
            request: phase.request as usize,
            response: phase.response as usize,
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
        let n = self.answered;
        RrFlowMeasurement {
            phase: phase.index,
            flow: self.io.flow,
            transactions: n,
            bytes_sent: n * self.response as u64,
            bytes_received: n * self.request as u64,
            elapsed_ns: self.elapsed_ns,
            error: self.error.map(|e| e.to_string()),
            ..RrFlowMeasurement::default()
        }
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
