//! Flags as typed. Values stay strings where they carry units (`10s`,
//! `128K`), so one parser in `linerate-stats` handles them and validation in
//! `cli::validate` can name the flag in its error.

use std::net::IpAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

pub use super::common::{OutputArgs, DEFAULT_PORT};
use super::host::TestHostArgs;
use super::repeat::RepeatArgs;

/// `--engine`'s values, listed in `--help` from the engines this build has
/// (issue 13). Taken as typed: `cli::validate` resolves the name once and
/// says why an unknown or unsupported engine is refused.
#[derive(Debug, Clone, Copy)]
pub struct EngineNames;

impl clap::builder::TypedValueParser for EngineNames {
    type Value = String;

    fn parse_ref(
        &self,
        _cmd: &clap::Command,
        _arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        Ok(value.to_string_lossy().into_owned())
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            linerate_engine::engines::EngineKind::ALL
                .iter()
                .map(|k| clap::builder::PossibleValue::new(k.name()).help(k.summary()))
                .chain(std::iter::once(
                    clap::builder::PossibleValue::new(linerate_run::config::AUTO)
                        .help("the fastest engine this kernel runs for each test (the server applies it per test)"),
                )),
        ))
    }
}

/// The data-path engine of this side and its options.
#[derive(Debug, Clone, Args)]
pub struct EngineArgs {
    /// Data-path engine for this side (an engine this kernel lacks is
    /// refused with the reason). Default `auto`: per test, the fastest
    /// engine this kernel runs for it (UDP streams: batch; TCP streams and
    /// request/response: syscall), named in the report. `zerocopy:sendfile`
    /// runs TCP stream tests only (sendfile from a memory file, splice
    /// receive) and is refused for UDP and request/response tests.
    #[arg(long, default_value = "auto", value_parser = EngineNames)]
    pub engine: String,
    /// Client: ask the server to run its side with this engine, or `auto`
    /// (the server's own rule for the test, among the engines it offers);
    /// it may refuse: not allowed by its --allow-engines, or not supported
    /// by its kernel. The report names each side's engine.
    #[arg(long, value_name = "ENGINE")]
    pub server_engine: Option<String>,
    /// batch: UDP senders let the kernel segment runs of datagrams
    /// (UDP_SEGMENT); refused where the kernel or path cannot. Default: on
    /// where possible (the report says why it is off).
    #[arg(long, overrides_with = "no_gso")]
    pub gso: bool,
    /// batch: one datagram per sendmmsg message.
    #[arg(long, overrides_with = "gso")]
    pub no_gso: bool,
    /// batch: UDP receivers take runs of datagrams in one buffer (UDP_GRO),
    /// split and checked one by one; refused where the kernel cannot.
    /// Default: on where possible.
    #[arg(long, overrides_with = "no_gro")]
    pub gro: bool,
    /// batch: one datagram per recvmmsg message.
    #[arg(long, overrides_with = "gro")]
    pub no_gro: bool,
    /// xdp: where the XDP program runs: `native` (in the driver, before
    /// an skb exists) or `generic` (after it; any interface, slower).
    /// Default: native where the driver says it redirects to AF_XDP.
    /// What the interface refuses is refused with the reason, never
    /// replaced by the other mode.
    #[arg(long, value_name = "MODE", value_parser = ["native", "generic"])]
    pub xdp_mode: Option<String>,
    /// xdp: copy mode (the kernel copies each frame; any interface, veth
    /// included). Default: zero-copy where the driver offers it.
    #[arg(long, overrides_with = "xdp_zerocopy")]
    pub xdp_copy: bool,
    /// xdp: zero-copy (the driver works in the UMEM; needs driver support,
    /// refused with the reason otherwise).
    #[arg(long, overrides_with = "xdp_copy")]
    pub xdp_zerocopy: bool,
}

/// Busy polling on a throughput test's data sockets.
pub const BUSY_POLL_HELP: &str = "\
Busy polling on both sides: non-blocking data sockets that spin on EAGAIN (up
to 50 µs per wait, then a poll(2) sleep; yielding when the CPU is shared), plus
SO_BUSY_POLL and SO_PREFER_BUSY_POLL where the kernel allows; the report says
what the kernel accepted and how many waits slept. Costs a CPU per stream";

