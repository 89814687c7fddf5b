//! `linerate compare`: each variant is a complete test run as a repeated
//! test's trials are ([`linerate_run::run::run_trial`]: silently, a server that is
//! still closing the previous test asked again), reduced to the figures of
//! `report::compare`, with ratios to the first variant. With `--repeat N`
//! the runs are interleaved (every variant's first run, then every
//! variant's second …) so that a drift of the host over the comparison
//! (another load starting, a CPU clocking down) spreads over all variants
//! instead of landing on the last ones.
//!
//! The `--preload LIB` variant's client runs in a child process (this
//! binary, `--json`) with `LD_PRELOAD=LIB`: a library is loaded only when
//! a process starts. Without a host it tests against an embedded server in
//! this process, which is not preloaded — the comparison is of the client
//! side with and without the library.

use crate::caller::OrRun as _;
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;

use anyhow::{anyhow, Context, Result};
use linerate_engine::engines::{auto, EngineKind};
use linerate_report::compare::{
    set_ratios, summarise, CompareReport, CompareVariant, COMPARE_SCHEMA,
};
use linerate_report::render::export;
use linerate_report::Report;

use crate::cli::{CompareConfig, CompareVariantConfig, PreloadRun, Target};
use crate::progress::progress;
use linerate_run::error::RunError;
use linerate_run::outcome;

/// Runs every variant (`repeat` times each) and prints the comparison. A
/// variant that cannot run or fails is a row saying why; the others still
/// run. Ctrl-C ends it: what ran is printed, marked, and the exit status
/// is 130 as for any interrupted test.
pub fn run(cfg: &CompareConfig) -> Result<CompareReport, RunError> {
    let start_unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let runnable = cfg.variants.iter().filter(|v| v.config.is_ok()).count();
    let bar = progress(
        runnable as u64 * u64::from(cfg.repeat),
        cfg.format,
        "compare runs",
    );
    // Per variant: its completed reports and its failures.
    let mut done: Vec<(Vec<Report>, Vec<String>)> = vec![Default::default(); cfg.variants.len()];
    'runs: for k in 1..=cfg.repeat {
        for (v, (reports, failed)) in cfg.variants.iter().zip(done.iter_mut()) {
            if outcome::INTERRUPTED.load(Ordering::Relaxed) {
                break 'runs;
            }
            if v.config.is_err() {
                continue;
            }
            match run_variant(v) {
                Ok(r) => reports.push(r),
                Err(RunError::Interrupted { .. }) => break 'runs,
                Err(e) if cfg.repeat > 1 => failed.push(format!("run {k}: {}", e.chain())),
                Err(e) => failed.push(e.chain().to_string()),
            }
            if let Some(b) = &bar {
                b.inc(1);
            }
        }
    }
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let server = done
        .iter()
        .find_map(|(reports, _)| reports.first())
        .map(|r| r.test.server.clone());
    let mut variants: Vec<CompareVariant> = cfg
        .variants
        .iter()
        .zip(done)
        .map(|(v, (reports, failed))| variant(v, &reports, failed))
        .collect();
    set_ratios(&mut variants);
    let interrupted = outcome::INTERRUPTED.load(Ordering::Relaxed);
    let report = CompareReport {
        schema: COMPARE_SCHEMA,
        interrupted,
        test: cfg.test.clone(),
        server,
        start_unix_ms,
        args: cfg.args.clone(),
        flows: cfg.flows,
        repeat: cfg.repeat,
        variants,
    };
    // One write for the whole table or document, not one per line.
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    export(&report, cfg.format, &mut out)
        .and_then(|()| out.flush())
        .context("writing output")
        .or_run()?;
    drop(out);
    if let Some(path) = &cfg.plot {
        let svg = linerate_report::compare_plot::svg(&report)
            .with_context(|| format!("plotting {}", path.display()))
            .or_run()?;
        std::fs::write(path, svg)
            .with_context(|| format!("writing {}", path.display()))
            .or_run()?;
    }
    crate::html::compare(cfg, &report).or_run()?;
    if interrupted {
        return Err(RunError::Interrupted { reported: true });
    }
    Ok(report)
}

