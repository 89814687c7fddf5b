//! linerate's host insight: what the host and its interfaces are set to and
//! what they count, read from `/sys`, `/proc` and the ethtool ioctl (no
//! netlink), plus ICMP echo.
//!
//! - [`iface`]: interface status (state, speed, MTU, addresses, driver,
//!   offloads, queues) and [`counters`] from `/sys/class/net/DEV/statistics`.
//! - [`doctor`]: tuning checks with the reason each matters per test kind
//!   and the command that changes it; [`sysctl`] reads and writes them.
//! - [`ping`]: ICMP echo over unprivileged ICMP sockets or raw sockets.
//! - [`render`]: human text of these models (their JSON is their serde form).
//!
//! Everything here reads the *calling thread's* network namespace: run
//! inside `ip netns exec NS` to see a namespace's view.

pub mod addrs;
pub mod counters;
pub mod doctor;
pub mod ethtool;
pub mod iface;
pub mod netns;
pub mod ping;
pub mod render;
pub mod route;
pub mod sysctl;
mod sysfs;
