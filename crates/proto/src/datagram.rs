//! The header every UDP test datagram carries, the optional payload pattern
//! (`--verify`), and the test-only fault schedule of the sender.
//!
//! ```text
//!  0      2    3      4          8                 16                24        28
//!  +------+----+------+----------+-----------------+-----------------+---------+---------+
//!  | "LU" | ver| flags| stream   | sequence (u64)  | send time ns    | length  | payload |
//!  +------+----+------+----------+-----------------+-----------------+---------+---------+
//! ```
//!
//! All fields big-endian. `length` is the whole datagram (header included),
//! so a receiver can tell a truncated or padded datagram from a good one
//! without knowing the test. Sequence numbers start at **0** on every stream
//! and go up by one per datagram; a send that fails does not use one up.
//! `send time` is nanoseconds on the sender's monotonic clock since Start.
//!
//! As in smoltcp, [`DatagramHeader`] is a checked view: after
//! [`DatagramHeader::new_checked`] no accessor can panic, and
//! [`DatagramHeader::parse`] returns a validated [`Header`] or the reason the
//! datagram is corrupt. The magic differs from the control frames' `"LR"`, so
//! a stray control greeting on a data socket is told apart from data.

use serde::{Deserialize, Serialize};

/// Magic of a data datagram.
pub const MAGIC: [u8; 2] = *b"LU";
/// Version of this layout.
pub const VERSION: u8 = 1;
/// Bytes of header; the smallest datagram a test may use.
pub const HEADER_LEN: usize = 28;
/// Largest UDP payload over IPv4 (65535 − 20 − 8).
pub const MAX_LEN: usize = 65507;

/// Flag: the payload carries the [`fill_pattern`] of the sequence number.
pub const FLAG_PATTERN: u8 = 0x01;
const KNOWN_FLAGS: u8 = FLAG_PATTERN;

/// Why a datagram is not a valid test datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DatagramError {
    #[error("shorter than the {HEADER_LEN}-byte header ({0} bytes)")]
    Short(usize),
    #[error("bad magic {0:02x?}")]
    BadMagic([u8; 2]),
    #[error("unsupported version {0}")]
    BadVersion(u8),
    #[error("unknown flags {0:#04x}")]
    BadFlags(u8),
    #[error("length field says {claimed} bytes, datagram has {actual}")]
    BadLength { claimed: u32, actual: usize },
    #[error("payload differs from the pattern at byte {0}")]
    BadPayload(usize),
}

/// A validated datagram header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub flags: u8,
    pub stream: u32,
    pub seq: u64,
    pub send_ns: u64,
    /// Whole datagram length, header included.
    pub len: u32,
}

impl Header {
    /// Writes the header into the first [`HEADER_LEN`] bytes of `buf`.
    /// Returns false (writing nothing) when `buf` is too short.
    pub fn emit(&self, buf: &mut [u8]) -> bool {
        let Some(b) = buf.get_mut(..HEADER_LEN) else {
            return false;
        };
        b[0..2].copy_from_slice(&MAGIC);
        b[2] = VERSION;
        b[3] = self.flags;
        b[4..8].copy_from_slice(&self.stream.to_be_bytes());
        b[8..16].copy_from_slice(&self.seq.to_be_bytes());
        b[16..24].copy_from_slice(&self.send_ns.to_be_bytes());
        b[24..28].copy_from_slice(&self.len.to_be_bytes());
        true
    }

    /// Rewrites only the per-datagram fields (sequence and send time) of a
    /// buffer whose header was emitted before: the sender's hot path.
    pub fn stamp(buf: &mut [u8], seq: u64, send_ns: u64) {
        if let Some(b) = buf.get_mut(8..24) {
            b[..8].copy_from_slice(&seq.to_be_bytes());
            b[8..].copy_from_slice(&send_ns.to_be_bytes());
        }
    }
}

