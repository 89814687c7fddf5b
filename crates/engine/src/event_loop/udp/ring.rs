//! UDP stream flows on the completion loop ([`crate::event_loop::ring`],
//! `--engine uring`): the same flows, cores and measurements as the epoll
//! loop's ([`super::epoll::State`]), with their datagrams moved by io_uring.
//!
//! - A receiver arms one multishot `RECVMSG` (`RECVMSG`, not `RECV`: the
//!   control messages carry the kernel's arrival stamp, drop counter and
//!   GRO segment size, as on every other receive path); each completion's
//!   datagram, in one of the thread's provided buffers, goes to its core
//!   and the buffer straight back to the kernel. When the request ends
//!   (the buffers ran dry) the next turn re-arms it. At the side's drain
//!   deadline the request is cancelled and, once its last completion is
//!   in, what the socket still holds is read as the epoll loop reads it
//!   ([`super::epoll::State::recv`]), so both end alike.
//! - A sender queues the datagrams its core hands out, up to [`TX_BATCH`]
//!   at once, linked so they leave in order, straight from the core's
//!   buffer (the core is not polled again before their completions); the
//!   completions say how many went out, and the flow gets its next turn.
//!   The connected socket needs no address, so each is a plain `SEND` (a
//!   `sendmsg` without a header). Paced flows wait on the loop's timer
//!   heap. At the side's stop a sender with sends in flight cancels them
//!   and ends when their completions are in.

use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;
use std::time::Duration;

use io_uring::{cqueue, opcode, squeue, types};
use linerate_proto::data_beat::PEEK_EVERY_NS;
use linerate_proto::measure::{Role, StreamMeasurement};
use linerate_proto::udp_sender::Transmit;

use super::epoll::{
    count_sent, deliver, open_all, refused, report_rest, Io, Shared, State, UdpFlow, UdpLoopParams,
};
use crate::cmsg::RECV_CMSG;
use crate::engines::batch::gro_plan;
use crate::engines::batch::mmsg::GRO_SLOT;
use crate::engines::uring::{fill, Uring, RECVMSG_OUT};
use crate::engines::{EngineKind, RecvSlots, TxBatch, UdpTx, Wait};
use crate::event_loop::driver::{Flow, Turn};
use crate::event_loop::ring::{buffers, drive, leak, loop_use, RingFlow, RingIo, BGID};
use crate::stream::Signals;
use crate::udp::{count_beats, ns_since};
use crate::EngineError;

/// Datagrams a sender queues at once: a run of due datagrams leaves in
/// one submission, and a thread's flows share the submission queue.
const TX_BATCH: usize = 8;
/// A flow's requests: its sends, its multishot receive.
const OP_SEND: u8 = 1;
const OP_RECV: u8 = 2;

/// What a loop's flows share: the epoll loop's [`Shared`], the template
/// header of every multishot `RECVMSG`, and the entries of a send batch.
pub(super) struct RingShared {
    sh: Shared,
    /// Only its name and control lengths matter (connected sockets need
    /// no name); read by the kernel as each receive is armed.
    msg: Box<libc::msghdr>,
    entries: Vec<squeue::Entry>,
}

/// Runs `flows` to their ends on this thread's ring, handing each flow's
/// measurement to `ended` as it ends (as [`super::run`]).
pub(super) fn run(
    engine: Uring,
    params: &UdpLoopParams,
    flows: Vec<UdpFlow>,
    signals: &Arc<Signals>,
    mut ended: Box<dyn FnMut(usize, StreamMeasurement)>,
) {
    let mut slots = None;
    let (states, size) = open_all(flows, params, Some(TX_BATCH), &mut slots);
    let rx: Vec<&State> = states
        .iter()
        .filter(|s| matches!(s.io, Some(Io::Rx(..))))
        .collect();
    // GRO by the uring engine's rule: a super-buffer needs a whole slot.
    let gro = rx
        .iter()
        .fold(false, |on, s| gro_plan(s.ep.socket()).is_ok() | on);
    let slot = if gro { GRO_SLOT.max(size) } else { size };
    let buf = RECVMSG_OUT + RECV_CMSG + slot;
    let bufs = (!rx.is_empty()).then(|| (buffers(buf), buf));
    // The first flow to end carries what the loop used, for the report.
    let mut used = Some(loop_use(engine, bufs));
    let ended = Box::new(move |index, mut m: StreamMeasurement| {
        m.engine_use = used.take();
        ended(index, m)
    });
    let mut msg = empty_msghdr();
    msg.msg_controllen = RECV_CMSG as _;
    let slots = bufs.map(|_| RecvSlots::new(1, slot));
    let mut sh = RingShared {
        sh: Shared::new(params, slots, signals, ended),
        msg,
        entries: Vec::with_capacity(TX_BATCH),
    };
    let mut flows: Vec<RingUdp> = states.into_iter().map(RingUdp::new).collect();
    drive(engine, &mut flows, &mut sh, bufs, signals);
    let mut states: Vec<State> = flows.into_iter().map(|f| f.st).collect();
    report_rest(&mut states, &mut sh.sh, params);
}

