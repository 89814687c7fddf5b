//! Runs one side of a test: a thread per data stream plus a sampler thread
//! that cuts intervals, signals the senders to stop when time is up, and
//! assembles the side's [`SideResults`] when every stream has ended.
//!
//! [`SideRun`] owns all those threads: dropping it aborts and joins them, so a
//! failed test cannot leak a thread or a socket.
//!
//! UDP streams run the same way with three additions: senders pace and
//! number their datagrams, the side reports when all its senders finished
//! ([`SideRun::senders_done`], for the peer's SendDone), and receivers stop
//! at a drain deadline set when the peer's senders finished
//! ([`SideRun::peer_send_done`]).

use std::net::{TcpStream, UdpSocket};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use linerate_proto::datagram::Fault;
use linerate_proto::interval::{CutStream, IntervalCutter, Sample};
use linerate_proto::measure::{
    CpuMeasurement, IntervalMeasurement, Role, SideResults, StreamMeasurement,
};
use linerate_proto::wire::{SentCount, Side};

use crate::cpu::{self, CpuTime};
use crate::engines::EngineKind;
use crate::stream::{Signals, StreamCounter, StreamEnd};
use crate::udp::{self, RecvJob, SendJob, UdpCounters};
use crate::{netstat, tcp, tcp_info};

/// A stream's socket.
#[derive(Debug)]
pub enum DataSocket {
    Tcp(TcpStream),
    /// Connected to the peer's data socket.
    Udp(UdpSocket),
}

/// One established data connection and what this side does on it.
#[derive(Debug)]
pub struct StreamSetup {
    pub id: u32,
    /// Which side sends on this stream.
    pub sender: Side,
    pub role: Role,
    /// For senders of a byte-limited test: bytes to send.
    pub bytes: Option<u64>,
    /// For senders of a datagram-limited test: sequence numbers to issue.
    pub datagrams: Option<u64>,
    pub sock: DataSocket,
}

/// How this side's UDP streams run.
#[derive(Debug, Clone, Default)]
pub struct UdpParams {
    /// Datagrams per 1000 s per stream; `None`: unpaced.
    pub millipps: Option<u64>,
    pub burst: u32,
    pub verify: bool,
    pub faults: Vec<Fault>,
    /// Nice value for receiving threads.
    pub priority: Option<i32>,
}

/// Whose CPU time a side reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuScope {
    /// The whole process (client and server in separate processes).
    Process,
    /// Only this side's threads (client and server share a process).
    Threads,
}

/// How this side runs.
#[derive(Debug, Clone)]
pub struct RunParams {
    /// Bytes per read/write call.
    pub len: usize,
    /// Senders stop after `omit + time`; `None` for byte-limited tests.
    pub time: Option<Duration>,
    pub omit: Duration,
    pub interval: Duration,
    /// Pin stream `i` to `cpus[i % cpus.len()]` when not empty.
    pub cpus: Vec<usize>,
    pub cpu_scope: CpuScope,
    /// UDP tests: pacing and checks.
    pub udp: Option<UdpParams>,
}

struct Finished {
    index: usize,
    measurement: StreamMeasurement,
    cpu: CpuTime,
}

/// A side's test in progress.
#[derive(Debug)]
pub struct SideRun {
    signals: Arc<Signals>,
    intervals: Receiver<IntervalMeasurement>,
    done: Receiver<SideResults>,
    senders_done: Receiver<Vec<SentCount>>,
    /// Live UDP counters by stream id (empty for TCP).
    udp_live: Vec<(u32, Arc<UdpCounters>)>,
    start: Instant,
    sampler: Option<JoinHandle<()>>,
}

