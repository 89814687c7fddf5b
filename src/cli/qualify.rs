//! Flags of `linerate qualify HOST` and their validation into a
//! [`QualifyConfig`]: the methods, their durations, the SLA, and one trial
//! template per kind of test (UDP stream, TCP stream, UDP request/response)
//! per engine, each validated exactly as `linerate udp|tcp|rr` validates
//! its own flags.

use anyhow::{bail, Context, Result};
use clap::Parser;
use linerate_engine::engines::EngineKind;

use crate::qualify::sla::{self, Sla};

use super::args::{self, QualifyArgs};
use super::command::{Command, Methods, PreloadRun, QualifyConfig, QualifyEngine};
use super::test_line;
use super::values::duration_ms;
use super::{compare, rr};
use linerate_engine::engines::batch::Toggle;
use linerate_stats::units::parse_rate;

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
        test_line::validate(args::Cli::try_parse_from(argv)?)
            .with_context(|| format!("--engines {engine}"))
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
    use crate::cli::parse_from;

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
