//! Native control-protocol framing.
//!
//! Every frame on a linerate control or data connection is
//!
//! ```text
//!  0      2        3      4            8
//!  +------+--------+------+------------+-------------------+
//!  | "LR" | version| kind | length u32 | payload (length)  |
//!  +------+--------+------+------------+-------------------+
//! ```
//!
//! with the length big-endian and at most [`MAX_PAYLOAD`]. Control payloads
//! are JSON (the serde types below); the data-connection greeting is a fixed
//! 21-byte binary record because it precedes bulk data.
//!
//! As in smoltcp's `wire` module, [`FrameHeader`] is a checked view: after
//! [`FrameHeader::new_checked`] no accessor can panic. [`decode`] turns bytes
//! into a validated [`Message`] or says how many more bytes it needs.
//!
//! The first byte of a native frame is `'L'` (0x4C). An iperf3 client opens
//! with a 37-byte cookie whose characters are all from `[a-z2-7]`, so the
//! server can tell the two apart from the first byte ([`classify_greeting`]).

use serde::{Deserialize, Serialize};

use crate::auth::{AuthChallenge, AuthInit, AuthProof};
use crate::measure::SideResults;
use crate::spec::TestSpec;

/// Frame magic, chosen outside iperf3's cookie alphabet.
pub const MAGIC: [u8; 2] = *b"LR";
/// Version of the frame layout (not of the protocol; see `Hello`).
pub const FRAME_VERSION: u8 = 1;
/// Bytes before the payload.
pub const HEADER_LEN: usize = 8;
/// Largest payload of any frame but `Results`; larger frames are rejected
/// from their header, before the payload is read. Handshake frames arrive
/// before a client is admitted, so they stay small.
pub const MAX_PAYLOAD: usize = 64 * 1024;
/// Largest `Results` payload: a side's totals plus its interval records
/// (a 1-hour, 4-stream test with 1 s intervals is about 3 MB).
pub const MAX_RESULTS_PAYLOAD: usize = 16 * 1024 * 1024;
/// Length of the per-test token that identifies data connections.
pub const TOKEN_LEN: usize = 16;
/// Payload bytes of a `DataHello` frame.
pub const DATA_HELLO_LEN: usize = TOKEN_LEN + 4 + 1;

