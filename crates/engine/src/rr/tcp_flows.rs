//! rr's and crr's TCP flows on event loops, whatever the loop waits with:
//! a flow's transport and message buffers ([`Msg`]), its client steps
//! ([`ClientFlow`]: pace, request, response, the phase's end; crr's
//! connect and close) and its server steps ([`ServerFlow`]), each moving
//! a message a piece at a time without blocking. A server flow and an rr
//! client flow hold their one connection; a crr client flow's [`Link`]
//! holds where it connects and the transaction's connection. What is counted, and
//! when the clock is read, is the shared tally's ([`Transactions`],
//! [`served`]); what moves the bytes is the loop kind's [`Transport`]: the
//! flow's engine on an epoll loop ([`super::loops`]), queued requests and
//! multishot receives on an io_uring loop ([`super::ring_loops`]). Each
//! loop kind only says how its flows wait ([`LoopDrive`]).

use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use linerate_proto::measure::RrFlowMeasurement;
use linerate_proto::rr_flow::{RrServer, Transaction};
use linerate_proto::spec::RrPhase;
use linerate_proto::wire::{DataHello, Side};
use linerate_stats::histogram::Histogram;
use rustix::event::epoll::EventFlags;

use crate::clock::mono_ns;
use crate::engines::TcpEndpoint;
use crate::event_loop::{Turn, WATCH_ALL};
use crate::stream::{is_timeout, map_err};
use crate::{socket, EngineError};

use super::conns::Conn;
use super::crr::{CrrTarget, CONNECT_TIMEOUT};
use super::exchange::reliable_answer;
use super::loop_tally::{failed, served, with_loop_rtt, LoopCtx, Role, RrFlow, Transactions};
use super::params::RrParams;
use super::watch::Watch;

/// Calls one ready flow gets per turn (a message is one or two calls).
const CALLS_PER_TURN: u32 = 8;

/// How a loop kind moves a flow's bytes on its connection, without
/// blocking: `Ok(None)` when it would block (the loop wakes the flow when
/// it can go on), `Ok(Some(0))` at the peer's end of stream. Its calls
/// take the connection as a TCP endpoint ([`TcpEndpoint`]), generic like
/// the engines' TCP calls; the flow owns the kernel stream because it
/// connects it (crr).
pub(super) trait Transport {
    /// What the loop lends every call (an io_uring loop's queue).
    type Cx;
    /// crr: whether the request's first write may go while its connection
    /// is still being made, the write then telling whether it is made (it
    /// would block until it is; a failed connect fails it). True where a
    /// write is one plain non-blocking call: it saves a `poll(2)` and a
    /// `getsockopt(SO_ERROR)` per transaction, and the request reaches the
    /// server before its accept does, so it is answered there and then.
    const WRITES_WHILE_CONNECTING: bool = false;
    /// Whether the loop tells the flow its socket's readiness edges
    /// ([`crate::event_loop::LoopFlow::woke`]: epoll's), the server's FIN
    /// among them (`EPOLLRDHUP`). crr's client then closes on that edge
    /// instead of reading the end of stream, and waits for it without a
    /// `read` that would block: one or two `recv(2)` less per transaction.
    const SEES_PEER_CLOSE: bool = false;
    /// `sock` is the flow's connection now (crr: each transaction's).
    fn attach<S: TcpEndpoint>(&mut self, sock: &S) -> Result<(), EngineError>;
    /// Like [`Transport::attach`], for a socket non-blocking since its
    /// creation (crr's).
    fn attach_nonblocking<S: TcpEndpoint>(&mut self, sock: &S) -> Result<(), EngineError> {
        self.attach(sock)
    }
    /// Writes on from `buf`: how many of its bytes went.
    fn write<S: TcpEndpoint>(
        &mut self,
        cx: &mut Self::Cx,
        sock: &S,
        buf: &[u8],
    ) -> Result<Option<usize>, EngineError>;
    /// Reads on into `buf`: how many bytes came.
    fn read<S: TcpEndpoint>(
        &mut self,
        cx: &mut Self::Cx,
        sock: &S,
        buf: &mut [u8],
    ) -> Result<Option<usize>, EngineError>;
    /// crr: `sock`'s connect is under way: the loop is to give the flow
    /// a turn once it can write (an epoll loop watches every new socket
    /// already: [`Turn::Watch`]).
    fn await_connect<S: TcpEndpoint>(
        &mut self,
        _cx: &mut Self::Cx,
        _sock: &S,
    ) -> Result<(), EngineError> {
        Ok(())
    }
}

