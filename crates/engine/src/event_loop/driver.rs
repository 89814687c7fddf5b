//! The one readiness loop every kind of flow runs on: an edge-triggered
//! epoll set over the flows' non-blocking sockets, a queue of the flows
//! that are ready, a bounded turn each (the flow's own logic, through
//! [`LoopFlow::turn`]), the side's stop and abort signals looked at before
//! every turn, and a stall limit when nothing moves.
//!
//! Flows that wait for a time as well as for their socket (a paced UDP
//! sender's next datagram, a UDP receiver's drain deadline) say so with
//! [`Turn::Until`]: one heap of due times per loop, not a timer per flow,
//! and one timerfd that ends the epoll wait at the earliest.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

use rustix::event::epoll;

use crate::stream::{Signals, IDLE_LIMIT};
use crate::EngineError;

/// Longest epoll wait: how often an idle loop looks at its signals.
const WAIT: Duration = Duration::from_millis(20);
/// Events taken per `epoll_wait`.
const EVENTS: usize = 256;

/// What one turn of a flow came to.
#[derive(Debug)]
pub enum Turn {
    /// Still ready (its budget for the turn ran out): back in the queue.
    Again,
    /// Would block: it waits for its socket's next edge.
    Wait,
    /// It waits for its socket's next edge or this time, whichever comes
    /// first.
    Until(Instant),
    /// It has a new socket (a crr flow's next connection): the loop adds
    /// it to the epoll set (which reports it at once if it is ready) and
    /// the flow waits for its edge or this time.
    Watch(Instant),
    /// The flow has ended (its own record says how).
    Done,
}

/// What a flow is to either loop (this readiness loop, and the completion
/// loop of `super::ring`), whatever its kind: whether it has ended, the
/// loop giving up on it, and how far it has moved; written once per kind
/// of flow. Each loop's own trait ([`LoopFlow`], `RingFlow`) adds how the
/// flow takes its turns and hears the side's stop, whose arguments are
/// that loop's (epoll's shared buffers; the ring, to cancel requests).
/// Generic, never `dyn`: each loop is monomorphised per kind of flow.
pub(crate) trait Flow {
    /// False for flows that may rightly see nothing for long (a UDP
    /// receiver whose datagrams are all lost ends at its drain deadline):
    /// their loop has no stall limit.
    const STALLS: bool = true;
    /// True when the flow has ended (before the loop started: it failed to
    /// set up).
    fn ended(&self) -> bool;
    /// The loop gave up on the flow with `e` (nothing moved for
    /// [`IDLE_LIMIT`], its socket could not be watched, its ring failed).
    fn fail(&mut self, e: EngineError);
    /// A count that grows as the flow moves (bytes, transactions).
    fn progress(&self) -> u64;
}

/// A flow the readiness loop drives: its socket, and one bounded turn of
/// its logic.
pub(crate) trait LoopFlow: Flow {
    /// What the flows of one loop share (buffers).
    type Shared;
    /// Its socket now; `None` while it has none (a crr flow between
    /// connections, or before its first).
    fn sock(&self) -> Option<BorrowedFd<'_>>;
    /// The readiness its socket is watched for when added to the set
    /// (edge-triggered always): [`WATCH_ALL`] unless the flow knows it
    /// waits only to read (a crr connection whose request went at once:
    /// watching it for writing too would report it at once, a turn and a
    /// `read` for nothing).
    fn interest(&self) -> epoll::EventFlags {
        WATCH_ALL
    }
    /// An edge of the flow's socket came with `events` (before its turn;
    /// several may come before one turn).
    fn woke(&mut self, _events: epoll::EventFlags) {}
    /// A few calls' worth of the flow's work, without blocking.
    fn turn(&mut self, shared: &mut Self::Shared) -> Turn;
    /// The side's time is up: true when that ended the flow (a sender),
    /// false when it ends on its own (a receiver reads to end of stream).
    fn stop(&mut self, _shared: &mut Self::Shared) -> bool {
        false
    }
}

