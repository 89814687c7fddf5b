//! Event loops: many flows on a few threads (`--flows N --threads T`).
//!
//! Each loop thread owns its share of a side's flows and waits for all of
//! them in one edge-triggered epoll set (rustix's `epoll`: a thin, typed
//! wrapper over the syscalls already in the dependency tree; mio and
//! polling add a registry or one-shot model this loop does not need). The
//! sockets are non-blocking and every byte moves through the flow's engine
//! ([`crate::engines`]) with [`crate::engines::Wait::DontWait`]; the loop
//! only decides which flow moves next. A flow that is ready gets a bounded
//! number of calls per turn, then goes to the back of the ready queue, so
//! one fast flow cannot starve the others of its thread.
//!
//! - [`driver`]: the readiness loop every kind of flow runs on
//!   ([`LoopFlow`]: a socket and one bounded turn of its logic).
//! - [`fds`]: raising `RLIMIT_NOFILE` for thousands of sockets.
//! - [`tcp`]: TCP stream flows (senders to a limit or stop, receivers
//!   to end of stream); rr flows are `crate::rr::loops`.
//! - [`udp`]: UDP stream flows (paced senders on the loop's timer heap,
//!   receivers to their drain deadline, each flow's loss its own).
//! - [`split`]: which loop thread serves which flow, and its name.

mod driver;
pub mod fds;
mod split;
pub mod tcp;
pub mod udp;

pub use driver::{drive, LoopFlow, Turn};

use crate::engines::EngineKind;
use linerate_proto::spec::Protocol;

/// The engine a side's loops run when asked for `kind`: what the report
/// names (TCP: [`tcp::engine_for`]; UDP: [`udp::ENGINE`]).
pub fn engine_for(kind: EngineKind, protocol: Protocol) -> EngineKind {
    match protocol {
        Protocol::Udp => udp::ENGINE,
        Protocol::Tcp => tcp::engine_for(kind),
    }
}
pub use split::{label, split};
