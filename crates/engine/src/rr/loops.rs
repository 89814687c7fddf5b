//! rr over TCP with many flows on a few event-loop threads (`rr --flows N
//! --threads T`): each flow keeps its own sans-IO cores — the client's
//! `RrClient`, `Tally` and `PhaseClock`, the server's `RrServer` —
//! exactly as a flow thread does (`exchange`, `serve`);
//! the flows (`tcp_flows`) are written once for every loop kind,
//! and the loop only moves the bytes, a message at a time, without
//! blocking: on epoll (`event_loop::drive`) through the flow's
//! engine (here), or with `--engine uring` on an io_uring completion
//! loop (`ring_loops`). This module runs the side: which loop,
//! its threads, its phases. A phase per size, and under load
//! (`--under-load S`) every size again while the load streams send, on
//! threads of their own beside the loops (`load`, as beside flow
//! threads): each loop runs its flows through the phases, and the
//! client's flows move from one to the next together, as flow threads do
//! (the side's coordinator, `client::coordinate_side`, opens each and
//! starts and stops the load). A paced client
//! flow (`rr --rate N`) waits for its next slot on the loop's timer heap
//! ([`Turn::Until`](crate::event_loop::Turn::Until)), as a paced UDP flow waits for its next datagram.
//!
//! The phase ends as on a flow thread: the client shuts down its write
//! side after its last transaction, the server answers by closing, the
//! client reads to end of stream.
//!
//! rr over UDP runs the same side (`udp_flows`: a datagram per message,
//! its client core with its timeouts), on epoll (`udp_loops`) or io_uring
//! (`udp_ring_loops`). The side's results record which loop ran
//! (`SideResults::event_loop`).
//!
//! crr (`crr --flows N --threads T`, on epoll or, with `--engine uring`,
//! io_uring) runs the same client flows with a connection per
//! transaction, as `crr` does on a thread: a non-blocking
//! connect (the loop watches each new socket), the greeting
//! and request in one write, the response, then the server's close; the
//! clock is read before the connect and after the close. The server
//! answers them with its crr pools ([`super::CrrPool`]), as for crr on
//! threads, accepting on as many threads as it has loops.

use std::sync::{mpsc, Arc, Mutex};

use linerate_proto::measure::{RrFlowMeasurement, RrMeasurement, SideResults};
use linerate_proto::spec::{Protocol, TestKind, TestSpec};
use linerate_stats::histogram::Histogram;

use crate::engines::uring::Uring;
use crate::engines::{with_engine, Engine, EngineKind, TcpEndpoint, TcpRx, TcpTx, Wait};
use crate::event_loop::{self, drive, ring};
use crate::runner::{spawn_side, SideRun};
use crate::stream::Signals;
use crate::EngineError;

use super::client::{coordinate_side, send_ended};
use super::conns::{Conn, RrConns};
use super::crr::CrrTarget;
use super::gate::Gate;
use super::load::{load_ids, load_runs, server_elapsed};
use super::loop_tally::{LoopCtx, Role};
use super::params::RrParams;
use super::side::{run_threads, CpuStart, FlowEnd};
use super::tcp_flows::{
    self, no_connection, nonblocking, ClientFlow, LoopDrive, ServerFlow, Transport,
};
use super::watch::Watch;

/// Starts the client side of an rr test on `threads` event loops.
pub fn start_client(engine: EngineKind, conns: RrConns, p: RrParams, threads: usize) -> SideRun {
    start(engine, Flows::Rr(conns), p, threads, Role::Client)
}

/// Starts the server side of an rr test on `threads` event loops.
pub fn start_server(engine: EngineKind, conns: RrConns, p: RrParams, threads: usize) -> SideRun {
    start(engine, Flows::Rr(conns), p, threads, Role::Server)
}

