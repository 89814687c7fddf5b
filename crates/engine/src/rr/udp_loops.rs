//! rr over UDP on event loops (`rr --proto udp --flows N --threads T`):
//! one loop thread's flows, each on its own connected socket (attached
//! by the UDP greeting, as every UDP data socket is), a datagram per
//! message. Each flow keeps the cores a flow thread has
//! ([`super::udp`]): the client's [`linerate_proto::rr_flow::RrClient`]
//! with its response timeout (a response missing after
//! [`RESPONSE_TIMEOUT_NS`] is lost, a later one is late and dropped) in
//! its [`Transactions`], the server's [`RrServer`]; the loop only moves
//! datagrams, without blocking, and a client waiting for a response waits
//! for its socket or its deadline on the loop's timer heap
//! ([`Turn::Until`]).
//!
//! The phase ends as on a flow thread: the client sends an empty
//! datagram, repeated every [`UDP_END_EVERY`] until the server answers
//! with empty datagrams (it has then counted every request it answered).
//!
//! The flows run the `syscall` engine, as UDP stream flows do
//! ([`crate::event_loop::udp`]): one datagram per call, no slot arrays
//! per socket; one receive buffer per loop, shared by its flows.

use std::io::ErrorKind;
use std::net::UdpSocket;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use linerate_proto::measure::RrFlowMeasurement;
use linerate_proto::rr_flow::{Response, RrServer, Transaction, RESPONSE_TIMEOUT_NS};
use linerate_proto::spec::RrPhase;
use linerate_stats::histogram::Histogram;

use crate::clock::mono_ns;
use crate::engines::syscall::{Syscall, SyscallUdpRx, SyscallUdpTx};
use crate::engines::{Engine, KernelUdp, RecvSlots, TxBatch, UdpEndpoint, UdpRx, UdpTx, Wait};
use crate::event_loop::{drive, LoopFlow, Turn};
use crate::stream::map_err;
use crate::EngineError;

use super::conns::Conn;
use super::datagram_io::port_closed;
use super::loop_tally::{failed, served, with_loop_rtt, LoopCtx, Role, Transactions};
use super::udp::{end_unanswered, UDP_END_ACKS, UDP_END_EVERY, UDP_END_TRIES};
use super::watch::Watch;

/// Calls one ready flow gets per turn.
const CALLS_PER_TURN: u32 = 8;

/// One loop: its UDP flows of `cx.phase`, driven to their ends.
pub(super) fn run_loop(
    share: Vec<(u32, Option<Conn>)>,
    cx: &LoopCtx<'_>,
    role: Role,
) -> Vec<RrFlowMeasurement> {
    let phase = cx.phase;
    let len = (phase.request as usize).max(phase.response as usize);
    let mut out = Vec::with_capacity(share.len());
    let mut ios = Vec::with_capacity(share.len());
    for (flow, conn) in share {
        let opened = match conn {
            Some(Conn::Udp(sock)) => Dgram::open(flow, sock, len),
            _ => Err(EngineError::Protocol("no UDP socket for this flow".into())),
        };
        match opened {
            Ok(io) => ios.push(io),
            Err(e) => out.push(failed(phase, flow, &e.to_string())),
        }
    }
    let slots = ios
        .first()
        .map_or_else(|| RecvSlots::new(1, len + 1), |io| io.rx.slots());
    match role {
        Role::Client => {
            let mut v: Vec<Client<'_>> = ios.into_iter().map(|io| Client::new(io, cx)).collect();
            let mut sh = ClientShared {
                overall: Histogram::new(),
                slots,
            };
            drive(&mut v, &mut sh, cx.signals);
            let first = out.len();
            out.extend(v.into_iter().map(|c| c.measurement(phase)));
            with_loop_rtt(&mut out[first..], &sh.overall);
        }
        Role::Server => {
            let timed = cx.p.plan.per_message();
            let mut v: Vec<Server<'_>> = ios
                .into_iter()
                .map(|io| Server::new(io, phase, timed, cx.watch))
                .collect();
            let mut slots = slots;
            drive(&mut v, &mut slots, cx.signals);
            out.extend(v.into_iter().map(|s| s.measurement(phase)));
        }
    }
    out
}

/// A flow's socket as the engine's endpoint, and the engine's I/O on it.
struct Dgram {
    flow: u32,
    ep: KernelUdp,
    tx: SyscallUdpTx,
    rx: SyscallUdpRx,
}

impl Dgram {
    /// `sock`, non-blocking, for datagrams of up to `len` bytes.
    fn open(flow: u32, sock: UdpSocket, len: usize) -> Result<Dgram, EngineError> {
        sock.set_nonblocking(true)
            .map_err(|e| EngineError::io("making a flow's UDP socket non-blocking", e))?;
        let ep = Syscall.udp_endpoint(sock)?;
        Ok(Dgram {
            flow,
            tx: Syscall.udp_tx(&ep, len)?,
            rx: Syscall.udp_rx(&ep, len)?,
            ep,
        })
    }

