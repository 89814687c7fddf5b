//! How a session ends: which side stopped a test early, what went wrong,
//! and the outcome a finished session reports.

use std::time::Duration;

use crate::wire::{RefuseCode, WireError};

/// How long a side that has finished waits for the peer's results after
/// its end, and after the peer was last heard while it waits (the
/// session's `ResultsWait`, within `RESULTS_CAP`).
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
    /// The control connection timed out or ended.
    #[error(transparent)]
    Control(#[from] ControlIoError),
    #[error("peer aborted the test: {0}")]
    PeerAborted(String),
    /// The peer sent no control bytes for the heartbeat's silence limit
    /// while the test ran ([`heartbeat`](super::heartbeat)); the reason is in words.
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

/// The control connection timed out or ended while a session ran: one
/// type, with one wording, for every wire protocol's sessions (native
/// here, iperf3's `Iperf3Error` embeds it too).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlIoError {
    #[error("timed out while {0}")]
    Timeout(&'static str),
    #[error("peer closed the control connection while {0}")]
    PeerClosed(&'static str),
    /// ECONNRESET: not a close, so not said as one.
    #[error("the peer reset the control connection while {0} (connection reset: its process ended with bytes unread, or its host or a firewall on the path dropped the connection)")]
    PeerReset(&'static str),
    #[error("the control connection failed while {state}: {why}")]
    Failed { state: &'static str, why: String },
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
    pub fn error(self, state: &'static str) -> ControlIoError {
        match self {
            Ended::Closed => ControlIoError::PeerClosed(state),
            Ended::Reset => ControlIoError::PeerReset(state),
            Ended::Failed(why) => ControlIoError::Failed { state, why },
        }
    }
}
