//! crr (connect/request/response): every transaction is a new connection,
//! greeted with the test's token and the (phase, flow) stream id, then one
//! request, one response, and the server's close (the server closes first,
//! so the client keeps no TIME_WAIT: its ephemeral ports run out only with
//! more connections in flight than its range holds, reported as
//! [`EngineError::PortsExhausted`]). `crr --flows` runs the same
//! transactions on event loops (`super::loops`).

use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use linerate_proto::measure::{RrFlowMeasurement, RrMeasurement};
use linerate_proto::rr::RequestRepr;
use linerate_proto::rr_core::{RrPlan, SpinMode, Tally};
use linerate_proto::rr_flow::{RrClient, RrServer, Transaction};
use linerate_proto::spec::{RrConn, RrPhase, TcpOptions};
use linerate_proto::wire::{DataHello, Side, Token};

use crate::clock::mono_ns;
use crate::cpu::CpuTime;
use crate::engines::{Engine, EngineKind, Syscall};
use crate::runner::{spawn_side, CpuScope, ProcessThreads, SideRun};
use crate::stream::{Signals, POLL};
use crate::{socket, EngineError};

use super::conns::RrConns;
use super::exchange::{reliable_answer, run_phase, Exchange};
use super::load::{load_ids, load_runs, server_elapsed};
use super::params::RrParams;
use super::params::WAKE;
use super::params::{Buffers, PhaseCtx, PhaseOut};
use super::side::{run_threads, CpuStart, FlowEnd};
use super::stream_io::{StreamIo, TcpParts};
use super::watch::Watch;
use crate::wait::{busy_poll_note, busy_poll_quietly, connect_spinning, Wait, Waiter};

/// What the server side of a busy-polled crr test says it did.
const ACCEPT_SPIN_NOTE: &str = "the accepting thread spins on its non-blocking listener and on \
     each new connection's request (the spin budget, then poll(2)); SO_BUSY_POLL is not set on \
     the server's sockets";

/// How long a crr transaction's connect may take.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Where a crr client connects, and how it greets the server.
#[derive(Debug, Clone)]
pub struct CrrTarget {
    pub addr: SocketAddr,
    pub tcp: TcpOptions,
    pub token: Token,
}

/// A client flow's transactions, a connection each.
struct CrrExchange<'a, E: Engine> {
    engine: E,
    /// The engine's writer and reader, set up on the first connection and
    /// kept for the next (they take the socket on every call). First, so
    /// it drops first: a writer settles its zero-copy sends on drop, while
    /// the greeting they read from is still there.
    parts: Option<TcpParts<E>>,
    target: &'a CrrTarget,
    /// The DataHello frame then the request, written in one call.
    greeting: Vec<u8>,
    hello_len: usize,
    resp: &'a mut [u8],
    /// Writes the requests' headers and checks the responses.
    core: RrClient,
    signals: &'a Signals,
    /// Busy poll: how the flow spins; `None`: blocking connections.
    spin: Option<SpinMode>,
    /// Busy poll: the waiter every connection spins with, so its budget and
    /// sleep count carry from one connection to the next (taken while a
    /// connection has it).
    waiter: Option<Waiter<'a>>,
    /// Busy poll: what the kernel said to `SO_BUSY_POLL` on the first
    /// connection (later ones ask again without a note).
    said: Option<String>,
}

impl<'a, E: Engine> CrrExchange<'a, E> {
    /// Connects, by the flow's discipline, and the waiter for the
    /// connection's I/O.
    fn connect(&mut self) -> Result<(TcpStream, Waiter<'a>), EngineError> {
        let (addr, tcp) = (self.target.addr, &self.target.tcp);
        let Some(mode) = self.spin else {
            let sock = socket::connect_with_timeouts(addr, tcp, POLL, CONNECT_TIMEOUT)?;
            return Ok((sock, Waiter::new(Wait::Block, self.signals, true)));
        };
        let mut waiter = self
            .waiter
            .take()
            .unwrap_or_else(|| Waiter::new(Wait::Spin(mode), self.signals, true));
        let sock = match connect_spinning(addr, tcp, &mut waiter, CONNECT_TIMEOUT) {
            Ok(s) => s,
            Err(e) => {
                // Its spin figures still count for the phase.
                self.waiter = Some(waiter);
                return Err(e);
            }
        };
        match self.said {
            None => self.said = Some(busy_poll_note(&sock)),
            Some(_) => busy_poll_quietly(&sock),
        }
        Ok((sock, waiter))
    }
}

