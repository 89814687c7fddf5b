//! One stream's thread: pins and prioritises itself, runs the engine's loop
//! for its transport and role, and reports how the stream ended.

use std::net::UdpSocket;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use linerate_proto::measure::{Role, StreamMeasurement};
use linerate_proto::rr_core::SpinMode;

use super::cpu_watch::{self, Ticks};
use super::params::{DataSocket, RunParams, StreamSetup, UdpParams};
use crate::cpu::{self, CpuTime};
use crate::engines::{with_engine, Engine, EngineKind, TcpEndpoint, UdpEndpoint};
use crate::stream::{Signals, StreamCounter, StreamEnd};
use crate::udp::{self, RecvJob, SendJob, StreamFormat, UdpCounters};
use crate::wait::{self, Wait};
use crate::{tcp, EngineError};

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
pub(super) struct StreamCtx<F> {
    pub(super) engine: EngineKind,
    /// UDP streams' wire format.
    pub(super) format: F,
    pub(super) start: Instant,
    pub(super) signals: Arc<Signals>,
    pub(super) done: Sender<Finished>,
    /// TCP receivers may raise their low-water marks (`tcp::lowat_fits`).
    pub(super) rcvlowat: bool,
}

pub(super) fn spawn_stream<F: StreamFormat>(
    ctx: StreamCtx<F>,
    index: usize,
    setup: StreamSetup,
    params: &RunParams,
    counter: Arc<StreamCounter>,
    live: Option<Arc<UdpCounters>>,
    tid: Arc<AtomicI32>,
) -> std::io::Result<JoinHandle<()>> {
    let len = params.len;
    let (skip_rx_copy, busy_poll, spin_mode) =
        (params.skip_rx_copy, params.busy_poll, params.spin_mode);
    let pin = (!params.cpus.is_empty()).then(|| params.cpus[index % params.cpus.len()]);
    let udp = params.udp.clone().unwrap_or_default();
    let omit_ns = params.omit.as_nanos() as u64;
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
                omit_ns,
                skip_rx_copy,
                busy_poll,
                spin_mode,
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
            ) = io.run(setup);
            // A UDP receiver's time ends at its last datagram before the
            // drain deadline, not at the deadline; a TCP sender's at its
            // shutdown (set by `StreamIo::tcp`).
            let elapsed = match &m.udp_recv {
                Some(r) if r.last_recv_ns > 0 => r.last_recv_ns,
                _ if m.elapsed_ns > 0 => m.elapsed_ns,
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
struct StreamIo<'a, F> {
    ctx: &'a StreamCtx<F>,
    /// Bytes per buffer or datagram.
    len: usize,
    udp: &'a UdpParams,
    /// The omitted warm-up, ns since Start.
    omit_ns: u64,
    skip_rx_copy: bool,
    busy_poll: Option<SpinMode>,
    /// How a UDP receiver spins on an engine that spins by default.
    spin_mode: SpinMode,
    counter: &'a StreamCounter,
    live: &'a UdpCounters,
}