/// A non-blocking call's result of `what` as a [`Transport`]'s: `None`
/// when it would block or was interrupted.
pub(super) fn nonblocking(
    what: &str,
    r: std::io::Result<usize>,
) -> Result<Option<usize>, EngineError> {
    match r {
        Ok(k) => Ok(Some(k)),
        Err(e) if is_timeout(&e) || e.kind() == std::io::ErrorKind::Interrupted => Ok(None),
        Err(e) => Err(map_err(what, e)),
    }
}

/// How a loop kind drives a loop's flows to their ends.
pub(super) trait LoopDrive<T: Transport> {
    /// Client flows; returns the loop's round trips at full precision.
    fn clients(&mut self, flows: &mut [ClientFlow<'_, T>]) -> Histogram;
    fn servers(&mut self, flows: &mut [ServerFlow<'_, T>]);
}

/// One loop: its flows of `cx.phase` (each with its connection, or none
/// for crr), each with the transport `new(position)` makes, driven to
/// their ends by `d`.
pub(super) fn run_loop<T: Transport>(
    share: Vec<(u32, Option<Conn>)>,
    cx: &LoopCtx<'_>,
    role: Role,
    new: impl Fn(usize) -> T,
    mut d: impl LoopDrive<T>,
) -> Vec<RrFlowMeasurement> {
    let phase = cx.phase;
    let mut out = Vec::with_capacity(share.len());
    let mut flows = Vec::with_capacity(share.len());
    for (flow, sock) in share {
        let mut io = Msg::new(new(flows.len()), flow, phase, cx.crr.map(|t| (t, cx.p)));
        let opened = match (sock, cx.crr) {
            // crr connects per transaction.
            (_, Some(target)) => Ok(Link::Crr(target, None)),
            (Some(Conn::Tcp(sock)), None) => io.t.attach(&sock).map(|()| Link::Rr(sock)),
            (Some(Conn::Udp(_)) | None, None) => Err(EngineError::Protocol(
                "no TCP connection for this flow".into(),
            )),
        };
        match opened {
            Ok(link) => flows.push((io, link)),
            Err(e) => out.push(failed(phase, flow, &e.to_string())),
        }
    }
    match role {
        Role::Client => {
            let mut v: Vec<ClientFlow<'_, T>> = flows
                .into_iter()
                .map(|(io, link)| ClientFlow::new(io, link, cx))
                .collect();
            // The loop's round trips at full precision, for the phase's
            // percentiles; each flow keeps a coarse histogram of its own.
            let overall = d.clients(&mut v);
            let first = out.len();
            out.extend(v.into_iter().map(|c| c.measurement(phase)));
            with_loop_rtt(&mut out[first..], &overall);
        }
        Role::Server => {
            let per_message = cx.p.plan.per_message();
            let mut v = Vec::with_capacity(flows.len());
            for (io, link) in flows {
                match link {
                    Link::Rr(sock) => {
                        v.push(ServerFlow::new(io, sock, phase, per_message, cx.watch))
                    }
                    // A crr server's connections are its pools'.
                    Link::Crr(..) | Link::Closed => {
                        out.push(failed(phase, io.flow, "no TCP connection for this flow"))
                    }
                }
            }
            d.servers(&mut v);
            out.extend(v.into_iter().map(|s| s.measurement(phase)));
        }
    }
    out
}

/// A flow's transport and message buffers: moves one whole message at a
/// time in pieces on the connection it is given, without blocking.
pub(super) struct Msg<T> {
    pub(super) flow: u32,
    pub(super) t: T,
    /// The request ([`REQ`]: crr's greeting first) and the response
    /// ([`RESP`]).
    bufs: [Vec<u8>; 2],
    /// Where the request starts in its buffer (after crr's greeting).
    hello_len: usize,
    /// How much of the message in flight is done.
    off: usize,
}

const REQ: usize = 0;
const RESP: usize = 1;

/// What a piece of a message came to.
enum Piece {
    Whole,
    Partial,
    WouldBlock,
    /// The peer ended the stream.
    End,
}

impl<T: Transport> Msg<T> {
    /// A flow without a connection yet; crr's request buffer starts with
    /// the flow's greeting (the test's token and the flow's stream id).
    fn new(t: T, flow: u32, phase: &RrPhase, crr: Option<(&CrrTarget, &RrParams)>) -> Self {
        let mut req = Vec::new();
        if let Some((target, p)) = crr {
            DataHello {
                token: target.token,
                stream: p.plan.conn_id(phase.index, flow),
                sender: Side::Client,
            }
            .encode(&mut req);
        }
        let hello_len = req.len();
        req.resize(hello_len + phase.request as usize, 0);
        Msg {
            flow,
            t,
            bufs: [req, vec![0; phase.response as usize]],
            hello_len,
            off: 0,
        }
    }

    /// Writes on from buffer `b` to `sock` (all of it makes the message
    /// whole).
    fn write(&mut self, cx: &mut T::Cx, sock: &TcpStream, b: usize) -> Result<Piece, EngineError> {
        let (len, off) = (self.bufs[b].len(), self.off);
        match self.t.write(cx, sock, &self.bufs[b][off..])? {
            None => Ok(Piece::WouldBlock),
            Some(0) => Err(EngineError::PeerReset("write returned 0".into())),
            Some(k) => Ok(self.advance(k, len)),
        }
    }

    /// Reads on from `sock` into buffer `b` (full makes the message whole).
    fn read(&mut self, cx: &mut T::Cx, sock: &TcpStream, b: usize) -> Result<Piece, EngineError> {
        let (len, off) = (self.bufs[b].len(), self.off);
        match self.t.read(cx, sock, &mut self.bufs[b][off..])? {
            None => Ok(Piece::WouldBlock),
            Some(0) => Ok(Piece::End),
            Some(k) => Ok(self.advance(k, len)),
        }
    }

    fn advance(&mut self, k: usize, len: usize) -> Piece {
        self.off += k;
        if self.off >= len {
            self.off = 0;
            Piece::Whole
        } else {
            Piece::Partial
        }
    }
}

pub(super) fn no_connection() -> EngineError {
    EngineError::Protocol("the flow has no connection".into())
}

/// A client flow's connection: rr's one for the phase, or crr's, a new
/// one per transaction.
enum Link<'a> {
    /// rr (and, in `run_loop`, every server flow): the phase's connection.
    Rr(TcpStream),
    /// crr: where each transaction connects, and the transaction's
    /// connection (none between two).
    Crr(&'a CrrTarget, Option<TcpStream>),
    /// Closed before the flow's end: rr's after the server's close, or
    /// either's on giving up (the peer sees it at once).
    Closed,
}

impl<'a> Link<'a> {
    /// The connection now, if any.
    fn stream(&self) -> Option<&TcpStream> {
        match self {
            Link::Rr(sock) | Link::Crr(_, Some(sock)) => Some(sock),
            Link::Crr(_, None) | Link::Closed => None,
        }
    }

    /// The connection the next call moves bytes on.
    fn sock(&self) -> Result<&TcpStream, EngineError> {
        self.stream().ok_or_else(no_connection)
    }

    /// crr: where each transaction connects.
    fn crr(&self) -> Option<&'a CrrTarget> {
        match self {
            Link::Crr(target, _) => Some(target),
            Link::Rr(_) | Link::Closed => None,
        }
    }
}

/// The [`RrFlow`] items both TCP flows take from their [`Msg`] (`io`):
/// its transport, and its buffers as the messages their sends read from.
macro_rules! msg_parts {
    () => {
        type Cx = T::Cx;
        type Io = T;

        fn transport(&mut self) -> &mut T {
            &mut self.io.t
        }

        fn messages(&mut self) -> &mut [Vec<u8>] {
            &mut self.io.bufs
        }
    };
}

/// Where a client flow is in its transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Choosing the next request (or ending the phase).
    Next,
    /// crr: the transaction's connection is being made (since when).
    Connecting(Instant),
    Request,
    Response,
    /// Reading to the server's close: after crr's response (its answer
    /// is counted then), or after rr's last one (its write side shut).
    Closing,
    Done,
}

/// A client flow of either loop kind.
pub(super) struct ClientFlow<'a, T> {
    pub(super) io: Msg<T>,
    link: Link<'a>,
    /// Its core, tally, phase clock and open batch.
    tx: Transactions<'a>,
    step: Step,
    /// crr: the response read, counted once the server has closed.
    answer: Option<Transaction>,
    /// crr ([`Transport::SEES_PEER_CLOSE`]): the readiness the loop
    /// reported for the transaction's connection so far.
    seen: EventFlags,
    error: Option<EngineError>,
}

impl<'a, T: Transport> ClientFlow<'a, T> {
    fn new(io: Msg<T>, link: Link<'a>, cx: &LoopCtx<'a>) -> Self {
        ClientFlow {
            tx: Transactions::new(io.flow, cx.phase, cx.p, cx.watch, None),
            step: Step::Next,
            link,
            answer: None,
            seen: EventFlags::empty(),
            error: None,
            io,
        }
    }

