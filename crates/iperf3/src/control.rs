//! iperf3's control-connection vocabulary: the constants, the one-byte
//! state messages, iperf3's error codes, the cookie, and the stream roles
//! and ids both sessions and the JSON share. Imports nothing from the rest
//! of the crate.

use std::time::Duration;

use linerate_proto::session::ControlIoError;

/// iperf3's default port (linerate's too: one port serves both).
pub const DEFAULT_PORT: u16 = 5201;
/// Cookie length on the wire: 36 characters and a NUL.
pub const COOKIE_LEN: usize = 37;
/// The cookie's alphabet (lower-case base32), used by every iperf3 since 3.2.
pub const COOKIE_ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
/// Most streams per direction iperf3 allows.
pub const MAX_STREAMS: u32 = 128;
/// How long one handshake step may take (iperf3 ≥3.15 waits 10 s per read).
pub const STEP_TIMEOUT: Duration = Duration::from_secs(10);
/// Slack an iperf3 server gives a time-limited test before its safety timer
/// fires (`time + omit + 40 s`).
pub const SAFETY_SLACK: Duration = Duration::from_secs(40);

/// One state byte. The wire value is a signed char.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    TestStart,
    TestRunning,
    TestEnd,
    ParamExchange,
    CreateStreams,
    ServerTerminate,
    ClientTerminate,
    ExchangeResults,
    DisplayResults,
    IperfDone,
    AccessDenied,
    ServerError,
    /// A value no 3.x version sends (3, 5–8, 15, anything else).
    Unknown(i8),
}

impl State {
    /// Decodes a byte as iperf3 does: a signed char.
    pub fn from_byte(b: u8) -> State {
        match b as i8 {
            1 => State::TestStart,
            2 => State::TestRunning,
            4 => State::TestEnd,
            9 => State::ParamExchange,
            10 => State::CreateStreams,
            11 => State::ServerTerminate,
            12 => State::ClientTerminate,
            13 => State::ExchangeResults,
            14 => State::DisplayResults,
            16 => State::IperfDone,
            -1 => State::AccessDenied,
            -2 => State::ServerError,
            v => State::Unknown(v),
        }
    }

    /// The signed value.
    pub fn value(self) -> i8 {
        match self {
            State::TestStart => 1,
            State::TestRunning => 2,
            State::TestEnd => 4,
            State::ParamExchange => 9,
            State::CreateStreams => 10,
            State::ServerTerminate => 11,
            State::ClientTerminate => 12,
            State::ExchangeResults => 13,
            State::DisplayResults => 14,
            State::IperfDone => 16,
            State::AccessDenied => -1,
            State::ServerError => -2,
            State::Unknown(v) => v,
        }
    }

    /// The byte on the wire.
    pub fn byte(self) -> u8 {
        self.value() as u8
    }
}

/// iperf3 error codes (`i_errno`) that linerate sends in SERVER_ERROR or
/// names in messages. The codes are append-only across iperf3 versions.
pub mod code {
    pub const DURATION: i32 = 5;
    pub const NUM_STREAMS: i32 = 6;
    pub const BLOCK_SIZE: i32 = 7;
    pub const BUF_SIZE: i32 = 8;
    pub const MSS: i32 = 10;
    pub const OMIT: i32 = 12;
    pub const UNIMPLEMENTED: i32 = 13;
    pub const BURST: i32 = 15;
    pub const UDP_BLOCK_SIZE: i32 = 20;
    pub const BAD_TOS: i32 = 21;
    /// "total required bandwidth is larger than the server limit".
    pub const TOTAL_RATE: i32 = 27;
    pub const REVERSE_BIDIR: i32 = 25;
    pub const MAX_SERVER_DURATION: i32 = 37;
    /// IEAFFINITY: the server could not pin itself to `server_affinity`.
    pub const AFFINITY: i32 = 132;
    pub const MESSAGE: i32 = 110;
    pub const RECV_PARAMS: i32 = 114;
    pub const RECV_RESULTS: i32 = 117;
    pub const CLIENT_TERM: i32 = 119;
    pub const SERVER_TERM: i32 = 120;
    pub const ACCESS_DENIED: i32 = 121;
    pub const SET_BUF2: i32 = 141;
    pub const AUTH: i32 = 142;
    pub const NO_MSG: i32 = 144;
    pub const STREAM_ACCEPT: i32 = 204;
    pub const STREAM_WRITE: i32 = 205;
    pub const STREAM_READ: i32 = 206;
    pub const STREAM_ID: i32 = 208;

