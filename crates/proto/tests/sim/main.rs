//! Simulated client/server pair for the session state machines.
//!
//! A [`Pair`] holds a [`ClientSession`] and a [`ServerSession`], a virtual
//! clock (`base` is read once from [`Instant::now`]; time only moves when a
//! test adds a [`Duration`], nothing sleeps) and a shuttle that carries each
//! side's outbox bytes to the other, optionally cut into chunks (1-byte
//! chunks, or arbitrary ones from proptest) to prove that framing survives
//! any split across reads. Every action either side emits is recorded so the
//! tests can check what the I/O layer would have been asked to do.
//!
//! Covered: the happy path in every direction, refusals (busy, invalid spec,
//! protocol and frame version), the peer closing in every state, handshake,
//! data-phase and results deadlines, malformed and unexpected frames, data
//! connection checks in `stream_attached`, and aborts; for request/response
//! tests, the clock probes (same host, estimated offset, stray or missing
//! replies) and crr's start without data connections.
//!
//! One module per topic; [`harness`] holds the pair and the helpers they
//! share.

mod abort;
mod arbitrary_splits;
mod deadlines;
mod disconnect;
mod happy_path;
mod harness;
mod heartbeat;
mod malformed;
mod refusals;
mod rr;
mod stream_attached;
mod tcp_omit;
mod udp;
mod udp_omit;
mod unix;