    /// Starts the next request; false when the phase is over.
    fn next_request(&mut self) -> bool {
        let hello = self.io.hello_len;
        self.tx.next_request(&mut self.io.bufs[REQ][hello..])
    }

    /// crr: opens the next transaction's connection, non-blocking; the
    /// loop watches it from now on. Where the transport may
    /// ([`Transport::WRITES_WHILE_CONNECTING`]) the request goes at once.
    fn connect(&mut self, cx: &mut T::Cx, target: &'a CrrTarget) -> Result<Turn, EngineError> {
        let (sock, _) = socket::start_connect(target.addr, &target.tcp)?;
        let now = Instant::now();
        let due = now + CONNECT_TIMEOUT;
        self.step = Step::Connecting(now);
        self.seen = EventFlags::empty();
        if T::WRITES_WHILE_CONNECTING {
            // The post-connect options (TCP_NODELAY, congestion) take on
            // a socket still connecting.
            socket::apply_post_connect_fresh(&sock, &target.tcp)?;
            self.io.t.attach_nonblocking(&sock)?;
            self.link = Link::Crr(target, Some(sock));
            // Made or not, the loop watches the socket from now on.
            self.write_connecting(cx, now)?;
            return Ok(Turn::Watch(due));
        }
        self.io.t.attach_nonblocking(&sock)?;
        self.io.t.await_connect(cx, &sock)?;
        self.link = Link::Crr(target, Some(sock));
        Ok(Turn::Watch(due))
    }

