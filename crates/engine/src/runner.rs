//! Runs one side of a test: a thread per data stream plus a sampler thread
//! that cuts intervals, signals the senders to stop when time is up, and
//! assembles the side's [`SideResults`] when every stream has ended.
//!
//! [`SideRun`] owns all those threads: dropping it aborts and joins them, so a
//! failed test cannot leak a thread or a socket.

use std::net::TcpStream;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use linerate_proto::measure::{
    CpuMeasurement, IntervalMeasurement, IntervalStream, Role, SideResults, StreamMeasurement,
};
use linerate_proto::wire::Side;

use crate::cpu::{self, CpuTime};
use crate::engine::{Engine, Signals, StreamCounter, StreamEnd};
use crate::tcp_info;

/// One established data connection and what this side does on it.
#[derive(Debug)]
pub struct StreamSetup {
    pub id: u32,
    /// Which side sends on this stream.
    pub sender: Side,
    pub role: Role,
    /// For senders of a byte-limited test: bytes to send.
    pub bytes: Option<u64>,
    pub sock: TcpStream,
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
    sampler: Option<JoinHandle<()>>,
}

/// Starts the streams now; `start` is the test's time zero.
pub fn start(
    engine: &'static dyn Engine,
    streams: Vec<StreamSetup>,
    params: RunParams,
    start: Instant,
) -> SideRun {
    let signals = Arc::new(Signals::default());
    let (itx, intervals) = mpsc::channel();
    let (dtx, done) = mpsc::channel();
    let sig = Arc::clone(&signals);
    let sampler = std::thread::Builder::new()
        .name("linerate-sampler".into())
        .spawn(move || {
            let results = sample(engine, streams, &params, start, &sig, &itx);
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
                sampler: None,
            };
        }
    };
    SideRun {
        signals,
        intervals,
        done,
        sampler,
    }
}

impl SideRun {
    /// Stops every stream at once (the test failed or was interrupted).
    pub fn abort(&self) {
        self.signals.abort();
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
    engine: &'static dyn Engine,
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
) -> std::io::Result<JoinHandle<()>> {
    let StreamCtx {
        engine,
        start,
        signals,
        done: tx,
    } = ctx;
    let len = params.len;
    let pin = (!params.cpus.is_empty()).then(|| params.cpus[index % params.cpus.len()]);
    std::thread::Builder::new()
        .name(format!("linerate-stream-{}", setup.id))
        .spawn(move || {
            let pin_error = pin.and_then(|c| cpu::pin_current_thread(c).err());
            let cpu0 = cpu::thread();
            // One buffer per stream, allocated once.
            let mut buf = vec![0u8; len];
            let StreamEnd { calls, result } = match setup.role {
                Role::Sender => engine.send(&setup.sock, &buf, setup.bytes, &counter, &signals),
                Role::Receiver => engine.recv(&setup.sock, &mut buf, &counter, &signals),
            };
            let elapsed = start.elapsed();
            let tcp = match setup.role {
                Role::Sender => tcp_info::read(&setup.sock),
                Role::Receiver => None,
            };
            let error = match (result, pin_error) {
                (Err(e), _) => Some(e.to_string()),
                (Ok(()), Some(e)) => Some(format!("could not pin to CPU: {e}")),
                (Ok(()), None) if signals.aborted() => Some("aborted".into()),
                (Ok(()), None) => None,
            };
            let measurement = StreamMeasurement {
                id: setup.id,
                sender: Some(setup.sender),
                bytes: counter.get(),
                omitted_bytes: 0,
                elapsed_ns: elapsed.as_nanos() as u64,
                calls,
                tcp,
                error,
                ..StreamMeasurement::default()
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
    engine: &'static dyn Engine,
    streams: Vec<StreamSetup>,
    params: &RunParams,
    start: Instant,
    signals: &Arc<Signals>,
    intervals: &Sender<IntervalMeasurement>,
) -> SideResults {
    let host0 = cpu::host();
    let proc0 = cpu::process();
    let self0 = cpu::thread();
    let n = streams.len();
    let (ftx, frx) = mpsc::channel::<Finished>();
    let counters: Vec<Arc<StreamCounter>> = (0..n).map(|_| Arc::default()).collect();
    // Duplicates of the sending sockets, to read TCP_INFO each interval.
    let mut probes: Vec<(u32, Option<TcpStream>)> = Vec::with_capacity(n);
    let mut handles = Vec::with_capacity(n);
    let mut results: Vec<Option<StreamMeasurement>> = vec![None; n];
    let mut threads_cpu = CpuTime::default();
    let mut finished = 0;
    for (i, s) in streams.into_iter().enumerate() {
        let probe = match s.role {
            Role::Sender => s.sock.try_clone().ok(),
            Role::Receiver => None,
        };
        probes.push((s.id, probe));
        let id = s.id;
        let ctx = StreamCtx {
            engine,
            start,
            signals: Arc::clone(signals),
            done: ftx.clone(),
        };
        match spawn_stream(ctx, i, s, params, Arc::clone(&counters[i])) {
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
    let cut = |upto: Duration, planned: Duration, prev: Duration, prev_bytes: &mut [u64]| {
        let streams = counters
            .iter()
            .zip(&probes)
            .zip(prev_bytes.iter_mut())
            .map(|((c, (id, probe)), pb)| {
                let now = c.get();
                let bytes = now - *pb;
                *pb = now;
                IntervalStream {
                    id: *id,
                    bytes,
                    tcp: probe.as_ref().and_then(tcp_info::read),
                    udp: None,
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
            let rec = cut(now, boundary, prev, &mut prev_bytes);
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
    if counters
        .iter()
        .zip(&prev_bytes)
        .any(|(c, &pb)| c.get() > pb)
    {
        emit(cut(end, end, prev, &mut prev_bytes));
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
        kernel_udp: None,
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
