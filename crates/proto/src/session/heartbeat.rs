//! Control-connection liveness while a test runs (issue 10: a reverse
//! sender stops within a second of its peer's control connection or path
//! going away).
//!
//! A peer whose host vanishes (its namespace deleted, its link down) or
//! whose process is frozen sends no FIN or RST: without this, a side only
//! notices at its data-phase deadline, and a server sending a reverse test
//! floods a path nobody reads until the planned end. TCP keepalive cannot
//! tell a frozen process (its kernel still answers), and a sending side
//! sees no error while its data fits the socket buffers.
//!
//! So, when both sides offered it in the handshake (`Hello.heartbeat_ms`,
//! echoed in `Accept.heartbeat_ms`; an older peer offers nothing and gets
//! none), each side sends an empty `Heartbeat` frame every agreed interval
//! while its session is `Running`, and gives up when no control bytes at
//! all (heartbeats, results, anything) arrived for [`SILENCE_INTERVALS`]
//! intervals: it aborts the test, which stops its senders. All of it runs
//! on the `now` the I/O layer passes in, so it is tested on the simulated
//! clock (`tests/sim.rs`).

use std::time::{Duration, Instant};

/// The interval a side offers and uses: four beats fit the one second the
/// issue allows, so one late beat (a loaded host) does not end a test.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_millis(250);
/// Intervals of silence after which the peer is taken to be gone.
pub const SILENCE_INTERVALS: u32 = 4;
/// The agreed interval must lie in this range (ms); the client refuses an
/// Accept outside it, as it refuses other absurd values.
pub const HEARTBEAT_MS_RANGE: std::ops::RangeInclusive<u32> = 50..=5000;

/// The agreed interval: the longer of the two offers, so neither side
/// beats more often than it said it would.
pub(crate) fn agree(client_ms: u32, server: Duration) -> u32 {
    let server_ms = u32::try_from(server.as_millis()).unwrap_or(u32::MAX);
    client_ms
        .max(server_ms)
        .clamp(*HEARTBEAT_MS_RANGE.start(), *HEARTBEAT_MS_RANGE.end())
}

/// One side's heartbeat state while its test runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Heartbeat {
    interval: Duration,
    next_beat: Instant,
    last_heard: Instant,
}

impl Heartbeat {
    /// Starts at `now` (the side entered `Running`): the peer counts as
    /// heard now, the first beat is due at once.
    pub(crate) fn new(interval_ms: u32, now: Instant) -> Self {
        Heartbeat {
            interval: Duration::from_millis(u64::from(interval_ms)),
            next_beat: now,
            last_heard: now,
        }
    }

    /// Control bytes arrived at `now`.
    pub(crate) fn heard(&mut self, now: Instant) {
        self.last_heard = self.last_heard.max(now);
    }

    /// How long a silent peer is given.
    pub(crate) fn silence_limit(&self) -> Duration {
        self.interval * SILENCE_INTERVALS
    }

    /// True when nothing arrived for [`Self::silence_limit`].
    pub(crate) fn peer_silent(&self, now: Instant) -> bool {
        now >= self.last_heard + self.silence_limit()
    }

    /// True when a beat is due at `now` (and counts it as sent).
    pub(crate) fn beat_due(&mut self, now: Instant) -> bool {
        if now < self.next_beat {
            return false;
        }
        // From now, not from the missed time: a side that was late does
        // not send a burst of beats to catch up.
        self.next_beat = now + self.interval;
        true
    }

    /// The next instant the session needs a call: a beat or the silence
    /// limit, whichever is first.
    pub(crate) fn next(&self) -> Instant {
        self.next_beat.min(self.last_heard + self.silence_limit())
    }
}

/// The reason a side gives when its peer fell silent, in words.
pub(crate) fn silence_reason(hb: &Heartbeat, peer: &str) -> String {
    format!(
        "no control bytes from the {peer} for {} ms (heartbeats every {} ms): the {peer}, or the path to it, is gone",
        hb.silence_limit().as_millis(),
        hb.interval.as_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue_10_beats_every_interval_and_gives_up_after_four_silent_ones() {
        let t = Instant::now();
        let ms = |n: u64| t + Duration::from_millis(n);
        let mut hb = Heartbeat::new(250, t);
        assert!(hb.beat_due(t), "the first beat leaves at once");
        assert!(!hb.beat_due(ms(249)));
        assert!(hb.beat_due(ms(300)));
        assert!(!hb.beat_due(ms(549)), "the next counts from the late one");
        assert!(hb.beat_due(ms(550)));
        assert_eq!(hb.next(), ms(800));
        hb.heard(ms(600));
        assert!(!hb.peer_silent(ms(1599)));
        assert!(hb.peer_silent(ms(1600)));
        hb.heard(ms(100));
        assert!(hb.peer_silent(ms(1600)), "an earlier time does not rewind");
    }

    #[test]
    fn issue_10_the_agreed_interval_is_the_longer_offer_within_range() {
        assert_eq!(agree(250, Duration::from_millis(250)), 250);
        assert_eq!(agree(100, Duration::from_millis(250)), 250);
        assert_eq!(agree(400, Duration::from_millis(250)), 400);
        assert_eq!(agree(1, Duration::from_millis(1)), 50);
        assert_eq!(agree(u32::MAX, Duration::from_millis(250)), 5000);
    }
}
