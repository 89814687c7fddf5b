//! Control-connection liveness while a test runs (issue 10: a reverse
//! sender stops soon after its peer's control connection or path goes
//! away; issue 28: but not because a loaded host left a side unscheduled).
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
//! all (heartbeats, results, anything) arrived for its silence limit:
//! [`SILENCE_INTERVALS`] agreed intervals, and never less than
//! [`SILENCE_FLOOR`]. It aborts the test, which stops its senders.
//!
//! Silence is counted only while this side itself runs. The session is
//! called at least once per interval (its `Heartbeat::next`); a longer
//! gap between two calls is time this side was descheduled, stopped or
//! suspended, when it could not have read the peer's beats either, so the
//! gap beyond one interval is not held against the peer.
//!
//! A test's own traffic can also silence the control connection: a
//! stream that outruns a slower link (an unpaced UDP stream through a
//! 10 Mbit/s router, issue 27's qualify capacity trial) fills the queue
//! the control connection shares, so its segments and acknowledgements
//! are dropped, and TCP backs its retransmissions off, each wait twice
//! the last (RFC 6298 §5.5; Linux up to 120 s). When this side's streams
//! end, the path clears, but the next retransmission may come about as
//! long after as the starvation lasted. So at that point the peer's
//! silence is counted afresh, and it is given the limit plus as long as
//! the streams ran (at most [`RECOVERY_CAP`]); while streams run, the
//! limit stays short, as a reverse sender must stop soon after its peer
//! goes (issue 10). Data from the peer, which the I/O layer reports as
//! it arrives (`Session::peer_data_arrived`: a stream's bytes or
//! datagrams, an rr or crr test's completed transactions, issue 28),
//! counts as hearing it: the
//! receiving side of a stream that starves the control connection knows
//! its peer lives, and the sending side hears the beats its receiver
//! sends back on the stream's own flow ([`crate::data_beat`]), which the
//! I/O layer reports the same way. When the peer's data stops, its
//! streams ended, and the control connection may be as far into its
//! backoff as it went unheard while data arrived: so the limit counted
//! from the last data grows by that much too (at most [`RECOVERY_CAP`];
//! a receiver of a reverse stream through a slower link, waiting for its
//! sender's end over a starved control connection, gave up after 3 s on
//! a loaded host).
//!
//! All of it runs on the `now` the I/O layer passes in, so it is tested
//! on the simulated clock (`tests/sim/heartbeat.rs`).

use std::time::{Duration, Instant};

use super::frames::Outbox;
use super::outcome::SessionError;
use crate::wire::{Abort, Message};

/// The interval a side offers and uses.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_millis(250);
/// Intervals of silence after which the peer is taken to be gone (unless
/// [`SILENCE_FLOOR`] is longer): several late beats do not end a test.
pub const SILENCE_INTERVALS: u32 = 6;
/// The least silence a peer is given, whatever the interval: a busy host
/// can leave a process unscheduled for more than a second (issue 28: a
/// 1 s limit aborted honest tests on a loaded CI machine).
pub const SILENCE_FLOOR: Duration = Duration::from_secs(3);
/// The most a peer is given, beyond the limit, to recover from the data
/// phase's end (as long as the streams ran, up to this): a data phase a
/// server allows is shorter, and TCP's own backoff tops out at 120 s.
pub const RECOVERY_CAP: Duration = Duration::from_secs(60);
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
    /// The latest call into the session ([`Self::awake`]).
    last_call: Instant,
    /// When the test started running (this state was made).
    started: Instant,
    /// Added to the limit once this side's streams ended
    /// ([`Self::streams_ended`]).
    recovery: Duration,
    /// When control bytes last arrived (data from the peer not counted).
    last_control: Instant,
    /// The longest the control connection went unheard while the peer's
    /// data kept arriving ([`Self::data_arrived`]); added to the limit
    /// unless `recovery` is longer.
    starved: Duration,
}

impl Heartbeat {
    /// Starts at `now` (the side entered `Running`): the peer counts as
    /// heard now, the first beat is due at once.
    pub(crate) fn new(interval_ms: u32, now: Instant) -> Self {
        Heartbeat {
            interval: Duration::from_millis(u64::from(interval_ms)),
            next_beat: now,
            last_heard: now,
            last_call: now,
            started: now,
            recovery: Duration::ZERO,
            last_control: now,
            starved: Duration::ZERO,
        }
    }

    /// This side's streams all ended at `now`: the control connection
    /// they may have starved gets as long as they ran to recover (the
    /// module's doc), and the peer's silence is counted from now. Returns
    /// that allowance, which the wait for the peer's results gets too.
    pub(crate) fn streams_ended(&mut self, now: Instant) -> Duration {
        self.last_heard = self.last_heard.max(now);
        self.recovery = now
            .saturating_duration_since(self.started)
            .min(RECOVERY_CAP);
        self.recovery
    }

    /// The session is called at `now` (every `receive` and
    /// `handle_timeout`, before anything else). It asks for a call at
    /// least once per interval, so a gap longer than that is time this
    /// side did not run: the peer's silence is counted from that much
    /// later. An earlier `now` changes nothing.
    pub(crate) fn awake(&mut self, now: Instant) {
        let Some(gap) = now.checked_duration_since(self.last_call) else {
            return;
        };
        if let Some(stalled) = gap.checked_sub(self.interval) {
            // last_heard <= last_call, so it stays an interval before now.
            self.last_heard += stalled;
        }
        self.last_call = now;
    }

    /// Control bytes arrived at `now`.
    pub(crate) fn heard(&mut self, now: Instant) {
        self.last_heard = self.last_heard.max(now);
        self.last_control = self.last_control.max(now);
    }

