//! A side's TCP or UDP streams as flows on event-loop threads
//! (`RunParams::loops`): deals the flows out to the loops
//! ([`crate::event_loop::split`]), starts one thread per loop, and hands
//! the sampler the same hold it has on per-stream threads — a counter per
//! flow (so intervals are cut per flow by the same cutter), and a
//! [`Finished`] per flow when its loop ends, the loop's CPU on its last.
//! Many sending TCP flows on the completion loop get a bounded send
//! buffer ([`crate::event_loop::tcp::sndbuf`]).

use std::sync::atomic::Ordering;
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Instant;

use linerate_proto::interval::CutStream;
use linerate_proto::measure::{Role, StreamMeasurement};

use super::cpu_watch::{self, CpuWatch, Watched};
use super::params::{DataSocket, RunParams, StreamSetup};
use super::running::Running;
use super::stream::Finished;
use crate::cpu::{self, CpuTime};
use crate::engines::EngineKind;
use crate::event_loop;
use crate::event_loop::tcp::sndbuf::{self, TcpMem};
use crate::event_loop::tcp::{LoopParams, TcpFlow};
use crate::event_loop::udp::{UdpFlow, UdpLoopParams};
use crate::stream::{Signals, StreamCounter};
use crate::udp::UdpCounters;

/// Starts `threads` loops over `streams` (all TCP or all UDP: a test has
/// one protocol); returns the sampler's hold and the streams to cut.
#[allow(clippy::too_many_arguments)]
pub(super) fn spawn_loops(
    engine: EngineKind,
    streams: Vec<StreamSetup>,
    counters: Vec<Arc<StreamCounter>>,
    params: &RunParams,
    threads: usize,
    start: Instant,
    signals: &Arc<Signals>,
    udp_live: &[(u32, Arc<UdpCounters>)],
    done: &Sender<Finished>,
) -> (Running, Vec<CutStream>) {
    let n = streams.len();
    let lives: Vec<Option<Arc<UdpCounters>>> = streams
        .iter()
        .map(|s| {
            udp_live
                .iter()
                .find(|(id, _)| *id == s.id)
                .map(|(_, l)| Arc::clone(l))
        })
        .collect();
    let mut run = Running {
        counters,
        // TCP_INFO is read once per flow at its end: a duplicate of every
        // socket for per-interval reads would double the descriptors.
        probes: (0..n).map(|_| None).collect(),
        lives: lives.clone(),
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
    let ctx = LoopCtx {
        kind: event_loop::loop_kind(engine),
        params,
        signals,
        done,
    };
    let mut tcp = Vec::new();
    let mut udp = Vec::new();
    for ((index, s), live) in streams.into_iter().enumerate().zip(lives) {
        let counter = Arc::clone(&run.counters[index]);
        match s.sock {
            DataSocket::Tcp(sock) => tcp.push(TcpFlow {
                index,
                id: s.id,
                role: s.role,
                sender: s.sender,
                limit: s.bytes,
                sock,
                counter,
            }),
            DataSocket::Udp(sock) => udp.push(UdpFlow {
                index,
                id: s.id,
                role: s.role,
                sender: s.sender,
                limit: s.datagrams,
                sock,
                counter,
                live: live.unwrap_or_default(),
            }),
        }
    }
    if !tcp.is_empty() {
        let lp = LoopParams {
            engine,
            len: params.len,
            skip_rx_copy: params.skip_rx_copy,
            start,
            sndbuf_bound: sender_bound(engine, &tcp, params.window),
        };
        let shares = event_loop::split(tcp, threads)
            .into_iter()
            .map(|share| {
                let ids = share.iter().map(|f| (f.index, f.id)).collect();
                let body = move |sig: &Arc<Signals>, mut ended: Ended| {
                    for (index, m) in event_loop::tcp::run(&lp, share, sig) {
                        ended(index, m);
                    }
                };
                (ids, body)
            })
            .collect();
        spawn_shares(&ctx, &mut run, shares);
    }
    if !udp.is_empty() {
        let up = UdpLoopParams {
            engine,
            len: params.len,
            udp: params.udp.clone().unwrap_or_default(),
            start,
            omit_ns: params.omit.as_nanos() as u64,
        };
        let shares = event_loop::split(udp, threads)
            .into_iter()
            .map(|share| {
                let ids = share.iter().map(|f| (f.index, f.id)).collect();
                let up = up.clone();
                let body = move |sig: &Arc<Signals>, ended: Ended| {
                    event_loop::udp::run(&up, share, sig, ended)
                };
                (ids, body)
            })
            .collect();
        spawn_shares(&ctx, &mut run, shares);
    }
    (run, cut)
}

/// The send buffer bound for the side's sending `flows`
/// ([`sndbuf::sndbuf_bound`]): only on the completion loop (the epoll
/// loop's senders stay autotuned) and when the user set no window.
fn sender_bound<S>(engine: EngineKind, flows: &[TcpFlow<S>], window: Option<u32>) -> Option<u32> {
    if event_loop::ring::uring(engine).is_none() || window.is_some() {
        return None;
    }
    let senders = flows.iter().filter(|f| f.role == Role::Sender).count();
    sndbuf::sndbuf_bound(senders, TcpMem::read()?)
}

/// What every loop thread of a side is started with.
struct LoopCtx<'a> {
    /// What the loops wait with (named in their threads' labels).
    kind: event_loop::LoopKind,
    params: &'a RunParams,
    signals: &'a Arc<Signals>,
    done: &'a Sender<Finished>,
}

/// Where a loop hands each flow's measurement as the flow ends.
type Ended = Box<dyn FnMut(usize, StreamMeasurement)>;

/// Starts a thread per share: each share's flows (by index and id) and the
/// loop that runs them, handing each flow's measurement on as it ends (the
/// last one carries the loop's CPU).
fn spawn_shares<F>(ctx: &LoopCtx<'_>, run: &mut Running, shares: Vec<(Vec<(usize, u32)>, F)>)
where
    F: FnOnce(&Arc<Signals>, Ended) + Send + 'static,
{
    for (ids, body) in shares {
        let t = run.threads.len();
        let tid = Arc::default();
        run.threads.push(Watched {
            tid: Arc::clone(&tid),
            label: event_loop::label_of(ctx.kind, t, ids.len()),
            last: None,
        });
        let flows = ids.len();
        let cpus = &ctx.params.cpus;
        let pin = (!cpus.is_empty()).then(|| cpus[t % cpus.len()]);
        let (signals, done) = (Arc::clone(ctx.signals), ctx.done.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("linerate-loop-{}", t + 1))
            .spawn(move || {
                tid.store(cpu_watch::gettid(), Ordering::Relaxed);
                let pin_error = pin
                    .and_then(|c| cpu::pin_current_thread(c).err())
                    .map(|e| format!("could not pin to CPU: {e}"));
                let cpu0 = cpu::thread();
                let mut left = flows;
                let ended = move |index, mut m: StreamMeasurement| {
                    if m.error.is_none() {
                        m.error.clone_from(&pin_error);
                    }
                    left = left.saturating_sub(1);
                    let tail = left == 0;
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
                };
                body(&signals, Box::new(ended));
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
}

/// A flow that could not run.
fn failed(id: u32, why: &str) -> StreamMeasurement {
    StreamMeasurement {
        id,
        error: Some(why.into()),
        ..StreamMeasurement::default()
    }
}