    /// Sends `buf` as one datagram; false when the socket's buffer is
    /// full (its next edge says when there is room).
    fn send(&mut self, buf: &[u8]) -> Result<bool, EngineError> {
        let batch = TxBatch::new(buf, buf.len());
        match self.tx.send_batch(&self.ep, batch, Wait::DontWait) {
            Ok(n) => Ok(n > 0),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
                Ok(false)
            }
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => Err(port_closed()),
            Err(e) => Err(map_err("send", e)),
        }
    }

    /// The empty datagram that ends a phase (and answers that end), as
    /// the endpoint's control datagram (the engine's batches hold at
    /// least one byte). A full buffer drops it: it is repeated.
    fn send_end(&self) -> Result<(), EngineError> {
        match self.ep.send_control(&[]) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == ErrorKind::WouldBlock => Ok(()),
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => Err(port_closed()),
            Err(e) => Err(map_err("send", e)),
        }
    }

    /// The next queued datagram, received into the loop's `slots`;
    /// `None` when none is queued.
    fn recv<'s>(&mut self, slots: &'s mut RecvSlots) -> Result<Option<&'s [u8]>, EngineError> {
        loop {
            match self.rx.recv_batch(&self.ep, slots, Wait::DontWait) {
                Ok(_) => return Ok(Some(slots.get(0).0)),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(None),
                // A refused earlier send: the peer's port closed.
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => return Err(port_closed()),
                Err(e) => return Err(map_err("recv", e)),
            }
        }
    }
}

/// The turn that waits for a flow's socket or `deadline_ns` (monotonic).
fn until(deadline_ns: u64) -> Turn {
    let left = deadline_ns.saturating_sub(mono_ns());
    Turn::Until(Instant::now() + Duration::from_nanos(left))
}

/// A client loop's round trips at full precision and receive buffer.
struct ClientShared {
    overall: Histogram,
    slots: RecvSlots,
}

/// Where a client flow is in its transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Choosing the next request (or ending the phase).
    Next,
    /// The request waits for room in the socket's buffer.
    Send,
    /// Its response is due by this time (monotonic ns).
    Await(u64),
    /// The phase's end sent `tries` times, next at `next_ns`.
    End {
        tries: u32,
        next_ns: u64,
    },
    Done,
}

struct Client<'a> {
    io: Dgram,
    tx: Transactions<'a>,
    req: Vec<u8>,
    step: Step,
    error: Option<EngineError>,
}

impl<'a> Client<'a> {
    fn new(io: Dgram, cx: &LoopCtx<'a>) -> Self {
        Client {
            tx: Transactions::new(io.flow, cx.phase, cx.p, cx.watch, Some(RESPONSE_TIMEOUT_NS)),
            req: vec![0; cx.phase.request as usize],
            step: Step::Next,
            error: None,
            io,
        }
    }

    fn step(&mut self, sh: &mut ClientShared) -> Result<Turn, EngineError> {
        for _ in 0..CALLS_PER_TURN {
            match self.step {
                Step::Next => {
                    // Paced (`rr --rate`): the next slot on the loop's
                    // timer heap.
                    if let Some(wait) = self.tx.pace_wait() {
                        return Ok(Turn::Until(Instant::now() + wait));
                    }
                    self.step = if self.tx.next_request(&mut self.req) {
                        Step::Send
                    } else {
                        Step::End {
                            tries: 0,
                            next_ns: 0,
                        }
                    };
                }
                Step::Send => {
                    if !self.io.send(&self.req)? {
                        return Ok(Turn::Wait);
                    }
                    let due = self.tx.core.deadline(mono_ns()).unwrap_or(u64::MAX);
                    self.step = Step::Await(due);
                }
                Step::Await(due) => match self.io.recv(&mut sh.slots)? {
                    // Late and stray datagrams are dropped; the request
                    // still waits.
                    Some(resp) => {
                        if let Response::Matched(server) = self.tx.core.on_response(resp)? {
                            let t = Transaction::Answered(server);
                            self.tx.complete(t, &mut sh.overall);
                            self.step = Step::Next;
                        }
                    }
                    None if mono_ns() >= due => {
                        // Responses without a header cannot be told late:
                        // what is queued goes, so it is not taken for the
                        // next transaction's.
                        while self.io.recv(&mut sh.slots)?.is_some() {}
                        let t = self.tx.core.on_timeout();
                        self.tx.complete(t, &mut sh.overall);
                        self.step = Step::Next;
                    }
                    None => return Ok(until(due)),
                },
                Step::End { tries, next_ns } => {
                    match self.io.recv(&mut sh.slots)? {
                        Some([]) => {
                            self.step = Step::Done;
                            return Ok(Turn::Done);
                        }
                        Some(_) => continue,
                        None => {}
                    }
                    let now = mono_ns();
                    if now < next_ns {
                        return Ok(until(next_ns));
                    }
                    if tries == UDP_END_TRIES {
                        return Err(end_unanswered());
                    }
                    self.io.send_end()?;
                    let next_ns = now + UDP_END_EVERY.as_nanos() as u64;
                    self.step = Step::End {
                        tries: tries + 1,
                        next_ns,
                    };
                }
                Step::Done => return Ok(Turn::Done),
            }
        }
        Ok(Turn::Again)
    }

