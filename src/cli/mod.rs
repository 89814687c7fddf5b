//! Command-line parsing in two stages: clap parses flags as typed
//! ([`args`]), then [`validate`] turns them into a [`Command`] of plain
//! config types. Clap types never leave this module.

mod args;
mod common;
mod compare;
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

use std::net::IpAddr;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{CommandFactory, Parser};
use linerate_engine::engines::auto::{self, Workload};
use linerate_engine::engines::batch::Toggle;
use linerate_engine::engines::{Batch, EngineKind, Xdp, XdpMode};
use linerate_proto::limits::ServerLimits;
use linerate_proto::spec::{
    Direction, Limit, Pace, Protocol, RrLimit, RrSpec, TcpOptions, TestKind, TestSpec, UdpSpec,
    DEFAULT_RR_SIZES,
};
use linerate_report::render::Format;
use linerate_stats::units::{parse_duration, parse_rate, parse_size};

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
    /// `tcp`, `udp` or `rr`.
    pub test: String,
    /// The test's flags as given.
    pub args: Vec<String>,
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
/// `0-3,6` for the ids `[0, 1, 2, 3, 6]`.
fn cpu_list(ids: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ids.len() {
        let mut j = i;
        while j + 1 < ids.len() && ids[j + 1] == ids[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            ids[i].to_string()
        } else {
            format!("{}-{}", ids[i], ids[j])
        });
        i = j + 1;
    }
    out.join(",")
}

fn parse_cpus(list: Option<&str>) -> Result<Vec<usize>> {
    let Some(list) = list else {
        return Ok(Vec::new());
    };
    // The CPUs this process may run on (taskset's mask), by id.
    let allowed = linerate_engine::cpu::allowed_cpus();
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
            if !allowed.is_empty() && !allowed.contains(&c) {
                bail!(
                    "--cpus: CPU {c} is not available to this process (it may run on {})",
                    cpu_list(&allowed)
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
    if let Err(e) = linerate_proto::negotiate::negotiate(&spec, &ServerLimits::unlimited()) {
        let flag = match e.field {
            "streams" => "parallel".to_owned(),
            f => f.replace('_', "-"),
        };
        bail!("--{flag}: {}", e.reason);
    }
    let asked_server_engine = server_engine(engine)?;
    // An engine that cannot carry this kind of test is refused here, by
    // name, never replaced (`zerocopy:sendfile` is TCP streams only).
    if let Some(why) = asked_server_engine
        .as_deref()
        .and_then(|n| n.parse::<EngineKind>().ok())
        .and_then(|k| k.refusal(&spec))
    {
        bail!("--server-engine {why}");
    }
    if let Ok(k) = engine.engine.parse::<EngineKind>() {
        if let Some(why) = k.refusal(&spec) {
            bail!("--engine {why}");
        }
    }
    // Before the engine's own checks: loopback is the usual first try,
    // and the answer there is the interface, whatever the privileges.
    let xdp_flag = if engine.engine == "xdp" {
        Some("--engine")
    } else {
        (asked_server_engine.as_deref() == Some("xdp")).then_some("--server-engine")
    };
    if let Some(flag) = xdp_flag.filter(|_| to_loopback(host.as_deref(), port)) {
        bail!(
            "{flag} xdp: {}",
            linerate_engine::engines::xdp::loopback_refusal()
        );
    }
    let (engine, engine_note) = client_engine(engine, &spec)?;
    let engine_note = engine_note.or_else(|| {
        let available = std::thread::available_parallelism().map_or(1, usize::from);
        sqpoll_note(engine, &spec, host.as_deref(), available)
    });
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
        iperf3: false,
        server_engine: asked_server_engine,
        auth_key: None,
        iface: None,
        report: None,
        plot: None,
        quiet_intervals: false,
    })
}

/// Whether the test's peer is reached over loopback (the embedded server,
/// or a host whose every address is a loopback one), where AF_XDP cannot
/// bind.
fn to_loopback(host: Option<&str>, port: u16) -> bool {
    use std::net::ToSocketAddrs;
    let Some(host) = host else {
        return true;
    };
    match (host, port).to_socket_addrs() {
        Ok(addrs) => {
            let addrs: Vec<_> = addrs.collect();
            !addrs.is_empty() && addrs.iter().all(|a| a.ip().is_loopback())
        }
        Err(_) => false,
    }
}

/// `--server-engine`: a name this build knows, or `auto` (whether the
/// server has and allows it is the server's answer).
fn server_engine(a: &args::EngineArgs) -> Result<Option<String>> {
    let Some(name) = &a.server_engine else {
        return Ok(None);
    };
    if name != AUTO {
        name.parse::<EngineKind>()
            .context("--server-engine (auto, or an engine)")?;
    }
    Ok(Some(name.clone()))
}

