//! The flags of `linerate rr` and `linerate crr`: one set for both.

use clap::Args;

use super::engine::EngineArgs;
use crate::cli::common::{OutputArgs, DEFAULT_PORT};
use crate::cli::repeat::RepeatArgs;

#[derive(Debug, Args)]
pub struct RrArgs {
    /// Server to test against; omit to use an embedded loopback server.
    pub host: Option<String>,
    /// Server port.
    #[arg(short, long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Transport of the messages: tcp, or udp (one datagram per message;
    /// a response missing after 1 s counts as lost).
    #[arg(long, value_name = "tcp|udp", default_value = "tcp")]
    pub proto: String,
    /// tcp or udp (as --proto), or a path between two processes on this
    /// host that rr starts itself (no HOST, no server): unix (stream
    /// socket pair), unix-dgram, shm (shared-memory ring slots with a
    /// futex doorbell; a waiting end spins up to 20 µs first, adaptively,
    /// --busy-poll: 50 µs, and Unix sockets then spin too).
    #[arg(long, value_name = "tcp|udp|unix|unix-dgram|shm")]
    pub transport: Option<String>,
    /// One request size in bytes.
    #[arg(short = 's', long, value_name = "SIZE", conflicts_with = "sizes")]
    pub size: Option<String>,
    /// Request sizes to run in turn, e.g. 1,64,1K
    /// [default: rr 1,32,64,160,448,960,1216,1456; crr 1].
    #[arg(long, value_name = "LIST")]
    pub sizes: Option<String>,
    /// Response size in bytes (default: the same as each request).
    #[arg(short = 'r', long, value_name = "SIZE")]
    pub response_size: Option<String>,
    /// Duration of each size (and of each size again under load) [default: 1s].
    #[arg(
        short,
        long,
        value_name = "DURATION",
        conflicts_with = "count",
        allow_negative_numbers = true
    )]
    pub time: Option<String>,
    /// Transactions per flow per size instead of a duration.
    #[arg(short = 'n', long, value_name = "N")]
    pub count: Option<u64>,
    /// Parallel flows, one thread (and connection) each.
    #[arg(short = 'P', long, value_name = "N", default_value_t = 1)]
    pub parallel: u16,
    /// N flows on --threads event-loop threads per side (epoll; with
    /// --engine uring: io_uring completion loops; rr over TCP or UDP and
    /// crr; default one size, 1 byte; with --sizes a phase per size),
    /// in place of -P; crr: N connections in flight, accepted on the
    /// server's threads too; UDP: each flow's lost requests counted as its
    /// own.
    #[arg(long, value_name = "N", conflicts_with = "parallel")]
    pub flows: Option<u32>,
    /// Event-loop threads for --flows on this side (default 1; the server
    /// uses its own --threads, else this number).
    #[arg(long, value_name = "T", requires = "flows")]
    pub threads: Option<u16>,
    /// crr: SO_LINGER 0 on the client's connections, so each ends with a
    /// reset and leaves no TIME_WAIT on either host (for connection rates
    /// the ephemeral port range cannot hold otherwise).
    #[arg(long)]
    pub linger0: bool,
    /// Time K back-to-back transactions per pair of clock reads and report
    /// per-message figures (each transaction counts as its batch's mean).
    #[arg(long, value_name = "K", default_value_t = 1)]
    pub batch: u32,
    /// Non-blocking sockets polled in a spin loop, plus SO_BUSY_POLL where
    /// the kernel allows (reported either way); crr: the connect and the
    /// server's accept spin too.
    #[arg(long)]
    pub busy_poll: bool,
    /// Transactions per second per flow, at most: paced, one every 1/N s
    /// (rr over the network with -P or --flows; not crr or a local
    /// --transport) [default: as fast as the round trips allow].
    #[arg(long, value_name = "N")]
    pub rate: Option<u32>,
    /// Run every size again while N bulk TCP streams load the same path,
    /// and report both side by side (rr over TCP or UDP, and crr; on flow
    /// threads or with --flows on event loops).
    #[arg(long, value_name = "N")]
    pub under_load: Option<u16>,
    /// Pin flow threads to these CPUs, round robin (e.g. 0-3,6); with a
    /// local --transport the serving process's threads too, in turn with
    /// the client's (client flow 0, its server, client flow 1, …).
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// Write every size's full round-trip (and one-way) histogram as CSV.
    #[arg(long, value_name = "FILE")]
    pub histogram: Option<std::path::PathBuf>,
    /// Write an SVG plot: latency percentiles vs size, and the CDF per size
    /// (with --flows, the CDF of the flows' rates too, in FILE-flows.svg).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<std::path::PathBuf>,
    /// Estimate the clock offset with probes over the control connection
    /// even when client and server share a kernel (whose offset is known to
    /// be 0): shows how well the estimator does on this path.
    #[arg(long)]
    pub probe_clock: bool,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Give up connecting after this long.
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub connect_timeout: String,
    #[command(flatten)]
    pub repeat: RepeatArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}
