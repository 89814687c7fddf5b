//! The interval cutter, without I/O: when a side's sampler wakes, when it
//! tells the senders to stop, and how the streams' cumulative counters are
//! cut into per-interval records.
//!
//! Boundaries fall every `interval` up to `omit`, at `omit` itself (so no
//! interval straddles the end of the warm-up), then every `interval` after
//! it. An interval is `omitted` when its planned boundary is at or before
//! `omit`; the counters at the cut at `omit` ([`IntervalCutter::at_omit`])
//! are what each stream moved in the warm-up, and [`leave_out_warmup`]
//! takes them out of the stream's totals, so every report and format
//! (linerate's, iperf3's) counts the measured period only, exactly as the
//! non-omitted intervals add up. Streams that tell their warm-up by the
//! datagrams' send stamps (linerate's UDP: [`Warmup`]) are cut by those
//! instead of this side's clock, so both ends leave out the same
//! datagrams: an omitted interval counts the warm-up's datagrams, a
//! measured one the others (the first measured interval all of them since
//! the start), and the totals leave out the warm-up's final counts. Loss
//! is split by number the same way: numbers below the sender's cut are
//! the warm-up's ([`Warmup::numbers`]: until the sender's SendDone names
//! its cut, the lowest measured number seen), so warm-up datagrams lost on
//! the link just before the cut are loss of no measured interval and of
//! no total. The last interval of a timed test is not cut at the planned end:
//! it runs to the real end of the streams (the senders' final write, the
//! receivers' drain) so the intervals always add up to the totals.
//!
//! The sampler passes `now` (ns since Start) and, for each cut, every
//! stream's cumulative counters at that moment ([`Sample`]).

use crate::measure::{
    IntervalMeasurement, IntervalStream, Role, StreamMeasurement, TcpInfo, UdpInterval,
};
use crate::udp_receiver::{LiveCounts, Warmup};

/// One stream's counters at a cut.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Sample {
    /// Bytes moved so far.
    pub bytes: u64,
    /// UDP streams: their live counters (a sender's only count datagrams).
    pub udp: Option<LiveCounts>,
    /// TCP senders: `TCP_INFO` now.
    pub tcp: Option<TcpInfo>,
}

/// A stream as the cutter sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CutStream {
    pub id: u32,
    pub role: Role,
}

/// The interval schedule and the counters at the last cut.
#[derive(Debug, Clone)]
pub struct IntervalCutter {
    streams: Vec<CutStream>,
    /// Counters at the last cut.
    prev: Vec<Sample>,
    /// Counters at the cut at `omit` (zeros until then, or without one).
    at_omit: Vec<Sample>,
    omit_ns: u64,
    interval_ns: u64,
    /// When senders stop (`omit + time`); `None`: byte- or count-limited.
    stop_at: Option<u64>,
    stopped: bool,
    /// The next planned boundary.
    boundary: u64,
    /// End of the last interval cut.
    prev_end: u64,
    /// Whether the last interval cut was omitted (with a warm-up, before
    /// the first cut too).
    prev_omitted: bool,
}

/// The boundary after `prev`: every `interval` up to `omit`, a cut at
/// `omit`, then every `interval` after it.
pub fn next_boundary(prev: u64, omit: u64, interval: u64) -> u64 {
    if prev < omit {
        prev.saturating_add(interval).min(omit)
    } else {
        prev.saturating_add(interval)
    }
}

impl IntervalCutter {
    /// A cutter for `streams` (in the order samples will come), with
    /// intervals of `interval_ns` (at least 1), the warm-up `omit_ns`, and
    /// senders stopping at `stop_at_ns` for timed tests.
    pub fn new(
        streams: Vec<CutStream>,
        omit_ns: u64,
        interval_ns: u64,
        stop_at_ns: Option<u64>,
    ) -> Self {
        let interval_ns = interval_ns.max(1);
        IntervalCutter {
            prev: vec![Sample::default(); streams.len()],
            at_omit: vec![Sample::default(); streams.len()],
            streams,
            omit_ns,
            interval_ns,
            stop_at: stop_at_ns,
            stopped: false,
            boundary: next_boundary(0, omit_ns, interval_ns),
            prev_end: 0,
            prev_omitted: omit_ns > 0,
        }
    }

    /// Whether the boundary ahead is at or past the stop time: only the end
    /// of the streams is left to cut.
    fn last(&self) -> bool {
        self.stop_at.is_some_and(|s| self.boundary >= s)
    }

