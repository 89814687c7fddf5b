//! Round trips (build → parse gives back what was built), known answers,
//! and never-panic over arbitrary bytes.

use super::*;
use proptest::prelude::*;

fn flow4() -> UdpFlow {
    UdpFlow {
        src_mac: [2, 0, 0, 0, 0, 1],
        dst_mac: [2, 0, 0, 0, 0, 2],
        src: "198.18.0.1:40000"
            .parse()
            .unwrap_or_else(|_| unreachable!()),
        dst: "198.18.0.2:5201".parse().unwrap_or_else(|_| unreachable!()),
    }
}

#[test]
fn ipv4_header_checksum_known_answer() {
    // 198.18.0.1 → 198.18.0.2, UDP, 28 bytes, DF, TTL 64: the sum worked
    // by hand over the ten 16-bit words.
    let mut h = [0u8; 20];
    ip::emit_ipv4(
        &mut h,
        "198.18.0.1".parse().unwrap_or_else(|_| unreachable!()),
        "198.18.0.2".parse().unwrap_or_else(|_| unreachable!()),
        28,
        64,
    );
    assert_eq!(internet_checksum(&h), 0);
    assert_eq!(&h[10..12], &[0xae, 0xa9]);
}

#[test]
fn built_frame_parses_back() {
    let mut buf = [0u8; 128];
    let n = flow4().emit(&mut buf, b"hello").expect("fits");
    assert_eq!(n, 14 + 20 + 8 + 5);
    let d = parse(&buf[..n]).expect("parses");
    assert_eq!(d.payload, b"hello");
    assert_eq!(d.src, flow4().src);
    assert_eq!(d.checksum, UdpChecksum::Valid);
}

#[test]
fn short_buffer_and_mixed_families_are_errors() {
    let mut buf = [0u8; 40];
    assert!(matches!(
        flow4().emit(&mut buf, b"hello"),
        Err(PacketError::Truncated { .. })
    ));
    let mut mixed = flow4();
    mixed.dst = "[2001:db8::1]:9".parse().unwrap_or_else(|_| unreachable!());
    assert_eq!(mixed.emit(&mut [0u8; 128], b""), Err(PacketError::Family));
}

#[test]
fn corrupted_payload_fails_the_udp_checksum() {
    let mut buf = [0u8; 128];
    let n = flow4().emit(&mut buf, b"hello").expect("fits");
    buf[n - 1] ^= 1;
    assert_eq!(
        parse(&buf[..n]).map(|d| d.checksum),
        Ok(UdpChecksum::Invalid)
    );
    buf[15] ^= 1; // IPv4 TOS byte: the header checksum catches it
    assert_eq!(parse(&buf[..n]), Err(PacketError::Ipv4Checksum));
}

/// What a kernel socket sends over veth with checksum offload: the field
/// holds the pseudo-header's folded sum only (198.18.0.1 → 198.18.0.2,
/// UDP, 13 bytes: c612 + 0001 + c612 + 0002 + 0011 + 000d = 1_8c45,
/// folded 8c46, worked by hand). It is told from a checksum that is wrong.
#[test]
fn an_offloads_unfinished_checksum_is_told_from_a_bad_one() {
    let mut buf = [0u8; 128];
    let n = flow4().emit(&mut buf, b"hello").expect("fits");
    let field = 14 + 20 + 6;
    buf[field..field + 2].copy_from_slice(&[0x8c, 0x46]);
    assert_eq!(
        parse(&buf[..n]).map(|d| d.checksum),
        Ok(UdpChecksum::Unfinished)
    );
    buf[field..field + 2].copy_from_slice(&[0x8c, 0x47]);
    assert_eq!(
        parse(&buf[..n]).map(|d| d.checksum),
        Ok(UdpChecksum::Invalid)
    );
}

fn arb_addr() -> impl Strategy<Value = (SocketAddr, SocketAddr)> {
    prop_oneof![
        (
            any::<[u8; 4]>(),
            any::<u16>(),
            any::<[u8; 4]>(),
            any::<u16>()
        )
            .prop_map(|(s, sp, d, dp)| (
                SocketAddr::new(IpAddr::from(s), sp),
                SocketAddr::new(IpAddr::from(d), dp)
            )),
        (
            any::<[u8; 16]>(),
            any::<u16>(),
            any::<[u8; 16]>(),
            any::<u16>()
        )
            .prop_map(|(s, sp, d, dp)| (
                SocketAddr::new(IpAddr::from(s), sp),
                SocketAddr::new(IpAddr::from(d), dp)
            )),
    ]
}