/// Why a server asked to run `engine` serves `spec`'s rr `--flows` with
/// another engine, in words: the engine and loop that serve them, and
/// why not `engine` (`None`: not rr `--flows`, or they run `engine`). The
/// server logs it; its report records what ran (`server_engine`,
/// `server_loop`).
pub fn server_flows_note(engine: EngineKind, spec: &TestSpec) -> Option<String> {
    if spec.kind != TestKind::Rr || spec.flows.is_none() {
        return None;
    }
    let udp = spec.protocol == Protocol::Udp;
    let ran = Runs::of(engine, udp).engine();
    let why = if udp {
        "UDP rr flows run on epoll loops with syscall, or on io_uring completion loops with uring"
    } else {
        "TCP rr flows run on epoll loops with the engines whose per-socket objects cost nothing \
         beyond the socket (syscall, batch), or on io_uring completion loops with uring"
    };
    (ran != engine).then(|| {
        format!(
            "rr --flows served with the {ran} engine on {} loops, not this server's \
             --engine {engine}: {why}",
            event_loop::loop_kind(ran).name()
        )
    })
}

/// Starts the client side of a crr test on `threads` event loops: each
/// flow a connection per transaction to `target`.
pub fn start_crr_client(
    engine: EngineKind,
    (target, load): (CrrTarget, RrConns),
    p: RrParams,
    threads: usize,
) -> SideRun {
    start(engine, Flows::Crr(target, load), p, threads, Role::Client)
}

/// What a side's flows run on: rr's connections (TCP, or UDP sockets run
/// by [`super::udp_loops`]), attached before the test; crr's target,
/// connected to once per transaction (and its load streams, if any).
enum Flows {
    Rr(RrConns),
    Crr(CrrTarget, RrConns),
}

/// What a side's loops run: TCP flows on the engine's epoll loop, UDP
/// flows on epoll with the syscall engine ([`super::udp_loops`]), or
/// either on io_uring completion loops when the engine is `uring`
/// ([`super::ring_loops`], [`super::udp_ring_loops`]). The side is named
/// for what ran.
#[derive(Debug, Clone, Copy)]
enum Runs {
    Epoll(EngineKind),
    EpollUdp,
    Ring { engine: Uring, udp: bool },
}

impl Runs {
    /// What a side asked to run `engine` runs its flows on (rr over UDP
    /// on UDP loops; crr's flows are TCP's).
    fn of(engine: EngineKind, udp: bool) -> Runs {
        match (ring::uring(engine), udp) {
            (Some(u), udp) => Runs::Ring { engine: u, udp },
            (None, true) => Runs::EpollUdp,
            (None, false) => Runs::Epoll(event_loop::tcp::engine_for(engine)),
        }
    }

    /// The engine the side's flows ran.
    fn engine(self) -> EngineKind {
        match self {
            Runs::Epoll(k) => k,
            Runs::EpollUdp => event_loop::udp::ENGINE,
            Runs::Ring { engine, .. } => EngineKind::Uring {
                sqpoll: engine.sqpoll,
            },
        }
    }

    /// One loop's flows of a phase, on what the side runs.
    fn run_loop(
        self,
        share: Vec<(u32, Option<Conn>)>,
        cx: &LoopCtx<'_>,
        role: Role,
    ) -> Vec<RrFlowMeasurement> {
        match self {
            Runs::Epoll(k) => with_engine!(k, e => run_epoll(e, share, cx, role)),
            Runs::EpollUdp => super::udp_loops::run_loop(share, cx, role),
            Runs::Ring { engine, udp: false } => {
                super::ring_loops::run_loop(engine, share, cx, role)
            }
            Runs::Ring { engine, udp: true } => {
                super::udp_ring_loops::run_loop(engine, share, cx, role)
            }
        }
    }
}

fn start(engine: EngineKind, flows: Flows, p: RrParams, threads: usize, role: Role) -> SideRun {
    let runs = Runs::of(engine, matches!(&flows, Flows::Rr(c) if c.datagrams()));
    let (tx, rx) = mpsc::channel();
    let load = match &flows {
        Flows::Rr(c) | Flows::Crr(_, c) => load_ids(&c.load),
    };
    let watch = Arc::new(Watch::new(p.plan.flows as usize, &load));
    let w = Arc::clone(&watch);
    let side = Side {
        runs,
        load_engine: engine,
        threads,
        role,
    };
    let run = spawn_side(runs.engine().name(), move |signals| {
        run_side(side, flows, &p, (&tx, &w), signals)
    })
    .with_transactions(move || watch.total());
    match role {
        Role::Client => run.with_phases(rx),
        Role::Server => run,
    }
}