    /// When the sampler should wake next, seen at `now`: the next boundary
    /// or the stop time, whichever comes first; once only the end is left,
    /// an interval from now (the caller's deadline bounds that wait).
    pub fn wake_at(&self, now: u64) -> u64 {
        let mut wake = if self.last() {
            now.saturating_add(self.interval_ns)
        } else {
            self.boundary
        };
        if let Some(s) = self.stop_at.filter(|_| !self.stopped) {
            wake = wake.min(s);
        }
        wake
    }

    /// True once, at the first call at or after the stop time: tell the
    /// senders to stop.
    pub fn take_stop(&mut self, now: u64) -> bool {
        if !self.stopped && self.stop_at.is_some_and(|s| now >= s) {
            self.stopped = true;
            return true;
        }
        false
    }

    /// Whether a boundary has passed at `now` and must be cut.
    pub fn cut_due(&self, now: u64) -> bool {
        now >= self.boundary && !self.last()
    }

    /// Cuts the interval ending at `now` from `samples` (one per stream,
    /// taken now) and moves to the next boundary.
    pub fn cut(&mut self, now: u64, samples: &[Sample]) -> IntervalMeasurement {
        let planned = self.boundary;
        let rec = self.record(now, planned, samples);
        if planned == self.omit_ns {
            self.at_omit.clone_from(&self.prev);
        }
        self.boundary = next_boundary(planned, self.omit_ns, self.interval_ns);
        rec
    }

    /// The tail after the last cut, ending at `end` (the streams' real end,
    /// or the last cut if later), when anything moved in it.
    pub fn finish(&mut self, end: u64, samples: &[Sample]) -> Option<IntervalMeasurement> {
        let end = end.max(self.prev_end);
        let moved = self.prev.iter().zip(samples).any(|(p, s)| {
            let (a, b) = (p.udp.unwrap_or_default(), s.udp.unwrap_or_default());
            // The sender's cut, known at the end, may move loss (below).
            let cut = |c: &LiveCounts| c.warmup.map(|w| w.numbers);
            s.bytes > p.bytes
                || a.datagrams != b.datagrams
                || a.corrupt != b.corrupt
                || cut(&a) != cut(&b)
        });
        moved.then(|| self.record(end, end, samples))
    }

    /// Each stream's warm-up (zeros without one): what [`leave_out_warmup`]
    /// takes out of its totals. A stream cut by this side's clock: its
    /// counters at the cut at `omit`; one cut by its datagrams' stamps:
    /// the warm-up's counts as of the last sample (its end, once
    /// [`Self::finish`] saw it), its corrupt datagrams and socket drops
    /// (no stamp tells whose they are) still by the clock.
    pub fn at_omit(&self) -> Vec<Sample> {
        self.at_omit
            .iter()
            .zip(&self.prev)
            .map(|(clock, last)| match last.udp.and_then(|u| u.warmup) {
                Some(w) => {
                    let c = clock.udp.unwrap_or_default();
                    Sample {
                        bytes: w.bytes,
                        udp: Some(LiveCounts {
                            corrupt: c.corrupt,
                            socket_drops: c.socket_drops,
                            ..warmup_counts(&w)
                        }),
                        tcp: None,
                    }
                }
                None => *clock,
            })
            .collect()
    }

    fn record(&mut self, end: u64, planned: u64, samples: &[Sample]) -> IntervalMeasurement {
        let omitted = planned <= self.omit_ns && self.omit_ns > 0;
        // The first measured interval holds every measured datagram so far.
        let first_measured = self.prev_omitted && !omitted;
        let streams = self
            .streams
            .iter()
            .zip(self.prev.iter_mut())
            .zip(samples)
            .map(|((st, prev), now)| {
                let before = std::mem::replace(prev, *now);
                let before = match first_measured {
                    true => measured_baseline(&before),
                    false => share(&before, omitted),
                };
                let now = share(now, omitted);
                IntervalStream {
                    id: st.id,
                    bytes: now.bytes.saturating_sub(before.bytes),
                    tcp: now.tcp,
                    udp: now
                        .udp
                        .map(|u| udp_interval(st.role, &before.udp.unwrap_or_default(), &u)),
                }
            })
            .collect();
        let rec = IntervalMeasurement {
            start_ns: self.prev_end,
            end_ns: end,
            omitted,
            streams,
            cpu: None,
        };
        self.prev_end = end;
        self.prev_omitted = omitted;
        rec
    }
}

/// A warm-up's counts as a stream's live counters.
fn warmup_counts(w: &Warmup) -> LiveCounts {
    LiveCounts {
        datagrams: w.datagrams,
        received: w.received,
        next_expected: w.numbers,
        duplicates: w.duplicates,
        reordered: w.reordered,
        late: w.late,
        warmup: Some(*w),
        ..LiveCounts::default()
    }
}

