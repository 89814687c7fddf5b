//! Flags of `linerate qualify HOST` and their validation into a
//! [`QualifyConfig`]: the methods, their durations, the SLA, and one trial
//! template per kind of test (UDP stream, TCP stream, UDP request/response)
//! per engine, each validated exactly as `linerate udp|tcp|rr` validates
//! its own flags.

use super::*;
use crate::qualify::sla::{self, Sla};
use anyhow::Context;
use clap::Args;
use common::DEFAULT_PORT;
use linerate_engine::engines::batch::Toggle;
use linerate_stats::units::parse_rate;

/// Exit statuses of `qualify`, in `--help` and the README.
pub const QUALIFY_EXIT: &str = "Verdicts: PASS, FAIL, NOT RUN, INCONCLUSIVE. An RFC \
2544 size with no zero-loss rate, or only the search's floor (1/64 of what an unpaced \
stream delivered), FAILs without an SLA rate; a search trial that the tester's own \
stalls spoilt past its reruns is inconclusive (not loss), and a size whose search \
they stopped short of a decision is INCONCLUSIVE. Exit status: 0 every judged KPI \
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

fn methods(list: &str) -> Result<Methods> {
    let mut m = Methods::default();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        match name.to_ascii_lowercase().replace(['-', '.'], "").as_str() {
            "rfc2544" => m.rfc2544 = true,
            "y1564" => m.y1564 = true,
            "rfc6349" => m.rfc6349 = true,
            _ => bail!("--method: {name:?} is not rfc2544, y1564 or rfc6349"),
        }
    }
    if m == Methods::default() {
        bail!("--method: no method given (rfc2544, y1564, rfc6349)");
    }
    Ok(m)
}

/// A duration flag with its default for normal and `--quick` runs.
fn dur(flag: &str, v: Option<&str>, default_ms: u64, quick_ms: u64, quick: bool) -> Result<u64> {
    let ms = match v {
        Some(v) => duration_ms(flag, v)?,
        None if quick => quick_ms,
        None => default_ms,
    };
    if ms < 100 {
        bail!("{flag}: at least 100ms (a trial shorter than that measures its own start)");
    }
    Ok(ms)
}

fn rate_flag(flag: &str, v: Option<&str>) -> Result<Option<f64>> {
    v.map(|r| parse_rate(r).with_context(|| flag.to_owned()))
        .transpose()
}

/// The templates of one engine, each through its command's validation.
fn engine_templates(a: &QualifyArgs, engine: &str) -> Result<QualifyEngine> {
    let common = |kind: &str| {
        vec![
            "linerate".to_string(),
            kind.to_string(),
            a.host.clone(),
            "-p".into(),
            a.port.to_string(),
            "--engine".into(),
            engine.to_string(),
            "--connect-timeout".into(),
            a.connect_timeout.clone(),
            "-t".into(),
            "1".into(),
        ]
    };
    let validated = |argv: Vec<String>| -> Result<Command> {
        validate(args::Cli::try_parse_from(argv)?).with_context(|| format!("--engines {engine}"))
    };
    let Command::Udp(mut udp) = validated(common("udp"))? else {
        bail!("internal: qualify's UDP template is not a UDP test");
    };
    // RFC 2544 and Y.1564 offer frames evenly spaced: a GSO run leaves
    // as one burst at the sender's line rate, which a policer or a short
    // queue on the path drops even below the committed rate.
    if let EngineKind::Batch(b) = &mut udp.engine {
        b.gso = Toggle::Off;
    }
    let Command::Tcp(tcp) = validated(common("tcp"))? else {
        bail!("internal: qualify's TCP template is not a TCP test");
    };
    let mut rr = common("rr");
    rr.extend(["--proto".into(), "udp".into(), "-s".into(), "64".into()]);
    let Command::Rr(rr) = validated(rr)? else {
        bail!("internal: qualify's probe template is not an rr test");
    };
    Ok(QualifyEngine {
        name: engine.to_owned(),
        udp,
        tcp,
        rr: rr.client,
    })
}

pub(super) fn validate_qualify(a: QualifyArgs) -> Result<Command> {
    let methods_defaulted = a.method == "rfc2544,y1564,rfc6349";
    let methods = methods(&a.method)?;
    let mut thresholds = match &a.sla_file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("--sla-file {}", path.display()))?;
            sla::from_toml(&text).with_context(|| format!("--sla-file {}", path.display()))?
        }
        None => Sla::default(),
    };
    if let Some(s) = &a.sla {
        sla::apply_flag(&mut thresholds, s).context("--sla")?;
    }
    let cir = rate_flag("--cir", a.cir.as_deref())?;
    let eir = rate_flag("--eir", a.eir.as_deref())?.unwrap_or(0.0);
    if a.eir.is_some() && cir.is_none() {
        bail!("--eir is the excess above --cir: give --cir too");
    }
    if methods.y1564 && !methods_defaulted && cir.is_none() {
        bail!("--method y1564 needs --cir RATE (the committed information rate)");
    }
    if let (Some(rate), Some(cir)) = (thresholds.rate_bps, cir) {
        if rate > cir + eir {
            bail!(
                "SLA rate: {} is impossible: above CIR+EIR ({}), the most the service is offered",
                linerate_stats::units::format_rate(rate),
                linerate_stats::units::format_rate(cir + eir)
            );
        }
    }
    let sizes = a
        .sizes
        .as_deref()
        .map(|s| {
            let v = rr::parse_sizes("--sizes", s)?;
            let (min, max) = (
                linerate_proto::datagram::HEADER_LEN as u32,
                linerate_proto::datagram::MAX_LEN as u32,
            );
            if let Some(bad) = v.iter().find(|l| !(min..=max).contains(l)) {
                bail!("--sizes: {bad} bytes; a datagram must be {min}..={max} bytes (the header takes {min})");
            }
            Ok(v)
        })
        .transpose()?;
    let engines = a
        .engines
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(|e| engine_templates(&a, e))
        .collect::<Result<Vec<_>>>()?;
    if engines.is_empty() {
        bail!("--engines: no engine given");
    }
    let q = a.quick;
    let preload = preload_run(&a)?;
    Ok(Command::Qualify(QualifyConfig {
        trial_ms: dur("--trial", a.trial.as_deref(), 1000, 500, q)?,
        step_ms: dur("--step-time", a.step_time.as_deref(), 2000, 1000, q)?,
        perf_ms: dur("--duration", a.duration.as_deref(), 20_000, 5000, q)?,
        tcp_ms: dur("--tcp-time", a.tcp_time.as_deref(), 10_000, 3000, q)?,
        max_rate: rate_flag("--max-rate", a.max_rate.as_deref())?,
        host: a.host,
        port: a.port,
        methods,
        quick: q,
        sizes,
        cir,
        eir,
        sla: thresholds,
        engines,
        preload,
        json: a.json,
        report: a.report,
    }))
}

