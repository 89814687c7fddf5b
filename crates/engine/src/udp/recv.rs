//! The receive loop of a UDP stream: the engine fills receive slots, the
//! sans-IO [`UdpReceiver`] core classifies and counts each datagram (GRO
//! super-buffers cut at their segment size), and the loop publishes the
//! live counters once per batch.
//!
//! Arrival times are the kernel's receive timestamps (SO_TIMESTAMPNS,
//! converted from CLOCK_REALTIME to "ns since Start" once, at the start), so
//! a datagram that arrived before the deadline but waited in the socket
//! buffer is on time, and jitter excludes this thread's scheduling delays.
//! Where the kernel gives no timestamp the batch's read time stands in (one
//! clock read per batch).
//!
//! Receive coalescing: a blocking receiver on the `batch` engine (whose
//! short batches mean an empty socket) whose socket buffer is deep waits
//! [`COALESCE`] after a batch that emptied the socket, instead of
//! going straight back to a call that sleeps on the socket. On loopback and
//! veth the sender's CPU runs the receive path, waking a receiver included
//! (`sock_def_readable`, ~20% of an unpaced sender's CPU in `perf`), and a
//! receiver that keeps up sleeps after nearly every datagram: the faster
//! the receiver, the slower the sender. Waiting on a timer instead lets the
//! datagrams of the interval queue with no one to wake. Arrival times are
//! the kernel's, so neither jitter nor the drain deadline sees the wait.

use std::io::ErrorKind;
use std::net::UdpSocket;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use linerate_proto::data_beat::{self, BeatSchedule};
use linerate_proto::measure::UdpRecv;
use linerate_proto::udp_receiver::{ReceiverConfig, UdpReceiver, Verdict};

use super::live::UdpCounters;
use super::timing::{ns_since, RECV_POLL};
use crate::engines::endpoint::enable_recv_meta;
use crate::engines::{
    self, with_engine, Engine, EngineKind, Interest, RecvSlots, UdpEndpoint, UdpRx,
};
use crate::stream::{Signals, StreamCounter, StreamEnd};
use crate::wait::{stream_end, Wait, Waiter};
use crate::EngineError;

/// How long a coalescing receiver waits after a batch that emptied its
/// socket (see the module docs). The kernel's default timer slack (50 µs)
/// comes on top. Chosen on loopback, 2026-11-24, iperf3 3.21 client `-u -b
/// 0 -l 1448` pinned apart from a linerate server: the client sent 0.26–0.34
/// M datagrams/s against 0.20–0.26 without the wait, with no loss and a
/// third less server CPU. At 3.5 M datagrams/s of 1472 B, 100 µs queue
/// 350 datagrams, ~0.8 MiB of buffer charge (skb truesize, ~2.3 KiB each),
/// a fifth of the least buffer that coalesces. A slow stream with a deep
/// buffer pays a timer wake-up per datagram on top of the socket's.
pub const COALESCE: Duration = Duration::from_micros(50);

/// The least receive buffer (`SO_RCVBUF` as the kernel reports it, twice
/// what was asked) with which a receiver coalesces: the deep buffers of
/// unpaced tests (`-b 0` without `-w`, 32 MiB), or a `-w` of 2 MiB or more.
/// Smaller buffers keep reading as soon as data arrives.
pub const COALESCE_MIN_RCVBUF: u64 = 4 << 20;

/// A receiving UDP stream's parameters.
#[derive(Debug, Clone)]
pub struct RecvJob {
    pub stream: u32,
    pub len: usize,
    pub verify: bool,
    pub start: Instant,
    /// The omitted warm-up, ns on the sender's clock (0: none).
    pub omit_ns: u64,
}

/// Where one batch's datagrams go (a stream's thread, or a flow of an
/// event loop: [`crate::event_loop::udp`]).
pub(crate) struct Sink<'a, P> {
    pub(crate) core: &'a mut UdpReceiver,
    pub(crate) ep: &'a P,
    pub(crate) bytes: &'a StreamCounter,
    /// CLOCK_REALTIME ns at Start: converts kernel timestamps.
    pub(crate) realtime_at_start: u64,
}