const AFTER_HELP: &str = "\
Units: sizes take K/M/G (1024-based, as iperf3: -l 128K = 131072 bytes); rates
and printed figures are SI (1 Gbit/s = 10^9 bit/s, 1 GB = 10^9 bytes);
durations take us/ms/s/m/h (a bare number is seconds).

netperf names work too: `linerate TCP_STREAM HOST`, `linerate TCP_MAERTS -H HOST -l 10`,
`linerate UDP_STREAM HOST`, `linerate TCP_RR HOST -- -r 64,64`, `linerate TCP_CRR HOST`
(one size, default 1 byte, as netperf; `linerate rr` runs eight sizes by default).

iperf3's command line works too: `linerate iperf3 -c HOST [iperf3 flags]` runs the test
over iperf3's protocol and prints it as iperf3 does (-J: iperf3's JSON schema);
`linerate iperf3 -s` is `linerate server` (see `linerate iperf3 --help`). The binary
installed or linked as `iperf3` behaves as `linerate iperf3`.

Exit status: 0 test completed, 1 test failed (network, peer, I/O), 2 bad
command line, 3 server refused the test (busy, invalid parameters, version),
130 interrupted (Ctrl-C; the server is told; tcp/udp tests and sweeps still report
what was measured until then, marked as interrupted). qualify: 4 an SLA
threshold failed, 5 the qualification could not run.";

#[derive(Debug, Parser)]
#[command(
    name = "linerate",
    version,
    about = "Network throughput and latency measurement: does the path reach line rate, what is lost, what does it cost.",
    after_help = AFTER_HELP,
    propagate_version = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Cmd,
    /// Pre-shared key file: client and server prove they hold it (HMAC-SHA256
    /// challenge-response; the key never crosses the wire). Both sides must
    /// use the same key, or neither.
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "LINERATE_AUTH_KEY_FILE"
    )]
    pub auth_key: Option<std::path::PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Serve tests to linerate clients and to real iperf3 3.x clients, on one
    /// port (one test at a time unless --max-concurrent).
    Server(ServerArgs),
    /// TCP throughput: stream (client sends), --reverse (server sends), --bidir.
    ///
    /// Without HOST, runs against a server embedded in this process on
    /// loopback: the host's own TCP stack, with no set-up.
    Tcp(TcpArgs),
    /// UDP throughput and loss: paced, numbered datagrams; loss, reordering,
    /// duplicates and corruption counted from the sequence numbers.
    ///
    /// Without HOST, runs against a server embedded in this process on
    /// loopback.
    Udp(UdpArgs),
    /// Request/response latency per message size (netperf TCP_RR/UDP_RR,
    /// sockperf ping-pong).
    ///
    /// For each size: transactions/s and the round-trip distribution (HDR
    /// histogram, ns resolution), one-way delays each way where the clock
    /// offset allows, and with --under-load the same under bulk TCP load.
    /// Without HOST, runs against an embedded loopback server.
    Rr(RrArgs),
    /// Connection rate: connect, request, response, close, as fast as
    /// possible (netperf TCP_CRR); connections/s and the latency of the
    /// whole exchange.
    Crr(RrArgs),
    /// Whole messages, each acknowledged by the receiver, between two
    /// processes on this host or to a linerate server: per size and
    /// concurrency, messages/s, throughput and per-message time over
    /// repeated trials.
    ///
    /// `linerate msg --sizes 56,4K,64K,1M --concurrency 1,8 --trials 20
    /// --verify --transport unix,shm`: both ends run here (msg starts the
    /// receiving process itself, no server); transports: tcp (loopback),
    /// unix, unix-dgram, shm (shm-direct and shm-bulk). `linerate msg HOST
    /// …`: the server at HOST receives and acknowledges, over TCP.
    Msg(super::msg::MsgArgs),
    /// The receiving process of `linerate msg` (started by it).
    #[command(name = "__msg-peer", hide = true)]
    MsgPeer(super::msg::MsgPeerArgs),
    /// Run one test once per engine (with and without busy polling, under
    /// each --threading model) and print one table: each figure with its
    /// ratio to the first variant.
    ///
    /// `linerate compare [HOST] tcp|udp|rr|crr [test flags] --engines
    /// syscall,batch,uring,zerocopy [--threading per-flow,loop:T]
    /// [--busy-poll both] [--preload LIB] [--repeat N] [--plot FILE.svg]
    /// [--report FILE.html]`. Without HOST, each variant runs against an
    /// embedded loopback server using the same engine; with HOST, the
    /// server's own engine serves every variant. --json and --csv carry
    /// every figure with its ratio to the first.
    Compare(CompareArgs),
    /// Run a test over a grid of sizes × rates: a table, an SVG plot of
    /// received vs sent, and optionally the highest zero-loss rate per size.
    #[command(subcommand)]
    Sweep(SweepCmd),
    /// A path's acceptance test in one run: preflight, then RFC 2544 (UDP
    /// throughput, latency, loss vs load, back-to-back), ITU-T Y.1564
    /// (service configuration steps, performance test) and RFC 6349 (TCP
    /// throughput), each KPI against --sla, one verdict and exit status.
    Qualify(QualifyArgs),
    /// Interface status: state, speed, MTU, addresses, driver, offloads,
    /// queues and counters; --watch for live rates.
    Iface(super::host::IfaceArgs),
    /// Check the host settings that limit a test (buffers, backlog, busy
    /// polling, MTU, offloads, governor, priorities, isolation) and say how
    /// to change each; --apply changes the sysctls.
    Doctor(super::host::DoctorArgs),
    /// ICMP echo: round-trip distribution (HDR histogram), TTL, loss and
    /// duplicates; exit status 1 when nothing answers.
    Ping(super::host::PingArgs),
    /// Print shell completions (bash, zsh, fish, elvish, powershell), e.g.
    /// `linerate completions bash > /etc/bash_completion.d/linerate`.
    Completions(super::generate::CompletionsArgs),
    /// Print the man page (roff), e.g.
    /// `linerate man > /usr/local/share/man/man1/linerate.1`.
    Man,
}

