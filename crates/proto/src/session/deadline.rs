//! When a data phase counts as stalled: the planned end plus grace, moved
//! on while the peer's data still arrives, within a cap.

use std::time::{Duration, Instant};

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
