//! Request/response bookkeeping without I/O: what a flow counts, when it
//! reads the clock, how it turns timestamps into one-way delays, and how
//! long a busy-polling wait spins before it sleeps.
//!
//! The engine's request/response loops (`linerate_engine::rr`) do the
//! syscalls and read `CLOCK_MONOTONIC`; every decision about those readings
//! is made here, with `now` passed in, so it is tested on a virtual clock:
//!
//! - [`RrPlan`]: one side's view of an rr/crr test (phases, flows, limits,
//!   connection numbering), taken from the spec once.
//! - [`PhaseClock`]: the phase's time or count budget, handed out as
//!   batches of K transactions timed by one clock pair.
//! - [`Tally`]: a client flow's counts and histograms for one phase.
//! - [`one_way`]: the two one-way delays of a transaction from four
//!   timestamps and the clock offset.
//! - [`SpinBudget`]: how long a busy-polling wait spins before it sleeps in
//!   `poll(2)`, adapted to whether spinning pays.

use std::time::Duration;

use linerate_stats::histogram::Histogram;

use crate::clock::ClockOffset;
use crate::measure::{OneWayMeasurement, RrFlowMeasurement};
use crate::spec::{RrConn, RrLimit, RrPhase, TestSpec};

/// One side's view of a request/response test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RrPlan {
    /// Every phase, in the order they run.
    pub phases: Vec<RrPhase>,
    /// Flows (concurrent transaction loops), at least 1.
    pub flows: u32,
    pub limit: RrLimit,
    /// Transactions per clock pair, at least 1.
    pub batch: u32,
    pub busy_poll: bool,
    /// Bulk load streams (rr only: crr opens no connections up front).
    pub load_streams: u32,
    /// Bytes per write of the load streams.
    pub load_len: u32,
    /// The client's pace: ns from one transaction's start to the next's,
    /// per flow (0: unpaced; [`RrSpec::rate`](crate::spec::RrSpec::rate)).
    pub gap_ns: u64,
}

impl TestSpec {
    /// The stream id (from 1) of flow `flow` in phase `phase`; the same
    /// numbering names a crr transaction's connection.
    pub fn rr_conn_id(&self, phase: u32, flow: u32) -> u32 {
        conn_id(self.per_direction(), phase, flow)
    }

    /// What connection `id` carries in a request/response test, if it is one.
    pub fn rr_conn(&self, id: u32) -> Option<RrConn> {
        self.rr_plan()?.conn(id)
    }

    /// The request/response plan, when this is an rr or crr spec.
    pub fn rr_plan(&self) -> Option<RrPlan> {
        let rr = self.rr.as_ref()?;
        Some(RrPlan {
            phases: rr.phases(),
            flows: self.per_direction(),
            limit: rr.limit,
            batch: rr.batch.max(1),
            busy_poll: rr.busy_poll,
            load_streams: if crate::test_type::of(self).load_streams {
                u32::from(rr.under_load)
            } else {
                0
            },
            load_len: self.len,
            gap_ns: rr.rate.map_or(0, |r| 1_000_000_000 / u64::from(r.max(1))),
        })
    }
}

/// The stream id (from 1) of flow `flow` in phase `phase` with `flows`
/// flows; the same numbering names a crr transaction's connection.
pub fn conn_id(flows: u32, phase: u32, flow: u32) -> u32 {
    phase * flows.max(1) + flow + 1
}

impl RrPlan {
    /// True when every transaction is timed on its own (not in batches).
    pub fn per_message(&self) -> bool {
        self.batch <= 1
    }

    /// The largest request and response of any phase.
    pub fn max_sizes(&self) -> (usize, usize) {
        let req = self.phases.iter().map(|p| p.request).max().unwrap_or(1);
        let resp = self.phases.iter().map(|p| p.response).max().unwrap_or(1);
        (req as usize, resp as usize)
    }

    /// The stream id of flow `flow` in phase `phase`.
    pub fn conn_id(&self, phase: u32, flow: u32) -> u32 {
        conn_id(self.flows, phase, flow)
    }

    /// What connection `id` carries, if it is part of this test: a
    /// connection per flow per phase, then the load streams.
    pub fn conn(&self, id: u32) -> Option<RrConn> {
        let flows = self.flows.max(1);
        let flow_conns = (self.phases.len() as u32).checked_mul(flows)?;
        let i = id.checked_sub(1)?;
        if i < flow_conns {
            return Some(RrConn::Flow {
                phase: i / flows,
                flow: i % flows,
            });
        }
        let load = i - flow_conns;
        (load < self.load_streams).then_some(RrConn::Load { index: load })
    }
}

// ---------------------------------------------------------------------------
// Batch timing
// ---------------------------------------------------------------------------

/// K back-to-back transactions timed by one pair of clock reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batch {
    /// When the batch started (the first request's send time), ns.
    pub t0: u64,
    /// Sequence number of its first transaction.
    pub first: u64,
    /// Transactions in it (at least 1).
    pub len: u64,
}

impl Batch {
    /// The batch's sequence numbers.
    pub fn sequences(&self) -> std::ops::Range<u64> {
        self.first..self.first + self.len
    }
}

