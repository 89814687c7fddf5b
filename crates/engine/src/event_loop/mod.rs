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
//! - `driver`: the readiness loop every kind of flow runs on
//!   (`LoopFlow`: a socket and one bounded turn of its logic), and what
//!   a flow is to either loop (`Flow`: its end, failure and progress).
//! - [`fds`]: raising `RLIMIT_NOFILE` for thousands of sockets.
//! - [`tcp`]: TCP stream flows (senders to a limit or stop, receivers
//!   to end of stream); rr flows are `crate::rr::loops`.
//! - [`udp`]: UDP stream flows (paced senders on the loop's timer heap,
//!   receivers to their drain deadline, each flow's loss its own).
//! - `kind` ([`LoopKind`]): which waiting a loop does (epoll or io_uring).
//! - [`split`]: which loop thread serves which flow, and its name.
//! - [`ring`]: the completion loop `--engine uring` runs instead of the
//!   readiness loop (one io_uring per thread, multishot receives into the
//!   thread's provided buffers, queued sends); the TCP and UDP flows keep
//!   their epoll kinds' state, cores and measurements.

mod driver;
pub mod fds;
mod kind;
pub mod ring;
mod split;
pub mod tcp;
pub mod udp;

pub use driver::Turn;
pub(crate) use driver::{drive, Flow, LoopFlow, WATCH_ALL};
pub use kind::{loop_kind, LoopKind};
pub use split::{label_of, split};

use crate::engines::EngineKind;
use linerate_proto::spec::Protocol;

/// The engine a side's stream loops run when asked for `kind`: what the
/// report names. `uring` runs the completion loop ([`ring`]); the rest
/// run on epoll (TCP: [`tcp::engine_for`]; UDP: [`udp::ENGINE`]).
pub fn engine_for(kind: EngineKind, protocol: Protocol) -> EngineKind {
    match (protocol, kind) {
        (_, EngineKind::Uring { .. }) => kind,
        (Protocol::Udp, _) => udp::ENGINE,
        (Protocol::Tcp, _) => tcp::engine_for(kind),
    }
}