    /// crr ([`Transport::WRITES_WHILE_CONNECTING`]): the request's first
    /// write on the connection begun at `since`; `Some(turn)` while it is
    /// not made. Its failure is the connect's.
    fn write_connecting(
        &mut self,
        cx: &mut T::Cx,
        since: Instant,
    ) -> Result<Option<Turn>, EngineError> {
        let addr = self.link.crr().ok_or_else(no_connection)?.addr;
        match self.io.write(cx, self.link.sock()?, REQ) {
            Ok(Piece::Whole) => self.step = Step::Response,
            Ok(Piece::Partial) => self.step = Step::Request,
            Ok(Piece::WouldBlock) => {
                let due = since + CONNECT_TIMEOUT;
                if Instant::now() >= due {
                    return Err(socket::connect_error(
                        addr,
                        std::io::ErrorKind::TimedOut.into(),
                    ));
                }
                return Ok(Some(Turn::Until(due)));
            }
            Ok(Piece::End) => unreachable_end()?,
            Err(EngineError::Io { err, .. }) => return Err(socket::connect_error(addr, err)),
            Err(e) => return Err(e),
        }
        Ok(None)
    }

    /// crr: whether the connection begun at `since` is made (an error if
    /// it failed or took too long); `Some(turn)` while it is not.
    fn connected(&mut self, cx: &mut T::Cx, since: Instant) -> Result<Option<Turn>, EngineError> {
        let Link::Crr(target, Some(sock)) = &self.link else {
            return Err(no_connection());
        };
        let ready = socket::wait_ready(sock, libc::POLLOUT, Duration::ZERO)
            .map_err(|e| socket::connect_error(target.addr, e))?;
        if !ready {
            let due = since + CONNECT_TIMEOUT;
            if Instant::now() >= due {
                return Err(socket::connect_error(
                    target.addr,
                    std::io::ErrorKind::TimedOut.into(),
                ));
            }
            self.io.t.await_connect(cx, sock)?;
            return Ok(Some(Turn::Until(due)));
        }
        socket::finish_connect(sock, target.addr, &target.tcp)?;
        Ok(None)
    }

