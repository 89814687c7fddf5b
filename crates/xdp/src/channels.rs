//! How many queues of an interface an AF_XDP socket can bind: the kernel
//! refuses a queue id at or past the device's active receive queues (for
//! a socket with an RX ring) or transmit queues (with a TX ring), so the
//! usable ones are the fewer of the two. Read with `ethtool -l`'s ioctl
//! (`ETHTOOL_GCHANNELS`: a NIC's combined channels plus its RX-only or
//! TX-only ones; veth reports its active `numrxqueues`/`numtxqueues` as
//! RX and TX), on a socket made in the calling thread's network namespace.

use std::io;

/// `ETHTOOL_GCHANNELS` (include/uapi/linux/ethtool.h).
const ETHTOOL_GCHANNELS: u32 = 0x3c;
/// `SIOCETHTOOL` (include/uapi/linux/sockios.h).
const SIOCETHTOOL: libc::c_ulong = 0x8946;

/// `struct ethtool_channels`.
#[repr(C)]
#[derive(Default)]
struct EthtoolChannels {
    cmd: u32,
    max_rx: u32,
    max_tx: u32,
    max_other: u32,
    max_combined: u32,
    rx_count: u32,
    tx_count: u32,
    other_count: u32,
    combined_count: u32,
}

/// `struct ifreq` with `ifr_data` (the name, then a pointer; padded to
/// the kernel's 40 bytes).
#[repr(C)]
struct IfreqData {
    name: [libc::c_char; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 16],
}

/// The queues of `iface` an AF_XDP socket can bind (`0..n`): the active
/// receive or transmit channels, whichever are fewer. An error where the
/// driver does not answer `ethtool -l` (the caller then assumes what it
/// can prove: queue 0).
pub fn queue_count(iface: &str) -> io::Result<u32> {
    let mut req = IfreqData {
        name: [0; libc::IFNAMSIZ],
        data: std::ptr::null_mut(),
        _pad: [0; 16],
    };
    if iface.len() >= libc::IFNAMSIZ {
        return Err(io::Error::from_raw_os_error(libc::ENODEV));
    }
    for (d, s) in req.name.iter_mut().zip(iface.bytes()) {
        *d = s as libc::c_char;
    }
    let mut ch = EthtoolChannels {
        cmd: ETHTOOL_GCHANNELS,
        ..EthtoolChannels::default()
    };
    req.data = (&mut ch as *mut EthtoolChannels).cast();
    // SAFETY: a plain socket(2), closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `req` names the interface and points at `ch`, both live for
    // the call; the kernel writes at most one `ethtool_channels`.
    let rc = unsafe { libc::ioctl(fd, SIOCETHTOOL as _, &mut req) };
    let err = io::Error::last_os_error();
    // SAFETY: `fd` is ours and open.
    unsafe { libc::close(fd) };
    if rc < 0 {
        return Err(err);
    }
    let rx = ch.combined_count + ch.rx_count;
    let tx = ch.combined_count + ch.tx_count;
    Ok(rx.min(tx).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Loopback answers `ethtool -l` with nothing (EOPNOTSUPP) on most
    /// kernels, or one queue; never zero queues.
    #[test]
    fn issue_25_queue_count_is_an_error_or_at_least_one() {
        if let Ok(n) = queue_count("lo") {
            assert!(n >= 1);
        }
        assert!(queue_count("no-such-interface-x").is_err());
        assert!(queue_count("a-name-longer-than-ifnamsiz").is_err());
    }
}
