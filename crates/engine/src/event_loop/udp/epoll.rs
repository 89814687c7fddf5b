//! The epoll side of a loop thread's UDP stream flows: each flow's
//! endpoint, sans-IO core and bounded turn on the readiness loop, and its
//! measurement as it ends (shared with the completion loop, [`super::ring`]).

use crate::engines::syscall::{Syscall, SyscallUdpRx, SyscallUdpTx};
use crate::engines::{
    Engine, EngineKind, KernelUdp, RecvSlots, TxBatch, UdpEndpoint, UdpRx, UdpTx, Wait,
};
use crate::event_loop::driver::{Flow, LoopFlow, Turn};
use crate::runner::UdpParams;
use crate::stream::{Signals, StreamCounter};
use crate::udp::{count_beats, ns_since, realtime_at, stream_rx, Sink, UdpCounters};
use crate::EngineError;
use linerate_proto::data_beat::{self, BeatSchedule, PEEK_EVERY_NS};
use linerate_proto::measure::{Role, StreamMeasurement, UdpRecv, UdpSend};
use linerate_proto::udp_receiver::{ReceiverConfig, UdpReceiver};
use linerate_proto::udp_sender::{DatagramFormat, Linerate, SenderConfig, Transmit, UdpSender};
use linerate_proto::wire::Side;
use std::io::ErrorKind;
use std::net::UdpSocket;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The engine UDP flows run on epoll loops (module docs).
pub const ENGINE: EngineKind = EngineKind::Syscall;

/// Calls one ready flow gets per turn before the next ready flow's turn.
const CALLS_PER_TURN: u32 = 8;

/// One UDP flow of a loop: an attached (connected) socket and what this
/// side does on it.
#[derive(Debug)]
pub struct UdpFlow {
    /// The flow's position in its side's list (the runner's index).
    pub index: usize,
    pub id: u32,
    pub role: Role,
    /// Which side sends on it.
    pub sender: Side,
    /// Senders of a count-limited test: datagrams to issue.
    pub limit: Option<u64>,
    pub sock: UdpSocket,
    pub counter: Arc<StreamCounter>,
    pub live: Arc<UdpCounters>,
}

/// A flow's own figures and counters (its socket is its endpoint's).
#[derive(Debug)]
pub(super) struct Meta {
    pub(super) index: usize,
    pub(super) id: u32,
    pub(super) role: Role,
    pub(super) sender: Side,
    pub(super) limit: Option<u64>,
    pub(super) counter: Arc<StreamCounter>,
    pub(super) live: Arc<UdpCounters>,
}

/// What every loop of a side shares.
#[derive(Debug, Clone)]
pub struct UdpLoopParams {
    /// The engine the side asked for ([`engine_for`](crate::event_loop::engine_for) says what runs).
    pub engine: EngineKind,
    /// Whole datagram length, header included.
    pub len: usize,
    pub udp: UdpParams,
    /// The test's time zero, and its omitted warm-up (ns since it).
    pub start: Instant,
    pub omit_ns: u64,
}

/// Every flow's endpoint and core; senders hand out at most `tx_batch`
/// datagrams at once (`None`: what the engine sends per call). Returns
/// them and the datagram size receivers take (one more byte than the
/// test's, so a longer one shows as truncated).
pub(super) fn open_all(
    flows: Vec<UdpFlow>,
    params: &UdpLoopParams,
    tx_batch: Option<usize>,
    slots: &mut Option<RecvSlots>,
) -> (Vec<State>, usize) {
    let of = flows.len() as u64;
    let states = flows
        .into_iter()
        .enumerate()
        .map(|(pos, flow)| State::open(flow, params, (pos as u64, of), tx_batch, slots))
        .collect();
    let size = slots.as_ref().map_or(params.len + 1, RecvSlots::size);
    (states, size)
}

/// Hands on the measurement of every flow the loop left running.
pub(super) fn report_rest(states: &mut [State], shared: &mut Shared, params: &UdpLoopParams) {
    let now = ns_since(params.start);
    for s in states.iter_mut().filter(|s| !s.reported) {
        let (index, m) = s.measurement(now, &shared.signals);
        (shared.ended)(index, m);
    }
}

