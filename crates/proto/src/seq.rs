//! Sequence tracking on a UDP receiver: what arrived, what is missing, what
//! came out of order or twice — from the 64-bit sequence numbers alone.
//!
//! Definitions (the numbers linerate reports):
//! - **received**: distinct sequence numbers seen (duplicates not counted).
//! - **duplicate**: a number seen again.
//! - **reordered**: a number that arrived for the first time after a higher
//!   one; its **distance** is how far below the highest number seen so far
//!   it was.
//! - **missing** (running): numbers below the highest seen that have not
//!   arrived. At the end of the test the sender's count of issued numbers
//!   replaces "the highest seen", so **lost = issued − received**, exactly.
//! - **late**: arrived after [`SeqTracker::close`] (the drain deadline); it
//!   does not reduce the loss.
//!
//! Memory is bounded: the tracker remembers which of the last
//! [`SeqTracker::window`] numbers below the highest seen arrived, in a ring
//! bitmap (the default window, 2^20 numbers, costs 128 KiB per stream). A
//! number that arrives more than a window below the highest seen cannot be
//! told from a duplicate any more: it is counted as **beyond window** and
//! *not* as received, so it stays in the loss. Wrap-around cannot happen in
//! practice (2^64 datagrams at 100 Mpps take 5,800 years); no arithmetic
//! here is narrower than 64 bits.

/// Default window: numbers remembered below the highest seen.
pub const DEFAULT_WINDOW: u64 = 1 << 20;

/// Counters of one receiving stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SeqCounts {
    /// Distinct sequence numbers received (before the drain deadline).
    pub received: u64,
    pub duplicates: u64,
    pub reordered: u64,
    /// Largest reorder distance seen (0 when nothing was reordered).
    pub max_reorder_distance: u64,
    /// Arrived more than a window below the highest number seen.
    pub beyond_window: u64,
    /// Arrived after the drain deadline.
    pub late: u64,
    /// One past the highest number seen (0 when nothing arrived).
    pub next_expected: u64,
}

impl SeqCounts {
    /// Final loss once the sender's count of issued numbers is known. A
    /// correct sender never sends a number at or above `issued`.
    pub fn lost(&self, issued: u64) -> u64 {
        issued.saturating_sub(self.received)
    }
}

/// What one arrival was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// In order (the highest so far), possibly after a gap of `gap` numbers.
    InOrder {
        gap: u64,
    },
    /// Filled a gap `distance` below the highest seen.
    Reordered {
        distance: u64,
    },
    Duplicate,
    BeyondWindow,
    Late,
}

/// The tracker. Feed it every valid datagram's sequence number.
#[derive(Debug, Clone)]
pub struct SeqTracker {
    window: u64,
    /// Ring bitmap: bit `s % window` says whether `s` arrived, for `s` in
    /// `[next − window, next)`.
    bits: Vec<u64>,
    counts: SeqCounts,
    closed: bool,
}

impl Default for SeqTracker {
    fn default() -> Self {
        Self::new(DEFAULT_WINDOW)
    }
}

impl SeqTracker {
    /// A tracker remembering `window` numbers (rounded up to a power of two,
    /// at least 64).
    pub fn new(window: u64) -> Self {
        let window = window.clamp(64, 1 << 32).next_power_of_two();
        SeqTracker {
            window,
            bits: vec![0; (window / 64) as usize],
            counts: SeqCounts::default(),
            closed: false,
        }
    }

    pub fn window(&self) -> u64 {
        self.window
    }

    pub fn counts(&self) -> SeqCounts {
        self.counts
    }

    /// The drain deadline passed: later arrivals only count as late.
    pub fn close(&mut self) {
        self.closed = true;
    }

    #[inline]
    fn slot(&self, seq: u64) -> (usize, u64) {
        let i = seq & (self.window - 1);
        ((i / 64) as usize, 1u64 << (i % 64))
    }

    #[inline]
    fn get(&self, seq: u64) -> bool {
        let (w, m) = self.slot(seq);
        self.bits.get(w).is_some_and(|x| x & m != 0)
    }