/// Checked view over a received datagram.
#[derive(Debug, Clone, Copy)]
pub struct DatagramHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> DatagramHeader<T> {
    /// Wraps `buffer` if it holds at least a full header.
    pub fn new_checked(buffer: T) -> Result<Self, DatagramError> {
        let n = buffer.as_ref().len();
        if n < HEADER_LEN {
            return Err(DatagramError::Short(n));
        }
        Ok(Self { buffer })
    }

    fn field<const N: usize>(&self, at: usize) -> [u8; N] {
        let mut out = [0u8; N];
        // new_checked guarantees HEADER_LEN bytes and every field lies
        // inside them, so the slice is always there.
        if let Some(b) = self.buffer.as_ref().get(at..at + N) {
            out.copy_from_slice(b);
        }
        out
    }

    pub fn magic(&self) -> [u8; 2] {
        self.field(0)
    }
    pub fn version(&self) -> u8 {
        self.field::<1>(2)[0]
    }
    pub fn flags(&self) -> u8 {
        self.field::<1>(3)[0]
    }
    pub fn stream(&self) -> u32 {
        u32::from_be_bytes(self.field(4))
    }
    pub fn seq(&self) -> u64 {
        u64::from_be_bytes(self.field(8))
    }
    pub fn send_ns(&self) -> u64 {
        u64::from_be_bytes(self.field(16))
    }
    pub fn len_field(&self) -> u32 {
        u32::from_be_bytes(self.field(24))
    }

    /// Validates magic, version, flags and the length field against the
    /// datagram's real length.
    pub fn parse(&self) -> Result<Header, DatagramError> {
        if self.magic() != MAGIC {
            return Err(DatagramError::BadMagic(self.magic()));
        }
        if self.version() != VERSION {
            return Err(DatagramError::BadVersion(self.version()));
        }
        if self.flags() & !KNOWN_FLAGS != 0 {
            return Err(DatagramError::BadFlags(self.flags()));
        }
        let actual = self.buffer.as_ref().len();
        if self.len_field() as usize != actual {
            return Err(DatagramError::BadLength {
                claimed: self.len_field(),
                actual,
            });
        }
        Ok(Header {
            flags: self.flags(),
            stream: self.stream(),
            seq: self.seq(),
            send_ns: self.send_ns(),
            len: self.len_field(),
        })
    }
}

/// The 8-byte word at `index` of the pattern for sequence number `seq`: a
/// cheap mix (splitmix64) so that neighbouring datagrams and neighbouring
/// words differ in every byte position.
#[inline]
fn pattern_word(seq: u64, index: u64) -> u64 {
    let mut z = seq
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(index.wrapping_mul(0xBF58_476D_1CE4_E5B9))
        .wrapping_add(1);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Fills `payload` (the bytes after the header) with the pattern of `seq`.
pub fn fill_pattern(payload: &mut [u8], seq: u64) {
    for (i, chunk) in payload.chunks_mut(8).enumerate() {
        let w = pattern_word(seq, i as u64).to_le_bytes();
        chunk.copy_from_slice(&w[..chunk.len()]);
    }
}

/// Checks `payload` against the pattern of `seq`; on a mismatch returns the
/// offset of the first bad byte within the whole datagram.
pub fn check_pattern(payload: &[u8], seq: u64) -> Result<(), DatagramError> {
    for (i, chunk) in payload.chunks(8).enumerate() {
        let w = pattern_word(seq, i as u64).to_le_bytes();
        if chunk != &w[..chunk.len()] {
            let off = chunk.iter().zip(w).position(|(a, b)| *a != b).unwrap_or(0);
            return Err(DatagramError::BadPayload(HEADER_LEN + i * 8 + off));
        }
    }
    Ok(())
}

/// A fault the sender injects at one sequence number (tests only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// Use the sequence number up without sending it (one lost datagram).
    Skip,
    /// Send it twice (one duplicate).
    Dup,
    /// Send `seq + 1` before `seq` (one reordered datagram, distance 1).
    Swap,
    /// Before `seq`, send an extra 10-byte datagram (corrupt: short).
    Short,
    /// Before `seq`, send an extra datagram with a wrong magic (corrupt).
    Magic,
    /// Before `seq`, send an extra datagram with another stream's id (corrupt).
    Stream,
    /// Before `seq`, send an extra datagram one byte shorter than its
    /// length field says (corrupt).
    Length,
    /// Before `seq`, send an extra datagram whose payload breaks the
    /// pattern (corrupt when the test verifies payloads).
    Payload,
}