impl<F: StreamFormat> StreamIo<'_, F> {
    /// Runs the loop of the stream's transport and role; returns what it
    /// measured beyond the byte count, and how it ended.
    fn run(&self, setup: StreamSetup) -> (StreamMeasurement, StreamEnd) {
        let StreamSetup {
            id,
            sender,
            role,
            bytes,
            datagrams,
            sock,
        } = setup;
        let mut m = StreamMeasurement {
            id,
            sender: Some(sender),
            ..StreamMeasurement::default()
        };
        let end = match sock {
            DataSocket::Tcp(sock) => self.tcp(&sock, role, bytes, &mut m),
            DataSocket::Udp(sock) => {
                let job = (id, role, datagrams);
                with_engine!(self.ctx.engine, e => self.udp(e, sock, job, &mut m))
            }
        };
        (m, end)
    }

    /// A TCP stream's loop on endpoint `sock`; a sender sends `bytes` when
    /// given.
    fn tcp(
        &self,
        sock: &impl TcpEndpoint,
        role: Role,
        bytes: Option<u64>,
        m: &mut StreamMeasurement,
    ) -> StreamEnd {
        let wait = match self.spin(self.busy_poll, m, || wait::prepare_stream(sock)) {
            Ok(w) => w,
            Err(e) => return StreamEnd::failed(e),
        };
        let engine = self.ctx.engine;
        // One buffer per stream, allocated once.
        let mut buf = vec![0u8; self.len];
        let (c, sig) = (self.counter, &self.ctx.signals);
        let end = match role {
            Role::Sender => tcp::send(engine, sock, buf, bytes, c, sig, wait),
            Role::Receiver => {
                let opts = tcp::RecvOpts {
                    skip_copy: self.skip_rx_copy,
                    lowat: self.ctx.rcvlowat,
                };
                tcp::recv(engine, sock, &mut buf, c, sig, wait, opts)
            }
        };
        if role == Role::Sender {
            // The sender's time ends at its shutdown, its retransmits
            // once what it queued is acknowledged.
            m.elapsed_ns = self.ctx.start.elapsed().as_nanos() as u64;
            tcp::settle(&[sock], sig);
            m.tcp = tcp::end_info(sock);
        }
        end
    }

    /// A UDP stream's loop on `sock`, taken over as `engine`'s endpoint:
    /// stream `id`, in `role`; a sender issues `datagrams` when given.
    fn udp<E: Engine>(
        &self,
        engine: E,
        sock: UdpSocket,
        (id, role, datagrams): (u32, Role, Option<u64>),
        m: &mut StreamMeasurement,
    ) -> StreamEnd {
        let ep = match engine.udp_endpoint(sock) {
            Ok(ep) => ep,
            Err(e) => return StreamEnd::failed(e),
        };
        // A receiver on an engine that spins by default (`xdp`) spins
        // as under --busy-poll (issue 25): over veth a receiver asleep in
        // poll(2) is woken on the sender's CPU, once a batch.
        let spin = self
            .busy_poll
            .or_else(|| (role == Role::Receiver && engine.spins()).then_some(self.spin_mode));
        let wait = match self.spin(spin, m, || ep.busy_poll()) {
            Ok(w) => w,
            Err(e) => return StreamEnd::failed(e),
        };
        let (start, signals) = (self.ctx.start, &self.ctx.signals);
        match role {
            Role::Sender => {
                let job = SendJob {
                    stream: id,
                    len: self.len,
                    millipps: self.udp.millipps,
                    burst: self.udp.burst,
                    verify: self.udp.verify,
                    faults: self.udp.faults.clone(),
                    limit: datagrams,
                    start,
                    format: self.ctx.format.sender(start),
                    omit_ns: self.omit_ns,
                };
                let (sent, end) =
                    udp::send(engine, &ep, &job, self.counter, self.live, signals, wait);
                m.udp_send = Some(sent);
                end
            }
            Role::Receiver => {
                let job = RecvJob {
                    stream: id,
                    len: self.len,
                    verify: self.udp.verify,
                    start,
                    omit_ns: self.omit_ns,
                };
                let (got, end) = self.ctx.format.recv(udp::RecvStream {
                    engine,
                    ep: &ep,
                    job: &job,
                    bytes: self.counter,
                    live: self.live,
                    signals,
                    wait,
                });
                m.udp_recv = Some(got);
                end
            }
        }
    }

    /// `--busy-poll`, or an xdp receiver's default (`spin`): switches the
    /// stream's socket or endpoint to busy polling with `prepare` (which
    /// says what it was granted), and notes that in `m`; the wait
    /// discipline either way.
    fn spin(
        &self,
        spin: Option<SpinMode>,
        m: &mut StreamMeasurement,
        prepare: impl FnOnce() -> Result<String, EngineError>,
    ) -> Result<Wait, EngineError> {
        let Some(mode) = spin else {
            return Ok(Wait::Block);
        };
        let said = prepare()?;
        let how = match mode {
            SpinMode::Dedicated => "spinning without yielding (a CPU for every spinning thread)",
            SpinMode::Shared => "yielding while spinning (the CPUs are shared)",
        };
        m.busy_poll = Some(format!("{said}; {how}"));
        Ok(Wait::Spin(mode))
    }
}