/// Errors while decoding a frame. Each means the peer is not speaking this
/// protocol correctly; the connection should be answered (if possible) and closed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("{}", bad_magic(.0))]
    BadMagic([u8; 2]),
    /// The peer answered with an iperf3 server's first byte.
    #[error("the peer is an iperf3 server, not a linerate server (it answered with iperf3's {0} byte): run `linerate server` on that host instead (it serves linerate and iperf3 clients on one port), or add `--iperf3` to test that iperf3 server")]
    Iperf3Server(&'static str),
    #[error("unsupported frame version {0} (this build speaks {FRAME_VERSION})")]
    UnsupportedVersion(u8),
    #[error("unknown frame kind {0}")]
    UnknownKind(u8),
    #[error("frame payload of {0} bytes exceeds the limit for its kind")]
    TooLong(u32),
    #[error("malformed {kind} payload: {reason}")]
    Malformed { kind: &'static str, reason: String },
}

/// Checked view over a frame header.
#[derive(Debug, Clone, Copy)]
pub struct FrameHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> FrameHeader<T> {
    /// Wraps `buffer` if it holds at least a full header.
    pub fn new_checked(buffer: T) -> Option<Self> {
        (buffer.as_ref().len() >= HEADER_LEN).then_some(Self { buffer })
    }

    fn bytes(&self) -> &[u8; HEADER_LEN] {
        // new_checked guarantees the length; the conversion cannot fail.
        let b = self.buffer.as_ref();
        b[..HEADER_LEN]
            .try_into()
            .unwrap_or_else(|_| unreachable!("length checked in new_checked"))
    }

    pub fn magic(&self) -> [u8; 2] {
        let b = self.bytes();
        [b[0], b[1]]
    }

    pub fn version(&self) -> u8 {
        self.bytes()[2]
    }

    pub fn kind(&self) -> u8 {
        self.bytes()[3]
    }

    pub fn payload_len(&self) -> u32 {
        let b = self.bytes();
        u32::from_be_bytes([b[4], b[5], b[6], b[7]])
    }

    /// Checks magic, version and length limit.
    pub fn validate(&self) -> Result<(), WireError> {
        if self.magic() != MAGIC {
            return Err(WireError::BadMagic(self.magic()));
        }
        if self.version() != FRAME_VERSION {
            return Err(WireError::UnsupportedVersion(self.version()));
        }
        let limit = if self.kind() == kind::RESULTS {
            MAX_RESULTS_PAYLOAD
        } else {
            MAX_PAYLOAD
        };
        if self.payload_len() as usize > limit {
            return Err(WireError::TooLong(self.payload_len()));
        }
        Ok(())
    }
}

/// Frame kinds on the wire.
mod kind {
    pub const HELLO: u8 = 1;
    pub const ACCEPT: u8 = 2;
    pub const REFUSE: u8 = 3;
    pub const DATA_HELLO: u8 = 4;
    pub const START: u8 = 5;
    pub const RESULTS: u8 = 6;
    pub const ABORT: u8 = 7;
    pub const SEND_DONE: u8 = 8;
    pub const CLOCK_PROBE: u8 = 9;
    pub const CLOCK_REPLY: u8 = 10;
    pub const STOP: u8 = 11;
    pub const AUTH_INIT: u8 = 12;
    pub const AUTH_CHALLENGE: u8 = 13;
    pub const AUTH_PROOF: u8 = 14;
    pub const HEARTBEAT: u8 = 15;
}

/// Client's first control frame: who it is and what test it proposes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// Native protocol version ([`crate::PROTOCOL_VERSION`]).
    pub protocol: u16,
    /// Free text, e.g. `linerate 0.1.0`, for logs.
    pub software: String,
    pub spec: TestSpec,
    /// `--server-engine`: the engine the client asks the server to use for
    /// its side (absent: the server's own `--engine`). A server that
    /// refuses it refuses the test with the reason; an older server
    /// ignores the field, and its Accept then lacks `server_engine`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_engine: Option<String>,
    /// The client can send and check `Heartbeat` frames while a test runs,
    /// every this many ms ([`crate::session::heartbeat`]). Absent (an older
    /// client): no heartbeats either way; an older server ignores it and
    /// its Accept lacks `heartbeat_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_ms: Option<u32>,
    /// `--transport unix`: the client's uid. The server takes the test's
    /// Unix data connections only from processes of this uid
    /// (`SO_PEERCRED`), so another local user who finds the listener in
    /// `/proc/net/unix` cannot take a stream. A server refuses a unix test
    /// without it (an older client).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unix_uid: Option<u32>,
    /// This test runs beside the client's running test with this token,
    /// as part of it (qualify's latency probes under load): the server
    /// admits it under that test's admission, not a slot of its own
    /// (`linerate_run::guard`). Only request/response probes may. An older
    /// server ignores the field and admits it as a test of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beside: Option<Token>,
}

/// Server's answer to an acceptable `Hello`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Accept {
    /// The spec as the server will run it (possibly clamped).
    pub spec: TestSpec,
    /// Random token the client must present on every data connection.
    pub token: Token,
    /// What the server changed in the proposal, in words.
    pub notes: Vec<String>,
    /// Free text, e.g. `linerate 0.1.0`.
    pub software: String,
    /// UDP tests: the server's data port of each stream, in plan order. The
    /// client greets each with a `DataHello` datagram until it is echoed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub udp_ports: Vec<u16>,
    /// The engine the server will use, echoed when the client asked for
    /// one with `server_engine` (and only then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_engine: Option<String>,
    /// The heartbeat interval both sides use while the test runs, when the
    /// client offered heartbeats and this server takes them (and only
    /// then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_ms: Option<u32>,
    /// `--transport unix`: the abstract name the server listens on for
    /// this test's data connections ([`unix_data_name`]: random, not
    /// derived from the token). An older server's Accept lacks it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unix_name: Option<String>,
}

