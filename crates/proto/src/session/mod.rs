//! Control-connection state machines for both roles.
//!
//! The I/O layer owns the sockets and the clock. It feeds a session the bytes
//! it read ([`client::ClientSession::receive`]), the events it observed (data
//! streams attached, local streams finished, peer closed, deadline passed) and
//! `now`; it takes back bytes to write ([`Outbox`]), actions to carry out, and
//! the next deadline. A session never blocks and never fails silently: every
//! path ends in an outcome the I/O layer can report.

use std::time::{Duration, Instant};

use crate::measure::SideResults;
use crate::spec::TestSpec;
use crate::wire::{self, Message, RefuseCode, SentCount, WireError};

pub mod client;
mod exchange;
pub mod heartbeat;
pub mod server;

/// How long each handshake step may take (Hello→Accept, Accept→Start).
pub use crate::limits::HANDSHAKE_TIMEOUT;
/// Slack after the planned end of a time-limited data phase, and after the
/// peer's data last arrived, before a side whose streams have not finished
/// declares the test stalled ([`DataDeadline`]).
pub const STALL_GRACE: Duration = Duration::from_secs(10);
/// The most a data phase still receiving the peer's data may run past its
/// planned deadline ([`DataDeadline`]): what a sender queued before its
/// planned end may take long to cross a lossy bottleneck, but a peer
/// trickling data cannot hold a side for ever.
pub const DRAIN_CAP: Duration = Duration::from_secs(60);
/// How long a side that has finished waits for the peer's results.
pub const RESULTS_TIMEOUT: Duration = Duration::from_secs(15);

/// Which side stopped a running test before its limit. Either side may:
/// the client when its user interrupts it or its output is closed, the
/// server when its operator stops the server. The test then ends as if
/// its limit were reached and both sides still exchange what they measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EarlyStop {
    ByClient,
    ByServer,
}

