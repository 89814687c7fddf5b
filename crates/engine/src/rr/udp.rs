//! rr over UDP: one datagram per message on a connected socket per
//! (phase, flow). A response missing after [`RESPONSE_TIMEOUT_NS`] is
//! lost; the client ends a phase with an empty datagram, repeated until the
//! server answers with one.

use std::net::UdpSocket;
use std::time::Duration;

use linerate_proto::rr::RequestRepr;
use linerate_proto::rr_core::Tally;
use linerate_proto::rr_flow::{Response, RrClient, Transaction, RESPONSE_TIMEOUT_NS};

use crate::clock::mono_ns;
use crate::engines::Engine;
use crate::stream::POLL;
use crate::EngineError;

use super::datagram_io::DatagramIo;
use super::exchange::{run_phase, Exchange};
use super::params::{Buffers, PhaseCtx, PhaseOut, SpinStats};
use super::serve::{serve_phase, Serve, Served};
use crate::wait::{prepare_udp, Waiter};

/// Receive timeout of a blocking UDP client: how often a waiting flow looks
/// at its deadline and the stop flags.
const UDP_POLL: Duration = Duration::from_millis(20);
/// How often (and how many times) a UDP client repeats its end-of-phase
/// datagram until the server answers.
pub(super) const UDP_END_EVERY: Duration = Duration::from_millis(100);
pub(super) const UDP_END_TRIES: u32 = 50;
/// Empty datagrams a UDP server sends to answer an end of phase (any one
/// arriving is enough).
pub(super) const UDP_END_ACKS: u32 = 3;

/// A client flow's transactions on its phase socket.
struct UdpExchange<'a, E: Engine> {
    io: DatagramIo<'a, E>,
    req: &'a mut [u8],
    /// Writes the requests' headers, matches the responses, tells late
    /// ones (answers to requests already counted lost) and strays apart.
    core: RrClient,
}

impl<E: Engine> Exchange for UdpExchange<'_, E> {
    fn transact(&mut self, header: &RequestRepr) -> Result<Transaction, EngineError> {
        self.core.request(header, self.req);
        self.io.send(self.req)?;
        let deadline = self.core.deadline(mono_ns());
        // Late and stray datagrams are dropped; the request still waits.
        while self.io.recv(deadline)?.is_some() {
            if let Response::Matched(server) = self.core.on_response(self.io.received())? {
                return Ok(Transaction::Answered(server));
            }
        }
        // Responses without a header cannot be told late: drop what is
        // queued, so it is not taken for the next transaction's.
        self.io.drain();
        Ok(self.core.on_timeout())
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
        Err(end_unanswered())
    }
}

/// The server answered none of a client's end-of-phase datagrams.
pub(super) fn end_unanswered() -> EngineError {
    EngineError::Unanswered(format!(
        "the server did not answer the end of the phase in {} s",
        (UDP_END_EVERY * UDP_END_TRIES).as_secs()
    ))
}

/// Runs one phase of a client flow on `sock`, taken over as `engine`'s
/// endpoint.
pub(super) fn client_phase<E: Engine>(
    engine: E,
    sock: UdpSocket,
    cx: &PhaseCtx<'_>,
    bufs: &mut Buffers,
    tally: &mut Tally,
) -> PhaseOut {
    let ep = match engine.udp_endpoint(sock) {
        Ok(ep) => ep,
        Err(e) => return PhaseOut::failed(e),
    };
    let (wait, said) = match prepare_udp(&ep, cx.spin, UDP_POLL) {
        Ok(x) => x,
        Err(e) => return PhaseOut::failed(e),
    };
    let (req_len, resp_len) = (cx.phase.request as usize, cx.phase.response as usize);
    let waiter = Waiter::new(wait, cx.signals, false);
    let io = match DatagramIo::new(engine, &ep, req_len.max(resp_len), waiter, UDP_POLL) {
        Ok(io) => io,
        Err(e) => return PhaseOut::failed(e),
    };
    let mut x = UdpExchange {
        io,
        req: &mut bufs.req[..req_len],
        core: RrClient::new(cx.flow, resp_len, Some(RESPONSE_TIMEOUT_NS)),
    };
    let result = run_phase(&mut x, cx, tally);
    tally.set_late(x.core.late());
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
        // The server core checks the request's size.
        _: usize,
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

/// Serves one phase of a server flow on `sock`, taken over as `engine`'s
/// endpoint.
pub(super) fn server_phase<E: Engine>(
    engine: E,
    sock: UdpSocket,
    cx: &PhaseCtx<'_>,
    bufs: &mut Buffers,
) -> Served {
    let len = (cx.phase.request as usize).max(cx.phase.response as usize);
    let ep = match engine.udp_endpoint(sock) {
        Ok(ep) => ep,
        Err(e) => {
            return Served {
                transactions: 0,
                elapsed_ns: 0,
                out: PhaseOut::failed(e),
            }
        }
    };
    serve_phase(cx, bufs, || {
        let (wait, said) = prepare_udp(&ep, cx.spin, POLL)?;
        let waiter = Waiter::new(wait, cx.signals, true);
        Ok((DatagramIo::new(engine, &ep, len, waiter, UDP_POLL)?, said))
    })
}
