//! crr (connect/request/response): every transaction is a new connection,
//! greeted with the test's token and the (phase, flow) stream id, then one
//! request, one response, and the server's close (the server closes first,
//! so the client keeps no TIME_WAIT and cannot run out of ephemeral ports).

use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use linerate_proto::measure::{RrFlowMeasurement, RrMeasurement};
use linerate_proto::rr::RequestRepr;
use linerate_proto::rr_core::{RrPlan, Tally};
use linerate_proto::spec::{RrConn, TcpOptions};
use linerate_proto::wire::{DataHello, Side, Token};

use crate::clock::mono_ns;
use crate::cpu::CpuTime;
use crate::engine::{Signals, POLL};
use crate::runner::{spawn_side, CpuScope, SideRun};
use crate::{socket, EngineError};

use super::client::{run_phase, server_times, Exchange, Reply};
use super::params::{Buffers, PhaseCtx, PhaseOut};
use super::server::answer;
use super::side::CpuStart;
use super::stream_io::StreamIo;
use super::wait::{Wait, Waiter};
use super::WAKE;

/// How long a crr transaction's connect may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Where a crr client connects, and how it greets the server.
#[derive(Debug, Clone)]
pub struct CrrTarget {
    pub addr: SocketAddr,
    pub tcp: TcpOptions,
    pub token: Token,
}

/// A client flow's transactions, a connection each.
struct CrrExchange<'a> {
    target: &'a CrrTarget,
    /// The DataHello frame then the request, written in one call.
    greeting: Vec<u8>,
    hello_len: usize,
    resp: &'a mut [u8],
    signals: &'a Signals,
}

impl Exchange for CrrExchange<'_> {
    fn transact(&mut self, header: &RequestRepr) -> Result<Reply, EngineError> {
        header.emit(&mut self.greeting[self.hello_len..]);
        let sock = socket::connect(self.target.addr, &self.target.tcp, CONNECT_TIMEOUT)?;
        socket::set_io_timeout(&sock, POLL)?;
        let mut io = StreamIo::new(&sock, Waiter::new(Wait::Block, self.signals, true));
        io.write_all(&self.greeting)?;
        if !io.read_exact(self.resp)? {
            return Err(EngineError::PeerReset(
                "server closed the connection before responding".into(),
            ));
        }
        // The server closes first.
        io.expect_close()?;
        Ok(Reply::Answered(server_times(header, self.resp)?))
    }

    fn end_phase(&mut self) -> Result<(), EngineError> {
        Ok(())
    }
}

/// Runs one phase of a crr client flow.
pub(super) fn client_phase(
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
        target,
        greeting,
        hello_len,
        resp: &mut bufs.resp[..cx.phase.response as usize],
        signals: cx.signals,
    };
    PhaseOut {
        result: run_phase(&mut x, cx, tally),
        busy_poll: None,
        poll_sleeps: None,
    }
}

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
    plan: RrPlan,
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
    pub fn new(plan: RrPlan) -> Arc<CrrServer> {
        let n = plan.phases.len() * plan.flows as usize;
        Arc::new(CrrServer {
            plan,
            counters: (0..n).map(|_| CrrCounter::default()).collect(),
            active: AtomicUsize::new(0),
            client_done: AtomicBool::new(false),
            signals: Signals::default(),
        })
    }

    /// Serves one transaction on a connection greeted with `hello`:
    /// reads the request, writes the response, closes.
    pub fn serve(&self, hello: &DataHello, sock: TcpStream) -> Result<(), EngineError> {
        self.active.fetch_add(1, Ordering::AcqRel);
        let _active = Active(&self.active);
        let Some(RrConn::Flow { phase, flow }) = self.plan.conn(hello.stream) else {
            return Err(EngineError::Unsupported(format!(
                "crr connection for stream {}, which is not in the test",
                hello.stream
            )));
        };
        let Some(counter) = self.counters.get(hello.stream as usize - 1) else {
            return Err(EngineError::Unsupported("stream out of range".into()));
        };
        if self.client_done.load(Ordering::Acquire) || self.signals.aborted() {
            return Err(EngineError::Unsupported(
                "crr connection after the test ended".into(),
            ));
        }
        let ph = &self.plan.phases[phase as usize];
        let result = (|| {
            socket::set_io_timeout(&sock, POLL)?;
            let mut req = vec![0u8; ph.request as usize];
            let mut resp = vec![0u8; ph.response as usize];
            let mut io = StreamIo::new(&sock, Waiter::new(Wait::Block, &self.signals, true));
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
            let start = CpuStart::now();
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
            // Transactions run on the server's connection threads, which
            // belong to no test: only the process's CPU time covers them.
            start.results(
                "syscall",
                CpuScope::Process,
                CpuTime::default(),
                RrMeasurement {
                    flows: me.measurements(),
                    ..RrMeasurement::default()
                },
            )
        })
    }

    fn measurements(&self) -> Vec<RrFlowMeasurement> {
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
