//! The server's resource limits on one test, beyond the per-field checks of
//! [`crate::spec::negotiate`]: the memory a test's buffers cost, how long a
//! count-limited test can take at its pace, the interval between records
//! (the server's idle watch needs them), and the bit rate of UDP tests.
//!
//! Each refusal names the limit and the server flag that sets it; each
//! clamp adds a note the client prints.

use crate::spec::{Direction, Limit, Pace, Protocol, ServerLimits, SpecError, TestKind, TestSpec};

/// Default `--max-test-memory`: buffers of one test (1 GiB).
pub const DEFAULT_MAX_TEST_MEMORY: u64 = 1 << 30;
/// Longest interval between records a server accepts by default: its idle
/// watch looks at them.
pub const DEFAULT_MAX_INTERVAL_MS: u64 = 60_000;

/// What one test's buffers cost the server, roughly: per data connection
/// one I/O buffer of the largest message plus its socket buffers (the
/// kernel doubles a requested window, once for each direction).
pub fn test_memory(spec: &TestSpec) -> u64 {
    let len = match (&spec.rr, spec.kind) {
        (Some(rr), TestKind::Rr | TestKind::Crr) => rr
            .sizes
            .iter()
            .copied()
            .chain(rr.response_size)
            .max()
            .unwrap_or(spec.len)
            .max(spec.len),
        _ => spec.len,
    };
    let window = spec
        .udp
        .as_ref()
        .and_then(|u| u.window)
        .or(spec.tcp.window)
        .unwrap_or(0);
    let conns = match spec.kind {
        // crr: one connection per flow at a time.
        TestKind::Crr => u64::from(spec.streams.max(1)),
        _ => spec.connection_count() as u64,
    };
    conns.saturating_mul(u64::from(len).saturating_add(4 * u64::from(window)))
}

/// Checks `spec` (already negotiated field by field) against the limits
/// on the whole test; may clamp the server's own UDP senders to
/// `max_rate_bps`, with a note.
pub fn check(
    spec: &mut TestSpec,
    limits: &ServerLimits,
    notes: &mut Vec<String>,
) -> Result<(), SpecError> {
    let err = |field, reason: String| Err(SpecError { field, reason });
    let mem = test_memory(spec);
    if mem > limits.max_test_memory {
        return err(
            "memory",
            format!(
                "the test's buffers need about {} ({} connections × (len + 4 × window)), this server allows {} per test (--max-test-memory)",
                mib(mem),
                spec.connection_count(),
                mib(limits.max_test_memory)
            ),
        );
    }
    if spec.interval_ms > limits.max_interval_ms {
        return err(
            "interval",
            format!(
                "{} ms requested, this server allows at most {} ms",
                spec.interval_ms, limits.max_interval_ms
            ),
        );
    }
    if let (TestKind::Stream, Limit::Datagrams(_)) = (spec.kind, spec.limit) {
        // A paced count has a known duration: refuse it up front rather
        // than cut it at --max-time. (Unpaced counts are cut when the
        // limit passes; see the session's data deadline.)
        if let Some(ms) = spec.data_phase_ms() {
            if ms > limits.max_time_ms {
                return err(
                    "count",
                    format!(
                        "at the requested pace the count takes about {} s, this server allows at most {} s (--max-time)",
                        ms / 1000,
                        limits.max_time_ms / 1000
                    ),
                );
            }
        }
    }
    if let Some(max) = limits.max_rate_bps {
        check_rate(spec, max, notes)?;
    }
    Ok(())
}

