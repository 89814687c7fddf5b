//! What this kernel lets the accelerated engines use, probed once per
//! process and cached.
//!
//! Each capability is either available or missing with a typed reason, so an
//! engine option the kernel lacks is refused with that reason (never quietly
//! replaced), and `auto`-style choices can say what they skipped and why.
//!
//! The probes only create throw-away sockets and read one sysctl: no data is
//! sent. A setsockopt that succeeds is taken as support: every one of these
//! options is refused with `ENOPROTOOPT` (or `EINVAL`) by kernels that lack
//! it, and a seccomp filter that blocks them shows up as the same refusal.

use std::net::UdpSocket;
use std::sync::OnceLock;

/// Where the io_uring switch lives (Linux 6.6+): 0 on, 1 only for
/// `kernel.io_uring_group`, 2 off.
pub const IO_URING_SYSCTL: &str = "/proc/sys/kernel/io_uring_disabled";

/// `SO_ZEROCOPY` from include/uapi/asm-generic/socket.h.
const SO_ZEROCOPY: libc::c_int = 60;

/// Why a capability is missing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Missing {
    /// The kernel refused the socket option that turns the feature on.
    #[error("the kernel refused {option} ({errno_text}; {needs})")]
    Refused {
        option: &'static str,
        errno: i32,
        errno_text: String,
        /// The first kernel version that has the option, for the message.
        needs: &'static str,
    },
    /// No socket could be made to probe with.
    #[error("could not create a socket to probe {option}: {errno_text}")]
    NoSocket {
        option: &'static str,
        errno_text: String,
    },
    /// `kernel.io_uring_disabled` turns io_uring off.
    #[error("io_uring is disabled by sysctl kernel.io_uring_disabled = {value}{}",
        if *value == 1 { " (only members of kernel.io_uring_group may use it)" } else { "" })]
    IoUringDisabled { value: u32 },
}

/// The probed capabilities of this kernel (and process: seccomp filters and
/// group membership count).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caps {
    /// UDP generic segmentation offload: one send of up to 64 equal
    /// datagrams, 128 on recent kernels (`UDP_SEGMENT`, Linux 4.18).
    pub udp_segment: Result<(), Missing>,
    /// UDP generic receive offload: one receive of a run of equal datagrams
    /// with their segment size in a control message (`UDP_GRO`, Linux 5.0).
    pub udp_gro: Result<(), Missing>,
    /// `MSG_ZEROCOPY` sends (`SO_ZEROCOPY`: TCP Linux 4.14, UDP 5.0),
    /// probed on a UDP socket, the later of the two.
    pub msg_zerocopy: Result<(), Missing>,
    /// io_uring, as far as `kernel.io_uring_disabled` says (`Ok(None)`: the
    /// sysctl does not exist, so only a ring setup can tell).
    pub io_uring: Result<Option<u32>, Missing>,
}

/// This process's capabilities, probed on first use.
pub fn caps() -> &'static Caps {
    static CAPS: OnceLock<Caps> = OnceLock::new();
    CAPS.get_or_init(probe)
}

/// Probes every capability now (uncached; [`caps`] caches it).
pub fn probe() -> Caps {
    Caps {
        udp_segment: probe_opt(
            libc::SOL_UDP,
            libc::UDP_SEGMENT,
            "UDP_SEGMENT",
            1400,
            "Linux 4.18",
        ),
        udp_gro: probe_opt(libc::SOL_UDP, libc::UDP_GRO, "UDP_GRO", 1, "Linux 5.0"),
        msg_zerocopy: probe_opt(
            libc::SOL_SOCKET,
            SO_ZEROCOPY,
            "SO_ZEROCOPY",
            1,
            "Linux 5.0 for UDP",
        ),
        io_uring: io_uring_from(std::fs::read_to_string(IO_URING_SYSCTL).ok().as_deref()),
    }
}

/// Reads `kernel.io_uring_disabled`'s text (`None`: no such sysctl).
pub fn io_uring_from(sysctl: Option<&str>) -> Result<Option<u32>, Missing> {
    match sysctl.and_then(|s| s.trim().parse::<u32>().ok()) {
        None => Ok(None),
        Some(0) => Ok(Some(0)),
        Some(value) => Err(Missing::IoUringDisabled { value }),
    }
}

fn probe_opt(
    level: libc::c_int,
    opt: libc::c_int,
    option: &'static str,
    value: libc::c_int,
    needs: &'static str,
) -> Result<(), Missing> {
    let sock = UdpSocket::bind(("127.0.0.1", 0)).map_err(|e| Missing::NoSocket {
        option,
        errno_text: e.to_string(),
    })?;
    crate::socket::set_int(&sock, level, opt, value).map_err(|e| Missing::Refused {
        option,
        errno: e.raw_os_error().unwrap_or(0),
        errno_text: e.to_string(),
        needs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_is_cached_and_consistent() {
        let a = caps();
        assert!(std::ptr::eq(a, caps()), "one probe per process");
        assert_eq!(*a, probe(), "the kernel did not change under us");
        // Print what this kernel has: the CI log says why tests skip.
        eprintln!("capabilities: {a:?}");
    }

    #[test]
    fn io_uring_sysctl_values_are_typed() {
        assert_eq!(io_uring_from(None), Ok(None));
        assert_eq!(io_uring_from(Some("0\n")), Ok(Some(0)));
        let one = io_uring_from(Some("1\n")).expect_err("1 restricts");
        assert!(one.to_string().contains("io_uring_group"), "{one}");
        let two = io_uring_from(Some("2")).expect_err("2 disables");
        assert_eq!(two, Missing::IoUringDisabled { value: 2 });
        assert!(two.to_string().contains("io_uring_disabled = 2"), "{two}");
    }

    #[test]
    fn a_refused_option_names_itself() {
        // An option number no kernel has stands in for a missing feature.
        let r = probe_opt(libc::SOL_UDP, 0x7fff, "TEST_OPT", 1, "Linux 99");
        let e = r.expect_err("no kernel has this option");
        let text = e.to_string();
        assert!(
            text.contains("TEST_OPT") && text.contains("Linux 99"),
            "{text}"
        );
    }
}
