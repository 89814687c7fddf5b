//! Command-line parsing in two stages: clap parses flags as typed
//! ([`args`]), then [`validate`] turns them into a [`Command`] of plain
//! config types. Clap types never leave this module.

mod args;
mod compare;
mod generate;
mod host;
mod netperf;
mod repeat;
mod server;

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Parser;
use linerate_engine::engines::auto::{self, Workload};
use linerate_engine::engines::batch::Toggle;
use linerate_engine::engines::{Batch, EngineKind};
use linerate_proto::spec::{
    Direction, Limit, Pace, Protocol, RrLimit, RrSpec, ServerLimits, TcpOptions, TestKind,
    TestSpec, UdpSpec, DEFAULT_RR_SIZES,
};
use linerate_report::render::Format;
use linerate_stats::units::{parse_duration, parse_rate, parse_size};

/// Where the client's server is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Remote {
        host: String,
        port: u16,
    },
    /// A server started inside this process on loopback.
    Embedded,
}

#[derive(Debug, Clone)]
pub struct ClientConfig {
    pub target: Target,
    pub spec: TestSpec,
    pub engine: EngineKind,
    /// With `--engine auto`: which engine it chose and what it skipped.
    pub engine_note: Option<String>,
    pub cpus: Vec<usize>,
    pub format: Format,
    pub connect_timeout: Duration,
    /// `--auth-key`: authenticate to the server with this key.
    pub auth_key: Option<linerate_proto::auth::AuthKey>,
    /// `--iface DEV`: the interface whose counters the report adds.
    pub iface: Option<String>,
    /// `--report FILE.html`: also write the HTML page.
    pub report: Option<PathBuf>,
}

#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Connection-level limits: address filters, connection cap, rates.
    pub guard: crate::server::guard::GuardConfig,
    /// `--auth-key`: clients must prove they hold this key.
    pub auth_key: Option<linerate_proto::auth::AuthKey>,
    /// `--metrics ADDR:PORT`: serve Prometheus text there.
    pub metrics: Option<std::net::SocketAddr>,
    /// `--json-lines FILE`: a record per completed test.
    pub json_lines: Option<PathBuf>,
    pub bind: Option<IpAddr>,
    pub port: u16,
    pub once: bool,
    pub max_concurrent: usize,
    pub limits: ServerLimits,
    pub engine: EngineKind,
    pub cpus: Vec<usize>,
    pub format: Format,
}

/// A request/response test (rr or crr): the client config plus the files
/// the distributions are exported to.
#[derive(Debug, Clone)]
pub struct RrConfig {
    pub client: ClientConfig,
    pub histogram: Option<PathBuf>,
    pub plot: Option<PathBuf>,
    /// Estimate the clock offset by probes even when both ends share a kernel.
    pub probe_clock: bool,
}

#[derive(Debug, Clone)]
pub enum Command {
    Server(ServerConfig),
    Tcp(ClientConfig),
    Rr(RrConfig),
    Udp(ClientConfig),
    Sweep(SweepConfig),
    Compare(CompareConfig),
    Iface(IfaceConfig),
    Doctor(DoctorConfig),
    Ping(PingConfig),
    Repeat(RepeatConfig),
    /// Text generated from the CLI definitions (completions, man page).
    Print(Vec<u8>),
}

pub use repeat::RepeatConfig;

pub use host::{DoctorConfig, HostFormat, IfaceConfig, PingConfig};

/// `linerate compare`: one test, run once per variant.
#[derive(Debug, Clone)]
pub struct CompareConfig {
    /// `tcp`, `udp` or `rr`.
    pub test: String,
    /// The test's flags as given.
    pub args: Vec<String>,
    pub variants: Vec<CompareVariantConfig>,
    pub format: Format,
}

/// One variant: its test config, or why it cannot run here (an engine
/// this kernel refuses), which the table shows instead of its figures.
#[derive(Debug, Clone)]
pub struct CompareVariantConfig {
    pub name: String,
    pub engine: String,
    pub busy_poll: bool,
    pub config: Result<ClientConfig, String>,
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
    let argv = netperf::rewrite(argv.into_iter().collect())
        .map_err(|e| clap::Error::raw(clap::error::ErrorKind::ValueValidation, format!("{e}\n")))?;
    let cli = args::Cli::try_parse_from(argv)?;
    validate(cli)
        .map_err(|e| clap::Error::raw(clap::error::ErrorKind::ValueValidation, format!("{e:#}\n")))
}

fn format_of(o: &args::OutputArgs) -> Format {
    if o.json {
        Format::Json
    } else if o.json_lines {
        Format::JsonLines
    } else if o.csv {
        Format::Csv
    } else {
        Format::Human
    }
}

/// Parses `0-3,6` into CPU numbers, checking each is online.
fn parse_cpus(list: Option<&str>) -> Result<Vec<usize>> {
    let Some(list) = list else {
        return Ok(Vec::new());
    };
    let online = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut cpus = Vec::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let a: usize = a
            .trim()
            .parse()
            .with_context(|| format!("--cpus: {part:?} is not a CPU number or range"))?;
        let b: usize = b
            .trim()
            .parse()
            .with_context(|| format!("--cpus: {part:?} is not a CPU number or range"))?;
        if a > b {
            bail!("--cpus: range {part:?} runs backwards");
        }
        for c in a..=b {
            if c >= online {
                bail!(
                    "--cpus: CPU {c} is not available (this host has {online}: 0-{})",
                    online - 1
                );
            }
            cpus.push(c);
        }
    }
    if cpus.is_empty() {
        bail!("--cpus: empty list");
    }
    Ok(cpus)
}

