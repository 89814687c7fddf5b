//! Data-path beats: a receiving stream's sign to its sender, on the
//! stream's own flow, that its datagrams arrive (issue 27).
//!
//! A stream that outruns a slower link fills the queue the control
//! connection shares. The side receiving it hears its peer through the
//! data ([`crate::session::heartbeat`]); the side sending it hears nothing
//! for as long as the stream runs: its peer's control bytes wait on TCP's
//! backed-off retransmissions, whose acknowledgements die in the full
//! queue (seen on a 10 Mbit/s router: "no control bytes from the server
//! for 3000 ms" after 3 s of an unpaced stream, either way).
//!
//! So while datagrams arrive, a linerate receiver sends one small
//! datagram back on the stream's connected flow every
//! [`BEAT_EVERY_NS`] ([`BeatSchedule`]); it travels against the stream,
//! the way the stream does not fill. The sender reads its socket without
//! waiting every [`PEEK_EVERY_NS`] and counts each beat ([`is_beat`]) as
//! its peer's proof of life, as the receiver counts the data. A beat is
//! the control frame `Heartbeat` sent as a datagram: its magic `"LR"` is
//! not data's `"LU"`, so nothing takes it for data. Stream threads and
//! event-loop flows beat and count alike, on every engine (an AF_XDP
//! sender reads its beats off its redirected flow). iperf3 peers get none
//! (their receive loop is iperf3's); an older linerate sender never reads
//! them, and its socket drops what it does not read.

use crate::wire::{self, Message};

/// How often a receiver that gets data tells its sender so.
pub const BEAT_EVERY_NS: u64 = 250_000_000;
/// How often a sender looks for beats (a non-blocking read).
pub const PEEK_EVERY_NS: u64 = 100_000_000;

/// When a receiver's next beat leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BeatSchedule {
    next_ns: u64,
    received: u64,
}

impl Default for BeatSchedule {
    fn default() -> Self {
        BeatSchedule {
            next_ns: BEAT_EVERY_NS,
            received: 0,
        }
    }
}

impl BeatSchedule {
    /// The stream has `received` valid datagrams at `now_ns` (since
    /// Start): true when a beat should leave now, because some arrived
    /// since the last one and an interval has passed. The first is due an
    /// interval after Start, so a short test sends none.
    pub fn due(&mut self, now_ns: u64, received: u64) -> bool {
        if now_ns < self.next_ns || received <= self.received {
            return false;
        }
        self.next_ns = now_ns.saturating_add(BEAT_EVERY_NS);
        self.received = received;
        true
    }
}

/// A beat's bytes.
pub fn beat() -> Vec<u8> {
    wire::to_bytes(&Message::Heartbeat)
}

/// True when `d` is exactly one beat.
pub fn is_beat(d: &[u8]) -> bool {
    matches!(wire::decode(d), Ok(Some((Message::Heartbeat, n))) if n == d.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue_27_beats_leave_each_interval_while_data_arrives() {
        let mut s = BeatSchedule::default();
        let ms = |n: u64| n * 1_000_000;
        assert!(!s.due(ms(100), 50), "none within the first interval");
        assert!(s.due(ms(250), 60));
        assert!(!s.due(ms(400), 70), "one per interval");
        assert!(s.due(ms(500), 80));
        assert!(!s.due(ms(900), 80), "nothing arrived since: no beat");
        assert!(s.due(ms(950), 81));
    }

    #[test]
    fn issue_27_a_beat_is_a_heartbeat_frame_and_nothing_else_is() {
        let b = beat();
        assert!(is_beat(&b));
        assert!(!is_beat(&b[..b.len() - 1]));
        let mut two = b.clone();
        two.extend_from_slice(&b);
        assert!(!is_beat(&two), "one frame, exactly");
        let mut data = vec![0u8; 64];
        data[..2].copy_from_slice(b"LU");
        assert!(!is_beat(&data));
        assert!(!is_beat(&[]));
    }
}