/// A server's `--engine`: `auto` is applied per test (the server learns
/// the test from the client's Hello), any other engine serves every test.
fn server_side_engine(a: &args::EngineArgs) -> Result<auto::Configured> {
    if a.engine == AUTO {
        if let Some((flag, engine)) = engine_only_flag(a) {
            bail!(
                "{flag} needs --engine {engine} (auto picks an engine, and its options, per test)"
            );
        }
        return Ok(auto::Configured::Auto);
    }
    Ok(auto::Configured::Fixed(engine_kind(a)?))
}

/// `--engine` (not `auto`) and its options: resolved once, and checked
/// against this kernel (an option the kernel lacks is refused with the
/// reason).
fn engine_kind(a: &args::EngineArgs) -> Result<EngineKind> {
    let toggle = |on: bool, off: bool| match (on, off) {
        (true, _) => Toggle::On,
        (_, true) => Toggle::Off,
        _ => Toggle::Auto,
    };
    let kind = a.engine.parse::<EngineKind>()?;
    if let Some((flag, engine)) = engine_only_flag(a).filter(|(_, e)| *e != kind.name()) {
        bail!("{flag} needs --engine {engine} (the {kind} engine has no such option)");
    }
    let kind = match kind {
        EngineKind::Batch(_) => EngineKind::Batch(Batch {
            gso: toggle(a.gso, a.no_gso),
            gro: toggle(a.gro, a.no_gro),
        }),
        EngineKind::Xdp(_) => EngineKind::Xdp(Xdp {
            mode: match a.xdp_mode.as_deref() {
                Some("native") => Some(XdpMode::Native),
                Some("generic") => Some(XdpMode::Generic),
                _ => None,
            },
            zero_copy: match (a.xdp_zerocopy, a.xdp_copy) {
                (true, _) => Some(true),
                (_, true) => Some(false),
                _ => None,
            },
        }),
        other => other,
    };
    Ok(kind.check()?)
}

/// The first engine-specific option given, if any, and its engine.
fn engine_only_flag(a: &args::EngineArgs) -> Option<(&'static str, &'static str)> {
    [
        (a.gso, "--gso", "batch"),
        (a.no_gso, "--no-gso", "batch"),
        (a.gro, "--gro", "batch"),
        (a.no_gro, "--no-gro", "batch"),
        (a.xdp_mode.is_some(), "--xdp-mode", "xdp"),
        (a.xdp_copy, "--xdp-copy", "xdp"),
        (a.xdp_zerocopy, "--xdp-zerocopy", "xdp"),
    ]
    .into_iter()
    .find_map(|(set, flag, engine)| set.then_some((flag, engine)))
}

/// A client's `--engine`: `auto` is resolved here, once, for this test by
/// the rule in `engines::auto`, and the note naming the choice and what
/// was skipped goes into the report.
fn client_engine(a: &args::EngineArgs, spec: &TestSpec) -> Result<(EngineKind, Option<String>)> {
    if a.engine != AUTO {
        return Ok((engine_kind(a)?, None));
    }
    if let Some((flag, engine)) = engine_only_flag(a) {
        bail!("{flag} needs --engine {engine} (auto picks an engine, and its options, per test)");
    }
    let w = Workload::of(spec);
    let c = auto::choose(w);
    let mut note = c.note(w);
    // Event loops run the engines whose per-socket I/O costs nothing.
    let runs = match spec.flows {
        Some(_) => linerate_engine::event_loop::engine_for(c.kind, spec.protocol),
        None => c.kind,
    };
    if runs != c.kind {
        note.push_str(&format!("; event-loop flows (--flows) run {runs}"));
    }
    Ok((c.kind, Some(note)))
}

/// `uring:sqpoll` on a host with too few CPUs: each ring's kernel thread
/// polls its submission queue on a CPU of its own, so with fewer CPUs than
/// busy threads they time-share, and the test measures the scheduler
/// (2026-11-23 bench, 2 vCPUs, loopback: crr 71 connections/s against
/// 10,878 with `syscall`, rr p50 8 ms against 55 µs). The user asked for
/// it, so it runs; the report says why its figures look so.
fn sqpoll_note(
    engine: EngineKind,
    spec: &TestSpec,
    host: Option<&str>,
    available: usize,
) -> Option<String> {
    if engine != (EngineKind::Uring { sqpoll: true }) {
        return None;
    }
    let rings = spec.connection_count().max(1);
    let local_server = host.map_or(true, |h| {
        h == "localhost" || h.parse::<IpAddr>().is_ok_and(|a| a.is_loopback())
    });
    // The application thread and the kernel's polling thread per ring, on
    // both sides when the server shares this host.
    let busy = 2 * rings * if local_server { 2 } else { 1 };
    (busy > available).then(|| {
        format!(
            "uring:sqpoll: {busy} threads want a CPU each on this host ({rings} ring(s) per side{}, \
             each with its kernel submission-polling thread) and this process may use {available}; \
             they time-share, so the figures measure the scheduler more than the path \
             (run with fewer streams, on a larger host, or with --engine uring)",
            if local_server { ", both sides here" } else { "" }
        )
    })
}