/// The parts every client command shares: where the server is, which
/// engine, CPUs, output format and connect timeout — validated once here.
fn client_config(
    host: Option<String>,
    port: u16,
    spec: TestSpec,
    engine: &args::EngineArgs,
    cpus: Option<&str>,
    output: &args::OutputArgs,
    connect_timeout: &str,
) -> Result<ClientConfig> {
    // What no server could run is a usage error here, not a refusal from
    // the server after a connection (issue 13).
    if let Err(e) = linerate_proto::spec::negotiate(&spec, &ServerLimits::unlimited()) {
        let flag = match e.field {
            "streams" => "parallel".to_owned(),
            f => f.replace('_', "-"),
        };
        bail!("--{flag}: {}", e.reason);
    }
    let (engine, engine_note) = client_engine(engine, &spec)?;
    Ok(ClientConfig {
        target: match host {
            Some(host) => Target::Remote { host, port },
            None => Target::Embedded,
        },
        spec,
        engine,
        engine_note,
        cpus: parse_cpus(cpus)?,
        format: format_of(output),
        connect_timeout: parse_duration(connect_timeout).context("--connect-timeout")?,
        auth_key: None,
        iface: None,
        report: None,
    })
}

/// `--engine` and its options: resolved once, and checked against this
/// kernel (an option the kernel lacks is refused with the reason).
fn engine_kind(a: &args::EngineArgs) -> Result<EngineKind> {
    if a.engine == AUTO {
        bail!(
            "--engine auto picks an engine per test, which only a client knows; \
             give the server one of: {}",
            EngineKind::names()
        );
    }
    let toggle = |on: bool, off: bool| match (on, off) {
        (true, _) => Toggle::On,
        (_, true) => Toggle::Off,
        _ => Toggle::Auto,
    };
    let kind = match a.engine.parse::<EngineKind>()? {
        EngineKind::Batch(_) => EngineKind::Batch(Batch {
            gso: toggle(a.gso, a.no_gso),
            gro: toggle(a.gro, a.no_gro),
            skip_rx_copy: a.skip_rx_copy,
        }),
        other => {
            if let Some(flag) = batch_only_flag(a) {
                bail!("{flag} needs --engine batch (the {other} engine has no such option)");
            }
            other
        }
    };
    Ok(kind.check()?)
}

/// The first `batch`-only option given, if any.
fn batch_only_flag(a: &args::EngineArgs) -> Option<&'static str> {
    [
        (a.gso, "--gso"),
        (a.no_gso, "--no-gso"),
        (a.gro, "--gro"),
        (a.no_gro, "--no-gro"),
        (a.skip_rx_copy, "--skip-rx-copy"),
    ]
    .into_iter()
    .find_map(|(set, flag)| set.then_some(flag))
}

/// `--engine auto`'s name (not an engine: a rule that picks one).
pub const AUTO: &str = "auto";

/// A client's `--engine`: `auto` is resolved here, once, for this test by
/// the rule in `engines::auto`, and the note naming the choice and what
/// was skipped goes into the report.
fn client_engine(a: &args::EngineArgs, spec: &TestSpec) -> Result<(EngineKind, Option<String>)> {
    if a.engine != AUTO {
        return Ok((engine_kind(a)?, None));
    }
    if let Some(flag) = batch_only_flag(a) {
        bail!("{flag} needs --engine batch (auto picks an engine, and its options, per test)");
    }
    let w = match (spec.kind, spec.protocol) {
        (TestKind::Stream, Protocol::Tcp) => Workload::TcpStream,
        (TestKind::Stream, Protocol::Udp) => Workload::UdpStream,
        _ => Workload::RequestResponse,
    };
    let c = auto::choose(w);
    Ok((c.kind, Some(c.note(w))))
}

fn duration_ms(flag: &str, v: &str) -> Result<u64> {
    let d = parse_duration(v).with_context(|| flag.to_string())?;
    Ok(d.as_millis() as u64)
}

fn size_u32(flag: &str, v: &str) -> Result<u32> {
    let b = parse_size(v).with_context(|| flag.to_owned())?;
    // Say the limit in the user's terms, not the conversion's (issue 13).
    u32::try_from(b).map_err(|_| {
        anyhow::anyhow!(
            "{flag}: {v} is too large (at most {} bytes, just under 4 GiB)",
            u32::MAX
        )
    })
}

/// Parses a pps figure (`0.05`, `500k`, `2M`) into datagrams per 1000 s.
fn parse_pps(v: &str) -> Result<u64> {
    let t = v.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1e3),
        Some((i, 'm' | 'M')) => (&t[..i], 1e6),
        Some((i, 'g' | 'G')) => (&t[..i], 1e9),
        _ => (t, 1.0),
    };
    let x: f64 = num
        .parse()
        .with_context(|| format!("--pps: {v:?} is not a number (e.g. 0.05, 500k, 2M)"))?;
    let milli = (x * mult * 1000.0).round();
    if !milli.is_finite() || milli < 1.0 {
        bail!("--pps: {v:?} must be at least 0.001");
    }
    if milli > 1e12 {
        bail!("--pps: {v:?} is above 10^9 datagrams/s");
    }
    Ok(milli as u64)
}

