//! What validation makes of a command line: the [`Command`] and the
//! configs of the commands built from another command's validation
//! (`--repeat` wraps a test; compare, sweep and qualify validate a test's
//! command line per variant, trial or engine; `iperf3 -s` validates
//! `linerate server`'s). Their flag files import the validation of a test
//! ([`super::test_line`]), which builds [`Command`]s, so these types live
//! here, in a leaf, rather than beside their flags. Plain data: no clap
//! types.

use std::path::PathBuf;

use linerate_report::render::Format;
use linerate_run::config::{ClientConfig, Iperf3Extras, RrConfig, ServerConfig};

use crate::qualify::sla::Sla;

use super::host::{DoctorConfig, IfaceConfig, PingConfig};
use super::msg::{MsgConfig, MsgPeerConfig};

/// A validated command line: what `main` runs.
#[derive(Debug, Clone)]
pub enum Command {
    Server(ServerConfig),
    Tcp(ClientConfig),
    Rr(RrConfig),
    Udp(ClientConfig),
    Sweep(SweepConfig),
    Qualify(QualifyConfig),
    Compare(CompareConfig),
    Iface(IfaceConfig),
    Doctor(DoctorConfig),
    Ping(PingConfig),
    Repeat(RepeatConfig),
    Msg(MsgConfig),
    MsgPeer(MsgPeerConfig),
    /// `linerate iperf3 -c HOST …`: iperf3's command line and output.
    Iperf3(Iperf3Config),
    /// Text generated from the CLI definitions (completions, man page).
    Print(Vec<u8>),
}

/// A test to run `n` times.
#[derive(Debug, Clone)]
pub struct RepeatConfig {
    pub n: u32,
    /// The validated test (Tcp, Udp or Rr).
    pub test: Box<Command>,
    /// `--plot FILE`: mean ± 1 sd of the headline figure (transactions/s
    /// per size, receiver bit/s per flow).
    pub plot: Option<PathBuf>,
}

/// `linerate compare`: one test, run once per variant.
#[derive(Debug, Clone)]
pub struct CompareConfig {
    /// `tcp`, `udp`, `rr` or `crr`.
    pub test: String,
    /// The test's flags as given.
    pub args: Vec<String>,
    /// `--threading`: the flows every model runs.
    pub flows: Option<u32>,
    pub variants: Vec<CompareVariantConfig>,
    pub format: Format,
    /// `--repeat N`: runs per variant (1 without it).
    pub repeat: u32,
    /// `--plot FILE.svg`: bars of the headline figure per variant.
    pub plot: Option<PathBuf>,
    /// `--report FILE.html`: the table and the plot in one page.
    pub report: Option<PathBuf>,
}

/// One variant: its test config, or why it cannot run here (an engine
/// this kernel refuses), which the table shows instead of its figures.
#[derive(Debug, Clone)]
pub struct CompareVariantConfig {
    pub name: String,
    pub engine: String,
    pub busy_poll: bool,
    /// `--threading`: the model this variant runs its flows under
    /// (`per-flow`, `loop:T`).
    pub threading: Option<String>,
    pub config: Result<ClientConfig, String>,
    /// `--preload LIB`: this variant's client runs in a child process with
    /// `LD_PRELOAD=LIB` (a library is only loaded when a process starts).
    pub preload: Option<PreloadRun>,
}

/// How the `--preload` variant's child process is started.
#[derive(Debug, Clone)]
pub struct PreloadRun {
    /// The library, as an absolute path (the dynamic loader needs a path
    /// with a slash to load a file outside its search path).
    pub lib: PathBuf,
    /// The test kind, then its host unless the server is embedded.
    pub head: Vec<String>,
    /// The test's flags after the host and port: the user's, then
    /// `--engine syscall`, `--busy-poll` if asked, `--json`.
    pub tail: Vec<String>,
}

/// A sweep: one UDP test per size × rate point.
#[derive(Debug, Clone)]
pub struct SweepConfig {
    /// The test of every trial, with `len` and pace set per trial.
    pub base: ClientConfig,
    pub sizes: Vec<u32>,
    /// Requested rates per stream: datagrams/s, or bit/s if `rates_are_bits`.
    pub points: Vec<f64>,
    pub rates_are_bits: bool,
    pub find_zero_loss: bool,
    pub max_loss_percent: f64,
    pub plot: Option<PathBuf>,
}

/// Which methods run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Methods {
    pub rfc2544: bool,
    pub y1564: bool,
    pub rfc6349: bool,
}

/// The trial templates of one engine.
#[derive(Debug, Clone)]
pub struct QualifyEngine {
    pub name: String,
    /// A UDP stream (len, pace and limit set per trial).
    pub udp: ClientConfig,
    /// A TCP stream (window, direction and duration set per test).
    pub tcp: ClientConfig,
    /// UDP request/response probes (size and duration set per probe).
    pub rr: ClientConfig,
}

#[derive(Debug, Clone)]
pub struct QualifyConfig {
    pub host: String,
    pub port: u16,
    pub methods: Methods,
    pub quick: bool,
    pub sizes: Option<Vec<u32>>,
    /// Ethernet frame bit/s.
    pub cir: Option<f64>,
    pub eir: f64,
    pub sla: Sla,
    pub trial_ms: u64,
    pub step_ms: u64,
    pub perf_ms: u64,
    pub tcp_ms: u64,
    pub max_rate: Option<f64>,
    pub engines: Vec<QualifyEngine>,
    /// `--preload LIB`: the child process that runs it preloaded.
    pub preload: Option<PreloadRun>,
    pub json: bool,
    pub report: Option<PathBuf>,
}

/// How the iperf3 drop-in prints a client test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Iperf3Style {
    /// iperf3's human layout.
    Text,
    /// `-J`: one iperf3 JSON document at the end.
    Json,
    /// `--json-stream`: iperf3's JSON events, one a line, as they happen.
    JsonStream,
}

/// `linerate iperf3 -c HOST …`.
#[derive(Debug, Clone)]
pub struct Iperf3Config {
    /// The test, with `iperf3` set: spoken over iperf3's protocol.
    pub client: ClientConfig,
    pub extras: Iperf3Extras,
    pub style: Iperf3Style,
    /// False with `-i 0`: no interval rows or records.
    pub intervals: bool,
    /// `--logfile`: output appended there instead of stdout.
    pub logfile: Option<PathBuf>,
}
