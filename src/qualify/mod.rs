//! `linerate qualify HOST`: a path's acceptance test in one run. The
//! preflight ([`preflight`]), then the methods asked for — RFC 2544
//! ([`rfc2544`]), ITU-T Y.1564 ([`y1564`]), RFC 6349 ([`rfc6349`]) — each
//! built from the trials linerate already runs ([`trials`]: sweep's UDP
//! trial, rr probes, the TCP stream) and the arithmetic of [`method`],
//! every KPI judged against the SLA ([`sla`]), once per engine. One
//! summary (human or `--json`), an optional HTML page, and an exit status
//! a pipeline can gate on.

mod ctx;
pub mod method;
mod preflight;
mod rfc2544;
mod rfc6349;
pub mod sla;
mod trials;
mod y1564;

use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context;
use linerate_report::qualify::{
    QualifyReport, QualifyRun, Rfc2544, Rfc6349, Verdict, HEADER_CONVENTION, QUALIFY_SCHEMA, Y1564,
};
use linerate_report::render::{export, Format};

use crate::cli::{PreloadRun, QualifyConfig, QualifyEngine};
use linerate_run::error::RunError;
use linerate_run::outcome::INTERRUPTED;
use trials::{Stalls, Stop};

pub use ctx::Ctx;

/// Exit statuses (also in `--help` and the README).
pub const EXIT_SLA_FAILED: u8 = 4;
pub const EXIT_COULD_NOT_RUN: u8 = 5;
/// It ran, but the tester's own stalls left a verdict undecided.
pub const EXIT_INCONCLUSIVE: u8 = 6;
const EXIT_INTERRUPTED: u8 = 130;

/// Words for a stop, naming the step.
fn stopped(step: &str, s: &Stop) -> String {
    format!("{step}: {}", s.words())
}

/// The method named `method` that a stop ended, its `verdict` counting the
/// step that did not run: NOT RUN, or FAIL where one of its steps had
/// failed (`Verdict::all`), never a PASS for what ran before the stop.
fn ended(method: &str, verdict: &mut Verdict, s: Stop) -> (String, Stop) {
    *verdict = Verdict::all([*verdict, Verdict::NotRun]);
    (method.into(), s)
}

/// The methods' outcome so far: `Err` carries the step that stopped them.
fn methods(c: &Ctx<'_>, run: &mut QualifyRun) -> Result<(), (String, Stop)> {
    let cfg = c.cfg;
    if cfg.methods.rfc2544 {
        let sizes = cfg.sizes.clone().unwrap_or_else(|| {
            method::rfc2544_sizes(
                c.pre.path_mtu.unwrap_or(1500),
                c.v6,
                linerate_proto::datagram::HEADER_LEN as u32,
                cfg.quick,
            )
        });
        let m = run.rfc2544.insert(Rfc2544 {
            trial_s: cfg.trial_ms as f64 / 1e3,
            search: rfc2544::search_words(cfg.trial_ms, cfg.quick),
            sizes: Vec::new(),
            verdict: Verdict::NotRun,
        });
        rfc2544::run(c, &sizes, m).map_err(|s| ended("RFC 2544", &mut m.verdict, s))?;
    }
    match cfg.cir {
        Some(cir) if cfg.methods.y1564 => {
            let m = run.y1564.insert(Y1564 {
                cir_bps: cir,
                eir_bps: cfg.eir,
                len: y1564::service_len(c.pre.path_mtu, c.v6),
                steps: Vec::new(),
                performance: None,
                verdict: Verdict::NotRun,
            });
            y1564::run(c, m).map_err(|s| ended("Y.1564", &mut m.verdict, s))?;
        }
        _ if cfg.methods.y1564 => run
            .skipped
            .push("Y.1564: no --cir (the committed information rate) given".into()),
        _ => {}
    }
    if cfg.methods.rfc6349 {
        let m = run.rfc6349.insert(Rfc6349 {
            path_mtu: c.pre.path_mtu,
            baseline_rtt_ns: None,
            baseline_how: String::new(),
            bottleneck_bps: None,
            bottleneck_how: String::new(),
            bdp_bytes: None,
            bdp_note: None,
            directions: Vec::new(),
            verdict: Verdict::NotRun,
            baseline_probe: None,
            bottleneck_trial: None,
        });
        rfc6349::run(c, m).map_err(|s| ended("RFC 6349", &mut m.verdict, s))?;
    }
    Ok(())
}

/// A run of `engine` that has found nothing yet.
fn blank_run(cfg: &QualifyConfig, engine: &str) -> QualifyRun {
    QualifyRun {
        engine: engine.to_owned(),
        preflight: preflight::blank(cfg.host.clone()),
        rfc2544: None,
        y1564: None,
        rfc6349: None,
        skipped: Vec::new(),
        notes: Vec::new(),
        stopped: None,
        verdict: Verdict::NotRun,
    }
}

