//! What every event-loop rr flow shares, whatever moves its bytes (TCP
//! rr and crr in `loops`, UDP rr in `udp_loops`): the side's context and
//! role; a client flow's transactions — its [`RrClient`] core, its
//! [`Tally`] and [`PhaseClock`], the open batch, its measurement — and a
//! server flow's measurement. The loops only move the bytes; what is
//! counted, and when the clock is read, is decided here, as
//! [`super::exchange::run_phase`] decides it on a flow thread. Every rr
//! flow is a flow to either loop ([`Flow`], here, once) and an epoll
//! loop's ([`LoopFlow`]) through its [`RrFlow`] interface, as it is a
//! ring's (`ring_loops`).

use std::ops::Range;
use std::os::fd::BorrowedFd;

use linerate_proto::measure::RrFlowMeasurement;
use linerate_proto::rr::RequestRepr;
use linerate_proto::rr_core::{PhaseClock, Tally};
use linerate_proto::rr_flow::{RrClient, Transaction};
use linerate_proto::spec::{RrLimit, RrPhase};
use linerate_stats::histogram::Histogram;

use crate::clock::mono_ns;
use crate::event_loop::{Flow, LoopFlow, Turn, WATCH_ALL};
use crate::stream::Signals;
use crate::EngineError;
use rustix::event::epoll::EventFlags;
use std::time::Duration;

use super::crr::CrrTarget;
use super::params::RrParams;
use super::watch::Watch;

/// What every rr and crr loop flow is, whatever moves its bytes (TCP or
/// UDP) and whichever side it serves: the loops (epoll, io_uring) drive
/// all four kinds of flows through this one interface.
pub(crate) trait RrFlow {
    /// What the loop lends every call (its transport's).
    type Cx;
    /// What the loop's flows share: a client loop's round trips at full
    /// precision; nothing for a server's.
    type Shared;
    /// What moves the flow's bytes.
    type Io;
    /// The flow's transport.
    fn transport(&mut self) -> &mut Self::Io;
    /// The message buffers its sends read from.
    fn messages(&mut self) -> &mut [Vec<u8>];
    /// Its socket now; `None` while it has none (a crr flow between
    /// connections).
    fn fd(&self) -> Option<BorrowedFd<'_>>;
    /// As [`LoopFlow::interest`].
    fn interest(&self) -> EventFlags {
        WATCH_ALL
    }
    /// As [`LoopFlow::woke`].
    fn woke(&mut self, _events: EventFlags) {}
    /// The flow's steps for one turn.
    fn steps(&mut self, cx: &mut Self::Cx, sh: &mut Self::Shared) -> Result<Turn, EngineError>;
    /// True once the flow has ended.
    fn is_done(&self) -> bool;
    /// The user stopped the test (a client: the phase ends after the
    /// open batch).
    fn end_after_batch(&mut self) {}
    /// The flow ends with `e`.
    fn give_up(&mut self, e: EngineError);
    /// Transactions answered (a server: responses sent) so far.
    fn answered(&self) -> u64;

    /// The flow's turn: its steps, or its end on an error.
    fn go(&mut self, cx: &mut Self::Cx, sh: &mut Self::Shared) -> Turn {
        match self.steps(cx, sh) {
            Ok(t) => t,
            Err(e) => {
                self.give_up(e);
                Turn::Done
            }
        }
    }
}

/// Every rr and crr flow, to either loop (epoll's, and the ring's in
/// `ring_loops`): its end, the loop giving up on it, its transactions.
impl<F: RrFlow> Flow for F {
    fn ended(&self) -> bool {
        self.is_done()
    }

    fn fail(&mut self, e: EngineError) {
        self.give_up(e);
    }

    fn progress(&self) -> u64 {
        self.answered()
    }
}

/// Every rr and crr flow on an epoll loop: TCP or UDP, client or server.
/// What the loop's flows share is the transport's (`Cx`: a UDP loop's
/// receive buffer) and the flows' (`Shared`: a client loop's round trips).
impl<F: RrFlow> LoopFlow for F {
    type Shared = (F::Cx, <F as RrFlow>::Shared);

    fn sock(&self) -> Option<BorrowedFd<'_>> {
        self.fd()
    }

    fn interest(&self) -> EventFlags {
        RrFlow::interest(self)
    }

    fn woke(&mut self, events: EventFlags) {
        RrFlow::woke(self, events);
    }

    fn turn(&mut self, (cx, sh): &mut Self::Shared) -> Turn {
        self.go(cx, sh)
    }

    /// The user stopped the test: a client's phase ends after the open
    /// batch; a server's flow ends with its client's.
    fn stop(&mut self, _: &mut Self::Shared) -> bool {
        self.end_after_batch();
        false
    }
}

/// Which side a loop serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    Client,
    Server,
}

/// What every loop of a side shares in a phase.
pub(super) struct LoopCtx<'a> {
    pub(super) p: &'a RrParams,
    pub(super) phase: &'a RrPhase,
    pub(super) signals: &'a Signals,
    pub(super) watch: &'a Watch,
    /// crr: where each transaction connects.
    pub(super) crr: Option<&'a CrrTarget>,
}