impl FaultKind {
    /// Faults that add one malformed datagram and use no sequence number.
    pub fn is_malformed(self) -> bool {
        matches!(
            self,
            FaultKind::Short
                | FaultKind::Magic
                | FaultKind::Stream
                | FaultKind::Length
                | FaultKind::Payload
        )
    }
}

/// Builds the malformed datagram of fault `kind` for a stream whose good
/// datagrams are `good` (header already emitted, `seq` stamped); returns
/// the length to send from `out`.
pub fn malformed(kind: FaultKind, good: &[u8], out: &mut [u8]) -> usize {
    let n = good.len().min(out.len());
    out[..n].copy_from_slice(&good[..n]);
    let flip = |out: &mut [u8], at: usize| {
        if let Some(b) = out.get_mut(at) {
            *b ^= 0xff;
        }
    };
    match kind {
        FaultKind::Short => return n.min(10),
        FaultKind::Magic => flip(out, 0),
        FaultKind::Stream => flip(out, 7),
        FaultKind::Length => return n.saturating_sub(1),
        FaultKind::Payload => flip(out, n.saturating_sub(1).max(HEADER_LEN)),
        FaultKind::Skip | FaultKind::Dup | FaultKind::Swap => {}
    }
    n
}

/// One scheduled fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Fault {
    pub seq: u64,
    pub kind: FaultKind,
}

/// Parses `skip:100,dup:200,swap:300`. Faults must be at increasing
/// sequence numbers, and a swap takes its own number and the next.
pub fn parse_faults(s: &str) -> Result<Vec<Fault>, String> {
    let mut out: Vec<Fault> = Vec::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        let (kind, seq) = part
            .split_once(':')
            .ok_or_else(|| format!("{part:?}: expected KIND:SEQ"))?;
        let kind = match kind {
            "skip" => FaultKind::Skip,
            "dup" => FaultKind::Dup,
            "swap" => FaultKind::Swap,
            "short" => FaultKind::Short,
            "magic" => FaultKind::Magic,
            "stream" => FaultKind::Stream,
            "length" => FaultKind::Length,
            "payload" => FaultKind::Payload,
            other => {
                return Err(format!(
                    "{other:?}: fault kind must be skip, dup, swap, short, magic, stream, length or payload"
                ))
            }
        };
        let seq: u64 = seq
            .parse()
            .map_err(|_| format!("{part:?}: {seq:?} is not a sequence number"))?;
        out.push(Fault { seq, kind });
    }
    check_faults(&out)?;
    Ok(out)
}

/// Faults must not overlap: increasing numbers, a swap covering two.
pub fn check_faults(faults: &[Fault]) -> Result<(), String> {
    let mut next_free = 0u64;
    for f in faults {
        if f.seq < next_free {
            return Err(format!(
                "fault at {} overlaps the previous one (faults must be at increasing sequence numbers, a swap covers two)",
                f.seq
            ));
        }
        next_free = f.seq.saturating_add(match f.kind {
            FaultKind::Swap => 2,
            _ => 1,
        });
    }
    Ok(())
}

/// The order in which a sender emits sequence numbers: `0, 1, 2, …` with
/// the scheduled faults applied, up to an optional count limit. The sender
/// asks [`Self::current`] for the number to send, and calls
/// [`Self::advance`] only once the send worked, so a failed send is retried
/// with the same number. [`Self::upcoming`] looks ahead without advancing,
/// for a sender that fills a batch and learns afterwards how much of it left.
#[derive(Debug, Clone)]
pub struct SeqSchedule {
    faults: Vec<Fault>,
    cursor: Cursor,
    /// Numbers to issue; `u64::MAX`: no limit.
    limit: u64,
}