/// `--max-rate` on UDP stream tests: the client's senders must not ask for
/// more (refused), the server's own are paced to it (clamped, noted).
fn check_rate(spec: &mut TestSpec, max: u64, notes: &mut Vec<String>) -> Result<(), SpecError> {
    if spec.protocol != Protocol::Udp || spec.kind != TestKind::Stream {
        return Ok(());
    }
    let streams = u64::from(spec.streams.max(1));
    let len = spec.len;
    let Some(udp) = spec.udp.as_mut() else {
        return Ok(());
    };
    let per_stream_bps = match udp.pace {
        Pace::Unlimited => None,
        Pace::Rate(bps) => Some(bps),
        Pace::MilliPps(m) => {
            Some(u64::try_from(u128::from(m) * u128::from(len) * 8 / 1000).unwrap_or(u64::MAX))
        }
    };
    let total = per_stream_bps.map(|b| b.saturating_mul(streams));
    if total.is_some_and(|t| t <= max) {
        return Ok(());
    }
    let asked = total.map_or("unpaced (as fast as possible)".to_owned(), |t| {
        format!("{} bit/s in all", t)
    });
    if spec.direction != Direction::Reverse {
        return Err(SpecError {
            field: "rate",
            reason: format!(
                "{asked} requested, this server accepts at most {max} bit/s per test (--max-rate)"
            ),
        });
    }
    // Only the server sends: pace it within the limit.
    let per = (max / streams).max(1);
    udp.pace = Pace::Rate(per);
    notes.push(format!(
        "rate clamped from {asked} to {per} bit/s per stream by the server (--max-rate {max})"
    ));
    Ok(())
}

fn mib(bytes: u64) -> String {
    format!("{:.0} MiB", bytes as f64 / f64::from(1u32 << 20))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{negotiate, UdpSpec};

    fn udp(direction: Direction, pace: Pace, streams: u16) -> TestSpec {
        TestSpec {
            protocol: Protocol::Udp,
            direction,
            streams,
            len: 1000,
            udp: Some(UdpSpec {
                pace,
                ..UdpSpec::default()
            }),
            ..TestSpec::default()
        }
    }

    #[test]
    fn issue_10_memory_budget_refuses_huge_tests() {
        let spec = TestSpec {
            direction: Direction::Bidir,
            streams: 128,
            len: 16 << 20,
            ..TestSpec::default()
        };
        let e = negotiate(&spec, &ServerLimits::default()).expect_err("4 GiB refused");
        assert_eq!(e.field, "memory");
        assert!(e.reason.contains("--max-test-memory"), "{e}");
        let fits = TestSpec { streams: 4, ..spec };
        assert!(negotiate(&fits, &ServerLimits::default()).is_ok());
    }

    #[test]
    fn issue_10_paced_count_longer_than_max_time_is_refused() {
        let mut spec = udp(Direction::Forward, Pace::MilliPps(1_000_000), 1);
        spec.limit = Limit::Datagrams(100_000); // 100 s at 1000/s
        let limits = ServerLimits {
            max_time_ms: 10_000,
            ..ServerLimits::default()
        };
        let e = negotiate(&spec, &limits).expect_err("too long");
        assert_eq!(e.field, "count");
        spec.limit = Limit::Datagrams(5_000);
        assert!(negotiate(&spec, &limits).is_ok());
    }

    #[test]
    fn issue_10_long_intervals_are_refused() {
        let spec = TestSpec {
            interval_ms: 3_600_000,
            ..TestSpec::default()
        };
        let e = negotiate(&spec, &ServerLimits::default()).expect_err("refused");
        assert_eq!(e.field, "interval");
    }

    #[test]
    fn max_rate_refuses_client_senders_and_clamps_the_servers() {
        let limits = ServerLimits {
            max_rate_bps: Some(100_000_000),
            ..ServerLimits::default()
        };
        let fast = udp(Direction::Forward, Pace::Rate(60_000_000), 2);
        let e = negotiate(&fast, &limits).expect_err("120 Mbit/s > 100");
        assert_eq!(e.field, "rate");
        assert!(e.reason.contains("--max-rate"), "{e}");
        let unpaced = udp(Direction::Bidir, Pace::Unlimited, 1);
        assert_eq!(
            negotiate(&unpaced, &limits).expect_err("refused").field,
            "rate"
        );
        let rev = udp(Direction::Reverse, Pace::Unlimited, 4);
        let n = negotiate(&rev, &limits).expect("clamped");
        assert_eq!(
            n.spec.udp.as_ref().map(|u| u.pace),
            Some(Pace::Rate(25_000_000))
        );
        assert!(
            n.notes.iter().any(|n| n.contains("--max-rate")),
            "{:?}",
            n.notes
        );
        let slow = udp(Direction::Forward, Pace::MilliPps(1_000_000), 1); // 8 Mbit/s
        assert!(negotiate(&slow, &limits).is_ok());
    }
}
