//! TCP stream flows on the completion loop ([`crate::event_loop::ring`],
//! `--engine uring`): the same flows, ends and measurements as the epoll
//! loop's ([`super::epoll::State`], [`super::epoll::measurements`]), with the bytes
//! moved by io_uring.
//!
//! - A receiver arms one multishot `RECV` that takes the thread's provided
//!   buffers and posts a completion per chunk read; each buffer goes
//!   straight back to the kernel (the receivers never look at the bytes;
//!   with `--skip-rx-copy` the receive is `MSG_TRUNC`, which discards
//!   them). When the request ends (the buffers ran dry) the next turn
//!   re-arms it; end of stream (a zero-length completion) ends the flow.
//! - A sender keeps one `SEND` of the thread's buffer in flight (the
//!   buffer is never written, so every sender of the thread shares it);
//!   its completion counts the bytes and gives the flow its next turn
//!   (after a short send, the next waits for the socket to be writable
//!   first: `IORING_RECVSEND_POLL_FIRST`). At
//!   the side's stop (or its byte count) it shuts down its write side
//!   once its send is in (at the stop, cancelled), as the epoll loop does.
//! - Many senders get a bounded send buffer first
//!   ([`LoopParams::sndbuf_bound`], [`super::sndbuf`]): a send parked on
//!   every flow refills each receive window the moment it opens, and the
//!   receivers' autotuned buffers grew past `tcp_mem` (issue 26).

use std::io;
use std::time::Instant;

use io_uring::{cqueue, opcode, types};
use linerate_proto::measure::StreamMeasurement;

use super::epoll::{finish, measurements, open_all, End, Io, LoopParams, State, TcpFlow};
use super::sndbuf;
use crate::engines::syscall::Syscall;
use crate::engines::uring::Uring;
use crate::engines::TcpEndpoint;
use crate::event_loop::driver::{Flow, Turn};
use crate::event_loop::ring::{buffers, drive, leak, loop_use, RingFlow, RingIo, BGID};
use crate::stream::{map_err, Signals};
use crate::EngineError;

/// Largest provided buffer: a receive completes with at most this much.
const RX_BUF_MAX: usize = 64 * 1024;
/// `IORING_RECVSEND_POLL_FIRST` (include/uapi/linux/io_uring.h, Linux
/// 5.19): the send waits for the socket to be writable before it tries.
const POLL_FIRST: u16 = 1;
/// A flow's requests: its send, its multishot receive.
const OP_SEND: u8 = 1;
const OP_RECV: u8 = 2;

/// What a loop's flows share: the buffer every sender sends, the flags
/// of every receive, the test's time zero.
pub(super) struct RingShared {
    tx_buf: Vec<u8>,
    rx_flags: i32,
    start: Instant,
}

/// Runs `flows` to their ends on this thread's ring; returns each flow's
/// index and measurement (as [`super::run`]).
pub(super) fn run<S: TcpEndpoint>(
    engine: Uring,
    params: &LoopParams,
    flows: Vec<TcpFlow<S>>,
    signals: &Signals,
) -> Vec<(usize, StreamMeasurement)> {
    let tx_buf = vec![0u8; params.len.max(1)];
    // The plain calls' objects: the sockets made non-blocking, a sender's
    // clean end (shutdown) as on epoll.
    let states = open_all(Syscall, flows, &tx_buf, params.skip_rx_copy);
    let bounded = params.sndbuf_bound.and_then(|b| bound_senders(&states, b));
    let receivers = states.iter().any(|s| matches!(s.io, Some(Io::Rx(_))));
    let size = params.len.clamp(1, RX_BUF_MAX);
    let bufs = receivers.then(|| (buffers(size), size));
    let mut sh = RingShared {
        tx_buf,
        rx_flags: if params.skip_rx_copy {
            libc::MSG_TRUNC
        } else {
            0
        },
        start: params.start,
    };
    let mut flows: Vec<RingTcp<S>> = states.into_iter().map(RingTcp::new).collect();
    drive(engine, &mut flows, &mut sh, bufs, signals);
    let mut out = measurements(
        flows.into_iter().map(|f| f.st).collect(),
        params.start,
        signals,
    );
    if let Some(first) = out.first_mut() {
        let mut used = loop_use(engine, bufs);
        if let (Some(bound), Some(held)) = (params.sndbuf_bound, bounded) {
            used.notes.push(format!(
                "send buffers bounded: SO_SNDBUF {bound} bytes on each sending flow (the \
                 kernel holds {held}), as this side's sending flows' autotuned buffers could \
                 together pass a quarter of tcp_mem's pressure threshold"
            ));
        }
        first.1.engine_use = Some(used);
    }
    out
}

