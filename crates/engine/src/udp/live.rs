//! Live counters of one UDP stream: what its thread publishes for the
//! sampler's interval records while the stream runs.

use std::sync::atomic::{AtomicU64, Ordering};

use linerate_proto::udp_receiver::{LiveCounts, Warmup};

/// Live counters of one UDP stream, for the sampler's interval records.
/// Only the stream's own thread writes them.
#[derive(Debug)]
#[repr(align(64))]
pub struct UdpCounters {
    /// Datagrams sent, or valid datagrams read.
    pub datagrams: AtomicU64,
    pub received: AtomicU64,
    pub next_expected: AtomicU64,
    pub duplicates: AtomicU64,
    pub reordered: AtomicU64,
    pub late: AtomicU64,
    pub corrupt: AtomicU64,
    /// f64 bits of the current jitter, ns.
    pub jitter_bits: AtomicU64,
    pub socket_drops: AtomicU64,
    /// The peer's issued count for this stream, once its SendDone came
    /// (`u64::MAX` before).
    pub issued: AtomicU64,
    /// A sender: beats its receiver sent back ([`linerate_proto::data_beat`]).
    pub peer_beats: AtomicU64,
    /// The peer sender's numbers issued in the warm-up, from its SendDone.
    pub peer_omitted: AtomicU64,
    /// The warm-up's share by the datagrams' stamps (`warmup_on`: the
    /// stream's core tells one), published before the counts above.
    pub warmup_on: AtomicU64,
    pub warmup: [AtomicU64; 7],
}

impl Default for UdpCounters {
    fn default() -> Self {
        UdpCounters {
            datagrams: AtomicU64::new(0),
            received: AtomicU64::new(0),
            next_expected: AtomicU64::new(0),
            duplicates: AtomicU64::new(0),
            reordered: AtomicU64::new(0),
            late: AtomicU64::new(0),
            corrupt: AtomicU64::new(0),
            jitter_bits: AtomicU64::new(0),
            socket_drops: AtomicU64::new(0),
            issued: AtomicU64::new(u64::MAX),
            peer_beats: AtomicU64::new(0),
            peer_omitted: AtomicU64::new(0),
            warmup_on: AtomicU64::new(0),
            warmup: Default::default(),
        }
    }
}

fn load(a: &AtomicU64) -> u64 {
    a.load(Ordering::Relaxed)
}

impl UdpCounters {
    pub fn issued(&self) -> Option<u64> {
        Some(load(&self.issued)).filter(|&v| v != u64::MAX)
    }
    pub fn set_issued(&self, n: u64) {
        self.issued.store(n, Ordering::Relaxed);
    }
    /// The peer sender's warm-up numbers (0 before its SendDone came).
    pub fn peer_omitted(&self) -> u64 {
        load(&self.peer_omitted)
    }
    pub fn set_peer_omitted(&self, n: u64) {
        self.peer_omitted.store(n, Ordering::Relaxed);
    }
    pub fn peer_beats(&self) -> u64 {
        load(&self.peer_beats)
    }
    pub fn jitter_ns(&self) -> f64 {
        f64::from_bits(load(&self.jitter_bits))
    }

    /// A stream publishes its core's counters (once per batch): the
    /// warm-up's share first, so a sampler that reads the datagrams count
    /// sees a share at least as new.
    #[inline]
    pub fn publish(&self, c: &LiveCounts) {
        let st = |a: &AtomicU64, v: u64| a.store(v, Ordering::Relaxed);
        if let Some(w) = c.warmup {
            let v = [
                w.bytes,
                w.datagrams,
                w.received,
                w.duplicates,
                w.reordered,
                w.late,
                w.numbers,
            ];
            for (a, v) in self.warmup.iter().zip(v) {
                st(a, v);
            }
            st(&self.warmup_on, 1);
        }
        self.datagrams.store(c.datagrams, Ordering::Release);
        st(&self.received, c.received);
        st(&self.next_expected, c.next_expected);
        st(&self.duplicates, c.duplicates);
        st(&self.reordered, c.reordered);
        st(&self.late, c.late);
        st(&self.corrupt, c.corrupt);
        st(&self.jitter_bits, c.jitter_ns.to_bits());
        if let Some(d) = c.socket_drops {
            st(&self.socket_drops, d);
        }
    }

    /// The counters now, for the interval cutter: a receiver's warm-up
    /// numbers at its sender's cut once the peer's SendDone told it.
    pub fn totals(&self) -> LiveCounts {
        let counts = self.published();
        match self.issued() {
            Some(issued) => counts.at_sender_cut(self.peer_omitted(), issued),
            None => counts,
        }
    }

    /// The counters as the stream last published them.
    fn published(&self) -> LiveCounts {
        let datagrams = self.datagrams.load(Ordering::Acquire);
        let warmup = (load(&self.warmup_on) == 1).then(|| {
            let [bytes, datagrams, received, duplicates, reordered, late, numbers] =
                self.warmup.each_ref().map(load);
            Warmup {
                bytes,
                datagrams,
                received,
                duplicates,
                reordered,
                late,
                numbers,
            }
        });
        LiveCounts {
            datagrams,
            warmup,
            received: load(&self.received),
            next_expected: load(&self.next_expected),
            reordered: load(&self.reordered),
            duplicates: load(&self.duplicates),
            late: load(&self.late),
            corrupt: load(&self.corrupt),
            socket_drops: Some(load(&self.socket_drops)),
            jitter_ns: self.jitter_ns(),
        }
    }
}
