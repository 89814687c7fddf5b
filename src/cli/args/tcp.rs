//! `linerate tcp`'s flags.

use clap::Args;

use super::engine::{EngineArgs, BUSY_POLL_HELP};
use crate::cli::common::{OutputArgs, DEFAULT_PORT};
use crate::cli::host::TestHostArgs;
use crate::cli::repeat::RepeatArgs;

#[derive(Debug, Args)]
pub struct TcpArgs {
    /// Server to test against; omit to use an embedded loopback server.
    pub host: Option<String>,
    /// HOST runs a real iperf3 server: speak iperf3's protocol (time or
    /// --bytes tests; whole seconds; see README "iperf3 compatibility").
    #[arg(long)]
    pub iperf3: bool,
    /// Server port.
    #[arg(short, long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Measured duration after --omit (default 10s).
    #[arg(
        short,
        long,
        value_name = "DURATION",
        conflicts_with = "bytes",
        allow_negative_numbers = true
    )]
    pub time: Option<String>,
    /// iperf3's `-u` has no place here: refused with the command to use
    /// (`linerate udp`), not clap's "pass it as a value" tip.
    #[arg(short = 'u', long = "udp", hide = true)]
    pub udp: bool,
    /// Bytes to send per direction instead of a duration (e.g. 10G).
    #[arg(short = 'n', long, value_name = "SIZE")]
    pub bytes: Option<String>,
    /// Bytes per write/read call (default 1M: the least CPU per byte on
    /// both sides; see docs/design/numbers.md, "Defaults and why").
    #[arg(short, long, value_name = "SIZE", default_value = "1M")]
    pub len: String,
    /// Parallel streams per direction, one thread each.
    #[arg(short = 'P', long, value_name = "N", default_value_t = 1)]
    pub parallel: u16,
    /// N flows per direction on --threads event-loop threads per side
    /// (epoll; with --engine uring io_uring completion loops: multishot
    /// receives into 4 MiB of buffers per thread; thousands of connections
    /// on a few cores), in place of -P.
    #[arg(long, value_name = "N", conflicts_with = "parallel")]
    pub flows: Option<u32>,
    /// Event-loop threads for --flows on this side (default 1; the server
    /// uses its own --threads, else this number).
    #[arg(long, value_name = "T", requires = "flows")]
    pub threads: Option<u16>,
    /// Server sends, client receives (netperf TCP_MAERTS).
    #[arg(short = 'R', long)]
    pub reverse: bool,
    /// Both send at once (P streams each way).
    #[arg(long, conflicts_with = "reverse")]
    pub bidir: bool,
    /// Pace each sending stream to this payload bit rate (SI: 100M, 9.5G),
    /// by the kernel (SO_MAX_PACING_RATE); default: as fast as possible.
    #[arg(short = 'b', long, value_name = "RATE")]
    pub rate: Option<String>,
    /// Socket send/receive buffer (SO_SNDBUF/SO_RCVBUF) on both ends.
    #[arg(short, long, value_name = "SIZE")]
    pub window: Option<String>,
    /// Pin stream threads to these CPUs, round robin (e.g. 0-3,6).
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// Warm-up before the measured --time, left out of every total (the
    /// test runs omit + time; its intervals show as "(omitted)"), as
    /// iperf3's -O. The server leaves out the bytes the client moved
    /// before it, so both ends count the same bytes and the interval lines
    /// after it add up to the totals (against iperf3 peers each end cuts
    /// on its own timer, as iperf3 does).
    #[arg(short = 'O', long, value_name = "DURATION")]
    pub omit: Option<String>,
    /// Interval between interval lines (0: none, the summary only, as
    /// iperf3's -i 0; intervals are still measured at 1s for --json).
    #[arg(short, long, value_name = "DURATION", default_value = "1s")]
    pub interval: String,
    /// TCP congestion control algorithm (e.g. cubic, bbr).
    #[arg(short = 'C', long, value_name = "ALGO")]
    pub congestion: Option<String>,
    /// Disable Nagle (TCP_NODELAY) on data connections.
    #[arg(short = 'N', long)]
    pub no_delay: bool,
    /// TCP maximum segment size (TCP_MAXSEG).
    #[arg(short = 'M', long, value_name = "BYTES")]
    pub mss: Option<u32>,
    /// Receivers (the server; with -R the client; with --bidir both) consume
    /// data with MSG_TRUNC instead of copying it: for when the bytes need
    /// not be looked at. The report says so.
    #[arg(long)]
    pub skip_rx_copy: bool,
    #[arg(long, long_help = BUSY_POLL_HELP, help = "Busy polling on both sides' data sockets")]
    pub busy_poll: bool,
    /// tcp, or unix: the data connections are Unix stream sockets to the
    /// server (the embedded one, or a `linerate server` on this host and
    /// network namespace); the control connection stays TCP.
    #[arg(long, value_name = "tcp|unix", default_value = "tcp")]
    pub transport: String,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Give up connecting after this long.
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub connect_timeout: String,
    /// Write an SVG plot here: throughput per interval (with --repeat:
    /// each flow's mean ± 1 sd over the trials; with --flows, the CDF of
    /// the flows' rates too, in FILE-flows.svg).
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub host_flags: TestHostArgs,
    #[command(flatten)]
    pub repeat: RepeatArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}