    /// iperf3's text for the codes it is likely to meet from linerate (or
    /// a real server), for messages; `None` for the others.
    pub fn text(code: i32) -> Option<&'static str> {
        Some(match code {
            DURATION => "test duration too long",
            NUM_STREAMS => "invalid number of parallel streams",
            BLOCK_SIZE => "block size invalid",
            BUF_SIZE => "socket buffer size too large",
            MSS => "TCP MSS too large",
            OMIT => "bogus value for --omit",
            UNIMPLEMENTED => "not implemented yet",
            BURST => "invalid burst count",
            UDP_BLOCK_SIZE => "UDP block size invalid",
            BAD_TOS => "bad TOS value",
            REVERSE_BIDIR => "cannot be both reverse and bidirectional",
            27 => "total required bandwidth is larger than the server limit",
            MAX_SERVER_DURATION => "client's requested duration exceeds the server's maximum",
            MESSAGE => "received an unknown control message",
            RECV_PARAMS => "unable to receive parameters from client",
            RECV_RESULTS => "unable to receive results",
            CLIENT_TERM => "the client has terminated",
            SERVER_TERM => "the server has terminated",
            ACCESS_DENIED => "the server is busy running a test",
            124 => "unable to set socket buffer size",
            SET_BUF2 => "socket buffer size not set correctly",
            AUTH => "test authorization failed",
            NO_MSG => "idle timeout for receiving data",
            160 => "server test duration expired",
            STREAM_ACCEPT => "unable to accept stream connection",
            STREAM_WRITE => "unable to write to stream socket",
            STREAM_READ => "unable to read from stream socket",
            207 => "stream has closed unexpectedly",
            STREAM_ID => "stream has an invalid id",
            _ => return None,
        })
    }
}

/// Errors of the iperf3 codec and sessions.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Iperf3Error {
    #[error("JSON message of {len} bytes is over the {max}-byte limit")]
    TooLong { len: u64, max: usize },
    #[error("JSON message of length 0")]
    Empty,
    #[error("malformed JSON: {0}")]
    Json(String),
    #[error("{0}")]
    Field(String),
    #[error("the peer sent an unknown state byte {0}")]
    UnknownState(i8),
    #[error("unexpected state byte {got:?} while {state}")]
    Unexpected { got: State, state: &'static str },
    #[error("the server is busy running a test (iperf3 ACCESS_DENIED); try again later")]
    AccessDenied,
    #[error("iperf3 server error {code}{}{}", text_suffix(*.code), errno_suffix(*.errno))]
    ServerError { code: i32, errno: Option<i32> },
    #[error("the server has terminated")]
    ServerTerminated,
    #[error("the client has terminated")]
    ClientTerminated,
    /// The control connection timed out or ended (the native sessions'
    /// type and words).
    #[error(transparent)]
    Control(#[from] ControlIoError),
    #[error("results name stream {0}, which this test does not have")]
    UnknownStream(i64),
    #[error("{0}")]
    Refused(String),
    #[error("test aborted: {0}")]
    Aborted(String),
}

fn text_suffix(code: i32) -> String {
    code::text(code).map_or_else(String::new, |t| format!(" ({t})"))
}

fn errno_suffix(errno: Option<i32>) -> String {
    match errno {
        Some(e) if e != 0 => format!(", errno {e}"),
        _ => String::new(),
    }
}

/// The 37-byte cookie. A server treats it as opaque bytes (iperf3 ≤3.1
/// built it from other characters); only a client makes one.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cookie(pub [u8; COOKIE_LEN]);

impl std::fmt::Debug for Cookie {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Cookie({:?})", self.as_str())
    }
}

