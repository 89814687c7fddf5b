//! The header inside request/response messages.
//!
//! A message is exactly the size the test asked for; the header, when it
//! fits, is its first bytes and the rest is filler. Big-endian:
//!
//! ```text
//! request (24 bytes)                      response (32 bytes)
//!  0  "Lr"                                 0  "Lr"
//!  2  kind 'Q'                             2  kind 'P'
//!  3  flags (bit 0: timed)                 3  flags (bit 0: timed)
//!  4  flow u32                             4  flow u32
//!  8  sequence u64 (from 0)                8  sequence u64 (the request's)
//! 16  client send time, ns                16  server receive time, ns
//!                                         24  server send time, ns
//! ```
//!
//! Times are the sender's `CLOCK_MONOTONIC` in nanoseconds; "timed" is clear
//! (and the times zero) in batch mode, where no side reads the clock per
//! message. A message shorter than its header carries no header at all:
//! nothing is checked, and a response shorter than [`RESPONSE_HEADER_LEN`]
//! gives no one-way figures (the client knows its own send and receive times;
//! only the server's two times travel).
//!
//! As with the control frames, [`RrHeader`] is a checked view (no accessor
//! can panic once [`RrHeader::new_checked`] accepted the buffer) and the
//! `*Repr` types are the validated contents, written with `emit` into a
//! caller's buffer so the data path never allocates.

/// The server's receive and send times of one transaction (its clock), ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerTimes {
    pub rx: u64,
    pub tx: u64,
}

/// Bytes of a request header; smaller requests carry none.
pub const REQUEST_HEADER_LEN: usize = 24;
/// Bytes of a response header; smaller responses carry none.
pub const RESPONSE_HEADER_LEN: usize = 32;

const MAGIC: [u8; 2] = *b"Lr";
const KIND_REQUEST: u8 = b'Q';
const KIND_RESPONSE: u8 = b'P';
const FLAG_TIMED: u8 = 1;

/// A message whose header does not say what the receiver expects.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RrError {
    #[error("message too short for its header ({0} bytes)")]
    Truncated(usize),
    #[error("bad message magic {0:02x?}")]
    BadMagic([u8; 2]),
    #[error("expected a {expected} message, got kind {got:#04x}")]
    WrongKind { expected: &'static str, got: u8 },
    #[error("unknown flags {0:#04x}")]
    BadFlags(u8),
    #[error("message for flow {got}, this connection carries flow {expected}")]
    WrongFlow { expected: u32, got: u32 },
    #[error("message {got} arrived when {expected} was due")]
    WrongSequence { expected: u64, got: u64 },
    #[error("a {got}-byte {what} where {due} bytes were due")]
    WrongSize {
        what: &'static str,
        got: usize,
        due: usize,
    },
}

/// Checked view over the first bytes of a message.
#[derive(Debug, Clone, Copy)]
pub struct RrHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> RrHeader<T> {
    /// Wraps `buffer` if it holds at least a request header (the shorter).
    pub fn new_checked(buffer: T) -> Result<Self, RrError> {
        let len = buffer.as_ref().len();
        if len < REQUEST_HEADER_LEN {
            return Err(RrError::Truncated(len));
        }
        Ok(RrHeader { buffer })
    }

    fn u64_at(&self, at: usize) -> Option<u64> {
        let b = self.buffer.as_ref().get(at..at + 8)?;
        Some(u64::from_be_bytes(b.try_into().ok()?))
    }

    fn head(&self) -> [u8; 8] {
        let b = self.buffer.as_ref();
        // new_checked guarantees at least REQUEST_HEADER_LEN bytes.
        [b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]
    }

    pub fn magic(&self) -> [u8; 2] {
        let h = self.head();
        [h[0], h[1]]
    }

    pub fn kind(&self) -> u8 {
        self.head()[2]
    }

    pub fn flags(&self) -> u8 {
        self.head()[3]
    }

    pub fn flow(&self) -> u32 {
        let h = self.head();
        u32::from_be_bytes([h[4], h[5], h[6], h[7]])
    }

    pub fn sequence(&self) -> u64 {
        self.u64_at(8).unwrap_or(0)
    }

