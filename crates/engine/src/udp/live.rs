//! Live counters of one UDP stream: what its thread publishes for the
//! sampler's interval records while the stream runs.

use std::sync::atomic::{AtomicU64, Ordering};

use linerate_proto::udp_receiver::LiveCounts;

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
    pub fn peer_beats(&self) -> u64 {
        load(&self.peer_beats)
    }
    pub fn jitter_ns(&self) -> f64 {
        f64::from_bits(load(&self.jitter_bits))
    }

    /// A receiver publishes its core's counters (once per batch).
    #[inline]
    pub fn publish(&self, c: &LiveCounts) {
        let st = |a: &AtomicU64, v: u64| a.store(v, Ordering::Relaxed);
        st(&self.datagrams, c.datagrams);
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

    /// The counters now, for the interval cutter.
    pub fn totals(&self) -> LiveCounts {
        LiveCounts {
            datagrams: load(&self.datagrams),
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
