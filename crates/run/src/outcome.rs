//! How a client run ends: the error that maps to its exit status, and the
//! flag the SIGINT handler sets. Every kind of client (native, iperf3,
//! local transports, sweeps) shares them.

use std::sync::atomic::AtomicBool;

/// Set by the SIGINT handler; the control loop turns it into an Abort.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// A failed test, with the exit status it maps to.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{0}")]
    Refused(String),
    /// The user pressed Ctrl-C; the server was told. `reported`: the test
    /// stopped early and what was measured until then was reported;
    /// otherwise (it was not running yet) nothing was.
    #[error("{}", if *reported { "interrupted by the user: the figures above cover the test until then" } else { "test aborted: interrupted by the user" })]
    Interrupted { reported: bool },
    /// The server was stopped by its operator mid-test and stopped the
    /// test; what was measured until then was reported.
    #[error("the server stopped the test before its limit (it is shutting down): the figures above cover the test until then")]
    ServerStopped,
    #[error(transparent)]
    Failed(#[from] anyhow::Error),
}

impl ClientError {
    /// The test was cut short and what it measured until then is already
    /// reported (the files asked for are written from it; a machine format
    /// gets no second document).
    pub fn reported(&self) -> bool {
        matches!(
            self,
            ClientError::Interrupted { reported: true } | ClientError::ServerStopped
        )
    }

    pub fn exit_code(&self) -> i32 {
        match self {
            ClientError::Refused(_) => 3,
            // 128 + SIGINT, as shells report a process ended by Ctrl-C.
            ClientError::Interrupted { .. } => 130,
            ClientError::ServerStopped => 1,
            ClientError::Failed(_) => 1,
        }
    }
}
