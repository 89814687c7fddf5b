//! AF_XDP building blocks for linerate's `xdp` engine (issue 25): kernel
//! bypass for UDP on any interface with an XDP path, veth included.
//!
//! - [`Program`]: the XDP program (`bpf/redirect.c`, compiled by build.rs
//!   with clang's BPF target) attached through a BPF link, so it goes away
//!   with the process; it redirects only the test's datagrams (destination
//!   address and UDP port, see [`Program::allow`]) to the AF_XDP socket of
//!   the queue they arrive on and passes everything else to the kernel.
//! - [`Queue`]: one AF_XDP socket on (interface, queue) with its UMEM and
//!   fill, completion, RX and TX rings; sends batches of UDP payloads as
//!   frames built in place, receives batches of parsed datagrams, and
//!   reads the socket's drop statistics.
//! - [`queue_count`]: the queues of an interface a socket can bind
//!   (`ethtool -l`), so each stream can have its own.
//! - [`path_to`]: the interface, source address and next-hop MAC for a
//!   peer, from the kernel's route and neighbour tables (rtnetlink).
//! - [`missing_capabilities`]: what AF_XDP needs that this process lacks;
//!   [`readiness`]: whether AF_XDP would work on an interface, and why not
//!   (`linerate doctor`), read without attaching anything.
//!
//! Frames themselves (Ethernet, IPv4, IPv6, UDP, checksums) are built and
//! parsed by `linerate_proto::packet`, sans-IO, where the property tests
//! and fuzz targets reach them.
//!
//! Everything acts in the calling thread's network namespace. Every
//! refusal is an [`XdpError`] naming what is missing and how to get it;
//! nothing here falls back to another mode on its own.

mod caps;
mod channels;
mod error;
mod features;
mod modes;
mod netlink;
mod path;
mod program;
mod queue;
mod readiness;

pub use caps::missing as missing_capabilities;
pub use channels::queue_count;
pub use error::XdpError;
pub use linerate_proto::packet::{Datagram, Mac, UdpFlow};
pub use modes::{AttachMode, CopyMode};
pub use netlink::{link, link_by_name, AttachedProgram, LinkInfo};
pub use path::{path_to, Path};
pub use program::{Program, ProgramOptions, OBJECT};
pub use queue::{Queue, QueueCounters, QueueOptions, XdpStats};
pub use readiness::{readiness, Readiness};

/// Whether this process could use AF_XDP at all, whatever the interface:
/// the capabilities, then a kernel with AF_XDP sockets. Cheap; run before
/// a test so a refusal comes before any connection.
pub fn check_host() -> Result<(), XdpError> {
    caps::check()?;
    queue::probe_af_xdp()
}
