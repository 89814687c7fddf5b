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
//! - [`split`]: which loop thread serves which flow, and its name.

mod driver;
pub mod fds;
mod split;
pub mod tcp;

pub use driver::{drive, LoopFlow, Turn};
pub use split::{label, split};