impl<P: UdpEndpoint> Sink<'_, P> {
    /// Feeds the first `filled` slots to the core; `now` stands in for a
    /// missing kernel timestamp.
    #[inline]
    pub(crate) fn deliver(&mut self, slots: &RecvSlots, filled: usize, now: u64, drain_at: u64) {
        for slot in 0..filled {
            let (_, m) = slots.get(slot);
            if let Some(d) = m.drops {
                self.core.on_drops(d);
            }
            let arrival = m
                .stamp_ns
                .map_or(now, |t| t.saturating_sub(self.realtime_at_start));
            for d in slots.datagrams(slot) {
                match self.core.on_datagram(d, m.truncated, arrival, drain_at) {
                    Verdict::Data => self.bytes.add(d.len() as u64),
                    // A repeated greeting: the client missed our echo (the
                    // endpoint is connected, so it can only be the
                    // client's). Echo it again.
                    Verdict::Greeting => {
                        let _ = self.ep.send_control(d);
                    }
                    Verdict::Corrupt(_) => {}
                }
            }
        }
    }
}

/// Prepares a receiving socket when it is attached, before the test starts:
/// the kernel's drop counter and arrival timestamps, and what engine `kind`
/// needs on before the first datagram (`UDP_GRO`). Set later, on the
/// receiving thread, the first datagrams of an unpaced burst would already
/// be queued without them. Idempotent (the receive loop asks its endpoint
/// again, for sockets nobody prepared).
pub fn prepare(kind: EngineKind, sock: &UdpSocket) {
    enable_recv_meta(sock);
    with_engine!(kind, e => e.udp_rx_attach(sock))
}

/// CLOCK_REALTIME ns at `start`: converts the kernel's receive timestamps
/// (`SO_TIMESTAMPNS`) to ns since `start`.
pub fn realtime_at(start: Instant) -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
        .saturating_sub(ns_since(start))
}

/// Makes the receiving I/O object of `engine` on `ep`, with what a stream
/// receiver needs first: per-datagram metadata on, and blocking receives
/// bounded by [`RECV_POLL`] (so an idle receiver checks its drain deadline
/// and the abort flag). Shared by linerate's and iperf3's receive loops.
pub fn stream_rx<E: Engine>(
    engine: E,
    ep: &E::UdpEndpoint,
    len: usize,
) -> Result<E::UdpRx, EngineError> {
    ep.enable_recv_meta();
    let _ = ep.set_recv_timeout(RECV_POLL);
    engine.udp_rx(ep, len)
}

/// One receiving stream as the runner hands it to a format's receive loop
/// ([`super::StreamFormat::recv`]): the engine and its endpoint, the job,
/// the counters the loop publishes to, the test's signals and how it waits.
pub struct RecvStream<'a, E: Engine> {
    pub engine: E,
    pub ep: &'a E::UdpEndpoint,
    pub job: &'a RecvJob,
    pub bytes: &'a StreamCounter,
    pub live: &'a UdpCounters,
    pub signals: &'a Signals,
    /// Blocking calls bounded by [`RECV_POLL`], or busy polling (an
    /// endpoint switched to it by [`UdpEndpoint::busy_poll`]).
    pub wait: Wait,
}

impl<E: Engine> std::fmt::Debug for RecvStream<'_, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvStream")
            .field("job", self.job)
            .field("wait", &self.wait)
            .finish_non_exhaustive()
    }
}

impl<E: Engine> RecvStream<'_, E> {
    /// The receive loop every stream format shares: makes the engine's
    /// receiving I/O ([`stream_rx`]), reads batches until the drain
    /// deadline, then what is queued, or until abort ([`recv_batches`]),
    /// handing each to `deliver` with the format's accounts `acc`; then
    /// `finish` turns the accounts into the stream's result, to which
    /// what the engine did (batching, coalescing) is added. A setup
    /// failure ends the stream failed, with nothing counted.
    pub fn run<A>(
        &self,
        mut acc: A,
        mut deliver: impl FnMut(&mut A, &RecvSlots, usize, u64, u64),
        finish: impl FnOnce(A) -> UdpRecv,
    ) -> (UdpRecv, StreamEnd) {
        let mut io = match stream_rx(self.engine, self.ep, self.job.len) {
            Ok(io) => io,
            Err(e) => return (UdpRecv::default(), StreamEnd::failed(e)),
        };
        let mut slots = io.slots();
        let done = recv_batches(
            &mut io,
            self.ep,
            &mut slots,
            self.job.start,
            self.signals,
            self.wait,
            |slots, filled, now, drain_at| deliver(&mut acc, slots, filled, now, drain_at),
        );
        let mut out = finish(acc);
        out.batching = io.batching();
        out.coalesce_waits = done.coalesce_waits;
        (out, done.end)
    }
}

