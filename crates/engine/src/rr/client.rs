//! The client side: the flow threads that run the phase loop
//! (`exchange`) phase by phase over TCP, UDP or crr, and the coordinator
//! that moves the flows through the phases together and starts the load.

use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use linerate_proto::measure::{RrFlowMeasurement, RrMeasurement, SideResults};
use linerate_proto::rr::RESPONSE_HEADER_LEN;
use linerate_proto::rr_core::Tally;

use crate::cpu;
use crate::engines::{with_engine, Engine, EngineKind};
use crate::runner::{spawn_side, SideRun};
use crate::stream::Signals;
use crate::EngineError;

use super::conns::{Conn, RrConns};
use super::crr::{self, CrrTarget};
use super::gate::Gate;
use super::load::{load_ids, load_runs};
use super::params::{with_pin, Buffers, PhaseCtx, PhaseOut, RrParams, SpinStats};
use super::params::{LOAD_WARMUP, WAKE};
use super::side::{run_threads, CpuStart, FlowEnd};
use super::watch::{Watch, Watchdog};
use super::{tcp, udp};

/// Where a client flow's transactions go.
enum Source<'a> {
    /// rr: a connection per phase, in phase order.
    Conns(std::vec::IntoIter<Conn>),
    /// crr: a new connection per transaction.
    Crr(&'a CrrTarget),
}

struct Shared<'a> {
    p: &'a RrParams,
    signals: &'a Signals,
    gate: &'a Gate,
    watch: &'a Watch,
    /// Each flow's measurement of a phase, until the coordinator passes
    /// the phase on (`--json-lines` prints a record per size as it ends).
    ended: &'a Mutex<Vec<RrFlowMeasurement>>,
}

fn client_flow<E: Engine>(engine: E, flow: u32, mut source: Source<'_>, s: &Shared<'_>) -> FlowEnd {
    let cpu0 = cpu::thread();
    let p = s.p;
    let mut out = FlowEnd::default();
    let pin_error = p.pin(flow);
    let mut bufs = Buffers::new(p);
    for phase in &p.plan.phases {
        if !s.gate.wait(s.signals, |g| g.open > phase.index) {
            break;
        }
        let offset = p
            .clock
            .filter(|_| p.plan.per_message() && phase.response as usize >= RESPONSE_HEADER_LEN);
        let mut tally = Tally::new(offset);
        let cx = PhaseCtx {
            phase,
            flow,
            p,
            signals: s.signals,
            watch: s.watch,
            spin: p.spin(engine),
        };
        let o = match &mut source {
            Source::Conns(conns) => match conns.next() {
                Some(Conn::Tcp(sock)) => {
                    tcp::client_phase(engine, &sock, &cx, &mut bufs, &mut tally)
                }
                Some(Conn::Udp(sock)) => {
                    udp::client_phase(engine, sock, &cx, &mut bufs, &mut tally)
                }
                None => PhaseOut::failed(EngineError::Protocol(format!(
                    "no connection for phase {}",
                    phase.index
                ))),
            },
            Source::Crr(target) => crr::client_phase(engine, target, &cx, &mut bufs, &mut tally),
        };
        out.busy_poll = out.busy_poll.take().or(o.busy_poll);
        let result = with_pin(o.result, &pin_error).map_err(|e| s.watch.explain(e));
        let failed = result.is_err();
        let mut m = tally.into_measurement(phase, flow, result.err().map(|e| e.to_string()));
        SpinStats::record(o.spin, &mut m);
        if failed {
            out.measurements.push(m);
            s.signals.abort();
            break;
        }
        if let Ok(mut v) = s.ended.lock() {
            v.push(m.clone());
        }
        out.measurements.push(m);
        s.gate.update(|g| g.done += 1);
    }
    out.cpu = cpu::thread().saturating_sub(cpu0);
    // The flow's I/O objects recorded what they used as they were dropped.
    out.engine_use = crate::engines::take_use();
    out
}

/// Starts the client side of an rr test (`conns`) or a crr test (`crr`).
pub fn start_client(
    engine: EngineKind,
    conns: RrConns,
    crr: Option<CrrTarget>,
    params: RrParams,
) -> SideRun {
    let (tx, rx) = mpsc::channel();
    let watch = Arc::new(Watch::new(
        params.plan.flows as usize,
        &load_ids(&conns.load),
    ));
    let w = Arc::clone(&watch);
    spawn_side(engine.name(), move |signals| {
        run_client(engine, conns, crr, &params, signals, (&tx, &w))
    })
    .with_phases(rx)
    .with_transactions(move || watch.total())
}

