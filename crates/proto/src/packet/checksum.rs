//! The Internet checksum (RFC 1071) and the UDP pseudo-header's share.

use std::net::IpAddr;

use super::fields::{mapped, IPPROTO_UDP};

/// The one's-complement sum of `data` as 16-bit big-endian words (an odd
/// last byte padded with zero), folded, starting from `initial`; not
/// complemented.
pub fn sum(initial: u32, data: &[u8]) -> u32 {
    let mut acc = u64::from(initial);
    let mut words = data.chunks_exact(2);
    for w in &mut words {
        acc += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        acc += u64::from(*last) << 8;
    }
    fold(acc)
}

fn fold(mut acc: u64) -> u32 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u32
}

/// The Internet checksum of `data`: the complement of its sum.
pub fn internet_checksum(data: &[u8]) -> u16 {
    !(sum(0, data) as u16)
}

/// The pseudo-header's sum for UDP over `src` → `dst` with `udp_len` bytes
/// (RFC 768 for IPv4, RFC 8200 §8.1 for IPv6).
pub fn pseudo_header_sum(src: IpAddr, dst: IpAddr, udp_len: u32) -> u32 {
    let addrs = match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => sum(sum(0, &s.octets()), &d.octets()),
        (s, d) => sum(sum(0, &mapped(s)), &mapped(d)),
    };
    let len = u64::from(udp_len);
    fold(u64::from(addrs) + (len >> 16) + (len & 0xffff) + u64::from(IPPROTO_UDP))
}