impl Shared {
    pub(super) fn new(
        params: &UdpLoopParams,
        slots: Option<RecvSlots>,
        signals: &Arc<Signals>,
        ended: Box<dyn FnMut(usize, StreamMeasurement)>,
    ) -> Shared {
        Shared {
            slots: slots.unwrap_or_else(|| RecvSlots::new(1, params.len.max(1))),
            start: params.start,
            realtime_at_start: realtime_at(params.start),
            beat: data_beat::beat(),
            signals: Arc::clone(signals),
            ended,
        }
    }
}

/// A loop's receive buffer, clock and signals, shared by its flows.
pub(super) struct Shared {
    pub(super) slots: RecvSlots,
    pub(super) start: Instant,
    pub(super) realtime_at_start: u64,
    /// A beat's bytes, sent by every receiver of the loop.
    pub(super) beat: Vec<u8>,
    pub(super) signals: Arc<Signals>,
    pub(super) ended: Box<dyn FnMut(usize, StreamMeasurement)>,
}

/// A flow's endpoint, core and progress.
pub(super) struct State {
    pub(super) flow: Meta,
    /// The flow's socket (the syscall engine's endpoint is the socket).
    pub(super) ep: KernelUdp,
    /// `None` when the flow could not be set up or has ended.
    pub(super) io: Option<Io>,
    pub(super) calls: u64,
    /// How it ended (`at_ns`: when, since Start).
    pub(super) end: Option<(Result<(), EngineError>, u64)>,
    pub(super) sent: Option<UdpSend>,
    pub(super) received: Option<UdpRecv>,
    /// Its measurement has gone to the loop's `ended`.
    pub(super) reported: bool,
}

pub(super) enum Io {
    /// The core, its engine object, and when it next looks for beats.
    Tx(Box<UdpSender>, SyscallUdpTx, u64),
    /// The core, its engine object, its receive buffer, its beats.
    Rx(Box<UdpReceiver>, SyscallUdpRx, Option<u64>, BeatSchedule),
}

impl State {
    /// The flow's endpoint and core, made once; a sender paced at its
    /// `phase` (position, flows) of the loop's ticks, so the loop's flows
    /// leave spread over each tick; the first receiver's receive slots
    /// become its loop's (`slots`).
    pub(super) fn open(
        flow: UdpFlow,
        p: &UdpLoopParams,
        phase: (u64, u64),
        tx_batch: Option<usize>,
        slots: &mut Option<RecvSlots>,
    ) -> State {
        let UdpFlow {
            index,
            id,
            role,
            sender,
            limit,
            sock,
            counter,
            live,
        } = flow;
        let flow = Meta {
            index,
            id,
            role,
            sender,
            limit,
            counter,
            live,
        };
        let nonblocking = sock.set_nonblocking(true);
        let ep = KernelUdp::new(sock);
        let made = nonblocking
            .map_err(|e| EngineError::io("making a flow's UDP socket non-blocking", e))
            .and_then(|()| {
                let io = match flow.role {
                    Role::Sender => {
                        let len = p.len.max(Linerate.min_len());
                        let tx = Syscall.udp_tx(&ep, len)?;
                        let core = UdpSender::new(SenderConfig {
                            stream: flow.id,
                            len,
                            millipps: p.udp.millipps,
                            burst: p.udp.burst,
                            verify: p.udp.verify,
                            faults: p.udp.faults.clone(),
                            limit: flow.limit,
                            max_batch: tx_batch.unwrap_or_else(|| tx.max_batch()),
                            format: Linerate,
                            omit_ns: p.omit_ns,
                        })
                        .with_phase(phase.0, phase.1);
                        Io::Tx(Box::new(core), tx, PEEK_EVERY_NS)
                    }
                    Role::Receiver => {
                        let rx = stream_rx(Syscall, &ep, p.len)?;
                        if slots.is_none() {
                            *slots = Some(rx.slots());
                        }
                        let core = UdpReceiver::new(ReceiverConfig {
                            stream: flow.id,
                            len: p.len,
                            verify: p.udp.verify,
                            omit_ns: p.omit_ns,
                        });
                        let rcvbuf = ep.recv_buffer();
                        Io::Rx(Box::new(core), rx, rcvbuf, BeatSchedule::default())
                    }
                };
                Ok(io)
            });
        let (io, end) = match made {
            Ok(io) => (Some(io), None),
            Err(e) => (None, Some((Err(e), 0))),
        };
        State {
            flow,
            ep,
            io,
            calls: 0,
            end,
            sent: None,
            received: None,
            reported: false,
        }
    }