impl<'a, E: Engine> Exchange for CrrExchange<'a, E> {
    fn transact(&mut self, header: &RequestRepr) -> Result<Transaction, EngineError> {
        self.core
            .request(header, &mut self.greeting[self.hello_len..]);
        let (sock, waiter) = self.connect()?;
        let mut io = match self.parts.take() {
            Some(parts) => StreamIo::with_parts(&sock, parts, waiter),
            None => StreamIo::new(self.engine, &sock, waiter)?,
        };
        let result = (|| {
            io.write_all(&self.greeting)?;
            if !io.read_exact(self.resp)? {
                return Err(EngineError::PeerReset(
                    "server closed the connection before responding".into(),
                ));
            }
            // The server closes first.
            io.expect_close(self.resp)?;
            // Its response acknowledged the request: a zero-copy send's
            // completion is due now, and counted as part of the exchange.
            io.collect()
        })();
        // The next transaction rewrites the greeting in place while a
        // zero-copy send of it may not have been notified yet: harmless,
        // as the server has answered, so it read those bytes and its
        // response acknowledged them (the kernel keeps the pages only to
        // resend unacknowledged bytes).
        let (parts, waiter) = io.into_parts();
        if result.is_ok() {
            // A failed connection's writer may still hold its sends: a
            // fresh one for the next.
            self.parts = parts;
        }
        if self.spin.is_some() {
            self.waiter = Some(waiter);
        }
        result?;
        reliable_answer(self.core.on_response(self.resp)?)
    }

    fn end_phase(&mut self) -> Result<(), EngineError> {
        Ok(())
    }
}

/// Runs one phase of a crr client flow.
pub(super) fn client_phase<E: Engine>(
    engine: E,
    target: &CrrTarget,
    cx: &PhaseCtx<'_>,
    bufs: &mut Buffers,
    tally: &mut Tally,
) -> PhaseOut {
    let mut greeting = Vec::new();
    DataHello {
        token: target.token,
        stream: cx.p.plan.conn_id(cx.phase.index, cx.flow),
        sender: Side::Client,
    }
    .encode(&mut greeting);
    let hello_len = greeting.len();
    greeting.resize(hello_len + cx.phase.request as usize, 0);
    let mut x = CrrExchange {
        engine,
        target,
        greeting,
        hello_len,
        resp: &mut bufs.resp[..cx.phase.response as usize],
        core: RrClient::new(cx.flow, cx.phase.response as usize, None),
        signals: cx.signals,
        spin: cx.spin,
        waiter: None,
        said: None,
        parts: None,
    };
    let result = run_phase(&mut x, cx, tally);
    PhaseOut {
        result,
        spin: x.waiter.as_ref().and_then(Waiter::stats),
        busy_poll: x.said,
    }
}

#[derive(Debug, Default)]
struct CrrCounter {
    transactions: AtomicU64,
    first_ns: AtomicU64,
    last_ns: AtomicU64,
    error: Mutex<Option<String>>,
}

/// The server side of a crr test: counts the transactions that the
/// server's [`super::CrrPool`] (or [`CrrServer::serve`]) answers.
#[derive(Debug)]
pub struct CrrServer {
    plan: RrPlan,
    counters: Vec<CrrCounter>,
    /// Transactions being served right now.
    active: AtomicUsize,
    client_done: AtomicBool,
    signals: Signals,
    /// Busy poll: how the accepting thread spins, decided once (the
    /// accept loop asks on every connection).
    spin_mode: Option<SpinMode>,
    /// Threads that accept the test's connections: `crr --flows` on T
    /// loops, the server's accepting thread and T − 1 more; else 1.
    accepting: usize,
}

