//! The sampler thread of one side: starts the stream threads, follows the
//! interval cutter (wake at boundaries, stop the senders at the planned end,
//! cut the streams' counters into interval records), collects the streams'
//! ends and assembles the side's [`SideResults`].

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use linerate_proto::interval::{leave_out_warmup, CutStream, IntervalCutter, Sample};
use linerate_proto::measure::{
    CpuMeasurement, IntervalMeasurement, Role, SideResults, StreamMeasurement,
};
use linerate_proto::spec::Protocol;
use linerate_proto::wire::SentCount;

use super::cpu_watch::{CpuWatch, Watched};
use super::params::{CpuScope, DataSocket, RunParams, StreamSetup};
use super::running::Running;
use super::stream::{spawn_stream, Finished, StreamCtx};
use crate::cpu::{self, CpuTime};
use crate::engines::EngineKind;
use crate::stream::{Signals, StreamCounter};
use crate::udp::{StreamFormat, UdpCounters};
use crate::{netstat, tcp_info};

/// Where the sampler reports while a side runs.
pub(crate) struct Channels {
    pub(crate) intervals: Sender<IntervalMeasurement>,
    pub(crate) senders_done: Sender<Vec<SentCount>>,
}

impl Running {
    /// Every stream's counters now (reads TCP_INFO of the running
    /// senders; a finished one's is its end's reading, taken once its
    /// data was acknowledged (`crate::tcp::settle`), so the intervals'
    /// retransmits add up to its total).
    fn samples(&self) -> Vec<Sample> {
        self.counters
            .iter()
            .zip(&self.probes)
            .zip(&self.lives)
            .zip(&self.results)
            .map(|(((c, probe), live), end)| Sample {
                bytes: c.get(),
                udp: live.as_ref().map(|l| l.totals()),
                tcp: match end.as_ref().and_then(|m| m.tcp) {
                    Some(last) => Some(last),
                    None => probe.as_ref().and_then(tcp_info::read),
                },
            })
            .collect()
    }
}

/// Starts a thread per stream; a stream whose thread cannot start is
/// finished at once with that error.
#[allow(clippy::too_many_arguments)]
fn spawn_all<F: StreamFormat>(
    (engine, format, start): (EngineKind, F, Instant),
    streams: Vec<StreamSetup>,
    counters: Vec<Arc<StreamCounter>>,
    params: &RunParams,
    signals: &Arc<Signals>,
    udp_live: &[(u32, Arc<UdpCounters>)],
    done: &Sender<Finished>,
) -> (Running, Vec<CutStream>) {
    let n = streams.len();
    let rcvlowat = crate::tcp::lowat_fits(n, &params.cpus);
    let mut run = Running {
        counters,
        probes: Vec::with_capacity(n),
        lives: Vec::with_capacity(n),
        handles: Vec::with_capacity(n),
        results: vec![None; n],
        finished: 0,
        threads: Vec::with_capacity(n),
        cpu: CpuWatch::new(params.cpu_scope),
    };
    let mut cut = Vec::with_capacity(n);
    // (`loops::spawn_loops` builds the same hold for event loops.)
    for (i, s) in streams.into_iter().enumerate() {
        run.probes.push(match (&s.sock, s.role) {
            (DataSocket::Tcp(t), Role::Sender) => t.try_clone().ok(),
            _ => None,
        });
        let live = udp_live
            .iter()
            .find(|(id, _)| *id == s.id)
            .map(|(_, l)| Arc::clone(l));
        run.lives.push(live.clone());
        cut.push(CutStream {
            id: s.id,
            role: s.role,
        });
        let id = s.id;
        let tid = Arc::default();
        run.threads.push(Watched {
            tid: Arc::clone(&tid),
            label: format!(
                "stream {id} {}",
                match s.role {
                    Role::Sender => "sender",
                    Role::Receiver => "receiver",
                }
            ),
            last: None,
        });
        let ctx = StreamCtx {
            engine,
            format,
            start,
            signals: Arc::clone(signals),
            done: done.clone(),
            rcvlowat,
        };
        match spawn_stream(ctx, i, s, params, Arc::clone(&run.counters[i]), live, tid) {
            Ok(h) => run.handles.push(h),
            Err(e) => {
                run.results[i] = Some(StreamMeasurement {
                    id,
                    error: Some(format!("cannot start thread: {e}")),
                    ..StreamMeasurement::default()
                });
                run.finished += 1;
            }
        }
    }
    (run, cut)
}

