//! The offset between the client's and the server's clocks, for one-way
//! latency.
//!
//! Both ends timestamp messages with their own `CLOCK_MONOTONIC` (never
//! stepped, only slewed, unlike `CLOCK_REALTIME`). Two processes on one
//! kernel read the same monotonic clock — network namespaces and containers
//! included — so when both ends report the same boot id
//! (`/proc/sys/kernel/random/boot_id`) the offset is exactly zero. Across
//! hosts the monotonic clocks have unrelated origins, and the offset is
//! estimated NTP-style over the control connection:
//!
//! the client sends a probe at `t1` (its clock), the server stamps its
//! arrival `t2` and its reply `t3` (its clock), the client stamps the
//! reply's arrival `t4`. Following RFC 5905 §8, the server's offset relative
//! to the client is `θ = ((t2 − t1) + (t3 − t4)) / 2` and the round-trip
//! delay `δ = (t4 − t1) − (t3 − t2)`. Since neither one-way trip can be
//! negative, the true offset lies in `[t3 − t4, t2 − t1]`, an
//! interval of width δ centred on θ: `θ ± δ/2` is a hard bound, not a
//! statistical one. As in NTP's clock filter (RFC 5905 §10), the sample with
//! the lowest delay is the one used, because queueing only ever adds delay
//! and so widens the bound.
//!
//! Clock drift over a test (tens of ppm between two free-running
//! oscillators, i.e. tens of µs per second) is not modelled: the estimate is
//! taken just before the test, and tests that need better should use
//! synchronised clocks (PTP) on both hosts.

use serde::{Deserialize, Serialize};

/// Probes sent when the hosts differ; the best of them is used.
pub const PROBES: usize = 16;

/// One probe's four timestamps, in ns: `t1`, `t4` on the client's clock,
/// `t2`, `t3` on the server's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockSample {
    pub t1: u64,
    pub t2: u64,
    pub t3: u64,
    pub t4: u64,
}

impl ClockSample {
    /// θ: server clock minus client clock, ns.
    pub fn offset_ns(&self) -> i128 {
        let (t1, t2, t3, t4) = (
            i128::from(self.t1),
            i128::from(self.t2),
            i128::from(self.t3),
            i128::from(self.t4),
        );
        ((t2 - t1) + (t3 - t4)) / 2
    }

    /// δ: round trip minus the server's hold time, ns (0 if the stamps
    /// are inconsistent, which a sane pair of clocks cannot produce).
    pub fn delay_ns(&self) -> u64 {
        let rtt = i128::from(self.t4) - i128::from(self.t1);
        let hold = i128::from(self.t3) - i128::from(self.t2);
        u64::try_from((rtt - hold).max(0)).unwrap_or(u64::MAX)
    }
}

/// How the offset was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClockMethod {
    /// Both ends run on one kernel (same boot id): one clock, offset 0.
    SameHost,
    /// Estimated from probes over the control connection.
    Probes,
}

/// The server's clock minus the client's, with its bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockOffset {
    pub method: ClockMethod,
    /// Server clock − client clock, ns.
    pub offset_ns: i64,
    /// The true offset lies within `offset_ns ± uncertainty_ns`.
    pub uncertainty_ns: u64,
    /// Probes exchanged.
    pub probes: u32,
    /// Delay δ of the probe used, ns (0 for the same host).
    pub delay_ns: u64,
}

impl ClockOffset {
    /// The same clock on both ends.
    pub fn same_host(probes: u32) -> Self {
        ClockOffset {
            method: ClockMethod::SameHost,
            offset_ns: 0,
            uncertainty_ns: 0,
            probes,
            delay_ns: 0,
        }
    }

    /// The estimate from the lowest-delay sample, or `None` without samples
    /// (or with an offset beyond ±292 years, which no pair of monotonic
    /// clocks has).
    pub fn estimate(samples: &[ClockSample]) -> Option<Self> {
        let best = samples.iter().min_by_key(|s| s.delay_ns())?;
        let delay = best.delay_ns();
        Some(ClockOffset {
            method: ClockMethod::Probes,
            offset_ns: i64::try_from(best.offset_ns()).ok()?,
            uncertainty_ns: delay.div_ceil(2),
            probes: samples.len() as u32,
            delay_ns: delay,
        })
    }

    /// Converts a server timestamp to the client's clock.
    pub fn to_client(&self, server_ns: u64) -> i128 {
        i128::from(server_ns) - i128::from(self.offset_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn symmetric_paths_give_the_exact_offset() {
        // Server clock is 1000 ns ahead; 50 ns each way; 10 ns hold.
        let s = ClockSample {
            t1: 100,
            t2: 100 + 50 + 1000,
            t3: 100 + 50 + 1000 + 10,
            t4: 100 + 50 + 10 + 50,
        };
        assert_eq!(s.offset_ns(), 1000);
        assert_eq!(s.delay_ns(), 100);
        let e = ClockOffset::estimate(&[s]).expect("one sample");
        assert_eq!((e.offset_ns, e.uncertainty_ns), (1000, 50));
        assert_eq!(ClockOffset::estimate(&[]), None);
    }

    #[test]
    fn the_lowest_delay_sample_wins() {
        let queued = ClockSample {
            t1: 0,
            t2: 5000,
            t3: 5000,
            t4: 6000,
        };
        let quick = ClockSample {
            t1: 10_000,
            t2: 10_050,
            t3: 10_050,
            t4: 10_100,
        };
        let e = ClockOffset::estimate(&[queued, quick]).expect("samples");
        assert_eq!(e.delay_ns, 100);
        assert_eq!(e.offset_ns, 0);
        assert_eq!(e.probes, 2);
    }

    proptest! {
        /// Whatever the (non-negative) one-way delays, the true offset lies
        /// within the stated bound (RFC 5905's θ ± δ/2).
        #[test]
        fn true_offset_is_within_the_bound(offset in -1_000_000_000_000i64..1_000_000_000_000,
                                           t1 in 2_000_000_000_000u64..3_000_000_000_000,
                                           up in 0u64..10_000_000, hold in 0u64..1_000_000, down in 0u64..10_000_000) {
            let t2 = (i128::from(t1) + i128::from(up) + i128::from(offset)) as u64;
            let t3 = t2 + hold;
            let t4 = t1 + up + hold + down;
            let e = ClockOffset::estimate(&[ClockSample { t1, t2, t3, t4 }]).expect("sample");
            prop_assert!((i128::from(e.offset_ns) - i128::from(offset)).abs() <= i128::from(e.uncertainty_ns));
            prop_assert_eq!(e.delay_ns, up + down);
        }
    }
}