impl Cookie {
    /// A cookie from 37 random bytes, as iperf3 ≥3.2 makes it: each of the
    /// first 36 mapped onto the alphabet by its value mod 32, then a NUL.
    pub fn from_random(random: [u8; COOKIE_LEN]) -> Cookie {
        let mut c = [0u8; COOKIE_LEN];
        for (o, r) in c.iter_mut().zip(&random[..COOKIE_LEN - 1]) {
            *o = COOKIE_ALPHABET[usize::from(*r % 32)];
        }
        Cookie(c)
    }

    /// Takes the first 37 bytes of `bytes` as they are.
    pub fn from_wire(bytes: &[u8]) -> Option<Cookie> {
        let b: [u8; COOKIE_LEN] = bytes.get(..COOKIE_LEN)?.try_into().ok()?;
        Some(Cookie(b))
    }

    /// Compares as iperf3 does (a C-string comparison: up to the first NUL).
    pub fn matches(&self, other: &Cookie) -> bool {
        let end = |c: &[u8; COOKIE_LEN]| c.iter().position(|&b| b == 0).unwrap_or(COOKIE_LEN);
        self.0[..end(&self.0)] == other.0[..end(&other.0)]
    }

    /// True for a cookie iperf3 ≥3.2 could have made (alphabet + NUL).
    pub fn is_well_formed(&self) -> bool {
        self.0[COOKIE_LEN - 1] == 0
            && self.0[..COOKIE_LEN - 1]
                .iter()
                .all(|b| COOKIE_ALPHABET.contains(b))
    }

    /// The printable part (up to the NUL), lossily.
    pub fn as_str(&self) -> String {
        let end = self.0.iter().position(|&b| b == 0).unwrap_or(COOKIE_LEN);
        String::from_utf8_lossy(&self.0[..end]).into_owned()
    }
}

/// Which way data moves on a stream, from one side's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Sender,
    Receiver,
}

/// Test direction as the parameters give it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Client sends.
    Normal,
    /// Server sends (`-R`).
    Reverse,
    /// Both send, `P` streams each way (`--bidir`).
    Bidir,
}

impl Direction {
    /// Data streams of a test with `parallel` streams per direction.
    pub fn stream_count(self, parallel: u32) -> u32 {
        match self {
            Direction::Bidir => parallel * 2,
            _ => parallel,
        }
    }
}

/// The id of the `index`-th stream (0-based) in creation/accept order:
/// 1, 3, 4, 5, … — iperf3 never uses 2, and both sides number by order.
pub fn stream_id(index: u32) -> u32 {
    if index == 0 {
        1
    } else {
        index + 2
    }
}

/// The server's role on the `index`-th stream: receivers first (all of them
/// in normal mode, the first `P` in bidir), then senders.
pub fn server_role(direction: Direction, parallel: u32, index: u32) -> Role {
    match direction {
        Direction::Normal => Role::Receiver,
        Direction::Reverse => Role::Sender,
        Direction::Bidir if index < parallel => Role::Receiver,
        Direction::Bidir => Role::Sender,
    }
}

/// The client's role: the opposite of the server's on every stream (in
/// bidir the client creates its sending streams first).
pub fn client_role(direction: Direction, parallel: u32, index: u32) -> Role {
    match server_role(direction, parallel, index) {
        Role::Sender => Role::Receiver,
        Role::Receiver => Role::Sender,
    }
}

