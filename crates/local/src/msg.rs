//! The message test's two sides over any [`Channel`].
//!
//! Per channel and size, in this order (both ends count alike, so no
//! framing is needed): [`CALIB`] calibration messages, then per trial
//! [`WARM`] untimed message(s) and `messages` timed ones. Per message the
//! sender writes it whole; the receiver reads it whole and answers with
//! its number (the acknowledgement: it closes the message's timing); with
//! `verify` the receiver then checks every byte against the
//! [`crate::pattern`] and answers a verdict, which the sender reads after
//! its clock stopped: the check is outside the timed section.
//!
//! Timing: one clock pair per batch of K messages (K = 1 unless one
//! message is too short for the clock; `--verify` keeps K = 1 so that
//! verdicts stay outside the clock). The sender's threads, one per
//! channel, meet the coordinator at a [`Gate`] before and after each
//! trial; the coordinator times the trial (wall clock: messages/s and
//! throughput across all channels).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use linerate_stats::histogram::Histogram;

use crate::{pattern, Channel, LocalError};

/// Calibration messages per channel and size (timed one by one, to pick K).
pub const CALIB: u64 = 8;
/// Untimed messages before each trial.
pub const WARM: u64 = 1;
/// A clock pair must span at least this many clock granularities for its
/// error to stay ≤ 2%.
pub const BATCH_FACTOR: u64 = 50;
/// The largest batch.
pub const MAX_BATCH: u64 = 1000;

/// What both ends run: the same sequence of messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub sizes: Vec<usize>,
    /// Timed messages per trial and channel, per size.
    pub messages: Vec<u64>,
    pub trials: u32,
    pub verify: bool,
}

impl Plan {
    /// The plan as one command-line argument for the receiving process.
    pub fn to_arg(&self) -> String {
        let list = |v: &mut dyn Iterator<Item = String>| v.collect::<Vec<_>>().join(",");
        format!(
            "sizes={};messages={};trials={};verify={}",
            list(&mut self.sizes.iter().map(|s| s.to_string())),
            list(&mut self.messages.iter().map(|s| s.to_string())),
            self.trials,
            u8::from(self.verify)
        )
    }

    /// Parses [`Self::to_arg`]'s form.
    pub fn from_arg(s: &str) -> Result<Plan, String> {
        let mut plan = Plan {
            sizes: Vec::new(),
            messages: Vec::new(),
            trials: 0,
            verify: false,
        };
        for kv in s.split(';') {
            let (k, v) = kv.split_once('=').ok_or(format!("bad plan item {kv:?}"))?;
            let nums = || -> Result<Vec<u64>, String> {
                v.split(',')
                    .filter(|x| !x.is_empty())
                    .map(|x| x.parse().map_err(|_| format!("bad number {x:?}")))
                    .collect()
            };
            match k {
                "sizes" => plan.sizes = nums()?.into_iter().map(|x| x as usize).collect(),
                "messages" => plan.messages = nums()?,
                "trials" => plan.trials = v.parse().map_err(|_| format!("bad trials {v:?}"))?,
                "verify" => plan.verify = v == "1",
                _ => return Err(format!("unknown plan item {k:?}")),
            }
        }
        if plan.sizes.len() != plan.messages.len() || plan.trials == 0 {
            return Err(format!("inconsistent plan {s:?}"));
        }
        Ok(plan)
    }

    /// Messages per channel for size index `i`, all trials included.
    pub fn per_size(&self, i: usize) -> u64 {
        CALIB + u64::from(self.trials) * (WARM + self.messages[i])
    }
}

/// The receiver's totals for one channel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RxTotals {
    pub messages: u64,
    pub bytes: u64,
    pub corrupt: u64,
    /// CPU time of the receiving thread(s) for these messages, ns.
    pub cpu_ns: u64,
}

/// CPU time the calling thread has used, ns (`CLOCK_THREAD_CPUTIME_ID`).
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec to a live local; the
    // clock id is a constant every Linux kernel has.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if r != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Test-only: the sender flips one byte of every message whose number is
/// a multiple of this (after filling the pattern, before sending), so the
/// end-to-end tests see corruption counted. Read from
/// `LINERATE_TEST_CORRUPT_EVERY`; never set in normal use.
pub const CORRUPT_EVERY: &str = "LINERATE_TEST_CORRUPT_EVERY";

