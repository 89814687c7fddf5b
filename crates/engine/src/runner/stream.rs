//! One stream's thread: pins and prioritises itself, runs the engine's loop
//! for its transport and role, and reports how the stream ended.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use linerate_proto::measure::{Role, StreamMeasurement};
use linerate_proto::rr_core::SpinMode;
use linerate_proto::udp_sender::WireFormat;

use super::cpu_watch::{self, Ticks};
use super::{DataSocket, RunParams, StreamSetup, UdpParams};
use crate::cpu::{self, CpuTime};
use crate::engines::EngineKind;
use crate::stream::{Signals, StreamCounter, StreamEnd};
use crate::udp::{self, RecvJob, SendJob, UdpCounters};
use crate::wait::{self, Wait};
use crate::{tcp, tcp_info, EngineError};

/// A stream's end, as its thread reports it to the sampler.
pub(super) struct Finished {
    pub(super) index: usize,
    /// The thread that ran it (its index among the side's watched
    /// threads: the stream's own, or its event loop's).
    pub(super) thread: usize,
    pub(super) measurement: StreamMeasurement,
    pub(super) cpu: CpuTime,
    /// The thread's `/proc` counters as it ended.
    pub(super) ticks: Option<Ticks>,
}

/// What every stream thread of a side shares with the sampler.
pub(super) struct StreamCtx {
    pub(super) engine: EngineKind,
    pub(super) start: Instant,
    pub(super) signals: Arc<Signals>,
    pub(super) done: Sender<Finished>,
    /// TCP receivers may raise their low-water marks (`tcp::lowat_fits`).
    pub(super) rcvlowat: bool,
}

pub(super) fn spawn_stream(
    ctx: StreamCtx,
    index: usize,
    setup: StreamSetup,
    params: &RunParams,
    counter: Arc<StreamCounter>,
    live: Option<Arc<UdpCounters>>,
    tid: Arc<AtomicI32>,
) -> std::io::Result<JoinHandle<()>> {
    let len = params.len;
    let (skip_rx_copy, busy_poll) = (params.skip_rx_copy, params.busy_poll);
    let pin = (!params.cpus.is_empty()).then(|| params.cpus[index % params.cpus.len()]);
    let udp = params.udp.clone().unwrap_or_default();
    std::thread::Builder::new()
        .name(format!("linerate-stream-{}", setup.id))
        .spawn(move || {
            tid.store(cpu_watch::gettid(), Ordering::Relaxed);
            let setup_error = prepare_thread(pin, setup.role, udp.priority);
            let cpu0 = cpu::thread();
            let live = live.unwrap_or_default();
            let io = StreamIo {
                ctx: &ctx,
                len,
                udp: &udp,
                skip_rx_copy,
                busy_poll,
                counter: &counter,
                live: &live,
            };
            let (
                m,
                StreamEnd {
                    calls,
                    poll_sleeps,
                    result,
                },
            ) = io.run(&setup);
            // A UDP receiver's time ends at its last datagram before the
            // drain deadline, not at the deadline.
            let elapsed = match &m.udp_recv {
                Some(r) if r.last_recv_ns > 0 => r.last_recv_ns,
                _ => ctx.start.elapsed().as_nanos() as u64,
            };
            let error = match (result, setup_error) {
                (Err(e), _) => Some(e.to_string()),
                (Ok(()), Some(e)) => Some(e),
                (Ok(()), None) if ctx.signals.aborted() => Some("aborted".into()),
                (Ok(()), None) => None,
            };
            let measurement = StreamMeasurement {
                engine_use: crate::engines::take_use(),
                bytes: counter.get(),
                omitted_bytes: 0,
                elapsed_ns: elapsed,
                calls,
                error,
                poll_sleeps,
                ..m
            };
            let cpu = cpu::thread().saturating_sub(cpu0);
            let _ = ctx.done.send(Finished {
                index,
                thread: index,
                measurement,
                cpu,
                ticks: cpu_watch::own_thread_ticks(),
            });
        })
}

