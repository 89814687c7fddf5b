//! Why a frame could not be built or parsed.

/// Why a frame could not be built or parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PacketError {
    #[error("frame too short: {have} bytes, {need} needed")]
    Truncated { have: usize, need: usize },
    #[error("ethertype {0:#06x} is neither IPv4 nor IPv6")]
    EtherType(u16),
    #[error("IP version {0} where the ethertype says otherwise")]
    Version(u8),
    #[error("IPv4 header length {0} is below 20 bytes")]
    HeaderLength(usize),
    #[error("IP protocol {0} is not UDP")]
    NotUdp(u8),
    #[error("IPv4 fragment (only whole datagrams are parsed)")]
    Fragment,
    #[error("IPv4 header checksum does not match")]
    Ipv4Checksum,
    #[error("length field {field} does not fit the {have} bytes present")]
    Length { field: usize, have: usize },
    #[error("source and destination address families differ")]
    Family,
    #[error("payload of {0} bytes does not fit one IP datagram")]
    TooLong(usize),
    #[error("a {payload}-byte payload for a template of {template}-byte payloads")]
    TemplateLength { template: usize, payload: usize },
}