impl Cmd {
    /// Takes the host flags out of a test's arguments (before they are
    /// validated into a config), so `host::attach` can add them afterwards.
    pub fn take_host_flags(&mut self) -> TestHostArgs {
        match self {
            Cmd::Tcp(t) => std::mem::take(&mut t.host_flags),
            Cmd::Udp(u) => std::mem::take(&mut u.host_flags),
            _ => TestHostArgs::default(),
        }
    }

    /// Takes the repeat flags out of a test's arguments.
    pub fn take_repeat_flags(&mut self) -> RepeatArgs {
        match self {
            Cmd::Tcp(t) => std::mem::take(&mut t.repeat),
            Cmd::Udp(u) => std::mem::take(&mut u.repeat),
            Cmd::Rr(r) | Cmd::Crr(r) => std::mem::take(&mut r.repeat),
            Cmd::Sweep(SweepCmd::Udp(a)) => std::mem::take(&mut a.run),
            _ => RepeatArgs::default(),
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum SweepCmd {
    /// UDP: every --sizes × --pps (or --rates) point, one short test each.
    Udp(SweepUdpArgs),
}

#[derive(Debug, Args)]
pub struct SweepUdpArgs {
    /// Server to test against; omit to use an embedded loopback server.
    pub host: Option<String>,
    /// Server port.
    #[arg(short, long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Datagram sizes, bytes, header included (e.g. 64,1472,8972).
    #[arg(long, value_name = "LIST", default_value = "1472")]
    pub sizes: String,
    /// Datagram rates per stream: START:STOP:STEP or a list (e.g. 50k:1M:50k).
    #[arg(long, value_name = "RANGE", conflicts_with = "rates")]
    pub pps: Option<String>,
    /// Payload bit rates per stream: START:STOP:STEP or a list (e.g. 100M:1G:100M).
    #[arg(long, value_name = "RANGE")]
    pub rates: Option<String>,
    /// Duration of each trial.
    #[arg(short, long, value_name = "DURATION", default_value = "2s")]
    pub time: String,
    /// Parallel streams per direction.
    #[arg(short = 'P', long, value_name = "N", default_value_t = 1)]
    pub parallel: u16,
    /// Server sends, client receives.
    #[arg(short = 'R', long)]
    pub reverse: bool,
    /// Socket buffers on both ends (forced past the sysctl limits as root).
    #[arg(short, long, value_name = "SIZE")]
    pub window: Option<String>,
    /// Datagrams back to back per pacing tick.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub burst: u32,
    /// After the grid, binary-search (RFC 2544 style) each size for the
    /// highest rate in the grid's range with loss ≤ --max-loss.
    #[arg(long)]
    pub find_zero_loss: bool,
    /// Loss the zero-loss search accepts, percent.
    #[arg(long, value_name = "PERCENT", default_value = "0")]
    pub max_loss: f64,
    /// Write an SVG plot of received vs sent data and packet rates here.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Give up connecting after this long.
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub connect_timeout: String,
    #[command(flatten)]
    pub run: RepeatArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Engines to run, comma-separated; ratios are to the first
    /// [default: syscall,batch,uring,zerocopy; with --threading: syscall].
    #[arg(long, value_name = "A,B,…")]
    pub engines: Option<String>,
    /// Threading models to run the test's N flows under (N from its
    /// --flows N or -P N), comma-separated: per-flow (a thread per flow
    /// per side, as -P N) or loop:T (T event-loop threads per side, as
    /// --flows N --threads T), e.g. per-flow,loop:2,loop:1. With --engines
    /// too: every engine under every model.
    #[arg(long, value_name = "MODELS")]
    pub threading: Option<String>,
    /// `both` runs every engine without and with --busy-poll (`on`: with
    /// it only), for a test that takes --busy-poll (tcp, udp, rr, crr).
    #[arg(long, value_name = "both|on|off")]
    pub busy_poll: Option<String>,
    /// Add a run of the syscall engine with LD_PRELOAD=LIB on the client
    /// (a kernel-bypass library such as onload or VMA: with and without
    /// it). That client runs as a child process; without HOST it tests
    /// against an embedded server in this process, which is not preloaded.
    #[arg(long, value_name = "LIB")]
    pub preload: Option<std::path::PathBuf>,
    /// Run each variant N times, interleaved (every variant's first run,
    /// then every variant's second …): each figure's mean ± sd and 95%
    /// confidence interval per variant; ratios are of means.
    #[arg(long, value_name = "N")]
    pub repeat: Option<u32>,
    /// Write an SVG bar chart of the headline figure per variant (tcp
    /// bit/s, udp received datagrams/s, rr transactions/s), ratios labelled.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<std::path::PathBuf>,
    /// Also write one self-contained HTML page: the table, the plot, the
    /// host and kernel, the command line and version.
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub output: OutputArgs,
    /// [HOST] tcp|udp|rr|crr, then the test's flags (e.g. `udp -b 0 -l 1472 -t 2`).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "TEST",
        required = true
    )]
    pub test: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ServerArgs {
    /// Address to listen on (default: all, IPv6 and IPv4).
    #[arg(short = 'B', long)]
    pub bind: Option<IpAddr>,
    /// TCP port for control and data connections.
    #[arg(short, long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Exit after the first test (completed or failed).
    #[arg(short = '1', long)]
    pub once: bool,
    /// Tests allowed at once; further clients are refused as busy. It
    /// counts tests, not streams or flows: a --flows test is one test
    /// (--max-flows bounds each test's flows).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub max_concurrent: usize,
    /// Refuse tests with more streams per direction than this (default 128).
    #[arg(long, value_name = "N")]
    pub max_streams: Option<u16>,
    /// Refuse --flows tests with more flows per direction than this
    /// (default 10000), before any data connection opens.
    #[arg(long, value_name = "N")]
    pub max_flows: Option<u32>,
    /// Event-loop threads serving a --flows test (default: the client's
    /// --threads); crr: threads accepting and answering its connections.
    #[arg(long, value_name = "T")]
    pub threads: Option<u16>,
    /// Refuse tests longer than this (default 24h).
    #[arg(long, value_name = "DURATION")]
    pub max_time: Option<String>,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Pin stream threads to these CPUs, round robin (e.g. 0-3,6).
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub guard: super::server::GuardArgs,
    #[command(flatten)]
    pub fleet: super::server::FleetArgs,
}

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
    /// iperf3's -O.
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
    /// they count the same datagrams.
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
    /// N flows on --threads event-loop threads per side (epoll; rr over
    /// TCP with --engine uring: io_uring completion loops, rr over UDP and
    /// crr refused there; rr over TCP or UDP and crr; default one size, 1 byte; with --sizes a phase per size),
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
    /// and report both side by side.
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

/// Exit statuses of `qualify`, in `--help` and the README.
pub const QUALIFY_EXIT: &str = "Verdicts: PASS, FAIL, NOT RUN, INCONCLUSIVE. An RFC \
2544 size with no zero-loss rate, or only the search's floor (1/64 of what an unpaced \
stream delivered), FAILs without an SLA rate; a trial whose loss the tester's own \
stalls (or its receiving sockets' overflow) caused past its reruns is inconclusive \
(not loss) in every step: a size whose search, or a Y.1564 step whose KPI, it left \
undecided is INCONCLUSIVE. Exit status: 0 every judged KPI \
passed; 4 the qualification ran and at least one KPI failed its SLA threshold (or a \
size found no zero-loss rate); 5 it could not run (server unreachable or refusing a \
step, a KPI the SLA asks for that this path cannot measure); 6 it ran but the \
tester's stalls left a verdict INCONCLUSIVE (rerun on a less busy host); 2 bad \
command line; 130 interrupted (what was measured is reported, marked interrupted).";

#[derive(Debug, Args)]
#[command(after_help = QUALIFY_EXIT)]
pub struct QualifyArgs {
    /// The linerate server (`linerate server`, defaults will do: the
    /// latency probes beside a load run as part of the load's test).
    pub host: String,
    /// Server port.
    #[arg(short, long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Methods to run, in this order: rfc2544 (UDP throughput, latency,
    /// loss vs load, back-to-back), y1564 (service configuration steps and
    /// performance test; needs --cir), rfc6349 (TCP throughput).
    #[arg(long, value_name = "LIST", default_value = "rfc2544,y1564,rfc6349")]
    pub method: String,
    /// Short durations and three frame sizes: about a minute (RFC 2544
    /// gets 36 trials' time for all sizes, each search stopping at its
    /// best confirmed rate when its share is spent; 6 reruns of stalled
    /// trials in all).
    #[arg(long)]
    pub quick: bool,
    /// RFC 2544 datagram sizes, bytes, the 28-byte header included (default:
    /// the payloads of RFC 2544's frame sizes that fit the path MTU).
    #[arg(long, value_name = "LIST")]
    pub sizes: Option<String>,
    /// Y.1564 committed information rate, Ethernet frame bit/s (e.g. 100M).
    #[arg(long, value_name = "RATE")]
    pub cir: Option<String>,
    /// Y.1564 excess information rate above CIR (default none).
    #[arg(long, value_name = "RATE")]
    pub eir: Option<String>,
    /// Thresholds, e.g. loss=0.1%,delay=5ms,jitter=1ms,rate=95M (keys:
    /// loss, delay (one-way), rtt, jitter, rate, availability); over
    /// --sla-file's.
    #[arg(long, value_name = "KEY=VALUE,…")]
    pub sla: Option<String>,
    /// Thresholds in TOML: the same keys, each a string with its unit.
    #[arg(long, value_name = "FILE.toml")]
    pub sla_file: Option<std::path::PathBuf>,
    /// RFC 2544 trial duration [default: 1s; --quick 500ms].
    #[arg(long, value_name = "DURATION")]
    pub trial: Option<String>,
    /// Y.1564 duration of each configuration step [default: 2s; --quick 1s].
    #[arg(long, value_name = "DURATION")]
    pub step_time: Option<String>,
    /// Y.1564 service performance test duration [default: 20s; --quick 5s;
    /// Y.1564 suggests 15m for an acceptance].
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<String>,
    /// RFC 6349 TCP test duration per direction [default: 10s; --quick 3s].
    #[arg(long, value_name = "DURATION")]
    pub tcp_time: Option<String>,
    /// Ceiling of the RFC 2544 throughput search, payload bit/s (default:
    /// what an unpaced stream of each size delivers, raised while the rate
    /// at it passes).
    #[arg(long, value_name = "RATE")]
    pub max_rate: Option<String>,
    /// Run the whole qualification once per engine (e.g. syscall,batch).
    #[arg(long, value_name = "LIST", default_value = "auto")]
    pub engines: String,
    /// Also run it with the syscall engine under LD_PRELOAD=LIB (a
    /// kernel-bypass library), in a child process, as compare does.
    #[arg(long, value_name = "LIB")]
    pub preload: Option<PathBuf>,
    /// Give up connecting after this long.
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub connect_timeout: String,
    /// One JSON document: every trial, the derived metrics and verdicts.
    #[arg(long)]
    pub json: bool,
    /// Also write a self-contained HTML page with the tables and plots.
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<PathBuf>,
}
