//! `linerate qualify`'s flags and the exit statuses its `--help` lists.

use std::path::PathBuf;

use clap::Args;

use crate::cli::common::DEFAULT_PORT;

/// Exit statuses of `qualify`, in `--help` and the README.
const QUALIFY_EXIT: &str = "Verdicts: PASS, FAIL, NOT RUN, INCONCLUSIVE. An RFC \
2544 size with no zero-loss rate, or only the search's floor (1/64 of what an unpaced \
stream delivered), FAILs without an SLA rate; a step whose trial, or an RFC 6349 \
direction whose TCP test, could not run (refused, connection lost, an error) is NOT \
RUN with the reason and no figures, and ends the run; a \
trial whose lost datagrams the tester's own counters account for past its reruns \
(its receiving sockets' overflow, or its sender's stalls' catch-up bursts, as many \
as the sender counted, each at most the datagrams in it) is inconclusive (not loss) in every step: a size whose \
search, or a Y.1564 step whose KPI, it left undecided is INCONCLUSIVE; loss beyond \
them is the path's. Exit status: 0 every judged KPI \
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
