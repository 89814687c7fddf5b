//! Request/response (rr) and connect/request/response (crr) loops.
//!
//! One thread per flow on each side. The client writes a request of exactly
//! the phase's size and reads a response of exactly the response size
//! (TCP framing by known size: no length prefix, nothing else on the
//! connection), timing each transaction with a pair of `CLOCK_MONOTONIC`
//! reads, or each batch of K back-to-back transactions with one pair
//! (`batch`), into an HDR histogram. The server reads a request, stamps its
//! arrival and the response's departure into the response header (when the
//! sizes leave room, see `linerate_proto::rr`), and writes the response.
//! What is counted, and when the clock is read, is decided by the sans-IO
//! core `linerate_proto::rr_core`; which response answers which request,
//! what is late and what the server answers, by `linerate_proto::rr_flow`;
//! this module moves the bytes and does the syscalls.
//!
//! A test runs phases (each size, then each size again under load). In rr,
//! every flow has its own connection per phase: the client ends a phase by
//! shutting down its write side, the server answers end of stream by
//! closing, and the client reads that close, so both ends count the same
//! transactions and no phase's messages can be mistaken for another's.
//! Flows move from phase to phase together (a `gate::Gate` run by the
//! side's coordinator thread), so the load streams run exactly while the
//! loaded phases do. In crr each transaction is a new connection, greeted
//! with the test's token and the (phase, flow) stream id, then one request,
//! one response, and the server's close.
//!
//! Over UDP (`--proto udp`) each message is one datagram on a socket per
//! (phase, flow), attached with the UDP tests' greeting handshake
//! (`crate::udp`). A phase ends with an empty datagram, which the server
//! answers with empty datagrams before it moves on. A response that does
//! not come within `linerate_proto::rr_flow::RESPONSE_TIMEOUT_NS` is counted as lost (and left
//! out of the distribution); a late one is recognised by its sequence
//! number, when the response is large enough to carry a header, and
//! dropped.
//!
//! Nothing allocates per transaction: buffers are per flow, histograms are
//! fixed-size. `busy_poll` makes the sockets non-blocking and spins on
//! `EAGAIN` (checking the stop flags every [`SPIN_CHECK`] spins), and asks
//! the kernel for `SO_BUSY_POLL`; whether the kernel accepted is reported.
//!
//! Files, one concept each:
//! - `params`: how one side runs (the plan, CPUs, clock offset), buffers.
//! - `conns`: sorting the attached connections into flows × phases + load.
//! - `crate::wait`: the two waiting disciplines (blocking, busy polling),
//!   shared with the stream loops.
//! - `stream_io` / `datagram_io`: whole messages on TCP, datagrams on UDP,
//!   through the engine trait (`crate::engines`); flows are generic over
//!   the engine.
//! - `gate`, `watch`: phase coordination; unblocking and stall detection.
//! - `exchange`, `serve`: the one client phase loop over an
//!   `exchange::Exchange` (TCP, UDP, crr), and the one server phase loop
//!   over a `serve::Serve` (TCP, UDP): leaves the transports implement.
//! - `client`, `server`: each side's flow threads and coordination;
//!   `loops`: rr's flows and crr's client flows on event loops
//!   (`--flows N --threads T`): `tcp_flows` their TCP flows whatever the
//!   loop, moved by the flow's engine on epoll (`loops`) or by io_uring
//!   (`ring_loops`, `--engine uring`); `udp_flows` rr's UDP flows
//!   whatever the loop, their datagrams moved on epoll (`udp_loops`) or
//!   by io_uring (`udp_ring_loops`); `loop_tally` what their client
//!   flows count.
//! - `tcp`, `udp`, `crr`: each transport's exchange and serving;
//!   `crr_pool`: the server's crr connections served without a thread each.
//! - `load`: the bulk load streams; `side`: a side's threads and results.

mod client;
mod conns;
mod crr;
mod crr_pool;
mod datagram_io;
mod exchange;
mod gate;
mod load;
mod loop_tally;
pub mod loops;
mod params;
mod ring_loops;
mod serve;
mod server;
mod side;
mod stream_io;
mod tcp;
mod tcp_flows;
mod udp;
mod udp_flows;
mod udp_loops;
mod udp_ring_loops;
mod watch;

pub use crate::wait::{SPIN_BUDGET, SPIN_CHECK};
pub use client::start_client;
pub use conns::RrConns;
pub use crr::{CrrServer, CrrTarget};
pub use crr_pool::{AcceptSpin, CrrHost, CrrPool, Offer};
pub use params::{RrParams, LOAD_WARMUP};
pub use server::start_server;

#[cfg(test)]
mod tests;
