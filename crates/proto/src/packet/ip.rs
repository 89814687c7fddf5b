//! IPv4 (RFC 791) and IPv6 (RFC 8200) headers.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::checksum::internet_checksum;
use super::error::PacketError;
use super::fields::IPPROTO_UDP;

pub const IPV4_HEADER_LEN: usize = 20;
pub const IPV6_HEADER_LEN: usize = 40;

/// A checked view of an IPv4 packet: the header length and total length
/// fields fit the buffer (bytes past the total length are link padding).
#[derive(Debug, Clone, Copy)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    pub fn new_checked(buffer: T) -> Result<Self, PacketError> {
        let b = buffer.as_ref();
        let have = b.len();
        if have < IPV4_HEADER_LEN {
            return Err(PacketError::Truncated {
                have,
                need: IPV4_HEADER_LEN,
            });
        }
        if b[0] >> 4 != 4 {
            return Err(PacketError::Version(b[0] >> 4));
        }
        let ihl = usize::from(b[0] & 0x0f) * 4;
        if ihl < IPV4_HEADER_LEN {
            return Err(PacketError::HeaderLength(ihl));
        }
        let total = usize::from(u16::from_be_bytes([b[2], b[3]]));
        if total < ihl || total > have {
            return Err(PacketError::Length { field: total, have });
        }
        Ok(Ipv4Packet { buffer })
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    pub fn header_len(&self) -> usize {
        usize::from(self.b()[0] & 0x0f) * 4
    }

    pub fn total_len(&self) -> usize {
        usize::from(u16::from_be_bytes([self.b()[2], self.b()[3]]))
    }

    /// More fragments follow, or this one has an offset.
    pub fn is_fragment(&self) -> bool {
        u16::from_be_bytes([self.b()[6], self.b()[7]]) & 0x3fff != 0
    }

    pub fn ttl(&self) -> u8 {
        self.b()[8]
    }

    pub fn protocol(&self) -> u8 {
        self.b()[9]
    }

    pub fn src(&self) -> Ipv4Addr {
        let b = self.b();
        Ipv4Addr::new(b[12], b[13], b[14], b[15])
    }

    pub fn dst(&self) -> Ipv4Addr {
        let b = self.b();
        Ipv4Addr::new(b[16], b[17], b[18], b[19])
    }

    /// The header (options included) sums to all ones.
    pub fn checksum_ok(&self) -> bool {
        internet_checksum(&self.b()[..self.header_len()]) == 0
    }

    /// The bytes after the header, up to the total length.
    pub fn payload(&self) -> &[u8] {
        &self.b()[self.header_len()..self.total_len()]
    }
}

impl<'a> Ipv4Packet<&'a [u8]> {
    /// The payload, borrowed from the buffer rather than from the view.
    pub fn into_payload(self) -> &'a [u8] {
        let range = self.header_len()..self.total_len();
        &self.buffer[range]
    }
}

/// Writes a 20-byte IPv4 header carrying UDP, checksum included.
pub(super) fn emit_ipv4(h: &mut [u8], src: Ipv4Addr, dst: Ipv4Addr, total: u16, ttl: u8) {
    h[0] = 0x45;
    h[1] = 0;
    h[2..4].copy_from_slice(&total.to_be_bytes());
    // Identification 0 with Don't Fragment (RFC 6864 §4.1: an atomic
    // datagram's ID has no meaning).
    h[4..6].copy_from_slice(&[0, 0]);
    h[6..8].copy_from_slice(&0x4000u16.to_be_bytes());
    h[8] = ttl;
    h[9] = IPPROTO_UDP;
    h[10..12].copy_from_slice(&[0, 0]);
    h[12..16].copy_from_slice(&src.octets());
    h[16..20].copy_from_slice(&dst.octets());
    let sum = internet_checksum(&h[..IPV4_HEADER_LEN]);
    h[10..12].copy_from_slice(&sum.to_be_bytes());
}

/// A checked view of an IPv6 packet: the payload length fits the buffer.
#[derive(Debug, Clone, Copy)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    pub fn new_checked(buffer: T) -> Result<Self, PacketError> {
        let b = buffer.as_ref();
        let have = b.len();
        if have < IPV6_HEADER_LEN {
            return Err(PacketError::Truncated {
                have,
                need: IPV6_HEADER_LEN,
            });
        }
        if b[0] >> 4 != 6 {
            return Err(PacketError::Version(b[0] >> 4));
        }
        let field = usize::from(u16::from_be_bytes([b[4], b[5]]));
        if IPV6_HEADER_LEN + field > have {
            return Err(PacketError::Length { field, have });
        }
        Ok(Ipv6Packet { buffer })
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    pub fn payload_len(&self) -> usize {
        usize::from(u16::from_be_bytes([self.b()[4], self.b()[5]]))
    }

    pub fn next_header(&self) -> u8 {
        self.b()[6]
    }

    pub fn hop_limit(&self) -> u8 {
        self.b()[7]
    }

    pub fn src(&self) -> Ipv6Addr {
        addr6(&self.b()[8..24])
    }

    pub fn dst(&self) -> Ipv6Addr {
        addr6(&self.b()[24..40])
    }

    pub fn payload(&self) -> &[u8] {
        &self.b()[IPV6_HEADER_LEN..IPV6_HEADER_LEN + self.payload_len()]
    }
}

fn addr6(b: &[u8]) -> Ipv6Addr {
    let mut a = [0; 16];
    a.copy_from_slice(b);
    Ipv6Addr::from(a)
}

impl<'a> Ipv6Packet<&'a [u8]> {
    /// The payload, borrowed from the buffer rather than from the view.
    pub fn into_payload(self) -> &'a [u8] {
        let range = IPV6_HEADER_LEN..IPV6_HEADER_LEN + self.payload_len();
        &self.buffer[range]
    }
}

/// Writes a 40-byte IPv6 header whose next header is UDP.
pub(super) fn emit_ipv6(h: &mut [u8], src: Ipv6Addr, dst: Ipv6Addr, payload: u16, hops: u8) {
    h[0..4].copy_from_slice(&[0x60, 0, 0, 0]);
    h[4..6].copy_from_slice(&payload.to_be_bytes());
    h[6] = IPPROTO_UDP;
    h[7] = hops;
    h[8..24].copy_from_slice(&src.octets());
    h[24..40].copy_from_slice(&dst.octets());
}
