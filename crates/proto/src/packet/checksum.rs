//! The Internet checksum (RFC 1071) and the UDP pseudo-header's share.

use std::net::IpAddr;

use super::fields::{mapped, IPPROTO_UDP};

/// The one's-complement sum of `data` as 16-bit big-endian words (an odd
/// last byte padded with zero), folded, starting from `initial`; not
/// complemented.
///
/// Eight bytes at a time in the machine's byte order, carries added back
/// (RFC 1071 §2: the sum does not depend on byte order, so one swap at
/// the end gives the big-endian sum); a frame's checksum is the per-byte
/// cost of building and checking one (issue 25: a 1472-byte datagram was
/// 736 word additions).
pub fn sum(initial: u32, data: &[u8]) -> u32 {
    let mut acc: u64 = 0;
    let mut carries: u64 = 0;
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        let x = u64::from_ne_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        let (s, c) = acc.overflowing_add(x);
        acc = s;
        carries += u64::from(c);
    }
    // The rest, fewer than 8 bytes, zero-padded at the end: in the
    // machine's order as the words before it.
    let rest = words.remainder();
    let mut tail = [0u8; 8];
    tail[..rest.len()].copy_from_slice(rest);
    let (s, c) = acc.overflowing_add(u64::from_ne_bytes(tail));
    acc = s;
    carries += u64::from(c);
    // Fold the 64-bit sum (carries re-added) to 16 bits, machine order.
    let folded = fold(u64::from(fold(acc)) + carries);
    let be = u16::from_be(folded as u16);
    fold(u64::from(initial) + u64::from(be))
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