/// Runs `flows` until each has ended or the side aborts.
pub(crate) fn drive<F: LoopFlow>(flows: &mut [F], shared: &mut F::Shared, signals: &Signals) {
    let mut done: Vec<bool> = flows.iter().map(Flow::ended).collect();
    let mut open = done.iter().filter(|d| !**d).count();
    let ep = match register(flows) {
        Ok(ep) => ep,
        Err(e) => {
            for (f, _) in flows.iter_mut().zip(&done).filter(|(_, d)| !**d) {
                f.fail(EngineError::io(
                    "adding a flow to its epoll set",
                    std::io::Error::new(e.kind(), e.to_string()),
                ));
            }
            return;
        }
    };
    let mut alarm = Alarm::new(&ep);
    // Every flow starts ready: its first call finds out.
    let mut queued: Vec<bool> = done.iter().map(|d| !d).collect();
    let mut ready: VecDeque<usize> = (0..flows.len()).filter(|&i| queued[i]).collect();
    let mut events = Vec::with_capacity(EVENTS);
    let mut timers = Timers::new(flows.len());
    let mut stopped = false;
    let mut drain_at = signals.drain_deadline();
    let mut idle_since: Option<Instant> = None;
    while open > 0 && !signals.aborted() {
        // The side's time is up or its drain deadline became known: every
        // open flow gets a turn to look at it (a waiting receiver has no
        // edge to wake it).
        if signals.drain_deadline() != drain_at {
            drain_at = signals.drain_deadline();
            wake_all(&done, &mut queued, &mut ready);
        }
        while let Some(i) = timers.pop_due(Instant::now()) {
            if !queued[i] && !done[i] {
                queued[i] = true;
                ready.push_back(i);
            }
        }
        let mut progressed = false;
        for _ in 0..ready.len().max(1) {
            // Before every turn: a turn over thousands of flows takes long
            // enough that the end of time must not wait for it.
            if signals.aborted() {
                return;
            }
            if signals.stopping() && !stopped {
                stopped = true;
                for (f, d) in flows.iter_mut().zip(done.iter_mut()).filter(|(_, d)| !**d) {
                    if f.stop(shared) {
                        *d = true;
                        open -= 1;
                    }
                }
                wake_all(&done, &mut queued, &mut ready);
            }
            let Some(i) = ready.pop_front() else { break };
            queued[i] = false;
            if done[i] {
                continue;
            }
            let before = flows[i].progress();
            match flows[i].turn(shared) {
                Turn::Again => {
                    queued[i] = true;
                    ready.push_back(i);
                }
                Turn::Wait => {}
                Turn::Until(due) => timers.arm(i, due),
                Turn::Watch(due) => match watch(&ep, &flows[i], i) {
                    Ok(()) => timers.arm(i, due),
                    Err(e) => {
                        flows[i].fail(EngineError::io(
                            "adding a flow's socket to its epoll set",
                            e,
                        ));
                        done[i] = true;
                        open -= 1;
                    }
                },
                Turn::Done => {
                    done[i] = true;
                    open -= 1;
                }
            }
            progressed |= flows[i].progress() != before;
        }
        // Flows still ready only need new edges; otherwise sleep for one,
        // or until the earliest due time.
        let timeout = match timers.next() {
            _ if !ready.is_empty() => Duration::ZERO,
            Some(due) => alarm.wait_for(due),
            None => WAIT,
        };
        events.clear();
        let woke = wait(&ep, &mut events, timeout);
        for ev in &events {
            if ev.data.u64() == ALARM {
                alarm.rang();
                continue;
            }
            let i = ev.data.u64() as usize;
            if i < flows.len() && !done[i] {
                flows[i].woke(ev.flags);
                if !queued[i] {
                    queued[i] = true;
                    ready.push_back(i);
                }
            }
        }
        if progressed || woke > 0 || !F::STALLS {
            idle_since = None;
        } else if ready.is_empty()
            && idle_since.get_or_insert_with(Instant::now).elapsed() >= IDLE_LIMIT
        {
            // Nothing moved and nothing woke: the peer stalled.
            for (f, _) in flows.iter_mut().zip(&done).filter(|(_, d)| !**d) {
                f.fail(EngineError::Stalled(IDLE_LIMIT.as_secs()));
            }
            return;
        }
    }
}