/// How a side runs: its loops (what and how many), the engine of its
/// load streams (the one asked for, as on flow threads), which side.
#[derive(Debug, Clone, Copy)]
struct Side {
    runs: Runs,
    load_engine: EngineKind,
    threads: usize,
    role: Role,
}

/// `(phases, watch)`: where a client sends each phase's measurements as
/// the phase ends (JSON Lines' rr_phase records), and what watches its
/// flows.
fn run_side(
    Side {
        runs,
        load_engine,
        threads,
        role,
    }: Side,
    flows: Flows,
    p: &RrParams,
    (phases, watch): (&mpsc::Sender<Vec<RrFlowMeasurement>>, &Watch),
    signals: &Signals,
) -> SideResults {
    let start = CpuStart::now();
    let (socks, load, crr) = match flows {
        Flows::Rr(RrConns { flows, load }) => (per_flow(flows), load, None),
        // crr flows connect as they go.
        Flows::Crr(target, RrConns { load, .. }) => {
            let socks = (0..p.plan.flows).map(|f| (f, Vec::new())).collect();
            (socks, load, Some(target))
        }
    };
    let (gate, ended) = (Gate::default(), Mutex::new(Vec::new()));
    let load_signals = Signals::default();
    let side = Phases {
        p,
        signals,
        watch,
        crr: crr.as_ref(),
        gate: (role == Role::Client).then_some(&gate),
        ended: &ended,
    };
    let side = &side;
    let loops: Vec<_> = event_loop::split(socks, threads)
        .into_iter()
        .enumerate()
        .map(|(t, share)| {
            let kind = event_loop::loop_kind(runs.engine());
            let label = event_loop::label_of(kind, t, share.len());
            move || {
                let cpu0 = crate::cpu::thread();
                let measurements =
                    side.run_phases(share, |share, cx| runs.run_loop(share, cx, role));
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
    let client = (role == Role::Client).then_some((&load_signals, &gate));
    let load_runs = load_runs(load, load_engine, p, (signals, watch), client);
    let mut load_elapsed_ns = 0;
    let g = run_threads(signals, watch, loops, load_runs, |dog| {
        if role == Role::Client {
            // The flows move from phase to phase together, as flow
            // threads do.
            let ran = coordinate_side(p, signals, (&gate, &load_signals), (watch, dog), || {
                send_ended(&ended, phases);
            });
            load_elapsed_ns = ran.as_nanos() as u64;
        }
    });
    if role == Role::Server {
        load_elapsed_ns = server_elapsed(&g.load);
    }
    let results = start.results(
        runs.engine().name(),
        p.cpu_scope,
        g.threads_cpu,
        g.busiest,
        RrMeasurement {
            flows: g.flows,
            load: g.load,
            load_elapsed_ns,
            engine_use: g.engine_use,
            clock: match role {
                Role::Client => p.clock,
                Role::Server => None,
            },
            ..RrMeasurement::default()
        },
    );
    SideResults {
        event_loop: Some(event_loop::loop_kind(runs.engine())),
        ..results
    }
}

/// Every rr flow's connections, one per phase in phase order.
fn per_flow(flows: Vec<Vec<Conn>>) -> Vec<(u32, Vec<Conn>)> {
    flows
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

/// The flow's engine on an epoll loop: its writer and reader, made on
/// the first connection and kept for the next (they take the socket on
/// every call), over a non-blocking socket.
struct EngineConn<E: Engine> {
    engine: E,
    io: Option<(E::TcpTx, E::TcpRx)>,
}

impl<E: Engine> Transport for EngineConn<E> {
    type Cx = ();

    /// Its writes are plain non-blocking calls.
    const WRITES_WHILE_CONNECTING: bool = true;
    /// epoll reports every edge, `EPOLLRDHUP` with them.
    const SEES_PEER_CLOSE: bool = true;

    fn attach<S: TcpEndpoint>(&mut self, sock: &S) -> Result<(), EngineError> {
        sock.set_nonblocking(true)
            .map_err(|e| EngineError::io("making a flow's socket non-blocking", e))?;
        self.attach_nonblocking(sock)
    }

    fn attach_nonblocking<S: TcpEndpoint>(&mut self, sock: &S) -> Result<(), EngineError> {
        if self.io.is_none() {
            self.io = Some((self.engine.tcp_tx(sock)?, self.engine.tcp_rx(sock, false)?));
        }
        Ok(())
    }

    fn write<S: TcpEndpoint>(
        &mut self,
        _: &mut (),
        sock: &S,
        buf: &[u8],
    ) -> Result<Option<usize>, EngineError> {
        let (tx, _) = self.io.as_mut().ok_or_else(no_connection)?;
        nonblocking("write", tx.write(sock, buf, Wait::DontWait))
    }

    fn read<S: TcpEndpoint>(
        &mut self,
        _: &mut (),
        sock: &S,
        buf: &mut [u8],
    ) -> Result<Option<usize>, EngineError> {
        let (_, rx) = self.io.as_mut().ok_or_else(no_connection)?;
        nonblocking("read", rx.read(sock, buf, Wait::DontWait))
    }
}

/// Drives a loop's flows on epoll ([`drive`]).
struct Epoll<'s>(&'s Signals);

impl<E: Engine> LoopDrive<EngineConn<E>> for Epoll<'_> {
    fn clients(&mut self, flows: &mut [ClientFlow<'_, EngineConn<E>>]) -> Histogram {
        let mut sh = ((), Histogram::new());
        drive(flows, &mut sh, self.0);
        sh.1
    }

    fn servers(&mut self, flows: &mut [ServerFlow<'_, EngineConn<E>>]) {
        drive(flows, &mut ((), ()), self.0);
    }
}

/// One epoll loop: its flows of `cx.phase`, on `engine`.
fn run_epoll<E: Engine>(
    engine: E,
    share: Vec<(u32, Option<Conn>)>,
    cx: &LoopCtx<'_>,
    role: Role,
) -> Vec<RrFlowMeasurement> {
    let new = |_| EngineConn { engine, io: None };
    tcp_flows::run_loop(share, cx, role, new, Epoll(cx.signals))
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_proto::spec::Flows as FlowsSpec;

    /// Issue 24: a server whose own engine does not run rr `--flows`
    /// says which engine and loop serve them, and why.
    #[test]
    fn issue_24_a_server_says_which_engine_serves_its_rr_flows_and_why() {
        let spec = |kind, protocol, flows| TestSpec {
            kind,
            protocol,
            flows,
            ..TestSpec::default()
        };
        let flows = Some(FlowsSpec {
            count: 2,
            threads: 1,
        });
        let kind = |s: &str| s.parse::<EngineKind>().expect("engine");
        let sf = kind("zerocopy:sendfile");
        let tcp = server_flows_note(sf, &spec(TestKind::Rr, Protocol::Tcp, flows));
        let tcp = tcp.expect("a note for sendfile's TCP rr flows");
        assert!(
            tcp.starts_with(
                "rr --flows served with the syscall engine on epoll loops, not this \
                 server's --engine zerocopy:sendfile: TCP rr flows run on epoll loops"
            ),
            "{tcp}"
        );
        let udp = server_flows_note(kind("batch"), &spec(TestKind::Rr, Protocol::Udp, flows));
        assert!(udp
            .expect("a note for batch's UDP rr flows")
            .contains("UDP rr flows run"));
        // The engine ran as asked, or the test is not rr --flows: nothing.
        for (engine, s) in [
            ("syscall", spec(TestKind::Rr, Protocol::Tcp, flows)),
            ("batch", spec(TestKind::Rr, Protocol::Tcp, flows)),
            ("uring", spec(TestKind::Rr, Protocol::Udp, flows)),
            ("zerocopy:sendfile", spec(TestKind::Rr, Protocol::Tcp, None)),
            (
                "zerocopy:sendfile",
                spec(TestKind::Stream, Protocol::Tcp, flows),
            ),
        ] {
            assert_eq!(server_flows_note(kind(engine), &s), None, "{engine} {s:?}");
        }
    }
}