    fn check(&self, kind: u8, expected: &'static str) -> Result<(), RrError> {
        if self.magic() != MAGIC {
            return Err(RrError::BadMagic(self.magic()));
        }
        if self.kind() != kind {
            return Err(RrError::WrongKind {
                expected,
                got: self.kind(),
            });
        }
        if self.flags() & !FLAG_TIMED != 0 {
            return Err(RrError::BadFlags(self.flags()));
        }
        Ok(())
    }
}

/// A validated request header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestRepr {
    pub flow: u32,
    pub sequence: u64,
    /// Client send time (ns), when timed.
    pub sent_ns: Option<u64>,
}

impl RequestRepr {
    /// Parses and validates a request header.
    pub fn parse<T: AsRef<[u8]>>(h: &RrHeader<T>) -> Result<Self, RrError> {
        h.check(KIND_REQUEST, "request")?;
        let timed = h.flags() & FLAG_TIMED != 0;
        Ok(RequestRepr {
            flow: h.flow(),
            sequence: h.sequence(),
            sent_ns: timed.then(|| h.u64_at(16).unwrap_or(0)),
        })
    }

    /// Writes the header into the start of `buf`; returns false (writing
    /// nothing) when `buf` is shorter than a request header.
    pub fn emit(&self, buf: &mut [u8]) -> bool {
        let Some(b) = buf.get_mut(..REQUEST_HEADER_LEN) else {
            return false;
        };
        b[..2].copy_from_slice(&MAGIC);
        b[2] = KIND_REQUEST;
        b[3] = if self.sent_ns.is_some() {
            FLAG_TIMED
        } else {
            0
        };
        b[4..8].copy_from_slice(&self.flow.to_be_bytes());
        b[8..16].copy_from_slice(&self.sequence.to_be_bytes());
        b[16..24].copy_from_slice(&self.sent_ns.unwrap_or(0).to_be_bytes());
        true
    }
}

/// A validated response header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseRepr {
    pub flow: u32,
    pub sequence: u64,
    /// Server receive and send times (ns), when timed.
    pub server_ns: Option<(u64, u64)>,
}

impl ResponseRepr {
    /// Parses and validates a response header (needs the full 32 bytes).
    pub fn parse<T: AsRef<[u8]>>(h: &RrHeader<T>) -> Result<Self, RrError> {
        let len = h.buffer.as_ref().len();
        if len < RESPONSE_HEADER_LEN {
            return Err(RrError::Truncated(len));
        }
        h.check(KIND_RESPONSE, "response")?;
        let timed = h.flags() & FLAG_TIMED != 0;
        Ok(ResponseRepr {
            flow: h.flow(),
            sequence: h.sequence(),
            server_ns: timed.then(|| (h.u64_at(16).unwrap_or(0), h.u64_at(24).unwrap_or(0))),
        })
    }

    /// Writes the header into the start of `buf`; returns false (writing
    /// nothing) when `buf` is shorter than a response header.
    pub fn emit(&self, buf: &mut [u8]) -> bool {
        let Some(b) = buf.get_mut(..RESPONSE_HEADER_LEN) else {
            return false;
        };
        let (rx, tx) = self.server_ns.unwrap_or((0, 0));
        b[..2].copy_from_slice(&MAGIC);
        b[2] = KIND_RESPONSE;
        b[3] = if self.server_ns.is_some() {
            FLAG_TIMED
        } else {
            0
        };
        b[4..8].copy_from_slice(&self.flow.to_be_bytes());
        b[8..16].copy_from_slice(&self.sequence.to_be_bytes());
        b[16..24].copy_from_slice(&rx.to_be_bytes());
        b[24..32].copy_from_slice(&tx.to_be_bytes());
        true
    }
}

