//! Unblocking and stall detection without socket timeouts: the flows of a
//! side register their connections with a [`Watch`], and so do its load
//! streams (`--under-load`), which the side's coordinator checks every
//! [`super::params::WAKE`] through a [`Watchdog`].

use std::net::Shutdown;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::stream::{Signals, StreamCounter, IDLE_LIMIT};
use crate::EngineError;

/// Why the watcher stopped the side.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Stall {
    /// No flow completed a transaction for the idle limit.
    Flows,
    /// A load stream (its id) moved nothing for the idle limit while the
    /// loaded phases ran, or ended in an error: the phases "under load"
    /// would be measured without it.
    Load(u32, String),
}

/// A load stream's state, as the watcher sees it.
const LOAD_WAITING: u8 = 0;
const LOAD_RUNNING: u8 = 1;
const LOAD_DONE: u8 = 2;

/// One load stream of the side: its id, the bytes it moved (its own
/// counter, which its loop counts into), and whether it is moving data.
#[derive(Debug)]
pub(super) struct LoadSlot {
    id: u32,
    pub(super) bytes: StreamCounter,
    state: AtomicU8,
}

/// What the flows of one side share with the thread that watches them.
///
/// Blocking rr sockets have no timeout, so a flow waiting on a silent peer
/// sleeps in the kernel; the watcher ([`Watchdog::check`], every [`super::params::WAKE`])
/// shuts the flows' and load streams' sockets down when the side aborts,
/// and declares a stall (then aborts) when no flow completes a transaction
/// for [`IDLE_LIMIT`], or when a running load stream moves no byte for as
/// long (the flows would go on, and the loaded phases be measured without
/// that load).
#[derive(Debug)]
pub(super) struct Watch {
    /// Per flow: a duplicate of the descriptor of the connection it is
    /// using now (the flows' endpoints are kernel sockets: a blocked call
    /// returns when another thread shuts its socket down).
    socks: Mutex<Vec<Option<OwnedFd>>>,
    /// Per flow: transactions completed, on separate cache lines.
    progress: Vec<StreamCounter>,
    /// The side's load streams, in the order of its load runs.
    load: Vec<LoadSlot>,
    /// Per load stream: a duplicate of its connection while it runs.
    load_socks: Mutex<Vec<Option<OwnedFd>>>,
    stalled: Mutex<Option<Stall>>,
}

impl Watch {
    /// A watch over `flows` flows and the load streams `load` (their ids).
    pub(super) fn new(flows: usize, load: &[u32]) -> Self {
        Watch {
            socks: Mutex::new((0..flows).map(|_| None).collect()),
            progress: (0..flows).map(|_| StreamCounter::default()).collect(),
            load: load
                .iter()
                .map(|&id| LoadSlot {
                    id,
                    bytes: StreamCounter::default(),
                    state: AtomicU8::new(LOAD_WAITING),
                })
                .collect(),
            load_socks: Mutex::new(load.iter().map(|_| None).collect()),
            stalled: Mutex::new(None),
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
        for socks in [&self.socks, &self.load_socks] {
            if let Ok(v) = socks.lock() {
                for s in v.iter().flatten() {
                    let _ = socket2::SockRef::from(s).shutdown(Shutdown::Both);
                }
            }
        }
    }

    /// The error a flow reports after the side was stopped under it.
    pub(super) fn explain(&self, e: EngineError) -> EngineError {
        match self.stalled.lock().ok().and_then(|s| s.clone()) {
            Some(Stall::Flows) => EngineError::Stalled(IDLE_LIMIT.as_secs()),
            Some(Stall::Load(stream, why)) => EngineError::LoadFailed { stream, why },
            None => e,
        }
    }

    /// Why the watcher stopped the side, when the reason was load stream
    /// `id`.
    pub(super) fn load_error(&self, id: u32) -> Option<String> {
        match self.stalled.lock().ok()?.as_ref()? {
            Stall::Load(stream, why) if *stream == id => Some(why.clone()),
            _ => None,
        }
    }

    /// Load stream `i` (of the side's load runs): its byte counter.
    pub(super) fn load_bytes(&self, i: usize) -> Option<&StreamCounter> {
        self.load.get(i).map(|l| &l.bytes)
    }

    /// Load stream `i` starts moving data on `sock`: watched from now.
    pub(super) fn load_started(&self, i: usize, sock: &impl AsFd) {
        if let Ok(mut v) = self.load_socks.lock() {
            if let Some(slot) = v.get_mut(i) {
                *slot = sock.as_fd().try_clone_to_owned().ok();
            }
        }
        if let Some(l) = self.load.get(i) {
            l.state.store(LOAD_RUNNING, Ordering::Release);
        }
    }

    /// Load stream `i` ended: cleanly (no longer watched, its duplicate
    /// dropped so its close is the peer's end of stream), or in an error
    /// while the side ran, which stops the side as a stall does.
    pub(super) fn load_ended(&self, i: usize, error: Option<&str>, signals: &Signals) {
        if let Ok(mut v) = self.load_socks.lock() {
            if let Some(slot) = v.get_mut(i) {
                *slot = None;
            }
        }
        let Some(l) = self.load.get(i) else {
            return;
        };
        l.state.store(LOAD_DONE, Ordering::Release);
        if let (Some(why), false) = (error, signals.aborted()) {
            self.stop(Stall::Load(l.id, why.to_string()), signals);
        }
    }

    /// Records why the side stops (the first reason wins), aborts it and
    /// unblocks its threads.
    fn stop(&self, why: Stall, signals: &Signals) {
        if let Ok(mut s) = self.stalled.lock() {
            s.get_or_insert(why);
        }
        signals.abort();
        self.shutdown_all();
    }
}

/// The watcher's memory between checks.
pub(super) struct Watchdog {
    total: u64,
    since: Instant,
    /// Per load stream: its bytes when last seen to change, and when.
    load: Vec<(u64, Instant)>,
    limit: Duration,
}

impl Watchdog {
    pub(super) fn new() -> Self {
        Self::with_limit(IDLE_LIMIT)
    }