/// Parses `50k:1M:50k` (start:stop:step) or `1k,5k,10k` with `one` parsing
/// each value.
fn parse_range(flag: &str, v: &str, one: impl Fn(&str) -> Result<f64>) -> Result<Vec<f64>> {
    let parts: Vec<&str> = v.split(':').collect();
    let points = match parts.as_slice() {
        [start, stop, step] => {
            let (a, b, st) = (one(start)?, one(stop)?, one(step)?);
            if st <= 0.0 || b < a {
                bail!("{flag}: {v:?} needs START ≤ STOP and STEP > 0");
            }
            let n = ((b - a) / st + 1e-9).floor() as u64 + 1;
            if n > 1000 {
                bail!("{flag}: {v:?} makes {n} points, at most 1000");
            }
            (0..n).map(|i| a + st * i as f64).collect()
        }
        [list] => list
            .split(',')
            .filter(|x| !x.is_empty())
            .map(&one)
            .collect::<Result<Vec<f64>>>()?,
        _ => bail!("{flag}: {v:?} is neither START:STOP:STEP nor a list"),
    };
    if points.is_empty() {
        bail!("{flag}: no rates in {v:?}");
    }
    Ok(points)
}

fn validate_sweep(a: args::SweepUdpArgs) -> Result<Command> {
    let mut sizes = Vec::new();
    for s in a.sizes.split(',').filter(|x| !x.is_empty()) {
        let len = size_u32("--sizes", s)?;
        let (min, max) = (
            linerate_proto::datagram::HEADER_LEN as u32,
            linerate_proto::datagram::MAX_LEN as u32,
        );
        if !(min..=max).contains(&len) {
            bail!("--sizes: {len} bytes; a datagram must be {min}..={max} bytes");
        }
        sizes.push(len);
    }
    if sizes.is_empty() {
        bail!("--sizes: no sizes given");
    }
    let (points, rates_are_bits) = match (&a.pps, &a.rates) {
        (Some(p), _) => (
            parse_range("--pps", p, |x| Ok(parse_pps(x)? as f64 / 1000.0))?,
            false,
        ),
        (None, Some(r)) => (
            parse_range("--rates", r, |x| parse_rate(x).context("--rates"))?,
            true,
        ),
        (None, None) => bail!("sweep udp needs --pps or --rates (e.g. --pps 50k:1M:50k)"),
    };
    if !(0.0..=100.0).contains(&a.max_loss) {
        bail!("--max-loss must be a percentage in 0..=100");
    }
    let mut argv = vec!["linerate".to_string(), "udp".to_string()];
    if let Some(h) = &a.host {
        argv.push(h.clone());
    }
    argv.extend([
        "-p".into(),
        a.port.to_string(),
        "-t".into(),
        a.time.clone(),
        "-P".into(),
        a.parallel.to_string(),
        "--burst".into(),
        a.burst.to_string(),
        "--engine".into(),
        a.engine.engine.clone(),
        "--connect-timeout".into(),
        a.connect_timeout.clone(),
    ]);
    if a.reverse {
        argv.push("-R".into());
    }
    if let Some(w) = &a.window {
        argv.extend(["-w".into(), w.clone()]);
    }
    let e = &a.engine;
    for (set, flag) in [
        (e.gso, "--gso"),
        (e.no_gso, "--no-gso"),
        (e.gro, "--gro"),
        (e.no_gro, "--no-gro"),
        (e.skip_rx_copy, "--skip-rx-copy"),
    ] {
        if set {
            argv.push(flag.into());
        }
    }
    // The trial template goes through the same validation as `linerate udp`.
    let Command::Udp(mut base) = validate(args::Cli::try_parse_from(argv)?)? else {
        bail!("internal: sweep template is not a UDP test");
    };
    base.format = format_of(&a.output);
    Ok(Command::Sweep(SweepConfig {
        base,
        sizes,
        points,
        rates_are_bits,
        find_zero_loss: a.find_zero_loss,
        max_loss_percent: a.max_loss,
        plot: a.plot,
    }))
}

