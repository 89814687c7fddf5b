//! The `tcp`, `udp` and `rr` commands: one test run by
//! [`linerate_run::run`], rendered to stdout (with `--iface` counters and
//! rr's progress bar), then the files it asked for (`--plot`,
//! `--histogram`) written from its report.

use crate::caller::OrRun as _;
use std::io::Write;

use anyhow::Context;
use linerate_report::model::TestInfo;
use linerate_report::render::{self, Sink};
use linerate_report::Report;
use linerate_run::config::{ClientConfig, RrConfig};
use linerate_run::error::RunError;
use linerate_run::printer::Printer;
use linerate_run::run::{run_rr_to, run_to};

/// Runs one test and renders it to stdout. Returns the report.
pub fn run(cfg: &ClientConfig) -> Result<Report, RunError> {
    let (format, quiet, dev) = (cfg.format, cfg.quiet_intervals, cfg.iface.clone());
    let printer = printer(move || {
        let stdout = Box::new(std::io::stdout());
        let sink = if quiet {
            render::sink_without_intervals(format, stdout)
        } else {
            render::sink(format, stdout)
        };
        crate::host::iface_sink::lines(sink, dev.as_deref(), format)
    })?;
    // The interface's counters are read on the control loop's thread, on
    // time, whenever the output is written.
    let mut sink = Kept {
        inner: crate::host::iface_sink::wrap(printer, cfg.iface.as_deref()),
        report: None,
    };
    let result = run_to(cfg, &mut sink);
    // Everything printed is out before the files, and before main says
    // how the test failed.
    let Kept { inner, report } = sink;
    drop(inner);
    // `--plot`: of the test, or of what an interrupted one measured.
    if let (Some(path), Some(report)) = (&cfg.plot, &report) {
        if result.as_ref().map_or_else(RunError::reported, |_| true) {
            let svg = linerate_report::plot_extra::intervals_svg(report)
                .with_context(|| format!("plotting {}", path.display()))
                .or_run()?;
            std::fs::write(path, svg)
                .with_context(|| format!("writing {}", path.display()))
                .or_run()?;
            flows_plot(path, report)?;
        }
    }
    result
}

/// Runs a request/response test, then writes the files it asked for.
pub fn run_rr(cfg: &RrConfig) -> Result<Report, RunError> {
    let (format, spec) = (cfg.client.format, cfg.client.spec.clone());
    let printer = printer(move || {
        let sink = render::sink(format, Box::new(std::io::stdout()));
        crate::progress::rr_sink(sink, &spec, format)
    })?;
    let mut sink = Kept {
        inner: printer,
        report: None,
    };
    let result = run_rr_to(cfg, &mut sink);
    let Kept { inner, report } = sink;
    drop(inner);
    match result {
        Ok(report) => {
            export(cfg, &report)?;
            Ok(report)
        }
        // Interrupted with a report of what was measured: the files asked
        // for hold that too (issue 13).
        Err(e) if e.reported() => {
            if let Some(report) = &report {
                export(cfg, report)?;
            }
            Err(e)
        }
        Err(e) => Err(e),
    }
}

/// The sink `make` builds, on a printer thread
/// ([`linerate_run::printer`]): a stdout nobody reads never stops the
/// control loop, whose heartbeats keep the test alive (issue 28).
fn printer(
    make: impl FnOnce() -> Box<dyn Sink> + Send + 'static,
) -> Result<Box<dyn Sink>, RunError> {
    let printer = Printer::spawn(make)
        .context("starting the output thread")
        .or_run()?;
    Ok(Box::new(printer.watching_stdout()))
}

/// Passes everything on to `inner` and keeps the report it was given.
struct Kept<'a> {
    inner: Box<dyn Sink + 'a>,
    report: Option<Report>,
}

impl Sink for Kept<'_> {
    fn start(&mut self, info: &TestInfo) -> std::io::Result<()> {
        self.inner.start(info)
    }
    fn interval(&mut self, rec: &linerate_report::model::IntervalRecord) -> std::io::Result<()> {
        self.inner.interval(rec)
    }
    fn rr_phase(&mut self, rec: &linerate_report::model::RrPhaseRecord) -> std::io::Result<()> {
        self.inner.rr_phase(rec)
    }
    fn finish(&mut self, report: &Report) -> std::io::Result<()> {
        self.report = Some(report.clone());
        self.inner.finish(report)
    }
    fn closed(&self) -> bool {
        self.inner.closed()
    }
}

/// Writes the files a request/response test asked for (`--histogram`,
/// `--plot`) from the report.
fn export(cfg: &RrConfig, report: &Report) -> Result<(), RunError> {
    if let Some(path) = &cfg.histogram {
        let mut f = std::io::BufWriter::new(
            std::fs::File::create(path)
                .with_context(|| format!("creating {}", path.display()))
                .or_run()?,
        );
        render::histogram_csv(report, &mut f)
            .and_then(|()| f.flush())
            .with_context(|| format!("writing {}", path.display()))
            .or_run()?;
    }
    if let Some(path) = &cfg.plot {
        let svg = linerate_report::plot_rr::svg(report)
            .with_context(|| format!("plotting {}", path.display()))
            .or_run()?;
        std::fs::write(path, svg)
            .with_context(|| format!("writing {}", path.display()))
            .or_run()?;
        flows_plot(path, report)?;
    }
    Ok(())
}

/// `--plot FILE` of a `--flows` test: the CDF of the flows' rates beside
/// FILE (`linerate_report::plot_flows::beside`).
fn flows_plot(path: &std::path::Path, report: &Report) -> Result<(), RunError> {
    if report.test.flows.is_none() {
        return Ok(());
    }
    let beside = linerate_report::plot_flows::beside(path);
    let svg = linerate_report::plot_flows::svg(report)
        .with_context(|| format!("plotting {}", beside.display()))
        .or_run()?;
    std::fs::write(&beside, svg)
        .with_context(|| format!("writing {}", beside.display()))
        .or_run()
}
