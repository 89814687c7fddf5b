//! rr's and crr's TCP flows on io_uring completion loops (`rr --flows N
//! --engine uring`, a server whose engine is `uring`, and `crr --flows N
//! --engine uring`'s client): the same flows as on
//! epoll ([`super::tcp_flows`]: their cores, tally, pacing on the loop's
//! timer heap, phase ends), with their bytes moved by the loop thread's
//! ring ([`crate::event_loop::ring`]).
//!
//! - Each flow arms one multishot `RECV` when it first waits to read; it
//!   takes the thread's provided buffers (one buffer ring per thread, not
//!   per flow) and posts a completion per chunk that arrives. The chunk
//!   is copied into the flow's inbox and its buffer goes straight back
//!   to the kernel; the flow reads its messages from the inbox. When the
//!   request ends (the buffers ran dry) the flow's next read re-arms it;
//!   end of stream (a zero-length completion) is the peer's close.
//! - A write queues one `SEND` of the rest of the message, straight from
//!   the flow's buffer (not touched until its completion); the completion
//!   says how much went, and the flow goes on from there.
//!
//! - crr's flows (`crr --flows N --engine uring`) connect without
//!   blocking, as on epoll, and queue a `POLL_ADD` for the socket's
//!   writability: its completion gives the flow its turn, which finishes
//!   the connect; then the request, response and close as for rr.
//!
//! rr's UDP flows run on the same rings ([`super::udp_ring_loops`]).

use std::io;
use std::os::fd::RawFd;

use io_uring::{cqueue, opcode, types};
use linerate_proto::measure::RrFlowMeasurement;
use linerate_stats::histogram::Histogram;

use crate::engines::uring::Uring;
use crate::engines::{record_use, TcpEndpoint};
use crate::event_loop::ring::{buffers, drive, leak, loop_use, RingFlow, RingIo, BGID};
use crate::event_loop::Turn;
use crate::stream::{map_err, Signals};
use crate::EngineError;

use super::conns::Conn;
use super::loop_tally::{LoopCtx, Role, RrFlow};
use super::tcp_flows::{self, ClientFlow, LoopDrive, ServerFlow, Transport};

/// Largest provided buffer: a message larger than this arrives in pieces.
const RX_BUF_MAX: usize = 64 * 1024;
/// A flow's requests: its send, its multishot receive, crr's wait for
/// its connect.
const OP_SEND: u8 = 1;
const OP_RECV: u8 = 2;
const OP_CONNECT: u8 = 3;

/// One io_uring loop: its flows of `cx.phase`, on `engine`'s ring, with
/// the thread's provided buffers sized for the phase's largest message.
pub(super) fn run_loop(
    engine: Uring,
    share: Vec<(u32, Option<Conn>)>,
    cx: &LoopCtx<'_>,
    role: Role,
) -> Vec<RrFlowMeasurement> {
    let size = (cx.phase.request.max(cx.phase.response) as usize).clamp(1, RX_BUF_MAX);
    on_ring(engine, size, cx.signals, |ring| {
        tcp_flows::run_loop(share, cx, role, RingConn::new, ring)
    })
}

/// Runs `run` with a ring for a loop's flows, whose provided buffers are
/// `size` bytes; then records what the side's loops ran on, for its
/// report. rr's UDP flows too ([`super::udp_ring_loops`]).
pub(super) fn on_ring<R>(
    engine: Uring,
    size: usize,
    signals: &Signals,
    run: impl FnOnce(Ring<'_>) -> R,
) -> R {
    let bufs = Some((buffers(size), size));
    let out = run(Ring {
        engine,
        bufs,
        signals,
    });
    record_use(loop_use(engine, bufs));
    out
}

/// Drives a loop's flows on one ring ([`drive`]), with the thread's
/// provided buffers (count, size); rr's UDP flows too
/// ([`super::udp_ring_loops`]).
pub(super) struct Ring<'s> {
    pub(super) engine: Uring,
    pub(super) bufs: Option<(u16, usize)>,
    pub(super) signals: &'s Signals,
}

