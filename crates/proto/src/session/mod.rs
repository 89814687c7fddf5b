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
/// Slack after the planned end of a time-limited data phase before a side
/// whose streams have not finished declares the test stalled.
pub const STALL_GRACE: Duration = Duration::from_secs(10);
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
    /// connection says ([`heartbeat`]). Sessions without heartbeats
    /// ignore it.
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

/// Deadline for the data phase: the planned end plus slack, if time-limited.
pub(crate) fn data_deadline(spec: &crate::spec::TestSpec, started: Instant) -> Option<Instant> {
    spec.data_phase_ms()
        .map(|ms| started + Duration::from_millis(ms) + STALL_GRACE)
}