/// The epoll data of the loop's [`Alarm`] (flows are their positions).
const ALARM: u64 = u64::MAX;

/// The loop's one timerfd, in its epoll set: it wakes the wait at the
/// earliest due time to the nanosecond (epoll's own timeout counts whole
/// milliseconds, rounded up: a paced flow would leave up to 1 ms late).
/// Without it (timerfd refused) the epoll timeout stands in.
struct Alarm {
    fd: Option<OwnedFd>,
    /// The time it is set for, until it rings.
    set: Option<Instant>,
}

impl Alarm {
    fn new(ep: &OwnedFd) -> Alarm {
        use rustix::time::{timerfd_create, TimerfdClockId, TimerfdFlags};
        let flags = TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC;
        let fd = timerfd_create(TimerfdClockId::Monotonic, flags)
            .ok()
            .filter(|fd| {
                let ev = epoll::EventFlags::IN | epoll::EventFlags::ET;
                epoll::add(ep, fd, epoll::EventData::new_u64(ALARM), ev).is_ok()
            });
        Alarm { fd, set: None }
    }

    /// How long to wait in epoll for a flow due at `due`: set to ring
    /// then, the longest wait; else until then by epoll's own timeout.
    fn wait_for(&mut self, due: Instant) -> Duration {
        use rustix::time::{timerfd_settime, Itimerspec, TimerfdTimerFlags};
        let left = due.saturating_duration_since(Instant::now());
        let Some(fd) = &self.fd else {
            return left.min(WAIT);
        };
        if left.is_zero() {
            return Duration::ZERO;
        }
        if self.set != Some(due) {
            let at = Itimerspec {
                it_interval: rustix::time::Timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                },
                it_value: rustix::time::Timespec {
                    tv_sec: left.as_secs() as _,
                    tv_nsec: left.subsec_nanos() as _,
                },
            };
            if timerfd_settime(fd, TimerfdTimerFlags::empty(), &at).is_err() {
                return left.min(WAIT);
            }
            self.set = Some(due);
        }
        WAIT
    }

    /// It rang: read it (so it can ring again) and forget its time.
    fn rang(&mut self) {
        if let Some(fd) = &self.fd {
            let mut n = [0u8; 8];
            let _ = rustix::io::read(fd, &mut n);
        }
        self.set = None;
    }
}

/// The loop's due times: one heap for all its flows, each flow armed at
/// most once (a flow woken by an edge before its time leaves its entry
/// behind, skipped when it comes up).
pub(super) struct Timers {
    heap: BinaryHeap<Reverse<(Instant, usize)>>,
    armed: Vec<Option<Instant>>,
}

impl Timers {
    pub(super) fn new(flows: usize) -> Self {
        Timers {
            heap: BinaryHeap::new(),
            armed: vec![None; flows],
        }
    }

    /// Flow `i` waits until `due` (at the latest).
    pub(super) fn arm(&mut self, i: usize, due: Instant) {
        if self.armed[i] != Some(due) {
            self.armed[i] = Some(due);
            self.heap.push(Reverse((due, i)));
            // Re-arming leaves the old entry behind (a crr flow arms each
            // connection's timeout): rebuilt from the armed times before
            // the stale ones outgrow the flows, so the heap stays O(flows).
            if self.heap.len() > 4 * self.armed.len() + 64 {
                self.heap = self
                    .armed
                    .iter()
                    .enumerate()
                    .filter_map(|(i, a)| a.map(|due| Reverse((due, i))))
                    .collect();
            }
        }
    }

