//! iperf3's UDP data streams: the connect handshake's magic datagrams, the
//! datagram header, and the receiver's accounting exactly as iperf3 does it
//! (so the figures a linerate server sends an iperf3 client mean what the
//! client thinks they mean).
//!
//! Header (every datagram after the handshake, big-endian): send time as
//! u32 seconds and u32 microseconds, then the sequence number as u32 — or
//! u64 with `udp_counters_64bit`. Numbers start at 1; a failed send does
//! not use one up. Every datagram is exactly `len` bytes.
//!
//! iperf3's receiver rules (per stream), which linerate's own sequence
//! tracker ([`linerate_proto::seq`]) deliberately does not follow:
//! - forward (`seq > max`): `lost += seq − max − 1`, `max = seq`;
//! - otherwise (late or duplicate): `out_of_order += 1`, and `lost −= 1` if
//!   positive — so a duplicate cancels a loss;
//! - `packets` reported = the highest number seen, not the count received;
//! - jitter: RFC 1889's `J += (|D| − J)/16` over transit times
//!   `|arrival − send|` in seconds, restarted at the first datagram counted
//!   (at the start and again after the omit period).

use linerate_proto::udp_sender::DatagramFormat;

/// A client's connect datagram (iperf3 ≥3.12: ASCII "9876").
pub const CONNECT: [u8; 4] = *b"9876";
/// The server's reply (ASCII "6789").
pub const REPLY: [u8; 4] = *b"6789";
/// The reply of iperf3 ≤3.11 (987654321 little-endian), still accepted.
pub const LEGACY_REPLY: [u8; 4] = [0xB1, 0x68, 0xDE, 0x3A];
/// Smallest datagram iperf3 allows (the 64-bit header fits).
pub const MIN_LEN: usize = 16;

/// iperf3's datagrams as linerate's UDP sender core writes them: the
/// header ([`write_header`]) with the send time as seconds and
/// microseconds of the sender's monotonic clock (`epoch_ns`, that clock at
/// Start, plus the core's `now`), the number from 1, 32 or 64 bits wide;
/// a fixed pseudo-random payload (iperf3 sends random bytes, and its
/// receivers never look at them). No verify, no faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Iperf3Datagrams {
    pub counters_64bit: bool,
    pub epoch_ns: u64,
}

impl DatagramFormat for Iperf3Datagrams {
    const CHECKS: bool = false;
    const PEER_CLOSES_AT_END: bool = true;

    fn min_len(self) -> usize {
        header_len(self.counters_64bit)
    }

    fn prepare(self, buf: &mut [u8], _len: usize, _stream: u32, _verify: bool) {
        fill_random(buf);
    }

    #[inline]
    fn stamp(self, d: &mut [u8], seq: u64, now: u64, _verify: bool) {
        // iperf3 numbers from 1; the core's schedule from 0.
        let h = Header::at_ns(self.epoch_ns.saturating_add(now), seq + 1);
        write_header(d, &h, self.counters_64bit);
    }
}

/// Fills an iperf3 payload with a fixed pseudo-random pattern (xorshift64).
fn fill_random(buf: &mut [u8]) {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for b in buf.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
}

/// True for a reply a client should accept.
pub fn is_reply(d: &[u8]) -> bool {
    d == REPLY || d == LEGACY_REPLY
}

/// Header length for the counter width.
pub fn header_len(counters_64bit: bool) -> usize {
    if counters_64bit {
        16
    } else {
        12
    }
}

/// A datagram header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub sec: u32,
    pub usec: u32,
    pub seq: u64,
}

impl Header {
    /// Send time in seconds.
    pub fn sent_s(&self) -> f64 {
        f64::from(self.sec) + f64::from(self.usec) / 1e6
    }

    /// The header for a send at `ns` nanoseconds of the sender's clock.
    pub fn at_ns(ns: u64, seq: u64) -> Header {
        Header {
            // Truncated to 32 bits as iperf3 does; only differences matter.
            sec: (ns / 1_000_000_000) as u32,
            usec: ((ns % 1_000_000_000) / 1000) as u32,
            seq,
        }
    }
}

