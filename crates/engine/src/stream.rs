//! What one data stream's thread shares with the rest of its side: the
//! progress counter the sampler reads, the stop/abort/drain signals, how a
//! stream loop ended, and the idle-limit bookkeeping every loop uses.
//!
//! Loops do no allocation and read no clock while data moves: progress is
//! published through a per-stream atomic counter that the runner samples, and
//! stop/abort requests arrive through shared flags checked once per call.
//! Sockets carry a short I/O timeout ([`POLL`]) so a loop blocked on a
//! stalled peer still notices those flags.

use std::io::ErrorKind;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::EngineError;

/// I/O timeout of data sockets: how often a blocked loop checks its flags.
pub const POLL: Duration = Duration::from_millis(100);
/// A stream on which nothing moves for this long has failed.
pub const IDLE_LIMIT: Duration = Duration::from_secs(30);

/// Bytes moved on one stream, on its own cache line so streams on different
/// cores do not share one.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct StreamCounter {
    bytes: AtomicU64,
}

impl StreamCounter {
    #[inline]
    pub fn add(&self, n: u64) {
        // Only this stream's thread writes; Relaxed is enough for a sampled total.
        self.bytes.fetch_add(n, Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }
}

/// Requests from the runner to every stream of one side.
#[derive(Debug)]
pub struct Signals {
    /// Senders: finish cleanly now (time is up).
    stop: AtomicBool,
    /// Everyone: the test failed, drop out at once.
    abort: AtomicBool,
    /// UDP receivers: stop at this many ns after Start (`u64::MAX`: not yet
    /// known; set when the peer's senders have finished).
    drain_at_ns: AtomicU64,
}

impl Default for Signals {
    fn default() -> Self {
        Signals {
            stop: AtomicBool::new(false),
            abort: AtomicBool::new(false),
            drain_at_ns: AtomicU64::new(u64::MAX),
        }
    }
}

impl Signals {
    /// UDP receivers stop reading `ns` after Start.
    pub fn drain_at(&self, ns: u64) {
        self.drain_at_ns.store(ns, Ordering::Relaxed);
    }
    /// The drain deadline, ns after Start (`u64::MAX` while unknown).
    #[inline]
    pub fn drain_deadline(&self) -> u64 {
        self.drain_at_ns.load(Ordering::Relaxed)
    }
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }
    pub fn abort(&self) {
        self.abort.store(true, Ordering::Relaxed);
    }
    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
    pub fn aborted(&self) -> bool {
        self.abort.load(Ordering::Relaxed)
    }
}

/// How a stream loop ended.
#[derive(Debug)]
pub struct StreamEnd {
    /// Read, write, send or receive calls made.
    pub calls: u64,
    /// Busy polling only: waits that spun their whole budget and then
    /// slept in `poll(2)`.
    pub poll_sleeps: Option<u64>,
    pub result: Result<(), EngineError>,
}

impl StreamEnd {
    /// A loop that could not start: no calls made.
    pub fn failed(e: EngineError) -> StreamEnd {
        StreamEnd {
            calls: 0,
            poll_sleeps: None,
            result: Err(e),
        }
    }
}

/// Tracks how long a loop has gone without progress; reads the clock only
/// when an I/O call timed out.
pub(crate) struct Idle(pub(crate) Option<Instant>);

impl Idle {
    pub(crate) fn progressed(&mut self) {
        self.0 = None;
    }
    pub(crate) fn timed_out(&mut self) -> Result<(), EngineError> {
        let since = *self.0.get_or_insert_with(Instant::now);
        if since.elapsed() >= IDLE_LIMIT {
            return Err(EngineError::Stalled(IDLE_LIMIT.as_secs()));
        }
        Ok(())
    }
}

/// A call that timed out (socket timeout) or would block (non-blocking).
pub(crate) fn is_timeout(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

/// A failed stream call as an [`EngineError`]: a reset or broken pipe is
/// the peer's doing, anything else an I/O error of `what`.
pub(crate) fn map_err(what: &str, e: std::io::Error) -> EngineError {
    match e.kind() {
        ErrorKind::BrokenPipe | ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted => {
            EngineError::PeerReset(format!("{what}: {e}"))
        }
        _ => EngineError::io(what, e),
    }
}