fn run_client(
    engine: EngineKind,
    conns: RrConns,
    crr: Option<CrrTarget>,
    p: &RrParams,
    signals: &Arc<Signals>,
    (phases, watch): (&Sender<Vec<RrFlowMeasurement>>, &Watch),
) -> SideResults {
    let start = CpuStart::now();
    let gate = Gate::default();
    let ended = Mutex::new(Vec::new());
    let load_signals = Signals::default();
    let mut load_elapsed = Duration::ZERO;
    let RrConns { flows, load } = conns;
    let shared = Shared {
        p,
        signals,
        gate: &gate,
        watch,
        ended: &ended,
    };
    let mut flows = flows.into_iter();
    let flow_runs: Vec<_> = (0..p.plan.flows)
        .map(|f| {
            let source = match &crr {
                Some(target) => Source::Crr(target),
                None => Source::Conns(flows.next().unwrap_or_default().into_iter()),
            };
            let shared = &shared;
            move || with_engine!(engine, e => client_flow(e, f, source, shared))
        })
        .collect();
    let load_runs = load_runs(
        load,
        engine,
        p,
        (signals, watch),
        Some((&load_signals, &gate)),
    );
    let g = run_threads(signals, watch, flow_runs, load_runs, |dog| {
        load_elapsed = coordinate_side(p, signals, (&gate, &load_signals), (watch, dog), || {
            send_ended(&ended, phases);
        });
    });
    start.results(
        engine.name(),
        p.cpu_scope,
        g.threads_cpu,
        g.busiest,
        RrMeasurement {
            flows: g.flows,
            load: g.load,
            load_elapsed_ns: load_elapsed.as_nanos() as u64,
            busy_poll: g.busy_poll,
            engine_use: g.engine_use,
            spin: with_engine!(engine, e => p.spin(e)),
            clock: p.clock,
        },
    )
}

/// Passes on the flows' measurements of the phase that ended (every flow
/// has pushed its own), for `--json-lines`.
pub(super) fn send_ended(
    ended: &Mutex<Vec<RrFlowMeasurement>>,
    phases: &Sender<Vec<RrFlowMeasurement>>,
) {
    if let Ok(mut v) = ended.lock() {
        let _ = phases.send(std::mem::take(&mut *v));
    }
}

/// The client side's coordinator, on flow threads or event loops alike:
/// runs the phases ([`coordinate`]), then stops the load streams (or
/// aborts them with the side) and closes the gate. Returns how long the
/// load ran.
pub(super) fn coordinate_side(
    p: &RrParams,
    signals: &Signals,
    (gate, load_signals): (&Gate, &Signals),
    (watch, dog): (&Watch, &mut Watchdog),
    phase_ended: impl FnMut(),
) -> Duration {
    let started = coordinate(p, signals, gate, watch, dog, phase_ended);
    let elapsed = started.map_or(Duration::ZERO, |t| t.elapsed());
    load_signals.stop();
    if signals.aborted() {
        load_signals.abort();
    }
    gate.update(|s| s.closed = true);
    elapsed
}

/// Opens the phases one after the other, each when every flow finished
/// the one before; starts the load [`LOAD_WARMUP`] before the first loaded
/// phase; calls `phase_ended` as each phase ends on every flow. Returns
/// when the load started, if it did.
fn coordinate(
    p: &RrParams,
    signals: &Signals,
    gate: &Gate,
    watch: &Watch,
    dog: &mut Watchdog,
    mut phase_ended: impl FnMut(),
) -> Option<Instant> {
    let mut load_started: Option<Instant> = None;
    for phase in &p.plan.phases {
        // A test stopped early runs no load: its loaded phases end at once.
        if phase.loaded && load_started.is_none() && !signals.stopping() {
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
        let target = p.plan.flows * (phase.index + 1);
        if !gate.wait_ticking(signals, |s| s.done >= target, || dog.check(watch, signals)) {
            break;
        }
        phase_ended();
    }
    load_started
}