    #[inline]
    fn set(&mut self, seq: u64, on: bool) {
        let (w, m) = self.slot(seq);
        if let Some(x) = self.bits.get_mut(w) {
            if on {
                *x |= m;
            } else {
                *x &= !m;
            }
        }
    }

    /// Records the arrival of `seq`.
    pub fn record(&mut self, seq: u64) -> Arrival {
        if self.closed {
            self.counts.late += 1;
            return Arrival::Late;
        }
        let c = &mut self.counts;
        if seq >= c.next_expected {
            let gap = seq - c.next_expected;
            if gap >= self.window {
                self.bits.iter_mut().for_each(|w| *w = 0);
            } else {
                // Numbers entering the window have not arrived: clear the
                // bits they inherit from a window ago.
                for s in self.counts.next_expected..seq {
                    self.set(s, false);
                }
            }
            self.set(seq, true);
            let c = &mut self.counts;
            c.received += 1;
            c.next_expected = seq.saturating_add(1);
            return Arrival::InOrder { gap };
        }
        let distance = c.next_expected - 1 - seq;
        if distance >= self.window {
            c.beyond_window += 1;
            return Arrival::BeyondWindow;
        }
        if self.get(seq) {
            self.counts.duplicates += 1;
            return Arrival::Duplicate;
        }
        self.set(seq, true);
        let c = &mut self.counts;
        c.received += 1;
        c.reordered += 1;
        c.max_reorder_distance = c.max_reorder_distance.max(distance);
        Arrival::Reordered { distance }
    }
}

/// Interarrival jitter as RFC 3550 §6.4.1 defines it: a running estimate of
/// the mean deviation of the transit-time difference between consecutive
/// arrivals, smoothed with gain 1/16. Transit = arrival time − send time;
/// the two clocks need not agree, only each be monotonic.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Jitter {
    last_transit: Option<i128>,
    jitter_ns: f64,
}

impl Jitter {
    /// Records one arrival (both times in ns on their own clocks).
    #[inline]
    pub fn record(&mut self, send_ns: u64, recv_ns: u64) {
        let transit = i128::from(recv_ns) - i128::from(send_ns);
        if let Some(prev) = self.last_transit {
            let d = (transit - prev).unsigned_abs() as f64;
            self.jitter_ns += (d - self.jitter_ns) / 16.0;
        }
        self.last_transit = Some(transit);
    }

