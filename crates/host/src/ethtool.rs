//! The ethtool ioctl (`SIOCETHTOOL`): driver name and the offload flags a
//! test's numbers depend on. Uses the legacy per-feature get commands,
//! which every kernel since 2.6 answers for every device (the kernel maps
//! them onto its generic feature bits), so no string-set parsing is needed.
//!
//! The ioctl acts in the calling thread's network namespace.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use serde::{Deserialize, Serialize};

const ETHTOOL_GDRVINFO: u32 = 0x03;
const ETHTOOL_GRXCSUM: u32 = 0x14;
const ETHTOOL_GTXCSUM: u32 = 0x16;
const ETHTOOL_GSG: u32 = 0x18;
const ETHTOOL_GTSO: u32 = 0x1e;
const ETHTOOL_GGSO: u32 = 0x23;
const ETHTOOL_GFLAGS: u32 = 0x25;
const ETHTOOL_GGRO: u32 = 0x2b;
/// `ETH_FLAG_LRO` in the `ETHTOOL_GFLAGS` word.
const ETH_FLAG_LRO: u32 = 1 << 15;

/// `struct ethtool_value`.
#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

/// `struct ethtool_drvinfo` (linux/ethtool.h).
#[repr(C)]
struct EthtoolDrvinfo {
    cmd: u32,
    driver: [u8; 32],
    version: [u8; 32],
    fw_version: [u8; 32],
    bus_info: [u8; 32],
    erom_version: [u8; 32],
    reserved2: [u8; 12],
    n_priv_flags: u32,
    n_stats: u32,
    testinfo_len: u32,
    eedump_len: u32,
    regdump_len: u32,
}

/// Offloads as the driver reports them; `None` where the ioctl was refused.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offloads {
    /// Generic receive offload (software coalescing of received segments).
    pub gro: Option<bool>,
    /// Generic segmentation offload.
    pub gso: Option<bool>,
    /// TCP segmentation offload (in the NIC).
    pub tso: Option<bool>,
    /// Large receive offload (in the NIC).
    pub lro: Option<bool>,
    pub rx_checksum: Option<bool>,
    pub tx_checksum: Option<bool>,
    pub scatter_gather: Option<bool>,
}

/// A socket to issue ethtool ioctls on.
struct Ctl(OwnedFd);

impl Ctl {
    fn open() -> Option<Ctl> {
        // SAFETY: plain socket(2); the fd is owned at once.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return None;
        }
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        Some(Ctl(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Issues SIOCETHTOOL for `dev` with `data` as the command buffer.
    fn ioctl<T>(&self, dev: &str, data: &mut T) -> bool {
        if dev.is_empty() || dev.len() >= libc::IFNAMSIZ {
            return false;
        }
        // SAFETY: ifreq is plain old data; all-zero is a valid value.
        let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
        for (d, s) in ifr.ifr_name.iter_mut().zip(dev.bytes()) {
            *d = s as libc::c_char;
        }
        ifr.ifr_ifru.ifru_data = (data as *mut T).cast();
        // The request's type is the C library's (glibc: unsigned long; musl: int).
        let req = libc::SIOCETHTOOL as libc::Ioctl;
        // SAFETY: SIOCETHTOOL reads the command word at ifru_data and
        // writes at most size_of::<T>() bytes there: each T used here is the
        // kernel struct for the command it carries.
        let rc = unsafe { libc::ioctl(self.0.as_raw_fd(), req, &mut ifr) };
        rc == 0
    }

    fn value(&self, dev: &str, cmd: u32) -> Option<u32> {
        let mut v = EthtoolValue { cmd, data: 0 };
        self.ioctl(dev, &mut v).then_some(v.data)
    }
}

/// The driver's name as ethtool reports it (`veth`, `ixgbe`, …).
pub fn driver(dev: &str) -> Option<String> {
    let ctl = Ctl::open()?;
    // SAFETY: the struct is plain old data; all-zero is valid.
    let mut info: EthtoolDrvinfo = unsafe { std::mem::zeroed() };
    info.cmd = ETHTOOL_GDRVINFO;
    if !ctl.ioctl(dev, &mut info) {
        return None;
    }
    let end = info.driver.iter().position(|&b| b == 0).unwrap_or(32);
    let name = String::from_utf8_lossy(&info.driver[..end]).into_owned();
    (!name.is_empty()).then_some(name)
}

/// `dev`'s offload flags; every field `None` if ethtool is not answered
/// (e.g. the interface does not exist in this namespace).
pub fn offloads(dev: &str) -> Offloads {
    let Some(ctl) = Ctl::open() else {
        return Offloads::default();
    };
    let on = |cmd| ctl.value(dev, cmd).map(|v| v != 0);
    Offloads {
        gro: on(ETHTOOL_GGRO),
        gso: on(ETHTOOL_GGSO),
        tso: on(ETHTOOL_GTSO),
        lro: ctl
            .value(dev, ETHTOOL_GFLAGS)
            .map(|f| f & ETH_FLAG_LRO != 0),
        rx_checksum: on(ETHTOOL_GRXCSUM),
        tx_checksum: on(ETHTOOL_GTXCSUM),
        scatter_gather: on(ETHTOOL_GSG),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_answers_the_offload_ioctls() {
        let o = offloads("lo");
        // Every kernel answers the legacy gets for lo (generic features).
        assert!(
            o.gro.is_some() && o.gso.is_some() && o.tso.is_some(),
            "{o:?}"
        );
        assert!(o.lro.is_some(), "{o:?}");
        assert_eq!(offloads("no-such-if0"), Offloads::default());
        assert_eq!(driver("no-such-if0"), None);
        assert_eq!(driver(""), None);
    }
}
