//! One side's threads and results: the flow and load threads run under a
//! coordinator that watches them, then their measurements, CPU time and
//! busy-poll notes are gathered into the side's [`SideResults`].

use std::time::Instant;

use linerate_proto::measure::{
    CpuMeasurement, EngineUse, RrFlowMeasurement, RrMeasurement, SideResults, StreamMeasurement,
};

use crate::cpu::{self, CpuTime};
use crate::runner::CpuScope;
use crate::stream::Signals;

use super::params::WAKE;
use super::watch::{Watch, Watchdog};

/// What a flow thread returns.
#[derive(Debug, Default)]
pub(super) struct FlowEnd {
    pub(super) measurements: Vec<RrFlowMeasurement>,
    pub(super) cpu: CpuTime,
    /// Busy poll: what the kernel said to `SO_BUSY_POLL`.
    pub(super) busy_poll: Option<String>,
    /// What the engine's I/O objects on this flow's thread used.
    pub(super) engine_use: Option<EngineUse>,
    /// The thread's name in the report when it is not one flow's (an
    /// event loop's: `event loop N (K flows)`, as stream loops say).
    pub(super) label: Option<String>,
}

/// What a load stream's thread returns.
pub(super) type LoadEnd = (StreamMeasurement, CpuTime);

/// CPU clocks at the start of a side.
pub(super) struct CpuStart {
    process: CpuTime,
    this_thread: CpuTime,
    host: Option<cpu::HostSnapshot>,
    wall: Instant,
}

impl CpuStart {
    pub(super) fn now() -> Self {
        CpuStart {
            process: cpu::process(),
            this_thread: cpu::thread(),
            host: cpu::host(),
            wall: Instant::now(),
        }
    }

    /// The side's results: `rr` with the CPU this side used (the process,
    /// or this thread plus `threads_cpu`, by `scope`) and its busiest
    /// thread (name, CPU time in ns) over the side's wall time.
    pub(super) fn results(
        self,
        engine: &str,
        scope: CpuScope,
        threads_cpu: CpuTime,
        busiest: Option<(String, u64)>,
        rr: RrMeasurement,
    ) -> SideResults {
        let (scope, used) = match scope {
            CpuScope::Process => ("process", cpu::process().saturating_sub(self.process)),
            CpuScope::Threads => (
                "threads",
                threads_cpu + cpu::thread().saturating_sub(self.this_thread),
            ),
        };
        SideResults {
            engine: engine.into(),
            cpu: CpuMeasurement {
                scope: scope.into(),
                user_ns: used.user.as_nanos() as u64,
                system_ns: used.system.as_nanos() as u64,
                wall_ns: self.wall.elapsed().as_nanos() as u64,
                host: self
                    .host
                    .zip(cpu::host())
                    .map(|(a, b)| cpu::host_delta(a, b, used.user + used.system)),
                busiest_thread_ns: busiest.as_ref().map(|b| b.1),
                busiest_thread: busiest.map(|b| b.0),
            },
            rr: Some(rr),
            ..SideResults::default()
        }
    }
}

/// Everything a side's threads measured, gathered.
#[derive(Debug, Default)]
pub(super) struct Gathered {
    /// Sorted by (phase, flow).
    pub(super) flows: Vec<RrFlowMeasurement>,
    pub(super) load: Vec<StreamMeasurement>,
    pub(super) threads_cpu: CpuTime,
    pub(super) busy_poll: Option<String>,
    /// What the flows' engine used, merged.
    pub(super) engine_use: Option<EngineUse>,
    /// The flow or load thread that used the most CPU (its own clock:
    /// `getrusage(RUSAGE_THREAD)`), and its time, ns.
    pub(super) busiest: Option<(String, u64)>,
}

/// Runs `flows` and `loads` on threads of their own, then `coordinate` on
/// this thread (given the watchdog to check while it waits); then waits
/// for the flows, still checking the watchdog, and joins everything. A
/// thread that cannot be started aborts the side.
pub(super) fn run_threads<F, L>(
    signals: &Signals,
    watch: &Watch,
    flows: Vec<F>,
    loads: Vec<(u32, L)>,
    coordinate: impl FnOnce(&mut Watchdog),
) -> Gathered
where
    F: FnOnce() -> FlowEnd + Send,
    L: FnOnce() -> LoadEnd + Send,
{
    let load_ids: Vec<u32> = loads.iter().map(|(id, _)| *id).collect();
    let (ends, load_ends) = std::thread::scope(|scope| {
        let flow_handles: Vec<_> = flows
            .into_iter()
            .enumerate()
            .map(|(f, run)| {
                std::thread::Builder::new()
                    .name(format!("linerate-rr-{f}"))
                    .spawn_scoped(scope, run)
            })
            .collect();
        let load_handles: Vec<_> = loads
            .into_iter()
            .map(|(id, run)| {
                std::thread::Builder::new()
                    .name(format!("linerate-load-{id}"))
                    .spawn_scoped(scope, run)
            })
            .collect();
        if flow_handles.iter().any(Result::is_err) || load_handles.iter().any(Result::is_err) {
            signals.abort();
        }
        let mut dog = Watchdog::new();
        coordinate(&mut dog);
        while !flow_handles
            .iter()
            .all(|h| h.as_ref().map_or(true, |h| h.is_finished()))
        {
            std::thread::sleep(WAKE);
            dog.check(watch, signals);
        }
        let ends: Vec<(usize, FlowEnd)> = flow_handles
            .into_iter()
            .enumerate()
            .filter_map(|(f, h)| Some((f, h.ok()?.join().ok()?)))
            .collect();
        let loads: Vec<(u32, LoadEnd)> = load_ids
            .into_iter()
            .zip(load_handles)
            .filter_map(|(id, h)| Some((id, h.ok()?.join().ok()?)))
            .collect();
        (ends, loads)
    });
    let mut out = Gathered::default();
    let mut busiest = |name: &dyn Fn() -> String, c: CpuTime| {
        let ns = (c.user + c.system).as_nanos() as u64;
        if out.busiest.as_ref().is_none_or(|b| ns > b.1) {
            out.busiest = Some((name(), ns));
        }
    };
    for (f, e) in &ends {
        busiest(
            &|| e.label.clone().unwrap_or_else(|| format!("flow {f}")),
            e.cpu,
        );
    }
    for (id, (_, c)) in &load_ends {
        busiest(&|| format!("load stream {id}"), *c);
    }
    for (_, e) in ends {
        out.threads_cpu = out.threads_cpu + e.cpu;
        out.busy_poll = out.busy_poll.or(e.busy_poll);
        if let Some(u) = e.engine_use {
            crate::engines::merge_use(&mut out.engine_use, u);
        }
        out.flows.extend(e.measurements);
    }
    for (_, (m, c)) in load_ends {
        out.threads_cpu = out.threads_cpu + c;
        out.load.push(m);
    }
    out.flows.sort_by_key(|m| (m.phase, m.flow));
    out
}