/// Sets `SO_SNDBUF` to `bytes` on every sending flow of `states`; returns
/// what the kernel holds for the first (`None`: no sender, or not set).
fn bound_senders<S: TcpEndpoint>(states: &[State<Syscall, S>], bytes: u32) -> Option<u64> {
    let mut held = None;
    for s in states.iter().filter(|s| matches!(s.io, Some(Io::Tx(_)))) {
        let h = sndbuf::set_sndbuf(&s.flow.sock, bytes);
        held = held.or(h);
    }
    held
}

/// A flow of the epoll loop's kind, and its request on the ring.
struct RingTcp<S> {
    st: State<Syscall, S>,
    /// Sender: its send is in flight; its side's time is up.
    sending: bool,
    stopping: bool,
    /// Sender: bytes its send in flight asked to send; its last send
    /// completed short (the socket buffer was full).
    asked: usize,
    short: bool,
    /// Receiver: its multishot receive is armed.
    armed: bool,
}

type Step = Result<Turn, Result<(), EngineError>>;

impl<S: TcpEndpoint> RingTcp<S> {
    fn new(st: State<Syscall, S>) -> Self {
        RingTcp {
            st,
            sending: false,
            stopping: false,
            asked: 0,
            short: false,
            armed: false,
        }
    }

    fn fd(&self) -> types::Fd {
        types::Fd(self.st.flow.sock.as_raw_fd())
    }

    /// A sender's turn: its next send, or its clean end.
    fn send(&mut self, me: usize, io: &mut RingIo, sh: &RingShared) -> Step {
        if self.sending {
            return Ok(Turn::Wait);
        }
        let Some(Io::Tx(tx)) = &mut self.st.io else {
            return Err(Err(EngineError::Aborted));
        };
        if self.st.remaining == 0 {
            return Err(finish(tx, &self.st.flow.sock));
        }
        let n = sh
            .tx_buf
            .len()
            .min(usize::try_from(self.st.remaining).unwrap_or(usize::MAX));
        // The buffer lives as long as the loop and is never written. After
        // a short send the socket's buffer is full: sending at once would
        // send only what the next ACK freed (8-15 KB a send against
        // epoll's 19-49 KB, 1.8x the CPU per byte, issue 26), so the send
        // first waits for the socket to be writable, as epoll's edge does
        // (TCP reports it once a third of the send buffer is free).
        let e = opcode::Send::new(self.fd(), sh.tx_buf.as_ptr(), n as u32)
            .flags(libc::MSG_NOSIGNAL)
            .ioprio(if self.short { POLL_FIRST } else { 0 })
            .build();
        io.push(me, OP_SEND, e)
            .map_err(|e| Err(EngineError::io("queueing a TCP send", e)))?;
        self.st.calls += 1;
        self.sending = true;
        self.asked = n;
        Ok(Turn::Wait)
    }

    /// Its send completed: the bytes count; then its next turn, or its
    /// end if its time is up.
    fn sent(&mut self, c: &cqueue::Entry) -> Step {
        self.sending = false;
        let res = c.result();
        self.short = res > 0 && (res as usize) < self.asked;
        if res > 0 {
            self.st.flow.counter.add(res as u64);
            self.st.remaining = self.st.remaining.saturating_sub(res as u64);
        }
        if self.stopping || (res > 0 && self.st.remaining == 0) {
            let Some(Io::Tx(tx)) = &mut self.st.io else {
                return Err(Err(EngineError::Aborted));
            };
            return Err(finish(tx, &self.st.flow.sock));
        }
        match -res {
            r if r < 0 => Ok(Turn::Again),
            0 => Err(Err(EngineError::PeerReset("write returned 0".into()))),
            libc::EAGAIN | libc::EINTR | libc::ECANCELED => Ok(Turn::Again),
            e => Err(Err(map_err("write", io::Error::from_raw_os_error(e)))),
        }
    }

