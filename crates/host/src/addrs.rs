//! Interface addresses via getifaddrs(3) (no netlink): every IPv4/IPv6
//! address with its prefix length, per interface.

use std::net::IpAddr;

/// One address of an interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IfAddr {
    pub dev: String,
    pub ip: IpAddr,
    pub prefix: u8,
}

impl std::fmt::Display for IfAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.ip, self.prefix)
    }
}

/// Converts a sockaddr of family AF_INET/AF_INET6 to an address.
///
/// # Safety
/// `sa` must be null or point to a sockaddr as large as its family says.
unsafe fn ip_of(sa: *const libc::sockaddr) -> Option<IpAddr> {
    if sa.is_null() {
        return None;
    }
    // SAFETY: the caller guarantees `sa` points to a sockaddr of its family.
    unsafe {
        match i32::from((*sa).sa_family) {
            libc::AF_INET => {
                let sin = &*(sa as *const libc::sockaddr_in);
                Some(IpAddr::from(
                    u32::from_be(sin.sin_addr.s_addr).to_be_bytes(),
                ))
            }
            libc::AF_INET6 => {
                let sin6 = &*(sa as *const libc::sockaddr_in6);
                Some(IpAddr::from(sin6.sin6_addr.s6_addr))
            }
            _ => None,
        }
    }
}

fn prefix_len(mask: Option<IpAddr>) -> u8 {
    match mask {
        Some(IpAddr::V4(m)) => u32::from(m).count_ones() as u8,
        Some(IpAddr::V6(m)) => u128::from(m).count_ones() as u8,
        None => 0,
    }
}

/// Every address of every interface in this network namespace.
pub fn all() -> Vec<IfAddr> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list freed below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: the list's sockaddrs are sized for their family.
        let (ip, mask) = unsafe { (ip_of(ifa.ifa_addr), ip_of(ifa.ifa_netmask)) };
        let Some(ip) = ip else { continue };
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        let dev = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) };
        out.push(IfAddr {
            dev: dev.to_string_lossy().into_owned(),
            ip,
            prefix: prefix_len(mask),
        });
    }
    // SAFETY: `head` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    out
}

/// The interface that owns `ip` (127.0.0.0/8 belongs to `lo`).
pub fn owner_of(ip: IpAddr) -> Option<String> {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    all()
        .into_iter()
        .find(|a| a.ip == ip)
        .map(|a| a.dev)
        .or_else(|| ip.is_loopback().then(|| "lo".to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_has_127_0_0_1_slash_8() {
        let lo: Vec<_> = all().into_iter().filter(|a| a.dev == "lo").collect();
        assert!(lo.iter().any(|a| a.to_string() == "127.0.0.1/8"), "{lo:?}");
        assert_eq!(
            owner_of("127.0.0.2".parse().expect("ip")).as_deref(),
            Some("lo")
        );
    }
}