    /// A sender's turn: what is due goes out; then it waits for its next
    /// due time, or for room in its socket buffer.
    pub(super) fn send(&mut self, sh: &Shared) -> Result<Turn, Result<(), EngineError>> {
        let ep = &self.ep;
        let Some(Io::Tx(core, tx, next_peek)) = &mut self.io else {
            return Err(Err(EngineError::Aborted));
        };
        let mut now = ns_since(sh.start);
        if now >= *next_peek {
            *next_peek = now + PEEK_EVERY_NS;
            count_beats(ep, &self.flow.live);
        }
        for _ in 0..CALLS_PER_TURN {
            match core.poll_transmit(now) {
                Transmit::Done => return Err(Ok(())),
                Transmit::Wait(due) => {
                    return Ok(Turn::Until(sh.start + Duration::from_nanos(due)))
                }
                Transmit::Junk(d) => {
                    // Test faults: whatever becomes of it, it was sent.
                    let _ = tx.send_batch(ep, TxBatch::new(d, d.len()), Wait::DontWait);
                    core.on_junk_sent();
                }
                Transmit::Send { bytes, segment } => {
                    self.calls += 1;
                    match tx.send_batch(ep, TxBatch::new(bytes, segment), Wait::DontWait) {
                        Ok(n) => count_sent(core, &self.flow, n),
                        Err(e) if e.kind() == ErrorKind::Interrupted => {}
                        Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(Turn::Wait),
                        Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                            core.on_no_buffers();
                            return Ok(Turn::Again);
                        }
                        Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                            return Err(Err(refused()))
                        }
                        Err(e) => return Err(Err(EngineError::io("UDP send", e))),
                    }
                    now = ns_since(sh.start);
                }
            }
        }
        Ok(Turn::Again)
    }

    /// A receiver's turn: what is queued goes to its core; once its
    /// side's drain deadline has passed and the socket is empty, it ends.
    pub(super) fn recv(&mut self, sh: &mut Shared) -> Result<Turn, Result<(), EngineError>> {
        let ep = &self.ep;
        let Some(Io::Rx(core, rx, _, beats)) = &mut self.io else {
            return Err(Err(EngineError::Aborted));
        };
        for _ in 0..CALLS_PER_TURN {
            self.calls += 1;
            let r = rx.recv_batch(ep, &mut sh.slots, Wait::DontWait);
            let now = ns_since(sh.start);
            let drain_at = sh.signals.drain_deadline();
            match r {
                Ok(filled) => deliver((core, beats), ep, &self.flow, sh, filled, (now, drain_at)),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // An ICMP error queued on the connected socket: not data.
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    return match drain_at {
                        u64::MAX => Ok(Turn::Wait),
                        d if now >= d => Err(Ok(())),
                        d => Ok(Turn::Until(sh.start + Duration::from_nanos(d))),
                    };
                }
                Err(e) => return Err(Err(EngineError::io("UDP receive", e))),
            }
        }
        Ok(Turn::Again)
    }

    /// Ends the flow: the sender's or receiver's figures from its core.
    pub(super) fn close(&mut self, result: Result<(), EngineError>, at_ns: u64) {
        match self.io.take() {
            Some(Io::Tx(core, tx, _)) => {
                let mut out = core.finish(at_ns);
                out.batching = tx.batching();
                self.sent = Some(out);
            }
            Some(Io::Rx(core, rx, rcvbuf, _)) => {
                let mut out = core.finish(
                    (self.flow.live.issued(), self.flow.live.peer_omitted()),
                    self.ep.drops(),
                    rcvbuf,
                );
                out.batching = rx.batching();
                self.received = Some(out);
            }
            None => {}
        }
        self.end = Some((result, at_ns));
    }

    /// Ends the flow now and hands its measurement to the loop's `ended`.
    pub(super) fn end_now(&mut self, result: Result<(), EngineError>, sh: &mut Shared) {
        let now = ns_since(sh.start);
        self.close(result, now);
        let (index, m) = self.measurement(now, &sh.signals);
        (sh.ended)(index, m);
    }

    /// The flow's measurement; a flow the loop left running (abort) ends
    /// with "aborted".
    pub(super) fn measurement(
        &mut self,
        now: u64,
        signals: &Signals,
    ) -> (usize, StreamMeasurement) {
        self.reported = true;
        if self.end.is_none() {
            self.close(Ok(()), now);
        }
        let (result, at_ns) = self.end.take().unwrap_or((Ok(()), now));
        let error = match result {
            Err(e) => Some(e.to_string()),
            Ok(()) if signals.aborted() => Some("aborted".to_string()),
            Ok(()) => None,
        };
        // A receiver's time ends at its last datagram before the drain
        // deadline, as on a stream thread.
        let elapsed_ns = match &self.received {
            Some(r) if r.last_recv_ns > 0 => r.last_recv_ns,
            _ if at_ns == 0 => now,
            _ => at_ns,
        };
        let m = StreamMeasurement {
            id: self.flow.id,
            sender: Some(self.flow.sender),
            bytes: self.flow.counter.get(),
            elapsed_ns,
            calls: self.calls,
            udp_send: self.sent.take(),
            udp_recv: self.received.take(),
            error,
            ..StreamMeasurement::default()
        };
        (self.flow.index, m)
    }
}