/// Pins the thread to `pin` and, for receivers, sets the requested nice
/// value; returns what could not be done, in words.
fn prepare_thread(pin: Option<usize>, role: Role, nice: Option<i32>) -> Option<String> {
    let pin_error = pin
        .and_then(|c| cpu::pin_current_thread(c).err())
        .map(|e| format!("could not pin to CPU: {e}"));
    let prio_error = match (role, nice) {
        (Role::Receiver, Some(nice)) => cpu::set_thread_nice(nice)
            .err()
            .map(|e| format!("could not set nice {nice} for the receiving thread: {e}")),
        _ => None,
    };
    pin_error.or(prio_error)
}

/// What a stream's loop works with.
struct StreamIo<'a> {
    ctx: &'a StreamCtx,
    /// Bytes per buffer or datagram.
    len: usize,
    udp: &'a UdpParams,
    skip_rx_copy: bool,
    busy_poll: Option<SpinMode>,
    counter: &'a StreamCounter,
    live: &'a UdpCounters,
}

impl StreamIo<'_> {
    /// Runs the loop of the stream's transport and role; returns what it
    /// measured beyond the byte count, and how it ended.
    fn run(&self, setup: &StreamSetup) -> (StreamMeasurement, StreamEnd) {
        let StreamCtx {
            engine,
            start,
            signals,
            ..
        } = self.ctx;
        let mut m = StreamMeasurement {
            id: setup.id,
            sender: Some(setup.sender),
            ..StreamMeasurement::default()
        };
        let wait = match self.spin(&setup.sock) {
            Ok(Some((mode, said))) => {
                m.busy_poll = Some(said);
                Wait::Spin(mode)
            }
            Ok(None) => Wait::Block,
            Err(e) => return (m, StreamEnd::failed(e)),
        };
        let end = match (&setup.sock, setup.role) {
            (DataSocket::Tcp(sock), role) => {
                // One buffer per stream, allocated once.
                let mut buf = vec![0u8; self.len];
                let (c, sig) = (self.counter, signals);
                let end = match role {
                    Role::Sender => tcp::send(*engine, sock, &buf, setup.bytes, c, sig, wait),
                    Role::Receiver => {
                        let opts = tcp::RecvOpts {
                            skip_copy: self.skip_rx_copy,
                            lowat: self.ctx.rcvlowat,
                        };
                        tcp::recv(*engine, sock, &mut buf, c, sig, wait, opts)
                    }
                };
                if role == Role::Sender {
                    m.tcp = tcp_info::read(sock);
                }
                end
            }
            (DataSocket::Udp(sock), Role::Sender) => {
                let job = SendJob {
                    stream: setup.id,
                    len: self.len,
                    millipps: self.udp.millipps,
                    burst: self.udp.burst,
                    verify: self.udp.verify,
                    faults: self.udp.faults.clone(),
                    limit: setup.datagrams,
                    start: *start,
                    format: match self.udp.iperf3 {
                        Some(f) => udp::iperf3_format(f.counters_64bit, *start),
                        None => WireFormat::Linerate,
                    },
                };
                let (sent, end) =
                    udp::send(*engine, sock, &job, self.counter, self.live, signals, wait);
                m.udp_send = Some(sent);
                end
            }
            (DataSocket::Udp(sock), Role::Receiver) => {
                let job = RecvJob {
                    stream: setup.id,
                    len: self.len,
                    verify: self.udp.verify,
                    start: *start,
                };
                let (got, end) = match self.udp.iperf3 {
                    Some(f) => {
                        let counters = (self.counter, self.live);
                        crate::iperf3::recv(*engine, sock, &job, f, counters, signals, wait)
                    }
                    None => udp::recv(*engine, sock, &job, self.counter, self.live, signals, wait),
                };
                m.udp_recv = Some(got);
                end
            }
        };
        (m, end)
    }

    /// `--busy-poll`: makes the stream's socket non-blocking with
    /// `SO_BUSY_POLL`; returns the spin mode and what the kernel said.
    fn spin(&self, sock: &DataSocket) -> Result<Option<(SpinMode, String)>, EngineError> {
        let Some(mode) = self.busy_poll else {
            return Ok(None);
        };
        let said = match sock {
            DataSocket::Tcp(s) => wait::prepare_stream(s)?,
            DataSocket::Udp(s) => wait::prepare_stream(s)?,
        };
        let how = match mode {
            SpinMode::Dedicated => "spinning without yielding (a CPU for every spinning thread)",
            SpinMode::Shared => "yielding while spinning (the CPUs are shared)",
        };
        Ok(Some((mode, format!("{said}; {how}"))))
    }
}
