//! Duration histograms with nanosecond resolution, mergeable across
//! streams and sides, summarised as percentiles.
//!
//! Backed by HdrHistogram (Gil Tene's design; the `hdrhistogram` crate):
//! fixed relative precision (3 significant digits here, i.e. ≤ 0.1% error
//! per value) over 1 ns … 1 hour, constant-time recording, exact merge.
//! Percentiles follow HdrHistogram's definition: the smallest recorded value
//! such that at least p% of values are ≤ it.
//!
//! For the wire and for export, [`Histogram::to_buckets`] gives sparse
//! `(value_ns, count)` pairs that [`Histogram::from_buckets`] restores.

use serde::{Deserialize, Serialize};

const MAX_NS: u64 = 3_600_000_000_000;
const SIGFIGS: u8 = 3;
/// The range a new histogram's counts cover before it grows (24 KB of
/// counts): an rr test keeps a histogram per flow, thousands with
/// `--flows`, and the full range would cost 188 KB each. The layout of
/// buckets (and so every figure) does not depend on where the counts end.
const INITIAL_MAX_NS: u64 = 1 << 12;
/// Precision of [`Histogram::coarse`]: 1 significant digit, i.e. 16
/// sub-buckets per power of two (HdrHistogram keeps unit resolution up to
/// 2·10^sigfigs, rounded up to a power of two: 32 sub-buckets, half of
/// them per doubling above the first — `hdrhistogram` 7.6
/// `Histogram::new_with_bounds`, after Gil Tene's HdrHistogram), so a
/// value is known within 1/16 = 6.25% of itself instead of 1/1024, in
/// counts 64 times smaller.
const COARSE_SIGFIGS: u8 = 1;

/// A histogram of durations in nanoseconds.
#[derive(Debug, Clone)]
pub struct Histogram {
    h: hdrhistogram::Histogram<u64>,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

/// Percentile summary of a histogram (all values in nanoseconds).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Summary {
    pub count: u64,
    pub min_ns: u64,
    pub mean_ns: f64,
    pub stddev_ns: f64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p99_9_ns: u64,
    pub p99_99_ns: u64,
    pub max_ns: u64,
}

impl Histogram {
    pub fn new() -> Self {
        Self::with_sigfigs(SIGFIGS)
    }

    /// A low-precision histogram (values within 6.25%, see
    /// `COARSE_SIGFIGS`) for state kept per flow by the thousand: about
    /// 3.5 KB of counts at round trips of a second where [`Self::new`]
    /// takes 172 KB. Its percentiles are the top of their bucket, so read
    /// up to 6.25% high. Merged into a full-precision histogram its values
    /// keep that error.
    pub fn coarse() -> Self {
        Self::with_sigfigs(COARSE_SIGFIGS)
    }

    fn with_sigfigs(sigfigs: u8) -> Self {
        // The bounds are constants known to be valid for HdrHistogram; it
        // grows (`auto`) up to the recorded values, which `record_n`
        // clamps to MAX_NS.
        let mut h = hdrhistogram::Histogram::new_with_bounds(1, INITIAL_MAX_NS, sigfigs)
            .unwrap_or_else(|e| unreachable!("valid histogram bounds: {e}"));
        h.auto(true);
        Histogram { h }
    }

    /// Bytes its counts take (what it costs to keep, less a fixed header).
    pub fn counts_bytes(&self) -> usize {
        self.h.distinct_values() * std::mem::size_of::<u64>()
    }

