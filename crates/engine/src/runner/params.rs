//! What a side's run is given: its data streams (socket, role, limits),
//! how they run (lengths, timing, pinning, UDP pacing and checks, event
//! loops) and whose CPU time it reports.

use std::net::{TcpStream, UdpSocket};
use std::time::Duration;

use linerate_proto::datagram::Fault;
use linerate_proto::measure::Role;
use linerate_proto::wire::Side;

/// A stream's socket.
#[derive(Debug)]
pub enum DataSocket {
    Tcp(TcpStream),
    /// Connected to the peer's data socket.
    Udp(UdpSocket),
}

/// One established data connection and what this side does on it.
#[derive(Debug)]
pub struct StreamSetup {
    pub id: u32,
    /// Which side sends on this stream.
    pub sender: Side,
    pub role: Role,
    /// For senders of a byte-limited test: bytes to send.
    pub bytes: Option<u64>,
    /// For senders of a datagram-limited test: sequence numbers to issue.
    pub datagrams: Option<u64>,
    pub sock: DataSocket,
}

/// How this side's UDP streams run.
#[derive(Debug, Clone, Default)]
pub struct UdpParams {
    /// Datagrams per 1000 s per stream; `None`: unpaced.
    pub millipps: Option<u64>,
    pub burst: u32,
    pub verify: bool,
    pub faults: Vec<Fault>,
    /// Nice value for receiving threads.
    pub priority: Option<i32>,
}

/// Whose CPU time a side reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuScope {
    /// The whole process (client and server in separate processes).
    Process,
    /// Only this side's threads (client and server share a process).
    Threads,
}

/// How this side runs.
#[derive(Debug, Clone)]
pub struct RunParams {
    /// Bytes per read/write call.
    pub len: usize,
    /// Senders stop after `omit + time`; `None` for byte-limited tests.
    pub time: Option<Duration>,
    pub omit: Duration,
    pub interval: Duration,
    /// Pin stream `i` to `cpus[i % cpus.len()]` when not empty.
    pub cpus: Vec<usize>,
    pub cpu_scope: CpuScope,
    /// UDP tests: pacing and checks.
    pub udp: Option<UdpParams>,
    /// TCP receivers consume data with `MSG_TRUNC` (`--skip-rx-copy`).
    pub skip_rx_copy: bool,
    /// `--busy-poll`: how the stream loops spin; `None`: blocking sockets.
    pub busy_poll: Option<linerate_proto::rr_core::SpinMode>,
    /// How this side's stream receivers spin on an engine that spins by
    /// default (`Engine::spins`: `xdp`) without `--busy-poll`.
    pub spin_mode: linerate_proto::rr_core::SpinMode,
    /// `--flows`/`--threads`: the TCP or UDP streams run as flows on this many
    /// event-loop threads ([`crate::event_loop`]); `None`: a thread each.
    pub loops: Option<usize>,
    /// `-w`: the window the user set on the data sockets (then the loops
    /// never bound their send buffers, [`crate::event_loop::tcp::sndbuf`]).
    pub window: Option<u32>,
}