/// Why a server refused a test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefuseCode {
    /// The server is running as many tests as it allows.
    Busy,
    /// The proposed spec is outside what this server accepts.
    Invalid,
    /// Protocol versions do not match.
    Version,
    /// Anything else (a server-side failure).
    Internal,
    /// Pre-shared-key authentication failed or was missing on one side.
    Auth,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refuse {
    pub code: RefuseCode,
    pub message: String,
}

/// Per-test token (random bytes chosen by the server's I/O layer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Token(pub [u8; TOKEN_LEN]);

// `Side` lives in its own module (spec and measure use it too); it is
// re-exported here, where the frames that carry it are.
pub use crate::side::Side;

/// First frame on a data connection: which test and which stream it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataHello {
    pub token: Token,
    pub stream: u32,
    pub sender: Side,
}

impl DataHello {
    /// Appends this greeting's frame to `out` (a crr transaction writes it
    /// and its request in one call).
    pub fn encode(&self, out: &mut Vec<u8>) {
        encode(&Message::DataHello(*self), out);
    }
}

/// A sending stream's final sequence count, so the receiver knows exactly
/// which numbers to expect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SentCount {
    pub stream: u32,
    /// Sequence numbers `0..issued` were sent (or skipped on purpose).
    pub issued: u64,
    /// `-O`: numbers `0..omitted` were issued in the warm-up (the sender's
    /// cut by the datagrams' stamps); absent from older peers.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub omitted: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// UDP tests: every sending stream of this side has finished; the peer's
/// receivers drain what is in flight and then stop.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SendDone {
    pub streams: Vec<SentCount>,
}

/// Either side may abort a running test, with a reason for the other's log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Abort {
    pub reason: String,
}

/// Client → server: a clock probe sent at `t1` (client clock, ns); see
/// [`crate::clock`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockProbe {
    pub t1: u64,
}

/// Server → client: the probe's `t1` echoed, with the server's receive
/// (`t2`) and send (`t3`) times on its clock, and its boot id (equal boot
/// ids mean one kernel, so one monotonic clock).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockReply {
    pub t1: u64,
    pub t2: u64,
    pub t3: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
}

/// A validated frame.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    Hello(Hello),
    Accept(Accept),
    Refuse(Refuse),
    DataHello(DataHello),
    /// All data connections are attached: start measuring now.
    Start,
    Results(Box<SideResults>),
    Abort(Abort),
    ClockProbe(ClockProbe),
    ClockReply(ClockReply),
    SendDone(SendDone),
    /// Client → server while running: finish now, as if the test's limit
    /// were reached (senders stop and shut down, receivers drain, results
    /// are exchanged as usual). Sent when the user interrupts a test, so
    /// what was measured is still reported.
    Stop,
    /// `--auth-key` handshake ([`crate::auth`]), before the Hello.
    AuthInit(AuthInit),
    AuthChallenge(AuthChallenge),
    AuthProof(AuthProof),
    /// Either side, every agreed interval while a test runs, when both
    /// offered heartbeats: proof the peer and the path are still there.
    Heartbeat,
}