/// A connected sender's datagrams came back as ICMP port unreachable.
pub(super) fn refused() -> EngineError {
    EngineError::PeerReset("the receiver's UDP port is closed (ICMP port unreachable)".into())
}

/// A sender's `n` datagrams went out (the rest of its batch is offered
/// again): its core and counters move on.
pub(super) fn count_sent(core: &mut UdpSender, flow: &Meta, n: usize) {
    flow.counter.add(core.on_sent(n));
    flow.live.publish(&core.live());
}

/// Feeds a receiver's `filled` slots of the loop's buffer to its core
/// (at `now`, before the side's drain deadline), publishes its counts and
/// sends its sender a beat when one is due.
pub(super) fn deliver(
    (core, beats): (&mut UdpReceiver, &mut BeatSchedule),
    ep: &KernelUdp,
    flow: &Meta,
    sh: &Shared,
    filled: usize,
    (now, drain_at): (u64, u64),
) {
    let mut sink = Sink {
        core,
        ep,
        bytes: &flow.counter,
        realtime_at_start: sh.realtime_at_start,
    };
    sink.deliver(&sh.slots, filled, now, drain_at);
    let counts = core.live();
    flow.live.publish(&counts);
    if beats.due(now, counts.received) {
        let _ = ep.send_control(&sh.beat);
    }
}

/// A flow on either loop (this one, and the ring's, whose flows keep this
/// state).
impl Flow for State {
    const STALLS: bool = false;

    fn ended(&self) -> bool {
        self.end.is_some()
    }

    fn fail(&mut self, e: EngineError) {
        self.close(Err(e), 0);
    }

    fn progress(&self) -> u64 {
        self.flow.counter.get()
    }
}

impl LoopFlow for State {
    type Shared = Shared;

    fn sock(&self) -> Option<BorrowedFd<'_>> {
        Some(self.ep.as_fd())
    }

    fn turn(&mut self, sh: &mut Self::Shared) -> Turn {
        let r = match self.flow.role {
            Role::Sender => self.send(sh),
            Role::Receiver => self.recv(sh),
        };
        match r {
            Ok(t) => t,
            Err(result) => {
                self.end_now(result, sh);
                Turn::Done
            }
        }
    }

    /// Time is up: a sender finishes now, wherever it was.
    fn stop(&mut self, sh: &mut Self::Shared) -> bool {
        if self.flow.role != Role::Sender {
            return false;
        }
        self.end_now(Ok(()), sh);
        true
    }
}
