//! One side's CPU per interval, from the process's own `/proc` counters:
//! the side's user and kernel time, and its busiest thread's share of a
//! core — a thread near 100% had a core to itself and was the limit, however
//! idle the rest of the host.
//!
//! `/proc/self/stat` and `/proc/self/task/TID/stat` count clock ticks
//! (USER_HZ, usually 100 a second), so a 1 s interval is good to about 1% of
//! a core. Process scope: the whole process, every thread of it. Threads
//! scope (client and server share a process): only this side's threads, the
//! sampler and its streams, whose ids the stream threads publish as they
//! start. A stream thread reads its own counters as it ends, since its
//! `/proc` entry goes with it; the side's last interval is cut after that.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Instant;

use linerate_proto::measure::IntervalCpu;

use super::params::CpuScope;
use crate::cpu::ticks_to_ns;

/// User and kernel clock ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Ticks {
    pub(crate) user: u64,
    pub(crate) system: u64,
}

impl Ticks {
    fn total(self) -> u64 {
        self.user + self.system
    }

    fn since(self, earlier: Ticks) -> Ticks {
        Ticks {
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
        }
    }
}

impl std::ops::Add for Ticks {
    type Output = Ticks;
    fn add(self, o: Ticks) -> Ticks {
        Ticks {
            user: self.user + o.user,
            system: self.system + o.system,
        }
    }
}

/// Parses a `/proc/…/stat` line: the name (between the first `(` and the
/// last `)`, since a name may hold either) and utime, stime (fields 14
/// and 15; field 3, the state, is the first after the name).
pub(crate) fn parse_stat(text: &str) -> Option<(String, Ticks)> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let name = text.get(open + 1..close)?.to_string();
    let mut fields = text.get(close + 1..)?.split_whitespace();
    let user = fields.nth(11)?.parse().ok()?;
    let system = fields.next()?.parse().ok()?;
    Some((name, Ticks { user, system }))
}

fn read_stat(path: &str) -> Option<(String, Ticks)> {
    parse_stat(&std::fs::read_to_string(path).ok()?)
}

/// The calling thread's counters now.
pub(crate) fn own_thread_ticks() -> Option<Ticks> {
    read_stat("/proc/thread-self/stat").map(|(_, t)| t)
}

/// The calling thread's id.
pub(crate) fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::gettid() }
}

/// A stream thread as the watch knows it.
#[derive(Debug)]
pub(super) struct Watched {
    /// Set by the thread as it starts (0 until then).
    pub(super) tid: Arc<AtomicI32>,
    /// `stream N sender|receiver`.
    pub(super) label: String,
    /// Its counters as it ended.
    pub(super) last: Option<Ticks>,
}

/// Every thread's counters at one reading, by thread id.
type Reading = HashMap<i32, (String, Ticks)>;

/// The side's counters at the previous reading.
#[derive(Debug)]
pub(super) struct CpuWatch {
    scope: CpuScope,
    sampler_tid: i32,
    /// At the start: threads not there then count from zero.
    base: HashMap<i32, Ticks>,
    prev: Reading,
    prev_side: Ticks,
    prev_at: Instant,
}

impl CpuWatch {
    /// Takes the baseline; call on the sampler thread.
    pub(super) fn new(scope: CpuScope) -> CpuWatch {
        let mut w = CpuWatch {
            scope,
            sampler_tid: gettid(),
            base: HashMap::new(),
            prev: HashMap::new(),
            prev_side: Ticks::default(),
            prev_at: Instant::now(),
        };
        let (side, threads) = w.read(&[]);
        w.base = threads.iter().map(|(t, (_, v))| (*t, *v)).collect();
        w.prev = threads;
        w.prev_side = side;
        w
    }

    /// The side's ticks and every thread's, now.
    fn read(&self, streams: &[Watched]) -> (Ticks, Reading) {
        let label_of = |tid: i32| -> Option<String> {
            if tid == self.sampler_tid {
                return Some("sampler".into());
            }
            streams
                .iter()
                .find(|w| w.tid.load(Ordering::Relaxed) == tid)
                .map(|w| w.label.clone())
        };
        let mut threads = Reading::new();
        if self.scope == CpuScope::Process {
            for tid in task_ids() {
                if let Some((name, t)) = read_stat(&format!("/proc/self/task/{tid}/stat")) {
                    threads.insert(tid, (label_of(tid).unwrap_or(name), t));
                }
            }
        } else {
            let own = std::iter::once(self.sampler_tid)
                .chain(streams.iter().map(|w| w.tid.load(Ordering::Relaxed)));
            for tid in own.filter(|&t| t > 0) {
                if let Some((_, t)) = read_stat(&format!("/proc/self/task/{tid}/stat")) {
                    threads.insert(tid, (label_of(tid).unwrap_or_default(), t));
                }
            }
        }
        // Streams that ended: their own last reading.
        for w in streams {
            let tid = w.tid.load(Ordering::Relaxed);
            if let (Some(last), true) = (w.last, tid > 0) {
                threads
                    .entry(tid)
                    .or_insert_with(|| (w.label.clone(), last));
            }
        }
        let side = match self.scope {
            CpuScope::Process => read_stat("/proc/self/stat").map_or_else(
                || threads.values().fold(Ticks::default(), |a, (_, t)| a + *t),
                |(_, t)| t,
            ),
            CpuScope::Threads => threads.values().fold(Ticks::default(), |a, (_, t)| a + *t),
        };
        (side, threads)
    }