/// Starts the streams now; `start` is the test's time zero.
pub fn start(
    engine: EngineKind,
    streams: Vec<StreamSetup>,
    params: RunParams,
    start: Instant,
) -> SideRun {
    let signals = Arc::new(Signals::default());
    let (itx, intervals) = mpsc::channel();
    let (dtx, done) = mpsc::channel();
    let (stx, senders_done) = mpsc::channel();
    let udp_live: Vec<(u32, Arc<UdpCounters>)> = streams
        .iter()
        .filter(|s| matches!(s.sock, DataSocket::Udp(_)))
        .map(|s| (s.id, Arc::default()))
        .collect();
    let sig = Arc::clone(&signals);
    let live = udp_live.clone();
    let sampler = std::thread::Builder::new()
        .name("linerate-sampler".into())
        .spawn(move || {
            let ch = Channels {
                intervals: itx,
                senders_done: stx,
            };
            let results = sample(engine, streams, &params, start, &sig, &live, &ch);
            let _ = dtx.send(results);
        });
    let sampler = match sampler {
        Ok(h) => Some(h),
        Err(_) => {
            // Without threads no test can run; report an empty, failed side.
            let (dtx, d) = mpsc::channel();
            let _ = dtx.send(SideResults {
                engine: engine.name().into(),
                ..SideResults::default()
            });
            return SideRun {
                signals,
                intervals,
                done: d,
                senders_done,
                udp_live,
                start,
                sampler: None,
            };
        }
    };
    SideRun {
        signals,
        intervals,
        done,
        senders_done,
        udp_live,
        start,
        sampler,
    }
}

/// Runs `side` on its own thread as a [`SideRun`]: `side` gets the side's
/// signals and returns its results (used by the request/response runner,
/// which has no interval records).
pub(crate) fn spawn_side(
    engine_name: &'static str,
    side: impl FnOnce(&Arc<Signals>) -> SideResults + Send + 'static,
) -> SideRun {
    let signals = Arc::new(Signals::default());
    let (_itx, intervals) = mpsc::channel();
    let (dtx, done) = mpsc::channel();
    let (_stx, senders_done) = mpsc::channel();
    let sig = Arc::clone(&signals);
    let sampler = std::thread::Builder::new()
        .name("linerate-side".into())
        .spawn(move || {
            let _ = dtx.send(side(&sig));
        });
    let sampler = match sampler {
        Ok(h) => Some(h),
        Err(_) => {
            let (dtx, d) = mpsc::channel();
            let _ = dtx.send(SideResults {
                engine: engine_name.into(),
                ..SideResults::default()
            });
            return SideRun {
                signals,
                intervals,
                done: d,
                senders_done,
                udp_live: Vec::new(),
                start: Instant::now(),
                sampler: None,
            };
        }
    };
    SideRun {
        signals,
        intervals,
        done,
        senders_done,
        udp_live: Vec::new(),
        start: Instant::now(),
        sampler,
    }
}

/// Where the sampler reports while a side runs.
struct Channels {
    intervals: Sender<IntervalMeasurement>,
    senders_done: Sender<Vec<SentCount>>,
}

impl SideRun {
    /// Stops every stream at once (the test failed or was interrupted).
    pub fn abort(&self) {
        self.signals.abort();
    }

    /// UDP: every sending stream of this side has finished, with the
    /// sequence numbers each issued (once; never for a side with no senders).
    pub fn senders_done(&self) -> Option<Vec<SentCount>> {
        self.senders_done.try_recv().ok()
    }

    /// UDP: the peer's senders finished with `counts`; receivers keep
    /// reading for `drain` from now, then stop.
    pub fn peer_send_done(&self, counts: &[SentCount], drain: Duration) {
        for c in counts {
            if let Some((_, live)) = self.udp_live.iter().find(|(id, _)| *id == c.stream) {
                live.set_issued(c.issued);
            }
        }
        let at = self.start.elapsed() + drain;
        self.signals.drain_at(at.as_nanos() as u64);
    }

    /// Next interval record, if one is ready.
    pub fn next_interval(&self) -> Option<IntervalMeasurement> {
        self.intervals.try_recv().ok()
    }

    /// The side's results once every stream has ended.
    pub fn try_finish(&mut self) -> Option<SideResults> {
        let r = self.done.try_recv().ok()?;
        if let Some(h) = self.sampler.take() {
            let _ = h.join();
        }
        Some(r)
    }
}