fn validate_udp(u: args::UdpArgs) -> Result<Command> {
    let limit = match (&u.time, u.count) {
        (_, Some(0)) => bail!("--count must be greater than zero"),
        (_, Some(n)) => Limit::Datagrams(n),
        (Some(d), None) => {
            let ms = duration_ms("--time", d)?;
            if ms == 0 {
                bail!("--time must be greater than zero (use --count for a datagram count)");
            }
            Limit::TimeMs(ms)
        }
        (None, None) => Limit::TimeMs(10_000),
    };
    if u.parallel == 0 {
        bail!("--parallel must be at least 1");
    }
    let len = size_u32("--len", &u.len)?;
    let (min, max) = (
        linerate_proto::datagram::HEADER_LEN as u32,
        linerate_proto::datagram::MAX_LEN as u32,
    );
    if !(min..=max).contains(&len) {
        bail!(
            "--len: {len} bytes; a datagram must be {min}..={max} bytes (the header takes {min})"
        );
    }
    let pace = match (&u.rate, &u.pps) {
        (Some(r), _) if r.trim() == "0" => Pace::Unlimited,
        (Some(r), _) => {
            let bps = parse_rate(r).context("--rate")?;
            if bps < 1.0 {
                bail!("--rate: {r:?} is below 1 bit/s");
            }
            Pace::Rate(bps.round() as u64)
        }
        (None, Some(p)) => Pace::MilliPps(parse_pps(p)?),
        (None, None) => Pace::Rate(1_000_000),
    };
    if u.burst == 0 {
        bail!("--burst must be at least 1");
    }
    let interval_ms = duration_ms("--interval", &u.interval)?;
    if interval_ms < 10 {
        bail!("--interval must be at least 10ms");
    }
    if let Some(p) = u.priority {
        if !(-20..=19).contains(&p) {
            bail!("--priority: nice value {p} is outside -20..=19");
        }
    }
    let direction = if u.reverse {
        Direction::Reverse
    } else if u.bidir {
        Direction::Bidir
    } else {
        Direction::Forward
    };
    let faults = match &u.inject_faults {
        Some(f) => linerate_proto::datagram::parse_faults(f)
            .map_err(|e| anyhow::anyhow!("--inject-faults: {e}"))?,
        None => Vec::new(),
    };
    let spec = TestSpec {
        protocol: Protocol::Udp,
        direction,
        streams: u.parallel,
        limit,
        len,
        omit_ms: 0,
        interval_ms,
        tcp: TcpOptions::default(),
        udp: Some(UdpSpec {
            pace,
            burst: u.burst,
            verify: u.verify,
            window: u
                .window
                .as_deref()
                .map(|w| size_u32("--window", w))
                .transpose()?,
            priority: u.priority,
            drain_ms: duration_ms("--drain", &u.drain)?,
            faults,
        }),
        ..TestSpec::default()
    };
    Ok(Command::Udp(client_config(
        u.host,
        u.port,
        spec,
        &u.engine,
        u.cpus.as_deref(),
        &u.output,
        &u.connect_timeout,
    )?))
}

/// Parses `1,64,1K` into message sizes.
fn parse_sizes(flag: &str, list: &str) -> Result<Vec<u32>> {
    let sizes = list
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            let n = size_u32(flag, p)?;
            if n == 0 {
                bail!("{flag}: sizes must be at least 1 byte");
            }
            Ok(n)
        })
        .collect::<Result<Vec<_>>>()?;
    if sizes.is_empty() {
        bail!("{flag}: empty list");
    }
    Ok(sizes)
}

fn validate_rr(r: args::RrArgs, kind: TestKind) -> Result<RrConfig> {
    let protocol = match r.proto.as_str() {
        "tcp" => Protocol::Tcp,
        "udp" if kind == TestKind::Crr => {
            bail!("--proto udp: crr opens a TCP connection per transaction; it has no UDP form")
        }
        "udp" if r.under_load.is_some() => {
            bail!("--under-load: the load streams are TCP; not available with --proto udp yet")
        }
        "udp" => Protocol::Udp,
        other => bail!("--proto: {other:?} is not tcp or udp"),
    };
    if kind == TestKind::Crr {
        if r.under_load.is_some() {
            bail!(
                "--under-load is available with rr only (crr opens a connection per transaction)"
            );
        }
        if r.busy_poll {
            bail!(
                "--busy-poll is available with rr only (each crr transaction is a new connection)"
            );
        }
    }
    if r.parallel == 0 {
        bail!("--parallel must be at least 1");
    }
    if r.batch == 0 {
        bail!("--batch must be at least 1");
    }
    let sizes = match (&r.size, &r.sizes) {
        (Some(s), _) => parse_sizes("--size", s)?,
        (None, Some(l)) => parse_sizes("--sizes", l)?,
        (None, None) if kind == TestKind::Crr => vec![1],
        (None, None) => DEFAULT_RR_SIZES.to_vec(),
    };
    let response_size = r
        .response_size
        .as_deref()
        .map(|v| parse_sizes("--response-size", v))
        .transpose()?
        .map(|v| v[0]);
    let limit = match (r.count, &r.time) {
        (Some(0), _) => bail!("--count must be greater than zero"),
        (Some(n), _) => RrLimit::Count(n),
        (None, Some(t)) => {
            let ms = duration_ms("--time", t)?;
            if ms == 0 {
                bail!("--time must be greater than zero");
            }
            RrLimit::TimeMs(ms)
        }
        (None, None) => RrLimit::TimeMs(1000),
    };
    let under_load = r.under_load.unwrap_or(0);
    if r.under_load == Some(0) {
        bail!("--under-load needs at least 1 stream");
    }
    let spec = TestSpec {
        kind,
        protocol,
        streams: r.parallel,
        limit: match limit {
            RrLimit::TimeMs(ms) => Limit::TimeMs(ms),
            RrLimit::Count(_) => Limit::default(),
        },
        tcp: TcpOptions {
            // Nagle would hold every small message for the previous one's ACK.
            no_delay: true,
            ..TcpOptions::default()
        },
        rr: Some(RrSpec {
            sizes,
            response_size,
            limit,
            batch: r.batch,
            busy_poll: r.busy_poll,
            under_load,
        }),
        ..TestSpec::default()
    };
    Ok(RrConfig {
        client: client_config(
            r.host,
            r.port,
            spec,
            &r.engine,
            r.cpus.as_deref(),
            &r.output,
            &r.connect_timeout,
        )?,
        histogram: r.histogram,
        plot: r.plot,
        probe_clock: r.probe_clock,
    })
}