    /// A receiver's turn: (re)arms its multishot receive.
    fn recv(&mut self, me: usize, io: &mut RingIo, sh: &RingShared) -> Step {
        if !self.armed {
            let e = opcode::RecvMulti::new(self.fd(), BGID)
                .flags(sh.rx_flags)
                .build();
            io.push(me, OP_RECV, e)
                .map_err(|e| Err(EngineError::io("arming a multishot receive", e)))?;
            self.armed = true;
        }
        Ok(Turn::Wait)
    }

    /// A completion of its multishot receive: the bytes count, the buffer
    /// goes back; end of stream ends the flow.
    fn received(&mut self, c: &cqueue::Entry, io: &mut RingIo) -> Step {
        let more = cqueue::more(c.flags());
        self.armed &= more;
        if let (Some(b), Some(bid)) = (io.bufs.as_mut(), cqueue::buffer_select(c.flags())) {
            b.provide(bid);
        }
        let res = c.result();
        match res {
            0 => return Err(Ok(())),
            r if r > 0 => {
                self.st.calls += 1;
                self.st.flow.counter.add(r as u64);
            }
            r => match -r {
                libc::ENOBUFS | libc::EAGAIN | libc::EINTR | libc::ECANCELED => {}
                e => return Err(Err(map_err("read", io::Error::from_raw_os_error(e)))),
            },
        }
        Ok(if more { Turn::Wait } else { Turn::Again })
    }

    /// Ends the flow when `r` says it ended.
    fn settle(&mut self, r: Step, sh: &RingShared) -> Turn {
        match r {
            Ok(t) => t,
            Err(result) => {
                self.st.end = Some(End {
                    result,
                    at_ns: sh.start.elapsed().as_nanos() as u64,
                });
                Turn::Done
            }
        }
    }
}

/// As on epoll: the flow's state is the epoll flow's.
impl<S: TcpEndpoint> Flow for RingTcp<S> {
    fn ended(&self) -> bool {
        self.st.ended()
    }

    fn fail(&mut self, e: EngineError) {
        self.st.fail(e);
    }

    fn progress(&self) -> u64 {
        self.st.progress()
    }
}

impl<S: TcpEndpoint> RingFlow for RingTcp<S> {
    type Shared = RingShared;

    fn turn(&mut self, me: usize, io: &mut RingIo, sh: &mut RingShared) -> Turn {
        let r = match self.st.io {
            Some(Io::Tx(_)) => self.send(me, io, sh),
            Some(Io::Rx(_)) => self.recv(me, io, sh),
            None => Err(Err(EngineError::Aborted)),
        };
        self.settle(r, sh)
    }

    fn complete(
        &mut self,
        _me: usize,
        op: u8,
        c: &cqueue::Entry,
        io: &mut RingIo,
        sh: &mut RingShared,
    ) -> Turn {
        let r = match op {
            OP_SEND => self.sent(c),
            OP_RECV => self.received(c, io),
            _ => Ok(Turn::Wait),
        };
        self.settle(r, sh)
    }

    /// Time is up: a sender finishes now, or once its send is in (asked
    /// to cancel: a send waiting for room in a full socket buffer would
    /// hold the flow's end past the side's).
    fn stop(&mut self, me: usize, io: &mut RingIo, sh: &mut RingShared) -> bool {
        let Some(Io::Tx(tx)) = &mut self.st.io else {
            return false;
        };
        if self.sending {
            self.stopping = true;
            // Failing to ask only means waiting for the send to complete.
            let _ = io.cancel(me, OP_SEND);
            return false;
        }
        let r = finish(tx, &self.st.flow.sock);
        self.settle(Err(r), sh);
        true
    }

    /// Nothing of its own: its sends read the loop's buffer, its
    /// receives fill the thread's provided buffers.
    fn leak_in_flight(&mut self) {}

    /// The buffer every sender sends.
    fn leak_shared(sh: &mut RingShared) {
        leak(std::mem::take(&mut sh.tx_buf));
    }
}
