//! rr over TCP with many flows on a few event-loop threads (`rr --flows N
//! --threads T`): each flow keeps its own sans-IO cores — the client's
//! [`RrClient`], [`Tally`] and [`PhaseClock`], the server's [`RrServer`] —
//! exactly as a flow thread does ([`super::exchange`], [`super::serve`]);
//! the loop ([`crate::event_loop::drive`]) only moves the bytes, a
//! message at a time, without blocking. One phase (one size, no load):
//! the negotiation refuses more with flows for now.
//!
//! The phase ends as on a flow thread: the client shuts down its write
//! side after its last transaction, the server answers by closing, the
//! client reads to end of stream.

use std::net::{Shutdown, TcpStream};
use std::ops::Range;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::mpsc;
use std::time::Instant;

use linerate_proto::measure::{RrFlowMeasurement, RrMeasurement, SideResults};
use linerate_proto::rr::RequestRepr;
use linerate_proto::rr_core::{PhaseClock, Tally};
use linerate_proto::rr_flow::{RrClient, RrServer};
use linerate_proto::spec::RrPhase;
use linerate_stats::histogram::Histogram;

use crate::clock::mono_ns;
use crate::engines::{with_engine, Engine, EngineKind, TcpRx, TcpTx, Wait};
use crate::event_loop::{self, drive, LoopFlow, Turn};
use crate::runner::{spawn_side, SideRun};
use crate::stream::{is_timeout, map_err, Signals};
use crate::EngineError;

use super::conns::{Conn, RrConns};
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
    start(engine, conns, p, threads, Role::Client)
}

/// Starts the server side of an rr test on `threads` event loops.
pub fn start_server(engine: EngineKind, conns: RrConns, p: RrParams, threads: usize) -> SideRun {
    start(engine, conns, p, threads, Role::Server)
}