/// The whole qualification with one engine; the `Stop` that ended it early.
fn run_engine(cfg: &QualifyConfig, t: &QualifyEngine) -> (QualifyRun, Option<Stop>) {
    let mut run = blank_run(cfg, &t.name);
    let found = match preflight::run(cfg, t) {
        Ok(f) => f,
        Err(s) => {
            run.stopped = Some(stopped("preflight", &s));
            return (run, Some(s));
        }
    };
    run.preflight = found.preflight;
    if let Some(why) = preflight::unmeasurable(&cfg.sla, &run.preflight) {
        run.stopped = Some(why.clone());
        return (run, Some(Stop::Failed(why)));
    }
    let pre = run.preflight.clone();
    let c = Ctx {
        cfg,
        t,
        v6: found.v6,
        pre: &pre,
        stalls: Stalls::for_run(cfg.quick),
    };
    let stop = methods(&c, &mut run).err().map(|(step, s)| {
        run.stopped = Some(stopped(&step, &s));
        s
    });
    run.notes.extend(c.stalls.notes());
    let verdicts = [
        run.rfc2544.as_ref().map(|m| m.verdict),
        run.y1564.as_ref().map(|m| m.verdict),
        run.rfc6349.as_ref().map(|m| m.verdict),
    ];
    // A method a stop ended is NOT RUN or FAIL ([`ended`]): so is the run.
    run.verdict = Verdict::all(verdicts.into_iter().flatten());
    (run, stop)
}

/// Runs the qualification once per engine and reports it.
fn qualify(cfg: &QualifyConfig) -> QualifyReport {
    let start_unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let mut runs = Vec::new();
    let mut interrupted = false;
    for t in &cfg.engines {
        let (run, stop) = run_engine(cfg, t);
        runs.push(run);
        if stop == Some(Stop::Interrupted) || INTERRUPTED.load(Ordering::Relaxed) {
            interrupted = true;
            break;
        }
    }
    if let (Some(p), false) = (&cfg.preload, interrupted) {
        interrupted = preloaded(cfg, p, &mut runs);
    }
    let verdict = Verdict::all(runs.iter().map(|r| r.verdict));
    let exit_code = match verdict {
        _ if interrupted => EXIT_INTERRUPTED,
        Verdict::Fail => EXIT_SLA_FAILED,
        Verdict::NotRun => EXIT_COULD_NOT_RUN,
        Verdict::Inconclusive => EXIT_INCONCLUSIVE,
        Verdict::Pass | Verdict::NotJudged => 0,
    };
    let m = cfg.methods;
    QualifyReport {
        schema: QUALIFY_SCHEMA,
        server: format!("{}:{}", cfg.host, cfg.port),
        start_unix_ms,
        client_software: linerate_run::about::software(),
        quick: cfg.quick,
        methods: [
            (m.rfc2544, "RFC 2544"),
            (m.y1564, "Y.1564"),
            (m.rfc6349, "RFC 6349"),
        ]
        .into_iter()
        .filter(|&(on, _)| on)
        .map(|(_, n)| n.to_owned())
        .collect(),
        sla: cfg.sla.clone(),
        header_convention: HEADER_CONVENTION.into(),
        runs,
        verdict,
        interrupted,
        exit_code,
    }
}

/// `--preload`: the qualification of a child process under `LD_PRELOAD`
/// (the syscall engine), its run added as `syscall+preload`; a child that
/// could not run is a run that says why. Whether it was interrupted.
fn preloaded(cfg: &QualifyConfig, p: &PreloadRun, runs: &mut Vec<QualifyRun>) -> bool {
    let ok = [
        0,
        EXIT_SLA_FAILED.into(),
        EXIT_COULD_NOT_RUN.into(),
        EXIT_INCONCLUSIVE.into(),
    ];
    match crate::compare::run_preloaded::<QualifyReport>(p, None, &ok) {
        Ok(child) => {
            runs.extend(child.runs.into_iter().map(|mut r| {
                r.engine = format!("{}+preload", r.engine);
                r
            }));
            child.interrupted
        }
        Err(RunError::Interrupted { .. }) => true,
        Err(e) => {
            let mut run = blank_run(cfg, "syscall+preload");
            run.stopped = Some(format!(
                "the run under LD_PRELOAD={} could not run: {}",
                p.lib.display(),
                e.chain()
            ));
            runs.push(run);
            false
        }
    }
}

/// `linerate qualify`: runs, prints, writes the page; the exit status.
pub fn main(cfg: &QualifyConfig) -> ExitCode {
    let report = qualify(cfg);
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let format = if cfg.json {
        Format::Json
    } else {
        Format::Human
    };
    let written = export(&report, format, &mut out).and_then(|()| out.flush());
    drop(out);
    let page = cfg.report.as_ref().map(|path| {
        // The command line as typed, for the page's record of the run.
        let argv: Vec<String> = std::env::args().collect();
        let html = linerate_report::qualify_html::page(&report, &argv.join(" "))
            .with_context(|| format!("rendering {}", path.display()))?;
        std::fs::write(path, html).with_context(|| format!("writing {}", path.display()))
    });
    let failed = written
        .err()
        .map(anyhow::Error::from)
        .or_else(|| page.and_then(Result::err));
    if let Some(e) = failed {
        // One write, newline included (see `log::put`).
        let line = format!("linerate: {e:#}\n");
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
        return ExitCode::from(1);
    }
    ExitCode::from(report.exit_code)
}
