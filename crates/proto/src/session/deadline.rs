//! When a data phase counts as stalled: the planned end plus grace, moved
//! on while the peer's data still arrives, within a cap. And how long a
//! side whose streams ended waits for the peer's results: a fixed wait,
//! moved on while the peer is still heard, within a cap.

use std::time::{Duration, Instant};

use super::outcome::RESULTS_TIMEOUT;
use crate::spec::TestSpec;

/// Slack after the planned end of a time-limited data phase, and after the
/// peer's data last arrived, before a side whose streams have not finished
/// declares the test stalled (`DataDeadline`).
pub const STALL_GRACE: Duration = Duration::from_secs(10);

/// The most a data phase still receiving the peer's data may run past its
/// planned deadline (`DataDeadline`): what a sender queued before its
/// planned end may take long to cross a lossy bottleneck, but a peer
/// trickling data cannot hold a side for ever.
pub const DRAIN_CAP: Duration = Duration::from_secs(60);

/// A time-limited data phase's deadline: [`STALL_GRACE`] after its planned
/// end, and moved on while the peer's data still arrives
/// ([`Self::progressed`]), to at most [`DRAIN_CAP`] past that.
///
/// Issue 27: a sender stops at the planned end, but what it queued (a TCP
/// send buffer of at least the path's BDP, as RFC 6349 asks) still has to
/// cross the path. Through a bottleneck with a short queue, where TCP
/// crawls through losses (qualify's e2e router: 10 Mbit/s, a 3000-byte
/// tbf queue, about 160 kbit/s), a 2 s transfer's receiver read its last
/// byte 9–12 s after the start, and with probes beside it or a loaded
/// host, past the fixed deadline: "timed out while waiting for the data
/// streams to finish" for a test whose data was still moving. A stall is
/// a phase on which nothing arrives, so that is what the deadline counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DataDeadline {
    at: Instant,
    latest: Instant,
}

impl DataDeadline {
    /// The deadline of `spec`'s data phase started at `started`; none
    /// without a planned end.
    pub(crate) fn new(spec: &TestSpec, started: Instant) -> Option<Self> {
        let at = started + Duration::from_millis(spec.data_phase_ms()?) + STALL_GRACE;
        Some(DataDeadline {
            at,
            latest: at + DRAIN_CAP,
        })
    }

    /// Moved on to `cap` at most (a server's `--max-time`), though never
    /// before the planned deadline.
    pub(crate) fn capped(mut self, cap: Instant) -> Self {
        self.latest = self.latest.min(cap.max(self.at));
        self
    }

    pub(crate) fn at(&self) -> Instant {
        self.at
    }

    /// The peer's data arrived at `now`: the phase is not stalled until
    /// [`STALL_GRACE`] after it (within the cap). Returns the deadline.
    pub(crate) fn progressed(&mut self, now: Instant) -> Instant {
        self.at = self.at.max((now + STALL_GRACE).min(self.latest));
        self.at
    }
}

/// The most a side whose streams ended waits for the peer's results
/// (the session's results wait): as long as the peer's own data phase may run past
/// its planned end ([`STALL_GRACE`] + [`DRAIN_CAP`]), then
/// [`RESULTS_TIMEOUT`] for its results to come.
pub const RESULTS_CAP: Duration =
    Duration::from_secs(STALL_GRACE.as_secs() + DRAIN_CAP.as_secs() + RESULTS_TIMEOUT.as_secs());

/// The wait for the peer's results once this side's streams ended:
/// [`RESULTS_TIMEOUT`] (plus the heartbeat's recovery allowance) after
/// that end, moved on to [`RESULTS_TIMEOUT`] after each sign of the peer
/// ([`Self::heard`]: its control frames and heartbeats, its data), to at
/// most [`RESULTS_CAP`] after that end.
///
/// Issue 26: the side that stops first (a sender) waits while the peer's
/// receivers drain what was queued before the end. With 1,000 flows,
/// each with an autotuned send buffer, that backlog took longer than a
/// fixed 15 s through a congested path (retransmissions after losses),
/// and an honest test failed "waiting for the server's results". A peer
/// still heard is alive, and its own data phase ends by its progress
/// rule ([`DataDeadline`]: [`STALL_GRACE`] after its data last arrived,
/// within [`DRAIN_CAP`]), after which it reports or aborts; so waiting
/// while it is heard waits for the work, and a vanished peer still ends
/// the wait [`RESULTS_TIMEOUT`] after it was last heard (sooner by the
/// heartbeat's silence limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ResultsWait {
    at: Instant,
    latest: Instant,
}

impl ResultsWait {
    /// The wait of a side whose streams ended at `now`; `recovery`: the
    /// heartbeat's allowance for a control connection the streams starved.
    pub(crate) fn new(now: Instant, recovery: Duration) -> Self {
        let at = now + RESULTS_TIMEOUT + recovery;
        ResultsWait {
            at,
            latest: at.max(now + RESULTS_CAP),
        }
    }

    pub(crate) fn at(&self) -> Instant {
        self.at
    }

    /// The peer was heard at `now`: the wait lasts [`RESULTS_TIMEOUT`]
    /// from it (within the cap). Returns the deadline.
    pub(crate) fn heard(&mut self, now: Instant) -> Instant {
        self.at = self.at.max((now + RESULTS_TIMEOUT).min(self.latest));
        self.at
    }
}