/// A phase's budget (time or count), handed out batch by batch.
#[derive(Debug, Clone)]
pub struct PhaseClock {
    batch: u64,
    end_ns: u64,
    count: u64,
    next: u64,
    start_ns: u64,
    /// [`RrPlan::gap_ns`]: the pace (0: none).
    gap_ns: u64,
}

impl PhaseClock {
    /// A phase starting at `now` (ns), with `batch` transactions per clock
    /// pair (0 counts as 1).
    pub fn new(limit: RrLimit, batch: u32, now: u64) -> Self {
        let (end_ns, count) = match limit {
            RrLimit::TimeMs(t) => (now.saturating_add(t.saturating_mul(1_000_000)), u64::MAX),
            RrLimit::Count(n) => (u64::MAX, n),
        };
        PhaseClock {
            batch: u64::from(batch.max(1)),
            end_ns,
            count,
            next: 0,
            start_ns: now,
            gap_ns: 0,
        }
    }

    /// Paced at one transaction per `gap_ns` ([`RrPlan::gap_ns`]; 0: unpaced).
    pub fn paced(mut self, gap_ns: u64) -> Self {
        self.gap_ns = gap_ns;
        self
    }

    /// How long after `now` the next batch is due under the pace (never
    /// past the phase's time limit); `None` when it is due now. Late
    /// batches are not made up in a burst beyond the schedule's slots:
    /// a batch is due at the phase's start plus its first sequence's gaps.
    pub fn wait_ns(&self, now: u64) -> Option<u64> {
        if self.gap_ns == 0 {
            return None;
        }
        let due = self
            .start_ns
            .saturating_add(self.next.saturating_mul(self.gap_ns))
            .min(self.end_ns);
        (due > now).then(|| due - now)
    }

    /// The next batch, starting at `now`, or `None` when the phase's time
    /// is up or its count issued. A batch is never cut short by time: the
    /// time limit is checked only where a batch would start.
    pub fn next(&mut self, now: u64) -> Option<Batch> {
        if self.next >= self.count || now >= self.end_ns {
            return None;
        }
        let len = self.batch.min(self.count - self.next);
        let b = Batch {
            t0: now,
            first: self.next,
            len,
        };
        self.next += len;
        Some(b)
    }

    /// Sequence numbers handed out so far.
    pub fn issued(&self) -> u64 {
        self.next
    }
}

// ---------------------------------------------------------------------------
// One-way delays
// ---------------------------------------------------------------------------

pub use crate::rr::ServerTimes;

/// Client → server and server → client delays of one transaction, ns:
/// `sent`/`received` on the client's clock, the server's times moved to it
/// with `offset`. Negative only when the offset's error exceeds the delay.
/// Whatever the offset, the two add up to the round trip minus the server's
/// hold time.
pub fn one_way(offset: &ClockOffset, sent: u64, received: u64, server: ServerTimes) -> [i128; 2] {
    [
        offset.to_client(server.rx) - i128::from(sent),
        i128::from(received) - offset.to_client(server.tx),
    ]
}

// ---------------------------------------------------------------------------
// Tally
// ---------------------------------------------------------------------------

/// One direction's one-way histogram and its negative samples.
#[derive(Debug)]
struct OneWayHist {
    hist: Histogram,
    negative: u64,
}

impl OneWayHist {
    fn new() -> Self {
        OneWayHist {
            hist: Histogram::new(),
            negative: 0,
        }
    }

    fn record(&mut self, ns: i128) {
        match u64::try_from(ns) {
            Ok(v) => self.hist.record(v),
            Err(_) => self.negative += 1,
        }
    }

    fn into_measurement(self) -> OneWayMeasurement {
        OneWayMeasurement {
            histogram: self.hist.to_buckets(),
            negative: self.negative,
        }
    }
}

/// The batch being run.
#[derive(Debug, Clone, Copy)]
struct Open {
    batch: Batch,
    answered: u64,
    server: Option<ServerTimes>,
}

/// A client flow's counts and histograms for one phase.
///
/// Per batch: [`Tally::start`], then [`Tally::answered`] or
/// [`Tally::lost`] per transaction, then [`Tally::finish`] with the end
/// time. A batch with a loss in it is not timed (its span holds a
/// timeout); in a timed batch of K each transaction counts as the batch's
/// mean. One-way delays are recorded only per message (K = 1) with a clock
/// offset and server times.
#[derive(Debug)]
pub struct Tally {
    rtt: Histogram,
    /// Client → server, server → client; `None`: no one-way figures.
    one_way: Option<(ClockOffset, [OneWayHist; 2])>,
    transactions: u64,
    lost: u64,
    /// The flow's late responses ([`crate::rr_flow::RrClient::late`]).
    late: u64,
    first_ns: Option<u64>,
    last_ns: u64,
    open: Option<Open>,
}

impl Tally {
    /// A tally recording one-way delays with `offset` (`None`: round trips
    /// only).
    pub fn new(offset: Option<ClockOffset>) -> Self {
        Self::with_rtt(Histogram::new(), offset)
    }