/// An empty message header, for the kernel to read.
fn empty_msghdr() -> Box<libc::msghdr> {
    // SAFETY: msghdr is plain data; all-zero is a valid empty one.
    Box::new(unsafe { std::mem::zeroed() })
}

/// A flow of the epoll loop's kind, and its requests on the ring.
struct RingUdp {
    st: State,
    /// Sender: sends in flight, how many of them went out, the first
    /// error among them.
    sending: usize,
    ok: usize,
    err: Option<i32>,
    /// Sender: its side's time is up; it ends when its sends are in.
    stopping: bool,
    /// Receiver: its multishot receive is armed; asked to cancel it.
    armed: bool,
    cancelling: bool,
    /// Receiver: a datagram came (an `EINVAL` before one is the kernel
    /// refusing multishot receives).
    got: bool,
}

type Step = Result<Turn, Result<(), EngineError>>;

impl RingUdp {
    fn new(st: State) -> RingUdp {
        RingUdp {
            st,
            sending: 0,
            ok: 0,
            err: None,
            stopping: false,
            armed: false,
            cancelling: false,
            got: false,
        }
    }

    /// A sender's turn: queues what is due, or waits for its due time.
    fn send(&mut self, me: usize, io: &mut RingIo, sh: &mut RingShared) -> Step {
        if self.sending > 0 {
            return Ok(Turn::Wait);
        }
        let ep = &self.st.ep;
        let Some(Io::Tx(core, tx, next_peek)) = &mut self.st.io else {
            return Err(Err(EngineError::Aborted));
        };
        let now = ns_since(sh.sh.start);
        if now >= *next_peek {
            *next_peek = now + PEEK_EVERY_NS;
            count_beats(ep, &self.st.flow.live);
        }
        loop {
            match core.poll_transmit(now) {
                Transmit::Done => return Err(Ok(())),
                Transmit::Wait(due) => {
                    return Ok(Turn::Until(sh.sh.start + Duration::from_nanos(due)))
                }
                Transmit::Junk(d) => {
                    // Test faults: whatever becomes of it, it was sent.
                    let _ = tx.send_batch(ep, TxBatch::new(d, d.len()), Wait::DontWait);
                    core.on_junk_sent();
                }
                Transmit::Send { bytes, segment } => {
                    let fd = types::Fd(ep.as_fd().as_raw_fd());
                    sh.entries.clear();
                    let n = bytes.len().div_ceil(segment.max(1));
                    for (k, d) in bytes.chunks(segment.max(1)).enumerate() {
                        // The core's buffer stays as it is until its
                        // completions are in: it is not polled before.
                        let e = opcode::Send::new(fd, d.as_ptr(), d.len() as u32)
                            .flags(libc::MSG_NOSIGNAL)
                            .build();
                        sh.entries.push(if k + 1 < n {
                            e.flags(squeue::Flags::IO_LINK)
                        } else {
                            e
                        });
                    }
                    io.push_chain(me, OP_SEND, &mut sh.entries)
                        .map_err(|e| Err(EngineError::io("queueing UDP sends", e)))?;
                    self.st.calls += n as u64;
                    (self.sending, self.ok, self.err) = (n, 0, None);
                    return Ok(Turn::Wait);
                }
            }
        }
    }

    /// One send completed; once the batch is in, its datagrams count and
    /// the flow gets its next turn (or ends, if its time is up).
    fn sent(&mut self, c: &cqueue::Entry) -> Step {
        self.sending = self.sending.saturating_sub(1);
        match c.result() {
            r if r >= 0 => self.ok += 1,
            r => {
                self.err.get_or_insert(-r);
            }
        }
        if self.sending > 0 {
            return Ok(Turn::Wait);
        }
        let Some(Io::Tx(core, _, _)) = &mut self.st.io else {
            return Err(Err(EngineError::Aborted));
        };
        if self.ok > 0 {
            count_sent(core, &self.st.flow, self.ok);
        }
        if self.stopping {
            return Err(Ok(()));
        }
        match self.err.take() {
            // The rest of the batch is offered again; an error that ends
            // the flow ends it even after part of the batch went out (the
            // kernel reports a refused port once per socket).
            None | Some(libc::EAGAIN | libc::EINTR | libc::ECANCELED) => {}
            Some(libc::ENOBUFS) => core.on_no_buffers(),
            Some(libc::ECONNREFUSED) => return Err(Err(refused())),
            Some(e) => {
                return Err(Err(EngineError::io(
                    "UDP send",
                    io::Error::from_raw_os_error(e),
                )))
            }
        }
        Ok(Turn::Again)
    }