    /// Records one duration; values beyond an hour are clamped to an hour
    /// and zero to 1 ns (the histogram's range).
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.record_n(ns, 1);
    }

    #[inline]
    pub fn record_n(&mut self, ns: u64, count: u64) {
        let v = ns.clamp(1, MAX_NS);
        // In range by the clamp above (the histogram grows to it), so this
        // cannot fail.
        let _ = self.h.record_n(v, count);
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &Histogram) {
        // Both grow to what they hold, so this cannot fail.
        let _ = self.h.add(&other.h);
    }

    pub fn count(&self) -> u64 {
        self.h.len()
    }

    pub fn is_empty(&self) -> bool {
        self.h.is_empty()
    }

    /// Value at percentile `p` (0–100), in ns.
    pub fn percentile(&self, p: f64) -> u64 {
        self.h.value_at_percentile(p)
    }

    pub fn summary(&self) -> Summary {
        if self.h.is_empty() {
            return Summary::default();
        }
        Summary {
            count: self.h.len(),
            min_ns: self.h.min(),
            mean_ns: self.h.mean(),
            stddev_ns: self.h.stdev(),
            p50_ns: self.percentile(50.0),
            p90_ns: self.percentile(90.0),
            p99_ns: self.percentile(99.0),
            p99_9_ns: self.percentile(99.9),
            p99_99_ns: self.percentile(99.99),
            max_ns: self.h.max(),
        }
    }

    /// Sparse `(value_ns, count)` pairs of every non-empty bucket.
    pub fn to_buckets(&self) -> Vec<(u64, u64)> {
        self.h
            .iter_recorded()
            .map(|v| (v.value_iterated_to(), v.count_at_value()))
            .collect()
    }

    /// Rebuilds a histogram from [`Self::to_buckets`] output.
    pub fn from_buckets(buckets: &[(u64, u64)]) -> Self {
        let mut h = Histogram::new();
        for &(v, c) in buckets {
            h.record_n(v, c);
        }
        h
    }

    /// `(value_ns, cumulative fraction)` points for a CDF plot.
    pub fn cdf(&self) -> Vec<(u64, f64)> {
        let total = self.h.len().max(1) as f64;
        let mut acc = 0u64;
        self.h
            .iter_recorded()
            .map(|v| {
                acc += v.count_at_value();
                (v.value_iterated_to(), acc as f64 / total)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn summary_of_known_values() {
        let mut h = Histogram::new();
        for v in 1..=1000u64 {
            h.record(v * 1000);
        }
        let s = h.summary();
        assert_eq!(s.count, 1000);
        assert_eq!(s.min_ns, 1000);
        assert!((s.p50_ns as f64 - 500_000.0).abs() / 500_000.0 < 0.001);
        assert!((s.p99_ns as f64 - 990_000.0).abs() / 990_000.0 < 0.001);
        assert!((s.max_ns as f64 - 1_000_000.0).abs() / 1_000_000.0 < 0.001);
        assert!((s.mean_ns - 500_500.0).abs() / 500_500.0 < 0.001);
    }

    #[test]
    fn issue_26_coarse_histogram_is_small_and_within_its_precision() {
        let (mut fine, mut coarse) = (Histogram::new(), Histogram::coarse());
        for v in 1..=1000u64 {
            // 1 ms … 1 s: a loaded loop's round trips.
            fine.record(v * 1_000_000);
            coarse.record(v * 1_000_000);
        }
        assert!(coarse.counts_bytes() <= 4096, "{}", coarse.counts_bytes());
        assert!(fine.counts_bytes() >= 32 * coarse.counts_bytes());
        let (f, c) = (fine.summary(), coarse.summary());
        assert_eq!(c.count, f.count);
        for (exact, est) in [(f.p50_ns, c.p50_ns), (f.p99_ns, c.p99_ns)] {
            let err = (est as f64 - exact as f64) / exact as f64;
            assert!((-0.001..=0.0625).contains(&err), "{exact} {est}");
        }
    }

    proptest! {
        /// Merging histograms equals recording everything in one.
        #[test]
        fn merge_equals_recording_all(a in proptest::collection::vec(1u64..10_000_000_000, 0..200),
                                      b in proptest::collection::vec(1u64..10_000_000_000, 0..200)) {
            let (mut ha, mut hb, mut all) = (Histogram::new(), Histogram::new(), Histogram::new());
            for &v in &a { ha.record(v); all.record(v); }
            for &v in &b { hb.record(v); all.record(v); }
            ha.merge(&hb);
            prop_assert_eq!(ha.summary(), all.summary());
            prop_assert_eq!(ha.to_buckets(), all.to_buckets());
        }

        /// Buckets round-trip exactly.
        #[test]
        fn buckets_round_trip(v in proptest::collection::vec(1u64..MAX_NS, 1..300)) {
            let mut h = Histogram::new();
            for &x in &v { h.record(x); }
            let back = Histogram::from_buckets(&h.to_buckets());
            prop_assert_eq!(back.summary(), h.summary());
        }
    }
}