impl Drop for SideRun {
    fn drop(&mut self) {
        if let Some(h) = self.sampler.take() {
            self.signals.abort();
            let _ = h.join();
        }
    }
}

/// What every stream thread of a side shares with the sampler.
struct StreamCtx {
    engine: EngineKind,
    start: Instant,
    signals: Arc<Signals>,
    done: Sender<Finished>,
}

fn spawn_stream(
    ctx: StreamCtx,
    index: usize,
    setup: StreamSetup,
    params: &RunParams,
    counter: Arc<StreamCounter>,
    live: Option<Arc<UdpCounters>>,
) -> std::io::Result<JoinHandle<()>> {
    let StreamCtx {
        engine,
        start,
        signals,
        done: tx,
    } = ctx;
    let len = params.len;
    let pin = (!params.cpus.is_empty()).then(|| params.cpus[index % params.cpus.len()]);
    let udp = params.udp.clone().unwrap_or_default();
    std::thread::Builder::new()
        .name(format!("linerate-stream-{}", setup.id))
        .spawn(move || {
            let pin_error = pin.and_then(|c| cpu::pin_current_thread(c).err());
            let prio_error = match (setup.role, udp.priority) {
                (Role::Receiver, Some(nice)) => cpu::set_thread_nice(nice)
                    .err()
                    .map(|e| format!("could not set nice {nice} for the receiving thread: {e}")),
                _ => None,
            };
            let cpu0 = cpu::thread();
            let live = live.unwrap_or_default();
            let mut m = StreamMeasurement {
                id: setup.id,
                sender: Some(setup.sender),
                ..StreamMeasurement::default()
            };
            let StreamEnd { calls, result } = match (&setup.sock, setup.role) {
                (DataSocket::Tcp(sock), role) => {
                    // One buffer per stream, allocated once.
                    let mut buf = vec![0u8; len];
                    let end = match role {
                        Role::Sender => {
                            tcp::send(engine, sock, &buf, setup.bytes, &counter, &signals)
                        }
                        Role::Receiver => tcp::recv(engine, sock, &mut buf, &counter, &signals),
                    };
                    if role == Role::Sender {
                        m.tcp = tcp_info::read(sock);
                    }
                    end
                }
                (DataSocket::Udp(sock), Role::Sender) => {
                    let job = SendJob {
                        stream: setup.id,
                        len,
                        millipps: udp.millipps,
                        burst: udp.burst,
                        verify: udp.verify,
                        faults: udp.faults.clone(),
                        limit: setup.datagrams,
                        start,
                    };
                    let (sent, end) = udp::send(engine, sock, &job, &counter, &live, &signals);
                    m.udp_send = Some(sent);
                    end
                }
                (DataSocket::Udp(sock), Role::Receiver) => {
                    let job = RecvJob {
                        stream: setup.id,
                        len,
                        verify: udp.verify,
                        start,
                    };
                    let (got, end) = udp::recv(engine, sock, &job, &counter, &live, &signals);
                    m.udp_recv = Some(got);
                    end
                }
            };
            // A UDP receiver's time ends at its last datagram before the
            // drain deadline, not at the deadline.
            let elapsed = match &m.udp_recv {
                Some(r) if r.last_recv_ns > 0 => r.last_recv_ns,
                _ => start.elapsed().as_nanos() as u64,
            };
            let error = match (
                result,
                pin_error
                    .map(|e| format!("could not pin to CPU: {e}"))
                    .or(prio_error),
            ) {
                (Err(e), _) => Some(e.to_string()),
                (Ok(()), Some(e)) => Some(e),
                (Ok(()), None) if signals.aborted() => Some("aborted".into()),
                (Ok(()), None) => None,
            };
            let measurement = StreamMeasurement {
                bytes: counter.get(),
                omitted_bytes: 0,
                elapsed_ns: elapsed,
                calls,
                error,
                ..m
            };
            let cpu = cpu::thread().saturating_sub(cpu0);
            let _ = tx.send(Finished {
                index,
                measurement,
                cpu,
            });
        })
}

