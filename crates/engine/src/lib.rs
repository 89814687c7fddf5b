//! linerate's data path: every syscall the tool makes lives in this crate.
//!
//! - [`clock`]: the monotonic clock every latency timestamp uses, boot id.
//! - [`socket`]: connecting, listening and socket options for data and
//!   control connections.
//! - [`tcp_info`]: `TCP_INFO` read into the protocol's [`linerate_proto::measure::TcpInfo`].
//! - [`cpu`]: process, thread and host CPU accounting.
//! - [`engine`]: the [`engine::Engine`] trait that moves bytes on one stream,
//!   with the plain blocking-syscall engine; faster engines (batching,
//!   io_uring, zero copy) plug in behind the same trait.
//! - [`rr`]: request/response and connect/request/response loops (one
//!   thread per flow), the bulk load beside them, and one side's results.
//! - [`udp`]: UDP data sockets, the datagram attach handshake, and the UDP
//!   send/receive loops of the syscall engine.
//! - [`caps`]: what the kernel lets accelerated engines use, probed once.
//! - [`engines::batch`]: the `batch` engine: `sendmmsg`/`recvmmsg` with UDP
//!   GSO/GRO, `writev`, `MSG_TRUNC`.
//! - [`netstat`]: the kernel's UDP and interface drop counters.
//! - [`runner`]: runs one side of a test — a thread per stream, interval
//!   sampling, the stop signal — and produces that side's
//!   [`linerate_proto::measure::SideResults`].

pub mod caps;
pub mod clock;
pub mod cpu;
pub mod engine;
/// Engines beyond the syscall one, one file each.
pub mod engines {
    pub mod batch;
}
pub mod netstat;
pub mod rr;
pub mod runner;
pub mod socket;
pub mod tcp_info;
pub mod udp;

/// Errors of the data path.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("peer reset the connection ({0})")]
    PeerReset(String),
    #[error("no data moved for {0} s: peer stalled")]
    Stalled(u64),
    #[error("{0}")]
    Unsupported(String),
    #[error("aborted")]
    Aborted,
    #[error("request/response: {0}")]
    Rr(#[from] linerate_proto::rr::RrError),
}

impl EngineError {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        EngineError::Io {
            what: what.into(),
            source,
        }
    }
}
