//! Ethernet, IPv4, IPv6 and UDP on the wire, for engines that build and
//! parse whole frames in user space (AF_XDP, `linerate-xdp`).
//!
//! Each layer has a checked view over a byte buffer (`EthernetFrame`,
//! `Ipv4Packet`, `Ipv6Packet`, `UdpPacket`: `new_checked` checks the length
//! once, after which no accessor panics) and the frame as a whole has a
//! validated representation ([`UdpFlow`] to build one in place, [`parse`]
//! to read one back) with the IPv4 header and UDP checksums computed and
//! checked. Sans-IO like the rest of this crate, so the property tests and
//! `cargo fuzz` reach it without a socket.

mod checksum;
mod error;
mod ethernet;
mod fields;
mod ip;
mod udp;

pub use checksum::{internet_checksum, pseudo_header_sum};
pub use error::PacketError;
pub use ethernet::{EthernetFrame, ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETH_HEADER_LEN};
pub use fields::{mapped, unspecified_like, Mac, IPPROTO_UDP};
pub use ip::{Ipv4Packet, Ipv6Packet, IPV4_HEADER_LEN, IPV6_HEADER_LEN};
pub use udp::{UdpPacket, UDP_HEADER_LEN};

use std::net::{IpAddr, SocketAddr};

/// The UDP checksum of a parsed datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UdpChecksum {
    Valid,
    /// Zero on IPv4: the sender computed none.
    Absent,
    /// Left to a checksum offload that never ran: the field holds the
    /// pseudo-header's sum only (what Linux stores for `CHECKSUM_PARTIAL`,
    /// for the NIC to finish over the payload). Over veth nothing finishes
    /// it, so every datagram a kernel socket sends arrives so; not
    /// corruption.
    Unfinished,
    /// Does not match, and is not an unfinished offload's.
    Invalid,
}

/// One UDP datagram's frame, as [`UdpFlow::emit`] builds it: Ethernet, IP
/// (no options or extension headers), UDP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpFlow {
    pub src_mac: Mac,
    pub dst_mac: Mac,
    pub src: SocketAddr,
    pub dst: SocketAddr,
}

/// IPv4's time to live and IPv6's hop limit on built frames.
const HOP_LIMIT: u8 = 64;

impl UdpFlow {
    /// Bytes before the payload.
    pub fn header_len(&self) -> usize {
        ETH_HEADER_LEN
            + UDP_HEADER_LEN
            + match self.src {
                SocketAddr::V4(_) => IPV4_HEADER_LEN,
                SocketAddr::V6(_) => IPV6_HEADER_LEN,
            }
    }

    /// Builds the frame carrying `payload` at the start of `buf`; returns
    /// its length.
    pub fn emit(&self, buf: &mut [u8], payload: &[u8]) -> Result<usize, PacketError> {
        self.emit_with(buf, payload.len(), |p| p.copy_from_slice(payload))
    }

    /// Builds a frame whose `len` payload bytes `fill` writes in place
    /// (no copy through a staging buffer); returns its length.
    pub fn emit_with(
        &self,
        buf: &mut [u8],
        len: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> Result<usize, PacketError> {
        let header = self.header_len();
        let total = header + len;
        if buf.len() < total {
            return Err(PacketError::Truncated {
                have: buf.len(),
                need: total,
            });
        }
        let frame = &mut buf[..total];
        let (head, payload) = frame.split_at_mut(header);
        self.headers(head, len)?;
        fill(payload);
        let udp = &mut frame[header - UDP_HEADER_LEN..];
        let sum = udp::checksum(udp, self.src.ip(), self.dst.ip());
        udp[6..8].copy_from_slice(&sum.to_be_bytes());
        Ok(total)
    }

    /// Writes the headers of a frame carrying `len` payload bytes into
    /// `head` ([`UdpFlow::header_len`] bytes), the UDP checksum zero.
    fn headers(&self, head: &mut [u8], len: usize) -> Result<(), PacketError> {
        let udp_len = UDP_HEADER_LEN + len;
        let udp_len16 = u16::try_from(udp_len).map_err(|_| PacketError::TooLong(len))?;
        let (ethertype, ip_len) = match (self.src.ip(), self.dst.ip()) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let ip_total = u16::try_from(IPV4_HEADER_LEN + udp_len)
                    .map_err(|_| PacketError::TooLong(len))?;
                let ip = &mut head[ETH_HEADER_LEN..ETH_HEADER_LEN + IPV4_HEADER_LEN];
                ip::emit_ipv4(ip, s, d, ip_total, HOP_LIMIT);
                (ETHERTYPE_IPV4, IPV4_HEADER_LEN)
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                let ip = &mut head[ETH_HEADER_LEN..ETH_HEADER_LEN + IPV6_HEADER_LEN];
                ip::emit_ipv6(ip, s, d, udp_len16, HOP_LIMIT);
                (ETHERTYPE_IPV6, IPV6_HEADER_LEN)
            }
            _ => return Err(PacketError::Family),
        };
        ethernet::emit(head, self.dst_mac, self.src_mac, ethertype);
        let udp = &mut head[ETH_HEADER_LEN + ip_len..];
        udp::emit(udp, self.src.port(), self.dst.port(), udp_len16);
        Ok(())
    }
}