/// Writes `h` at the start of `buf` (false if `buf` is too short). With
/// 32-bit counters the number is truncated, as iperf3 wraps it.
pub fn write_header(buf: &mut [u8], h: &Header, counters_64bit: bool) -> bool {
    if buf.len() < header_len(counters_64bit) {
        return false;
    }
    buf[0..4].copy_from_slice(&h.sec.to_be_bytes());
    buf[4..8].copy_from_slice(&h.usec.to_be_bytes());
    if counters_64bit {
        buf[8..16].copy_from_slice(&h.seq.to_be_bytes());
    } else {
        buf[8..12].copy_from_slice(&(h.seq as u32).to_be_bytes());
    }
    true
}

/// Reads the header of a datagram (`None` if it is too short to have one).
pub fn read_header(d: &[u8], counters_64bit: bool) -> Option<Header> {
    let be32 = |r: std::ops::Range<usize>| -> Option<u32> {
        Some(u32::from_be_bytes(d.get(r)?.try_into().ok()?))
    };
    let seq = if counters_64bit {
        u64::from_be_bytes(d.get(8..16)?.try_into().ok()?)
    } else {
        u64::from(be32(8..12)?)
    };
    Some(Header {
        sec: be32(0..4)?,
        usec: be32(4..8)?,
        seq,
    })
}

pub use linerate_proto::measure::Iperf3Counts;

/// One UDP receiving stream, accounted as iperf3 does.
#[derive(Debug, Clone, Default)]
pub struct Iperf3Receiver {
    counters_64bit: bool,
    c: Iperf3Counts,
    prev_transit: f64,
}

impl Iperf3Receiver {
    pub fn new(counters_64bit: bool) -> Self {
        Iperf3Receiver {
            counters_64bit,
            ..Self::default()
        }
    }

    /// Accounts one datagram that arrived at `arrival_s` (seconds, any
    /// clock; only differences matter unless sender and receiver share it).
    pub fn datagram(&mut self, d: &[u8], arrival_s: f64) {
        let first = self.c.bytes == 0 && self.c.datagrams == 0;
        self.c.bytes += d.len() as u64;
        self.c.datagrams += 1;
        let Some(h) = read_header(d, self.counters_64bit) else {
            return;
        };
        if h.seq > self.c.max_seq {
            // u64 arithmetic: a gap never exceeds the number itself.
            let gap = h.seq - self.c.max_seq - 1;
            self.c.lost = self.c.lost.saturating_add(gap.min(i64::MAX as u64) as i64);
            self.c.max_seq = h.seq;
        } else {
            self.c.out_of_order += 1;
            if self.c.lost > 0 {
                self.c.lost -= 1;
            }
        }
        let transit = (arrival_s - h.sent_s()).abs();
        if first {
            self.prev_transit = transit;
        }
        let d = (transit - self.prev_transit).abs();
        self.prev_transit = transit;
        self.c.jitter += (d - self.c.jitter) / 16.0;
    }

    /// The omit period ended: remember what it counted, restart bytes and
    /// jitter (sequence numbers carry on).
    pub fn omit_ended(&mut self) {
        self.c.omitted_packets = self.c.max_seq;
        self.c.omitted_errors = self.c.lost;
        self.c.omitted_out_of_order = self.c.out_of_order;
        self.c.jitter = 0.0;
        self.c.bytes = 0;
        self.c.datagrams = 0;
    }