/// Where a schedule stands: small and `Copy`, so a lookahead is a copy.
#[derive(Debug, Clone, Copy)]
struct Cursor {
    next_fault: usize,
    /// Next sequence number not yet issued.
    next: u64,
    /// Numbers queued by a fault, sent before `next` (at most two).
    queued: [u64; 2],
    queued_len: usize,
    queued_pos: usize,
}

impl Cursor {
    #[inline]
    fn current(&self) -> u64 {
        if self.queued_pos < self.queued_len {
            self.queued[self.queued_pos]
        } else {
            self.next
        }
    }

    #[inline]
    fn idle(&self) -> bool {
        self.queued_pos >= self.queued_len
    }

    #[inline]
    fn finished(&self, limit: u64) -> bool {
        self.next >= limit && self.idle()
    }

    #[inline]
    fn advance(&mut self, faults: &[Fault]) {
        if self.queued_pos < self.queued_len {
            self.queued_pos += 1;
            if self.queued_pos == self.queued_len {
                self.queued_len = 0;
                self.queued_pos = 0;
                self.refill(faults);
            }
        } else {
            self.next += 1;
            self.refill(faults);
        }
    }

    /// Applies the fault (if any) due at `next`.
    fn refill(&mut self, faults: &[Fault]) {
        while let Some(f) = faults.get(self.next_fault).copied() {
            if f.seq != self.next {
                return;
            }
            self.next_fault += 1;
            match f.kind {
                // The sender adds those itself; no sequence number involved.
                k if k.is_malformed() => {}
                FaultKind::Skip => self.next += 1,
                FaultKind::Dup => {
                    self.queued = [self.next, self.next];
                    self.queued_len = 2;
                    self.next += 1;
                    return;
                }
                FaultKind::Swap => {
                    self.queued = [self.next + 1, self.next];
                    self.queued_len = 2;
                    self.next += 2;
                    return;
                }
                _ => {}
            }
        }
    }
}

impl SeqSchedule {
    /// A schedule with `faults` (checked with [`check_faults`]; others are
    /// ignored from the first overlap on) and no count limit.
    pub fn new(mut faults: Vec<Fault>) -> Self {
        faults.sort();
        let mut next_free = 0u64;
        let mut keep = 0;
        for f in &faults {
            if f.seq < next_free {
                break;
            }
            next_free = f
                .seq
                .saturating_add(if f.kind == FaultKind::Swap { 2 } else { 1 });
            keep += 1;
        }
        faults.truncate(keep);
        let mut cursor = Cursor {
            next_fault: 0,
            next: 0,
            queued: [0; 2],
            queued_len: 0,
            queued_pos: 0,
        };
        cursor.refill(&faults);
        SeqSchedule {
            faults,
            cursor,
            limit: u64::MAX,
        }
    }

    /// The same schedule, finished once `limit` numbers are issued (and
    /// every queued one was sent).
    pub fn with_limit(mut self, limit: Option<u64>) -> Self {
        self.limit = limit.unwrap_or(u64::MAX);
        self
    }

    /// Sequence numbers issued so far: every number below this was sent or
    /// skipped on purpose. The loss baseline.
    pub fn issued(&self) -> u64 {
        self.cursor.next
    }

    /// The number to send next.
    #[inline]
    pub fn current(&self) -> u64 {
        self.cursor.current()
    }

    /// The current number was sent.
    #[inline]
    pub fn advance(&mut self) {
        self.cursor.advance(&self.faults);
    }

    /// Whether everything issued has been sent (no queued numbers).
    pub fn idle(&self) -> bool {
        self.cursor.idle()
    }

    /// Whether the count limit is reached: nothing more to send.
    #[inline]
    pub fn finished(&self) -> bool {
        self.cursor.finished(self.limit)
    }

    /// The numbers [`Self::current`] and [`Self::advance`] would hand out
    /// from here, in order, up to the limit; the schedule does not move.
    #[inline]
    pub fn upcoming(&self) -> Upcoming<'_> {
        Upcoming {
            faults: &self.faults,
            cursor: self.cursor,
            limit: self.limit,
        }
    }
}