    fn measurement(self, phase: &RrPhase) -> RrFlowMeasurement {
        self.tx
            .measurement(phase, self.error.map(|e| e.to_string()))
    }
}

impl LoopFlow for Client<'_> {
    type Shared = ClientShared;

    fn sock(&self) -> Option<BorrowedFd<'_>> {
        Some(self.io.ep.as_fd())
    }

    fn ended(&self) -> bool {
        self.step == Step::Done
    }

    fn turn(&mut self, sh: &mut ClientShared) -> Turn {
        match self.step(sh) {
            Ok(t) => t,
            Err(e) => {
                self.fail(e);
                Turn::Done
            }
        }
    }

    /// The user stopped the test: the phase ends after the open batch.
    fn stop(&mut self, _: &mut ClientShared) -> bool {
        self.tx.stopping = true;
        false
    }

    fn fail(&mut self, e: EngineError) {
        // One end datagram, best effort: the server's flow ends its phase
        // now rather than at its idle limit, so its loop's other flows go
        // on to the next size with the client's.
        if self.step != Step::Done {
            let _ = self.io.send_end();
        }
        self.error = Some(e);
        self.step = Step::Done;
    }

    fn progress(&self) -> u64 {
        self.tx.answered()
    }
}

struct Server<'a> {
    io: Dgram,
    core: RrServer,
    resp: Vec<u8>,
    /// `resp` waits for room in the socket's buffer.
    pending: bool,
    timed: bool,
    answered: u64,
    first: Option<Instant>,
    elapsed_ns: u64,
    done: bool,
    watch: &'a Watch,
    error: Option<EngineError>,
}

impl<'a> Server<'a> {
    fn new(io: Dgram, phase: &RrPhase, timed: bool, watch: &'a Watch) -> Self {
        Server {
            // Requests may be lost on the way: sequences are echoed, not
            // checked against a count.
            core: RrServer::new(io.flow, phase.request as usize, false),
            resp: vec![0; phase.response as usize],
            pending: false,
            timed,
            answered: 0,
            first: None,
            elapsed_ns: 0,
            done: false,
            watch,
            error: None,
            io,
        }
    }

    fn step(&mut self, slots: &mut RecvSlots) -> Result<Turn, EngineError> {
        for _ in 0..CALLS_PER_TURN {
            if self.pending {
                if !self.io.send(&self.resp)? {
                    return Ok(Turn::Wait);
                }
                self.pending = false;
                self.answered += 1;
                self.watch.tick(self.io.flow);
            }
            let Some(req) = self.io.recv(slots)? else {
                return Ok(Turn::Wait);
            };
            if req.is_empty() {
                // End of phase: answered more than once, since datagrams
                // may drop (best effort: the client closes its socket as
                // soon as one arrives).
                for _ in 0..UDP_END_ACKS {
                    let _ = self.io.send_end();
                }
                self.end();
                return Ok(Turn::Done);
            }
            let t_rx = self.timed.then(mono_ns);
            self.first.get_or_insert_with(Instant::now);
            self.core.on_request(req, t_rx, mono_ns, &mut self.resp)?;
            self.pending = true;
        }
        Ok(Turn::Again)
    }

    fn end(&mut self) {
        self.elapsed_ns = self.first.map_or(0, |f| f.elapsed().as_nanos() as u64);
        self.done = true;
    }

    fn measurement(self, phase: &RrPhase) -> RrFlowMeasurement {
        let error = self.error.map(|e| e.to_string());
        served(phase, self.io.flow, self.answered, self.elapsed_ns, error)
    }
}

impl LoopFlow for Server<'_> {
    type Shared = RecvSlots;

    fn sock(&self) -> Option<BorrowedFd<'_>> {
        Some(self.io.ep.as_fd())
    }

    fn ended(&self) -> bool {
        self.done
    }

    fn turn(&mut self, slots: &mut RecvSlots) -> Turn {
        match self.step(slots) {
            Ok(t) => t,
            Err(e) => {
                self.fail(e);
                Turn::Done
            }
        }
    }

    fn fail(&mut self, e: EngineError) {
        self.error = Some(e);
        self.end();
    }

    fn progress(&self) -> u64 {
        self.answered
    }
}
