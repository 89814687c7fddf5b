//! The server side: one phase loop for every transport (a [`Serve`] is
//! TCP or UDP), the flow threads that run it phase by phase, and the side
//! that watches them and gathers the results.

use std::time::Instant;

use linerate_proto::measure::{RrFlowMeasurement, RrMeasurement};
use linerate_proto::rr_flow::RrServer;

use crate::clock::mono_ns;
use crate::cpu;
use crate::engines::{with_engine, Engine, EngineKind};
use crate::runner::{spawn_side, SideRun};
use crate::stream::Signals;
use crate::EngineError;

use super::conns::{Conn, RrConns};
use super::load::server_load;
use super::params::{with_pin, Buffers, PhaseCtx, PhaseOut, RrParams, SpinStats};
use super::side::{run_threads, CpuStart, FlowEnd};
use super::watch::Watch;
use super::{tcp, udp};

/// How a server flow receives requests and answers them on one transport
/// during a phase.
pub(super) trait Serve {
    /// The next request, `len` bytes (in `buf`, which holds at least `len`,
    /// or in the transport's own buffer); `Ok(None)` when the client ended
    /// the phase.
    fn next_request<'b>(
        &'b mut self,
        buf: &'b mut [u8],
        len: usize,
    ) -> Result<Option<&'b [u8]>, EngineError>;
    fn respond(&mut self, resp: &[u8]) -> Result<(), EngineError>;
    /// True when requests cannot be lost on the way (TCP): their sequence
    /// numbers must then count up from 0. Otherwise they are echoed.
    fn reliable(&self) -> bool;
    /// Busy poll: what the connection's spinning came to.
    fn spin(&self) -> Option<SpinStats>;
}

/// How a server phase ended.
pub(super) struct Served {
    pub(super) transactions: u64,
    pub(super) elapsed_ns: u64,
    pub(super) out: PhaseOut,
}

/// The one server phase loop: a request in, the flow's
/// [`RrServer`] core's response out, until the client ends the phase. `setup` is the transport's preparation, which
/// hands back its [`Serve`] and what the kernel said to busy polling.
pub(super) fn serve_phase<S: Serve>(
    cx: &PhaseCtx<'_>,
    bufs: &mut Buffers,
    setup: impl FnOnce() -> Result<(S, Option<String>), EngineError>,
) -> Served {
    let (req_len, resp_len) = (cx.phase.request as usize, cx.phase.response as usize);
    let resp = &mut bufs.resp[..resp_len];
    let timed = cx.p.plan.per_message();
    let mut n = 0u64;
    let mut first: Option<Instant> = None;
    let mut out = PhaseOut::failed(EngineError::Aborted);
    out.result = (|| {
        let (mut s, said) = setup()?;
        out.busy_poll = said;
        let mut core = RrServer::new(cx.flow, req_len, s.reliable());
        let r = (|| {
            while let Some(req) = s.next_request(&mut bufs.req, req_len)? {
                let t_rx = timed.then(mono_ns);
                first.get_or_insert_with(Instant::now);
                core.on_request(req, t_rx, mono_ns, resp)?;
                s.respond(resp)?;
                n += 1;
                cx.watch.tick(cx.flow);
            }
            Ok(())
        })();
        out.spin = s.spin();
        r
    })();
    Served {
        transactions: n,
        elapsed_ns: first.map_or(0, |f| f.elapsed().as_nanos() as u64),
        out,
    }
}

fn server_flow<E: Engine>(
    engine: E,
    flow: u32,
    conns: Vec<Conn>,
    p: &RrParams,
    signals: &Signals,
    watch: &Watch,
) -> FlowEnd {
    let cpu0 = cpu::thread();
    let pin_error = p.pin(flow);
    let mut bufs = Buffers::new(p);
    let mut end = FlowEnd::default();
    for (phase, conn) in p.plan.phases.iter().zip(conns) {
        let cx = PhaseCtx {
            phase,
            flow,
            p,
            signals,
            watch,
            spin: p.spin(),
        };
        let served = match &conn {
            Conn::Tcp(sock) => tcp::server_phase(engine, sock, &cx, &mut bufs),
            Conn::Udp(sock) => udp::server_phase(engine, sock, &cx, &mut bufs),
        };
        end.busy_poll = end.busy_poll.take().or(served.out.busy_poll);
        let n = served.transactions;
        let result = with_pin(served.out.result, &pin_error).map_err(|e| watch.explain(e));
        // Closing answers the client's end of stream (the watcher's
        // duplicate first, or the socket would stay open).
        watch.release(flow);
        drop(conn);
        let failed = result.is_err();
        let mut m = RrFlowMeasurement {
            phase: phase.index,
            flow,
            transactions: n,
            bytes_sent: n * u64::from(phase.response),
            bytes_received: n * u64::from(phase.request),
            elapsed_ns: served.elapsed_ns,
            error: result.err().map(|e| e.to_string()),
            ..RrFlowMeasurement::default()
        };
        SpinStats::record(served.out.spin, &mut m);
        end.measurements.push(m);
        if failed {
            signals.abort();
            break;
        }
    }
    end.cpu = cpu::thread().saturating_sub(cpu0);
    end.engine_use = crate::engines::take_use();
    end
}

/// Starts the server side of an rr test.
pub fn start_server(engine: EngineKind, conns: RrConns, params: RrParams) -> SideRun {
    spawn_side(engine.name(), move |signals| {
        let start = CpuStart::now();
        let p = &params;
        let RrConns { flows, load } = conns;
        let watch = Watch::new(flows.len());
        let flow_runs: Vec<_> = flows
            .into_iter()
            .enumerate()
            .map(|(f, conns)| {
                let watch = &watch;
                move || with_engine!(engine, e => server_flow(e, f as u32, conns, p, signals, watch))
            })
            .collect();
        let load_runs: Vec<_> = load
            .into_iter()
            .map(|(id, sock)| (id, move || server_load(id, sock, engine, p, signals)))
            .collect();
        let g = run_threads(signals, &watch, flow_runs, load_runs, |_| {});
        let load_elapsed = g.load.iter().map(|m| m.elapsed_ns).max().unwrap_or(0);
        start.results(
            engine.name(),
            p.cpu_scope,
            g.threads_cpu,
            g.busiest,
            RrMeasurement {
                flows: g.flows,
                load: g.load,
                load_elapsed_ns: load_elapsed,
                busy_poll: g.busy_poll,
                engine_use: g.engine_use,
                spin: p.spin(),
                clock: None,
            },
        )
    })
}