    /// The interval since the previous call (or the start).
    pub(super) fn interval(&mut self, streams: &[Watched]) -> IntervalCpu {
        let (side, threads) = self.read(streams);
        let now = Instant::now();
        let used = side.since(self.prev_side);
        let (busiest, busiest_ticks) = busiest(&threads, &self.prev);
        let cpu = IntervalCpu {
            wall_ns: now.saturating_duration_since(self.prev_at).as_nanos() as u64,
            user_ns: ticks_to_ns(used.user),
            system_ns: ticks_to_ns(used.system),
            busiest_thread: busiest,
            busiest_thread_ns: ticks_to_ns(busiest_ticks),
        };
        // A thread gone since keeps its last figures: the whole test's
        // busiest thread may be one that has ended.
        self.prev.extend(threads);
        self.prev_side = side;
        self.prev_at = now;
        cpu
    }

    /// The thread that used the most CPU since the start, and its time, ns.
    pub(super) fn busiest_overall(&mut self, streams: &[Watched]) -> Option<(String, u64)> {
        let (_, threads) = self.read(streams);
        self.prev.extend(threads);
        let base: Reading = self
            .base
            .iter()
            .map(|(t, v)| (*t, (String::new(), *v)))
            .collect();
        let (name, ticks) = busiest(&self.prev, &base);
        (!name.is_empty()).then(|| (name, ticks_to_ns(ticks)))
    }
}

/// Every thread of the process at one moment, for a side whose work runs
/// on threads that belong to no test (the crr server's transactions run on
/// the accepting thread and the crr pool's worker): its busiest thread is
/// the process's thread that grew most between two snapshots.
#[derive(Debug, Default)]
pub(crate) struct ProcessThreads(Reading);

impl ProcessThreads {
    pub(crate) fn now() -> ProcessThreads {
        let mut r = Reading::new();
        for tid in task_ids() {
            if let Some(v) = read_stat(&format!("/proc/self/task/{tid}/stat")) {
                r.insert(tid, v);
            }
        }
        ProcessThreads(r)
    }

    /// The thread (its name) that used the most CPU since `earlier`, and
    /// its time, ns; `None` when no thread could be read.
    pub(crate) fn busiest_since(&self, earlier: &ProcessThreads) -> Option<(String, u64)> {
        let (name, ticks) = busiest(&self.0, &earlier.0);
        (!name.is_empty()).then(|| (name, ticks_to_ns(ticks)))
    }
}

/// The thread of `now` whose ticks grew most since `before` (a thread not
/// in `before` counts from zero); ties go to the lowest thread id.
fn busiest(now: &Reading, before: &Reading) -> (String, u64) {
    let mut best = (String::new(), 0u64, i32::MAX);
    for (tid, (name, t)) in now {
        let was = before.get(tid).map_or(Ticks::default(), |(_, b)| *b);
        let used = t.since(was).total();
        if best.0.is_empty() || used > best.1 || (used == best.1 && *tid < best.2) {
            best = (name.clone(), used, *tid);
        }
    }
    (best.0, best.1)
}

/// The ids of the process's threads.
fn task_ids() -> Vec<i32> {
    std::fs::read_dir("/proc/self/task")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_parse_with_odd_names() {
        let line = "4242 (a (b) c) R 1 2 3 4 5 6 7 8 9 10 111 222 13 14 15";
        let (name, t) = parse_stat(line).expect("parses");
        assert_eq!(name, "a (b) c");
        assert_eq!(
            t,
            Ticks {
                user: 111,
                system: 222
            }
        );
        assert_eq!(parse_stat("4242 (x) R 1 2"), None);
        assert_eq!(parse_stat("no parens"), None);
    }

    #[test]
    fn the_busiest_thread_is_the_one_that_grew_most() {
        let t = |u, s| Ticks { user: u, system: s };
        let before: Reading = [(1, ("a".into(), t(10, 10))), (2, ("b".into(), t(0, 0)))].into();
        let now: Reading = [
            (1, ("a".into(), t(20, 20))),
            (2, ("b".into(), t(5, 5))),
            (3, ("new".into(), t(30, 1))),
        ]
        .into();
        assert_eq!(busiest(&now, &before), ("new".into(), 31));
    }

    /// A thread that spins for 300 ms of its own CPU time shows that
    /// time as the busiest thread's, however loaded the host (its CPU time,
    /// not the wall time, is what is checked).
    #[test]
    fn a_spinning_thread_is_the_busiest_with_its_own_cpu_time() {
        use std::time::Duration;
        let mut w = CpuWatch::new(CpuScope::Threads);
        let tid = Arc::new(AtomicI32::new(0));
        let t2 = Arc::clone(&tid);
        let h = std::thread::spawn(move || {
            t2.store(gettid(), Ordering::Relaxed);
            let t0 = crate::cpu::thread();
            let mut x = 0u64;
            loop {
                for _ in 0..100_000 {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
                let used = crate::cpu::thread().saturating_sub(t0);
                if used.user + used.system >= Duration::from_millis(300) {
                    return (used, own_thread_ticks());
                }
            }
        });
        let (used, last) = h.join().expect("spinner");
        let streams = [Watched {
            tid,
            label: "stream 1 sender".into(),
            last,
        }];
        let c = w.interval(&streams);
        assert_eq!(c.busiest_thread, "stream 1 sender", "{c:?}");
        let used = (used.user + used.system).as_nanos() as u64;
        // Clock ticks against getrusage: within a few ticks.
        assert!(
            c.busiest_thread_ns.abs_diff(used) <= 40_000_000,
            "{c:?} vs {used}"
        );
        assert!(c.busiest_thread_ns <= c.wall_ns + 20_000_000, "{c:?}");
        assert!(c.user_ns + c.system_ns >= c.busiest_thread_ns, "{c:?}");
    }
}