/// The SERVER_ERROR message: `FE`, then the iperf3 error code and errno as
/// big-endian i32.
pub fn server_error_bytes(code: i32, errno: i32) -> [u8; 9] {
    let mut b = [0u8; 9];
    b[0] = State::ServerError.byte();
    b[1..5].copy_from_slice(&code.to_be_bytes());
    b[5..9].copy_from_slice(&errno.to_be_bytes());
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn state_bytes_are_signed() {
        assert_eq!(State::from_byte(0xFF), State::AccessDenied);
        assert_eq!(State::from_byte(0xFE), State::ServerError);
        assert_eq!(State::AccessDenied.byte(), 0xFF);
        assert_eq!(State::ServerError.value(), -2);
        assert_eq!(State::from_byte(0x03), State::Unknown(3));
        assert_eq!(State::from_byte(0x80), State::Unknown(-128));
        for b in [1u8, 2, 4, 9, 10, 11, 12, 13, 14, 16, 0xFF, 0xFE] {
            assert_eq!(State::from_byte(b).byte(), b);
        }
    }

    #[test]
    fn cookie_from_random_uses_the_alphabet_and_a_nul() {
        let c = Cookie::from_random([255; COOKIE_LEN]);
        assert!(c.is_well_formed());
        assert_eq!(c.as_str(), "7".repeat(36));
        let c = Cookie::from_random(std::array::from_fn(|i| i as u8));
        assert_eq!(&c.as_str()[..4], "abcd");
        assert_eq!(c.0[36], 0);
    }

    #[test]
    fn cookie_compares_up_to_the_nul_and_is_otherwise_opaque() {
        let a = Cookie(*b"agiuwt4j3wkxt75cjjjzvef6aiwf6uxc3ydp\0");
        let mut b = a;
        assert!(a.matches(&b));
        b.0[3] = b'Z';
        assert!(!a.matches(&b));
        // An old-style cookie with other characters is still a cookie.
        let old = Cookie(*b"host.1234.5678.ABCDEF-xyz_0123456789\0");
        assert!(!old.is_well_formed());
        assert!(old.matches(&old));
        // Bytes after an early NUL do not matter, as in strcmp.
        let mut x = [0u8; COOKIE_LEN];
        x[0] = b'a';
        let mut y = x;
        y[10] = b'q';
        assert!(Cookie(x).matches(&Cookie(y)));
        assert!(Cookie::from_wire(&[0; 36]).is_none());
    }

    #[test]
    fn stream_ids_skip_two() {
        let ids: Vec<u32> = (0..5).map(stream_id).collect();
        assert_eq!(ids, vec![1, 3, 4, 5, 6]);
    }

    #[test]
    fn bidir_roles_follow_creation_order() {
        let p = 2;
        let server: Vec<Role> = (0..4)
            .map(|i| server_role(Direction::Bidir, p, i))
            .collect();
        assert_eq!(
            server,
            vec![Role::Receiver, Role::Receiver, Role::Sender, Role::Sender]
        );
        assert_eq!(client_role(Direction::Bidir, p, 0), Role::Sender);
        assert_eq!(client_role(Direction::Bidir, p, 3), Role::Receiver);
        assert_eq!(server_role(Direction::Reverse, 4, 0), Role::Sender);
        assert_eq!(client_role(Direction::Normal, 4, 3), Role::Sender);
        assert_eq!(Direction::Bidir.stream_count(3), 6);
    }

    #[test]
    fn server_error_layout() {
        assert_eq!(
            server_error_bytes(141, 0),
            [0xFE, 0, 0, 0, 0x8D, 0, 0, 0, 0]
        );
        let e = Iperf3Error::ServerError {
            code: 141,
            errno: Some(0),
        };
        assert_eq!(
            e.to_string(),
            "iperf3 server error 141 (socket buffer size not set correctly)"
        );
    }

    proptest! {
        #[test]
        fn state_byte_round_trips(b in any::<u8>()) {
            prop_assert_eq!(State::from_byte(b).byte(), b);
        }
    }
}