    /// The earliest due time.
    pub(super) fn next(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((due, _))| *due)
    }

    /// A flow whose armed time is at or before `now`, disarmed.
    pub(super) fn pop_due(&mut self, now: Instant) -> Option<usize> {
        while let Some(Reverse((due, i))) = self.heap.peek().copied() {
            if due > now {
                return None;
            }
            self.heap.pop();
            if self.armed[i] == Some(due) {
                self.armed[i] = None;
                return Some(i);
            }
        }
        None
    }
}

/// Queues every open flow that is not queued yet.
pub(super) fn wake_all(done: &[bool], queued: &mut [bool], ready: &mut VecDeque<usize>) {
    for (i, (d, q)) in done.iter().zip(queued.iter_mut()).enumerate() {
        if !*d && !*q {
            *q = true;
            ready.push_back(i);
        }
    }
}

/// One epoll set with every flow's socket, edge-triggered, the flow's
/// position as its data.
fn register<F: LoopFlow>(flows: &[F]) -> std::io::Result<OwnedFd> {
    let ep = epoll::create(epoll::CreateFlags::CLOEXEC)?;
    for (i, f) in flows.iter().enumerate().filter(|(_, f)| !f.ended()) {
        watch(&ep, f, i)?;
    }
    Ok(ep)
}

/// What a flow's socket is watched for unless it says otherwise
/// ([`LoopFlow::interest`]).
pub(crate) const WATCH_ALL: epoll::EventFlags = epoll::EventFlags::IN
    .union(epoll::EventFlags::OUT)
    .union(epoll::EventFlags::RDHUP);

/// Adds flow `i`'s socket, if it has one, to the epoll set `ep`:
/// edge-triggered, for what the flow wants, the flow's position as its
/// data. A socket leaves the set by itself when it is closed.
fn watch<F: LoopFlow>(ep: &OwnedFd, f: &F, i: usize) -> std::io::Result<()> {
    let flags = f.interest() | epoll::EventFlags::ET;
    match f.sock() {
        Some(fd) => Ok(epoll::add(
            ep,
            fd,
            epoll::EventData::new_u64(i as u64),
            flags,
        )?),
        None => Ok(()),
    }
}

/// Waits up to `timeout` for readiness edges; returns how many arrived (an
/// interrupted or failed wait counts as none: the loop looks again).
fn wait(ep: &OwnedFd, events: &mut Vec<epoll::Event>, timeout: Duration) -> usize {
    let ts = rustix::event::Timespec {
        tv_sec: timeout.as_secs() as _,
        tv_nsec: timeout.subsec_nanos() as _,
    };
    epoll::wait(ep, rustix::buffer::spare_capacity(events), Some(&ts)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue_26_timers_come_up_in_order_once_per_arming() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut t = Timers::new(3);
        t.arm(0, ms(5));
        t.arm(1, ms(1));
        t.arm(2, ms(3));
        // Re-armed later: the earlier entry is stale and skipped.
        t.arm(1, ms(9));
        assert_eq!(t.next(), Some(ms(1)));
        assert_eq!(t.pop_due(ms(4)), Some(2));
        assert_eq!(t.pop_due(ms(4)), None);
        assert_eq!(t.pop_due(ms(10)), Some(0));
        assert_eq!(t.pop_due(ms(10)), Some(1));
        assert_eq!(t.pop_due(ms(10)), None);
        assert_eq!(t.next(), None);
    }

    #[test]
    fn issue_26_re_arming_keeps_the_heap_as_small_as_the_flows() {
        let t0 = Instant::now();
        let mut t = Timers::new(2);
        // A crr flow arms each of 10,000 connections' timeouts in turn.
        for k in 1..=10_000u64 {
            t.arm(0, t0 + Duration::from_micros(k));
        }
        t.arm(1, t0 + Duration::from_secs(1));
        assert!(t.heap.len() <= 4 * 2 + 64 + 1, "{}", t.heap.len());
        let end = t0 + Duration::from_secs(2);
        assert_eq!(t.pop_due(end), Some(0));
        assert_eq!(t.pop_due(end), Some(1));
        assert_eq!(t.pop_due(end), None);
    }
}
