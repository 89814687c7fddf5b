//! The front door of every client test: runs one (native, iperf3 or a
//! local transport, as its config says) into a [`Sink`], or as a silent
//! trial of a series (sweep, `--repeat`, compare, `msg HOST`).

use std::sync::atomic::Ordering;
use std::time::Duration;

use linerate_engine::clock;
use linerate_report::model::TestInfo;
use linerate_report::render::Sink;
use linerate_report::Report;

use crate::config::{ClientConfig, RrConfig};
use crate::error::RunError;
use crate::outcome::INTERRUPTED;

/// Runs one test, rendering to `sink`. Returns the report.
pub fn run_to(cfg: &ClientConfig, sink: &mut dyn Sink) -> Result<Report, RunError> {
    if cfg.iperf3 {
        return crate::iperf3::client::run_to(cfg, sink);
    }
    crate::client::run_native(cfg, clock::boot_id(), sink)
}

/// Runs a request/response test (rr or crr, over the network or a local
/// transport), rendering to `sink`. Returns the report.
pub fn run_rr_to(cfg: &RrConfig, sink: &mut dyn Sink) -> Result<Report, RunError> {
    // Without a boot id to compare, the offset is estimated by probes even
    // on one host (how the estimator is checked against the known zero).
    let boot_id = if cfg.probe_clock {
        None
    } else {
        clock::boot_id()
    };
    match cfg.local {
        Some(t) => crate::rr_local::run(cfg, t, sink),
        None => crate::client::run_native(&cfg.client, boot_id, sink),
    }
}

/// A busy server (its previous test still closing) is asked again this
/// often, this many times, by [`run_trial`].
const BUSY_RETRY: Duration = Duration::from_millis(200);
const BUSY_TRIES: u32 = 25;

/// Prints nothing: the caller (a sweep, `--repeat`) prints its own rows.
pub(crate) struct Quiet;

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
pub fn run_to_quietly(cfg: &ClientConfig) -> Result<Report, RunError> {
    run_to(cfg, &mut Quiet)
}

/// Runs one trial of a series (sweep point, `--repeat` run) silently,
/// asking again while the server is still busy with the previous one.
pub fn run_trial(cfg: &ClientConfig) -> Result<Report, RunError> {
    let mut tries = 0;
    loop {
        match run_to(cfg, &mut Quiet) {
            Err(RunError::Refused(m)) if m.contains("busy") && tries < BUSY_TRIES => {
                tries += 1;
                std::thread::sleep(BUSY_RETRY);
            }
            r => return r,
        }
        if INTERRUPTED.load(Ordering::Relaxed) {
            return Err(RunError::Interrupted { reported: false });
        }
    }
}
