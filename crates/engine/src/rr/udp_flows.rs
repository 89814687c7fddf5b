//! rr over UDP on event loops (`rr --proto udp --flows N --threads T`),
//! whatever the loop waits with: one loop thread's flows, each on its own
//! connected socket (attached by the UDP greeting, as every UDP data
//! socket is), a datagram per message. Each flow keeps the cores a flow
//! thread has ([`super::udp`]): the client's
//! [`linerate_proto::rr_flow::RrClient`] with its response timeout (a
//! response missing after [`RESPONSE_TIMEOUT_NS`] is lost, a later one is
//! late and dropped) in its [`Transactions`], the server's [`RrServer`].
//! What moves the datagrams, without blocking, is the loop kind's
//! [`Datagrams`]: the syscall engine on an epoll loop
//! ([`super::udp_loops`]), queued sends and a multishot receive on an
//! io_uring loop ([`super::udp_ring_loops`]); each loop kind only says how
//! its flows wait ([`UdpDrive`]). A client waiting for a response waits
//! for its socket or its deadline on the loop's timer heap
//! ([`Turn::Until`]).
//!
//! The phase ends as on a flow thread: the client sends an empty
//! datagram, repeated every [`UDP_END_EVERY`] until the server answers
//! with empty datagrams (it has then counted every request it answered).

use std::io::ErrorKind;
use std::net::UdpSocket;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use linerate_proto::measure::RrFlowMeasurement;
use linerate_proto::rr_flow::{Response, RrServer, Transaction, RESPONSE_TIMEOUT_NS};
use linerate_proto::spec::RrPhase;
use linerate_stats::histogram::Histogram;

use crate::clock::mono_ns;
use crate::event_loop::Turn;
use crate::stream::map_err;
use crate::EngineError;

use super::conns::Conn;
use super::datagram_io::port_closed;
use super::loop_tally::{failed, served, with_loop_rtt, LoopCtx, Role, RrFlow, Transactions};
use super::udp::{end_unanswered, UDP_END_ACKS, UDP_END_EVERY, UDP_END_TRIES};
use super::watch::Watch;

/// Calls one ready flow gets per turn.
const CALLS_PER_TURN: u32 = 8;

/// How a loop kind moves a flow's datagrams on its connected socket,
/// without blocking.
pub(super) trait Datagrams {
    /// What the loop lends every call (the epoll loop's receive buffer,
    /// an io_uring loop's queue).
    type Cx;
    /// The flow's socket.
    fn socket(&self) -> &UdpSocket;
    /// Sends `buf` as one datagram; false while it has not gone (the
    /// loop gives the flow a turn when it can go on, and the flow offers
    /// the same `buf` again).
    fn send(&mut self, cx: &mut Self::Cx, buf: &[u8]) -> Result<bool, EngineError>;
    /// The next datagram that arrived; `None` when none has.
    fn recv<'s>(&'s mut self, cx: &'s mut Self::Cx) -> Result<Option<&'s [u8]>, EngineError>;
}

/// The empty datagram that ends a phase (and answers that end), sent at
/// once beside the loop (once per phase, so its cost does not matter; the
/// engines' batches hold at least one byte). A full buffer drops it: it
/// is repeated.
fn send_end(sock: &UdpSocket) -> Result<(), EngineError> {
    match socket2::SockRef::from(sock).send_with_flags(&[], libc::MSG_DONTWAIT) {
        Ok(_) => Ok(()),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => Ok(()),
        Err(e) if e.kind() == ErrorKind::ConnectionRefused => Err(port_closed()),
        Err(e) => Err(map_err("send", e)),
    }
}

