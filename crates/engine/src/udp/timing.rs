//! The UDP stream loops' shared timing: how often an idle receiver looks
//! at its deadline, and the clock every measurement reads (ns since the
//! test's time zero).

use std::time::{Duration, Instant};

/// Receive timeout of UDP receivers: how often an idle receiver checks its
/// drain deadline and the abort flag.
pub const RECV_POLL: Duration = Duration::from_millis(10);

/// Nanoseconds since the test's time zero.
pub fn ns_since(start: Instant) -> u64 {
    start.elapsed().as_nanos() as u64
}