impl Message {
    pub fn name(&self) -> &'static str {
        match self {
            Message::Hello(_) => "Hello",
            Message::Accept(_) => "Accept",
            Message::Refuse(_) => "Refuse",
            Message::DataHello(_) => "DataHello",
            Message::Start => "Start",
            Message::Results(_) => "Results",
            Message::Abort(_) => "Abort",
            Message::ClockProbe(_) => "ClockProbe",
            Message::ClockReply(_) => "ClockReply",
            Message::SendDone(_) => "SendDone",
            Message::Stop => "Stop",
            Message::AuthInit(_) => "AuthInit",
            Message::AuthChallenge(_) => "AuthChallenge",
            Message::AuthProof(_) => "AuthProof",
            Message::Heartbeat => "Heartbeat",
        }
    }
}

/// Appends the encoded frame for `msg` to `out`.
pub fn encode(msg: &Message, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&MAGIC);
    out.push(FRAME_VERSION);
    let k = match msg {
        Message::Hello(_) => kind::HELLO,
        Message::Accept(_) => kind::ACCEPT,
        Message::Refuse(_) => kind::REFUSE,
        Message::DataHello(_) => kind::DATA_HELLO,
        Message::Start => kind::START,
        Message::Results(_) => kind::RESULTS,
        Message::Abort(_) => kind::ABORT,
        Message::ClockProbe(_) => kind::CLOCK_PROBE,
        Message::ClockReply(_) => kind::CLOCK_REPLY,
        Message::SendDone(_) => kind::SEND_DONE,
        Message::Stop => kind::STOP,
        Message::AuthInit(_) => kind::AUTH_INIT,
        Message::AuthChallenge(_) => kind::AUTH_CHALLENGE,
        Message::AuthProof(_) => kind::AUTH_PROOF,
        Message::Heartbeat => kind::HEARTBEAT,
    };
    out.push(k);
    out.extend_from_slice(&[0; 4]);
    let body = out.len();
    match msg {
        Message::Hello(m) => write_json(out, m),
        Message::Accept(m) => write_json(out, m),
        Message::Refuse(m) => write_json(out, m),
        Message::Results(m) => write_json(out, m.as_ref()),
        Message::Abort(m) => write_json(out, m),
        Message::ClockProbe(m) => write_json(out, m),
        Message::ClockReply(m) => write_json(out, m),
        Message::SendDone(m) => write_json(out, m),
        Message::AuthInit(m) => write_json(out, m),
        Message::AuthChallenge(m) => write_json(out, m),
        Message::AuthProof(m) => write_json(out, m),
        Message::Start | Message::Stop | Message::Heartbeat => {}
        Message::DataHello(d) => {
            out.extend_from_slice(&d.token.0);
            out.extend_from_slice(&d.stream.to_be_bytes());
            out.push(match d.sender {
                Side::Client => 0,
                Side::Server => 1,
            });
        }
    }
    let len = (out.len() - body) as u32;
    out[start + 4..start + 8].copy_from_slice(&len.to_be_bytes());
}

/// Encodes `msg` into a new buffer.
pub fn to_bytes(msg: &Message) -> Vec<u8> {
    let mut v = Vec::new();
    encode(msg, &mut v);
    v
}

fn write_json<T: Serialize>(out: &mut Vec<u8>, v: &T) {
    // Serialising these plain data types into a Vec cannot fail: no maps with
    // non-string keys, no serialisers that return errors.
    if let Err(e) = serde_json::to_writer(&mut *out, v) {
        unreachable!("serialising a protocol message failed: {e}");
    }
}

fn bad_magic(m: &[u8; 2]) -> String {
    format!("bad frame magic {m:02x?} (not a linerate peer)")
}

/// An iperf3 server's first byte to a client that sent it anything of 37
/// bytes or more: PARAM_EXCHANGE (never a linerate frame's first byte, and
/// an iperf3 server may send it alone and wait).
fn iperf3_server_byte(b: u8) -> Option<&'static str> {
    (b == 0x09).then_some("PARAM_EXCHANGE (0x09)")
}