/// How a loop kind drives a loop's flows to their ends.
pub(super) trait UdpDrive<D: Datagrams> {
    /// Client flows; returns the loop's round trips at full precision.
    fn clients(&mut self, flows: &mut [UdpClient<'_, D>]) -> Histogram;
    fn servers(&mut self, flows: &mut [UdpServer<'_, D>]);
}

/// One loop: its UDP flows of `cx.phase`, each socket made the loop
/// kind's by `open(position, socket)`, driven to their ends by `d`.
pub(super) fn run_loop<D: Datagrams>(
    share: Vec<(u32, Option<Conn>)>,
    cx: &LoopCtx<'_>,
    role: Role,
    open: impl Fn(usize, UdpSocket) -> Result<D, EngineError>,
    mut d: impl UdpDrive<D>,
) -> Vec<RrFlowMeasurement> {
    let phase = cx.phase;
    let mut out = Vec::with_capacity(share.len());
    let mut ios = Vec::with_capacity(share.len());
    for (flow, conn) in share {
        let opened = match conn {
            Some(Conn::Udp(sock)) => open(ios.len(), sock),
            _ => Err(EngineError::Protocol("no UDP socket for this flow".into())),
        };
        match opened {
            Ok(io) => ios.push((flow, io)),
            Err(e) => out.push(failed(phase, flow, &e.to_string())),
        }
    }
    match role {
        Role::Client => {
            let mut v: Vec<UdpClient<'_, D>> = ios
                .into_iter()
                .map(|(flow, io)| UdpClient::new(flow, io, cx))
                .collect();
            let overall = d.clients(&mut v);
            let first = out.len();
            out.extend(v.into_iter().map(|c| c.measurement(phase)));
            with_loop_rtt(&mut out[first..], &overall);
        }
        Role::Server => {
            let timed = cx.p.plan.per_message();
            let mut v: Vec<UdpServer<'_, D>> = ios
                .into_iter()
                .map(|(flow, io)| UdpServer::new(flow, io, phase, timed, cx.watch))
                .collect();
            d.servers(&mut v);
            out.extend(v.into_iter().map(|s| s.measurement(phase)));
        }
    }
    out
}

/// The turn that waits for a flow's socket or `deadline_ns` (monotonic).
fn until(deadline_ns: u64) -> Turn {
    let left = deadline_ns.saturating_sub(mono_ns());
    Turn::Until(Instant::now() + Duration::from_nanos(left))
}

/// Where a client flow is in its transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Choosing the next request (or ending the phase).
    Next,
    /// The request waits to go.
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

/// A client flow of either loop kind.
pub(super) struct UdpClient<'a, D> {
    pub(super) io: D,
    tx: Transactions<'a>,
    req: Vec<u8>,
    step: Step,
    error: Option<EngineError>,
}

impl<'a, D: Datagrams> UdpClient<'a, D> {
    fn new(flow: u32, io: D, cx: &LoopCtx<'a>) -> Self {
        UdpClient {
            tx: Transactions::new(flow, cx.phase, cx.p, cx.watch, Some(RESPONSE_TIMEOUT_NS)),
            req: vec![0; cx.phase.request as usize],
            step: Step::Next,
            error: None,
            io,
        }
    }

    fn step(&mut self, cx: &mut D::Cx, overall: &mut Histogram) -> Result<Turn, EngineError> {
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
                    if !self.io.send(cx, &self.req)? {
                        return Ok(Turn::Wait);
                    }
                    let due = self.tx.core.deadline(mono_ns()).unwrap_or(u64::MAX);
                    self.step = Step::Await(due);
                }
                Step::Await(due) => match self.io.recv(cx)? {
                    // Late and stray datagrams are dropped; the request
                    // still waits.
                    Some(resp) => {
                        if let Response::Matched(server) = self.tx.core.on_response(resp)? {
                            self.tx.complete(Transaction::Answered(server), overall);
                            self.step = Step::Next;
                        }
                    }
                    None if mono_ns() >= due => {
                        // Responses without a header cannot be told late:
                        // what is queued goes, so it is not taken for the
                        // next transaction's.
                        while self.io.recv(cx)?.is_some() {}
                        let t = self.tx.core.on_timeout();
                        self.tx.complete(t, overall);
                        self.step = Step::Next;
                    }
                    None => return Ok(until(due)),
                },
                Step::End { tries, next_ns } => {
                    match self.io.recv(cx)? {
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
                    send_end(self.io.socket())?;
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

impl<D: Datagrams> RrFlow for UdpClient<'_, D> {
    type Cx = D::Cx;
    /// The loop's full-precision round-trip histogram.
    type Shared = Histogram;
    type Io = D;

    fn transport(&mut self) -> &mut D {
        &mut self.io
    }

    fn messages(&mut self) -> &mut [Vec<u8>] {
        std::slice::from_mut(&mut self.req)
    }

    fn fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.io.socket().as_fd())
    }

    fn steps(&mut self, cx: &mut D::Cx, overall: &mut Histogram) -> Result<Turn, EngineError> {
        self.step(cx, overall)
    }

    /// True once the flow has ended.
    fn is_done(&self) -> bool {
        self.step == Step::Done
    }

    /// The user stopped the test: the phase ends after the open batch.
    fn end_after_batch(&mut self) {
        self.tx.stopping = true;
    }

    /// The flow ends with `e`.
    fn give_up(&mut self, e: EngineError) {
        // One end datagram, best effort: the server's flow ends its phase
        // now rather than at its idle limit, so its loop's other flows go
        // on to the next size with the client's.
        if self.step != Step::Done {
            let _ = send_end(self.io.socket());
        }
        self.error = Some(e);
        self.step = Step::Done;
    }

    /// Transactions answered so far.
    fn answered(&self) -> u64 {
        self.tx.answered()
    }
}

/// A server flow of either loop kind.
pub(super) struct UdpServer<'a, D> {
    pub(super) io: D,
    flow: u32,
    core: RrServer,
    resp: Vec<u8>,
    /// `resp` waits to go.
    pending: bool,
    timed: bool,
    answered: u64,
    first: Option<Instant>,
    elapsed_ns: u64,
    done: bool,
    watch: &'a Watch,
    error: Option<EngineError>,
}

impl<'a, D: Datagrams> UdpServer<'a, D> {
    fn new(flow: u32, io: D, phase: &RrPhase, timed: bool, watch: &'a Watch) -> Self {
        UdpServer {
            // Requests may be lost on the way: sequences are echoed, not
            // checked against a count.
            core: RrServer::new(flow, phase.request as usize, false),
            flow,
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

    fn step(&mut self, cx: &mut D::Cx) -> Result<Turn, EngineError> {
        for _ in 0..CALLS_PER_TURN {
            if self.pending {
                if !self.io.send(cx, &self.resp)? {
                    return Ok(Turn::Wait);
                }
                self.pending = false;
                self.answered += 1;
                self.watch.tick(self.flow);
            }
            let Some(req) = self.io.recv(cx)? else {
                return Ok(Turn::Wait);
            };
            if req.is_empty() {
                // End of phase: answered more than once, since datagrams
                // may drop (best effort: the client closes its socket as
                // soon as one arrives).
                for _ in 0..UDP_END_ACKS {
                    let _ = send_end(self.io.socket());
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
        served(phase, self.flow, self.answered, self.elapsed_ns, error)
    }
}

impl<D: Datagrams> RrFlow for UdpServer<'_, D> {
    type Cx = D::Cx;
    type Shared = ();
    type Io = D;

    fn transport(&mut self) -> &mut D {
        &mut self.io
    }

    fn messages(&mut self) -> &mut [Vec<u8>] {
        std::slice::from_mut(&mut self.resp)
    }

    fn fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.io.socket().as_fd())
    }

    fn steps(&mut self, cx: &mut D::Cx, _: &mut ()) -> Result<Turn, EngineError> {
        self.step(cx)
    }

    /// True once the flow has ended.
    fn is_done(&self) -> bool {
        self.done
    }

    /// The flow ends with `e`.
    fn give_up(&mut self, e: EngineError) {
        self.error = Some(e);
        self.end();
    }

    /// Responses sent so far.
    fn answered(&self) -> u64 {
        self.answered
    }
}
