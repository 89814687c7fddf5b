//! One request/response flow's message logic without I/O: which response
//! answers which request, what is late, what a server answers.
//!
//! The engine's rr loops (`linerate_engine::rr`) move bytes and wait; every
//! decision about the bytes is made here, so it is tested on a simulated
//! pair with a virtual clock (`tests/rr_sim.rs`) and fuzzed:
//!
//! - [`RrClient`]: writes each request's header, matches responses to the
//!   request outstanding ([`Response::Matched`]), recognises a response to
//!   a request already counted lost, or a duplicate ([`Response::Late`]),
//!   and ignores what carries no message ([`Response::Stray`]); counts
//!   answers, losses and late responses. Over a reliable transport (TCP,
//!   crr) nothing is lost or late: such a response is an error.
//! - [`RrServer`]: checks a request and writes its response, stamped with
//!   the server's receive and send times when the test is timed.
//!
//! Neither reads the clock: the client's deadline is computed from a `now`
//! the caller already read, and the server's send time comes from a clock
//! function called only when the request is timed — so the data path
//! reads the clock exactly where it did before these cores existed.

use crate::rr::{self as msg, RequestRepr, ResponseRepr, RrError, RrHeader, ServerTimes};
use crate::rr::{REQUEST_HEADER_LEN, RESPONSE_HEADER_LEN};

/// How long an unreliable client waits for a response before counting it
/// lost, ns.
pub const RESPONSE_TIMEOUT_NS: u64 = 1_000_000_000;

/// How one transaction ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transaction {
    /// The response came, with the server's times when it carried them.
    Answered(Option<ServerTimes>),
    /// No response within the timeout (unreliable transports).
    Lost,
}

/// What one received response was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Response {
    /// The outstanding request's response (the server's times when it
    /// carried them): the transaction is answered.
    Matched(Option<ServerTimes>),
    /// A response to an earlier request (one counted lost, or a duplicate
    /// of one answered): dropped, the request still waits.
    Late,
    /// Not a response to anything: an empty datagram (a previous phase's
    /// end-of-phase answer), or a response when no request waits.
    Stray,
}

/// A client flow's requests and responses for one phase.
#[derive(Debug, Clone)]
pub struct RrClient {
    flow: u32,
    /// Bytes every response has.
    response: usize,
    /// How long a response may take; `None`: a reliable transport, where
    /// none is lost or late.
    timeout_ns: Option<u64>,
    /// The sequence number whose response is awaited.
    due: Option<u64>,
    answered: u64,
    lost: u64,
    late: u64,
}

impl RrClient {
    /// Flow `flow`'s client, for responses of `response` bytes; over an
    /// unreliable transport when `timeout_ns` is given.
    pub fn new(flow: u32, response: usize, timeout_ns: Option<u64>) -> Self {
        RrClient {
            flow,
            response,
            timeout_ns,
            due: None,
            answered: 0,
            lost: 0,
            late: 0,
        }
    }

    /// Writes `header` into the request `req` (nothing when `req` is too
    /// short to carry one); its response is now awaited.
    pub fn request(&mut self, header: &RequestRepr, req: &mut [u8]) {
        header.emit(req);
        self.due = Some(header.sequence);
    }

    /// The request went out at `now`: when its response is due by (`None`
    /// over a reliable transport, which waits as long as it takes).
    pub fn deadline(&self, now: u64) -> Option<u64> {
        self.timeout_ns.map(|t| now.saturating_add(t))
    }

    /// A response of `resp.len()` bytes arrived. An error when it cannot be
    /// one of this flow's (wrong size, header, flow or sequence).
    pub fn on_response(&mut self, resp: &[u8]) -> Result<Response, RrError> {
        let reliable = self.timeout_ns.is_none();
        if resp.is_empty() && !reliable {
            return Ok(Response::Stray);
        }
        let Some(due) = self.due else {
            return Ok(Response::Stray);
        };
        if resp.len() != self.response {
            return Err(RrError::WrongSize {
                what: "response",
                got: resp.len(),
                due: self.response,
            });
        }
        let server = if resp.len() < RESPONSE_HEADER_LEN {
            // No header: nothing to match, it answers what waits.
            None
        } else {
            let r = ResponseRepr::parse(&RrHeader::new_checked(resp)?)?;
            if !reliable && r.flow == self.flow && r.sequence < due {
                self.late += 1;
                return Ok(Response::Late);
            }
            msg::expect(self.flow, due, r.flow, r.sequence)?;
            r.server_ns.map(|(rx, tx)| ServerTimes { rx, tx })
        };
        self.due = None;
        self.answered += 1;
        Ok(Response::Matched(server))
    }

    /// The deadline passed with no response: the transaction is lost, and
    /// a response to it arriving later is [`Response::Late`].
    pub fn on_timeout(&mut self) -> Transaction {
        if self.due.take().is_some() {
            self.lost += 1;
        }
        Transaction::Lost
    }

    /// Transactions answered.
    pub fn answered(&self) -> u64 {
        self.answered
    }

    /// Transactions lost (timed out).
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// Late responses dropped.
    pub fn late(&self) -> u64 {
        self.late
    }
}

/// A server flow's answers for one phase.
#[derive(Debug, Clone)]
pub struct RrServer {
    flow: u32,
    /// Bytes every request has.
    request: usize,
    /// Requests cannot be lost on the way (TCP): their sequence numbers
    /// count up from 0. Otherwise they are echoed.
    reliable: bool,
    answered: u64,
}