    /// An event-loop flow's tally (`--flows`, thousands per thread): round
    /// trips only, in a [`Histogram::coarse`] for the flow's own
    /// percentiles; its loop keeps the full-precision histogram of all its
    /// flows ([`Self::finish_into`]).
    pub fn coarse() -> Self {
        Self::with_rtt(Histogram::coarse(), None)
    }

    fn with_rtt(rtt: Histogram, offset: Option<ClockOffset>) -> Self {
        Tally {
            rtt,
            one_way: offset.map(|o| (o, [OneWayHist::new(), OneWayHist::new()])),
            transactions: 0,
            lost: 0,
            late: 0,
            first_ns: None,
            last_ns: 0,
            open: None,
        }
    }

    /// A batch starts (an unfinished previous batch is dropped untimed).
    pub fn start(&mut self, batch: Batch) {
        self.first_ns.get_or_insert(batch.t0);
        self.open = Some(Open {
            batch,
            answered: 0,
            server: None,
        });
    }

    /// A transaction of the open batch was answered, with the server's
    /// times when the response carried them.
    pub fn answered(&mut self, server: Option<ServerTimes>) {
        self.transactions += 1;
        if let Some(o) = &mut self.open {
            o.answered += 1;
            o.server = server;
        }
    }

    /// A transaction of the open batch got no response.
    pub fn lost(&mut self) {
        self.lost += 1;
    }

    /// A transaction of the open batch ended as `t` says.
    pub fn record(&mut self, t: crate::rr_flow::Transaction) {
        match t {
            crate::rr_flow::Transaction::Answered(server) => self.answered(server),
            crate::rr_flow::Transaction::Lost => self.lost(),
        }
    }

    /// The open batch ended at `t1`. Returns true when it had an answer
    /// (the flow made progress).
    pub fn finish(&mut self, t1: u64) -> bool {
        self.finish_with(t1, None)
    }

    /// [`Self::finish`], recording the batch's round trips in `overall`
    /// too (an event loop's histogram of all its flows).
    pub fn finish_into(&mut self, t1: u64, overall: &mut Histogram) -> bool {
        self.finish_with(t1, Some(overall))
    }

    fn finish_with(&mut self, t1: u64, overall: Option<&mut Histogram>) -> bool {
        let Some(o) = self.open.take() else {
            return false;
        };
        if o.answered == 0 {
            return false;
        }
        self.last_ns = t1;
        let k = o.batch.len;
        if o.answered < k {
            return true;
        }
        let span = t1.saturating_sub(o.batch.t0);
        for h in std::iter::once(&mut self.rtt).chain(overall) {
            if k == 1 {
                h.record(span);
            } else {
                h.record_n(span / k, k);
            }
        }
        if let (Some((offset, [c2s, s2c])), Some(server), 1) = (&mut self.one_way, o.server, k) {
            let [up, down] = one_way(offset, o.batch.t0, t1, server);
            c2s.record(up);
            s2c.record(down);
        }
        true
    }

    /// Transactions answered so far.
    pub fn transactions(&self) -> u64 {
        self.transactions
    }

    /// Transactions lost so far.
    pub fn lost_count(&self) -> u64 {
        self.lost
    }

    /// The phase ended with `n` late responses dropped (its client core's
    /// [`crate::rr_flow::RrClient::late`]), for the measurement.
    pub fn set_late(&mut self, n: u64) {
        self.late = n;
    }

    /// The phase's measurement for flow `flow`.
    pub fn into_measurement(
        self,
        phase: &RrPhase,
        flow: u32,
        error: Option<String>,
    ) -> RrFlowMeasurement {
        let n = self.transactions;
        let (c2s, s2c) = match self.one_way {
            Some((_, [a, b])) => (Some(a.into_measurement()), Some(b.into_measurement())),
            None => (None, None),
        };
        RrFlowMeasurement {
            phase: phase.index,
            flow,
            transactions: n,
            bytes_sent: (n + self.lost) * u64::from(phase.request),
            bytes_received: n * u64::from(phase.response),
            elapsed_ns: self.first_ns.map_or(0, |f| self.last_ns.saturating_sub(f)),
            lost: self.lost,
            late: self.late,
            rtt: self.rtt.to_buckets(),
            client_to_server: c2s,
            server_to_client: s2c,
            error,
            ..RrFlowMeasurement::default()
        }
    }
}

// ---------------------------------------------------------------------------
// Spin budget
// ---------------------------------------------------------------------------

/// The shortest spin an adapted budget keeps.
pub const SPIN_MIN: Duration = Duration::from_micros(1);
/// Every this many waits (a power of two) a shared-CPU budget spins in full
/// again, to find out whether spinning has started to pay (the peer moved
/// to another CPU).
pub const SPIN_PROBE_EVERY: u32 = 64;

pub use crate::measure::SpinMode;

/// How a side's flows spin: [`SpinMode::Dedicated`] when the host's `cpus`
/// leave one for every spinning flow of both sides (`2 × flows`: the peer
/// may run on this host too) and, when this side was placed (`pinned`: the
/// distinct CPUs of `--cpus`, or a narrowed affinity mask), on at least
/// `flows` CPUs; otherwise [`SpinMode::Shared`].
pub fn spin_mode(cpus: u32, flows: u32, pinned: Option<u32>) -> SpinMode {
    let room = u64::from(cpus) >= 2 * u64::from(flows.max(1));
    if room && pinned.is_none_or(|p| p >= flows.max(1)) {
        SpinMode::Dedicated
    } else {
        SpinMode::Shared
    }
}

