//! ICMP echo messages (RFC 792; ICMPv6, RFC 4443), sans-IO: build a request,
//! recognise a reply. Checked byte views, never a panic on short input.

/// Echo header: type, code, checksum, identifier, sequence.
pub const HEADER_LEN: usize = 8;

const ECHO_REQUEST_V4: u8 = 8;
const ECHO_REPLY_V4: u8 = 0;
const ECHO_REQUEST_V6: u8 = 128;
const ECHO_REPLY_V6: u8 = 129;

/// The Internet checksum (RFC 1071) of `data`.
pub fn checksum(data: &[u8]) -> u16 {
    let mut sum = 0u32;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u32::from(*last) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The payload byte at offset `i` of request `seq`: a pattern a reply must
/// echo unchanged.
pub fn pattern(seq: u16, i: usize) -> u8 {
    (i as u8).wrapping_add(seq as u8).wrapping_mul(31)
}

/// An echo request with `payload` bytes after the header. The checksum is
/// filled in for IPv4 (raw sockets need it; ICMP datagram sockets and
/// ICMPv6 have the kernel compute it, and it is recomputed there anyway).
pub fn request(v6: bool, id: u16, seq: u16, payload: usize) -> Vec<u8> {
    let mut m = vec![0u8; HEADER_LEN + payload];
    m[0] = if v6 { ECHO_REQUEST_V6 } else { ECHO_REQUEST_V4 };
    m[4..6].copy_from_slice(&id.to_be_bytes());
    m[6..8].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in m[HEADER_LEN..].iter_mut().enumerate() {
        *b = pattern(seq, i);
    }
    if !v6 {
        let c = checksum(&m);
        m[2..4].copy_from_slice(&c.to_be_bytes());
    }
    m
}

/// An echo reply as received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    pub id: u16,
    pub seq: u16,
    /// ICMP bytes (header + payload), as ping prints them.
    pub len: usize,
    /// The payload came back as sent.
    pub intact: bool,
}

/// Recognises an echo reply in `msg` (the ICMP message; an IPv4 raw socket's
/// IP header must be stripped first with [`strip_ipv4`]). Anything else
/// (requests, errors, other messages) is `None`.
pub fn parse_reply(v6: bool, msg: &[u8]) -> Option<Reply> {
    let want = if v6 { ECHO_REPLY_V6 } else { ECHO_REPLY_V4 };
    if msg.len() < HEADER_LEN || msg[0] != want || msg[1] != 0 {
        return None;
    }
    let seq = u16::from_be_bytes([msg[6], msg[7]]);
    let intact = msg[HEADER_LEN..]
        .iter()
        .enumerate()
        .all(|(i, &b)| b == pattern(seq, i));
    Some(Reply {
        id: u16::from_be_bytes([msg[4], msg[5]]),
        seq,
        len: msg.len(),
        intact,
    })
}

/// Splits an IPv4 packet into (TTL, payload), checking the header length.
pub fn strip_ipv4(packet: &[u8]) -> Option<(u8, &[u8])> {
    let first = *packet.first()?;
    if first >> 4 != 4 {
        return None;
    }
    let ihl = usize::from(first & 0x0f) * 4;
    if ihl < 20 || packet.len() < ihl {
        return None;
    }
    Some((packet[8], &packet[ihl..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_matches_rfc_1071_example() {
        // RFC 1071 section 3's example words sum to 0xddf2; checksum is !.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(checksum(&data), !0xddf2);
        // A message with its checksum filled in sums to zero.
        let m = request(false, 0x1234, 7, 57);
        assert_eq!(checksum(&m), 0);
    }

    #[test]
    fn a_reply_is_recognised_and_checked() {
        let mut m = request(false, 9, 300, 56);
        assert_eq!(parse_reply(false, &m), None, "a request is not a reply");
        m[0] = ECHO_REPLY_V4;
        let r = parse_reply(false, &m).expect("reply");
        assert_eq!((r.id, r.seq, r.len, r.intact), (9, 300, 64, true));
        m[20] ^= 1;
        assert!(!parse_reply(false, &m).expect("reply").intact);
        let mut v6 = request(true, 1, 2, 0);
        v6[0] = ECHO_REPLY_V6;
        assert_eq!(parse_reply(true, &v6).map(|r| r.len), Some(8));
        for n in 0..HEADER_LEN {
            assert_eq!(parse_reply(false, &m[..n]), None);
        }
    }

    #[test]
    fn ipv4_header_is_stripped_with_its_ttl() {
        let mut p = vec![0x45, 0, 0, 28, 0, 0, 0, 0, 61, 1, 0, 0];
        p.extend_from_slice(&[0; 8]);
        p.extend_from_slice(&[0, 0, 0, 0, 0, 1, 0, 2]);
        let (ttl, rest) = strip_ipv4(&p).expect("ipv4");
        assert_eq!((ttl, rest.len()), (61, 8));
        assert_eq!(strip_ipv4(&p[..10]), None);
        assert_eq!(strip_ipv4(&[0x60; 40]), None);
        assert_eq!(strip_ipv4(&[]), None);
    }
}