    pub fn ns(&self) -> f64 {
        self.jitter_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    /// The definitions, computed the slow and obvious way.
    fn oracle(arrivals: &[u64]) -> SeqCounts {
        let mut seen = HashSet::new();
        let mut c = SeqCounts::default();
        let mut highest: Option<u64> = None;
        for &s in arrivals {
            if !seen.insert(s) {
                c.duplicates += 1;
                continue;
            }
            c.received += 1;
            match highest {
                Some(h) if s < h => {
                    c.reordered += 1;
                    c.max_reorder_distance = c.max_reorder_distance.max(h - s);
                }
                _ => highest = Some(s),
            }
        }
        c.next_expected = highest.map_or(0, |h| h + 1);
        c
    }

    fn track(arrivals: &[u64], window: u64) -> SeqCounts {
        let mut t = SeqTracker::new(window);
        for &s in arrivals {
            t.record(s);
        }
        t.counts()
    }

    #[test]
    fn known_constructions() {
        // 0..10 with 3 deleted, 5 duplicated, 7 and 8 swapped.
        let a = [0, 1, 2, 4, 5, 5, 6, 8, 7, 9];
        let c = track(&a, 64);
        assert_eq!(c.received, 9);
        assert_eq!(c.lost(10), 1);
        assert_eq!(c.duplicates, 1);
        assert_eq!(c.reordered, 1);
        assert_eq!(c.max_reorder_distance, 1);
        // Tail loss is only known from the sender's count.
        assert_eq!(track(&[0, 1, 2], 64).lost(5), 2);
    }

    #[test]
    fn late_arrivals_do_not_fill_gaps() {
        let mut t = SeqTracker::new(64);
        t.record(0);
        t.record(2);
        t.close();
        assert_eq!(t.record(1), Arrival::Late);
        let c = t.counts();
        assert_eq!((c.received, c.late, c.lost(3)), (2, 1, 1));
    }

    #[test]
    fn beyond_window_stays_lost() {
        let mut t = SeqTracker::new(64);
        t.record(0);
        t.record(200);
        assert_eq!(t.record(5), Arrival::BeyondWindow);
        assert_eq!(t.record(200 - 63), Arrival::Reordered { distance: 63 });
        assert_eq!(t.record(200 - 63), Arrival::Duplicate);
        let c = t.counts();
        assert_eq!((c.received, c.beyond_window), (3, 1));
        assert_eq!(c.lost(201), 198);
    }

    #[test]
    fn counters_near_2_pow_32_do_not_wrap() {
        let base = (1u64 << 32) - 5;
        let mut t = SeqTracker::new(64);
        for s in base..base + 10 {
            if s != (1 << 32) {
                t.record(s);
            }
        }
        t.record(1 << 32);
        let c = t.counts();
        assert_eq!(c.next_expected, base + 10);
        assert_eq!(c.received, 10);
        assert_eq!(c.reordered, 1);
        assert_eq!(c.max_reorder_distance, base + 9 - (1 << 32));
        assert_eq!(c.lost(base + 10), base);
        // And near 2^64 the arithmetic still holds.
        let mut t = SeqTracker::new(64);
        t.record(u64::MAX - 2);
        t.record(u64::MAX - 3);
        assert_eq!(t.counts().reordered, 1);
        // A datagram numbered u64::MAX (a forged header) is counted, with
        // no overflow (a panic in debug builds before: issue 28 review).
        t.record(u64::MAX);
        assert_eq!(t.counts().next_expected, u64::MAX);
    }

    #[test]
    fn jitter_follows_rfc3550() {
        let mut j = Jitter::default();
        j.record(0, 100);
        j.record(1000, 1100);
        assert_eq!(j.ns(), 0.0);
        j.record(2000, 2260);
        assert_eq!(j.ns(), 10.0);
    }

    /// A sequence built from 0..n by deleting, duplicating and permuting.
    fn construction() -> impl Strategy<Value = (u64, Vec<u64>, u64)> {
        (1u64..400, any::<u64>()).prop_flat_map(|(n, base)| {
            let base = base % (u64::MAX - 1000);
            (
                Just(n),
                proptest::collection::vec(any::<bool>(), n as usize),
                proptest::collection::vec((0..n, any::<bool>()), 0..40),
                proptest::collection::vec((0usize..500, 0usize..500), 0..60),
                Just(base),
            )
                .prop_map(|(n, keep, dups, swaps, base)| {
                    let mut v: Vec<u64> = (0..n).filter(|&i| keep[i as usize]).collect();
                    for (d, _) in dups {
                        if keep[d as usize] {
                            let at = (d as usize).min(v.len());
                            v.insert(at, d);
                        }
                    }
                    let len = v.len();
                    if len > 1 {
                        for (a, b) in swaps {
                            v.swap(a % len, b % len);
                        }
                    }
                    (n, v.into_iter().map(|x| x + base).collect(), base)
                })
        })
    }

    proptest! {
        /// Any deletion, duplication and permutation of a sequence gives
        /// exactly the counts of its construction (window larger than it).
        #[test]
        fn tracker_matches_the_definitions((n, arrivals, base) in construction()) {
            let got = track(&arrivals, 1024);
            let want = oracle(&arrivals);
            prop_assert_eq!(got, want);
            let distinct: HashSet<_> = arrivals.iter().collect();
            prop_assert_eq!(got.received, distinct.len() as u64);
            prop_assert_eq!(got.duplicates, (arrivals.len() - distinct.len()) as u64);
            prop_assert_eq!(got.lost(base + n), base + n - distinct.len() as u64);
        }

        /// With a small window, the tracker never miscounts: whatever it
        /// cannot judge is `beyond_window`, never received twice.
        #[test]
        fn small_window_is_conservative((_n, arrivals, _base) in construction()) {
            let got = track(&arrivals, 64);
            let want = oracle(&arrivals);
            prop_assert!(got.received <= want.received);
            prop_assert_eq!(got.received + got.duplicates + got.beyond_window, arrivals.len() as u64);
            prop_assert_eq!(got.next_expected, want.next_expected);
        }
    }
}