/// What the sampler gathers from streams as they finish.
struct Ends<'a> {
    /// The latest stream end, ns since Start.
    last_end: u64,
    threads_cpu: CpuTime,
    /// UDP senders of this side, and those finished so far.
    udp_senders: usize,
    senders_finished: Vec<SentCount>,
    senders_done: &'a Sender<Vec<SentCount>>,
}

impl Ends<'_> {
    fn on_finished(&mut self, run: &mut Running, f: Finished) {
        self.last_end = self.last_end.max(f.measurement.elapsed_ns);
        self.threads_cpu = self.threads_cpu + f.cpu;
        if let Some(sent) = &f.measurement.udp_send {
            self.senders_finished.push(SentCount {
                stream: f.measurement.id,
                issued: sent.issued,
                omitted: sent.omitted_numbers,
            });
            if self.senders_finished.len() == self.udp_senders {
                let _ = self
                    .senders_done
                    .send(std::mem::take(&mut self.senders_finished));
            }
        }
        if let (Some(w), Some(_)) = (run.threads.get_mut(f.thread), &f.ticks) {
            w.last = f.ticks;
        }
        run.results[f.index] = Some(f.measurement);
        run.finished += 1;
    }
}

/// Waits for the streams to end, cutting intervals at their boundaries and
/// stopping the senders at the planned end; returns every record cut.
fn watch(
    run: &mut Running,
    cutter: &mut IntervalCutter,
    ends: &mut Ends<'_>,
    finished: &Receiver<Finished>,
    start: Instant,
    signals: &Signals,
    intervals: &Sender<IntervalMeasurement>,
) -> Vec<IntervalMeasurement> {
    let since = |t: Instant| t.saturating_duration_since(start).as_nanos() as u64;
    let mut recorded = Vec::new();
    while run.finished < run.results.len() {
        let wake = start + Duration::from_nanos(cutter.wake_at(since(Instant::now())));
        match finished.recv_timeout(wake.saturating_duration_since(Instant::now())) {
            Ok(f) => {
                ends.on_finished(run, f);
                continue;
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        let now = since(Instant::now());
        if cutter.take_stop(now) {
            signals.stop();
        }
        if cutter.cut_due(now) {
            let mut rec = cutter.cut(now, &run.samples());
            rec.cpu = Some(run.cpu.interval(&run.threads));
            let _ = intervals.send(rec.clone());
            recorded.push(rec);
        }
    }
    // The tail since the last cut (what the senders wrote before stopping,
    // what the receivers drained after).
    if let Some(mut rec) = cutter.finish(ends.last_end, &run.samples()) {
        rec.cpu = spans_a_tick(&rec).then(|| run.cpu.interval(&run.threads));
        let _ = intervals.send(rec.clone());
        recorded.push(rec);
    }
    recorded
}

/// Whether an interval is long enough for a CPU figure: per-interval CPU
/// is counted in clock ticks, so a tail shorter than one (the few bytes a
/// receiver drained after the last cut, when the peer's TEST_END came just
/// after it) would print as a `2.00-2.00 s server 0.0%` line.
fn spans_a_tick(rec: &IntervalMeasurement) -> bool {
    rec.end_ns.saturating_sub(rec.start_ns) >= cpu::ticks_to_ns(1)
}

/// CPU and kernel counters at the start of a side, for its deltas.
struct Baseline {
    host: Option<cpu::HostSnapshot>,
    process: CpuTime,
    sampler: CpuTime,
    kernel: Option<netstat::KernelSnapshot>,
}

impl Baseline {
    fn take(params: &RunParams, streams: &[StreamSetup]) -> Self {
        // The kernel's view, for UDP tests: counters of the data's interface.
        let kernel = params.udp.is_some().then(|| {
            let local = streams.iter().find_map(|s| match &s.sock {
                DataSocket::Udp(u) => u.local_addr().ok().map(|a| a.ip()),
                DataSocket::Tcp(_) => None,
            });
            netstat::snapshot(local)
        });
        Baseline {
            host: cpu::host(),
            process: cpu::process(),
            sampler: cpu::thread(),
            kernel,
        }
    }

    /// The side's CPU use since the baseline.
    fn cpu(&self, scope: CpuScope, threads_cpu: CpuTime, wall: Duration) -> CpuMeasurement {
        let (scope, used) = match scope {
            CpuScope::Process => ("process", cpu::process().saturating_sub(self.process)),
            CpuScope::Threads => (
                "threads",
                threads_cpu + cpu::thread().saturating_sub(self.sampler),
            ),
        };
        CpuMeasurement {
            scope: scope.into(),
            user_ns: used.user.as_nanos() as u64,
            system_ns: used.system.as_nanos() as u64,
            wall_ns: wall.as_nanos() as u64,
            host: self
                .host
                .zip(cpu::host())
                .map(|(a, b)| cpu::host_delta(a, b, used.user + used.system)),
            busiest_thread: None,
            busiest_thread_ns: None,
        }
    }
}

/// The sampler thread's work: runs the streams (with this engine, UDP
/// streams in this format, from this time zero) and assembles the side's
/// results.
// The side's pieces, each from its owner; a struct would only rename them.
#[allow(clippy::too_many_arguments)]
pub(super) fn sample<F: StreamFormat>(
    (engine, format, start): (EngineKind, F, Instant),
    streams: Vec<StreamSetup>,
    counters: Vec<Arc<StreamCounter>>,
    params: &RunParams,
    signals: &Arc<Signals>,
    udp_live: &[(u32, Arc<UdpCounters>)],
    ch: &Channels,
) -> SideResults {
    // Event loops run the engines whose per-socket I/O is free.
    let engine = match params.loops {
        Some(_) => {
            let udp = params.udp.is_some();
            let protocol = if udp { Protocol::Udp } else { Protocol::Tcp };
            crate::event_loop::engine_for(engine, protocol)
        }
        None => engine,
    };
    let baseline = Baseline::take(params, &streams);
    let udp_senders = if params.udp.is_some() {
        streams.iter().filter(|s| s.role == Role::Sender).count()
    } else {
        0
    };
    let (ftx, frx) = mpsc::channel::<Finished>();
    let (mut run, cut) = match params.loops {
        Some(threads) => super::loops::spawn_loops(
            engine, streams, counters, params, threads, start, signals, udp_live, &ftx,
        ),
        None => spawn_all(
            (engine, format, start),
            streams,
            counters,
            params,
            signals,
            udp_live,
            &ftx,
        ),
    };
    drop(ftx);
    let ns = |d: Duration| d.as_nanos() as u64;
    let mut cutter = IntervalCutter::new(
        cut,
        ns(params.omit),
        ns(params.interval),
        params.time.map(|t| ns(params.omit + t)),
    );
    let mut ends = Ends {
        last_end: 0,
        threads_cpu: CpuTime::default(),
        udp_senders,
        senders_finished: Vec::new(),
        senders_done: &ch.senders_done,
    };
    let recorded = watch(
        &mut run,
        &mut cutter,
        &mut ends,
        &frx,
        start,
        signals,
        &ch.intervals,
    );
    for h in run.handles.drain(..) {
        let _ = h.join();
    }
    let wall = start.elapsed();
    let busiest = run.cpu.busiest_overall(&run.threads);
    let streams = run
        .results
        .into_iter()
        .zip(cutter.at_omit())
        .map(|(m, at)| leave_out_warmup(m.unwrap_or_default(), &at))
        .collect();
    SideResults {
        engine: engine.to_string(),
        event_loop: params.loops.map(|_| crate::event_loop::loop_kind(engine)),
        streams,
        intervals: recorded,
        intervals_dropped: false,
        cpu: CpuMeasurement {
            busiest_thread_ns: busiest.as_ref().map(|b| b.1),
            busiest_thread: busiest.map(|b| b.0),
            ..baseline.cpu(params.cpu_scope, ends.threads_cpu, wall)
        },
        rr: None,
        kernel_udp: baseline.kernel.as_ref().map(netstat::delta),
        // The control loop fills it (the runner does not read the
        // environment).
        ld_preload: None,
        msg: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue_28_a_tail_shorter_than_a_tick_gets_no_cpu_line() {
        let rec = |start_ns, end_ns| IntervalMeasurement {
            start_ns,
            end_ns,
            omitted: false,
            streams: Vec::new(),
            cpu: None,
        };
        assert!(!spans_a_tick(&rec(2_000_000_000, 2_000_300_000)));
        assert!(!spans_a_tick(&rec(2_000_000_000, 2_000_000_000)));
        assert!(spans_a_tick(&rec(2_000_000_000, 2_040_000_000)));
        assert!(spans_a_tick(&rec(1_000_000_000, 2_000_000_000)));
    }
}