/// Runs the receiving end of one channel through the whole plan: its
/// totals per size.
pub fn receive(ch: &mut dyn Channel, plan: &Plan) -> Result<Vec<RxTotals>, LocalError> {
    let mut out = Vec::new();
    let mut n = 0u64;
    for (i, &size) in plan.sizes.iter().enumerate() {
        let mut t = RxTotals::default();
        let cpu0 = thread_cpu_ns();
        for _ in 0..plan.per_size(i) {
            ch.recv(size)?;
            ch.send_word(n)?;
            if plan.verify {
                let bad = !pattern::check(n, ch.last(size));
                t.corrupt += u64::from(bad);
                ch.send_word(u64::from(bad))?;
            }
            t.messages += 1;
            t.bytes += size as u64;
            n += 1;
        }
        t.cpu_ns = thread_cpu_ns().saturating_sub(cpu0);
        out.push(t);
    }
    Ok(out)
}

/// A barrier that can be broken: a failing thread breaks it so that no
/// one waits forever for it.
#[derive(Debug, Default)]
pub struct Gate {
    parties: usize,
    state: Mutex<(usize, u64, bool)>,
    cv: Condvar,
}

/// The gate was broken by a failing party.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Broken;

impl Gate {
    pub fn new(parties: usize) -> Gate {
        Gate {
            parties,
            ..Gate::default()
        }
    }

    pub fn wait(&self) -> Result<(), Broken> {
        let mut s = self.state.lock().map_err(|_| Broken)?;
        if s.2 {
            return Err(Broken);
        }
        let generation = s.1;
        s.0 += 1;
        if s.0 == self.parties {
            s.0 = 0;
            s.1 += 1;
            self.cv.notify_all();
            return Ok(());
        }
        while s.1 == generation && !s.2 {
            s = self.cv.wait(s).map_err(|_| Broken)?;
        }
        if s.2 {
            Err(Broken)
        } else {
            Ok(())
        }
    }

    pub fn break_all(&self) {
        if let Ok(mut s) = self.state.lock() {
            s.2 = true;
        }
        self.cv.notify_all();
    }
}

/// What the sending threads share with the coordinator.
#[derive(Debug)]
pub struct Shared {
    pub gate: Gate,
    /// Calibration times (ns per message) of the current size, all channels.
    pub calib: Mutex<Vec<u64>>,
    /// The batch size of the current size, set by the coordinator.
    pub batch: AtomicU64,
}

impl Shared {
    pub fn new(channels: usize) -> Arc<Shared> {
        Arc::new(Shared {
            gate: Gate::new(channels + 1),
            calib: Mutex::new(Vec::new()),
            batch: AtomicU64::new(1),
        })
    }
}

/// One channel's figures for one trial of one size.
#[derive(Debug, Clone)]
pub struct TrialOut {
    /// Per-message times (ns; batch means in batch mode).
    pub hist: Histogram,
    pub messages: u64,
    pub bytes: u64,
    /// Messages the receiver found corrupt.
    pub corrupt: u64,
    /// CPU time of the sending thread during the timed section, ns.
    pub cpu_ns: u64,
}

/// The sending side of one channel: per size, per trial.
pub fn send(
    ch: &mut dyn Channel,
    plan: &Plan,
    sh: &Shared,
    abort: &AtomicBool,
) -> Result<Vec<Vec<TrialOut>>, LocalError> {
    let r = send_inner(ch, plan, sh, abort);
    if r.is_err() {
        sh.gate.break_all();
    }
    r
}

/// Sends message `n` and waits for its acknowledgement.
fn one(ch: &mut dyn Channel, buf: &[u8], n: u64) -> Result<(), LocalError> {
    ch.send(buf)?;
    let ack = ch.recv_word()?;
    if ack != n {
        return Err(LocalError::Protocol(format!(
            "acknowledgement {ack} for message {n}"
        )));
    }
    Ok(())
}

struct Sender<'a> {
    ch: &'a mut dyn Channel,
    /// Set when the user interrupts: checked once per message.
    abort: &'a AtomicBool,
    verify: bool,
    corrupt_every: Option<u64>,
    buf: Vec<u8>,
    n: u64,
    corrupt: u64,
}