impl RrServer {
    /// Flow `flow`'s server, for requests of `request` bytes.
    pub fn new(flow: u32, request: usize, reliable: bool) -> Self {
        RrServer {
            flow,
            request,
            reliable,
            answered: 0,
        }
    }

    /// Checks the request `req` and writes its response into `resp` (the
    /// response's size). `rx_ns`: the request's arrival, when the test is
    /// timed; `tx_ns` is then called for the send time, just before the
    /// response is written. Returns the sequence number answered: the
    /// request's when it carries a header, else the count answered so far.
    pub fn on_request(
        &mut self,
        req: &[u8],
        rx_ns: Option<u64>,
        tx_ns: impl FnOnce() -> u64,
        resp: &mut [u8],
    ) -> Result<u64, RrError> {
        if req.len() != self.request {
            return Err(RrError::WrongSize {
                what: "request",
                got: req.len(),
                due: self.request,
            });
        }
        let mut sequence = self.answered;
        if req.len() >= REQUEST_HEADER_LEN {
            let q = RequestRepr::parse(&RrHeader::new_checked(req)?)?;
            if q.flow != self.flow {
                return Err(RrError::WrongFlow {
                    expected: self.flow,
                    got: q.flow,
                });
            }
            if self.reliable {
                msg::expect(self.flow, self.answered, q.flow, q.sequence)?;
            }
            sequence = q.sequence;
        }
        ResponseRepr {
            flow: self.flow,
            sequence,
            server_ns: rx_ns.map(|rx| (rx, tx_ns())),
        }
        .emit(resp);
        self.answered += 1;
        Ok(sequence)
    }

    /// Requests answered.
    pub fn answered(&self) -> u64 {
        self.answered
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(client: &mut RrClient, sequence: u64, len: usize) -> Vec<u8> {
        let mut req = vec![0u8; len];
        let header = RequestRepr {
            flow: 1,
            sequence,
            sent_ns: Some(10),
        };
        client.request(&header, &mut req);
        req
    }

    #[test]
    fn a_response_answers_the_request_outstanding_and_an_earlier_one_is_late() {
        let mut c = RrClient::new(1, 64, Some(RESPONSE_TIMEOUT_NS));
        let mut s = RrServer::new(1, 64, false);
        let mut r0 = [0u8; 64];
        s.on_request(&request(&mut c, 0, 64), Some(5), || 7, &mut r0)
            .expect("answered");
        assert_eq!(c.on_timeout(), Transaction::Lost);
        let mut r1 = [0u8; 64];
        s.on_request(&request(&mut c, 1, 64), Some(8), || 9, &mut r1)
            .expect("answered");
        // Response 0 arrives with response 1: late, then matched.
        assert_eq!(c.on_response(&r0), Ok(Response::Late));
        let t = ServerTimes { rx: 8, tx: 9 };
        assert_eq!(c.on_response(&r1), Ok(Response::Matched(Some(t))));
        // A duplicate of it, with nothing waiting.
        assert_eq!(c.on_response(&r1), Ok(Response::Stray));
        assert_eq!((c.answered(), c.lost(), c.late()), (1, 1, 1));
        assert_eq!(c.on_response(&[]), Ok(Response::Stray));
    }

    #[test]
    fn over_a_reliable_transport_an_earlier_response_is_an_error() {
        let mut c = RrClient::new(1, 64, None);
        let mut s = RrServer::new(1, 64, true);
        let mut r = [0u8; 64];
        s.on_request(&request(&mut c, 0, 64), None, || 0, &mut r)
            .expect("answered");
        assert_eq!(c.on_response(&r), Ok(Response::Matched(None)));
        let _ = request(&mut c, 1, 64);
        assert_eq!(
            c.on_response(&r),
            Err(RrError::WrongSequence {
                expected: 1,
                got: 0
            })
        );
        // A request out of order at a reliable server.
        assert_eq!(
            s.on_request(&request(&mut c, 5, 64), None, || 0, &mut r),
            Err(RrError::WrongSequence {
                expected: 1,
                got: 5
            })
        );
    }

    #[test]
    fn messages_too_short_for_a_header_are_answered_in_order_and_sizes_are_checked() {
        let mut c = RrClient::new(1, 8, Some(1));
        let mut s = RrServer::new(1, 4, true);
        let mut r = [0u8; 8];
        assert_eq!(s.on_request(&[0; 4], Some(1), || 2, &mut r), Ok(0));
        assert_eq!(s.on_request(&[0; 4], Some(1), || 2, &mut r), Ok(1));
        assert_eq!(
            s.on_request(&[0; 5], None, || 0, &mut r),
            Err(RrError::WrongSize {
                what: "request",
                got: 5,
                due: 4
            })
        );
        let _ = request(&mut c, 0, 4);
        assert_eq!(c.on_response(&r), Ok(Response::Matched(None)));
        let _ = request(&mut c, 1, 4);
        assert!(matches!(
            c.on_response(&[0; 9]),
            Err(RrError::WrongSize { got: 9, .. })
        ));
        assert_eq!(c.deadline(10), Some(11));
    }

    #[test]
    fn a_request_for_another_flow_is_refused() {
        let mut s = RrServer::new(2, 64, false);
        let mut c = RrClient::new(1, 64, None);
        let mut r = [0u8; 64];
        assert_eq!(
            s.on_request(&request(&mut c, 0, 64), None, || 0, &mut r),
            Err(RrError::WrongFlow {
                expected: 2,
                got: 1
            })
        );
        assert_eq!(s.answered(), 0);
    }
}