/// Decodes one frame from the front of `buf`.
///
/// Returns `Ok(None)` when more bytes are needed, `Ok(Some((msg, used)))` for
/// a complete frame, or an error for bytes that can never become a valid frame
/// (checked as early as the header allows, so an oversized length is refused
/// before its payload arrives).
pub fn decode(buf: &[u8]) -> Result<Option<(Message, usize)>, WireError> {
    // An iperf3 server may send one byte and wait: tell it from that byte.
    if let Some(name) = buf.first().copied().and_then(iperf3_server_byte) {
        return Err(WireError::Iperf3Server(name));
    }
    if buf.len() >= 2 && buf[..2] != MAGIC {
        return Err(WireError::BadMagic([buf[0], buf[1]]));
    }
    let Some(header) = FrameHeader::new_checked(buf) else {
        return Ok(None);
    };
    header.validate()?;
    let len = header.payload_len() as usize;
    let Some(payload) = buf.get(HEADER_LEN..HEADER_LEN + len) else {
        return Ok(None);
    };
    let msg = parse_payload(header.kind(), payload)?;
    Ok(Some((msg, HEADER_LEN + len)))
}

fn parse_payload(k: u8, payload: &[u8]) -> Result<Message, WireError> {
    fn json<T: serde::de::DeserializeOwned>(
        kind: &'static str,
        payload: &[u8],
    ) -> Result<T, WireError> {
        let malformed = |e: serde_json::Error| WireError::Malformed {
            kind,
            reason: e.to_string(),
        };
        // Peer strings reach terminals and logs: escape control characters
        // here, once (crate::sanitize). Large Results skip the walk unless
        // their text could hold such a character.
        if kind == "Results" && !crate::sanitize::json_may_need(payload) {
            return serde_json::from_slice(payload).map_err(malformed);
        }
        let mut v: serde_json::Value = serde_json::from_slice(payload).map_err(malformed)?;
        crate::sanitize::sanitize_json(&mut v);
        serde_json::from_value(v).map_err(malformed)
    }
    Ok(match k {
        kind::HELLO => Message::Hello(json("Hello", payload)?),
        kind::ACCEPT => Message::Accept(json("Accept", payload)?),
        kind::REFUSE => Message::Refuse(json("Refuse", payload)?),
        kind::RESULTS => Message::Results(Box::new(json("Results", payload)?)),
        kind::ABORT => Message::Abort(json("Abort", payload)?),
        kind::CLOCK_PROBE => Message::ClockProbe(json("ClockProbe", payload)?),
        kind::CLOCK_REPLY => Message::ClockReply(json("ClockReply", payload)?),
        kind::SEND_DONE => Message::SendDone(json("SendDone", payload)?),
        kind::AUTH_INIT => Message::AuthInit(json("AuthInit", payload)?),
        kind::AUTH_CHALLENGE => Message::AuthChallenge(json("AuthChallenge", payload)?),
        kind::AUTH_PROOF => Message::AuthProof(json("AuthProof", payload)?),
        kind::START | kind::STOP | kind::HEARTBEAT => {
            let (name, msg) = match k {
                kind::START => ("Start", Message::Start),
                kind::STOP => ("Stop", Message::Stop),
                _ => ("Heartbeat", Message::Heartbeat),
            };
            if !payload.is_empty() {
                return Err(WireError::Malformed {
                    kind: name,
                    reason: format!("expected no payload, got {} bytes", payload.len()),
                });
            }
            msg
        }
        kind::DATA_HELLO => {
            let malformed = |reason: String| WireError::Malformed {
                kind: "DataHello",
                reason,
            };
            let p: &[u8; DATA_HELLO_LEN] = payload.try_into().map_err(|_| {
                malformed(format!(
                    "expected {DATA_HELLO_LEN} bytes, got {}",
                    payload.len()
                ))
            })?;
            let mut token = [0u8; TOKEN_LEN];
            token.copy_from_slice(&p[..TOKEN_LEN]);
            let stream = u32::from_be_bytes([p[16], p[17], p[18], p[19]]);
            let sender = match p[20] {
                0 => Side::Client,
                1 => Side::Server,
                other => return Err(malformed(format!("bad sender byte {other}"))),
            };
            Message::DataHello(DataHello {
                token: Token(token),
                stream,
                sender,
            })
        }
        other => return Err(WireError::UnknownKind(other)),
    })
}

