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
use linerate_proto::measure::{
    CpuMeasurement, IntervalMeasurement, IntervalStream, Role, SideResults, StreamMeasurement,
    UdpInterval,
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

/// Interval boundaries: every `interval` up to `omit`, a cut at `omit`,
/// then every `interval` after it.
fn next_boundary(prev: Duration, omit: Duration, interval: Duration) -> Duration {
    if prev < omit {
        (prev + interval).min(omit)
    } else {
        prev + interval
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
                engine_use: crate::engines::take_use(),
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

fn sample(
    engine: EngineKind,
    streams: Vec<StreamSetup>,
    params: &RunParams,
    start: Instant,
    signals: &Arc<Signals>,
    udp_live: &[(u32, Arc<UdpCounters>)],
    ch: &Channels,
) -> SideResults {
    let intervals = &ch.intervals;
    let host0 = cpu::host();
    let proc0 = cpu::process();
    let self0 = cpu::thread();
    // The kernel's view, for UDP tests: counters of the data's interface.
    let kernel0 = params.udp.is_some().then(|| {
        let local = streams.iter().find_map(|s| match &s.sock {
            DataSocket::Udp(u) => u.local_addr().ok().map(|a| a.ip()),
            DataSocket::Tcp(_) => None,
        });
        netstat::snapshot(local)
    });
    let n = streams.len();
    let (ftx, frx) = mpsc::channel::<Finished>();
    let counters: Vec<Arc<StreamCounter>> = (0..n).map(|_| Arc::default()).collect();
    // Duplicates of the sending sockets, to read TCP_INFO each interval.
    let mut probes: Vec<(u32, Option<TcpStream>)> = Vec::with_capacity(n);
    let mut lives: Vec<Option<Arc<UdpCounters>>> = Vec::with_capacity(n);
    let mut roles: Vec<Role> = Vec::with_capacity(n);
    let mut handles = Vec::with_capacity(n);
    let mut results: Vec<Option<StreamMeasurement>> = vec![None; n];
    let mut threads_cpu = CpuTime::default();
    let mut finished = 0;
    let udp_senders = if params.udp.is_some() {
        streams.iter().filter(|s| s.role == Role::Sender).count()
    } else {
        0
    };
    let mut senders_finished: Vec<SentCount> = Vec::new();
    for (i, s) in streams.into_iter().enumerate() {
        let probe = match (&s.sock, s.role) {
            (DataSocket::Tcp(t), Role::Sender) => t.try_clone().ok(),
            _ => None,
        };
        probes.push((s.id, probe));
        let live = udp_live
            .iter()
            .find(|(id, _)| *id == s.id)
            .map(|(_, l)| Arc::clone(l));
        lives.push(live.clone());
        roles.push(s.role);
        let id = s.id;
        let ctx = StreamCtx {
            engine,
            start,
            signals: Arc::clone(signals),
            done: ftx.clone(),
        };
        match spawn_stream(ctx, i, s, params, Arc::clone(&counters[i]), live) {
            Ok(h) => handles.push(h),
            Err(e) => {
                results[i] = Some(StreamMeasurement {
                    id,
                    error: Some(format!("cannot start thread: {e}")),
                    ..StreamMeasurement::default()
                });
                finished += 1;
            }
        }
    }
    drop(ftx);

    let stop_at = params.time.map(|t| params.omit + t);
    let mut stopped = false;
    let mut prev = Duration::ZERO;
    let mut prev_bytes = vec![0u64; n];
    let mut prev_udp: Vec<UdpSnap> = vec![UdpSnap::default(); n];
    let mut omitted_bytes = vec![0u64; n];
    let mut boundary = next_boundary(Duration::ZERO, params.omit, params.interval);
    let mut last_end = Duration::ZERO;
    let mut recorded = Vec::new();
    let mut emit = |rec: IntervalMeasurement| {
        let _ = intervals.send(rec.clone());
        recorded.push(rec);
    };

    // `planned` is the boundary the cut was scheduled for; the omitted flag
    // follows it, not the (slightly later) instant the sampler woke.
    let cut = |upto: Duration,
               planned: Duration,
               prev: Duration,
               prev_bytes: &mut [u64],
               prev_udp: &mut [UdpSnap]| {
        let streams = counters
            .iter()
            .zip(&probes)
            .zip(prev_bytes.iter_mut())
            .zip(lives.iter().zip(&roles).zip(prev_udp.iter_mut()))
            .map(|(((c, (id, probe)), pb), ((live, role), pu))| {
                let now = c.get();
                let bytes = now - *pb;
                *pb = now;
                IntervalStream {
                    id: *id,
                    bytes,
                    tcp: probe.as_ref().and_then(tcp_info::read),
                    udp: live.as_ref().map(|l| pu.cut(l, *role)),
                }
            })
            .collect();
        IntervalMeasurement {
            start_ns: prev.as_nanos() as u64,
            end_ns: upto.as_nanos() as u64,
            omitted: planned <= params.omit && params.omit > Duration::ZERO,
            streams,
        }
    };

    while finished < n {
        let mut wake = if stop_at.is_some_and(|s| boundary >= s) {
            // Only the end of the streams is left to wait for; the session's
            // deadline bounds that wait.
            start.elapsed() + params.interval
        } else {
            boundary
        };
        if let Some(s) = stop_at.filter(|_| !stopped) {
            wake = wake.min(s);
        }
        let wait = (start + wake).saturating_duration_since(Instant::now());
        match frx.recv_timeout(wait) {
            Ok(f) => {
                last_end = last_end.max(Duration::from_nanos(f.measurement.elapsed_ns));
                threads_cpu = threads_cpu + f.cpu;
                if let Some(sent) = &f.measurement.udp_send {
                    senders_finished.push(SentCount {
                        stream: f.measurement.id,
                        issued: sent.issued,
                    });
                    if senders_finished.len() == udp_senders {
                        let _ = ch.senders_done.send(std::mem::take(&mut senders_finished));
                    }
                }
                results[f.index] = Some(f.measurement);
                finished += 1;
                continue;
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        let now = start.elapsed();
        if stop_at.is_some_and(|s| now >= s) && !stopped {
            signals.stop();
            stopped = true;
        }
        // The last interval of a timed test runs to the end of the streams
        // (the senders' final write, the receivers' drain) instead of
        // leaving a sliver after the planned end.
        let last = stop_at.is_some_and(|s| boundary >= s);
        if now >= boundary && !last {
            let rec = cut(now, boundary, prev, &mut prev_bytes, &mut prev_udp);
            if boundary == params.omit {
                omitted_bytes.clone_from(&prev_bytes);
            }
            emit(rec);
            prev = now;
            boundary = next_boundary(boundary, params.omit, params.interval);
        }
    }
    // The tail since the last cut (what the senders wrote before stopping,
    // what the receivers drained after).
    let end = last_end.max(prev);
    let udp_moved = lives
        .iter()
        .zip(&prev_udp)
        .any(|(l, p)| l.as_ref().is_some_and(|l| p.changed(l)));
    if udp_moved
        || counters
            .iter()
            .zip(&prev_bytes)
            .any(|(c, &pb)| c.get() > pb)
    {
        emit(cut(end, end, prev, &mut prev_bytes, &mut prev_udp));
    }
    for h in handles {
        let _ = h.join();
    }
    let wall = start.elapsed();
    let (scope, used) = match params.cpu_scope {
        CpuScope::Process => ("process", cpu::process().saturating_sub(proc0)),
        CpuScope::Threads => ("threads", threads_cpu + cpu::thread().saturating_sub(self0)),
    };
    let host = host0.zip(cpu::host()).map(|(a, b)| cpu::host_delta(a, b));
    let streams = results
        .into_iter()
        .zip(omitted_bytes)
        .map(|(m, omitted)| {
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
        cpu: CpuMeasurement {
            scope: scope.into(),
            user_ns: used.user.as_nanos() as u64,
            system_ns: used.system.as_nanos() as u64,
            wall_ns: wall.as_nanos() as u64,
            host,
        },
        rr: None,
        kernel_udp: kernel0.as_ref().map(netstat::delta),
    }
}

/// A UDP stream's counters at the last interval cut.
#[derive(Debug, Clone, Copy, Default)]
struct UdpSnap {
    datagrams: u64,
    received: u64,
    missing: u64,
    reordered: u64,
    duplicates: u64,
    late: u64,
    corrupt: u64,
    socket_drops: u64,
}

impl UdpSnap {
    fn read(l: &UdpCounters) -> UdpSnap {
        let g = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
        let received = g(&l.received);
        UdpSnap {
            datagrams: g(&l.datagrams),
            received,
            missing: g(&l.next_expected).saturating_sub(received),
            reordered: g(&l.reordered),
            duplicates: g(&l.duplicates),
            late: g(&l.late),
            corrupt: g(&l.corrupt),
            socket_drops: g(&l.socket_drops),
        }
    }

    fn changed(&self, l: &UdpCounters) -> bool {
        let now = UdpSnap::read(l);
        now.datagrams != self.datagrams || now.corrupt != self.corrupt
    }

    /// The interval since the last cut; moves the snapshot forward.
    fn cut(&mut self, l: &UdpCounters, role: Role) -> UdpInterval {
        let now = UdpSnap::read(l);
        let before = std::mem::replace(self, now);
        let d = |f: fn(&UdpSnap) -> u64| Some(f(&now).saturating_sub(f(&before)));
        match role {
            Role::Sender => UdpInterval {
                datagrams: now.datagrams - before.datagrams,
                ..UdpInterval::default()
            },
            Role::Receiver => UdpInterval {
                datagrams: now.datagrams - before.datagrams,
                received: d(|s| s.received),
                lost: Some(now.missing as i64 - before.missing as i64),
                reordered: d(|s| s.reordered),
                duplicates: d(|s| s.duplicates),
                late: d(|s| s.late),
                corrupt: d(|s| s.corrupt),
                jitter_ns: Some(l.jitter_ns()),
                socket_drops: d(|s| s.socket_drops),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundaries_cut_at_omit_then_every_interval() {
        let s = Duration::from_secs;
        let ms = Duration::from_millis;
        let mut b = Vec::new();
        let mut p = Duration::ZERO;
        for _ in 0..5 {
            p = next_boundary(p, ms(1500), s(1));
            b.push(p);
        }
        assert_eq!(b, vec![s(1), ms(1500), ms(2500), ms(3500), ms(4500)]);
        assert_eq!(next_boundary(Duration::ZERO, Duration::ZERO, s(1)), s(1));
    }
}
