//! Control-connection state machines for both roles.
//!
//! The I/O layer owns the sockets and the clock. It feeds a session the bytes
//! it read ([`client::ClientSession::receive`]), the events it observed (data
//! streams attached, local streams finished, peer closed, deadline passed) and
//! `now`; it takes back bytes to write ([`Outbox`]), actions to carry out, and
//! the next deadline. A session never blocks and never fails silently: every
//! path ends in an outcome the I/O layer can report.

use std::time::Instant;

use crate::measure::SideResults;
use crate::spec::TestSpec;
use crate::wire::SentCount;

pub mod client;
mod deadline;
mod exchange;
mod frames;
pub mod heartbeat;
mod outcome;
pub mod server;

/// How long each handshake step may take (Hello→Accept, Accept→Start).
pub use crate::limits::HANDSHAKE_TIMEOUT;

pub(crate) use deadline::DataDeadline;
pub use deadline::{DRAIN_CAP, RESULTS_CAP, STALL_GRACE};
pub use frames::Outbox;
pub use outcome::{ControlIoError, EarlyStop, Ended, SessionError, RESULTS_TIMEOUT};

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
    /// is not stalled (`DataDeadline`).
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
