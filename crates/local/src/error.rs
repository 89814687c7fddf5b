//! The local transports' error type: what can go wrong moving a message
//! between two processes on this host.

use crate::transport::Transport;
use std::io;

/// What can go wrong on a local transport.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    #[error("{what}: {source}")]
    Io {
        what: &'static str,
        #[source]
        source: io::Error,
    },
    /// The other process closed its end or exited.
    #[error("the peer process is gone ({0})")]
    PeerGone(&'static str),
    /// A message the transport cannot carry whole.
    #[error("{transport}: a {len}-byte message exceeds the {limit}-byte limit ({why})")]
    TooLong {
        transport: Transport,
        len: usize,
        limit: usize,
        why: &'static str,
    },
    #[error("protocol: {0}")]
    Protocol(String),
    /// The user interrupted the run.
    #[error("interrupted")]
    Aborted,
}

impl LocalError {
    pub(crate) fn io(what: &'static str) -> impl FnOnce(io::Error) -> LocalError {
        move |source| match source.kind() {
            io::ErrorKind::UnexpectedEof
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::ConnectionReset => LocalError::PeerGone(what),
            _ => LocalError::Io { what, source },
        }
    }
}