fn validate(cli: args::Cli) -> Result<Command> {
    let key = server::load_key(cli.auth_key.as_deref())?;
    let mut cmd = validate_command(cli)?;
    match &mut cmd {
        Command::Server(s) => s.auth_key = key,
        Command::Tcp(c) | Command::Udp(c) => c.auth_key = key,
        Command::Rr(r) => r.client.auth_key = key,
        Command::Sweep(s) => s.base.auth_key = key,
        _ => {}
    }
    Ok(cmd)
}

fn validate_command(mut cli: args::Cli) -> Result<Command> {
    let host_flags = host::take_test_flags(&mut cli.command);
    let repeat_flags = repeat::take(&mut cli.command);
    let cmd = match cli.command {
        args::Cmd::Iface(a) => host::validate_iface(a),
        args::Cmd::Doctor(a) => host::validate_doctor(a),
        args::Cmd::Ping(a) => host::validate_ping(a),
        args::Cmd::Completions(a) => generate::completions(&a),
        args::Cmd::Man => generate::man(),
        args::Cmd::Udp(u) => validate_udp(u),
        args::Cmd::Rr(r) => Ok(Command::Rr(validate_rr(r, TestKind::Rr)?)),
        args::Cmd::Crr(r) => Ok(Command::Rr(validate_rr(r, TestKind::Crr)?)),
        args::Cmd::Sweep(args::SweepCmd::Udp(a)) => validate_sweep(a),
        args::Cmd::Compare(a) => compare::validate_compare(a),
        args::Cmd::Server(s) => {
            if s.max_concurrent == 0 {
                bail!("--max-concurrent must be at least 1");
            }
            let mut limits = ServerLimits::default();
            if let Some(n) = s.max_streams {
                limits.max_streams = n;
            }
            if let Some(t) = &s.max_time {
                limits.max_time_ms = duration_ms("--max-time", t)?;
            }
            let guard = server::validate(&s.guard, &mut limits)?;
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
                engine: engine_kind(&s.engine)?,
                cpus: parse_cpus(s.cpus.as_deref())?,
                format: format_of(&s.output),
            }))
        }
        args::Cmd::Tcp(t) => {
            let limit = match (&t.time, &t.bytes) {
                (_, Some(b)) => {
                    let n = parse_size(b).context("--bytes")?;
                    if n == 0 {
                        bail!("--bytes must be greater than zero");
                    }
                    Limit::Bytes(n)
                }
                (Some(d), None) => {
                    let ms = duration_ms("--time", d)?;
                    if ms == 0 {
                        bail!("--time must be greater than zero (use --bytes for a byte count)");
                    }
                    Limit::TimeMs(ms)
                }
                (None, None) => Limit::TimeMs(10_000),
            };
            if t.parallel == 0 {
                bail!("--parallel must be at least 1");
            }
            let len = size_u32("--len", &t.len)?;
            if len == 0 {
                bail!("--len must be at least 1 byte");
            }
            let interval_ms = duration_ms("--interval", &t.interval)?;
            if interval_ms < 10 {
                bail!("--interval must be at least 10ms");
            }
            let direction = if t.reverse {
                Direction::Reverse
            } else if t.bidir {
                Direction::Bidir
            } else {
                Direction::Forward
            };
            let window = t
                .window
                .as_deref()
                .map(|w| size_u32("--window", w))
                .transpose()?;
            let spec = TestSpec {
                protocol: linerate_proto::spec::Protocol::Tcp,
                direction,
                streams: t.parallel,
                limit,
                len,
                omit_ms: t
                    .omit
                    .as_deref()
                    .map(|o| duration_ms("--omit", o))
                    .transpose()?
                    .unwrap_or(0),
                interval_ms,
                tcp: TcpOptions {
                    window,
                    congestion: t.congestion,
                    no_delay: t.no_delay,
                    mss: t.mss,
                },
                ..TestSpec::default()
            };
            Ok(Command::Tcp(client_config(
                t.host,
                t.port,
                spec,
                &t.engine,
                t.cpus.as_deref(),
                &t.output,
                &t.connect_timeout,
            )?))
        }
    };
    repeat::attach(host::attach(cmd?, host_flags)?, repeat_flags)
}

#[cfg(test)]
mod tests {
    use super::args::DEFAULT_PORT;
    use super::*;

    fn parse(args: &str) -> Result<Command, clap::Error> {
        parse_from(
            std::iter::once("linerate".to_string())
                .chain(args.split_whitespace().map(String::from)),
        )
    }

    fn tcp(args: &str) -> ClientConfig {
        match parse(args).expect("parses") {
            Command::Tcp(c) => c,
            other => panic!("not tcp: {other:?}"),
        }
    }

    #[test]
    fn tcp_defaults() {
        let c = tcp("tcp");
        assert_eq!(c.target, Target::Embedded);
        assert_eq!(c.spec.limit, Limit::TimeMs(10_000));
        assert_eq!(c.spec.direction, Direction::Forward);
        assert_eq!(c.spec.streams, 1);
        assert_eq!(c.format, Format::Human);
    }

    #[test]
    fn issue_7_engine_is_resolved_once_into_a_typed_choice() {
        assert_eq!(tcp("tcp").engine, EngineKind::Syscall);
        assert_eq!(tcp("tcp --engine syscall").engine, EngineKind::Syscall);
        for args in [
            "tcp --engine warp",
            "udp --engine warp",
            "server --engine warp",
        ] {
            let e = parse(args).expect_err("unknown engine").to_string();
            assert!(
                e.contains("unknown engine \"warp\"; this build has: syscall"),
                "{args}: {e}"
            );
        }
        match parse("server --engine syscall").expect("parses") {
            Command::Server(s) => assert_eq!(s.engine, EngineKind::Syscall),
            other => panic!("not a server: {other:?}"),
        }
    }

