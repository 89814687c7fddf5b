//! `linerate udp`'s flags.

use clap::Args;

use super::engine::{EngineArgs, BUSY_POLL_HELP};
use crate::cli::common::{OutputArgs, DEFAULT_PORT};
use crate::cli::host::TestHostArgs;
use crate::cli::repeat::RepeatArgs;

#[derive(Debug, Args)]
pub struct UdpArgs {
    /// Server to test against; omit to use an embedded loopback server.
    pub host: Option<String>,
    /// HOST runs a real iperf3 server: speak iperf3's protocol (time or
    /// --bytes tests; whole seconds; see README "iperf3 compatibility").
    #[arg(long)]
    pub iperf3: bool,
    /// Server port (control connection; data ports are negotiated).
    #[arg(short, long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Measured duration after --omit (default 10s).
    #[arg(
        short,
        long,
        value_name = "DURATION",
        conflicts_with = "count",
        allow_negative_numbers = true
    )]
    pub time: Option<String>,
    /// Datagrams to send per direction instead of a duration (split over the streams).
    #[arg(short = 'k', long, value_name = "N")]
    pub count: Option<u64>,
    /// Datagram size in bytes, header included (28..=65507; e.g. 1472, 8972, 12K).
    #[arg(short, long, value_name = "SIZE", default_value = "1472")]
    pub len: String,
    /// Payload bit rate per stream (SI: 100M, 9.5G); 0 = as fast as possible.
    /// Default 1M, as iperf3.
    #[arg(short = 'b', long, value_name = "RATE", conflicts_with = "pps")]
    pub rate: Option<String>,
    /// Datagrams per second per stream (e.g. 0.05, 500k, 2M).
    #[arg(long, value_name = "PPS")]
    pub pps: Option<String>,
    /// Datagrams sent back to back per pacing tick.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub burst: u32,
    /// Parallel streams per direction, one thread each.
    #[arg(short = 'P', long, value_name = "N", default_value_t = 1)]
    pub parallel: u16,
    /// N flows per direction on --threads event-loop threads per side
    /// (epoll, or io_uring completion loops with --engine uring; paced on
    /// one timer heap per thread; each flow's loss its own), in place of
    /// -P.
    #[arg(long, value_name = "N", conflicts_with = "parallel")]
    pub flows: Option<u32>,
    /// Event-loop threads for --flows on this side (default 1; the server
    /// uses its own --threads, else this number).
    #[arg(long, value_name = "T", requires = "flows")]
    pub threads: Option<u16>,
    /// Server sends, client receives.
    #[arg(short = 'R', long)]
    pub reverse: bool,
    /// Both send at once (P streams each way).
    #[arg(long, conflicts_with = "reverse")]
    pub bidir: bool,
    /// Socket send/receive buffer (SO_SNDBUF/SO_RCVBUF) on both ends; forced
    /// past rmem_max/wmem_max when running as root. Default: the kernel's,
    /// except with `-b 0`: 32M per socket (less with many streams, to fit a
    /// server's default --max-test-memory), so the receiver's queue absorbs
    /// an unpaced sender's bursts.
    #[arg(short, long, value_name = "SIZE")]
    pub window: Option<String>,
    /// Pin stream threads to these CPUs, round robin (e.g. 0-3,6).
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// Nice value for the receiving threads on both ends (e.g. -20; below 0 needs root).
    #[arg(long, value_name = "NICE", allow_hyphen_values = true)]
    pub priority: Option<i32>,
    /// Fill payloads with a pattern of the sequence number and check every byte.
    #[arg(long)]
    pub verify: bool,
    #[arg(long, long_help = BUSY_POLL_HELP, help = "Busy polling on both sides' data sockets")]
    pub busy_poll: bool,
    /// Receivers keep reading this long after the senders finish (at least;
    /// stretched to two round trips of the path).
    #[arg(long, value_name = "DURATION", default_value = "250ms")]
    pub drain: String,
    /// Warm-up before the measured --time, left out of every total: loss,
    /// reordering and duplicates count only the datagrams after it (the
    /// test runs omit + time; its intervals show as "(omitted)"), as
    /// iperf3's -O. Both ends cut it by each datagram's send time, so
    /// they count the same datagrams, and a datagram lost just before the
    /// cut is the warm-up's loss.
    #[arg(short = 'O', long, value_name = "DURATION")]
    pub omit: Option<String>,
    /// Interval between interval lines (0: none, the summary only, as
    /// iperf3's -i 0; intervals are still measured at 1s for --json).
    #[arg(short, long, value_name = "DURATION", default_value = "1s")]
    pub interval: String,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Give up connecting after this long.
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub connect_timeout: String,
    /// Test-only: faults the senders inject, e.g. skip:100,dup:200,swap:300.
    #[arg(long, hide = true, value_name = "SCHEDULE")]
    pub inject_faults: Option<String>,
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
