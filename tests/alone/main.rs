//! End-to-end tests that need the host to themselves. Each asserts a rate
//! measured through a bottleneck emulated on this host (a router namespace
//! with `tbf`) to within a few per cent; the router's queue is drained by
//! this host's softirqs, so when the e2e suite's other tests load both
//! CPUs the path itself stalls and drops, which no tester can tell from
//! the path's own loss (a clean-clone CI run failed so three times in a
//! row, at 7.3 of 9.7 Mbit/s). Cargo runs test binaries one after the
//! other, so nothing of the e2e suite runs beside these; within this
//! binary each test holds [`alone`] while it runs.
//!
//! Shares the e2e binary's helpers and network paths.

#[allow(
    dead_code,
    reason = "the e2e binary's helpers, of which these tests use some"
)]
#[path = "../e2e/helpers.rs"]
mod helpers;
#[allow(
    dead_code,
    reason = "the e2e binary's paths, of which these tests use some"
)]
#[path = "../e2e/netns.rs"]
mod netns;
mod qualify;

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Held by each test here while it runs, so they run one at a time.
pub fn alone() -> MutexGuard<'static, ()> {
    static ALONE: Mutex<()> = Mutex::new(());
    ALONE.lock().unwrap_or_else(PoisonError::into_inner)
}