    #[test]
    fn tcp_flags() {
        let c = tcp("tcp 198.18.0.1 -p 6000 -t 3s -l 64K -P 4 -R -w 4M --omit 1 -i 500ms -C cubic -N -M 1400 --json");
        assert_eq!(
            c.target,
            Target::Remote {
                host: "198.18.0.1".into(),
                port: 6000
            }
        );
        assert_eq!(c.spec.limit, Limit::TimeMs(3000));
        assert_eq!(c.spec.len, 65536);
        assert_eq!(c.spec.streams, 4);
        assert_eq!(c.spec.direction, Direction::Reverse);
        assert_eq!(c.spec.tcp.window, Some(4 << 20));
        assert_eq!(c.spec.omit_ms, 1000);
        assert_eq!(c.spec.interval_ms, 500);
        assert_eq!(c.spec.tcp.congestion.as_deref(), Some("cubic"));
        assert!(c.spec.tcp.no_delay);
        assert_eq!(c.spec.tcp.mss, Some(1400));
        assert_eq!(c.format, Format::Json);
        assert_eq!(tcp("tcp -n 10M").spec.limit, Limit::Bytes(10 << 20));
    }

    #[test]
    fn invalid_combinations_name_the_flag() {
        for (args, needle) in [
            ("tcp --reverse --bidir", "--bidir"),
            ("tcp -t 5 -n 1M", "--bytes"),
            ("tcp -P 0", "--parallel"),
            ("tcp -l 0", "--len"),
            ("tcp -t 0", "--time"),
            ("tcp -i 1ms", "--interval"),
            ("tcp --json --csv", "--csv"),
            ("tcp --cpus 9999", "--cpus"),
            ("tcp --engine warp", "engine"),
            ("tcp --skip-rx-copy", "--skip-rx-copy needs --engine batch"),
            ("udp 198.18.0.1 --no-gso", "--no-gso needs --engine batch"),
            ("tcp -l 12Q", "--len"),
            ("server --max-concurrent 0", "--max-concurrent"),
        ] {
            let e = parse(args).expect_err(args).to_string();
            assert!(e.contains(needle), "{args}: {e}");
        }
    }

    #[test]
    fn issue_8_batch_engine_options_resolve_once() {
        let c = udp("udp 198.18.0.1 --engine batch");
        assert_eq!(c.engine, EngineKind::Batch(Batch::AUTO));
        let c = udp("udp 198.18.0.1 --engine batch --no-gso --no-gro");
        assert_eq!(
            c.engine,
            EngineKind::Batch(Batch {
                gso: Toggle::Off,
                gro: Toggle::Off,
                skip_rx_copy: false
            })
        );
        // The last of a pair wins; a kernel without UDP_SEGMENT refuses it.
        let r = parse("udp 198.18.0.1 --engine batch --no-gso --gso");
        match &linerate_engine::caps::caps().udp_segment {
            Ok(()) => assert!(matches!(
                r.expect("gso on"),
                Command::Udp(c) if matches!(c.engine, EngineKind::Batch(b) if b.gso == Toggle::On)
            )),
            Err(_) => assert!(r.expect_err("refused").to_string().contains("--gso")),
        }
        let c = tcp("tcp --engine batch --skip-rx-copy");
        assert!(matches!(c.engine, EngineKind::Batch(b) if b.skip_rx_copy));
        assert_eq!(tcp("tcp").engine, EngineKind::Syscall);
    }

    #[test]
    fn netperf_names_map_to_tests() {
        let s = tcp("TCP_STREAM -H 198.18.0.2 -l 5");
        assert_eq!(s.spec.direction, Direction::Forward);
        assert_eq!(s.spec.limit, Limit::TimeMs(5000));
        assert_eq!(
            s.target,
            Target::Remote {
                host: "198.18.0.2".into(),
                port: DEFAULT_PORT
            }
        );
        let m = tcp("TCP_MAERTS 198.18.0.2");
        assert_eq!(m.spec.direction, Direction::Reverse);
        let t = tcp("-t TCP_MAERTS -H 198.18.0.2 -l -1000000");
        assert_eq!(t.spec.direction, Direction::Reverse);
        assert_eq!(t.spec.limit, Limit::Bytes(1_000_000));
    }

