//! Command-line parsing in two stages: clap parses flags as typed
//! ([`args`]), then [`validate`] turns them into a [`Command`] of plain
//! config types. Clap types never leave this module.

mod args;
mod client;
mod common;
mod compare;
mod engine;
mod generate;
mod habits;
mod host;
mod iperf3;
mod msg;
pub use iperf3::{Iperf3Config, Style as Iperf3Style};
pub use linerate_run::config::{
    ClientConfig, Iperf3Extras, Iperf3Family, RrConfig, ServerConfig, Target, AUTO,
};
mod netperf;
mod qualify;
pub use qualify::{QualifyConfig, QualifyEngine};
mod repeat;
mod rr;
use rr::validate_rr;
mod server;
mod sweep;
use sweep::validate_sweep;
mod tcp;
mod threading;
mod udp;
mod values;

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::{CommandFactory, Parser};
use linerate_engine::engines::auto;
use linerate_engine::engines::EngineKind;
use linerate_proto::limits::{EngineRefusal, ServerLimits};
use linerate_proto::spec::{TestKind, TestSpec};
use linerate_report::render::Format;

use engine::server_side_engine;
use values::{duration_ms, format_of, parse_cpus};

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
    Msg(msg::MsgConfig),
    MsgPeer(msg::MsgPeerConfig),
    /// `linerate iperf3 -c HOST …`: iperf3's command line and output.
    Iperf3(Iperf3Config),
    /// Text generated from the CLI definitions (completions, man page).
    Print(Vec<u8>),
}

pub use repeat::RepeatConfig;

pub use msg::{MsgConfig, MsgPeerConfig, PeerRun};

pub use host::{DoctorConfig, HostFormat, IfaceConfig, PingConfig};

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
    pub plot: Option<std::path::PathBuf>,
}

/// Parses the process arguments (netperf-style names included).
pub fn parse() -> Result<Command, clap::Error> {
    parse_from(std::env::args_os().map(|a| a.to_string_lossy().into_owned()))
}

/// Parses `argv` (program name first). Usage errors come back as clap
/// errors so they print and exit like clap's own.
pub fn parse_from(argv: impl IntoIterator<Item = String>) -> Result<Command, clap::Error> {
    let argv: Vec<String> = argv.into_iter().collect();
    // `linerate iperf3 …`, or this binary installed or linked as `iperf3`.
    let called_iperf3 = argv
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .is_some_and(|n| n == "iperf3");
    if called_iperf3 {
        return iperf3::parse(&argv[1..]);
    }
    if argv.get(1).is_some_and(|a| a == "iperf3") {
        return iperf3::parse(&argv[2..]);
    }
    if let Some(hint) = habits::iperf3_hint(&argv) {
        return Err(clap::Error::raw(
            clap::error::ErrorKind::UnknownArgument,
            hint,
        ));
    }
    let argv = netperf::rewrite(argv)
        .map_err(|e| clap::Error::raw(clap::error::ErrorKind::ValueValidation, format!("{e}\n")))?;
    let cli = args::Cli::try_parse_from(argv)?;
    validate(cli)
        .map_err(|e| clap::Error::raw(clap::error::ErrorKind::ValueValidation, format!("{e:#}\n")))
}

fn validate(cli: args::Cli) -> Result<Command> {
    let key_file = cli.auth_key.clone();
    let key = server::load_key(key_file.as_deref())?;
    let mut cmd = validate_command(cli)?;
    match &mut cmd {
        Command::Server(s) => s.auth_key = key,
        Command::Tcp(c) | Command::Udp(c) => c.auth_key = key,
        Command::Rr(r) => r.client.auth_key = key,
        Command::Sweep(s) => s.base.auth_key = key,
        Command::Qualify(q) => {
            for e in &mut q.engines {
                for c in [&mut e.udp, &mut e.tcp, &mut e.rr] {
                    c.auth_key.clone_from(&key);
                }
            }
        }
        // compare's key (given before the test kind) reaches every
        // variant, and the preloaded child by its file.
        Command::Compare(c) if key.is_some() => {
            for v in &mut c.variants {
                if let Ok(t) = &mut v.config {
                    t.auth_key.clone_from(&key);
                }
                if let (Some(p), Some(f)) = (&mut v.preload, &key_file) {
                    p.tail
                        .extend(["--auth-key".into(), f.display().to_string()]);
                }
            }
        }
        _ => {}
    }
    Ok(cmd)
}

