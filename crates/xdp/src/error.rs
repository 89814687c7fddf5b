//! Why AF_XDP cannot run here, in words that say what is missing and how
//! to get it: every refusal is one of these, never a silent fallback. Each
//! message names AF_XDP or XDP itself (the engine and `linerate doctor`
//! show them as they are, with no prefix).

use std::io;
use std::net::IpAddr;

use crate::modes::{AttachMode, CopyMode};

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
    #[error("no network interface {0} for AF_XDP")]
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
        "cannot register {bytes} bytes of AF_XDP UMEM: {source}; raise the locked-memory limit \
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
    #[error("AF_XDP's netlink request: {0}")]
    Netlink(String),
    #[error("the kernel refused AF_XDP's netlink request: {0}")]
    NetlinkRefused(io::Error),
    #[error("no route to {0} for AF_XDP frames: {1}")]
    NoRoute(IpAddr, String),
    #[error(
        "no link-layer address for AF_XDP frames to next hop {hop} on {iface}: neighbour \
         resolution did not complete within {waited_ms} ms (is the peer up?)"
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Shown as they are (no prefix added by the engine or the doctor),
    /// every message says it is about AF_XDP or XDP, once at its head at
    /// most: never "AF_XDP: AF_XDP needs …".
    #[test]
    fn issue_25_every_af_xdp_error_names_xdp_and_no_prefix_repeats() {
        let io = || io::Error::from_raw_os_error(libc::EPERM);
        let all = [
            XdpError::Capabilities {
                missing: "CAP_NET_RAW".into(),
            },
            XdpError::NoAfXdp(io()),
            XdpError::NoInterface("eth9".into()),
            XdpError::Loopback("lo".into()),
            XdpError::AlreadyAttached {
                iface: "va".into(),
                prog_id: 7,
                mode: "native",
            },
            XdpError::Load("x".into()),
            XdpError::Attach {
                iface: "va".into(),
                mode: AttachMode::Native,
                source: io(),
                hint: "",
            },
            XdpError::Bind {
                iface: "va".into(),
                queue: 0,
                copy: CopyMode::Copy,
                source: io(),
                hint: "",
            },
            XdpError::Umem {
                bytes: 1,
                source: io(),
            },
            XdpError::Socket {
                iface: "va".into(),
                queue: 0,
                step: "bind",
                source: io(),
            },
            XdpError::Options("x".into()),
            XdpError::Map {
                map: "m",
                reason: "x".into(),
            },
            XdpError::Netlink("x".into()),
            XdpError::NetlinkRefused(io()),
            XdpError::NoRoute("198.18.0.2".parse().expect("ip"), "x".into()),
            XdpError::Neighbour {
                hop: "198.18.0.2".parse().expect("ip"),
                iface: "va".into(),
                waited_ms: 1,
            },
        ];
        for e in all {
            let s = e.to_string();
            assert!(s.contains("XDP"), "{s}");
            assert!(!s.starts_with("AF_XDP:"), "{s}");
        }
    }
}