    #[test]
    fn issue_13_netperf_habits_work() {
        // Test-specific -m/-s/-S/-D after `--`, netperf's own `-H h -t T` order,
        // lower-case names.
        let s = tcp("-H 198.18.0.2 -t tcp_stream -l 3 -- -m 64K -s 1M -S 1M -D");
        assert_eq!(s.spec.len, 64 << 10);
        assert_eq!(s.spec.tcp.window, Some(1 << 20));
        assert!(s.spec.tcp.no_delay);
        assert_eq!(s.spec.limit, Limit::TimeMs(3000));
        // Global -p, -c/-C (always measured) and -D (interim results).
        let s = tcp("TCP_STREAM -H 198.18.0.2 -p 6000 -c -C -D 2");
        assert_eq!(s.spec.interval_ms, 2000);
        assert_eq!(
            s.target,
            Target::Remote {
                host: "198.18.0.2".into(),
                port: 6000
            }
        );
        // netperf's UDP_STREAM is unpaced unless a rate is asked for.
        let u = udp("UDP_STREAM -H 198.18.0.2 -- -m 1472");
        let spec = u.spec.udp.expect("udp");
        assert_eq!(spec.pace, linerate_proto::spec::Pace::Unlimited);
        assert_eq!(u.spec.len, 1472);
        let u = udp("UDP_STREAM -H 198.18.0.2 -b 10M");
        assert_ne!(
            u.spec.udp.expect("udp").pace,
            linerate_proto::spec::Pace::Unlimited
        );
        // -m is the request size of the request/response tests.
        let r = rr("-H 198.18.0.2 -t TCP_RR -- -m 64")
            .client
            .spec
            .rr
            .expect("rr");
        assert_eq!(r.sizes, vec![64]);
    }

    #[test]
    fn issue_13_netperf_options_linerate_cannot_honour_are_named() {
        for (args, named) in [
            ("TCP_STREAM -H h -- -M 64K", "-M"),
            ("TCP_STREAM -H h -I 99,5", "-I"),
            ("TCP_STREAM -H h -- -s 1M -S 2M", "-s/-S"),
            ("TCP_STREAM -H h -- -Q 1", "-Q"),
        ] {
            let e = parse(args).expect_err(args).to_string();
            assert!(e.contains(named), "{args}: {e}");
        }
    }

    #[test]
    fn issue_13_what_no_server_could_run_is_refused_locally() {
        let e = parse("rr --proto udp -s 70000")
            .expect_err("too large")
            .to_string();
        assert!(e.contains("--sizes") && e.contains("65507"), "{e}");
        let e = parse("rr --proto udp -s 64 -r 70000")
            .expect_err("too large")
            .to_string();
        assert!(e.contains("--response-size"), "{e}");
        // A server's own limits (raised with server flags) are its to apply.
        assert!(parse("tcp -t 100000 -P 1000").is_ok());
    }

    #[test]
    fn issue_13_len_too_large_names_the_maximum() {
        let e = parse("tcp --len 10G").expect_err("too large").to_string();
        assert!(e.contains("at most 4294967295 bytes"), "{e}");
        assert!(!e.contains("integral type"), "{e}");
    }

    fn udp(args: &str) -> ClientConfig {
        match parse(args).expect("parses") {
            Command::Udp(c) => c,
            other => panic!("not udp: {other:?}"),
        }
    }

    #[test]
    fn udp_flags() {
        let c = udp("udp 198.18.0.2 --len 8972 --rate 9.5G --burst 8 -P 2 --bidir -w 8M --priority -20 --verify -k 1000");
        let u = c.spec.udp.as_ref().expect("udp spec");
        assert_eq!(c.spec.protocol, Protocol::Udp);
        assert_eq!(c.spec.len, 8972);
        assert_eq!(u.pace, Pace::Rate(9_500_000_000));
        assert_eq!(u.burst, 8);
        assert_eq!(u.window, Some(8 << 20));
        assert_eq!(u.priority, Some(-20));
        assert!(u.verify);
        assert_eq!(c.spec.limit, Limit::Datagrams(1000));
        assert_eq!(c.spec.direction, Direction::Bidir);
        let pace = |a: &str| udp(a).spec.udp.expect("udp").pace;
        assert_eq!(pace("udp --pps 0.05"), Pace::MilliPps(50));
        assert_eq!(pace("udp --pps 2M"), Pace::MilliPps(2_000_000_000));
        assert_eq!(pace("udp -b 0"), Pace::Unlimited);
        assert_eq!(pace("udp"), Pace::Rate(1_000_000));
        assert_eq!(udp("udp -l 12K").spec.len, 12288);
        let n = udp("UDP_STREAM -H 198.18.0.2 -l 5 --pps 1k");
        assert_eq!(n.spec.protocol, Protocol::Udp);
        assert_eq!(n.spec.limit, Limit::TimeMs(5000));
        assert_eq!(
            udp("udp --inject-faults skip:3,dup:5")
                .spec
                .udp
                .expect("udp")
                .faults
                .len(),
            2
        );
        for (args, needle) in [
            ("udp -l 27", "--len"),
            ("udp -l 65508", "--len"),
            ("udp --pps 0", "--pps"),
            ("udp --pps 1 --rate 1M", "--pps"),
            ("udp --burst 0", "--burst"),
            ("udp -k 0", "--count"),
            ("udp --priority -21", "--priority"),
            ("udp --inject-faults swap:1,skip:2", "--inject-faults"),
        ] {
            let e = parse(args).expect_err(args).to_string();
            assert!(e.contains(needle), "{args}: {e}");
        }
    }