/// The share of `s` an interval counts: for a stream cut by its
/// datagrams' stamps, the warm-up's counts (an `omitted` interval) or the
/// rest (a measured one); for one cut by the clock, all of it.
fn share(s: &Sample, omitted: bool) -> Sample {
    let Some((u, w)) = s.udp.and_then(|u| Some((u, u.warmup?))) else {
        return *s;
    };
    let (bytes, counts) = if omitted {
        (w.bytes, warmup_counts(&w))
    } else {
        let less = |a: u64, b: u64| a.saturating_sub(b);
        let counts = LiveCounts {
            datagrams: less(u.datagrams, w.datagrams),
            received: less(u.received, w.received),
            next_expected: less(u.next_expected, w.numbers),
            duplicates: less(u.duplicates, w.duplicates),
            reordered: less(u.reordered, w.reordered),
            late: less(u.late, w.late),
            ..u
        };
        (less(s.bytes, w.bytes), counts)
    };
    Sample {
        bytes,
        udp: Some(LiveCounts {
            corrupt: u.corrupt,
            jitter_ns: u.jitter_ns,
            socket_drops: u.socket_drops,
            ..counts
        }),
        tcp: s.tcp,
    }
}

/// What the first measured interval counts from: nothing of a stream cut
/// by its datagrams' stamps (every measured datagram so far is in it, on
/// whichever side of this side's omit timer it arrived), but its corrupt
/// datagrams and socket drops since the last cut; a stream cut by the
/// clock, its counters at the last cut.
fn measured_baseline(before: &Sample) -> Sample {
    match before.udp {
        Some(u) if u.warmup.is_some() => Sample {
            bytes: 0,
            udp: Some(LiveCounts {
                corrupt: u.corrupt,
                socket_drops: u.socket_drops,
                warmup: u.warmup,
                ..LiveCounts::default()
            }),
            tcp: before.tcp,
        },
        _ => *before,
    }
}

/// A stream's totals `m` with what it counted in the warm-up (`at`, from
/// [`IntervalCutter::at_omit`]) left out, as iperf3 restarts its counters
/// there: bytes (kept apart in `omitted_bytes`), TCP retransmits, UDP
/// datagrams sent and read, and a receiver's sequence accounts. A
/// receiver's measured numbers start at the sender's cut (linerate's
/// datagrams, from its SendDone, as the intervals' last sample:
/// [`Warmup`]) or, cut by the clock, above the highest
/// one seen by the end of the warm-up (iperf3's rule), so datagrams sent
/// in the warm-up are never counted lost. Jitter, an average that forgets the warm-up within
/// a few dozen datagrams, is left as it ends.
pub fn leave_out_warmup(mut m: StreamMeasurement, at: &Sample) -> StreamMeasurement {
    m.omitted_bytes = at.bytes.min(m.bytes);
    m.bytes -= m.omitted_bytes;
    if let (Some(t), Some(a)) = (m.tcp.as_mut(), at.tcp) {
        t.retransmits = t.retransmits.saturating_sub(a.retransmits);
    }
    let u = at.udp.unwrap_or_default();
    if let Some(s) = m.udp_send.as_mut() {
        s.datagrams = s.datagrams.saturating_sub(u.datagrams);
    }
    if let Some(r) = m.udp_recv.as_mut() {
        let less = |n: &mut u64, by: u64| *n = n.saturating_sub(by);
        less(&mut r.datagrams, u.datagrams);
        less(&mut r.received, u.received);
        less(&mut r.duplicates, u.duplicates);
        less(&mut r.reordered, u.reordered);
        less(&mut r.late, u.late);
        less(&mut r.corrupt, u.corrupt);
        if let (Some(d), Some(b)) = (r.socket_drops.as_mut(), u.socket_drops) {
            less(d, b);
        }
        // `issued` counts from `omitted_numbers` here: the sender's cut, or
        // 0 (a stream cut by the clock, or a sender that did not say).
        let issued = r.issued.map(|i| i + r.omitted_numbers);
        if r.omitted_numbers == 0 {
            r.omitted_numbers = u.next_expected;
        }
        r.count_loss(issued);
    }
    m
}

/// Numbers missing below the highest seen.
fn missing(c: &LiveCounts) -> u64 {
    c.next_expected.saturating_sub(c.received)
}