    /// A few calls' worth of the flow's transactions, without blocking.
    fn step(&mut self, cx: &mut T::Cx, overall: &mut Histogram) -> Result<Turn, EngineError> {
        for _ in 0..CALLS_PER_TURN {
            match self.step {
                Step::Next => {
                    // Paced (`rr --rate`): the next slot on the loop's
                    // timer heap.
                    if let Some(wait) = self.tx.pace_wait() {
                        return Ok(Turn::Until(Instant::now() + wait));
                    }
                    if !self.next_request() {
                        return self.end_phase();
                    }
                    match self.link.crr() {
                        Some(target) => return self.connect(cx, target),
                        None => self.step = Step::Request,
                    }
                }
                Step::Connecting(since) if T::WRITES_WHILE_CONNECTING => {
                    if let Some(turn) = self.write_connecting(cx, since)? {
                        return Ok(turn);
                    }
                }
                Step::Connecting(since) => match self.connected(cx, since)? {
                    Some(turn) => return Ok(turn),
                    None => self.step = Step::Request,
                },
                Step::Request => match self.io.write(cx, self.link.sock()?, REQ)? {
                    Piece::Whole => self.step = Step::Response,
                    Piece::Partial => {}
                    Piece::WouldBlock => return Ok(Turn::Wait),
                    Piece::End => unreachable_end()?,
                },
                Step::Response => match self.io.read(cx, self.link.sock()?, RESP)? {
                    Piece::Whole => {
                        let r = self.tx.core.on_response(&self.io.bufs[RESP])?;
                        let t = reliable_answer(r)?;
                        if self.link.crr().is_some() {
                            // The server closes first: counted after that.
                            self.answer = Some(t);
                            self.step = Step::Closing;
                        } else {
                            self.tx.complete(t, overall);
                            self.step = Step::Next;
                        }
                    }
                    Piece::Partial => {}
                    Piece::WouldBlock => return Ok(Turn::Wait),
                    Piece::End => {
                        return Err(EngineError::PeerReset(
                            "server closed the connection mid-phase".into(),
                        ))
                    }
                },
                Step::Closing if self.answer.is_some() && T::SEES_PEER_CLOSE => {
                    match peer_close(self.seen) {
                        // The server's FIN is queued behind its response:
                        // its close is seen now, without reading it.
                        Some(true) => {
                            if let Some(turn) = self.server_closed(overall) {
                                return Ok(turn);
                            }
                        }
                        // Its edge wakes the flow.
                        None => return Ok(Turn::Wait),
                        // A reset or error: the read says which.
                        Some(false) => {
                            if let Some(turn) = self.close_by_reading(cx, overall)? {
                                return Ok(turn);
                            }
                        }
                    }
                }
                Step::Closing => {
                    if let Some(turn) = self.close_by_reading(cx, overall)? {
                        return Ok(turn);
                    }
                }
                Step::Done => return Ok(Turn::Done),
            }
        }
        Ok(Turn::Again)
    }