/// The longest [`UdpFlow::header_len`]: Ethernet, IPv6, UDP.
const MAX_HEADER_LEN: usize = ETH_HEADER_LEN + IPV6_HEADER_LEN + UDP_HEADER_LEN;

/// A flow's headers for one payload length, built once (issue 25): each
/// frame then copies them and sums only its payload for the UDP checksum
/// (the pseudo-header's and the UDP header's share is summed once). The
/// frames are the ones [`UdpFlow::emit`] builds, byte for byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameTemplate {
    flow: UdpFlow,
    payload_len: usize,
    head: [u8; MAX_HEADER_LEN],
    head_len: usize,
    /// Pseudo-header and UDP header (checksum zero), summed.
    base: u32,
}

impl FrameTemplate {
    /// The headers of `flow`'s frames carrying `payload_len` bytes.
    pub fn new(flow: &UdpFlow, payload_len: usize) -> Result<FrameTemplate, PacketError> {
        let head_len = flow.header_len();
        let mut head = [0u8; MAX_HEADER_LEN];
        flow.headers(&mut head[..head_len], payload_len)?;
        let udp_len = u32::try_from(UDP_HEADER_LEN + payload_len)
            .map_err(|_| PacketError::TooLong(payload_len))?;
        let base = checksum::sum(
            pseudo_header_sum(flow.src.ip(), flow.dst.ip(), udp_len),
            &head[head_len - UDP_HEADER_LEN..head_len],
        );
        Ok(FrameTemplate {
            flow: *flow,
            payload_len,
            head,
            head_len,
            base,
        })
    }

    /// Whether it builds `flow`'s frames of `payload_len` bytes.
    pub fn fits(&self, flow: &UdpFlow, payload_len: usize) -> bool {
        self.payload_len == payload_len && self.flow == *flow
    }

    /// Builds the frame carrying `payload` (of the template's length) at
    /// the start of `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8], payload: &[u8]) -> Result<usize, PacketError> {
        if payload.len() != self.payload_len {
            return Err(PacketError::TemplateLength {
                template: self.payload_len,
                payload: payload.len(),
            });
        }
        let total = self.head_len + payload.len();
        if buf.len() < total {
            return Err(PacketError::Truncated {
                have: buf.len(),
                need: total,
            });
        }
        buf[..self.head_len].copy_from_slice(&self.head[..self.head_len]);
        buf[self.head_len..total].copy_from_slice(payload);
        let sum = match !(checksum::sum(self.base, payload) as u16) {
            0 => 0xffff,
            c => c,
        };
        let at = self.head_len - 2;
        buf[at..at + 2].copy_from_slice(&sum.to_be_bytes());
        Ok(total)
    }
}

/// A parsed UDP datagram: the frame's addresses and its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Datagram<'a> {
    pub src_mac: Mac,
    pub dst_mac: Mac,
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub checksum: UdpChecksum,
    pub payload: &'a [u8],
}

/// Parses an Ethernet frame carrying one whole UDP datagram over IPv4 or
/// IPv6 (no IPv6 extension headers). The IPv4 header checksum must match;
/// the UDP checksum is reported, not enforced (see [`UdpChecksum`]).
pub fn parse(frame: &[u8]) -> Result<Datagram<'_>, PacketError> {
    let eth = EthernetFrame::new_checked(frame)?;
    let (src_mac, dst_mac) = (eth.src(), eth.dst());
    let (src, dst, udp) = match eth.ethertype() {
        ETHERTYPE_IPV4 => {
            let ip = Ipv4Packet::new_checked(eth.into_payload())?;
            if !ip.checksum_ok() {
                return Err(PacketError::Ipv4Checksum);
            }
            if ip.is_fragment() {
                return Err(PacketError::Fragment);
            }
            if ip.protocol() != IPPROTO_UDP {
                return Err(PacketError::NotUdp(ip.protocol()));
            }
            (
                IpAddr::V4(ip.src()),
                IpAddr::V4(ip.dst()),
                ip.into_payload(),
            )
        }
        ETHERTYPE_IPV6 => {
            let ip = Ipv6Packet::new_checked(eth.into_payload())?;
            if ip.next_header() != IPPROTO_UDP {
                return Err(PacketError::NotUdp(ip.next_header()));
            }
            (
                IpAddr::V6(ip.src()),
                IpAddr::V6(ip.dst()),
                ip.into_payload(),
            )
        }
        other => return Err(PacketError::EtherType(other)),
    };
    let udp = UdpPacket::new_checked(udp)?;
    let checksum = match (udp.checksum_field(), src) {
        (0, IpAddr::V4(_)) => UdpChecksum::Absent,
        _ if udp::verify(udp.as_bytes(), src, dst) => UdpChecksum::Valid,
        (field, _) if udp::unfinished(field, udp.len(), src, dst) => UdpChecksum::Unfinished,
        _ => UdpChecksum::Invalid,
    };
    Ok(Datagram {
        src_mac,
        dst_mac,
        src: SocketAddr::new(src, udp.src_port()),
        dst: SocketAddr::new(dst, udp.dst_port()),
        checksum,
        payload: udp.into_payload(),
    })
}

#[cfg(test)]
mod tests;