fn start(engine: EngineKind, conns: RrConns, p: RrParams, threads: usize, role: Role) -> SideRun {
    let engine = event_loop::tcp::engine_for(engine);
    let (tx, rx) = mpsc::channel();
    let run = spawn_side(engine.name(), move |signals| {
        let r = run_side(engine, conns, &p, threads, role, signals);
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
    conns: RrConns,
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
    // Phase 0's connection of every flow (the only phase with flows).
    let socks: Vec<(u32, Option<TcpStream>)> = conns
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
        .collect();
    let watch_ref = &watch;
    let runs: Vec<_> = event_loop::split(socks, threads)
        .into_iter()
        .enumerate()
        .map(|(t, share)| {
            let label = event_loop::label(t, share.len());
            move || {
                let cpu0 = crate::cpu::thread();
                let measurements = with_engine!(engine, e => {
                    run_loop(e, share, p, &phase, role, signals, watch_ref)
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

/// One loop: its flows of `phase`, driven to their ends.
fn run_loop<E: Engine>(
    engine: E,
    share: Vec<(u32, Option<TcpStream>)>,
    p: &RrParams,
    phase: &RrPhase,
    role: Role,
    signals: &Signals,
    watch: &Watch,
) -> Vec<RrFlowMeasurement> {
    let mut out = Vec::with_capacity(share.len());
    let mut flows = Vec::with_capacity(share.len());
    for (flow, sock) in share {
        let Some(sock) = sock else {
            out.push(failed(phase, flow, "no TCP connection for this flow"));
            continue;
        };
        match Msg::open(engine, flow, sock, phase) {
            Ok(io) => flows.push(io),
            Err(e) => out.push(failed(phase, flow, &e.to_string())),
        }
    }
    let per_message = p.plan.per_message();
    match role {
        Role::Client => {
            let mut v: Vec<ClientFlow<E>> = flows
                .into_iter()
                .map(|io| ClientFlow::new(io, p, phase, per_message, watch))
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
    sock: TcpStream,
    tx: E::TcpTx,
    rx: E::TcpRx,
    /// The request ([`REQ`]) and the response ([`RESP`]).
    bufs: [Vec<u8>; 2],
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
    fn open(engine: E, flow: u32, sock: TcpStream, phase: &RrPhase) -> Result<Self, EngineError> {
        sock.set_nonblocking(true)
            .map_err(|e| EngineError::io("making a flow's socket non-blocking", e))?;
        Ok(Msg {
            flow,
            tx: engine.tcp_tx(&sock)?,
            rx: engine.tcp_rx(&sock, false)?,
            sock,
            bufs: [
                vec![0; phase.request as usize],
                vec![0; phase.response as usize],
            ],
            off: 0,
        })
    }

    /// Writes on from buffer `b` (all of it makes the message whole).
    fn write(&mut self, b: usize) -> Result<Piece, EngineError> {
        let len = self.bufs[b].len();
        match self
            .tx
            .write(&self.sock, &self.bufs[b][self.off..], Wait::DontWait)
        {
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
        match self
            .rx
            .read(&self.sock, &mut self.bufs[b][self.off..], Wait::DontWait)
        {
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

/// Where a client flow is in its transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Request,
    Response,
    /// Its write side is shut: reading to the server's close.
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
    /// The open batch's sequence numbers not yet sent, and its start.
    seqs: Range<u64>,
    t0: u64,
    batch_open: bool,
    step: Step,
    stopping: bool,
    per_message: bool,
    watch: &'a Watch,
    error: Option<EngineError>,
}

impl<'a, E: Engine> ClientFlow<'a, E> {
    fn new(io: Msg<E>, p: &RrParams, phase: &RrPhase, per_message: bool, watch: &'a Watch) -> Self {
        let flow = io.flow;
        ClientFlow {
            core: RrClient::new(flow, phase.response as usize, None),
            // Round trips only, coarse: one-way delays would add two
            // histograms per flow (the report says why they are absent).
            tally: Tally::coarse(),
            clock: None,
            limit: p.plan.limit,
            batch: p.plan.batch,
            seqs: 0..0,
            t0: 0,
            batch_open: false,
            step: Step::Request,
            stopping: false,
            per_message,
            watch,
            error: None,
            io,
        }
    }

    /// Starts the next request: the next sequence number of the open
    /// batch, or of a new one; false when the phase is over. A finished
    /// batch's round trips go to `overall` too (the loop's histogram).
    fn next_request(&mut self, overall: &mut Histogram) -> bool {
        if self.seqs.is_empty() {
            if self.batch_open {
                self.batch_open = false;
                if self.tally.finish_into(mono_ns(), overall) {
                    self.watch.tick(self.io.flow);
                }
            }
            let now = mono_ns();
            let (limit, batch) = (self.limit, self.batch);
            let clock = self
                .clock
                .get_or_insert_with(|| PhaseClock::new(limit, batch, now));
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
        self.core.request(&header, &mut self.io.bufs[REQ]);
        true
    }

    fn step(&mut self, overall: &mut Histogram) -> Result<Turn, EngineError> {
        for _ in 0..CALLS_PER_TURN {
            match self.step {
                Step::Request => {
                    if self.io.off == 0 && !self.next_request(overall) {
                        self.io
                            .sock
                            .shutdown(Shutdown::Write)
                            .map_err(|e| map_err("shutdown", e))?;
                        self.step = Step::Closing;
                        continue;
                    }
                    match self.io.write(REQ)? {
                        Piece::Whole => self.step = Step::Response,
                        Piece::Partial => {}
                        Piece::WouldBlock => return Ok(Turn::Wait),
                        Piece::End => unreachable_end()?,
                    }
                }
                Step::Response => match self.io.read(RESP)? {
                    Piece::Whole => {
                        let r = self.core.on_response(&self.io.bufs[RESP])?;
                        self.tally.record(reliable_answer(r)?);
                        self.seqs.start += 1;
                        self.step = Step::Request;
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
                        self.step = Step::Done;
                        return Ok(Turn::Done);
                    }
                    Piece::WouldBlock => return Ok(Turn::Wait),
                    Piece::Whole | Piece::Partial => {
                        return Err(EngineError::Protocol(
                            "the server sent bytes after the phase ended".into(),
                        ))
                    }
                },
                Step::Done => return Ok(Turn::Done),
            }
        }
        Ok(Turn::Again)
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

    fn sock(&self) -> BorrowedFd<'_> {
        self.io.sock.as_fd()
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
                        let _ = self.io.sock.shutdown(Shutdown::Both);
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

    fn sock(&self) -> BorrowedFd<'_> {
        self.io.sock.as_fd()
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