/// A busy-polling connection's spin budget.
///
/// Spinning only shortens a wait when the peer runs on another CPU; when
/// both ends spin on one CPU, the spinner keeps the peer from answering
/// until it gives up. In [`SpinMode::Shared`] a wait that outlasts its
/// budget halves the budget (down to [`SPIN_MIN`]) and a wait that ends
/// while spinning restores it in full; every [`SPIN_PROBE_EVERY`]th wait
/// spins the full budget. In [`SpinMode::Dedicated`] the budget stays
/// full, unless the CPU turns out to be shared after all (another process
/// runs there): [`SPIN_DEMOTE_SLEEPS`] sleeps within a window of
/// [`SPIN_PROBE_EVERY`] waits switch the connection to
/// [`SpinMode::Shared`] at once, and later windows without a sleep switch it back
/// (a burst of load, or the slow first waits of a phase, must not make it
/// yield for the rest of the phase): one clean window the first time,
/// twice as many after each demotion (up to [`SPIN_PROMOTE_MAX`]), so a
/// CPU that stays shared costs a few sleeps per doubling, not per window.
/// A wait that outlasts its budget sleeps (counted in
/// [`SpinBudget::sleeps`]).
#[derive(Debug, Clone)]
pub struct SpinBudget {
    mode: SpinMode,
    /// The mode it was given: only a dedicated budget changes mode.
    given: SpinMode,
    /// Demoted: consecutive windows without a sleep so far, and how many
    /// turn it dedicated again.
    clean_windows: u32,
    promote_after: u32,
    full_ns: u64,
    budget_ns: u64,
    /// This wait's budget and start, ns, while waiting.
    current: Option<(u64, u64)>,
    waits: u32,
    sleeps: u64,
    /// Sleeps in the current window of [`SPIN_PROBE_EVERY`] waits.
    window_sleeps: u32,
    demoted: bool,
}

/// Sleeps in one window of [`SPIN_PROBE_EVERY`] waits that show a
/// dedicated CPU is not (one in 16: spinning the whole budget then costs
/// more than it saves).
pub const SPIN_DEMOTE_SLEEPS: u32 = SPIN_PROBE_EVERY / 16;
/// The most clean windows a demoted budget waits for before it spins
/// without yielding again (1024 × 64 waits: seconds at loopback rates).
pub const SPIN_PROMOTE_MAX: u32 = 1024;

impl SpinBudget {
    pub fn new(mode: SpinMode, full: Duration) -> Self {
        let full_ns = u64::try_from(full.as_nanos()).unwrap_or(u64::MAX);
        SpinBudget {
            mode,
            given: mode,
            clean_windows: 0,
            promote_after: 1,
            full_ns,
            budget_ns: full_ns,
            current: None,
            waits: 0,
            sleeps: 0,
            window_sleeps: 0,
            demoted: false,
        }
    }

    /// True when a [`SpinMode::Dedicated`] budget found its CPU shared and
    /// switched to [`SpinMode::Shared`] (for a while, at least).
    pub fn demoted(&self) -> bool {
        self.demoted
    }

    pub fn mode(&self) -> SpinMode {
        self.mode
    }

    /// The budget the next wait starts with, ns.
    pub fn budget_ns(&self) -> u64 {
        self.budget_ns
    }

    /// Waits that outlasted their budget and slept.
    pub fn sleeps(&self) -> u64 {
        self.sleeps
    }

    /// A dedicated budget at the end of a window: when demoted (see
    /// [`SpinBudget::keep_spinning`]), promoted back after enough clean
    /// windows.
    fn window_ended(&mut self) {
        match self.mode {
            SpinMode::Dedicated => {}
            SpinMode::Shared if self.window_sleeps > 0 => self.clean_windows = 0,
            SpinMode::Shared => {
                self.clean_windows += 1;
                if self.clean_windows >= self.promote_after {
                    // The CPU is ours again (the next demotion waits longer).
                    self.mode = SpinMode::Dedicated;
                    self.budget_ns = self.full_ns;
                    self.promote_after = (self.promote_after * 2).min(SPIN_PROMOTE_MAX);
                }
            }
        }
    }

    /// At a check point of a wait at `now`: true to keep spinning, false to
    /// sleep until the socket is ready (the wait then ends; the next check
    /// point starts a new one).
    pub fn keep_spinning(&mut self, now: u64) -> bool {
        let (budget, since) = match self.current {
            Some(c) => c,
            None => {
                self.waits = self.waits.wrapping_add(1);
                // SPIN_PROBE_EVERY is a power of two: a mask picks every Nth.
                let b = if self.waits & (SPIN_PROBE_EVERY - 1) == 0 {
                    if self.given == SpinMode::Dedicated {
                        self.window_ended();
                    }
                    self.window_sleeps = 0;
                    self.full_ns
                } else {
                    self.budget_ns
                };
                self.current = Some((b, now));
                (b, now)
            }
        };
        if now.saturating_sub(since) < budget {
            return true;
        }
        if self.mode == SpinMode::Shared {
            let min = SPIN_MIN.as_nanos() as u64;
            self.budget_ns = (self.budget_ns / 2).max(min.min(self.full_ns));
        }
        self.current = None;
        self.sleeps += 1;
        self.window_sleeps = self.window_sleeps.saturating_add(1);
        // A dedicated budget stops at the window's SPIN_DEMOTE_SLEEPS-th
        // sleep, not at the window's end: on a CPU that stays shared every
        // wait may sleep, and a try at spinning without yielding then
        // costs a few sleeps, not a window of them.
        if self.mode == SpinMode::Dedicated && self.window_sleeps >= SPIN_DEMOTE_SLEEPS {
            self.mode = SpinMode::Shared;
            self.clean_windows = 0;
            self.demoted = true;
        }
        false
    }

