//! Unblocking and stall detection without socket timeouts: the flows of a
//! side register their connections with a [`Watch`], which the side's
//! coordinator checks every [`super::params::WAKE`] through a [`Watchdog`].

use std::net::Shutdown;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use crate::stream::{Signals, StreamCounter, IDLE_LIMIT};
use crate::EngineError;

/// What the flows of one side share with the thread that watches them.
///
/// Blocking rr sockets have no timeout, so a flow waiting on a silent peer
/// sleeps in the kernel; the watcher ([`Watchdog::check`], every [`super::params::WAKE`])
/// shuts the flows' sockets down when the side aborts, and declares a stall
/// (then aborts) when no flow completes a transaction for [`IDLE_LIMIT`].
#[derive(Debug)]
pub(super) struct Watch {
    /// Per flow: a duplicate of the descriptor of the connection it is
    /// using now (the flows' endpoints are kernel sockets: a blocked call
    /// returns when another thread shuts its socket down).
    socks: Mutex<Vec<Option<OwnedFd>>>,
    /// Per flow: transactions completed, on separate cache lines.
    progress: Vec<StreamCounter>,
    stalled: AtomicBool,
}

impl Watch {
    pub(super) fn new(flows: usize) -> Self {
        Watch {
            socks: Mutex::new((0..flows).map(|_| None).collect()),
            progress: (0..flows).map(|_| StreamCounter::default()).collect(),
            stalled: AtomicBool::new(false),
        }
    }

    pub(super) fn register(&self, flow: u32, sock: &impl AsFd) {
        if let Ok(mut v) = self.socks.lock() {
            if let Some(slot) = v.get_mut(flow as usize) {
                *slot = sock.as_fd().try_clone_to_owned().ok();
            }
        }
    }

    /// Drops the flow's duplicate: the connection must close when the flow
    /// closes it (the peer waits for that close to end the phase).
    pub(super) fn release(&self, flow: u32) {
        if let Ok(mut v) = self.socks.lock() {
            if let Some(slot) = v.get_mut(flow as usize) {
                *slot = None;
            }
        }
    }

    #[inline]
    pub(super) fn tick(&self, flow: u32) {
        if let Some(c) = self.progress.get(flow as usize) {
            c.add(1);
        }
    }

    pub(super) fn total(&self) -> u64 {
        self.progress.iter().map(StreamCounter::get).sum()
    }

    pub(super) fn shutdown_all(&self) {
        if let Ok(v) = self.socks.lock() {
            for s in v.iter().flatten() {
                let _ = socket2::SockRef::from(s).shutdown(Shutdown::Both);
            }
        }
    }

    /// The error a flow reports after the side was stopped under it.
    pub(super) fn explain(&self, e: EngineError) -> EngineError {
        if self.stalled.load(Ordering::Acquire) {
            EngineError::Stalled(IDLE_LIMIT.as_secs())
        } else {
            e
        }
    }
}

/// The watcher's memory between checks.
pub(super) struct Watchdog {
    total: u64,
    since: Instant,
}

impl Watchdog {
    pub(super) fn new() -> Self {
        Watchdog {
            total: 0,
            since: Instant::now(),
        }
    }

    pub(super) fn check(&mut self, watch: &Watch, signals: &Signals) {
        if signals.aborted() {
            // Repeated while flows run, so a socket registered just after an
            // abort is shut down too.
            watch.shutdown_all();
            return;
        }
        let total = watch.total();
        if total != self.total {
            self.total = total;
            self.since = Instant::now();
        } else if self.since.elapsed() >= IDLE_LIMIT {
            watch.stalled.store(true, Ordering::Release);
            signals.abort();
            watch.shutdown_all();
        }
    }
}