    /// A receiver's turn: arms its multishot receive; past the drain
    /// deadline, cancels it, then reads the socket's rest and ends.
    fn recv(&mut self, me: usize, io: &mut RingIo, sh: &mut RingShared) -> Step {
        let now = ns_since(sh.sh.start);
        let drain_at = sh.sh.signals.drain_deadline();
        if now >= drain_at {
            if !self.armed {
                return self.st.recv(&mut sh.sh);
            }
            if !self.cancelling {
                io.cancel(me, OP_RECV)
                    .map_err(|e| Err(EngineError::io("cancelling a multishot receive", e)))?;
                self.cancelling = true;
            }
            return Ok(Turn::Wait);
        }
        if !self.armed {
            let fd = types::Fd(self.st.ep.as_fd().as_raw_fd());
            let e = opcode::RecvMsgMulti::new(fd, &*sh.msg, BGID).build();
            io.push(me, OP_RECV, e)
                .map_err(|e| Err(EngineError::io("arming a multishot receive", e)))?;
            self.armed = true;
        }
        Ok(match drain_at {
            u64::MAX => Turn::Wait,
            d => Turn::Until(sh.sh.start + Duration::from_nanos(d)),
        })
    }

    /// A completion of the multishot receive: its datagram to the core,
    /// its buffer back to the kernel; when the request has ended, the
    /// next turn re-arms it (or reads the socket's rest).
    fn received(&mut self, c: &cqueue::Entry, io: &mut RingIo, sh: &mut RingShared) -> Step {
        let more = cqueue::more(c.flags());
        self.armed &= more;
        let res = c.result();
        if res >= 0 {
            let bid = cqueue::buffer_select(c.flags());
            if let (Some(bufs), Some(bid)) = (io.bufs.as_mut(), bid) {
                let meta = fill(bufs.get(bid, res as usize), &sh.msg, &mut sh.sh.slots, 0);
                bufs.provide(bid);
                let Some(Io::Rx(core, _, _, beats)) = &mut self.st.io else {
                    return Err(Err(EngineError::Aborted));
                };
                if let Some(m) = meta {
                    self.got = true;
                    self.st.calls += 1;
                    *sh.sh.slots.slot_mut(0).1 = m;
                    let at = (ns_since(sh.sh.start), sh.sh.signals.drain_deadline());
                    deliver((core, beats), &self.st.ep, &self.st.flow, &sh.sh, 1, at);
                }
            }
        } else {
            match -res {
                // Buffers ran dry (re-armed below), our cancel, an ICMP
                // error on the connected socket (not data).
                libc::ENOBUFS
                | libc::ECANCELED
                | libc::EINTR
                | libc::EAGAIN
                | libc::ECONNREFUSED => {}
                libc::EINVAL if !self.got => {
                    return Err(Err(EngineError::EngineUnavailable {
                        engine: EngineKind::Uring { sqpoll: false },
                        reason: "this kernel refused a multishot RECVMSG (Linux 6.0+ has it)"
                            .into(),
                    }))
                }
                e => {
                    return Err(Err(EngineError::io(
                        "UDP receive",
                        io::Error::from_raw_os_error(e),
                    )))
                }
            }
        }
        Ok(if more { Turn::Wait } else { Turn::Again })
    }

    /// Ends the flow when `r` says it ended.
    fn settle(&mut self, r: Step, sh: &mut Shared) -> Turn {
        match r {
            Ok(t) => t,
            Err(result) => {
                self.st.end_now(result, sh);
                Turn::Done
            }
        }
    }
}

/// As on epoll: the flow's state is the epoll flow's.
impl Flow for RingUdp {
    const STALLS: bool = State::STALLS;

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

impl RingFlow for RingUdp {
    type Shared = RingShared;

    fn turn(&mut self, me: usize, io: &mut RingIo, sh: &mut RingShared) -> Turn {
        let r = match self.st.flow.role {
            Role::Sender => self.send(me, io, sh),
            Role::Receiver => self.recv(me, io, sh),
        };
        self.settle(r, &mut sh.sh)
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
            OP_RECV => self.received(c, io, sh),
            _ => Ok(Turn::Wait),
        };
        self.settle(r, &mut sh.sh)
    }

    /// Time is up: a sender finishes now, or once its sends are in (asked
    /// to cancel: the first's cancel ends the rest of its linked batch).
    fn stop(&mut self, me: usize, io: &mut RingIo, sh: &mut RingShared) -> bool {
        if self.st.flow.role != Role::Sender {
            return false;
        }
        if self.sending > 0 {
            self.stopping = true;
            // Failing to ask only means waiting for the sends to complete.
            let _ = io.cancel(me, OP_SEND);
            return false;
        }
        self.st.end_now(Ok(()), &mut sh.sh);
        true
    }

    /// A sender's batch in flight reads its core's buffer (the core keeps
    /// a copy); a receiver's datagrams fill the thread's provided buffers.
    fn leak_in_flight(&mut self) {
        if let (true, Some(Io::Tx(core, _, _))) = (self.sending > 0, &mut self.st.io) {
            leak(core.take_buffer());
        }
    }

    /// The header every multishot receive was armed with.
    fn leak_shared(sh: &mut RingShared) {
        leak(std::mem::replace(&mut sh.msg, empty_msghdr()));
    }
}
