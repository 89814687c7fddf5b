//! End-to-end tests: the real binary, as a user runs it. One test binary
//! (as in ripgrep) with shared helpers; modules by feature. Regression tests
//! are named after their issue (`issue_N_…`).

mod engines;
mod golden;
mod helpers;
mod host;
mod netns;
mod rr;
mod tcp;
mod udp;
mod ux;