/// What the first bytes of a new connection say about the peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Greeting {
    /// Not enough bytes to tell yet.
    NeedMore,
    /// A linerate frame follows.
    Native,
    /// Looks like an iperf3 cookie (`[a-z2-7]`).
    Iperf3,
    /// Neither.
    Unknown,
}

/// What the first bytes of a connection say about a data greeting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataGreeting {
    /// Not enough bytes to tell yet.
    NeedMore,
    /// Anything but a `DataHello` frame (a control greeting, garbage).
    Other,
    /// A `DataHello` frame of `usize` bytes; what follows is the stream's.
    Hello(DataHello, usize),
}

/// Looks for a `DataHello` frame at the start of `buf` (bytes peeked, not
/// consumed, so a connection that turns out to be something else can be
/// handled from its first byte).
pub fn data_greeting(buf: &[u8]) -> DataGreeting {
    let prefix = [MAGIC[0], MAGIC[1], FRAME_VERSION, kind::DATA_HELLO];
    let n = buf.len().min(prefix.len());
    if buf[..n] != prefix[..n] {
        return DataGreeting::Other;
    }
    match decode(buf) {
        Ok(Some((Message::DataHello(h), used))) => DataGreeting::Hello(h, used),
        Ok(None) => DataGreeting::NeedMore,
        _ => DataGreeting::Other,
    }
}

/// Classifies a new connection from its first byte(s).
pub fn classify_greeting(first: &[u8]) -> Greeting {
    match first.first() {
        None => Greeting::NeedMore,
        Some(&b) if b == MAGIC[0] => Greeting::Native,
        Some(b'a'..=b'z' | b'2'..=b'7') => Greeting::Iperf3,
        Some(_) => Greeting::Unknown,
    }
}

/// Random bytes in a `--transport unix` data socket name.
pub const UNIX_NAME_RANDOM: usize = 16;
const UNIX_NAME_PREFIX: &str = "linerate-data-";

/// The abstract Unix socket name (no file: it lives in the network
/// namespace and goes when the server closes it) on which the server
/// takes a `--transport unix` test's data connections, from fresh random
/// bytes. Not derived from the token: every local user can read bound
/// names in `/proc/net/unix`, and the token must stay secret (it admits
/// TCP data connections too). The name travels in the Accept.
pub fn unix_data_name(random: &[u8; UNIX_NAME_RANDOM]) -> String {
    let hex: String = random.iter().map(|b| format!("{b:02x}")).collect();
    format!("{UNIX_NAME_PREFIX}{hex}")
}