    /// The peer's data (or its receivers' beats on the data path) arrived
    /// at `now`: the peer lives, and the control connection has been
    /// unheard meanwhile for as long as it has (the module's doc).
    pub(crate) fn data_arrived(&mut self, now: Instant) {
        self.last_heard = self.last_heard.max(now);
        let unheard = now.saturating_duration_since(self.last_control);
        self.starved = self.starved.max(unheard.min(RECOVERY_CAP));
    }

    /// How long a silent peer is given.
    pub(crate) fn silence_limit(&self) -> Duration {
        (self.interval * SILENCE_INTERVALS).max(SILENCE_FLOOR) + self.recovery.max(self.starved)
    }

    /// True when nothing arrived for [`Self::silence_limit`] of this
    /// side's running time.
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

/// One side's heartbeat duty at `now` (its `handle_timeout`, before
/// anything else): sends a beat when one is due; or, when the `peer`
/// fell silent, writes an Abort saying why (in case the path comes back,
/// so the peer can tell its user) and returns the error `me` fails with.
pub(crate) fn on_timeout(
    hb: &mut Heartbeat,
    now: Instant,
    me: &str,
    peer: &str,
    outbox: &mut Outbox,
) -> Option<SessionError> {
    hb.awake(now);
    if hb.peer_silent(now) {
        let why = silence_reason(hb, peer);
        outbox.push(&Message::Abort(Abort {
            reason: format!("the {me} gives up: {why}"),
        }));
        return Some(SessionError::PeerSilent(why));
    }
    if hb.beat_due(now) {
        outbox.push(&Message::Heartbeat);
    }
    None
}

/// The reason a side gives when its peer fell silent, in words.
pub(crate) fn silence_reason(hb: &Heartbeat, peer: &str) -> String {
    // While streams run, they may be what silenced it (the module's doc).
    let hint = if hb.recovery.is_zero() {
        "; or the test's streams fill a slower path the control connection shares: pace them (-b)"
    } else {
        ""
    };
    format!(
        "no control bytes from the {peer} for {} ms (heartbeats every {} ms): the {peer}, or the path to it, is gone{hint}",
        hb.silence_limit().as_millis(),
        hb.interval.as_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue_10_beats_every_interval_and_gives_up_after_the_silence_limit() {
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
        assert!(!hb.peer_silent(ms(3599)));
        assert!(hb.peer_silent(ms(3600)));
        hb.heard(ms(100));
        assert!(hb.peer_silent(ms(3600)), "an earlier time does not rewind");
    }

    /// Calls `hb` back every 100 ms (as `control::drive` does while a
    /// test runs) from `from` to `to` ms: the first call that found the
    /// peer silent.
    fn called_back(hb: &mut Heartbeat, t: Instant, from: u64, to: u64) -> Option<u64> {
        (from..=to).step_by(100).find(|&n| {
            let now = t + Duration::from_millis(n);
            hb.awake(now);
            hb.peer_silent(now)
        })
    }

    #[test]
    fn issue_28_the_silence_limit_is_several_intervals_and_at_least_seconds() {
        let t = Instant::now();
        let mut hb = Heartbeat::new(250, t);
        assert_eq!(hb.silence_limit(), SILENCE_FLOOR);
        assert_eq!(hb.silence_limit(), Duration::from_secs(3));
        // A peer unscheduled for 2 s on a loaded host is not gone.
        assert_eq!(called_back(&mut hb, t, 0, 2900), None);
        assert_eq!(called_back(&mut hb, t, 3000, 3000), Some(3000));
        // A peer that announced a longer interval gets several of them.
        let mut slow = Heartbeat::new(2000, t);
        assert_eq!(slow.silence_limit(), Duration::from_secs(12));
        assert_eq!(called_back(&mut slow, t, 0, 11_900), None);
        assert_eq!(called_back(&mut slow, t, 12_000, 12_000), Some(12_000));
    }

    #[test]
    fn issue_28_time_this_side_did_not_run_is_not_the_peers_silence() {
        let t = Instant::now();
        let ms = |n: u64| t + Duration::from_millis(n);
        let mut hb = Heartbeat::new(250, t);
        assert_eq!(called_back(&mut hb, t, 0, 500), None);
        // Descheduled from 500 to 4500 ms: the first call after it finds
        // the peer's beats unread, which is not the peer's fault.
        hb.awake(ms(4500));
        assert!(!hb.peer_silent(ms(4500)));
        // 3.75 s of the 4 s were a stall (the gap beyond one interval):
        // the peer's silence counts from 3750 ms, up to 6750 ms.
        assert_eq!(called_back(&mut hb, t, 4600, 6700), None);
        assert_eq!(called_back(&mut hb, t, 6800, 6800), Some(6800));
        // A host suspended for an hour: the peer gets its full limit after.
        let mut hb = Heartbeat::new(250, t);
        hb.awake(ms(3_600_000));
        assert!(!hb.peer_silent(ms(3_600_000)));
        assert_eq!(called_back(&mut hb, t, 3_600_100, 3_602_700), None);
        // A peer heard of during the stall resets it as before.
        let mut hb = Heartbeat::new(250, t);
        hb.awake(ms(10_000));
        hb.heard(ms(10_000));
        assert_eq!(called_back(&mut hb, t, 10_100, 12_900), None);
        assert_eq!(called_back(&mut hb, t, 13_000, 13_000), Some(13_000));
        // Late calls within an interval (timer slack) shift nothing.
        let mut hb = Heartbeat::new(250, t);
        for n in (0..=2750).step_by(250) {
            hb.awake(ms(n));
        }
        assert!(hb.peer_silent(ms(3000)));
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