fn validate_command(mut cli: args::Cli) -> Result<Command> {
    let host_flags = cli.command.take_host_flags();
    let repeat_flags = cli.command.take_repeat_flags();
    let cmd = match cli.command {
        args::Cmd::Iface(a) => host::validate_iface(a),
        args::Cmd::Doctor(a) => host::validate_doctor(a),
        args::Cmd::Ping(a) => host::validate_ping(a),
        args::Cmd::Completions(a) => generate::completions(&a, args::Cli::command()),
        args::Cmd::Man => generate::man(args::Cli::command()),
        args::Cmd::Udp(u) => udp::validate_udp(u),
        args::Cmd::Rr(r) => Ok(Command::Rr(validate_rr(r, TestKind::Rr)?)),
        args::Cmd::Crr(r) => Ok(Command::Rr(validate_rr(r, TestKind::Crr)?)),
        args::Cmd::Sweep(args::SweepCmd::Udp(a)) => validate_sweep(a),
        args::Cmd::Compare(a) => compare::validate_compare(a),
        args::Cmd::Qualify(a) => qualify::validate_qualify(a),
        args::Cmd::Msg(a) => msg::validate_msg(a),
        args::Cmd::MsgPeer(a) => msg::validate_peer(a),
        args::Cmd::Server(s) => validate_server(s),
        args::Cmd::Tcp(t) => tcp::validate_tcp(t),
    };
    repeat::attach(host::attach(cmd?, host_flags)?, repeat_flags)
}

/// `linerate server`: the limits, guard and engine it serves with.
fn validate_server(s: args::ServerArgs) -> Result<Command> {
    if s.engine.server_engine.is_some() {
        bail!("--server-engine is a client flag: a server's own engine is --engine");
    }
    if s.max_concurrent == 0 {
        bail!("--max-concurrent must be at least 1");
    }
    let mut limits = ServerLimits::default();
    if let Some(n) = s.max_streams {
        limits.max_streams = n;
    }
    if let Some(n) = s.max_flows {
        limits.max_flows = n;
    }
    if s.threads == Some(0) {
        bail!("--threads must be at least 1");
    }
    if let Some(t) = &s.max_time {
        limits.max_time_ms = duration_ms("--max-time", t)?;
    }
    let guard = server::validate(&s.guard, &mut limits)?;
    let engine = server_side_engine(&s.engine)?;
    if let auto::Configured::Fixed(k) = engine {
        own_engine_limits(k, &mut limits);
    }
    Ok(Command::Server(ServerConfig {
        guard,
        auth_key: None,
        metrics: s.fleet.metrics,
        json_lines: s.fleet.json_lines_file,
        bind: s.bind,
        port: s.port,
        once: s.once,
        max_concurrent: s.max_concurrent,
        limits,
        flow_threads: s.threads,
        engine,
        cpus: parse_cpus(s.cpus.as_deref())?,
        format: format_of(&s.output),
        logfile: None,
    }))
}

/// The tests a server's fixed `--engine` cannot serve, refused by the
/// session with these reasons.
fn own_engine_limits(k: EngineKind, limits: &mut ServerLimits) {
    // A UDP stream test stands for every test this engine
    // cannot serve; the session refuses those by this reason.
    let udp = TestSpec {
        protocol: linerate_proto::spec::Protocol::Udp,
        ..TestSpec::default()
    };
    limits.own_engine_tcp_streams_only = k
        .refusal(&udp)
        .map(|_| format!("{}: TCP stream tests only", k.name()));
    if let EngineKind::Xdp(_) = k {
        limits.own_engine_udp_only = Some(format!(
            "{}: UDP tests only (streams and request/response)",
            k.name()
        ));
    }
    // Whatever else the engine refuses for a given test (`uring --flows`
    // on a host without multishot receives), as its client would.
    limits.own_engine_refusal = Some(EngineRefusal::new(move |spec| k.server_refusal(spec)));
}

#[cfg(test)]
mod tests;
