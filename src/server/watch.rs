//! The server's idle watch over a running stream test: a client that goes
//! silent (a UDP sender that stops without saying so, a TCP peer that
//! stops reading) must not hold the server's test slot until `--max-time`.
//!
//! It reads the interval records the side's sampler cuts anyway (no extra
//! work on the data path): a test during which no stream of this side moves
//! a byte for the idle limit is ended.

use std::time::{Duration, Instant};

use linerate_proto::measure::IntervalMeasurement;
use linerate_proto::spec::{TestKind, TestSpec};

/// Progress of one running stream test.
#[derive(Debug)]
pub struct IdleWatch {
    limit: Duration,
    since: Instant,
}

impl IdleWatch {
    /// A watch for `spec` from `now`, or `None` for tests that keep their
    /// own (request/response flows have a stall watchdog in the engine).
    /// The limit stretches to cover two datagram gaps of a slow pace.
    pub fn new(spec: &TestSpec, idle: Duration, now: Instant) -> Option<Self> {
        if spec.kind != TestKind::Stream {
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
        // Records come once per interval: an idle stretch is only seen
        // after the interval that contains it.
        let interval = Duration::from_millis(spec.interval_ms);
        Some(IdleWatch {
            limit: idle.max(gap) + interval,
            since: now,
        })
    }

    /// Notes an interval record cut at `now`.
    pub fn observe(&mut self, m: &IntervalMeasurement, now: Instant) {
        if m.streams.iter().any(|s| s.bytes > 0) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_proto::measure::IntervalStream;

    fn record(bytes: u64) -> IntervalMeasurement {
        IntervalMeasurement {
            streams: vec![IntervalStream {
                id: 1,
                bytes,
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn issue_10_a_silent_stream_test_expires() {
        let t = Instant::now();
        let spec = TestSpec::default();
        let mut w = IdleWatch::new(&spec, Duration::from_secs(2), t).expect("stream test");
        w.observe(&record(100), t + Duration::from_secs(1));
        assert!(w.expired(t + Duration::from_secs(3)).is_none());
        w.observe(&record(0), t + Duration::from_secs(3));
        assert!(w.expired(t + Duration::from_secs(4)).is_some());
        let rr = TestSpec {
            kind: TestKind::Rr,
            ..TestSpec::default()
        };
        assert!(IdleWatch::new(&rr, Duration::from_secs(2), t).is_none());
    }
}