proptest! {
    #[test]
    fn round_trip(
        (src, dst) in arb_addr(),
        src_mac in any::<[u8; 6]>(),
        dst_mac in any::<[u8; 6]>(),
        payload in proptest::collection::vec(any::<u8>(), 0..1600),
        pad in 0usize..64,
    ) {
        let flow = UdpFlow { src_mac, dst_mac, src, dst };
        let mut buf = vec![0u8; flow.header_len() + payload.len() + pad];
        let n = flow.emit(&mut buf, &payload).expect("sized to fit");
        prop_assert_eq!(n, flow.header_len() + payload.len());
        // Link padding after the datagram does not change what parses.
        let d = parse(&buf).expect("what emit built parses");
        prop_assert_eq!(d.src, src);
        prop_assert_eq!(d.dst, dst);
        prop_assert_eq!(d.src_mac, src_mac);
        prop_assert_eq!(d.dst_mac, dst_mac);
        prop_assert_eq!(d.payload, &payload[..]);
        prop_assert_eq!(d.checksum, UdpChecksum::Valid);
    }

    #[test]
    fn any_bytes_parse_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
        let _ = parse(&bytes);
        let _ = Ipv4Packet::new_checked(&bytes[..]).map(|p| (p.payload().len(), p.checksum_ok()));
        let _ = Ipv6Packet::new_checked(&bytes[..]).map(|p| p.payload().len());
        let _ = UdpPacket::new_checked(&bytes[..]).map(|p| p.payload().len());
    }

    #[test]
    fn any_flipped_byte_is_caught_or_parses_consistently(
        payload in proptest::collection::vec(any::<u8>(), 0..64),
        at in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        let flow = flow4();
        let mut buf = vec![0u8; flow.header_len() + payload.len()];
        let n = flow.emit(&mut buf, &payload).expect("sized");
        let i = at.index(n);
        buf[i] ^= 1 << bit;
        // A flipped bit past the MACs never yields a "valid" datagram
        // that differs from the one built.
        if let Ok(d) = parse(&buf) {
            if i >= 12 && d.checksum == UdpChecksum::Valid {
                prop_assert_eq!(d.payload, &payload[..]);
            }
        }
    }
}

/// The one's-complement sum as RFC 1071 writes it: big-endian 16-bit
/// words, an odd last byte padded with zero.
fn sum_by_words(initial: u32, data: &[u8]) -> u32 {
    let mut acc = u64::from(initial);
    for w in data.chunks(2) {
        acc += u64::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
    }
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u32
}

proptest! {
    /// Issue 25: the checksum summed eight bytes at a time in the
    /// machine's order is the word-by-word sum, for every length and start
    /// (odd lengths, all-ones words that carry on every add).
    #[test]
    fn issue_25_the_wide_checksum_sum_is_the_word_by_word_one(
        data in prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..200),
            proptest::collection::vec(Just(0xffu8), 0..200),
        ],
        initial in 0u32..=0xffff,
    ) {
        prop_assert_eq!(checksum::sum(initial, &data), sum_by_words(initial, &data));
    }

    /// Issue 25: a template's frames are `UdpFlow::emit`'s, byte for byte,
    /// for both families and any payload.
    #[test]
    fn issue_25_a_templates_frames_are_the_flows_own(
        (src, dst) in arb_addr(),
        payload in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let flow = UdpFlow { src_mac: [2, 0, 0, 0, 0, 1], dst_mac: [2, 0, 0, 0, 0, 2], src, dst };
        let t = FrameTemplate::new(&flow, payload.len()).expect("template");
        prop_assert!(t.fits(&flow, payload.len()));
        prop_assert!(!t.fits(&flow, payload.len() + 1));
        let (mut a, mut b) = ([0u8; 400], [0u8; 400]);
        let n = flow.emit(&mut a, &payload).expect("fits");
        prop_assert_eq!(t.emit(&mut b, &payload), Ok(n));
        prop_assert_eq!(&a[..n], &b[..n]);
        prop_assert_eq!(parse(&b[..n]).map(|d| d.checksum), Ok(UdpChecksum::Valid));
    }
}

#[test]
fn issue_25_a_template_refuses_another_payload_length() {
    let t = FrameTemplate::new(&flow4(), 5).expect("template");
    assert_eq!(
        t.emit(&mut [0u8; 128], b"four"),
        Err(PacketError::TemplateLength {
            template: 5,
            payload: 4
        })
    );
    assert!(matches!(
        t.emit(&mut [0u8; 40], b"hello"),
        Err(PacketError::Truncated { .. })
    ));
}
