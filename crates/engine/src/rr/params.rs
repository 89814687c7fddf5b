//! How one side runs a request/response test, its timing constants, and
//! a flow's buffers.

use std::time::Duration;

use linerate_proto::clock::ClockOffset;
use linerate_proto::measure::RrFlowMeasurement;
use linerate_proto::rr_core::{RrPlan, SpinMode};
use linerate_proto::spec::RrPhase;

use crate::cpu;
use crate::engines::Engine;
use crate::runner::CpuScope;
use crate::stream::Signals;
pub(super) use crate::wait::SpinStats;
use crate::EngineError;

use super::watch::Watch;

/// How long the load runs before the first loaded phase starts, so the
/// loaded figures see a load in its steady state rather than its ramp.
pub const LOAD_WARMUP: Duration = Duration::from_millis(250);
/// How often waiting threads look at the stop flags.
pub(super) const WAKE: Duration = Duration::from_millis(100);

/// How one side runs a request/response test.
#[derive(Debug, Clone)]
pub struct RrParams {
    /// What both sides agreed on (phases, flows, limits, numbering).
    pub plan: RrPlan,
    /// Pin flow `i` to `cpus[i % cpus.len()]` when not empty.
    pub cpus: Vec<usize>,
    pub cpu_scope: CpuScope,
    /// Client: the clock offset to the server, for one-way delays.
    pub clock: Option<ClockOffset>,
    /// Busy poll: how the flows spin, decided from the CPUs this process
    /// may run on (see [`crate::wait::side_spin_mode`]).
    pub spin_mode: SpinMode,
}

impl RrParams {
    pub fn new(
        plan: RrPlan,
        cpus: &[usize],
        cpu_scope: CpuScope,
        clock: Option<ClockOffset>,
    ) -> RrParams {
        RrParams {
            spin_mode: crate::wait::side_spin_mode(plan.flows, cpus),
            plan,
            cpus: cpus.to_vec(),
            cpu_scope,
            clock,
        }
    }

    /// How flows on `engine` spin; `None`: blocking sockets. They spin
    /// when the test asks (`--busy-poll`) or the engine always does
    /// ([`Engine::spins`]: `xdp` polls its rings).
    pub(super) fn spin(&self, engine: impl Engine) -> Option<SpinMode> {
        (self.plan.busy_poll || engine.spins()).then_some(self.spin_mode)
    }

    /// Pins the calling flow thread as asked; the error, if pinning failed.
    pub(super) fn pin(&self, flow: u32) -> Option<std::io::Error> {
        if self.cpus.is_empty() {
            return None;
        }
        cpu::pin_current_thread(self.cpus[flow as usize % self.cpus.len()]).err()
    }
}

/// A phase's result, failed if the flow could not be pinned (a pinned test
/// must not report figures from an unpinned run).
pub(super) fn with_pin(
    result: Result<(), EngineError>,
    pin_error: &Option<std::io::Error>,
) -> Result<(), EngineError> {
    match (result, pin_error) {
        (Ok(()), Some(e)) => Err(EngineError::Pin(e.to_string())),
        (r, _) => r,
    }
}

/// A flow's buffers, allocated once per flow.
pub(super) struct Buffers {
    pub(super) req: Vec<u8>,
    pub(super) resp: Vec<u8>,
}

impl Buffers {
    pub(super) fn new(p: &RrParams) -> Self {
        let (req, resp) = p.plan.max_sizes();
        Buffers {
            req: vec![0; req],
            resp: vec![0; resp],
        }
    }
}

/// What a flow's phase runs with.
pub(super) struct PhaseCtx<'a> {
    pub(super) phase: &'a RrPhase,
    pub(super) flow: u32,
    pub(super) p: &'a RrParams,
    pub(super) signals: &'a Signals,
    pub(super) watch: &'a Watch,
    /// Busy poll: how to spin; `None`: blocking.
    pub(super) spin: Option<SpinMode>,
}

/// How a phase ended on one flow.
pub(super) struct PhaseOut {
    pub(super) result: Result<(), EngineError>,
    /// Busy poll: what the kernel said to `SO_BUSY_POLL`.
    pub(super) busy_poll: Option<String>,
    /// Busy poll: what the connection's spinning came to.
    pub(super) spin: Option<SpinStats>,
}

impl SpinStats {
    /// Writes these into a flow's measurement.
    pub(super) fn record(spin: Option<SpinStats>, m: &mut RrFlowMeasurement) {
        m.poll_sleeps = spin.map(|s| s.sleeps);
        m.spin_yielded = spin.and_then(|s| s.demoted.then_some(true));
    }
}

impl PhaseOut {
    pub(super) fn failed(e: EngineError) -> Self {
        PhaseOut {
            result: Err(e),
            busy_poll: None,
            spin: None,
        }
    }
}