impl Sender<'_> {
    /// Before the clock: the message's pattern (and the test hook's flip).
    fn prepare(&mut self, size: usize) -> Result<(), LocalError> {
        if self.abort.load(Ordering::Relaxed) {
            return Err(LocalError::Aborted);
        }
        if self.verify {
            pattern::fill(self.n, &mut self.buf[..size]);
            if size > 0 && self.corrupt_every.is_some_and(|k| self.n.is_multiple_of(k)) {
                self.buf[size / 2] ^= 0x5a;
            }
        }
        Ok(())
    }

    /// After the clock: the receiver's verdict.
    fn verdict(&mut self) -> Result<(), LocalError> {
        if self.verify {
            self.corrupt += u64::from(self.ch.recv_word()? != 0);
        }
        Ok(())
    }

    /// One message timed by itself: its time in ns.
    fn timed_one(&mut self, size: usize) -> Result<u64, LocalError> {
        self.prepare(size)?;
        let t0 = Instant::now();
        one(self.ch, &self.buf[..size], self.n)?;
        let ns = t0.elapsed().as_nanos() as u64;
        self.verdict()?;
        self.n += 1;
        Ok(ns)
    }

    /// `count` messages in batches of `k`, recorded per message.
    fn timed(
        &mut self,
        size: usize,
        count: u64,
        k: u64,
        hist: &mut Histogram,
    ) -> Result<(), LocalError> {
        let mut left = count;
        while left > 0 {
            let b = left.min(k);
            if b == 1 {
                let ns = self.timed_one(size)?;
                hist.record(ns);
            } else {
                // Batches only without --verify: the buffer is constant.
                self.prepare(size)?;
                let t0 = Instant::now();
                for _ in 0..b {
                    one(self.ch, &self.buf[..size], self.n)?;
                    self.n += 1;
                }
                let ns = t0.elapsed().as_nanos() as u64;
                hist.record_n((ns / b).max(1), b);
            }
            left -= b;
        }
        Ok(())
    }
}

fn send_inner(
    ch: &mut dyn Channel,
    plan: &Plan,
    sh: &Shared,
    abort: &AtomicBool,
) -> Result<Vec<Vec<TrialOut>>, LocalError> {
    let broken = |_| LocalError::Protocol("another channel failed".into());
    let max = plan.sizes.iter().copied().max().unwrap_or(0);
    let mut s = Sender {
        ch,
        abort,
        verify: plan.verify,
        corrupt_every: std::env::var(CORRUPT_EVERY)
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|k| *k > 0),
        buf: vec![0; max],
        n: 0,
        corrupt: 0,
    };
    let mut out = Vec::new();
    for (i, &size) in plan.sizes.iter().enumerate() {
        sh.gate.wait().map_err(broken)?;
        let mut times = Vec::new();
        for _ in 0..CALIB {
            times.push(s.timed_one(size)?);
        }
        if let Ok(mut c) = sh.calib.lock() {
            c.extend(times);
        }
        sh.gate.wait().map_err(broken)?;
        // The coordinator picks the batch between these two meetings.
        sh.gate.wait().map_err(broken)?;
        let k = sh.batch.load(Ordering::Acquire).max(1);
        let mut trials = Vec::new();
        for _ in 0..plan.trials {
            for _ in 0..WARM {
                s.timed_one(size)?;
            }
            sh.gate.wait().map_err(broken)?;
            s.corrupt = 0;
            let mut hist = Histogram::new();
            let cpu0 = thread_cpu_ns();
            s.timed(size, plan.messages[i], k, &mut hist)?;
            let cpu_ns = thread_cpu_ns().saturating_sub(cpu0);
            sh.gate.wait().map_err(broken)?;
            trials.push(TrialOut {
                hist,
                messages: plan.messages[i],
                bytes: plan.messages[i] * size as u64,
                corrupt: s.corrupt,
                cpu_ns,
            });
        }
        out.push(trials);
    }
    Ok(out)
}

/// The sending side's results: per size, the batch used, and per trial
/// its wall time and every channel's figures.
#[derive(Debug)]
pub struct SendRun {
    pub granularity_ns: u64,
    /// Per size: (batch, median calibration time in ns).
    pub batch: Vec<(u64, u64)>,
    /// Per size, per trial: wall-clock ns of the timed section.
    pub wall_ns: Vec<Vec<u64>>,
    /// Per channel, per size, per trial.
    pub channels: Vec<Vec<Vec<TrialOut>>>,
}

