//! Live counters of one UDP stream: what its thread publishes for the
//! sampler's interval records while the stream runs.

use std::sync::atomic::{AtomicU64, Ordering};

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
    pub fn jitter_ns(&self) -> f64 {
        f64::from_bits(load(&self.jitter_bits))
    }
}