fn duration_ms(flag: &str, v: &str) -> Result<u64> {
    if v.trim_start().starts_with('-') {
        bail!("{flag}: {v} is negative; give a duration such as 10, 500ms or 2m");
    }
    let d = parse_duration(v).with_context(|| flag.to_string())?;
    Ok(d.as_millis() as u64)
}

/// `--interval`: at least 10 ms, or 0 for iperf3's "no interval lines"
/// (`-i 0`): then intervals are measured at the default 1 s but not
/// printed. Returns the interval and whether its lines are printed.
fn interval_flag(v: &str) -> Result<(u64, bool)> {
    let ms = duration_ms("--interval", v)?;
    match ms {
        0 => Ok((1000, false)),
        1..=9 => bail!("--interval must be at least 10ms (or 0: no interval lines)"),
        _ => Ok((ms, true)),
    }
}

/// `--omit`, in ms (0 without one).
fn omit_ms(v: Option<&str>) -> Result<u64> {
    v.map_or(Ok(0), |o| duration_ms("--omit", o))
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
    let flows = flows_spec(u.flows, u.threads, u.busy_poll, u.iperf3)?;
    if flows.is_some() && u.priority.is_some() {
        bail!(
            "--priority renices receiving stream threads (-P); an event loop of --flows is not one"
        );
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
    let (interval_ms, interval_lines) = interval_flag(&u.interval)?;
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
    let mut spec = TestSpec {
        protocol: Protocol::Udp,
        direction,
        streams: u.parallel,
        limit,
        len,
        omit_ms: omit_ms(u.omit.as_deref())?,
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
        busy_poll: u.busy_poll,
        flows,
        ..TestSpec::default()
    };
    if u.iperf3 {
        iperf3_refuses(false, u.busy_poll)?;
    }
    let conns = spec.connection_count();
    if let Some(udp) = spec.udp.as_mut() {
        // Not with --iperf3: the window travels as iperf3's -w, which a
        // real iperf3 server sets without force and fails the test when
        // rmem_max is lower (a linerate server deepens its own receive
        // buffers for unpaced iperf3 clients).
        if udp.pace == Pace::Unlimited && udp.window.is_none() && !u.iperf3 {
            // A client does not know the server's --max-test-memory.
            udp.window = linerate_proto::limits::unpaced_udp_window(
                conns,
                linerate_proto::limits::DEFAULT_MAX_TEST_MEMORY,
            );
        }
    }
    let mut cfg = client_config(
        u.host,
        u.port,
        spec,
        &u.engine,
        u.cpus.as_deref(),
        &u.output,
        &u.connect_timeout,
    )?;
    cfg.iperf3 = u.iperf3;
    cfg.plot = u.plot;
    cfg.quiet_intervals = !interval_lines;
    Ok(Command::Udp(cfg))
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

/// `--flows N --threads T`: the spec's flows (`None` without `--flows`).
pub(super) fn flows_spec(
    flows: Option<u32>,
    threads: Option<u16>,
    busy_poll: bool,
    iperf3: bool,
) -> Result<Option<linerate_proto::spec::Flows>> {
    let Some(count) = flows else {
        return Ok(None);
    };
    if count == 0 {
        bail!("--flows must be at least 1");
    }
    let threads = threads.unwrap_or(1);
    if threads == 0 {
        bail!("--threads must be at least 1");
    }
    if busy_poll {
        bail!("--flows waits in epoll; --busy-poll spins per-thread streams (-P) only");
    }
    if iperf3 {
        bail!("--flows is linerate's own protocol; an iperf3 server takes -P");
    }
    Ok(Some(linerate_proto::spec::Flows { count, threads }))
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
        args::Cmd::Udp(u) => validate_udp(u),
        args::Cmd::Rr(r) => Ok(Command::Rr(validate_rr(r, TestKind::Rr)?)),
        args::Cmd::Crr(r) => Ok(Command::Rr(validate_rr(r, TestKind::Crr)?)),
        args::Cmd::Sweep(args::SweepCmd::Udp(a)) => validate_sweep(a),
        args::Cmd::Compare(a) => compare::validate_compare(a),
        args::Cmd::Qualify(a) => qualify::validate_qualify(a),
        args::Cmd::Msg(a) => msg::validate_msg(a),
        args::Cmd::MsgPeer(a) => msg::validate_peer(a),
        args::Cmd::Server(s) => {
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
                    limits.own_engine_udp_streams_only =
                        Some(format!("{}: UDP stream tests only", k.name()));
                }
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
        args::Cmd::Tcp(t) => {
            if t.udp {
                bail!("linerate tcp has no -u: a UDP test is `linerate udp HOST …` (the same flags, plus --rate/--pps)");
            }
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
            let flows = flows_spec(t.flows, t.threads, t.busy_poll, t.iperf3)?;
            let len = size_u32("--len", &t.len)?;
            if len == 0 {
                bail!("--len must be at least 1 byte");
            }
            let (interval_ms, interval_lines) = interval_flag(&t.interval)?;
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
                omit_ms: omit_ms(t.omit.as_deref())?,
                interval_ms,
                tcp: TcpOptions {
                    unix: tcp_transport(&t)?,
                    window,
                    congestion: t.congestion,
                    no_delay: t.no_delay,
                    mss: t.mss,
                    rate: tcp_rate(t.rate.as_deref())?,
                    skip_rx_copy: t.skip_rx_copy,
                },
                busy_poll: t.busy_poll,
                flows,
                ..TestSpec::default()
            };
            if t.iperf3 {
                iperf3_refuses(t.skip_rx_copy, t.busy_poll)?;
            }
            let mut cfg = client_config(
                t.host,
                t.port,
                spec,
                &t.engine,
                t.cpus.as_deref(),
                &t.output,
                &t.connect_timeout,
            )?;
            cfg.iperf3 = t.iperf3;
            cfg.plot = t.plot;
            cfg.quiet_intervals = !interval_lines;
            Ok(Command::Tcp(cfg))
        }
    };
    repeat::attach(host::attach(cmd?, host_flags)?, repeat_flags)
}

