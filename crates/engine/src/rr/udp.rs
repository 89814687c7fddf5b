//! rr over UDP: one datagram per message on a connected socket per
//! (phase, flow). A response missing after [`UDP_RESPONSE_TIMEOUT`] is
//! lost; the client ends a phase with an empty datagram, repeated until the
//! server answers with one.

use std::net::UdpSocket;
use std::time::Duration;

use linerate_proto::rr::{self as msg, RequestRepr, ResponseRepr, RrHeader, RESPONSE_HEADER_LEN};
use linerate_proto::rr_core::{ServerTimes, Tally};

use crate::clock::mono_ns;
use crate::engines::Engine;
use crate::stream::POLL;
use crate::EngineError;

use super::client::{run_phase, Exchange, Reply};
use super::datagram_io::DatagramIo;
use super::params::{Buffers, PhaseCtx, PhaseOut, SpinStats};
use super::server::{serve_phase, Serve, Served};
use super::UDP_RESPONSE_TIMEOUT;
use crate::wait::{prepare_udp, Waiter};

/// Receive timeout of a blocking UDP client: how often a waiting flow looks
/// at its deadline and the stop flags.
const UDP_POLL: Duration = Duration::from_millis(20);
/// How often (and how many times) a UDP client repeats its end-of-phase
/// datagram until the server answers.
const UDP_END_EVERY: Duration = Duration::from_millis(100);
const UDP_END_TRIES: u32 = 50;
/// Empty datagrams a UDP server sends to answer an end of phase (any one
/// arriving is enough).
const UDP_END_ACKS: u32 = 3;

/// A client flow's transactions on its phase socket.
struct UdpExchange<'a, E: Engine> {
    io: DatagramIo<'a, E>,
    req: &'a mut [u8],
    resp_len: usize,
}

impl<E: Engine> UdpExchange<'_, E> {
    /// Waits for the response to `header` until `deadline`.
    fn response(
        &mut self,
        header: &RequestRepr,
        deadline: u64,
    ) -> Result<Option<Option<ServerTimes>>, EngineError> {
        let resp_len = self.resp_len;
        loop {
            let Some(n) = self.io.recv(Some(deadline))? else {
                return Ok(None);
            };
            if n == 0 {
                continue; // a previous phase's late end-of-phase answer
            }
            if n != resp_len {
                return Err(EngineError::Protocol(format!(
                    "a {n}-byte response where {resp_len} bytes were due"
                )));
            }
            if resp_len < RESPONSE_HEADER_LEN {
                return Ok(Some(None));
            }
            let r = ResponseRepr::parse(&RrHeader::new_checked(self.io.received())?)?;
            if r.flow == header.flow && r.sequence < header.sequence {
                continue; // late answer to a request already counted lost
            }
            msg::expect(header.flow, header.sequence, r.flow, r.sequence)?;
            return Ok(Some(r.server_ns.map(|(rx, tx)| ServerTimes { rx, tx })));
        }
    }
}

impl<E: Engine> Exchange for UdpExchange<'_, E> {
    fn transact(&mut self, header: &RequestRepr) -> Result<Reply, EngineError> {
        header.emit(self.req);
        self.io.send(self.req)?;
        let deadline = mono_ns().saturating_add(UDP_RESPONSE_TIMEOUT.as_nanos() as u64);
        match self.response(header, deadline)? {
            Some(server) => Ok(Reply::Answered(server)),
            None => {
                self.io.drain();
                Ok(Reply::Lost)
            }
        }
    }

    /// An empty datagram, repeated until the server answers with one (it
    /// has then counted every request it answered).
    fn end_phase(&mut self) -> Result<(), EngineError> {
        for _ in 0..UDP_END_TRIES {
            self.io.send_end()?;
            let deadline = mono_ns().saturating_add(UDP_END_EVERY.as_nanos() as u64);
            while let Some(n) = self.io.recv(Some(deadline))? {
                if n == 0 {
                    return Ok(());
                }
            }
        }
        Err(EngineError::Unanswered(format!(
            "the server did not answer the end of the phase in {} s",
            (UDP_END_EVERY * UDP_END_TRIES).as_secs()
        )))
    }
}

/// Runs one phase of a client flow on `sock`.
pub(super) fn client_phase<E: Engine>(
    engine: E,
    sock: &UdpSocket,
    cx: &PhaseCtx<'_>,
    bufs: &mut Buffers,
    tally: &mut Tally,
) -> PhaseOut {
    let (wait, said) = match prepare_udp(sock, cx.spin, UDP_POLL) {
        Ok(x) => x,
        Err(e) => return PhaseOut::failed(e),
    };
    let (req_len, resp_len) = (cx.phase.request as usize, cx.phase.response as usize);
    let waiter = Waiter::new(wait, cx.signals, false);
    let io = match DatagramIo::new(engine, sock, req_len.max(resp_len), waiter, UDP_POLL) {
        Ok(io) => io,
        Err(e) => return PhaseOut::failed(e),
    };
    let mut x = UdpExchange {
        io,
        req: &mut bufs.req[..req_len],
        resp_len,
    };
    let result = run_phase(&mut x, cx, tally);
    PhaseOut {
        result,
        busy_poll: said,
        spin: x.io.waiter.stats(),
    }
}

impl<E: Engine> Serve for DatagramIo<'_, E> {
    fn next_request<'b>(
        &'b mut self,
        _: &'b mut [u8],
        len: usize,
    ) -> Result<Option<&'b [u8]>, EngineError> {
        // Without a deadline only a datagram (or an error) ends the wait.
        let n = loop {
            if let Some(n) = self.recv(None)? {
                break n;
            }
        };
        if n == 0 {
            // End of phase: answer, more than once since datagrams may
            // drop. Best effort: the client closes its socket as soon as
            // one arrives, and the next may meet a closed port.
            for _ in 0..UDP_END_ACKS {
                let _ = self.send_end();
            }
            return Ok(None);
        }
        if n != len {
            return Err(EngineError::Protocol(format!(
                "a {n}-byte request where {len} bytes were due"
            )));
        }
        Ok(Some(self.received()))
    }

    fn respond(&mut self, resp: &[u8]) -> Result<(), EngineError> {
        self.send(resp)
    }

    /// Requests may be lost on the way: sequences are echoed, not checked
    /// against a count.
    fn reliable(&self) -> bool {
        false
    }

    fn spin(&self) -> Option<SpinStats> {
        self.waiter.stats()
    }
}

/// Serves one phase of a server flow on `sock`.
pub(super) fn server_phase<E: Engine>(
    engine: E,
    sock: &UdpSocket,
    cx: &PhaseCtx<'_>,
    bufs: &mut Buffers,
) -> Served {
    let len = (cx.phase.request as usize).max(cx.phase.response as usize);
    serve_phase(cx, bufs, || {
        let (wait, said) = prepare_udp(sock, cx.spin, POLL)?;
        let waiter = Waiter::new(wait, cx.signals, true);
        Ok((DatagramIo::new(engine, sock, len, waiter, UDP_POLL)?, said))
    })
}
