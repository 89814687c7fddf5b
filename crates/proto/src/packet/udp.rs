//! The UDP header (RFC 768) and its checksum.

use std::net::IpAddr;

use super::checksum::{pseudo_header_sum, sum};
use super::error::PacketError;

pub const UDP_HEADER_LEN: usize = 8;

/// A checked view of a UDP datagram: its length field is at least the
/// header and fits the buffer.
#[derive(Debug, Clone, Copy)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    pub fn new_checked(buffer: T) -> Result<Self, PacketError> {
        let b = buffer.as_ref();
        let have = b.len();
        if have < UDP_HEADER_LEN {
            return Err(PacketError::Truncated {
                have,
                need: UDP_HEADER_LEN,
            });
        }
        let field = usize::from(u16::from_be_bytes([b[4], b[5]]));
        if !(UDP_HEADER_LEN..=have).contains(&field) {
            return Err(PacketError::Length { field, have });
        }
        Ok(UdpPacket { buffer })
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    pub fn src_port(&self) -> u16 {
        u16::from_be_bytes([self.b()[0], self.b()[1]])
    }

    pub fn dst_port(&self) -> u16 {
        u16::from_be_bytes([self.b()[2], self.b()[3]])
    }

    /// The length field: header and payload.
    pub fn len(&self) -> usize {
        usize::from(u16::from_be_bytes([self.b()[4], self.b()[5]]))
    }

    /// Never true: a checked view holds at least the header.
    pub fn is_empty(&self) -> bool {
        false
    }

    pub fn checksum_field(&self) -> u16 {
        u16::from_be_bytes([self.b()[6], self.b()[7]])
    }

    /// Header and payload, as the length field bounds them.
    pub fn as_bytes(&self) -> &[u8] {
        &self.b()[..self.len()]
    }

    pub fn payload(&self) -> &[u8] {
        &self.b()[UDP_HEADER_LEN..self.len()]
    }
}

impl<'a> UdpPacket<&'a [u8]> {
    /// The payload, borrowed from the buffer rather than from the view.
    pub fn into_payload(self) -> &'a [u8] {
        let range = UDP_HEADER_LEN..self.len();
        &self.buffer[range]
    }
}

/// Writes the header with a zero checksum (filled in afterwards).
pub(super) fn emit(h: &mut [u8], src: u16, dst: u16, len: u16) {
    h[0..2].copy_from_slice(&src.to_be_bytes());
    h[2..4].copy_from_slice(&dst.to_be_bytes());
    h[4..6].copy_from_slice(&len.to_be_bytes());
    h[6..8].copy_from_slice(&[0, 0]);
}

/// The checksum to store for `udp` (header with a zero checksum field,
/// and payload): zero is sent as all ones (RFC 768).
pub(super) fn checksum(udp: &[u8], src: IpAddr, dst: IpAddr) -> u16 {
    let len = u32::try_from(udp.len()).unwrap_or(u32::MAX);
    match !(sum(pseudo_header_sum(src, dst, len), udp) as u16) {
        0 => 0xffff,
        c => c,
    }
}

/// Whether checksum `field` of a `len`-byte datagram is what a sender
/// that left the sum to an offload stores: the pseudo-header's folded sum,
/// not complemented (Linux's `udp4_hwcsum`/`udp6_hwcsum_outgoing`:
/// `~csum_*_magic(…, 0)`, the NIC adding the header and payload).
pub(super) fn unfinished(field: u16, len: usize, src: IpAddr, dst: IpAddr) -> bool {
    let len = u32::try_from(len).unwrap_or(u32::MAX);
    field == pseudo_header_sum(src, dst, len) as u16
}

/// `udp` (checksum field included) sums to all ones.
pub(super) fn verify(udp: &[u8], src: IpAddr, dst: IpAddr) -> bool {
    let len = u32::try_from(udp.len()).unwrap_or(u32::MAX);
    sum(pseudo_header_sum(src, dst, len), udp) == 0xffff
}