/// Receives and checks linerate's datagrams on `s` until the drain
/// deadline passes, then reads what is already queued, and stops; or until
/// the test is aborted ([`RecvStream::run`]).
pub fn recv<E: Engine>(s: RecvStream<'_, E>) -> (UdpRecv, StreamEnd) {
    let (ep, job, live) = (s.ep, s.job, s.live);
    let realtime_at_start = realtime_at(job.start);
    let rcvbuf = ep.recv_buffer();
    let core = UdpReceiver::new(ReceiverConfig {
        stream: job.stream,
        len: job.len,
        verify: job.verify,
        omit_ns: job.omit_ns,
    });
    // Tell the sender its data arrives (`data_beat`'s doc).
    let (beats, beat) = (BeatSchedule::default(), data_beat::beat());
    s.run(
        (core, beats),
        |(core, beats), slots, filled, now, drain_at| {
            let mut sink = Sink {
                core,
                ep,
                bytes: s.bytes,
                realtime_at_start,
            };
            sink.deliver(slots, filled, now, drain_at);
            let counts = core.live();
            live.publish(&counts);
            if beats.due(now, counts.received) {
                let _ = ep.send_control(&beat);
            }
        },
        |(core, _)| core.finish((live.issued(), live.peer_omitted()), ep.drops(), rcvbuf),
    )
}

/// How [`recv_batches`] ended.
#[derive(Debug)]
pub struct Received {
    pub end: StreamEnd,
    /// Waits of `COALESCE` it made.
    pub coalesce_waits: u64,
}

/// The batch loop every UDP receiver shares (linerate's streams and
/// iperf3's): waits as `wait` says, hands each filled batch to `deliver`
/// with the time read after the call (ns since `start`) and the drain
/// deadline, and once past that deadline reads what is queued without
/// waiting, then stops; or stops when the test is aborted. A blocking
/// receiver with a buffer of at least `COALESCE_MIN_RCVBUF`, on an
/// engine whose short batches empty the socket, coalesces (module docs)
/// after batches the kernel timestamped.
pub fn recv_batches<P: UdpEndpoint, R: UdpRx<P>>(
    io: &mut R,
    ep: &P,
    slots: &mut RecvSlots,
    start: Instant,
    signals: &Signals,
    wait: Wait,
    mut deliver: impl FnMut(&RecvSlots, usize, u64, u64),
) -> Received {
    let coalesce = wait == Wait::Block
        && io.short_batch_empties_socket()
        && ep.recv_buffer().is_some_and(|b| b >= COALESCE_MIN_RCVBUF);
    let mut coalesce_waits = 0u64;
    // Spinning is bounded by the drain deadline's granularity: a sleep
    // when the budget is spent lasts at most RECV_POLL.
    let mut waiter = Waiter::new(wait, signals, false);
    let mut calls = 0u64;
    // Past the deadline by the clock: read what is queued, then stop.
    let mut draining = false;
    let result = loop {
        if signals.aborted() {
            break Ok(());
        }
        let call = if draining {
            engines::Wait::DontWait
        } else {
            waiter.call()
        };
        calls += 1;
        let r = io.recv_batch(ep, slots, call);
        let now = ns_since(start);
        let drain_at = signals.drain_deadline();
        draining |= now >= drain_at;
        match r {
            Ok(filled) => {
                deliver(slots, filled, now, drain_at);
                waiter.progressed();
                // Emptied the socket: wait on a timer, not on the socket.
                if coalesce
                    && !draining
                    && filled < slots.count()
                    && slots.get(0).1.stamp_ns.is_some()
                {
                    std::thread::sleep(COALESCE);
                    coalesce_waits += 1;
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if draining {
                    break Ok(());
                }
                if let Err(e) = waiter.would_block(ep, Interest::Recv, RECV_POLL, None) {
                    break stream_end(e);
                }
            }
            // An ICMP error queued on the connected socket: not data.
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {}
            Err(e) => break Err(EngineError::io("UDP receive", e)),
        }
    };
    Received {
        end: waiter.end(calls, result),
        coalesce_waits,
    }
}