/// `--preload LIB`: this qualification with the syscall engine, run by a
/// child process under `LD_PRELOAD` that prints its JSON (compare's
/// [`PreloadRun`]). Every flag that shapes the run goes along (a flag
/// added to [`QualifyArgs`] goes here too, and into the test's `shape`).
fn preload_run(a: &QualifyArgs) -> Result<Option<PreloadRun>> {
    let Some(lib) = &a.preload else {
        return Ok(None);
    };
    let mut tail: Vec<String> = vec![
        "-p".into(),
        a.port.to_string(),
        "--method".into(),
        a.method.clone(),
        "--connect-timeout".into(),
        a.connect_timeout.clone(),
    ];
    if a.quick {
        tail.push("--quick".into());
    }
    let valued = [
        ("--sizes", &a.sizes),
        ("--cir", &a.cir),
        ("--eir", &a.eir),
        ("--sla", &a.sla),
        ("--trial", &a.trial),
        ("--step-time", &a.step_time),
        ("--duration", &a.duration),
        ("--tcp-time", &a.tcp_time),
        ("--max-rate", &a.max_rate),
    ];
    for (flag, v) in valued {
        if let Some(v) = v {
            tail.extend([flag.to_owned(), v.clone()]);
        }
    }
    if let Some(f) = &a.sla_file {
        tail.extend(["--sla-file".into(), f.to_string_lossy().into_owned()]);
    }
    tail.extend(["--engines".into(), "syscall".into(), "--json".into()]);
    Ok(Some(PreloadRun {
        lib: compare::preload_lib(lib)?,
        head: vec!["qualify".into(), a.host.clone()],
        tail,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn qualify(argv: &[String]) -> QualifyConfig {
        let argv = std::iter::once("linerate".to_owned()).chain(argv.iter().cloned());
        match parse_from(argv).expect("parses") {
            Command::Qualify(q) => q,
            other => panic!("not qualify: {other:?}"),
        }
    }

    /// What a qualification measures and judges (not how it prints).
    fn shape(q: &QualifyConfig) -> String {
        format!(
            "{} {} {:?} {} {:?} {:?} {} {:?} {} {} {} {} {:?}",
            q.host,
            q.port,
            q.methods,
            q.quick,
            q.sizes,
            q.cir,
            q.eir,
            q.sla,
            q.trial_ms,
            q.step_ms,
            q.perf_ms,
            q.tcp_ms,
            q.max_rate
        )
    }

    /// Issue 27: `--preload`'s child runs the same qualification, with
    /// the syscall engine, printing JSON for the parent to read.
    #[test]
    fn issue_27_preload_child_runs_the_same_qualification() {
        let dir = std::env::temp_dir().join(format!("lr-qp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let (lib, sla) = (dir.join("lib.so"), dir.join("sla.toml"));
        std::fs::write(&lib, b"").expect("lib");
        std::fs::write(&sla, "jitter = \"2ms\"\n").expect("sla");
        let argv: Vec<String> = [
            "qualify",
            "192.0.2.1",
            "-p",
            "5299",
            "--method",
            "rfc2544,y1564",
            "--quick",
            "--sizes",
            "64,1472",
            "--cir",
            "10M",
            "--eir",
            "2M",
            "--sla",
            "loss=0.1%",
            "--trial",
            "300ms",
            "--step-time",
            "400ms",
            "--duration",
            "2s",
            "--tcp-time",
            "1s",
            "--max-rate",
            "50M",
            "--connect-timeout",
            "3s",
            "--engines",
            "syscall,batch",
            "--json",
            "--report",
            "q.html",
            "--preload",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([lib.display().to_string(), "--sla-file".into()])
        .chain([sla.display().to_string()])
        .collect();
        let parent = qualify(&argv);
        let p = parent.preload.as_ref().expect("a preload run");
        assert!(p.lib.is_absolute());
        let child = qualify(&[p.head.clone(), p.tail.clone()].concat());
        assert_eq!(shape(&child), shape(&parent));
        assert!(child.json && child.report.is_none() && child.preload.is_none());
        let engines: Vec<&str> = child.engines.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(engines, ["syscall"]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