/// Runs the sending side over `channels`, one thread each, coordinated
/// here. The first error of any channel ends the run: `on_fail` is then
/// called (it ends the receiving process, so that channels blocked on it
/// return) before the threads are joined.
pub fn run_sender(
    channels: Vec<Box<dyn Channel>>,
    plan: &Plan,
    on_fail: &(dyn Fn() + Sync),
    abort: &AtomicBool,
) -> Result<SendRun, LocalError> {
    let granularity_ns = clock_granularity_ns();
    let sh = Shared::new(channels.len());
    std::thread::scope(|scope| {
        let handles: Vec<_> = channels
            .into_iter()
            .map(|mut ch| {
                let sh = &sh;
                scope.spawn(move || send(&mut *ch, plan, sh, abort))
            })
            .collect();
        let coord = coordinate(&sh, plan, granularity_ns);
        if coord.is_err() {
            on_fail();
        }
        let mut outs = Vec::new();
        let mut first_err = None;
        for h in handles {
            match h.join() {
                Ok(Ok(o)) => outs.push(o),
                Ok(Err(LocalError::Aborted)) => first_err = Some(LocalError::Aborted),
                Ok(Err(e)) => {
                    // A real cause wins over "another channel failed".
                    if first_err.is_none()
                        || !matches!(e, LocalError::Protocol(ref m) if m.contains("another channel"))
                    {
                        first_err = Some(e);
                    }
                }
                Err(_) => {
                    first_err = Some(LocalError::Protocol("a sending thread panicked".into()))
                }
            }
        }
        if let Some(e) = first_err {
            return Err(e);
        }
        let (batch, wall_ns) =
            coord.map_err(|_| LocalError::Protocol("the run was broken off".into()))?;
        Ok(SendRun {
            granularity_ns,
            batch,
            wall_ns,
            channels: outs,
        })
    })
}

/// The coordinator: picks each size's batch from the calibration and
/// times each trial between the gates.
#[allow(clippy::type_complexity)]
fn coordinate(
    sh: &Shared,
    plan: &Plan,
    granularity_ns: u64,
) -> Result<(Vec<(u64, u64)>, Vec<Vec<u64>>), Broken> {
    let mut batches = Vec::new();
    let mut walls = Vec::new();
    for _ in &plan.sizes {
        sh.gate.wait()?;
        sh.gate.wait()?;
        let mut c = sh
            .calib
            .lock()
            .map(|mut c| std::mem::take(&mut *c))
            .unwrap_or_default();
        c.sort_unstable();
        let median = c.get(c.len() / 2).copied().unwrap_or(0);
        let k = if plan.verify {
            1
        } else {
            batch_for(median, granularity_ns)
        };
        sh.batch.store(k, Ordering::Release);
        batches.push((k, median));
        sh.gate.wait()?;
        let mut w = Vec::new();
        for _ in 0..plan.trials {
            sh.gate.wait()?;
            let t0 = Instant::now();
            sh.gate.wait()?;
            w.push(t0.elapsed().as_nanos() as u64);
        }
        walls.push(w);
    }
    Ok((batches, walls))
}

/// The batch size for messages of median time `median_ns` on a clock of
/// granularity `granularity_ns` (1 = time each message).
pub fn batch_for(median_ns: u64, granularity_ns: u64) -> u64 {
    let need = BATCH_FACTOR * granularity_ns.max(1);
    if median_ns >= need {
        1
    } else {
        need.div_ceil(median_ns.max(1)).min(MAX_BATCH)
    }
}

/// The clock's granularity: the smallest non-zero step between two
/// consecutive readings (its resolution plus the cost of one reading).
pub fn clock_granularity_ns() -> u64 {
    let mut best = u64::MAX;
    let mut prev = Instant::now();
    for _ in 0..2000 {
        let t = Instant::now();
        let d = t.duration_since(prev).as_nanos() as u64;
        if d > 0 {
            best = best.min(d);
        }
        prev = t;
    }
    if best == u64::MAX {
        1
    } else {
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_round_trips_through_its_argument() {
        let p = Plan {
            sizes: vec![56, 4096],
            messages: vec![100, 7],
            trials: 3,
            verify: true,
        };
        assert_eq!(Plan::from_arg(&p.to_arg()), Ok(p));
        assert!(Plan::from_arg("sizes=1;messages=;trials=1;verify=0").is_err());
    }

    #[test]
    fn batches_only_below_the_clock() {
        assert_eq!(batch_for(10_000, 20), 1);
        assert_eq!(batch_for(100, 20), 10);
        assert_eq!(batch_for(0, 20), 1000);
    }

    #[test]
    fn a_broken_gate_releases_its_waiters() {
        let g = Arc::new(Gate::new(2));
        let g2 = g.clone();
        let h = std::thread::spawn(move || g2.wait());
        std::thread::sleep(std::time::Duration::from_millis(20));
        g.break_all();
        assert_eq!(h.join().expect("join"), Err(Broken));
    }
}