/// A look ahead along a [`SeqSchedule`] (see [`SeqSchedule::upcoming`]).
#[derive(Debug, Clone)]
pub struct Upcoming<'a> {
    faults: &'a [Fault],
    cursor: Cursor,
    limit: u64,
}

impl Iterator for Upcoming<'_> {
    type Item = u64;

    #[inline]
    fn next(&mut self) -> Option<u64> {
        if self.cursor.finished(self.limit) {
            return None;
        }
        let seq = self.cursor.current();
        self.cursor.advance(self.faults);
        Some(seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> Header {
        Header {
            flags: FLAG_PATTERN,
            stream: 7,
            seq: (1 << 40) + 3,
            send_ns: 123_456_789,
            len: 100,
        }
    }

    #[test]
    fn header_round_trips() {
        let mut buf = vec![0u8; 100];
        assert!(sample().emit(&mut buf));
        let h = DatagramHeader::new_checked(&buf[..])
            .and_then(|v| v.parse())
            .expect("valid");
        assert_eq!(h, sample());
        Header::stamp(&mut buf, 9, 10);
        let h = DatagramHeader::new_checked(&buf[..])
            .and_then(|v| v.parse())
            .expect("valid");
        assert_eq!((h.seq, h.send_ns, h.stream), (9, 10, 7));
        assert!(!sample().emit(&mut [0u8; HEADER_LEN - 1]));
    }

    #[test]
    fn corrupt_headers_are_named() {
        let mut buf = vec![0u8; 100];
        sample().emit(&mut buf);
        let parse = |b: &[u8]| DatagramHeader::new_checked(b).and_then(|v| v.parse());
        assert_eq!(parse(&buf[..10]), Err(DatagramError::Short(10)));
        assert!(matches!(
            parse(&buf[..99]),
            Err(DatagramError::BadLength { claimed: 100, .. })
        ));
        let mut b = buf.clone();
        b[0] = b'X';
        assert!(matches!(parse(&b), Err(DatagramError::BadMagic(_))));
        let mut b = buf.clone();
        b[2] = 9;
        assert_eq!(parse(&b), Err(DatagramError::BadVersion(9)));
        let mut b = buf.clone();
        b[3] = 0x80;
        assert_eq!(parse(&b), Err(DatagramError::BadFlags(0x80)));
    }

    #[test]
    fn pattern_checks_every_byte() {
        let mut p = vec![0u8; 8972 - HEADER_LEN];
        fill_pattern(&mut p, 42);
        assert_eq!(check_pattern(&p, 42), Ok(()));
        assert!(check_pattern(&p, 43).is_err());
        for at in [0, 7, 8, 1000, p.len() - 1] {
            let mut q = p.clone();
            q[at] ^= 1;
            assert_eq!(
                check_pattern(&q, 42),
                Err(DatagramError::BadPayload(HEADER_LEN + at))
            );
        }
    }

    #[test]
    fn faults_parse_and_reject_overlaps() {
        assert_eq!(
            parse_faults("skip:1,dup:3,swap:5").expect("valid"),
            vec![
                Fault {
                    seq: 1,
                    kind: FaultKind::Skip
                },
                Fault {
                    seq: 3,
                    kind: FaultKind::Dup
                },
                Fault {
                    seq: 5,
                    kind: FaultKind::Swap
                },
            ]
        );
        assert!(parse_faults("swap:5,skip:6").is_err());
        assert!(parse_faults("dup:5,dup:5").is_err());
        assert!(parse_faults("drop:5").is_err());
        assert!(parse_faults("skip:x").is_err());
    }

    #[test]
    fn malformed_faults_fail_the_checks_they_name() {
        let mut good = vec![0u8; 100];
        sample().emit(&mut good);
        fill_pattern(&mut good[HEADER_LEN..], sample().seq);
        let mut out = vec![0u8; 100];
        let parse = |b: &[u8]| DatagramHeader::new_checked(b).and_then(|v| v.parse());
        let n = malformed(FaultKind::Short, &good, &mut out);
        assert_eq!(parse(&out[..n]), Err(DatagramError::Short(10)));
        let n = malformed(FaultKind::Magic, &good, &mut out);
        assert!(matches!(parse(&out[..n]), Err(DatagramError::BadMagic(_))));
        let n = malformed(FaultKind::Length, &good, &mut out);
        assert!(matches!(
            parse(&out[..n]),
            Err(DatagramError::BadLength { .. })
        ));
        let n = malformed(FaultKind::Stream, &good, &mut out);
        assert_ne!(parse(&out[..n]).expect("valid header").stream, 7);
        let n = malformed(FaultKind::Payload, &good, &mut out);
        let h = parse(&out[..n]).expect("valid header");
        assert!(check_pattern(&out[HEADER_LEN..n], h.seq).is_err());
    }

    #[test]
    fn schedule_applies_faults() {
        let mut s = SeqSchedule::new(
            parse_faults("skip:0,magic:1,dup:2,swap:4,short:6,skip:7").expect("ok"),
        );
        let mut sent = Vec::new();
        while s.issued() < 10 || !s.idle() {
            sent.push(s.current());
            s.advance();
        }
        assert_eq!(sent, vec![1, 2, 2, 3, 5, 4, 6, 8, 9]);
        assert_eq!(s.issued(), 10);
    }

    #[test]
    fn a_limited_schedule_finishes_after_its_queued_numbers() {
        // A dup on the last number: both copies go out before it finishes.
        let s = SeqSchedule::new(parse_faults("dup:3").expect("ok")).with_limit(Some(4));
        assert_eq!(s.upcoming().collect::<Vec<_>>(), vec![0, 1, 2, 3, 3]);
        let s = SeqSchedule::new(Vec::new()).with_limit(Some(0));
        assert!(s.finished());
        assert_eq!(s.upcoming().next(), None);
    }

    fn any_faults() -> impl Strategy<Value = Vec<Fault>> {
        let kind = prop_oneof![
            Just(FaultKind::Skip),
            Just(FaultKind::Dup),
            Just(FaultKind::Swap),
            Just(FaultKind::Magic),
            Just(FaultKind::Short),
        ];
        proptest::collection::vec((0u64..40, kind), 0..8).prop_map(|v| {
            let mut f: Vec<Fault> = v
                .into_iter()
                .map(|(seq, kind)| Fault { seq, kind })
                .collect();
            f.sort();
            f
        })
    }

    proptest! {
        /// Looking ahead shows exactly what advancing will hand out, from
        /// any point of any schedule, limit included.
        #[test]
        fn upcoming_is_what_advance_hands_out(
            faults in any_faults(),
            limit in proptest::option::of(0u64..50),
            start in 0usize..30,
        ) {
            let mut s = SeqSchedule::new(faults).with_limit(limit);
            for _ in 0..start {
                if s.finished() {
                    break;
                }
                s.advance();
            }
            let ahead: Vec<u64> = s.upcoming().take(200).collect();
            let mut walked = Vec::new();
            while !s.finished() && walked.len() < 200 {
                walked.push(s.current());
                s.advance();
            }
            prop_assert_eq!(ahead, walked);
        }

        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(v) = DatagramHeader::new_checked(&bytes[..]) {
                let _ = (v.magic(), v.version(), v.flags(), v.stream(), v.seq(), v.send_ns(), v.len_field());
                if let Ok(h) = v.parse() {
                    let mut again = bytes.clone();
                    prop_assert!(h.emit(&mut again));
                    prop_assert_eq!(again, bytes);
                }
            }
        }

        #[test]
        fn pattern_round_trips(seq in any::<u64>(), len in 0usize..200) {
            let mut p = vec![0u8; len];
            fill_pattern(&mut p, seq);
            prop_assert_eq!(check_pattern(&p, seq), Ok(()));
        }
    }
}