/// One variant's row from its runs.
fn variant(
    v: &CompareVariantConfig,
    reports: &[Report],
    mut failed: Vec<String>,
) -> CompareVariant {
    let last = reports.last();
    let error = match (&v.config, reports.is_empty()) {
        (Err(e), _) => Some(e.clone()),
        (Ok(_), true) if !failed.is_empty() => Some(failed.remove(0)),
        (Ok(_), true) => Some("did not run (interrupted)".into()),
        (Ok(_), false) => None,
    };
    CompareVariant {
        name: v.name.clone(),
        engine: v.engine.clone(),
        client_engine: last.map(|r| r.test.client_engine.clone()),
        server_engine: last.map(|r| r.test.server_engine.clone()),
        engine_note: last.and_then(|r| {
            r.notes
                .iter()
                .find(|n| n.starts_with(auto::NOTE_PREFIX))
                .cloned()
        }),
        busy_poll: v.busy_poll,
        waits: last.map(linerate_report::compare::waits),
        threading: v.threading.clone(),
        preload: v.preload.as_ref().map(|p| p.lib.display().to_string()),
        client_ld_preload: last.and_then(|r| r.test.client_ld_preload.clone()),
        server_ld_preload: last.and_then(|r| r.test.server_ld_preload.clone()),
        runs: reports.len() as u32,
        // With every run failed, the first is the error and the others
        // stay listed.
        failed,
        error,
        metrics: summarise(reports),
    }
}

fn run_variant(v: &CompareVariantConfig) -> Result<Report, RunError> {
    let c = v.config.as_ref().map_err(|e| RunError::Spec(e.clone()))?;
    match &v.preload {
        None => linerate_run::run::run_trial(c),
        Some(p) => {
            // The embedded server runs here, unpreloaded, with the same
            // engine as the client (as every variant's embedded server).
            let embedded = match c.target {
                Target::Embedded => Some(
                    linerate_run::server::spawn_embedded(EngineKind::Syscall, c.auth_key.clone())
                        .context("starting the embedded server")
                        .or_run()?,
                ),
                Target::Remote { .. } => None,
            };
            run_preloaded(p, embedded.as_ref().map(|e| e.port()), &[0])
        }
    }
}

/// Runs the test in a child process under `LD_PRELOAD` and reads its JSON
/// report (a test's, or qualify's). `port`: the embedded server's, which
/// the child is pointed at; `ok`: the exit statuses that come with a
/// report.
pub(crate) fn run_preloaded<T: serde::de::DeserializeOwned>(
    p: &PreloadRun,
    port: Option<u16>,
    ok: &[i32],
) -> Result<T, RunError> {
    let exe = std::env::current_exe()
        .context("finding this program to run it preloaded")
        .or_run()?;
    let mut argv = p.head.clone();
    if let Some(port) = port {
        argv.extend(["127.0.0.1".into(), "-p".into(), port.to_string()]);
    }
    argv.extend(p.tail.iter().cloned());
    let out = Command::new(&exe)
        .args(&argv)
        .env("LD_PRELOAD", &p.lib)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {} {}", exe.display(), argv.join(" ")))
        .or_run()?;
    if out.status.code() == Some(130) {
        return Err(RunError::Interrupted { reported: false });
    }
    // The dynamic loader skips a library it cannot load and runs the
    // program anyway: that run would be the plain one, mislabelled.
    let err = String::from_utf8_lossy(&out.stderr);
    if let Some(line) = err.lines().find(|l| l.contains("cannot be preloaded")) {
        return Err(crate::caller::caller(anyhow!(
            "LD_PRELOAD={} was not loaded: {line}",
            p.lib.display()
        )));
    }
    if !out.status.code().is_some_and(|c| ok.contains(&c)) {
        let err = String::from_utf8_lossy(&out.stderr);
        let why = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("no message");
        return Err(crate::caller::caller(anyhow!(
            "the client under LD_PRELOAD={} failed ({}): {why}",
            p.lib.display(),
            out.status
        )));
    }
    serde_json::from_slice(&out.stdout)
        .with_context(|| {
            format!(
                "reading the report of the client under LD_PRELOAD={}",
                p.lib.display()
            )
        })
        .map_err(crate::caller::caller)
}