    /// The wait ended with data. While spinning, spinning paid: the budget
    /// is restored in full.
    pub fn done(&mut self) {
        if self.current.take().is_some() {
            self.budget_ns = self.full_ns;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ClockMethod;
    use crate::spec::{RrSpec, TestKind};
    use proptest::prelude::*;

    const FULL: Duration = Duration::from_micros(50);

    fn phase(request: u32, response: u32) -> RrPhase {
        RrPhase {
            index: 0,
            request,
            response,
            loaded: false,
        }
    }

    fn offset(ns: i64) -> ClockOffset {
        ClockOffset {
            method: ClockMethod::Probes,
            offset_ns: ns,
            uncertainty_ns: 10,
            probes: 16,
            delay_ns: 20,
        }
    }

    #[test]
    fn count_limit_hands_out_exactly_the_count_in_batches() {
        let mut c = PhaseClock::new(RrLimit::Count(10), 4, 0);
        let lens: Vec<u64> = std::iter::from_fn(|| c.next(5).map(|b| b.len)).collect();
        assert_eq!(lens, [4, 4, 2]);
        assert_eq!(c.issued(), 10);
    }

    #[test]
    fn time_limit_stops_batches_starting_at_or_after_the_end() {
        let mut c = PhaseClock::new(RrLimit::TimeMs(1), 1, 1_000);
        assert!(c.next(1_000).is_some());
        assert!(c.next(1_000_999).is_some());
        assert!(c.next(1_001_000).is_none());
    }

    /// Issue 27: a paced phase (qualify's probes beside a load) hands out
    /// a transaction per gap from its start, never a catch-up burst past
    /// the schedule, and never waits past its time limit.
    #[test]
    fn issue_27_a_paced_phase_is_due_once_per_gap() {
        let spec = TestSpec {
            kind: TestKind::Rr,
            rr: Some(RrSpec {
                rate: Some(100),
                ..RrSpec::default()
            }),
            ..TestSpec::default()
        };
        let gap = spec.rr_plan().expect("rr").gap_ns;
        assert_eq!(gap, 10_000_000, "100/s: every 10 ms");
        let mut c = PhaseClock::new(RrLimit::TimeMs(25), 1, 1_000).paced(gap);
        assert_eq!(c.wait_ns(1_000), None, "the first is due at once");
        assert!(c.next(1_000).is_some());
        assert_eq!(c.wait_ns(1_000), Some(gap));
        assert_eq!(c.wait_ns(1_000 + gap), None);
        assert!(c.next(1_000 + gap).is_some());
        // Late (a stalled host): the next is due at once, then on schedule.
        assert_eq!(c.wait_ns(1_000 + 2 * gap + 4_000_000), None);
        assert!(c.next(1_000 + 2 * gap + 4_000_000).is_some());
        // The third gap ends past the 25 ms limit: wait only to the end.
        assert_eq!(c.wait_ns(1_000 + 2 * gap + 4_000_000), Some(1_000_000));
        assert!(c.next(1_000 + 25_000_000).is_none());
        // Unpaced: never a wait.
        let c = PhaseClock::new(RrLimit::Count(3), 1, 0);
        assert_eq!(c.wait_ns(0), None);
    }

    #[test]
    fn a_timed_transaction_records_its_round_trip_and_one_way_delays() {
        // Server clock 1000 ns ahead; 30 ns up, 10 ns hold, 20 ns down.
        let mut t = Tally::new(Some(offset(1_000)));
        let mut c = PhaseClock::new(RrLimit::Count(1), 1, 0);
        let b = c.next(100).expect("a batch");
        t.start(b);
        t.answered(Some(ServerTimes {
            rx: 1_130,
            tx: 1_140,
        }));
        assert!(t.finish(160));
        let m = t.into_measurement(&phase(64, 64), 3, None);
        assert_eq!((m.transactions, m.flow, m.bytes_sent), (1, 3, 64));
        assert_eq!(m.rtt, vec![(60, 1)]);
        assert_eq!(
            m.client_to_server.expect("one-way figures").histogram,
            vec![(30, 1)]
        );
        assert_eq!(
            m.server_to_client.expect("one-way figures").histogram,
            vec![(20, 1)]
        );
    }

    #[test]
    fn a_batch_records_its_mean_and_no_one_way_delays() {
        let mut t = Tally::new(Some(offset(0)));
        let mut c = PhaseClock::new(RrLimit::Count(4), 4, 0);
        let b = c.next(0).expect("a batch");
        t.start(b);
        for _ in b.sequences() {
            t.answered(Some(ServerTimes { rx: 1, tx: 2 }));
        }
        t.finish(400);
        let m = t.into_measurement(&phase(1, 1), 0, None);
        assert_eq!(m.rtt, vec![(100, 4)]);
        assert_eq!(
            m.client_to_server.expect("one-way figures").histogram,
            Vec::new()
        );
    }

    #[test]
    fn a_batch_with_a_loss_is_counted_but_not_timed() {
        let mut t = Tally::new(None);
        t.start(Batch {
            t0: 0,
            first: 0,
            len: 2,
        });
        t.answered(None);
        t.lost();
        assert!(t.finish(1_000_000_000));
        let m = t.into_measurement(&phase(10, 20), 0, None);
        assert_eq!(
            (m.transactions, m.lost, m.bytes_sent, m.bytes_received),
            (1, 1, 20, 20)
        );
        assert!(m.rtt.is_empty());
        assert_eq!(m.elapsed_ns, 1_000_000_000);
    }

    /// Late responses (counted by the client core, not the tally) reach
    /// the flow's measurement, apart from its lost ones.
    #[test]
    fn issue_26_late_responses_reach_the_measurement() {
        let mut t = Tally::new(None);
        t.start(Batch {
            t0: 0,
            first: 0,
            len: 2,
        });
        t.lost();
        t.answered(None);
        t.finish(1_000);
        t.set_late(1);
        let m = t.into_measurement(&phase(10, 20), 0, None);
        assert_eq!((m.transactions, m.lost, m.late), (1, 1, 1));
    }

    /// An event-loop flow's tally keeps a coarse histogram of its own and
    /// records the same round trips in its loop's precise one.
    #[test]
    fn issue_26_a_loop_tally_is_coarse_and_feeds_its_loops_histogram() {
        let (mut t, mut overall, mut fine) = (Tally::coarse(), Histogram::new(), Histogram::new());
        for (i, span) in [1_000_003u64, 2_345_678, 987_654_321]
            .into_iter()
            .enumerate()
        {
            let t0 = i as u64 * 10_000_000_000;
            t.start(Batch {
                t0,
                first: i as u64,
                len: 1,
            });
            t.answered(None);
            assert!(t.finish_into(t0 + span, &mut overall));
            fine.record(span);
        }
        assert_eq!(overall.to_buckets(), fine.to_buckets());
        let m = t.into_measurement(&phase(1, 1), 0, None);
        let own = Histogram::from_buckets(&m.rtt);
        assert_eq!(own.count(), 3);
        assert!(m.rtt.len() <= 3 && m.rtt != fine.to_buckets());
        assert!(own.summary().max_ns >= 987_654_321);
        assert!(own.summary().max_ns as f64 <= 987_654_321.0 * 1.0625);
    }

    #[test]
    fn negative_one_way_samples_are_counted_apart() {
        // The offset estimate is 100 ns off the truth: one direction comes
        // out negative.
        let mut t = Tally::new(Some(offset(1_100)));
        t.start(Batch {
            t0: 0,
            first: 0,
            len: 1,
        });
        t.answered(Some(ServerTimes {
            rx: 1_050,
            tx: 1_050,
        }));
        t.finish(100);
        let m = t.into_measurement(&phase(64, 64), 0, None);
        assert_eq!(m.client_to_server.expect("one-way figures").negative, 1);
        assert_eq!(
            m.server_to_client.expect("one-way figures").histogram,
            vec![(150, 1)]
        );
    }

    #[test]
    fn plan_numbering_agrees_with_the_spec() {
        let rr = RrSpec {
            sizes: vec![1, 64],
            under_load: 2,
            ..RrSpec::default()
        };
        let spec = TestSpec {
            kind: TestKind::Rr,
            streams: 3,
            rr: Some(rr),
            ..TestSpec::default()
        };
        let plan = spec.rr_plan().expect("an rr spec");
        for id in 0..20 {
            assert_eq!(plan.conn(id), spec.rr_conn(id), "id {id}");
        }
        assert_eq!(plan.conn_id(1, 2), spec.rr_conn_id(1, 2));
    }

    #[test]
    fn shared_budget_halves_when_waits_outlast_it_and_recovers_when_spinning_pays() {
        let mut s = SpinBudget::new(SpinMode::Shared, FULL);
        // Wait 1: spins 50 µs, then sleeps.
        assert!(s.keep_spinning(0));
        assert!(s.keep_spinning(49_999));
        assert!(!s.keep_spinning(50_000));
        assert_eq!((s.budget_ns(), s.sleeps()), (25_000, 1));
        // Wait 2 (the data came after the sleep: no restore).
        s.done();
        assert!(s.keep_spinning(100_000));
        assert!(!s.keep_spinning(125_000));
        assert_eq!(s.budget_ns(), 12_500);
        // Wait 3 ends while spinning: full budget again.
        assert!(s.keep_spinning(200_000));
        s.done();
        assert_eq!((s.budget_ns(), s.sleeps()), (50_000, 2));
    }

    #[test]
    fn shared_budget_floors_at_the_minimum_and_probes_every_64th_wait() {
        let mut s = SpinBudget::new(SpinMode::Shared, FULL);
        let mut now = 0;
        for _ in 0..(SPIN_PROBE_EVERY - 1) {
            while s.keep_spinning(now) {
                now += 100;
            }
        }
        assert_eq!(s.budget_ns(), SPIN_MIN.as_nanos() as u64);
        // The 64th wait spins the full 50 µs.
        let start = now;
        while s.keep_spinning(now) {
            now += 100;
        }
        assert_eq!(now - start, 50_000);
    }

    #[test]
    fn dedicated_budget_never_shrinks() {
        let mut s = SpinBudget::new(SpinMode::Dedicated, FULL);
        // Short of demotion (the window's 4th sleep), every wait spins the
        // whole budget.
        let n = u64::from(SPIN_DEMOTE_SLEEPS - 1);
        for w in 0..n {
            let t = w * 1_000_000;
            assert!(s.keep_spinning(t));
            assert!(!s.keep_spinning(t + 50_000));
        }
        assert_eq!((s.budget_ns(), s.sleeps()), (50_000, n));
        assert_eq!(s.mode(), SpinMode::Dedicated);
    }

    #[test]
    fn spinning_is_dedicated_only_with_a_cpu_per_spinner_on_each_side() {
        assert_eq!(spin_mode(2, 1, None), SpinMode::Dedicated);
        assert_eq!(spin_mode(1, 1, None), SpinMode::Shared);
        assert_eq!(spin_mode(4, 2, None), SpinMode::Dedicated);
        assert_eq!(spin_mode(3, 2, None), SpinMode::Shared);
        // Two flows pinned to one CPU share it, however many there are.
        assert_eq!(spin_mode(16, 2, Some(1)), SpinMode::Shared);
        assert_eq!(spin_mode(16, 2, Some(2)), SpinMode::Dedicated);
        // issue 8: one flow placed on one of two CPUs (`taskset`, or
        // `--cpus`) leaves the other to the peer.
        assert_eq!(spin_mode(2, 1, Some(1)), SpinMode::Dedicated);
    }

    #[test]
    fn a_dedicated_budget_that_keeps_sleeping_turns_shared() {
        let mut s = SpinBudget::new(SpinMode::Dedicated, FULL);
        let mut now = 0;
        // Every wait outlasts the budget: the CPU is not ours. The
        // window's 4th sleep demotes it, without waiting for the window.
        for w in 1..=SPIN_DEMOTE_SLEEPS {
            assert_eq!(s.mode(), SpinMode::Dedicated);
            while s.keep_spinning(now) {
                now += 1_000;
            }
            assert_eq!(s.demoted(), w == SPIN_DEMOTE_SLEEPS);
        }
        assert_eq!((s.mode(), s.budget_ns()), (SpinMode::Shared, 50_000));
        // From then on, the budget adapts.
        while s.keep_spinning(now) {
            now += 1_000;
        }
        assert_eq!(s.budget_ns(), 25_000);
    }

    #[test]
    fn issue_8_a_demoted_budget_turns_dedicated_again_after_a_window_without_sleeps() {
        let mut s = SpinBudget::new(SpinMode::Dedicated, FULL);
        let mut now = 0;
        // A burst: the first window's waits all sleep (as a phase's first
        // waits may, under load).
        for _ in 0..SPIN_PROBE_EVERY {
            while s.keep_spinning(now) {
                now += 1_000;
            }
        }
        assert_eq!(s.mode(), SpinMode::Shared);
        // Then every wait ends while spinning: one clean window, and the
        // connection spins without yielding again, its budget full.
        for _ in 0..2 * SPIN_PROBE_EVERY {
            assert!(s.keep_spinning(now));
            s.done();
            now += 1_000;
        }
        assert_eq!((s.mode(), s.budget_ns()), (SpinMode::Dedicated, 50_000));
        // It did yield for a while: the report says so.
        assert!(s.demoted());
        // Demoted again, it waits for two clean windows this time.
        let sleep_window = |s: &mut SpinBudget, now: &mut u64| {
            for _ in 0..SPIN_PROBE_EVERY {
                while s.keep_spinning(*now) {
                    *now += 1_000;
                }
            }
        };
        sleep_window(&mut s, &mut now);
        sleep_window(&mut s, &mut now);
        assert_eq!(s.mode(), SpinMode::Shared);
        let mut clean = |s: &mut SpinBudget, waits: u32| {
            for _ in 0..waits {
                assert!(s.keep_spinning(now));
                s.done();
                now += 1_000;
            }
        };
        clean(&mut s, 2 * SPIN_PROBE_EVERY);
        assert_eq!(s.mode(), SpinMode::Shared);
        clean(&mut s, SPIN_PROBE_EVERY);
        assert_eq!(s.mode(), SpinMode::Dedicated);
        // A budget given shared stays shared.
        let mut s = SpinBudget::new(SpinMode::Shared, FULL);
        for _ in 0..3 * SPIN_PROBE_EVERY {
            assert!(s.keep_spinning(now));
            s.done();
            now += 1_000;
        }
        assert_eq!((s.mode(), s.demoted()), (SpinMode::Shared, false));
    }

    #[test]
    fn a_dedicated_budget_with_rare_sleeps_stays_dedicated() {
        let mut s = SpinBudget::new(SpinMode::Dedicated, FULL);
        let mut now = 0;
        for w in 0..10 * SPIN_PROBE_EVERY {
            if w % 32 == 0 {
                while s.keep_spinning(now) {
                    now += 1_000;
                }
            } else {
                assert!(s.keep_spinning(now));
                s.done();
            }
            now += 1_000;
        }
        assert_eq!((s.mode(), s.demoted()), (SpinMode::Dedicated, false));
        assert_eq!(s.budget_ns(), 50_000);
    }

    proptest! {
        #[test]
        fn count_limit_sequences_are_contiguous_and_complete(
            count in 0u64..5_000, batch in 0u32..300, start in any::<u32>()
        ) {
            let mut c = PhaseClock::new(RrLimit::Count(count), batch, u64::from(start));
            let mut next = 0;
            while let Some(b) = c.next(u64::from(start)) {
                prop_assert_eq!(b.first, next);
                prop_assert!(b.len >= 1 && b.len <= u64::from(batch.max(1)));
                next += b.len;
            }
            prop_assert_eq!(next, count);
        }

        #[test]
        fn time_limit_never_starts_a_batch_after_the_end(
            ms in 0u64..10, steps in proptest::collection::vec(1u64..3_000_000, 1..40)
        ) {
            let mut c = PhaseClock::new(RrLimit::TimeMs(ms), 1, 0);
            let mut now = 0;
            for s in steps {
                let b = c.next(now);
                prop_assert_eq!(b.is_some(), now < ms * 1_000_000);
                now += s;
            }
        }

        #[test]
        fn one_way_delays_add_up_to_the_round_trip_minus_the_hold(
            off in -1_000_000_000i64..1_000_000_000, sent in 0u64..1 << 50,
            up in 0u64..1_000_000, hold in 0u64..1_000_000, down in 0u64..1_000_000,
            err in -1_000i64..1_000,
        ) {
            // The true offset `off`; the estimate is `err` off it.
            let rx = (i128::from(sent) + i128::from(up) + i128::from(off)) as u64;
            let server = ServerTimes { rx, tx: rx + hold };
            let received = sent + up + hold + down;
            let [a, b] = one_way(&offset(off + err), sent, received, server);
            prop_assert_eq!(a + b, i128::from(up + down));
            prop_assert_eq!(a, i128::from(up) - i128::from(err));
            prop_assert_eq!(b, i128::from(down) + i128::from(err));
        }

        #[test]
        fn tally_counts_every_transaction_once(
            outcomes in proptest::collection::vec(any::<bool>(), 0..200), batch in 1u32..8
        ) {
            let n = outcomes.len() as u64;
            let mut c = PhaseClock::new(RrLimit::Count(n), batch, 0);
            let mut t = Tally::new(None);
            let mut now = 0;
            let mut timed = 0;
            while let Some(b) = c.next(now) {
                t.start(b);
                let mut all = true;
                for s in b.sequences() {
                    if outcomes[s as usize] { t.answered(None) } else { all = false; t.lost() }
                }
                now += 1_000;
                t.finish(now);
                if all { timed += b.len; }
            }
            let answered = outcomes.iter().filter(|&&o| o).count() as u64;
            prop_assert_eq!(t.transactions(), answered);
            prop_assert_eq!(t.lost_count(), n - answered);
            let m = t.into_measurement(&phase(3, 5), 0, None);
            prop_assert_eq!(m.rtt.iter().map(|&(_, c)| c).sum::<u64>(), timed);
            prop_assert_eq!(m.bytes_sent, 3 * n);
            prop_assert_eq!(m.bytes_received, 5 * answered);
        }

        #[test]
        fn spinning_never_outlasts_the_full_budget_and_every_sleep_is_counted(
            gaps in proptest::collection::vec((1u64..20_000, any::<bool>()), 1..400),
            dedicated in any::<bool>(),
        ) {
            let mode = if dedicated { SpinMode::Dedicated } else { SpinMode::Shared };
            let mut s = SpinBudget::new(mode, FULL);
            let mut now = 0u64;
            let mut started: Option<u64> = None;
            let mut falses = 0;
            for (gap, data) in gaps {
                now += gap;
                if data {
                    s.done();
                    started = None;
                    continue;
                }
                let since = *started.get_or_insert(now);
                if s.keep_spinning(now) {
                    prop_assert!(now - since < 50_000);
                } else {
                    falses += 1;
                    started = None;
                }
                prop_assert!(s.budget_ns() >= SPIN_MIN.as_nanos() as u64);
                prop_assert!(s.budget_ns() <= 50_000);
                if s.mode() == SpinMode::Dedicated { prop_assert_eq!(s.budget_ns(), 50_000); }
                // Only a dedicated budget changes mode; shared now means it
                // was demoted.
                if s.mode() == SpinMode::Shared && dedicated { prop_assert!(s.demoted()); }
                if !dedicated { prop_assert!(!s.demoted() && s.mode() == SpinMode::Shared); }
            }
            prop_assert_eq!(s.sleeps(), falses);
        }
    }
}