/// A UDP stream's share of one interval.
fn udp_interval(role: Role, before: &LiveCounts, now: &LiveCounts) -> UdpInterval {
    let d = |f: fn(&LiveCounts) -> u64| Some(f(now).saturating_sub(f(before)));
    let datagrams = now.datagrams.saturating_sub(before.datagrams);
    match role {
        Role::Sender => UdpInterval {
            datagrams,
            ..UdpInterval::default()
        },
        Role::Receiver => UdpInterval {
            datagrams,
            received: d(|s| s.received),
            lost: Some(missing(now) as i64 - missing(before) as i64),
            reordered: d(|s| s.reordered),
            duplicates: d(|s| s.duplicates),
            late: d(|s| s.late),
            corrupt: d(|s| s.corrupt),
            jitter_ns: Some(now.jitter_ns),
            socket_drops: d(|s| s.socket_drops.unwrap_or(0)),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MS: u64 = 1_000_000;
    const S: u64 = 1_000 * MS;

    #[test]
    fn boundaries_cut_at_omit_then_every_interval() {
        let mut b = Vec::new();
        let mut p = 0;
        for _ in 0..5 {
            p = next_boundary(p, 1500 * MS, S);
            b.push(p);
        }
        assert_eq!(b, vec![S, 1500 * MS, 2500 * MS, 3500 * MS, 4500 * MS]);
        assert_eq!(next_boundary(0, 0, S), S);
    }

    fn tcp_sender(id: u32) -> CutStream {
        CutStream {
            id,
            role: Role::Sender,
        }
    }

    #[test]
    fn a_udp_receiver_interval_is_the_change_since_the_last_cut() {
        let mut c = IntervalCutter::new(
            vec![CutStream {
                id: 1,
                role: Role::Receiver,
            }],
            0,
            S,
            Some(3 * S),
        );
        let at = |received, next_expected, jitter_ns| Sample {
            bytes: received * 100,
            udp: Some(LiveCounts {
                datagrams: received,
                received,
                next_expected,
                jitter_ns,
                ..LiveCounts::default()
            }),
            tcp: None,
        };
        let r = c.cut(S, &[at(10, 12, 5.0)]);
        let u = r.streams[0].udp.clone().expect("udp");
        assert_eq!(
            (u.received, u.lost, u.jitter_ns),
            (Some(10), Some(2), Some(5.0))
        );
        // The two missing ones arrived late in the order: loss goes down.
        let r = c.cut(2 * S, &[at(14, 14, 7.0)]);
        let u = r.streams[0].udp.clone().expect("udp");
        assert_eq!((u.received, u.lost), (Some(4), Some(-2)));
        assert_eq!((r.start_ns, r.end_ns, r.omitted), (S, 2 * S, false));
        // Nothing moved after: no tail.
        assert!(c.finish(2 * S + 5, &[at(14, 14, 7.0)]).is_none());
    }

    /// Issue 28: a `-O 1` warm-up is counted in no total. A UDP receiver
    /// that lost 3 of the warm-up's first 15 numbers and none after, and a
    /// TCP sender with retransmits on both sides of the omit's end: each
    /// stream's totals equal what its non-omitted intervals add up to, and
    /// the UDP loss is the measured period's (none), not the warm-up's.
    #[test]
    fn issue_28_omit_is_left_out_of_the_totals() {
        let rx = CutStream {
            id: 1,
            role: Role::Receiver,
        };
        let mut c = IntervalCutter::new(vec![rx, tcp_sender(2)], S, S, Some(3 * S));
        let at = |received, next_expected, retransmits| {
            [
                Sample {
                    bytes: received * 100,
                    udp: Some(LiveCounts {
                        datagrams: received,
                        received,
                        next_expected,
                        ..LiveCounts::default()
                    }),
                    tcp: None,
                },
                Sample {
                    bytes: received * 1000,
                    udp: None,
                    tcp: Some(TcpInfo {
                        retransmits,
                        ..TcpInfo::default()
                    }),
                },
            ]
        };
        let mut records = vec![c.cut(S, &at(12, 15, 7))];
        records.push(c.cut(2 * S, &at(32, 35, 9)));
        let end = at(52, 55, 20);
        records.extend(c.finish(3 * S, &end));
        assert!(records[0].omitted && !records[1].omitted && !records[2].omitted);
        let measured = |k: usize| -> u64 {
            records
                .iter()
                .filter(|r| !r.omitted)
                .map(|r| r.streams[k].bytes)
                .sum()
        };
        // The receiver's totals as its engine counted them: from 0, and the
        // sender's whole count of 55 numbers.
        let mut recv = crate::measure::UdpRecv {
            datagrams: 52,
            received: 52,
            next_expected: 55,
            ..Default::default()
        };
        recv.count_loss(Some(55));
        let rx_total = StreamMeasurement {
            id: 1,
            bytes: end[0].bytes,
            udp_recv: Some(recv),
            ..StreamMeasurement::default()
        };
        assert_eq!(rx_total.udp_recv.as_ref().and_then(|r| r.lost), Some(3));
        let rx = leave_out_warmup(rx_total, &c.at_omit()[0]);
        assert_eq!((rx.bytes, rx.omitted_bytes), (measured(0), 1200));
        let r = rx.udp_recv.expect("udp");
        assert_eq!(
            (r.datagrams, r.received, r.omitted_numbers, r.issued, r.lost),
            (40, 40, 15, Some(40), Some(0))
        );
        let tx_total = StreamMeasurement {
            id: 2,
            bytes: end[1].bytes,
            tcp: end[1].tcp,
            ..StreamMeasurement::default()
        };
        let tx = leave_out_warmup(tx_total, &c.at_omit()[1]);
        assert_eq!((tx.bytes, tx.omitted_bytes), (measured(1), 12_000));
        assert_eq!(tx.tcp.map(|t| t.retransmits), Some(13));
        // Without a warm-up nothing is taken out.
        let c = IntervalCutter::new(vec![tcp_sender(3)], 0, S, Some(S));
        let m = StreamMeasurement {
            bytes: 9,
            ..StreamMeasurement::default()
        };
        assert_eq!(leave_out_warmup(m.clone(), &c.at_omit()[0]), m);
    }

    proptest! {
        /// On any schedule and any (monotone) progress: the intervals are
        /// contiguous from 0, add up to the totals, the omitted ones come
        /// first and hold exactly the omitted bytes, the senders are told to
        /// stop once, and nothing is cut past the planned end except the tail.
        #[test]
        fn issue_7_intervals_tile_the_test_and_add_up(
            omit_ms in prop_oneof![Just(0u64), 1u64..3000],
            interval_ms in 100u64..1500,
            time_ms in proptest::option::of(1u64..5000),
            oversleep in proptest::collection::vec(0u64..5 * MS, 1..8),
            rates in proptest::collection::vec(0u64..1000, 1..4),
            tail_ms in 0u64..500,
        ) {
            let (omit, interval) = (omit_ms * MS, interval_ms * MS);
            let stop_at = time_ms.map(|t| omit + t * MS);
            let streams: Vec<CutStream> = (0..rates.len() as u32).map(tcp_sender).collect();
            let mut c = IntervalCutter::new(streams, omit, interval, stop_at);
            let bytes_at = |t: u64| -> Vec<Sample> {
                rates.iter().map(|r| Sample { bytes: r * t / MS, ..Sample::default() }).collect()
            };
            // Byte-limited tests end on their own: say after 4 s.
            let end = stop_at.unwrap_or(4 * S) + tail_ms * MS;
            let (mut now, mut records, mut stops, mut i) = (0u64, Vec::new(), 0, 0);
            while now < end {
                // The clock never goes back, even when a wake time has passed.
                now = c.wake_at(now).max(now).saturating_add(oversleep[i % oversleep.len()]).min(end);
                i += 1;
                if c.take_stop(now) {
                    stops += 1;
                    prop_assert!(stop_at.is_some_and(|s| now >= s));
                }
                if c.cut_due(now) {
                    if let Some(s) = stop_at {
                        prop_assert!(now < s + 5 * MS + interval);
                    }
                    records.push(c.cut(now, &bytes_at(now)));
                }
            }
            records.extend(c.finish(end, &bytes_at(end)));
            prop_assert_eq!(stops, usize::from(stop_at.is_some()));
            let mut prev = 0;
            for r in &records {
                prop_assert_eq!(r.start_ns, prev);
                prop_assert!(r.end_ns >= r.start_ns);
                prev = r.end_ns;
            }
            let totals = bytes_at(end);
            for (k, t) in totals.iter().enumerate() {
                let sum: u64 = records.iter().map(|r| r.streams[k].bytes).sum();
                prop_assert_eq!(sum, t.bytes);
                let omitted: u64 = records.iter().filter(|r| r.omitted).map(|r| r.streams[k].bytes).sum();
                prop_assert_eq!(c.at_omit()[k].bytes, omitted);
            }
            let first_kept = records.iter().position(|r| !r.omitted).unwrap_or(records.len());
            prop_assert!(records[first_kept..].iter().all(|r| !r.omitted));
            if omit == 0 {
                prop_assert!(records.iter().all(|r| !r.omitted));
            }
        }
    }
}
