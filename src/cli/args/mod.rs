//! Flags as typed. Values stay strings where they carry units (`10s`,
//! `128K`), so one parser in `linerate-stats` handles them and validation in
//! `cli::validate` can name the flag in its error.
//!
//! This file holds the command line's top ([`Cli`], [`Cmd`]: the
//! subcommands and the text after `--help`); each command family's flags
//! are a file of their own (`tcp`, `udp`, `rr` (rr and crr), `server`,
//! `sweep`, `compare`, `qualify`), and `engine` holds the data-path flags
//! they share. Commands whose flags live with their validation (`msg`,
//! `iface`, `doctor`, `ping`, `completions`) keep them in `cli`'s files.
//! The files here import only `cli`'s leaf files and `engine`, never this
//! one.

mod compare;
mod engine;
mod qualify;
mod rr;
mod server;
mod sweep;
mod tcp;
mod udp;

use clap::{Parser, Subcommand};

pub use super::common::OutputArgs;
use super::host::TestHostArgs;
use super::repeat::RepeatArgs;
pub use compare::CompareArgs;
pub use engine::EngineArgs;
pub use qualify::QualifyArgs;
pub use rr::RrArgs;
pub use server::ServerArgs;
pub use sweep::{SweepCmd, SweepUdpArgs};
pub use tcp::TcpArgs;
pub use udp::UdpArgs;

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