    /// A watchdog that declares a stall after `limit` (tests: shorter than
    /// [`IDLE_LIMIT`]).
    fn with_limit(limit: Duration) -> Self {
        Watchdog {
            total: 0,
            since: Instant::now(),
            load: Vec::new(),
            limit,
        }
    }

    pub(super) fn check(&mut self, watch: &Watch, signals: &Signals) {
        if signals.aborted() {
            // Repeated while flows run, so a socket registered just after an
            // abort is shut down too.
            watch.shutdown_all();
            return;
        }
        let now = Instant::now();
        let total = watch.total();
        if total != self.total {
            self.total = total;
            self.since = now;
        } else if self.since.elapsed() >= self.limit && !watch.progress.is_empty() {
            // (A side with no flows here, a crr server's load, has only
            // its load streams to watch.)
            return watch.stop(Stall::Flows, signals);
        }
        self.load.resize(watch.load.len(), (0, now));
        for (l, (seen, since)) in watch.load.iter().zip(&mut self.load) {
            let bytes = l.bytes.get();
            // Only a running stream is held to the limit: one waiting for
            // the loaded phases, or done, moves nothing by design.
            if l.state.load(Ordering::Acquire) != LOAD_RUNNING || bytes != *seen {
                (*seen, *since) = (bytes, now);
            } else if now.duration_since(*since) >= self.limit {
                let why = EngineError::Stalled(self.limit.as_secs()).to_string();
                return watch.stop(Stall::Load(l.id, why), signals);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_pair::tcp_pair;

    const LIMIT: Duration = Duration::from_millis(60);

    /// Checks `watch` every 5 ms for up to ten limits, the flow completing a
    /// transaction each time and `load` (if any) moving `load_moves` bytes;
    /// true when the side was stopped.
    fn watch_while_flows_move(watch: &Watch, signals: &Signals, load_moves: u64) -> bool {
        let mut dog = Watchdog::with_limit(LIMIT);
        let end = Instant::now() + LIMIT * 10;
        while Instant::now() < end && !signals.aborted() {
            watch.tick(0);
            if let Some(b) = watch.load_bytes(0) {
                b.add(load_moves);
            }
            dog.check(watch, signals);
            std::thread::sleep(Duration::from_millis(5));
        }
        signals.aborted()
    }

    /// Issue 26: a load stream that stops moving data while the loaded
    /// phases run is a stall, seen although every flow keeps completing
    /// transactions; its socket is shut down, and the flows' errors name
    /// it. (Before, the watch held the flows only: the side ran on, and
    /// the phases under load were measured without that load.)
    #[test]
    fn issue_26_a_stalled_load_stream_is_seen_while_the_flows_move() {
        let (a, b) = tcp_pair();
        let watch = Watch::new(1, &[9]);
        let signals = Signals::default();
        watch.load_started(0, &a);
        assert!(watch_while_flows_move(&watch, &signals, 0));
        let e = watch.explain(EngineError::Aborted).to_string();
        assert!(
            e.contains("load stream 9") && e.contains("no data moved"),
            "{e}"
        );
        // The load stream's socket was shut down: its peer reads the end.
        let mut buf = [0u8; 1];
        assert_eq!(std::io::Read::read(&mut &b, &mut buf).expect("read"), 0);
    }

    /// A load stream that moves, waits for the loaded phases, or has
    /// ended cleanly is no stall.
    #[test]
    fn issue_26_a_moving_waiting_or_ended_load_stream_is_no_stall() {
        let (a, _b) = tcp_pair();
        let signals = Signals::default();
        let moving = Watch::new(1, &[9]);
        moving.load_started(0, &a);
        assert!(!watch_while_flows_move(&moving, &signals, 1));
        let waiting = Watch::new(1, &[9]);
        assert!(!watch_while_flows_move(&waiting, &signals, 0));
        let ended = Watch::new(1, &[9]);
        ended.load_started(0, &a);
        ended.load_ended(0, None, &signals);
        assert!(!watch_while_flows_move(&ended, &signals, 0));
    }

    /// A load stream that ends in an error (its own stall, a reset) while
    /// the side runs stops the side at once, its error named.
    #[test]
    fn issue_26_a_failed_load_stream_stops_the_side() {
        let (a, _b) = tcp_pair();
        let watch = Watch::new(1, &[4]);
        let signals = Signals::default();
        watch.load_started(0, &a);
        watch.load_ended(0, Some("peer reset the connection (write)"), &signals);
        assert!(signals.aborted());
        let e = watch.explain(EngineError::Aborted).to_string();
        assert!(e.contains("load stream 4") && e.contains("reset"), "{e}");
    }
}