/// Checks that a parsed header belongs to `flow` and is message `sequence`.
pub fn expect(flow: u32, sequence: u64, got_flow: u32, got_seq: u64) -> Result<(), RrError> {
    if got_flow != flow {
        return Err(RrError::WrongFlow {
            expected: flow,
            got: got_flow,
        });
    }
    if got_seq != sequence {
        return Err(RrError::WrongSequence {
            expected: sequence,
            got: got_seq,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn request_round_trips_and_short_buffers_carry_nothing() {
        let r = RequestRepr {
            flow: 3,
            sequence: 1 << 40,
            sent_ns: Some(123_456_789),
        };
        let mut buf = [0u8; 64];
        assert!(r.emit(&mut buf));
        let h = RrHeader::new_checked(&buf[..]).expect("long enough");
        assert_eq!(RequestRepr::parse(&h), Ok(r));
        // A request is not a response.
        assert!(matches!(
            ResponseRepr::parse(&h),
            Err(RrError::WrongKind { .. })
        ));
        let mut small = [0u8; REQUEST_HEADER_LEN - 1];
        assert!(!r.emit(&mut small));
        assert_eq!(small, [0u8; REQUEST_HEADER_LEN - 1]);
        assert_eq!(
            RrHeader::new_checked(&small[..]).err(),
            Some(RrError::Truncated(23))
        );
    }

    #[test]
    fn response_round_trips_timed_and_untimed() {
        for server_ns in [Some((5, 9)), None] {
            let r = ResponseRepr {
                flow: 0,
                sequence: 7,
                server_ns,
            };
            let mut buf = [0xffu8; RESPONSE_HEADER_LEN];
            assert!(r.emit(&mut buf));
            let h = RrHeader::new_checked(&buf[..]).expect("long enough");
            assert_eq!(ResponseRepr::parse(&h), Ok(r));
        }
        // 24..31 bytes: a request header fits, a response header does not.
        let mut buf = [0u8; 28];
        assert!(!ResponseRepr {
            flow: 0,
            sequence: 0,
            server_ns: None
        }
        .emit(&mut buf));
        let h = RrHeader::new_checked(&buf[..]).expect("request-sized");
        assert_eq!(ResponseRepr::parse(&h), Err(RrError::Truncated(28)));
    }

    #[test]
    fn expect_names_what_was_due() {
        assert_eq!(expect(1, 5, 1, 5), Ok(()));
        assert_eq!(
            expect(1, 5, 2, 5),
            Err(RrError::WrongFlow {
                expected: 1,
                got: 2
            })
        );
        assert_eq!(
            expect(1, 5, 1, 4),
            Err(RrError::WrongSequence {
                expected: 5,
                got: 4
            })
        );
    }

    proptest! {
        /// No byte string makes the parsers panic; whatever they accept
        /// re-emits to the same bytes' header.
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(h) = RrHeader::new_checked(&bytes[..]) {
                if let Ok(r) = RequestRepr::parse(&h) {
                    let mut again = vec![0u8; bytes.len()];
                    prop_assert!(r.emit(&mut again));
                    let h2 = RrHeader::new_checked(&again[..]).expect("same length");
                    prop_assert_eq!(RequestRepr::parse(&h2), Ok(r));
                }
                if let Ok(r) = ResponseRepr::parse(&h) {
                    let mut again = vec![0u8; bytes.len()];
                    prop_assert!(r.emit(&mut again));
                    let h2 = RrHeader::new_checked(&again[..]).expect("same length");
                    prop_assert_eq!(ResponseRepr::parse(&h2), Ok(r));
                }
            }
        }

        #[test]
        fn emitted_headers_parse(flow in any::<u32>(), seq in any::<u64>(), t in proptest::option::of(any::<(u64, u64)>()), extra in 0usize..100) {
            let mut buf = vec![0u8; RESPONSE_HEADER_LEN + extra];
            let q = RequestRepr { flow, sequence: seq, sent_ns: t.map(|x| x.0) };
            prop_assert!(q.emit(&mut buf));
            prop_assert_eq!(RequestRepr::parse(&RrHeader::new_checked(&buf[..]).expect("fits")), Ok(q));
            let p = ResponseRepr { flow, sequence: seq, server_ns: t };
            prop_assert!(p.emit(&mut buf));
            prop_assert_eq!(ResponseRepr::parse(&RrHeader::new_checked(&buf[..]).expect("fits")), Ok(p));
        }
    }
}