    /// Reads to the server's close: `Some(turn)` while it has not come
    /// (or once the flow is done).
    fn close_by_reading(
        &mut self,
        cx: &mut T::Cx,
        overall: &mut Histogram,
    ) -> Result<Option<Turn>, EngineError> {
        match self.io.read(cx, self.link.sock()?, RESP)? {
            Piece::End => Ok(self.server_closed(overall)),
            Piece::WouldBlock => Ok(Some(Turn::Wait)),
            Piece::Whole | Piece::Partial => Err(EngineError::Protocol(
                "the server sent bytes after its response".into(),
            )),
        }
    }

    /// The server has closed: closed here too, after it (no TIME_WAIT on
    /// this side), and crr's transaction counted; `Some(Turn::Done)` when
    /// that ends rr's phase.
    fn server_closed(&mut self, overall: &mut Histogram) -> Option<Turn> {
        match &mut self.link {
            Link::Crr(_, sock) => *sock = None,
            Link::Rr(_) | Link::Closed => self.link = Link::Closed,
        }
        let Some(t) = self.answer.take() else {
            self.step = Step::Done;
            return Some(Turn::Done);
        };
        self.tx.complete(t, overall);
        self.step = Step::Next;
        None
    }

    /// The phase's last transaction is done: rr shuts down its write side
    /// and reads to the server's close; crr has no connection left.
    fn end_phase(&mut self) -> Result<Turn, EngineError> {
        match &self.link {
            Link::Rr(sock) => {
                sock.shutdown(Shutdown::Write)
                    .map_err(|e| map_err("shutdown", e))?;
                self.step = Step::Closing;
                Ok(Turn::Again)
            }
            _ => {
                self.step = Step::Done;
                Ok(Turn::Done)
            }
        }
    }

    fn measurement(self, phase: &RrPhase) -> RrFlowMeasurement {
        self.tx
            .measurement(phase, self.error.map(|e| e.to_string()))
    }
}

impl<T: Transport> RrFlow for ClientFlow<'_, T> {
    /// The loop's full-precision round-trip histogram.
    type Shared = Histogram;
    msg_parts!();

    fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.link.stream().map(AsFd::as_fd)
    }

    /// A crr connection whose request went whole waits only to read:
    /// watched for writing too, it would be reported writable at once.
    fn interest(&self) -> EventFlags {
        if self.link.crr().is_some() && self.step == Step::Response {
            EventFlags::IN | EventFlags::RDHUP
        } else {
            WATCH_ALL
        }
    }

    fn woke(&mut self, events: EventFlags) {
        self.seen |= events;
    }

    fn steps(&mut self, cx: &mut T::Cx, overall: &mut Histogram) -> Result<Turn, EngineError> {
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
        self.error = Some(e);
        self.step = Step::Done;
        // Its connection (crr: the one in flight) closes now.
        self.link = Link::Closed;
    }

    /// Transactions answered so far.
    fn answered(&self) -> u64 {
        self.tx.answered()
    }
}