impl LoopDrive<RingConn> for Ring<'_> {
    fn clients(&mut self, flows: &mut [ClientFlow<'_, RingConn>]) -> Histogram {
        let mut overall = Histogram::new();
        drive(self.engine, flows, &mut overall, self.bufs, self.signals);
        overall
    }

    fn servers(&mut self, flows: &mut [ServerFlow<'_, RingConn>]) {
        drive(self.engine, flows, &mut (), self.bufs, self.signals);
    }
}

/// A flow's send and multishot receive on the ring, whatever they move
/// (TCP's byte stream here, UDP's datagrams in
/// [`super::udp_ring_loops`]).
pub(super) struct Requests {
    /// The flow's position in its loop: the tag of its requests.
    pub(super) me: usize,
    /// Its send is in flight; its result, once it completed.
    sending: bool,
    sent: Option<i32>,
    /// Its multishot receive is armed.
    armed: bool,
    /// A receive failed (its errno), told at the next read.
    pub(super) failed: Option<i32>,
}

impl Requests {
    pub(super) fn new(me: usize) -> Requests {
        Requests {
            me,
            sending: false,
            sent: None,
            armed: false,
            failed: None,
        }
    }

    /// The result of the flow's send once it completed (taken; one that
    /// `again` says to retry is not: the send is queued again); else
    /// queues a `SEND` of `buf` unless one is in flight. The flow does
    /// not touch `buf` until the completion.
    pub(super) fn send(
        &mut self,
        io: &mut RingIo,
        fd: RawFd,
        buf: &[u8],
        again: impl Fn(i32) -> bool,
    ) -> Result<Option<i32>, EngineError> {
        match self.sent.take() {
            Some(r) if r < 0 && again(-r) => {}
            Some(r) => return Ok(Some(r)),
            None => {}
        }
        if !self.sending {
            let len = u32::try_from(buf.len()).unwrap_or(u32::MAX);
            let e = opcode::Send::new(types::Fd(fd), buf.as_ptr(), len)
                .flags(libc::MSG_NOSIGNAL)
                .build();
            io.push(self.me, OP_SEND, e)
                .map_err(|e| EngineError::io("queueing an rr send", e))?;
            self.sending = true;
        }
        Ok(None)
    }

    /// Arms the multishot receive unless it is armed.
    pub(super) fn arm(&mut self, io: &mut RingIo, fd: RawFd) -> Result<(), EngineError> {
        if !self.armed {
            let e = opcode::RecvMulti::new(types::Fd(fd), BGID).build();
            io.push(self.me, OP_RECV, e)
                .map_err(|e| EngineError::io("arming a multishot receive", e))?;
            self.armed = true;
        }
        Ok(())
    }

    /// Request `op` completed (or the multishot receive posted one more
    /// result): true when it is the receive's, for the transport to take
    /// its bytes and give its buffer back. A receive's error is kept for
    /// the next read; out of buffers, or interrupted, the next read
    /// re-arms.
    pub(super) fn completed(&mut self, op: u8, c: &cqueue::Entry) -> bool {
        match op {
            OP_SEND => {
                self.sending = false;
                self.sent = Some(c.result());
                false
            }
            OP_RECV => {
                self.armed &= cqueue::more(c.flags());
                match -c.result() {
                    r if r <= 0 => {}
                    libc::ENOBUFS | libc::EAGAIN | libc::EINTR | libc::ECANCELED => {}
                    e => self.failed = Some(e),
                }
                true
            }
            _ => false,
        }
    }
}

/// A flow's requests on the ring and what their completions brought.
struct RingConn {
    rq: Requests,
    /// Bytes received and not read yet, from `at`.
    inbox: Vec<u8>,
    at: usize,
    /// The peer ended the stream.
    eof: bool,
    /// crr: a poll for the connect's end is in flight.
    connecting: bool,
}

impl RingConn {
    fn new(me: usize) -> RingConn {
        RingConn {
            rq: Requests::new(me),
            inbox: Vec::new(),
            at: 0,
            eof: false,
            connecting: false,
        }
    }

    /// A chunk goes to the inbox and its buffer back to the kernel; end
    /// of stream is kept for the next read.
    fn received(&mut self, c: &cqueue::Entry, io: &mut RingIo) {
        let res = c.result();
        if let (Some(b), Some(bid)) = (io.bufs.as_mut(), cqueue::buffer_select(c.flags())) {
            if res > 0 {
                self.inbox.extend_from_slice(b.get(bid, res as usize));
            }
            b.provide(bid);
        }
        self.eof |= res == 0;
    }
}

impl RingTransport for RingConn {
    fn completed(&mut self, op: u8, c: &cqueue::Entry, io: &mut RingIo) {
        match op {
            // Whether it was made is read from the socket itself.
            OP_CONNECT => self.connecting = false,
            _ if self.rq.completed(op, c) => self.received(c, io),
            _ => {}
        }
    }
}

/// A request's result worth asking again for.
fn again(errno: i32) -> bool {
    matches!(errno, libc::EAGAIN | libc::EINTR | libc::ECANCELED)
}

impl Transport for RingConn {
    type Cx = RingIo;

    /// The socket stays as it is (crr's, non-blocking for its connect;
    /// rr's, blocking): io_uring waits for either itself.
    fn attach<S: TcpEndpoint>(&mut self, _: &S) -> Result<(), EngineError> {
        *self = RingConn::new(self.rq.me);
        Ok(())
    }

    /// One `POLL_ADD` for the socket's writability: its completion gives
    /// the flow its turn.
    fn await_connect<S: TcpEndpoint>(
        &mut self,
        io: &mut RingIo,
        sock: &S,
    ) -> Result<(), EngineError> {
        if !self.connecting {
            let e = opcode::PollAdd::new(types::Fd(sock.as_raw_fd()), libc::POLLOUT as u32).build();
            io.push(self.rq.me, OP_CONNECT, e)
                .map_err(|e| EngineError::io("queueing a wait for a connect", e))?;
            self.connecting = true;
        }
        Ok(())
    }

    fn write<S: TcpEndpoint>(
        &mut self,
        io: &mut RingIo,
        sock: &S,
        buf: &[u8],
    ) -> Result<Option<usize>, EngineError> {
        match self.rq.send(io, sock.as_raw_fd(), buf, again)? {
            Some(r) if r >= 0 => Ok(Some(r as usize)),
            Some(r) => Err(map_err("write", io::Error::from_raw_os_error(-r))),
            None => Ok(None),
        }
    }

    fn read<S: TcpEndpoint>(
        &mut self,
        io: &mut RingIo,
        sock: &S,
        buf: &mut [u8],
    ) -> Result<Option<usize>, EngineError> {
        if self.at < self.inbox.len() {
            let k = buf.len().min(self.inbox.len() - self.at);
            buf[..k].copy_from_slice(&self.inbox[self.at..self.at + k]);
            self.at += k;
            if self.at == self.inbox.len() {
                self.inbox.clear();
                self.at = 0;
            }
            return Ok(Some(k));
        }
        if let Some(e) = self.rq.failed.take() {
            return Err(map_err("read", io::Error::from_raw_os_error(e)));
        }
        if self.eof {
            return Ok(Some(0));
        }
        self.rq.arm(io, sock.as_raw_fd())?;
        Ok(None)
    }
}

/// A transport on the ring (TCP's [`RingConn`], UDP's
/// [`super::udp_ring_loops`]): hears back from its flow's requests.
pub(super) trait RingTransport {
    /// Request `op` completed (or its multishot receive posted one more
    /// result).
    fn completed(&mut self, op: u8, c: &cqueue::Entry, io: &mut RingIo);
}

/// Every rr and crr flow on a ring: TCP or UDP, client or server (its
/// end, failure and progress as on epoll, `loop_tally`'s `Flow`).
impl<F> RingFlow for F
where
    F: RrFlow<Cx = RingIo>,
    F::Io: RingTransport,
{
    type Shared = <F as RrFlow>::Shared;

    fn turn(&mut self, _: usize, io: &mut RingIo, sh: &mut Self::Shared) -> Turn {
        self.go(io, sh)
    }

    fn complete(
        &mut self,
        _: usize,
        op: u8,
        c: &cqueue::Entry,
        io: &mut RingIo,
        sh: &mut Self::Shared,
    ) -> Turn {
        self.transport().completed(op, c, io);
        self.go(io, sh)
    }

    /// As on epoll: a client's phase ends after the open batch.
    fn stop(&mut self, _: usize, _: &mut RingIo, _: &mut Self::Shared) -> bool {
        self.end_after_batch();
        false
    }

    /// Its sends read its message buffers (the flow keeps copies); its
    /// receives fill the thread's provided buffers.
    fn leak_in_flight(&mut self) {
        for m in self.messages() {
            let copy = m.clone();
            leak(std::mem::replace(m, copy));
        }
    }

    /// A client loop's round trips: nothing the kernel sees.
    fn leak_shared(_: &mut Self::Shared) {}
}