    #[test]
    fn sweep_flags() {
        let Command::Sweep(s) = parse(
            "sweep udp 198.18.0.2 --sizes 1472,4000,8972 --pps 50k:1M:50k --find-zero-loss --plot /tmp/x.svg --json",
        )
        .expect("parses") else {
            panic!("not a sweep")
        };
        assert_eq!(s.sizes, vec![1472, 4000, 8972]);
        assert_eq!(s.points.len(), 20);
        assert_eq!(s.points[0], 50_000.0);
        assert_eq!(s.points[19], 1_000_000.0);
        assert!(!s.rates_are_bits && s.find_zero_loss);
        assert_eq!(s.base.format, Format::Json);
        let Command::Sweep(s) = parse("sweep udp --rates 100M,1G -t 1").expect("parses") else {
            panic!("not a sweep")
        };
        assert_eq!(s.points, vec![1e8, 1e9]);
        assert!(s.rates_are_bits);
        assert_eq!(s.base.target, Target::Embedded);
        for (args, needle) in [
            ("sweep udp", "--pps"),
            ("sweep udp --pps 10:1:1", "--pps"),
            ("sweep udp --pps 1k --sizes 10", "--sizes"),
            ("sweep udp --pps 1:100000:1", "--pps"),
        ] {
            let e = parse(args).expect_err(args).to_string();
            assert!(e.contains(needle), "{args}: {e}");
        }
    }

    fn rr(args: &str) -> RrConfig {
        match parse(args).expect("parses") {
            Command::Rr(c) => c,
            other => panic!("not rr: {other:?}"),
        }
    }

    #[test]
    fn rr_defaults_and_flags() {
        let c = rr("rr");
        assert_eq!(c.client.target, Target::Embedded);
        assert_eq!(c.client.spec.kind, TestKind::Rr);
        assert!(c.client.spec.tcp.no_delay);
        let r = c.client.spec.rr.expect("rr spec");
        assert_eq!(r.sizes, DEFAULT_RR_SIZES.to_vec());
        assert_eq!(r.limit, RrLimit::TimeMs(1000));
        assert_eq!((r.batch, r.busy_poll, r.under_load), (1, false, 0));

        let c = rr("rr 198.18.0.2 --sizes 1,64,1K -r 8 -n 500 -P 2 --batch 10 --busy-poll --under-load 2 --histogram h.csv --plot p.svg --json");
        let r = c.client.spec.rr.clone().expect("rr spec");
        assert_eq!(r.sizes, vec![1, 64, 1024]);
        assert_eq!(r.response_size, Some(8));
        assert_eq!(r.limit, RrLimit::Count(500));
        assert_eq!((r.batch, r.busy_poll, r.under_load), (10, true, 2));
        assert_eq!(c.client.spec.streams, 2);
        assert_eq!(c.histogram, Some(PathBuf::from("h.csv")));
        assert_eq!(c.plot, Some(PathBuf::from("p.svg")));
        assert_eq!(
            rr("rr -s 100 -t 250ms").client.spec.rr.expect("rr").limit,
            RrLimit::TimeMs(250)
        );

        let c = rr("crr");
        assert_eq!(c.client.spec.kind, TestKind::Crr);
        assert_eq!(c.client.spec.rr.expect("rr").sizes, vec![1]);
    }

    #[test]
    fn rr_refusals_name_the_flag() {
        for (args, needle) in [
            ("crr --proto udp", "no UDP form"),
            ("rr --proto udp --under-load 1", "--under-load"),
            ("rr --proto sctp", "--proto"),
            ("rr --sizes 1,0", "--sizes"),
            ("rr --sizes ,", "--sizes"),
            ("rr -s 1 --sizes 2", "--sizes"),
            ("rr -n 0", "--count"),
            ("rr -t 0", "--time"),
            ("rr -t 1 -n 5", "--count"),
            ("rr -P 0", "--parallel"),
            ("rr --batch 0", "--batch"),
            ("rr --under-load 0", "--under-load"),
            ("crr --under-load 1", "--under-load"),
            ("crr --busy-poll", "--busy-poll"),
        ] {
            let e = parse(args).expect_err(args).to_string();
            assert!(e.contains(needle), "{args}: {e}");
        }
    }

    #[test]
    fn netperf_rr_names() {
        let c = rr("TCP_RR -H 198.18.0.2");
        assert_eq!(c.client.spec.kind, TestKind::Rr);
        // netperf's default: one 1-byte size.
        assert_eq!(c.client.spec.rr.clone().expect("rr").sizes, vec![1]);
        let r = rr("TCP_RR -H 198.18.0.2 -l 5 -- -r 64,1024")
            .client
            .spec
            .rr
            .expect("rr");
        assert_eq!((r.sizes, r.response_size), (vec![64], Some(1024)));
        assert_eq!(r.limit, RrLimit::TimeMs(5000));
        let r = rr("TCP_RR 198.18.0.2 --sizes 8,16")
            .client
            .spec
            .rr
            .expect("rr");
        assert_eq!(r.sizes, vec![8, 16]);
        assert_eq!(rr("TCP_CRR 198.18.0.2").client.spec.kind, TestKind::Crr);
        assert_eq!(
            rr("-t TCP_RR -H 198.18.0.2 -l -1000")
                .client
                .spec
                .rr
                .expect("rr")
                .limit,
            RrLimit::Count(1000)
        );
        let u = rr("UDP_RR -H 198.18.0.2").client.spec;
        assert_eq!((u.kind, u.protocol), (TestKind::Rr, Protocol::Udp));
    }

    #[test]
    fn server_flags() {
        match parse("server --port 6001 --once --max-concurrent 3 --bind 127.0.0.1")
            .expect("parses")
        {
            Command::Server(s) => {
                assert_eq!(s.port, 6001);
                assert!(s.once);
                assert_eq!(s.max_concurrent, 3);
                assert_eq!(s.bind, Some("127.0.0.1".parse().expect("ip")));
            }
            other => panic!("not server: {other:?}"),
        }
    }
}
