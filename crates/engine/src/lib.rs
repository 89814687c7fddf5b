//! linerate's data path: every syscall the tool makes lives in this crate.
//!
//! - [`clock`]: the monotonic clock every latency timestamp uses, boot id.
//! - [`socket`]: connecting, listening and socket options for data and
//!   control connections.
//! - [`tcp_pace`]: pacing a TCP sender to a bit rate (`SO_MAX_PACING_RATE`).
//! - [`tcp_info`]: `TCP_INFO` read into the protocol's [`linerate_proto::measure::TcpInfo`].
//! - [`cpu`]: process, thread and host CPU accounting.
//! - [`engines`]: the batch-shaped [`engines::Engine`] trait (the I/O
//!   primitives per transport, UDP on the engine's own
//!   [`engines::UdpEndpoint`]), the typed [`engines::EngineKind`] choice,
//!   and one file per engine ([`engines::syscall`], [`engines::uring`],
//!   [`engines::zerocopy`] and its TCP variant [`engines::sendfile`];
//!   [`engines::auto`] is the rule that picks one).
//! - [`stream`]: what a stream's thread shares with its side: progress
//!   counter, stop/abort/drain signals, how a loop ended.
//! - [`tcp`]: the TCP stream loops (send to a limit or stop, read to end),
//!   generic over the engine.
//! - [`event_loop`]: many flows per thread — edge-triggered epoll loops
//!   over non-blocking sockets, `RLIMIT_NOFILE` for thousands of them.
//! - [`rr`]: request/response and connect/request/response loops (one
//!   thread per flow), the bulk load beside them, and one side's results.
//! - [`udp`]: UDP data sockets, the datagram attach handshake, and the UDP
//!   send/receive loops, generic over the engine and over the stream's wire
//!   format ([`udp::StreamFormat`]: linerate's here, iperf3's in the
//!   `linerate-iperf3` crate, which owns its handshake and receive loop).
//! - [`test_hooks`]: what end-to-end tests may switch on through the
//!   environment (a seccomp filter that denies io_uring).
//! - [`caps`]: what the kernel lets accelerated engines use, probed once.
//! - [`netstat`]: the kernel's UDP and interface drop counters.
//! - [`memory`]: handing what a finished test freed back to the kernel.
//! - [`read_ahead`]: an accepted connection handed on with the bytes
//!   already read from it (the crr pool's, issue 26).
//! - [`stdio`]: standard output and error sent to a file (`--logfile`).
//! - [`runner`]: runs one side of a test — a thread per stream, interval
//!   sampling, the stop signal — and produces that side's
//!   [`linerate_proto::measure::SideResults`].

pub mod caps;
pub mod clock;
mod cmsg;
pub mod cpu;
pub mod engines;
pub mod event_loop;
pub mod memory;
pub mod netstat;
pub mod read_ahead;
pub mod rr;
pub mod runner;
pub mod socket;
pub mod stdio;
pub mod stream;
pub mod tcp;
pub mod tcp_info;
pub mod tcp_pace;
#[cfg(test)]
mod test_endpoint;
pub mod test_hooks;
#[cfg(test)]
mod test_pair;
pub mod udp;
pub mod wait;

/// Errors of the data path.
///
/// Each message is complete on its own line: a variant that names its cause
/// in its text does not also return it from `source()`, so printing the
/// chain (`{:#}` in the binary) never says the cause twice (issue 13).
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("{what}: {err}")]
    Io { what: String, err: std::io::Error },
    #[error("peer reset the connection ({0})")]
    PeerReset(String),
    #[error("no data moved for {0} s: peer stalled")]
    Stalled(u64),
    /// A load stream of an rr test under load (`--under-load`) stalled or
    /// failed while the loaded phases ran: they would be measured without
    /// that load, so the test stops.
    #[error("load stream {stream}: {why} (the phases under load would run without it)")]
    LoadFailed { stream: u32, why: String },
    #[error("unknown engine {name:?}; this build has: {known}")]
    UnknownEngine { name: String, known: String },
    #[error("engine {engine} cannot run here: {reason}")]
    EngineUnavailable {
        engine: engines::EngineKind,
        reason: String,
    },
    #[error("{host} has no addresses")]
    NoAddresses { host: String },
    #[error("no address to connect to")]
    NothingToConnect,
    #[error(
        "congestion control {name:?} cannot be used ({source}); this kernel offers: {available}"
    )]
    CongestionControl {
        name: String,
        #[source]
        source: std::io::Error,
        available: String,
    },
    /// The peer did not answer within the protocol's retries.
    #[error("{0}")]
    Unanswered(String),
    /// The peer broke the data protocol (unexpected connection, message or
    /// size).
    #[error("{0}")]
    Protocol(String),
    #[error("could not pin to CPU: {0}")]
    Pin(String),
    #[error("aborted")]
    Aborted,
    /// AF_XDP could not be set up: the reason, and what to do about it
    /// (each message names AF_XDP or XDP itself, as `linerate doctor`
    /// shows them, so nothing is prefixed here).
    #[error("{0}")]
    Xdp(String),
    #[error("request/response: {0}")]
    Rr(linerate_proto::rr::RrError),
    /// More sockets than the process may open, even at its hard limit.
    #[error(
        "{needed} file descriptors needed, the hard limit (RLIMIT_NOFILE) is {hard}: raise it \
         (ulimit -Hn, or LimitNOFILE= in a systemd unit) or ask for fewer flows"
    )]
    TooFewFds { needed: u64, hard: u64 },
    /// `connect` found no free local port (`EADDRNOTAVAIL`): every
    /// ephemeral port towards the peer is taken, by connections open or in
    /// TIME_WAIT ([`socket::connect_error`] says which range).
    #[error(
        "connect to {addr}: no free local port (EADDRNOTAVAIL): the ephemeral ports \
         ({range}) are all taken by connections open or in TIME_WAIT; remedies: a wider range \
         (sysctl -w net.ipv4.ip_local_port_range=\"1024 65535\"), fewer connections in flight \
         (--flows), or crr --linger0 (SO_LINGER 0 on the client: each connection ends with a \
         reset, leaving no TIME_WAIT on either host)"
    )]
    PortsExhausted {
        addr: std::net::SocketAddr,
        range: String,
    },
}

impl From<linerate_proto::rr::RrError> for EngineError {
    fn from(e: linerate_proto::rr::RrError) -> Self {
        EngineError::Rr(e)
    }
}

impl EngineError {
    /// An I/O error while doing `what`.
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        EngineError::Io {
            what: what.into(),
            err: source,
        }
    }
}
