//! What the layers share: the MAC address type, the IP protocol number of
//! UDP, and addresses in the 16-byte form the XDP filter keys use.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A MAC address.
pub type Mac = [u8; 6];

/// `ip` as the 16 bytes of an IPv6 address (IPv4-mapped for IPv4): the
/// form the XDP program's filter keys use.
pub fn mapped(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

/// The unspecified address of `ip`'s family.
pub fn unspecified_like(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    }
}

/// The IP protocol number of UDP.
pub const IPPROTO_UDP: u8 = 17;
