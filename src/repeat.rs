//! `--repeat N`: runs one test N times (silently, as a sweep runs its
//! trials), then prints every figure's mean, standard deviation, min, max
//! and 95% confidence interval. A progress bar with ETA shows on a terminal
//! in human output ([`crate::progress`]); machine formats and pipes get none.

use crate::caller::OrRun as _;
use std::io::Write;

use anyhow::{anyhow, Context};

use linerate_report::render::{export, Format};
use linerate_report::repeat::{self, RepeatRecord, RepeatReport};

use crate::cli::{ClientConfig, Command, RepeatConfig};
use crate::progress::progress;
use linerate_run::error::RunError;

fn client_of(cmd: &Command) -> Option<&ClientConfig> {
    match cmd {
        Command::Tcp(c) | Command::Udp(c) => Some(c),
        Command::Rr(r) => Some(&r.client),
        _ => None,
    }
}

/// Runs the repeated test and renders the summary to stdout.
pub fn run(cfg: &RepeatConfig) -> Result<RepeatReport, RunError> {
    let Some(test) = client_of(&cfg.test) else {
        return Err(crate::caller::caller(anyhow!(
            "--repeat applies to tcp, udp, rr and crr"
        )));
    };
    let stdout = std::io::stdout();
    let bar = progress(u64::from(cfg.n), test.format, "trials");
    let mut reports = Vec::new();
    let mut failed = Vec::new();
    for i in 1..=cfg.n {
        let result = linerate_run::run::run_trial(test);
        let line = match &result {
            Ok(r) => {
                let main = repeat::trial_figures(r)
                    .into_iter()
                    .next()
                    .map_or(String::new(), |(g, n, u, v)| {
                        format!(": {g} {n} {}", show_one(u, v))
                    });
                format!("trial {i}/{} done{main}", cfg.n)
            }
            Err(e) => format!("trial {i}/{} failed: {}", cfg.n, e.chain()),
        };
        match test.format {
            Format::Human => match &bar {
                Some(b) => b.println(line),
                None => {
                    let mut out = stdout.lock();
                    writeln!(out, "{line}").context("writing output").or_run()?;
                }
            },
            Format::JsonLines => {
                let rec = match &result {
                    Ok(r) => RepeatRecord::Trial {
                        index: i,
                        report: Box::new(r.clone()),
                    },
                    Err(e) => RepeatRecord::TrialFailed {
                        index: i,
                        error: e.chain().to_string(),
                    },
                };
                let mut out = stdout.lock();
                serde_json::to_writer(&mut out, &rec)
                    .context("writing output")
                    .or_run()?;
                writeln!(out)
                    .and_then(|()| out.flush())
                    .context("writing output")
                    .or_run()?;
            }
            _ => {}
        }
        if let Some(b) = &bar {
            b.inc(1);
        }
        match result {
            Ok(r) => reports.push(r),
            // Refusals and Ctrl-C end the run: every trial would be refused
            // alike, and the user asked to stop.
            Err(e @ (RunError::Refused(_) | RunError::Interrupted { .. })) => {
                if let Some(b) = &bar {
                    b.finish_and_clear();
                }
                // A trial's own report is not printed here: nothing of the
                // repeat run is on stdout yet.
                return Err(match e {
                    RunError::Interrupted { .. } => RunError::Interrupted { reported: false },
                    e => e,
                });
            }
            Err(e) => failed.push(format!("trial {i}: {}", e.chain())),
        }
    }
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let Some(report) = repeat::build(cfg.n, &reports, failed) else {
        return Err(crate::caller::caller(anyhow!(
            "all {} trials failed",
            cfg.n
        )));
    };
    {
        let mut out = stdout.lock();
        export(&report, test.format, &mut out)
            .and_then(|()| out.flush())
            .context("writing output")
            .or_run()?;
    }
    if let Some(path) = &cfg.plot {
        let svg = linerate_report::plot_extra::repeat_svg(&report)
            .with_context(|| format!("plotting {}", path.display()))
            .or_run()?;
        std::fs::write(path, svg)
            .with_context(|| format!("writing {}", path.display()))
            .or_run()?;
    }
    crate::html::repeated(test, &report, reports.last()).or_run()?;
    Ok(report)
}

fn show_one(unit: &str, v: f64) -> String {
    match unit {
        "bit/s" => linerate_stats::units::format_rate(v),
        _ => format!("{v:.1} {unit}"),
    }
}