/// The measurement of a flow that could not start, saying `why`.
pub(super) fn failed(phase: &RrPhase, flow: u32, why: &str) -> RrFlowMeasurement {
    RrFlowMeasurement {
        phase: phase.index,
        flow,
        error: Some(why.into()),
        ..RrFlowMeasurement::default()
    }
}

/// A client flow's transactions in one phase.
pub(super) struct Transactions<'a> {
    pub(super) flow: u32,
    /// Writes the requests' headers and judges the responses.
    pub(super) core: RrClient,
    tally: Tally,
    /// The phase's budget, from the flow's first request (as a flow
    /// thread starts its clock when it starts the phase).
    clock: Option<PhaseClock>,
    limit: RrLimit,
    batch: u32,
    /// [`linerate_proto::rr_core::RrPlan::gap_ns`]: the pace (0: none).
    gap_ns: u64,
    /// The open batch's sequence numbers not yet ended, and its start.
    seqs: Range<u64>,
    t0: u64,
    batch_open: bool,
    /// The user stopped the test: the phase ends after the open batch.
    pub(super) stopping: bool,
    per_message: bool,
    watch: &'a Watch,
}

impl<'a> Transactions<'a> {
    /// Flow `flow`'s transactions of `phase`; `timeout_ns`: how long a
    /// response may take over an unreliable transport (`None`: reliable).
    pub(super) fn new(
        flow: u32,
        phase: &RrPhase,
        p: &RrParams,
        watch: &'a Watch,
        timeout_ns: Option<u64>,
    ) -> Self {
        Transactions {
            flow,
            core: RrClient::new(flow, phase.response as usize, timeout_ns),
            // Round trips only, coarse: one-way delays would add two
            // histograms per flow (the report says why they are absent).
            tally: Tally::coarse(),
            clock: None,
            limit: p.plan.limit,
            batch: p.plan.batch,
            gap_ns: p.plan.gap_ns,
            seqs: 0..0,
            t0: 0,
            batch_open: false,
            stopping: false,
            per_message: p.plan.per_message(),
            watch,
        }
    }

    /// Writes the next request into `req`: the next sequence number of
    /// the open batch, or of a new one; false when the phase is over.
    pub(super) fn next_request(&mut self, req: &mut [u8]) -> bool {
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
            flow: self.flow,
            sequence: self.seqs.start,
            sent_ns: self.per_message.then_some(self.t0),
        };
        self.core.request(&header, req);
        true
    }

    /// Paced: how long until the next batch is due (none while a batch is
    /// open, before the first, or once stopping ends the phase).
    pub(super) fn pace_wait(&self) -> Option<Duration> {
        if self.gap_ns == 0 {
            return None;
        }
        match &self.clock {
            Some(c) if self.seqs.is_empty() && !self.stopping => {
                c.wait_ns(mono_ns()).map(Duration::from_nanos)
            }
            _ => None,
        }
    }

    /// A transaction ended (answered or lost): counted, and a finished
    /// batch's round trips go to `overall` too (the loop's histogram),
    /// timed now.
    pub(super) fn complete(&mut self, t: Transaction, overall: &mut Histogram) {
        self.tally.record(t);
        self.seqs.start += 1;
        if self.seqs.is_empty() && self.batch_open {
            self.batch_open = false;
            if self.tally.finish_into(mono_ns(), overall) {
                self.watch.tick(self.flow);
            }
        }
    }

    /// Transactions answered so far.
    pub(super) fn answered(&self) -> u64 {
        self.tally.transactions()
    }

    /// The flow's measurement of `phase`.
    pub(super) fn measurement(
        mut self,
        phase: &RrPhase,
        error: Option<String>,
    ) -> RrFlowMeasurement {
        self.tally.set_late(self.core.late());
        self.tally.into_measurement(phase, self.flow, error)
    }
}

/// A server flow's measurement of `phase`: `answered` responses sent,
/// from its first request for `elapsed_ns`.
pub(super) fn served(
    phase: &RrPhase,
    flow: u32,
    answered: u64,
    elapsed_ns: u64,
    error: Option<String>,
) -> RrFlowMeasurement {
    RrFlowMeasurement {
        phase: phase.index,
        flow,
        transactions: answered,
        bytes_sent: answered * u64::from(phase.response),
        bytes_received: answered * u64::from(phase.request),
        elapsed_ns,
        error,
        ..RrFlowMeasurement::default()
    }
}

/// A client loop's flows ended: the loop's full-precision round trips
/// (`overall`) go on its first flow's measurement, for the phase's
/// percentiles (each flow's own histogram is coarse).
pub(super) fn with_loop_rtt(flows: &mut [RrFlowMeasurement], overall: &Histogram) {
    if let Some(m) = flows.first_mut() {
        m.loop_rtt = overall.to_buckets();
    }
}
