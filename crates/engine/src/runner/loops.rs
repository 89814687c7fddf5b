//! A side's TCP streams as flows on event-loop threads
//! (`RunParams::loops`): deals the flows out to the loops
//! ([`crate::event_loop::split`]), starts one thread per loop, and hands
//! the sampler the same hold it has on per-stream threads — a counter per
//! flow (so intervals are cut per flow by the same cutter), and a
//! [`Finished`] per flow when its loop ends, the loop's CPU on its last.

use std::sync::atomic::Ordering;
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Instant;

use linerate_proto::interval::CutStream;
use linerate_proto::measure::StreamMeasurement;

use super::cpu_watch::{self, CpuWatch, Watched};
use super::running::Running;
use super::stream::Finished;
use super::{DataSocket, RunParams, StreamSetup};
use crate::cpu::{self, CpuTime};
use crate::engines::EngineKind;
use crate::event_loop::{self, tcp::LoopParams, tcp::TcpFlow};
use crate::stream::{Signals, StreamCounter};

/// Starts `threads` loops over `streams` (TCP only: a stream of another
/// transport ends at once with an error); returns the sampler's hold and
/// the streams to cut.
#[allow(clippy::too_many_arguments)]
pub(super) fn spawn_loops(
    engine: EngineKind,
    streams: Vec<StreamSetup>,
    counters: Vec<Arc<StreamCounter>>,
    params: &RunParams,
    threads: usize,
    start: Instant,
    signals: &Arc<Signals>,
    done: &Sender<Finished>,
) -> (Running, Vec<CutStream>) {
    let n = streams.len();
    let mut run = Running {
        counters,
        // TCP_INFO is read once per flow at its end: a duplicate of every
        // socket for per-interval reads would double the descriptors.
        probes: (0..n).map(|_| None).collect(),
        lives: vec![None; n],
        handles: Vec::new(),
        results: vec![None; n],
        finished: 0,
        threads: Vec::new(),
        cpu: CpuWatch::new(params.cpu_scope),
    };
    let cut = streams
        .iter()
        .map(|s| CutStream {
            id: s.id,
            role: s.role,
        })
        .collect();
    let mut flows = Vec::with_capacity(n);
    for (index, s) in streams.into_iter().enumerate() {
        match s.sock {
            DataSocket::Tcp(sock) => flows.push(TcpFlow {
                index,
                id: s.id,
                role: s.role,
                sender: s.sender,
                limit: s.bytes,
                sock,
                counter: Arc::clone(&run.counters[index]),
            }),
            DataSocket::Udp(_) => {
                run.results[index] = Some(failed(s.id, "event loops run TCP flows only"));
                run.finished += 1;
            }
        }
    }
    let lp = LoopParams {
        engine,
        len: params.len,
        skip_rx_copy: params.skip_rx_copy,
        start,
    };
    for (t, share) in event_loop::split(flows, threads).into_iter().enumerate() {
        let tid = Arc::default();
        run.threads.push(Watched {
            tid: Arc::clone(&tid),
            label: event_loop::label(t, share.len()),
            last: None,
        });
        let pin = (!params.cpus.is_empty()).then(|| params.cpus[t % params.cpus.len()]);
        let ids: Vec<(usize, u32)> = share.iter().map(|f| (f.index, f.id)).collect();
        let (signals, done) = (Arc::clone(signals), done.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("linerate-loop-{}", t + 1))
            .spawn(move || {
                tid.store(cpu_watch::gettid(), Ordering::Relaxed);
                let pin_error = pin
                    .and_then(|c| cpu::pin_current_thread(c).err())
                    .map(|e| format!("could not pin to CPU: {e}"));
                let cpu0 = cpu::thread();
                let ends = event_loop::tcp::run(&lp, share, &signals);
                let last = ends.len().saturating_sub(1);
                for (k, (index, mut m)) in ends.into_iter().enumerate() {
                    if m.error.is_none() {
                        m.error.clone_from(&pin_error);
                    }
                    let tail = k == last;
                    let _ = done.send(Finished {
                        index,
                        thread: t,
                        measurement: m,
                        cpu: if tail {
                            cpu::thread().saturating_sub(cpu0)
                        } else {
                            CpuTime::default()
                        },
                        ticks: if tail {
                            cpu_watch::own_thread_ticks()
                        } else {
                            None
                        },
                    });
                }
            });
        match spawned {
            Ok(h) => run.handles.push(h),
            Err(e) => {
                for (index, id) in ids {
                    run.results[index] = Some(failed(id, &format!("cannot start thread: {e}")));
                    run.finished += 1;
                }
            }
        }
    }
    (run, cut)
}

/// A flow that could not run.
fn failed(id: u32, why: &str) -> StreamMeasurement {
    StreamMeasurement {
        id,
        error: Some(why.into()),
        ..StreamMeasurement::default()
    }
}
