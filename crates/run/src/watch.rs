//! The server's watches over a running test, reading what the side counts
//! anyway (no extra work on the data path):
//!
//! - idle: a client that goes silent (a UDP sender that stops without
//!   saying so, a TCP peer that stops reading, a msg sender mid-message)
//!   must not hold the server's test slot until `--max-time`; a stream or
//!   msg test, linerate's or iperf3's, during which no stream of this side
//!   moves a byte for the idle limit is ended (from the streams' live
//!   counters).
//! - rate: under `--max-rate`/`--max-total-rate` a client agreed to pace
//!   its senders; one that sends faster anyway (a modified client) is
//!   ended, so the limit does not rest on the client's word.

use std::time::{Duration, Instant};

use linerate_engine::runner::Progress;
use linerate_proto::limits::ServerLimits;
use linerate_proto::measure::IntervalMeasurement;
use linerate_proto::spec::TestSpec;
use linerate_proto::test_type::{self, Shape};
use linerate_proto::wire::Side;

/// Progress of one running stream or msg test.
#[derive(Debug)]
pub struct IdleWatch {
    limit: Duration,
    since: Instant,
    /// What the side's streams had moved in all when last looked at.
    moved: u64,
}

impl IdleWatch {
    /// A watch for `spec` from `now`, or `None` for tests that keep their
    /// own (request/response flows have a stall watchdog in the engine).
    /// The limit stretches to cover two datagram gaps of a slow pace.
    pub fn new(spec: &TestSpec, idle: Duration, now: Instant) -> Option<Self> {
        if !test_type::of(spec).idle_watch {
            return None;
        }
        let gap = spec
            .udp
            .as_ref()
            .and_then(|u| {
                let m = u.millipps(spec.len)?;
                let burst = u64::from(u.burst.max(1));
                Some(Duration::from_millis(2_000_000 * burst / m.max(1)))
            })
            .unwrap_or_default();
        Some(IdleWatch {
            limit: idle.max(gap),
            since: now,
            moved: 0,
        })
    }

    /// Notes what the side's streams have moved so far
    /// ([`SideRun::progress`](linerate_engine::runner::SideRun::progress):
    /// live counters, so every test kind and protocol is watched alike).
    pub fn observe(&mut self, p: Progress, now: Instant) {
        let moved = p
            .sent_bytes
            .wrapping_add(p.received_bytes)
            .wrapping_add(p.sent_datagrams)
            .wrapping_add(p.received_datagrams);
        if moved != self.moved {
            self.moved = moved;
            self.since = now;
        }
    }

    /// Whether nothing moved for the limit; the reason, in words.
    pub fn expired(&self, now: Instant) -> Option<String> {
        (now.duration_since(self.since) >= self.limit).then(|| {
            format!(
                "no data moved on any stream for {} s (--idle-timeout)",
                self.limit.as_secs()
            )
        })
    }
}

/// Slack per client stream on top of the agreed rate, bytes: a TCP
/// connection's first 10 segments leave unpaced (64 KiB each on
/// loopback), a UDP burst leaves at once, and interval ends jitter.
const RATE_SLACK_PER_STREAM: u64 = 2 << 20;

/// What the client's streams delivered against the rate it agreed to.
#[derive(Debug)]
pub struct RateWatch {
    /// Agreed bit/s of all client-sending streams together.
    bps: u64,
    /// Ids of the streams the client sends.
    client_streams: Vec<u32>,
    received: u64,
}

impl RateWatch {
    /// A watch for `spec` when the server caps rates
    /// ([`ServerLimits::caps_rate`], for every protocol) and the client
    /// sends at an agreed pace; `None` otherwise.
    pub fn new(spec: &TestSpec, limits: &ServerLimits) -> Option<Self> {
        if !limits.caps_rate() || test_type::of(spec).shape != Shape::Stream {
            return None;
        }
        let client_streams: Vec<u32> = spec
            .stream_plan()
            .iter()
            .filter(|p| p.sender == Side::Client)
            .map(|p| p.id)
            .collect();
        let n = client_streams.len() as u64;
        let per = match (&spec.udp, spec.tcp.rate) {
            (Some(u), _) => u.millipps(spec.len).map(|m| {
                u64::try_from(u128::from(m) * u128::from(spec.len) * 8 / 1000).unwrap_or(u64::MAX)
            }),
            (None, rate) => rate,
        }?;
        (n > 0).then(|| RateWatch {
            bps: per.saturating_mul(n),
            client_streams,
            received: 0,
        })
    }