/// One transaction being served: counted as active until dropped, and
/// counted in its (phase, flow) once finished.
#[derive(Debug)]
pub(super) struct Ticket {
    server: Arc<CrrServer>,
    /// Index of the (phase, flow) counter.
    index: usize,
    flow: u32,
    finished: bool,
}

impl Ticket {
    /// Answers the request `req` into `resp` (the response's size).
    pub(super) fn answer(&self, req: &[u8], resp: &mut [u8]) -> Result<(), EngineError> {
        // One request per connection: nothing to count across them.
        RrServer::new(self.flow, req.len(), false).on_request(req, None, || 0, resp)?;
        Ok(())
    }

    /// Counts the transaction (once): completed, or failed with `e`.
    pub(super) fn finish(&mut self, result: Result<(), &EngineError>) {
        if std::mem::replace(&mut self.finished, true) {
            return;
        }
        let Some(counter) = self.server.counters.get(self.index) else {
            return;
        };
        match result {
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
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.server.active.fetch_sub(1, Ordering::AcqRel);
    }
}

impl CrrServer {
    pub fn new(plan: RrPlan) -> Arc<CrrServer> {
        Self::accepted_on(plan, 1)
    }

    /// A crr test whose connections `threads` threads accept (`crr
    /// --flows`: as many as the side's event loops).
    pub fn accepted_on(plan: RrPlan, threads: usize) -> Arc<CrrServer> {
        let n = plan.phases.len() * plan.flows as usize;
        Arc::new(CrrServer {
            counters: (0..n).map(|_| CrrCounter::default()).collect(),
            active: AtomicUsize::new(0),
            client_done: AtomicBool::new(false),
            signals: Signals::default(),
            spin_mode: plan
                .busy_poll
                .then(|| crate::wait::side_spin_mode(plan.flows, &[])),
            plan,
            accepting: threads.max(1),
        })
    }

    /// How many threads should accept this test's connections.
    pub fn accepting(&self) -> usize {
        self.accepting
    }

    /// The (phase, flow) a greeting names, with the index of its counter.
    fn locate(&self, hello: &DataHello) -> Result<(usize, &RrPhase, u32), EngineError> {
        let not_in_test = || {
            EngineError::Protocol(format!(
                "crr connection for stream {}, which is not in the test",
                hello.stream
            ))
        };
        let Some(RrConn::Flow { phase, flow }) = self.plan.conn(hello.stream) else {
            return Err(not_in_test());
        };
        let ph = self
            .plan
            .phases
            .get(phase as usize)
            .ok_or_else(not_in_test)?;
        Ok((hello.stream as usize - 1, ph, flow))
    }

    /// Request and response sizes of the transaction `hello` greets.
    pub(super) fn sizes(&self, hello: &DataHello) -> Result<(usize, usize), EngineError> {
        let (_, ph, _) = self.locate(hello)?;
        Ok((ph.request as usize, ph.response as usize))
    }

    /// Starts serving the transaction `hello` greets.
    pub(super) fn begin(self: &Arc<Self>, hello: &DataHello) -> Result<Ticket, EngineError> {
        let (index, _, flow) = self.locate(hello)?;
        if self.client_done.load(Ordering::Acquire) || self.signals.aborted() {
            return Err(EngineError::Protocol(
                "crr connection after the test ended".into(),
            ));
        }
        self.active.fetch_add(1, Ordering::AcqRel);
        Ok(Ticket {
            server: Arc::clone(self),
            index,
            flow,
            finished: false,
        })
    }

