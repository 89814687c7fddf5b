//! Why AF_XDP cannot run here, in words that say what is missing and how
//! to get it: every refusal is one of these, never a silent fallback.

use std::io;
use std::net::IpAddr;

use crate::{AttachMode, CopyMode};

/// Failure to set up or use AF_XDP.
#[derive(Debug, thiserror::Error)]
pub enum XdpError {
    #[error(
        "AF_XDP needs {missing}: run as root, or grant the capabilities \
         (`setcap cap_net_raw,cap_net_admin,cap_bpf+ep BINARY`; CAP_SYS_ADMIN stands \
         in for CAP_BPF before Linux 5.8)"
    )]
    Capabilities { missing: String },
    #[error(
        "this kernel has no AF_XDP sockets (socket(AF_XDP): {0}): it needs \
         CONFIG_XDP_SOCKETS=y (Linux 4.18 or later)"
    )]
    NoAfXdp(io::Error),
    #[error("no network interface {0}")]
    NoInterface(String),
    #[error(
        "{0} is a loopback interface: AF_XDP cannot bind there (no XDP receive path); \
         test over a real interface or a veth pair"
    )]
    Loopback(String),
    #[error(
        "{iface} already runs XDP program id {prog_id} ({mode}); linerate replaces it \
         only when asked (the program's owner can remove it: `ip link set dev {iface} \
         xdp off`, or `bpftool link detach` for one attached through a BPF link)"
    )]
    AlreadyAttached {
        iface: String,
        prog_id: u32,
        mode: &'static str,
    },
    #[error("cannot load the XDP program: {0}")]
    Load(String),
    #[error("cannot attach the XDP program to {iface} in {mode} mode: {source}{hint}")]
    Attach {
        iface: String,
        mode: AttachMode,
        #[source]
        source: io::Error,
        hint: &'static str,
    },
    #[error(
        "cannot bind an AF_XDP socket to {iface} queue {queue} in {copy} mode: {source}{hint}"
    )]
    Bind {
        iface: String,
        queue: u32,
        copy: CopyMode,
        #[source]
        source: io::Error,
        hint: &'static str,
    },
    #[error(
        "cannot register {bytes} bytes of UMEM: {source}; raise the locked-memory limit \
         (`ulimit -l`, systemd's LimitMEMLOCK=) or grant CAP_IPC_LOCK"
    )]
    Umem {
        bytes: usize,
        #[source]
        source: io::Error,
    },
    #[error("AF_XDP socket on {iface} queue {queue}: {step}: {source}")]
    Socket {
        iface: String,
        queue: u32,
        step: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("invalid AF_XDP options: {0}")]
    Options(String),
    #[error("XDP map {map}: {reason}")]
    Map { map: &'static str, reason: String },
    #[error("netlink: {0}")]
    Netlink(String),
    #[error("the kernel refused the netlink request: {0}")]
    NetlinkRefused(io::Error),
    #[error("no route to {0}: {1}")]
    NoRoute(IpAddr, String),
    #[error(
        "no link-layer address for next hop {hop} on {iface}: neighbour resolution did \
         not complete within {waited_ms} ms (is the peer up?)"
    )]
    Neighbour {
        hop: IpAddr,
        iface: String,
        waited_ms: u64,
    },
}

/// An `errno` as returned by xdpilone, as an `io::Error`.
pub(crate) fn errno(e: xdpilone::Errno) -> io::Error {
    io::Error::from_raw_os_error(e.get_raw().abs())
}
