//! linerate's iperf3 3.x compatibility, in one crate: what a reader opens to
//! see iperf3's control protocol, its messages and JSON, how an iperf3 test
//! maps onto a linerate test, its datagram framing and receive accounting,
//! iperf3's output formats, and the fuzz targets over all of it.
//! Everything but `streams` (the default feature of that name) is sans-IO.
//! The sessions are sans-IO, like the native ones
//! ([`linerate_proto::session`]), and implement the same
//! [`linerate_proto::session::Session`] interface, so the run crate's one
//! control driver runs both (its iperf3 glue,
//! `linerate_run::iperf3`, stays there: it is glue on that driver).
//!
//! The reference is `shared/iperf3-protocol.md` (from the iperf3 source and
//! from captures of Debian's 3.12). In short, on one TCP control connection:
//!
//! ```text
//! C cookie(37) → S 09 → C params JSON → S 0A → data streams (in order)
//! → S 01 02 → data → C 04 → S 0D → C results JSON → S results JSON + 0E → C 10
//! ```
//!
//! - [`State`] (with the cookie, error codes and stream roles: `control`):
//!   the one-byte state messages (a *signed* char: −1 busy,
//!   −2 server error followed by two big-endian i32).
//! - [`Cookie`]: 36 characters of `[a-z2-7]` and a NUL; opaque to a server.
//! - [`json`]: the u32-length-prefixed JSON messages, parameters and results,
//!   read as untrusted input (caps before allocation, lenient numbers as
//!   iperf3's cJSON reads them, 3.12's unsigned −1).
//! - [`udp`]: the datagram header (the UDP sender core's
//!   [`udp::Iperf3Datagrams`] format), the connect handshake's magic
//!   datagrams and iperf3's own receiver accounting (its loss,
//!   out-of-order, jitter).
//! - `streams`: the part with syscalls, on linerate's engines: the UDP
//!   stream handshake on iperf3's port and the stream format the runner is
//!   started with for iperf3 tests (its receive loop keeps both accounts).
//! - [`spec_of`], [`params_of`]: the linerate test an iperf3 test is, and
//!   back (one module, inverses on what iperf3 can express).
//! - [`server`], [`client`]: the session state machines; they take bytes and
//!   `now` and hand back bytes, actions and a deadline, as the native ones do.
//! - `output` (the default feature of that name): iperf3's output formats,
//!   its human text and its `-J` document and `--json-stream` events,
//!   rendered from linerate's report model (pure functions: strings and
//!   JSON values out).
//! - `fuzz` (hidden): the iperf3 fuzz targets (`fuzz/`, `tests/fuzz.rs`).

pub mod client;
mod control;
#[doc(hidden)]
pub mod fuzz;
pub mod json;
#[cfg(feature = "output")]
pub mod output;
pub mod server;
mod spec;
#[cfg(feature = "streams")]
pub mod streams;
pub mod udp;

pub use control::*;
pub use spec::{iperf3_direction, iperf3_protocol, params_of, spec_of, Inexpressible};

#[cfg(test)]
mod session_tests;