    /// Notes an interval record; the reason to end the test, in words,
    /// when the client's streams delivered more than the agreed rate
    /// allows since Start (10% and the slack above it).
    pub fn observe(&mut self, m: &IntervalMeasurement) -> Option<String> {
        self.received += m
            .streams
            .iter()
            .filter(|s| self.client_streams.contains(&s.id))
            .map(|s| s.bytes)
            .sum::<u64>();
        let secs = m.end_ns as f64 / 1e9;
        let allowed = self.bps as f64 / 8.0 * secs * 1.1
            + (RATE_SLACK_PER_STREAM * self.client_streams.len() as u64) as f64;
        (self.received as f64 > allowed).then(|| {
            format!(
                "the client sent {} in {secs:.1} s, above the {} it agreed to (--max-rate)",
                linerate_stats::units::format_rate(self.received as f64 * 8.0 / secs),
                linerate_stats::units::format_rate(self.bps as f64)
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_proto::measure::IntervalStream;
    use linerate_proto::spec::TestKind;

    #[test]
    fn issue_10_a_silent_stream_test_expires() {
        let t = Instant::now();
        let spec = TestSpec::default();
        let mut w = IdleWatch::new(&spec, Duration::from_secs(2), t).expect("stream test");
        let moved = |b| Progress {
            received_bytes: b,
            ..Progress::default()
        };
        w.observe(moved(100), t + Duration::from_secs(1));
        assert!(w.expired(t + Duration::from_secs(2)).is_none());
        w.observe(moved(100), t + Duration::from_secs(2));
        assert!(w.expired(t + Duration::from_secs(3)).is_some());
        // msg tests are watched too (issue 28).
        let msg = TestSpec {
            kind: TestKind::Msg,
            ..TestSpec::default()
        };
        assert!(IdleWatch::new(&msg, Duration::from_secs(2), t).is_some());
        let rr = TestSpec {
            kind: TestKind::Rr,
            ..TestSpec::default()
        };
        assert!(IdleWatch::new(&rr, Duration::from_secs(2), t).is_none());
    }

    #[test]
    fn issue_10_a_client_sending_above_its_agreed_rate_is_caught() {
        let spec = TestSpec {
            direction: linerate_proto::spec::Direction::Bidir,
            tcp: linerate_proto::spec::TcpOptions {
                rate: Some(8_000_000), // 1 MB/s per stream
                ..Default::default()
            },
            ..TestSpec::default()
        };
        let unlimited = ServerLimits::default();
        assert!(
            RateWatch::new(&spec, &unlimited).is_none(),
            "no server limit"
        );
        let total = ServerLimits {
            max_total_rate_bps: Some(1_000_000_000),
            ..ServerLimits::default()
        };
        assert!(RateWatch::new(&spec, &total).is_some(), "--max-total-rate");
        let capped = ServerLimits {
            max_rate_bps: Some(1_000_000_000),
            ..ServerLimits::default()
        };
        let mut w = RateWatch::new(&spec, &capped).expect("client sends");
        let at = |end_s: u64, id: u32, bytes: u64| IntervalMeasurement {
            end_ns: end_s * 1_000_000_000,
            streams: vec![IntervalStream {
                id,
                bytes,
                ..Default::default()
            }],
            ..Default::default()
        };
        // On pace, plus the slack, for 3 s; the server's own stream (2)
        // is not the client's.
        assert!(w.observe(&at(1, 1, 3_000_000)).is_none());
        assert!(w.observe(&at(2, 2, 50_000_000)).is_none());
        assert!(w.observe(&at(3, 1, 1_000_000)).is_none());
        let why = w.observe(&at(4, 1, 5_000_000)).expect("9 MB in 4 s");
        assert!(why.contains("--max-rate"), "{why}");
    }
}
