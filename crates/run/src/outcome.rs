//! The flag the SIGINT handler sets: every kind of client (native, iperf3,
//! local transports, sweeps) checks it and ends its test as interrupted
//! ([`crate::error::RunError::Interrupted`]).

use std::sync::atomic::AtomicBool;

/// Set by the SIGINT handler; the control loop turns it into an Abort.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);