/// Whether `name` is one [`unix_data_name`] makes: a client connects only
/// to such a name, whatever a hostile server sends.
pub fn is_unix_data_name(name: &str) -> bool {
    name.strip_prefix(UNIX_NAME_PREFIX).is_some_and(|hex| {
        hex.len() == 2 * UNIX_NAME_RANDOM && hex.bytes().all(|b| b.is_ascii_hexdigit())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::TestSpec;
    use proptest::prelude::*;

    #[test]
    fn data_greeting_is_found_from_its_first_bytes() {
        let h = DataHello {
            token: Token([7; TOKEN_LEN]),
            stream: 3,
            sender: Side::Client,
        };
        let mut frame = Vec::new();
        h.encode(&mut frame);
        let n = frame.len();
        frame.extend_from_slice(b"request");
        for cut in 0..n {
            assert_eq!(
                data_greeting(&frame[..cut]),
                DataGreeting::NeedMore,
                "{cut}"
            );
        }
        assert_eq!(data_greeting(&frame), DataGreeting::Hello(h, n));
        assert_eq!(n, HEADER_LEN + DATA_HELLO_LEN);
        let hello = to_bytes(&Message::Start);
        assert_eq!(data_greeting(&hello[..4]), DataGreeting::Other);
        assert_eq!(data_greeting(b"x"), DataGreeting::Other);
    }

    #[test]
    fn issue_28_unix_data_names_are_random_and_checked() {
        let name = unix_data_name(&[0x5a; UNIX_NAME_RANDOM]);
        assert_eq!(name, format!("linerate-data-{}", "5a".repeat(16)));
        assert!(is_unix_data_name(&name));
        for bad in [
            "",
            "linerate-data-",
            "linerate-data-zz5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a",
            "other-5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a",
            &format!("{name}00"),
            "linerate-data-5a5a\0/../5a5a5a5a5a5a5a5a5a5a5a5a5a",
        ] {
            assert!(!is_unix_data_name(bad), "{bad:?}");
        }
    }

    fn sample_messages() -> Vec<Message> {
        vec![
            Message::Hello(Hello {
                protocol: 1,
                software: "linerate test".into(),
                spec: TestSpec::default(),
                server_engine: Some("uring".into()),
                heartbeat_ms: Some(250),
                unix_uid: Some(1000),
                beside: Some(Token([9; TOKEN_LEN])),
            }),
            Message::Accept(Accept {
                spec: TestSpec::default(),
                token: Token([7; TOKEN_LEN]),
                notes: vec!["window clamped".into()],
                software: "s".into(),
                udp_ports: vec![40000, 40001],
                server_engine: Some("uring".into()),
                heartbeat_ms: Some(250),
                unix_name: Some(unix_data_name(&[0xab; UNIX_NAME_RANDOM])),
            }),
            Message::Refuse(Refuse {
                code: RefuseCode::Busy,
                message: "busy".into(),
            }),
            Message::DataHello(DataHello {
                token: Token([9; TOKEN_LEN]),
                stream: 3,
                sender: Side::Server,
            }),
            Message::Start,
            Message::Stop,
            Message::Heartbeat,
            Message::Results(Box::default()),
            Message::Abort(Abort {
                reason: "interrupted".into(),
            }),
            Message::ClockProbe(ClockProbe { t1: u64::MAX }),
            Message::ClockReply(ClockReply {
                t1: 1,
                t2: 2,
                t3: 3,
                boot_id: Some("b0".into()),
            }),
            Message::SendDone(SendDone {
                streams: vec![SentCount {
                    omitted: 5,
                    stream: 1,
                    issued: 1 << 40,
                }],
            }),
            Message::AuthInit(AuthInit { nonce: [3; 32] }),
            Message::AuthChallenge(AuthChallenge {
                nonce: [4; 32],
                proof: [5; 32],
            }),
            Message::AuthProof(AuthProof { proof: [6; 32] }),
        ]
    }

    #[test]
    fn every_message_round_trips() {
        for m in sample_messages() {
            let bytes = to_bytes(&m);
            let (back, used) = decode(&bytes).expect("valid").expect("complete");
            assert_eq!(used, bytes.len());
            assert_eq!(back, m);
        }
    }

    #[test]
    fn every_prefix_asks_for_more() {
        for m in sample_messages() {
            let bytes = to_bytes(&m);
            for cut in 0..bytes.len() {
                assert_eq!(decode(&bytes[..cut]), Ok(None), "{} cut at {cut}", m.name());
            }
        }
    }

    #[test]
    fn oversized_length_is_refused_before_payload_arrives() {
        let mut h = Vec::from(MAGIC);
        h.extend_from_slice(&[FRAME_VERSION, kind::HELLO]);
        h.extend_from_slice(&((MAX_PAYLOAD as u32) + 1).to_be_bytes());
        assert_eq!(decode(&h), Err(WireError::TooLong(MAX_PAYLOAD as u32 + 1)));
        h[3] = kind::RESULTS;
        assert_eq!(decode(&h), Ok(None), "results may be larger");
        h[4..8].copy_from_slice(&((MAX_RESULTS_PAYLOAD as u32) + 1).to_be_bytes());
        assert!(decode(&h).is_err());
    }

    #[test]
    fn bad_magic_version_kind_are_errors() {
        assert!(matches!(decode(b"XX"), Err(WireError::BadMagic(_))));
        // issue 13: an iperf3 server's answer is named, from its first byte.
        for first in [&[0x09u8][..], &[0x09, 0xFE]] {
            let e = decode(first).expect_err("iperf3 server");
            assert!(e.to_string().contains("iperf3 server"), "{e}");
        }
        assert_eq!(
            decode(&[b'L', b'R', 9, 1, 0, 0, 0, 0]),
            Err(WireError::UnsupportedVersion(9))
        );
        assert_eq!(
            decode(&[b'L', b'R', 1, 200, 0, 0, 0, 0]),
            Err(WireError::UnknownKind(200))
        );
        assert!(matches!(
            decode(&[b'L', b'R', 1, kind::START, 0, 0, 0, 1, 0]),
            Err(WireError::Malformed { .. })
        ));
        assert!(matches!(
            decode(&[b'L', b'R', 1, kind::HELLO, 0, 0, 0, 2, b'{', b'x']),
            Err(WireError::Malformed { .. })
        ));
    }

    #[test]
    fn issue_10_peer_strings_are_sanitized_on_decode() {
        let evil = "\x1b[2J\x1b[Hbusy\nlinerate server: forged";
        let bytes = to_bytes(&Message::Refuse(Refuse {
            code: RefuseCode::Busy,
            message: evil.into(),
        }));
        let Some((Message::Refuse(r), _)) = decode(&bytes).expect("valid") else {
            panic!("not a Refuse");
        };
        assert!(!r.message.chars().any(char::is_control), "{:?}", r.message);
        assert!(r.message.contains("\\u{1b}[2J"));
        let mut results = SideResults {
            engine: "sys\u{7}call".into(),
            ..SideResults::default()
        };
        results.streams.push(Default::default());
        results.streams[0].error = Some("x\ny".into());
        let bytes = to_bytes(&Message::Results(Box::new(results)));
        let Some((Message::Results(r), _)) = decode(&bytes).expect("valid") else {
            panic!("not Results");
        };
        assert_eq!(r.engine, "sys\\u{7}call");
        assert_eq!(r.streams[0].error.as_deref(), Some("x\\u{a}y"));
    }

    #[test]
    fn greeting_tells_native_from_iperf3() {
        assert_eq!(classify_greeting(b""), Greeting::NeedMore);
        assert_eq!(
            classify_greeting(&to_bytes(&Message::Start)),
            Greeting::Native
        );
        assert_eq!(
            classify_greeting(b"agiuwt4j3wkxt75cjjjzvef6aiwf6uxc3ydp\0"),
            Greeting::Iperf3
        );
        assert_eq!(classify_greeting(b"GET / HTTP/1.1"), Greeting::Unknown);
    }

    proptest! {
        /// No byte string can make the decoder panic, and whatever it accepts
        /// re-encodes to a frame that decodes to the same message.
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            if let Ok(Some((msg, used))) = decode(&bytes) {
                prop_assert!(used <= bytes.len());
                let again = to_bytes(&msg);
                let (back, _) = decode(&again).expect("re-encoded is valid").expect("complete");
                prop_assert_eq!(back, msg);
            }
        }

        #[test]
        fn decode_with_valid_header_never_panics(k in 0u8..16, body in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut f = Vec::from(MAGIC);
            f.push(FRAME_VERSION);
            f.push(k);
            f.extend_from_slice(&(body.len() as u32).to_be_bytes());
            f.extend_from_slice(&body);
            let _ = decode(&f);
        }
    }
}
