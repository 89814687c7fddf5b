//! The server side: the flow threads that run the phase loop (`serve`)
//! phase by phase over TCP or UDP, and the side that watches them and
//! gathers the results.

use std::sync::Arc;

use linerate_proto::measure::{RrFlowMeasurement, RrMeasurement};

use crate::cpu;
use crate::engines::{with_engine, Engine, EngineKind};
use crate::runner::{spawn_side, SideRun};
use crate::stream::Signals;

use super::conns::{Conn, RrConns};
use super::load::{load_ids, load_runs, server_elapsed};
use super::params::{with_pin, Buffers, PhaseCtx, RrParams, SpinStats};
use super::side::{run_threads, CpuStart, FlowEnd};
use super::watch::Watch;
use super::{tcp, udp};

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
            spin: p.spin(engine),
        };
        // A UDP phase's engine takes its socket (and closes it on return).
        let served = match conn {
            Conn::Tcp(sock) => {
                let served = tcp::server_phase(engine, &sock, &cx, &mut bufs);
                // Closing answers the client's end of stream (the
                // watcher's duplicate first, or the socket would stay open).
                watch.release(flow);
                drop(sock);
                served
            }
            Conn::Udp(sock) => udp::server_phase(engine, sock, &cx, &mut bufs),
        };
        end.busy_poll = end.busy_poll.take().or(served.out.busy_poll);
        let n = served.transactions;
        let result = with_pin(served.out.result, &pin_error).map_err(|e| watch.explain(e));
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
    let watch = Arc::new(Watch::new(conns.flows.len(), &load_ids(&conns.load)));
    let w = Arc::clone(&watch);
    spawn_side(engine.name(), move |signals| {
        let start = CpuStart::now();
        let p = &params;
        let RrConns { flows, load } = conns;
        let watch = &*w;
        let flow_runs: Vec<_> = flows
            .into_iter()
            .enumerate()
            .map(|(f, conns)| {
                move || with_engine!(engine, e => server_flow(e, f as u32, conns, p, signals, watch))
            })
            .collect();
        let load_runs = load_runs(load, engine, p, (signals, watch), None);
        let g = run_threads(signals, watch, flow_runs, load_runs, |_| {});
        let load_elapsed = server_elapsed(&g.load);
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
                spin: with_engine!(engine, e => p.spin(e)),
                clock: None,
            },
        )
    })
    .with_transactions(move || watch.total())
}