    pub fn counts(&self) -> Iperf3Counts {
        self.c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// iperf3's format through linerate's sender core: numbers from 1 in
    /// iperf3's header, stamped with the sender's clock (epoch + now), a
    /// random payload, and no verify or faults even if asked for.
    #[test]
    fn iperf3_datagrams_number_from_one_and_carry_the_senders_clock() {
        use linerate_proto::datagram::parse_faults;
        use linerate_proto::udp_sender::{SenderConfig, Transmit, UdpSender};
        for counters_64bit in [false, true] {
            let epoch_ns = 5_000_000_000_123;
            let mut s = UdpSender::new(SenderConfig {
                stream: 7,
                len: 100,
                millipps: Some(1_000_000), // 1000/s
                burst: 1,
                verify: true,
                faults: parse_faults("skip:1,magic:2").expect("faults"),
                limit: Some(3),
                max_batch: 4,
                format: Iperf3Datagrams {
                    counters_64bit,
                    epoch_ns,
                },
                omit_ns: 0,
            });
            let mut seen = Vec::new();
            let mut now = 0;
            for _ in 0..100 {
                match s.poll_transmit(now) {
                    Transmit::Done => break,
                    Transmit::Wait(t) => now = t,
                    Transmit::Junk(_) => panic!("no faults in iperf3's format"),
                    Transmit::Send { bytes, segment } => {
                        assert_eq!(segment, 100);
                        let h = read_header(bytes, counters_64bit).expect("header");
                        assert_eq!(h, Header::at_ns(epoch_ns + now, h.seq));
                        assert_ne!(&bytes[20..40], &[0u8; 20][..], "random payload");
                        seen.push(h.seq);
                        s.on_sent(1);
                    }
                }
            }
            assert_eq!(seen, vec![1, 2, 3], "counters_64bit {counters_64bit}");
            assert_eq!(s.finish(now).issued, 3);
        }
    }

    fn dgram(seq: u64, sent_s: f64, len: usize, wide: bool) -> Vec<u8> {
        let mut d = vec![0u8; len];
        let ns = (sent_s * 1e9).round() as u64;
        assert!(write_header(&mut d, &Header::at_ns(ns, seq), wide));
        d
    }

    #[test]
    fn header_layout_matches_the_capture() {
        // Observed: 00 00 01 B4 | 00 03 C1 F1 | 00 00 00 01 (sec 436, usec 246257, seq 1).
        let d = [0, 0, 1, 0xB4, 0, 3, 0xC1, 0xF1, 0, 0, 0, 1, 0x32, 0x33];
        let h = read_header(&d, false).expect("header");
        assert_eq!((h.sec, h.usec, h.seq), (436, 246_257, 1));
        let mut w = [0u8; 16];
        assert!(write_header(
            &mut w,
            &Header {
                sec: 0x1C8,
                usec: 0x7C170,
                seq: 1
            },
            true
        ));
        assert_eq!(w, [0, 0, 1, 0xC8, 0, 7, 0xC1, 0x70, 0, 0, 0, 0, 0, 0, 0, 1]);
        assert!(!write_header(&mut [0u8; 15], &h, true));
        assert!(read_header(&d[..11], false).is_none());
        assert!(read_header(&w[..15], true).is_none());
        assert!(is_reply(b"6789") && is_reply(&LEGACY_REPLY) && !is_reply(b"9876"));
    }

    #[test]
    fn thirty_two_bit_counters_truncate_and_sixty_four_do_not() {
        let mut d = [0u8; 16];
        let big = (1u64 << 32) + 5;
        write_header(
            &mut d,
            &Header {
                sec: 0,
                usec: 0,
                seq: big,
            },
            false,
        );
        assert_eq!(read_header(&d, false).expect("h").seq, 5);
        write_header(
            &mut d,
            &Header {
                sec: 0,
                usec: 0,
                seq: big,
            },
            true,
        );
        assert_eq!(read_header(&d, true).expect("h").seq, big);
    }

    #[test]
    fn in_order_stream_has_no_loss_and_packets_is_the_highest_number() {
        let mut r = Iperf3Receiver::new(false);
        for s in 1..=100u64 {
            let t = s as f64 * 0.001;
            r.datagram(&dgram(s, t, 100, false), t + 0.0002);
        }
        let c = r.counts();
        assert_eq!(
            (c.max_seq, c.lost, c.out_of_order, c.bytes),
            (100, 0, 0, 10_000)
        );
        assert!(
            c.jitter.abs() < 1e-9,
            "constant transit: jitter {}",
            c.jitter
        );
    }

    #[test]
    fn gap_then_late_packet_cancels_one_loss_and_counts_out_of_order() {
        let mut r = Iperf3Receiver::new(false);
        for s in [1u64, 2, 5, 6] {
            r.datagram(&dgram(s, 0.0, 64, false), 0.0);
        }
        assert_eq!(r.counts().lost, 2);
        r.datagram(&dgram(3, 0.0, 64, false), 0.0);
        let c = r.counts();
        assert_eq!((c.lost, c.out_of_order, c.max_seq), (1, 1, 6));
        // A duplicate is mis-counted as a late packet, as in iperf3.
        r.datagram(&dgram(6, 0.0, 64, false), 0.0);
        let c = r.counts();
        assert_eq!((c.lost, c.out_of_order), (0, 2));
        // And never drives the loss below zero.
        r.datagram(&dgram(6, 0.0, 64, false), 0.0);
        assert_eq!(r.counts().lost, 0);
        assert_eq!(r.counts().out_of_order, 3);
    }

    #[test]
    fn sixty_four_bit_numbers_beyond_u32() {
        let mut r = Iperf3Receiver::new(true);
        let base = 1u64 << 33;
        r.datagram(&dgram(base, 0.0, 64, true), 0.0);
        r.datagram(&dgram(base + 3, 0.0, 64, true), 0.0);
        let c = r.counts();
        assert_eq!(c.max_seq, base + 3);
        assert_eq!(c.lost, (base - 1 + 2) as i64);
    }

    #[test]
    fn jitter_follows_the_rfc1889_recurrence() {
        // Transit alternates 1 ms, 3 ms: D = 2 ms after the first packet.
        let mut r = Iperf3Receiver::new(false);
        let mut expect = 0.0f64;
        for s in 1..=20u64 {
            let sent = s as f64 * 0.01;
            let transit = if s % 2 == 1 { 0.001 } else { 0.003 };
            r.datagram(&dgram(s, sent, 64, false), sent + transit);
            if s > 1 {
                expect += (0.002 - expect) / 16.0;
            }
        }
        let j = r.counts().jitter;
        assert!((j - expect).abs() < 1e-6, "jitter {j} expected {expect}");
    }

    #[test]
    fn omit_end_snapshots_and_restarts_bytes_and_jitter() {
        let mut r = Iperf3Receiver::new(false);
        r.datagram(&dgram(1, 0.0, 100, false), 0.001);
        r.datagram(&dgram(3, 0.01, 100, false), 0.015);
        r.omit_ended();
        let c = r.counts();
        assert_eq!(
            (c.omitted_packets, c.omitted_errors, c.bytes, c.jitter),
            (3, 1, 0, 0.0)
        );
        // The first datagram after the omit period restarts the transit.
        r.datagram(&dgram(4, 1.0, 100, false), 1.5);
        let c = r.counts();
        assert_eq!((c.bytes, c.max_seq, c.jitter), (100, 4, 0.0));
    }

    #[test]
    fn short_datagrams_count_bytes_only() {
        let mut r = Iperf3Receiver::new(true);
        r.datagram(&[1, 2, 3], 0.0);
        let c = r.counts();
        assert_eq!((c.bytes, c.max_seq, c.lost), (3, 0, 0));
    }

    proptest! {
        #[test]
        fn receiver_never_panics_and_loss_is_never_negative(
            seqs in proptest::collection::vec(any::<u64>(), 0..200),
            wide in any::<bool>(),
        ) {
            let mut r = Iperf3Receiver::new(wide);
            for (i, s) in seqs.iter().enumerate() {
                let mut d = vec![0u8; 16];
                write_header(&mut d, &Header { sec: u32::MAX, usec: 999_999, seq: *s }, wide);
                r.datagram(&d, i as f64);
                prop_assert!(r.counts().lost >= 0);
                prop_assert!(r.counts().jitter.is_finite());
            }
        }

        #[test]
        fn header_decoder_never_panics(d in proptest::collection::vec(any::<u8>(), 0..40), wide in any::<bool>()) {
            let _ = read_header(&d, wide);
        }
    }
}