    /// Serves one transaction on a connection greeted with `hello`, on
    /// the calling thread (blocking): reads the request (`read`: its
    /// first bytes, already read from `sock`), writes the response,
    /// closes. The server's accept loop normally hands crr connections to
    /// a [`super::CrrPool`] instead.
    pub fn serve(
        self: &Arc<Self>,
        hello: &DataHello,
        sock: TcpStream,
        read: &[u8],
    ) -> Result<(), EngineError> {
        let (req_len, resp_len) = self.sizes(hello)?;
        let mut ticket = self.begin(hello)?;
        let result = (|| {
            socket::set_io_timeout(&sock, POLL)?;
            let mut req = vec![0u8; req_len];
            let mut resp = vec![0u8; resp_len];
            // Bytes past the request (none from a conforming client) are
            // left, as they would be in the socket.
            let ahead = read.len().min(req_len);
            req[..ahead].copy_from_slice(&read[..ahead]);
            // The server side of crr runs the syscall engine (it is served
            // on the server's connection threads, which have no engine).
            let waiter = Waiter::new(Wait::Block, &self.signals, true);
            let mut io = StreamIo::new(Syscall, &sock, waiter)?;
            if !io.read_exact(&mut req[ahead..])? {
                return Err(EngineError::PeerReset(
                    "client closed before its request".into(),
                ));
            }
            ticket.answer(&req, &mut resp)?;
            io.write_all(&resp)
        })();
        ticket.finish(result.as_ref().map(|_| ()));
        // Dropping `sock` closes: the server closes first.
        result
    }

    /// Busy poll: how the server's accepting thread spins for this test
    /// (it serves all `flows` of the client, whose rule it follows); `None`:
    /// the test blocks.
    pub fn spin_mode(&self) -> Option<SpinMode> {
        self.spin_mode
    }

    /// The client has finished (its results arrived): no more transactions.
    pub fn client_finished(&self) {
        self.client_done.store(true, Ordering::Release);
    }

    /// Whether `hello` greets one of the test's load streams
    /// (`--under-load`): a data connection for the test's session, not a
    /// transaction.
    pub fn is_load(&self, hello: &DataHello) -> bool {
        matches!(self.plan.conn(hello.stream), Some(RrConn::Load { .. }))
    }

    /// The side's run: ends when the client has finished (or on abort),
    /// once the transactions in progress are done. Under load, the load
    /// streams `load` (attached to the test's session) are read on
    /// threads of their own meanwhile, by the same load runs and watcher
    /// as rr's.
    pub fn start(self: &Arc<Self>, load: RrConns) -> SideRun {
        let me = Arc::clone(self);
        let watch = Watch::new(0, &load_ids(&load.load));
        spawn_side("syscall", move |signals| {
            let start = CpuStart::now();
            let threads = ProcessThreads::now();
            let p = RrParams::new(me.plan.clone(), &[], CpuScope::Process, None);
            let runs = load_runs(load.load, EngineKind::Syscall, &p, (signals, &watch), None);
            let no_flows: Vec<fn() -> FlowEnd> = Vec::new();
            let g = run_threads(signals, &watch, no_flows, runs, |dog| {
                while !me.client_done.load(Ordering::Acquire) {
                    if signals.aborted() {
                        break;
                    }
                    std::thread::sleep(WAKE);
                    dog.check(&watch, signals);
                }
                if signals.aborted() {
                    me.signals.abort();
                }
            });
            // The client read every response before finishing, so the
            // threads answering them are closing; give them a moment.
            let until = Instant::now() + Duration::from_secs(5);
            while me.active.load(Ordering::Acquire) > 0 && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(1));
            }
            // Transactions run on the server's accepting thread and the
            // crr pool's worker, which belong to no test: only the
            // process's CPU time covers them, and its busiest thread.
            start.results(
                "syscall",
                CpuScope::Process,
                CpuTime::default(),
                ProcessThreads::now().busiest_since(&threads),
                RrMeasurement {
                    flows: me.measurements(),
                    load_elapsed_ns: server_elapsed(&g.load),
                    load: g.load,
                    busy_poll: me.spin_mode().map(|_| ACCEPT_SPIN_NOTE.to_string()),
                    spin: me.spin_mode(),
                    ..RrMeasurement::default()
                },
            )
        })
        .with_transactions({
            let me = Arc::clone(self);
            move || me.transactions()
        })
    }

    /// Transactions answered so far, all phases and flows together.
    fn transactions(&self) -> u64 {
        let n = self.counters.iter();
        n.map(|c| c.transactions.load(Ordering::Acquire)).sum()
    }

    pub(super) fn measurements(&self) -> Vec<RrFlowMeasurement> {
        let flows = self.plan.flows;
        self.counters
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let phase = &self.plan.phases[i / flows as usize];
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
            .collect()
    }
}