/// What the readiness `seen` on a crr connection says of the server's
/// close: `Some(true)` its FIN has come, nothing wrong (`EPOLLRDHUP`
/// alone: the stream ends after what is queued); `Some(false)` a reset or
/// error (`EPOLLHUP`/`EPOLLERR`: a read tells which); `None` not yet.
fn peer_close(seen: EventFlags) -> Option<bool> {
    if seen.intersects(EventFlags::HUP | EventFlags::ERR) {
        Some(false)
    } else if seen.contains(EventFlags::RDHUP) {
        Some(true)
    } else {
        None
    }
}

/// A write never reports end of stream.
fn unreachable_end() -> Result<(), EngineError> {
    Err(EngineError::Protocol("a write saw end of stream".into()))
}

/// A server flow of either loop kind.
pub(super) struct ServerFlow<'a, T> {
    pub(super) io: Msg<T>,
    /// Its connection, for the phase.
    sock: TcpStream,
    core: RrServer,
    /// Reading a request (else writing its response).
    reading: bool,
    done: bool,
    timed: bool,
    answered: u64,
    first: Option<Instant>,
    elapsed_ns: u64,
    watch: &'a Watch,
    error: Option<EngineError>,
}

impl<'a, T: Transport> ServerFlow<'a, T> {
    fn new(io: Msg<T>, sock: TcpStream, phase: &RrPhase, timed: bool, watch: &'a Watch) -> Self {
        ServerFlow {
            sock,
            core: RrServer::new(io.flow, phase.request as usize, true),
            reading: true,
            done: false,
            timed,
            answered: 0,
            first: None,
            elapsed_ns: 0,
            watch,
            error: None,
            io,
        }
    }

    fn step(&mut self, cx: &mut T::Cx) -> Result<Turn, EngineError> {
        for _ in 0..CALLS_PER_TURN {
            if self.reading {
                match self.io.read(cx, &self.sock, REQ)? {
                    Piece::Whole => {
                        let t_rx = self.timed.then(mono_ns);
                        self.first.get_or_insert_with(Instant::now);
                        let [req, resp] = &mut self.io.bufs;
                        self.core.on_request(req, t_rx, mono_ns, resp)?;
                        self.reading = false;
                    }
                    Piece::Partial => {}
                    Piece::WouldBlock => return Ok(Turn::Wait),
                    Piece::End if self.io.off == 0 => {
                        // The client ended the phase: answer by closing.
                        self.elapsed_ns = self.first.map_or(0, |f| f.elapsed().as_nanos() as u64);
                        let _ = self.sock.shutdown(Shutdown::Both);
                        self.done = true;
                        return Ok(Turn::Done);
                    }
                    Piece::End => {
                        return Err(EngineError::PeerReset(
                            "client closed the connection mid-request".into(),
                        ))
                    }
                }
            } else {
                match self.io.write(cx, &self.sock, RESP)? {
                    Piece::Whole => {
                        self.answered += 1;
                        self.watch.tick(self.io.flow);
                        self.reading = true;
                    }
                    Piece::Partial => {}
                    Piece::WouldBlock => return Ok(Turn::Wait),
                    Piece::End => unreachable_end()?,
                }
            }
        }
        Ok(Turn::Again)
    }

    fn measurement(self, phase: &RrPhase) -> RrFlowMeasurement {
        let error = self.error.map(|e| e.to_string());
        served(phase, self.io.flow, self.answered, self.elapsed_ns, error)
    }
}

impl<T: Transport> RrFlow for ServerFlow<'_, T> {
    type Shared = ();
    msg_parts!();

    fn fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.sock.as_fd())
    }

    fn steps(&mut self, cx: &mut T::Cx, _: &mut ()) -> Result<Turn, EngineError> {
        self.step(cx)
    }

    /// True once the flow has ended.
    fn is_done(&self) -> bool {
        self.done
    }

    /// The flow ends with `e`.
    fn give_up(&mut self, e: EngineError) {
        self.elapsed_ns = self.first.map_or(0, |f| f.elapsed().as_nanos() as u64);
        self.error = Some(e);
        self.done = true;
    }

    /// Responses sent so far.
    fn answered(&self) -> u64 {
        self.answered
    }
}