/// Options an iperf3 server cannot be asked for (its protocol has no
/// busy polling, and linerate does not send iperf3's skip_rx_copy): refused
/// rather than applied to one side only.
fn iperf3_refuses(skip_rx_copy: bool, busy_poll: bool) -> Result<()> {
    if skip_rx_copy {
        bail!("--skip-rx-copy is not available with --iperf3 (use iperf3's own --skip-rx-copy on its server)");
    }
    if busy_poll {
        bail!("--busy-poll is not available with --iperf3 (an iperf3 server cannot be asked to busy-poll)");
    }
    Ok(())
}

/// `tcp --rate`: bit/s per sending stream; `0` or absent: unpaced. The
/// kernel paces in bytes per second, so 8 bit/s is the least.
fn tcp_rate(rate: Option<&str>) -> Result<Option<u64>> {
    match rate.map(str::trim) {
        None | Some("0") => Ok(None),
        Some(r) => {
            let bps = parse_rate(r).context("--rate")?;
            let min = linerate_proto::limits::MIN_TCP_RATE_BPS;
            if bps.is_nan() || bps < min as f64 {
                bail!(
                    "--rate: {r:?} is below {min} bit/s (the kernel paces whole bytes per second)"
                );
            }
            Ok(Some(bps.round() as u64))
        }
    }
}

/// `tcp --transport`: whether the data connections are Unix stream
/// sockets; the TCP-only flags are refused with it, by name.
fn tcp_transport(t: &args::TcpArgs) -> Result<bool> {
    match t.transport.as_str() {
        "tcp" => return Ok(false),
        "unix" => {}
        other => bail!("--transport: {other:?} is not tcp or unix"),
    }
    let tcp_only = [
        ("--window", t.window.is_some()),
        ("--congestion", t.congestion.is_some()),
        ("--no-delay", t.no_delay),
        ("--mss", t.mss.is_some()),
        ("--rate", t.rate.is_some()),
        ("--iperf3", t.iperf3),
        ("--skip-rx-copy", t.skip_rx_copy),
        ("--busy-poll", t.busy_poll),
    ];
    if let Some((flag, _)) = tcp_only.iter().find(|(_, set)| *set) {
        bail!("{flag} is a TCP option; --transport unix data connections are Unix stream sockets");
    }
    // The other engines' zero-copy sends and registered buffers are TCP's.
    for (flag, e) in [
        ("--engine", Some(t.engine.engine.as_str())),
        ("--server-engine", t.engine.server_engine.as_deref()),
    ] {
        if let Some(e) = e.filter(|e| !matches!(*e, "syscall" | "auto")) {
            bail!("{flag} {e}: --transport unix runs the syscall engine (read/write) only");
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests;
