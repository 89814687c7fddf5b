//! rr's UDP flows on io_uring completion loops (`rr --proto udp --flows N
//! --engine uring`, and a server whose engine is `uring`): the flows of
//! [`super::udp_flows`] (the same as on epoll: cores, tally, pacing on
//! the loop's timer heap, response timeouts, phase ends), with their
//! datagrams moved by the loop thread's ring
//! ([`crate::event_loop::ring`]), as rr's TCP flows are
//! ([`super::ring_loops`]).
//!
//! - Each flow arms one multishot `RECV` on its connected socket when it
//!   first waits for a datagram; it takes the thread's provided buffers
//!   (one buffer ring per thread, sized one byte over the phase's larger
//!   message so a longer datagram is seen as such) and posts a completion
//!   per datagram. The datagram is copied into the flow's inbox and its
//!   buffer goes straight back to the kernel. The inbox holds at most
//!   [`INBOX_MAX`] datagrams, reusing their buffers: more are dropped, as
//!   a full socket buffer drops them (a flow has one request or response
//!   in flight). An empty datagram (a phase's end) ends the request, as
//!   any zero-length receive does: the flow's next read re-arms it.
//! - A send queues one `SEND` straight from the flow's request or
//!   response (not touched until its completion); the completion says it
//!   went, and the flow goes on.
//! - The empty datagrams that end a phase go beside the ring
//!   ([`super::udp_flows`]: once per phase).

use std::collections::VecDeque;
use std::io;
use std::net::UdpSocket;
use std::os::fd::AsRawFd;

use io_uring::cqueue;
use linerate_proto::measure::RrFlowMeasurement;
use linerate_stats::histogram::Histogram;

use crate::engines::uring::Uring;
use crate::event_loop::ring::{drive, RingIo};
use crate::stream::map_err;
use crate::EngineError;

use super::conns::Conn;
use super::datagram_io::port_closed;
use super::loop_tally::{LoopCtx, Role};
use super::ring_loops::{on_ring, Requests, Ring, RingTransport};
use super::udp_flows::{self, Datagrams, UdpClient, UdpDrive, UdpServer};

/// Datagrams a flow keeps that it has not read yet.
const INBOX_MAX: usize = 16;

/// One io_uring loop: its UDP flows of `cx.phase`, on `engine`'s ring,
/// with the thread's provided buffers sized for the phase's datagrams.
pub(super) fn run_loop(
    engine: Uring,
    share: Vec<(u32, Option<Conn>)>,
    cx: &LoopCtx<'_>,
    role: Role,
) -> Vec<RrFlowMeasurement> {
    let size = cx.phase.request.max(cx.phase.response) as usize + 1;
    let open = |me, sock| Ok(RingDgram::new(me, sock));
    on_ring(engine, size, cx.signals, |ring| {
        udp_flows::run_loop(share, cx, role, open, ring)
    })
}

impl UdpDrive<RingDgram> for Ring<'_> {
    fn clients(&mut self, flows: &mut [UdpClient<'_, RingDgram>]) -> Histogram {
        let mut overall = Histogram::new();
        drive(self.engine, flows, &mut overall, self.bufs, self.signals);
        overall
    }

    fn servers(&mut self, flows: &mut [UdpServer<'_, RingDgram>]) {
        drive(self.engine, flows, &mut (), self.bufs, self.signals);
    }
}

/// A flow's socket, its requests on the ring and the datagrams their
/// completions brought.
struct RingDgram {
    rq: Requests,
    /// Left blocking: io_uring waits for it itself.
    sock: UdpSocket,
    /// Datagrams received and not read yet, oldest first.
    inbox: VecDeque<Vec<u8>>,
    /// The datagram last read (lent to the flow until its next read).
    current: Vec<u8>,
    /// Read datagrams' buffers, for the next ones.
    spare: Vec<Vec<u8>>,
}

impl RingDgram {
    fn new(me: usize, sock: UdpSocket) -> RingDgram {
        RingDgram {
            rq: Requests::new(me),
            sock,
            inbox: VecDeque::new(),
            current: Vec::new(),
            spare: Vec::new(),
        }
    }

    /// A datagram goes to the inbox (room permitting) and its buffer back
    /// to the kernel.
    fn received(&mut self, c: &cqueue::Entry, io: &mut RingIo) {
        let res = c.result();
        let buf = match (io.bufs.as_mut(), cqueue::buffer_select(c.flags())) {
            (Some(b), Some(bid)) => Some((b, bid)),
            _ => None,
        };
        if res >= 0 && self.inbox.len() < INBOX_MAX {
            let mut d = self.spare.pop().unwrap_or_default();
            d.clear();
            if let Some((b, bid)) = &buf {
                d.extend_from_slice(b.get(*bid, res as usize));
            }
            self.inbox.push_back(d);
        }
        if let Some((b, bid)) = buf {
            b.provide(bid);
        }
    }
}

impl RingTransport for RingDgram {
    fn completed(&mut self, op: u8, c: &cqueue::Entry, io: &mut RingIo) {
        if self.rq.completed(op, c) {
            self.received(c, io);
        }
    }
}

/// What a failed request's errno means for the flow.
fn error(what: &str, errno: i32) -> EngineError {
    match errno {
        // A refused earlier send: the peer's port closed.
        libc::ECONNREFUSED => port_closed(),
        e => map_err(what, io::Error::from_raw_os_error(e)),
    }
}

impl Datagrams for RingDgram {
    type Cx = RingIo;

    fn socket(&self) -> &UdpSocket {
        &self.sock
    }

    fn send(&mut self, io: &mut RingIo, buf: &[u8]) -> Result<bool, EngineError> {
        // The socket's buffer was full, or the send was interrupted: it
        // is queued again.
        let again = |e| matches!(e, libc::ENOBUFS | libc::EAGAIN | libc::EINTR);
        match self.rq.send(io, self.sock.as_raw_fd(), buf, again)? {
            Some(r) if r >= 0 => Ok(true),
            Some(r) => Err(error("send", -r)),
            None => Ok(false),
        }
    }

    fn recv<'s>(&'s mut self, io: &'s mut RingIo) -> Result<Option<&'s [u8]>, EngineError> {
        if let Some(d) = self.inbox.pop_front() {
            let read = std::mem::replace(&mut self.current, d);
            self.spare.push(read);
            return Ok(Some(&self.current));
        }
        if let Some(e) = self.rq.failed.take() {
            return Err(error("recv", e));
        }
        self.rq.arm(io, self.sock.as_raw_fd())?;
        Ok(None)
    }
}