/// Why a session ended without results.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SessionError {
    #[error("server refused the test ({code:?}): {message}")]
    Refused { code: RefuseCode, message: String },
    #[error("protocol error: {0}")]
    Wire(#[from] WireError),
    #[error("unexpected {message} frame while {state}")]
    Unexpected {
        message: &'static str,
        state: &'static str,
    },
    #[error("timed out while {0}")]
    Timeout(&'static str),
    #[error("peer closed the control connection while {0}")]
    PeerClosed(&'static str),
    /// ECONNRESET: not a close, so not said as one.
    #[error("the peer reset the control connection while {0} (connection reset: its process ended with bytes unread, or its host or a firewall on the path dropped the connection)")]
    PeerReset(&'static str),
    #[error("the control connection failed while {state}: {why}")]
    ControlFailed { state: &'static str, why: String },
    #[error("peer aborted the test: {0}")]
    PeerAborted(String),
    /// The peer sent no control bytes for the heartbeat's silence limit
    /// while the test ran ([`heartbeat`]); the reason is in words.
    #[error("{0}")]
    PeerSilent(String),
    #[error("test aborted: {0}")]
    Aborted(String),
    #[error("data stream failed: {0}")]
    Stream(String),
    /// The peer sent something impossible or other than agreed
    /// ([`crate::check`]); it is not obeyed or reported.
    #[error("refusing the peer's {what}: {why}")]
    Implausible { what: &'static str, why: String },
}

/// How a control connection ended, as the I/O layer read it: each has its
/// own words, so a reset is never reported as the peer's close.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// End of file: the peer closed it.
    Closed,
    /// ECONNRESET.
    Reset,
    /// Any other failure, in the system's words.
    Failed(String),
}

impl Ended {
    /// The error of a session whose connection ended so while `state`.
    pub fn error(self, state: &'static str) -> SessionError {
        match self {
            Ended::Closed => SessionError::PeerClosed(state),
            Ended::Reset => SessionError::PeerReset(state),
            Ended::Failed(why) => SessionError::ControlFailed { state, why },
        }
    }
}

/// What both sessions offer the I/O layer's control loop, so client and
/// server drive theirs with one loop: carry out actions, write the outbox,
/// report the data phase's progress, feed what arrived, call back at the
/// deadline.
pub trait Session {
    /// What the I/O layer must do next ([`client::ClientAction`],
    /// [`server::ServerAction`]).
    type Action;
    fn poll_action(&mut self) -> Option<Self::Action>;
    /// Bytes to write to the control connection.
    fn outbox(&mut self) -> &mut Outbox;
    /// The agreed spec, once there is one.
    fn spec(&self) -> Option<&TestSpec>;
    fn is_finished(&self) -> bool;
    /// Bytes read from the control connection that arrived at `clock_ns`
    /// (monotonic clock, ns).
    fn receive_at(&mut self, bytes: &[u8], now: Instant, clock_ns: u64);
    /// UDP: every local sender finished, having issued these counts.
    fn local_senders_finished(&mut self, streams: Vec<SentCount>);
    /// This side's streams have all ended; `results` is what it measured.
    fn local_finished(&mut self, results: SideResults, now: Instant);
    /// The control connection reached end of file or failed ([`Ended`]).
    fn connection_ended(&mut self, how: Ended);
    /// Call when `now` has reached the session's deadline.
    fn handle_timeout(&mut self, now: Instant);
    /// The peer's data reached this side at `now` (its received counters
    /// grew): the peer and the path are alive, whatever the control
    /// connection says ([`heartbeat`]), and a data phase still receiving
    /// is not stalled ([`DataDeadline`]).
    fn peer_data_arrived(&mut self, _now: Instant) {}
}

/// Implements [`Session`] with the session's inherent methods.
macro_rules! impl_session {
    ($ty:ty, $action:ty) => {
        impl $crate::session::Session for $ty {
            type Action = $action;
            fn poll_action(&mut self) -> Option<$action> {
                <$ty>::poll_action(self)
            }
            fn outbox(&mut self) -> &mut $crate::session::Outbox {
                <$ty>::outbox(self)
            }
            fn spec(&self) -> Option<&$crate::spec::TestSpec> {
                <$ty>::spec(self)
            }
            fn is_finished(&self) -> bool {
                <$ty>::is_finished(self)
            }
            fn receive_at(&mut self, bytes: &[u8], now: std::time::Instant, clock_ns: u64) {
                <$ty>::receive_at(self, bytes, now, clock_ns)
            }
            fn local_senders_finished(&mut self, streams: Vec<$crate::wire::SentCount>) {
                <$ty>::local_senders_finished(self, streams)
            }
            fn local_finished(
                &mut self,
                results: $crate::measure::SideResults,
                now: std::time::Instant,
            ) {
                <$ty>::local_finished(self, results, now)
            }
            fn connection_ended(&mut self, how: $crate::session::Ended) {
                <$ty>::connection_ended(self, how)
            }
            fn handle_timeout(&mut self, now: std::time::Instant) {
                <$ty>::handle_timeout(self, now)
            }
            fn peer_data_arrived(&mut self, now: std::time::Instant) {
                <$ty>::peer_data_arrived(self, now)
            }
        }
    };
}
impl_session!(client::ClientSession, client::ClientAction);
impl_session!(server::ServerSession, server::ServerAction);

/// Bytes waiting to be written to the control connection.
#[derive(Debug, Default)]
pub struct Outbox {
    buf: Vec<u8>,
}

impl Outbox {
    pub(crate) fn push(&mut self, msg: &Message) {
        wire::encode(msg, &mut self.buf);
    }

    /// Queues everything `other` holds after what is queued here.
    pub(crate) fn append(&mut self, mut other: Outbox) {
        self.buf.append(&mut other.buf);
    }

    /// Bytes queued as they are (another protocol's sessions on the same
    /// driver: iperf3's state bytes and length-prefixed JSON, in the
    /// `linerate-iperf3` crate, are not native frames).
    pub fn from_bytes(buf: Vec<u8>) -> Outbox {
        Outbox { buf }
    }

    /// The queue itself, for a session that writes its own framing.
    pub fn raw(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// Takes everything queued so far (empty when nothing is pending).
    pub fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
}

/// Accumulates received bytes and yields whole frames.
#[derive(Debug, Default)]
pub(crate) struct Inbox {
    buf: Vec<u8>,
}

impl Inbox {
    pub(crate) fn extend(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    pub(crate) fn next(&mut self) -> Result<Option<Message>, WireError> {
        match wire::decode(&self.buf)? {
            None => Ok(None),
            Some((msg, used)) => {
                self.buf.drain(..used);
                Ok(Some(msg))
            }
        }
    }
}

/// A time-limited data phase's deadline: [`STALL_GRACE`] after its planned
/// end, and moved on while the peer's data still arrives
/// ([`Self::progressed`]), to at most [`DRAIN_CAP`] past that.
///
/// Issue 27: a sender stops at the planned end, but what it queued (a TCP
/// send buffer of at least the path's BDP, as RFC 6349 asks) still has to
/// cross the path. Through a bottleneck with a short queue, where TCP
/// crawls through losses (qualify's e2e router: 10 Mbit/s, a 3000-byte
/// tbf queue, about 160 kbit/s), a 2 s transfer's receiver read its last
/// byte 9–12 s after the start, and with probes beside it or a loaded
/// host, past the fixed deadline: "timed out while waiting for the data
/// streams to finish" for a test whose data was still moving. A stall is
/// a phase on which nothing arrives, so that is what the deadline counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DataDeadline {
    at: Instant,
    latest: Instant,
}

impl DataDeadline {
    /// The deadline of `spec`'s data phase started at `started`; none
    /// without a planned end.
    pub(crate) fn new(spec: &TestSpec, started: Instant) -> Option<Self> {
        let at = started + Duration::from_millis(spec.data_phase_ms()?) + STALL_GRACE;
        Some(DataDeadline {
            at,
            latest: at + DRAIN_CAP,
        })
    }

    /// Moved on to `cap` at most (a server's `--max-time`), though never
    /// before the planned deadline.
    pub(crate) fn capped(mut self, cap: Instant) -> Self {
        self.latest = self.latest.min(cap.max(self.at));
        self
    }

    pub(crate) fn at(&self) -> Instant {
        self.at
    }

    /// The peer's data arrived at `now`: the phase is not stalled until
    /// [`STALL_GRACE`] after it (within the cap). Returns the deadline.
    pub(crate) fn progressed(&mut self, now: Instant) -> Instant {
        self.at = self.at.max((now + STALL_GRACE).min(self.latest));
        self.at
    }
}
