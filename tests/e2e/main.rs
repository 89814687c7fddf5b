//! End-to-end tests: the real binary, as a user runs it. One test binary
//! (as in ripgrep) with shared helpers; modules by feature. Regression tests
//! are named after their issue (`issue_N_…`).

mod compare;
mod engines;
mod flows;
mod golden;
mod harden;
mod helpers;
mod host;
mod iperf3;
mod iperf3_batch;
mod iperf3_dropin;
mod iperf3_flags;
mod memory;
mod msg;
mod netns;
mod plots;
mod qualify;
mod readme;
mod repeat;
mod report;
mod rr;
mod sendfile;
mod speed;
mod tcp;
mod udp;
mod uring_engines;
mod uring_flows;
mod ux;
mod veth;
mod xdp;
mod xdp_queues;
