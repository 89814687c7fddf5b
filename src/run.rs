//! The front door of every client test: runs one (native, iperf3 or a
//! local transport, as its config says) and renders it, or runs it as a
//! silent trial of a series (sweep, `--repeat`, compare, `msg HOST`).

use std::io::Write;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Context;
use linerate_engine::clock;
use linerate_report::model::TestInfo;
use linerate_report::render::{self, Sink};
use linerate_report::Report;

use crate::cli::{ClientConfig, RrConfig};
use crate::outcome::{ClientError, INTERRUPTED};

/// Runs one test and renders it to stdout. Returns the report.
pub fn run(cfg: &ClientConfig) -> Result<Report, ClientError> {
    let stdout = std::io::stdout();
    let sink = if cfg.quiet_intervals {
        render::sink_without_intervals(cfg.format, Box::new(stdout.lock()))
    } else {
        render::sink(cfg.format, Box::new(stdout.lock()))
    };
    let sink = crate::host::iface_sink::wrap(sink, cfg.iface.as_deref(), cfg.format);
    let mut sink = Kept {
        inner: sink,
        report: None,
    };
    let result = run_to(cfg, &mut sink);
    // `--plot`: of the test, or of what an interrupted one measured.
    if let (Some(path), Some(report)) = (&cfg.plot, &sink.report) {
        if result.as_ref().map_or_else(ClientError::reported, |_| true) {
            let svg = linerate_report::plot_extra::intervals_svg(report)
                .with_context(|| format!("plotting {}", path.display()))?;
            std::fs::write(path, svg).with_context(|| format!("writing {}", path.display()))?;
        }
    }
    result
}

/// Runs one test, rendering to `sink`. Returns the report.
pub fn run_to(cfg: &ClientConfig, sink: &mut dyn Sink) -> Result<Report, ClientError> {
    if cfg.iperf3 {
        return crate::iperf3::client::run_to(cfg, sink);
    }
    crate::client::run_native(cfg, clock::boot_id(), sink)
}

/// A busy server (its previous test still closing) is asked again this
/// often, this many times, by [`run_trial`].
const BUSY_RETRY: Duration = Duration::from_millis(200);
const BUSY_TRIES: u32 = 25;

/// Prints nothing: the caller (a sweep, `--repeat`) prints its own rows.
struct Quiet;

impl Sink for Quiet {
    fn start(&mut self, _: &TestInfo) -> std::io::Result<()> {
        Ok(())
    }
    fn interval(&mut self, _: &linerate_report::model::IntervalRecord) -> std::io::Result<()> {
        Ok(())
    }
    fn finish(&mut self, _: &Report) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs one test silently, once: a busy server is an answer, not a cue to
/// ask again (probes beside a load must run beside it or not at all).
pub fn run_to_quietly(cfg: &ClientConfig) -> Result<Report, ClientError> {
    run_to(cfg, &mut Quiet)
}

/// Runs one trial of a series (sweep point, `--repeat` run) silently,
/// asking again while the server is still busy with the previous one.
pub fn run_trial(cfg: &ClientConfig) -> Result<Report, ClientError> {
    let mut tries = 0;
    loop {
        match run_to(cfg, &mut Quiet) {
            Err(ClientError::Refused(m)) if m.contains("busy") && tries < BUSY_TRIES => {
                tries += 1;
                std::thread::sleep(BUSY_RETRY);
            }
            r => return r,
        }
        if INTERRUPTED.load(Ordering::Relaxed) {
            return Err(ClientError::Interrupted { reported: false });
        }
    }
}

/// Runs a request/response test, then writes the files it asked for.
pub fn run_rr(cfg: &RrConfig) -> Result<Report, ClientError> {
    // Without a boot id to compare, the offset is estimated by probes even
    // on one host (how the estimator is checked against the known zero).
    let boot_id = if cfg.probe_clock {
        None
    } else {
        clock::boot_id()
    };
    let stdout = std::io::stdout();
    let sink = render::sink(cfg.client.format, Box::new(stdout.lock()));
    let sink = crate::progress::rr_sink(sink, &cfg.client.spec, cfg.client.format);
    let mut sink = Kept {
        inner: sink,
        report: None,
    };
    let run = match cfg.local {
        Some(t) => crate::rr_local::run(cfg, t, &mut sink),
        None => crate::client::run_native(&cfg.client, boot_id, &mut sink),
    };
    match run {
        Ok(report) => {
            export(cfg, &report)?;
            Ok(report)
        }
        // Interrupted with a report of what was measured: the files asked
        // for hold that too (issue 13).
        Err(e) if e.reported() => {
            if let Some(report) = &sink.report {
                export(cfg, report)?;
            }
            Err(e)
        }
        Err(e) => Err(e),
    }
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
}

/// Writes the files a request/response test asked for (`--histogram`,
/// `--plot`) from the report.
fn export(cfg: &RrConfig, report: &Report) -> Result<(), ClientError> {
    if let Some(path) = &cfg.histogram {
        let mut f = std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
        );
        render::histogram_csv(report, &mut f)
            .and_then(|()| f.flush())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &cfg.plot {
        let svg = linerate_report::plot_rr::svg(report)
            .with_context(|| format!("plotting {}", path.display()))?;
        std::fs::write(path, svg).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
