//! linerate's control protocol, without I/O.
//!
//! Nothing in this crate opens a socket, spawns a thread or reads a clock: the
//! session state machines take bytes, events and `now` as arguments and return
//! bytes to send, actions for the I/O layer and the next deadline. That keeps
//! the protocol testable with a simulated pair of endpoints on a virtual clock
//! (see `tests/` in this crate) and fuzzable.
//!
//! - [`wire`]: frame codec (checked header view + validated messages), and the
//!   first-bytes classifier that lets one port serve linerate and iperf3 peers.
//! - [`spec`]: the test both sides agree on, and the server's negotiation.
//! - [`limits`]: the server's limits on a whole test (memory, rate, duration).
//! - [`test_type`]: the table of what varies by type of test (negotiation
//!   hooks, rate and memory budget, report shape, engine workload).
//! - [`measure`]: what each side measured, exchanged at the end of a test.
//! - [`auth`]: pre-shared-key challenge–response (`--auth-key`).
//! - [`check`]: what a side checks in its peer's Accept and Results.
//! - [`session`]: client and server control state machines.
//! - [`rr`]: the header inside request/response messages.
//! - [`rr_core`]: request/response bookkeeping (plan, batch timing, tally,
//!   one-way arithmetic, busy-poll spin budget), with `now` as an argument.
//! - [`rr_flow`]: a request/response flow's client and server cores
//!   (matching, late responses, timeouts, the server's answer).
//! - [`clock`]: the offset between the two ends' clocks, for one-way latency.
//! - [`datagram`]: the UDP test datagram header, payload pattern and the
//!   test-only fault schedule.
//! - [`seq`]: the receiver's sequence tracker (loss, reordering,
//!   duplicates, late arrivals) and RFC 3550 jitter.
//! - [`pacing`]: the sender's absolute schedule.
//! - [`sanitize`]: escaping peer-supplied text before it is printed.
//! - [`udp_sender`]: the UDP sender's core — pacing, sequence numbers,
//!   header stamping, faults — handing out batches of datagrams.
//! - [`udp_receiver`]: the UDP receiver's core — one datagram and its
//!   arrival time in: classification, sequence tracking, jitter, counters.
//! - [`interval`]: the interval cutter — boundaries with the warm-up,
//!   cumulative counters cut into per-interval records.
//! - [`tcp_warmup`]: both ends of a TCP stream leave out the warm-up below
//!   the sender's byte offset at `omit`.
//! - iperf3 compatibility (its control protocol, sessions, JSON, datagram
//!   header and receiver rules) is its own crate, `linerate-iperf3`, on top
//!   of this one: the UDP sender core takes its datagram format as a
//!   [`udp_sender::DatagramFormat`].
//! - [`packet`]: Ethernet, IPv4, IPv6 and UDP frames built and parsed in
//!   user space (checked views, checksums), for the AF_XDP engine.
//! - [`side`]: client or server, the word all of the above share.
//! - `fuzz` (hidden): the fuzzing entry points `cargo fuzz` and the
//!   property tests share.

pub use side::Side;

pub mod auth;
pub mod check;
pub mod clock;
pub mod data_beat;
pub mod datagram;
#[doc(hidden)]
pub mod fuzz;
pub mod interval;
pub mod limits;
pub mod measure;
pub mod negotiate;
pub mod pacing;
pub mod packet;
pub mod rr;
pub mod rr_core;
pub mod rr_flow;
pub mod sanitize;
pub mod seq;
pub mod session;
pub mod side;
pub mod spec;
pub mod tcp_warmup;
pub mod test_type;
pub mod udp_receiver;
pub mod udp_sender;
pub mod wire;

/// Version of the native control protocol carried in `Hello`.
pub const PROTOCOL_VERSION: u16 = 1;