/// The sampler's hold on its streams while they run.
struct Running {
    counters: Vec<Arc<StreamCounter>>,
    /// Duplicates of the TCP sending sockets, to read TCP_INFO each interval.
    probes: Vec<Option<TcpStream>>,
    lives: Vec<Option<Arc<UdpCounters>>>,
    handles: Vec<JoinHandle<()>>,
    results: Vec<Option<StreamMeasurement>>,
    finished: usize,
}

impl Running {
    /// Every stream's counters now (reads TCP_INFO of the senders).
    fn samples(&self) -> Vec<Sample> {
        self.counters
            .iter()
            .zip(&self.probes)
            .zip(&self.lives)
            .map(|((c, probe), live)| Sample {
                bytes: c.get(),
                udp: live.as_ref().map(|l| l.totals()),
                tcp: probe.as_ref().and_then(tcp_info::read),
            })
            .collect()
    }
}

/// Starts a thread per stream; a stream whose thread cannot start is
/// finished at once with that error.
fn spawn_all(
    engine: EngineKind,
    streams: Vec<StreamSetup>,
    params: &RunParams,
    start: Instant,
    signals: &Arc<Signals>,
    udp_live: &[(u32, Arc<UdpCounters>)],
    done: &Sender<Finished>,
) -> (Running, Vec<CutStream>) {
    let n = streams.len();
    let mut run = Running {
        counters: (0..n).map(|_| Arc::default()).collect(),
        probes: Vec::with_capacity(n),
        lives: Vec::with_capacity(n),
        handles: Vec::with_capacity(n),
        results: vec![None; n],
        finished: 0,
    };
    let mut cut = Vec::with_capacity(n);
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
        let ctx = StreamCtx {
            engine,
            start,
            signals: Arc::clone(signals),
            done: done.clone(),
        };
        match spawn_stream(ctx, i, s, params, Arc::clone(&run.counters[i]), live) {
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
            });
            if self.senders_finished.len() == self.udp_senders {
                let _ = self
                    .senders_done
                    .send(std::mem::take(&mut self.senders_finished));
            }
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
            let rec = cutter.cut(now, &run.samples());
            let _ = intervals.send(rec.clone());
            recorded.push(rec);
        }
    }
    // The tail since the last cut (what the senders wrote before stopping,
    // what the receivers drained after).
    if let Some(rec) = cutter.finish(ends.last_end, &run.samples()) {
        let _ = intervals.send(rec.clone());
        recorded.push(rec);
    }
    recorded
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
                .map(|(a, b)| cpu::host_delta(a, b)),
        }
    }
}

/// The sampler thread's work: runs the streams and assembles the side's
/// results.
fn sample(
    engine: EngineKind,
    streams: Vec<StreamSetup>,
    params: &RunParams,
    start: Instant,
    signals: &Arc<Signals>,
    udp_live: &[(u32, Arc<UdpCounters>)],
    ch: &Channels,
) -> SideResults {
    let baseline = Baseline::take(params, &streams);
    let udp_senders = if params.udp.is_some() {
        streams.iter().filter(|s| s.role == Role::Sender).count()
    } else {
        0
    };
    let (ftx, frx) = mpsc::channel::<Finished>();
    let (mut run, cut) = spawn_all(engine, streams, params, start, signals, udp_live, &ftx);
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
    let streams = run
        .results
        .into_iter()
        .zip(cutter.omitted_bytes())
        .map(|(m, &omitted)| {
            let mut m = m.unwrap_or_default();
            m.omitted_bytes = omitted.min(m.bytes);
            m
        })
        .collect();
    SideResults {
        engine: engine.name().into(),
        streams,
        intervals: recorded,
        intervals_dropped: false,
        cpu: baseline.cpu(params.cpu_scope, ends.threads_cpu, wall),
        rr: None,
        kernel_udp: baseline.kernel.as_ref().map(netstat::delta),
    }
}
