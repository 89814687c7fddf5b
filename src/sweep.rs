//! `linerate sweep udp`: the same UDP test at every size × rate point of a
//! grid, then (with `--find-zero-loss`) an RFC 2544-style binary search per
//! size for the highest rate whose loss stays within a threshold.
//!
//! Each trial is a complete test through [`linerate_run::run::run_to`] (its own
//! control connection and data sockets), summarised into the sweep model by
//! `report::build::sweep_trial`; the table, JSON and the SVG plot come from
//! that model only.

use crate::caller::OrRun as _;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use linerate_proto::spec::Pace;
use linerate_report::build;
use linerate_report::model::{SweepInfo, SweepReport, SweepTrial, ZeroLoss, SCHEMA_VERSION};
use linerate_report::plot;
use linerate_report::render;
use linerate_report::Report;
use linerate_stats::units::{format_count_rate, format_rate};

use crate::cli::{ClientConfig, SweepConfig, Target};
use linerate_run::error::RunError;
use linerate_run::outcome;

/// Trials a zero-loss search runs at most per size.
const MAX_SEARCH_TRIALS: u32 = 16;
/// The RFC 2544 binary search over `[lo, hi]` for the highest passing rate:
/// try `hi` (done if it passes), then `lo` (done if it fails), then halve
/// the interval between the best pass and the lowest failure until it is
/// within `resolution`. Rates the grid already tried are known before the
/// search starts ([`ZeroLossSearch::seed`]), so the answer is never below a
/// grid rate that passed (issue 13). RFC 2544 §24 asks for repeated trials:
/// a rate passes only when [`CONFIRMATIONS`] trials at it all pass, so the
/// boundary is tried more than once; one failure is enough to fail it.
#[derive(Debug, Clone)]
pub struct ZeroLossSearch {
    pass: Option<f64>,
    fail: Option<f64>,
    lo: f64,
    hi: f64,
    resolution: f64,
    trials: u32,
    /// A rate that passed once and waits for its confirming trials.
    pending: Option<(f64, u32)>,
}

/// Passing trials needed at one rate before it counts as passed.
pub const CONFIRMATIONS: u32 = 2;

impl ZeroLossSearch {
    pub fn new(lo: f64, hi: f64) -> Self {
        ZeroLossSearch {
            pass: None,
            fail: None,
            lo,
            hi,
            // 1/64 of the range: six halvings after the two end points.
            resolution: ((hi - lo) / 64.0).max(hi * 0.001),
            trials: 0,
            pending: None,
        }
    }

    /// Takes a grid trial's verdict as known without running it again. A
    /// grid pass is one trial, so it still gets confirmed before it counts.
    pub fn seed(&mut self, rate: f64, pass: bool) {
        if pass {
            if self.fail.map_or(true, |f| rate < f) && self.pass.map_or(true, |p| rate > p) {
                self.pending = Some((rate, 1));
            }
        } else {
            self.fail = Some(self.fail.map_or(rate, |f| f.min(rate)));
            if self.pending.is_some_and(|(p, _)| p >= rate) {
                self.pending = None;
            }
        }
    }

    /// The next rate to try, or `None` when the search is over.
    pub fn next(&self) -> Option<f64> {
        if self.trials >= MAX_SEARCH_TRIALS {
            return None;
        }
        if let Some((rate, _)) = self.pending {
            return Some(rate);
        }
        match (self.pass, self.fail) {
            (None, None) => Some(self.hi),
            (Some(_), None) => None,
            (None, Some(f)) if f > self.lo => Some(self.lo),
            (None, Some(_)) => None,
            (Some(p), Some(f)) if f - p > self.resolution => Some((p + f) / 2.0),
            (Some(_), Some(_)) => None,
        }
    }

    pub fn record(&mut self, rate: f64, pass: bool) {
        self.trials += 1;
        if !pass {
            self.pending = None;
            self.fail = Some(self.fail.map_or(rate, |f| f.min(rate)));
            return;
        }
        let passes = match self.pending {
            Some((r, n)) if r == rate => n + 1,
            _ => 1,
        };
        if passes >= CONFIRMATIONS {
            self.pending = None;
            self.pass = Some(self.pass.map_or(rate, |p| p.max(rate)));
        } else {
            self.pending = Some((rate, passes));
        }
    }

    pub fn best(&self) -> Option<f64> {
        self.pass
    }

    pub fn trials(&self) -> u32 {
        self.trials
    }

    /// How the search ended, rates in the units the user gave them.
    pub(crate) fn note(&self, unit: &dyn Fn(f64) -> String) -> String {
        match (self.pass, self.fail) {
            (Some(_), None) => "the highest rate tried passed".into(),
            (None, _) => "even the lowest rate tried lost too much".into(),
            (Some(p), Some(f)) if f - p > self.resolution => format!(
                "stopped after {MAX_SEARCH_TRIALS} trials; the limit lies between {} and {}",
                unit(p),
                unit(f)
            ),
            (Some(p), Some(f)) => {
                format!("the limit lies between {} and {}", unit(p), unit(f))
            }
        }
    }
}

/// Rates at which a lower rate failed while a higher one passed: the path
/// (or the host) was not monotonic over the trials, so a single boundary
/// does not describe it (issue 13).
fn non_monotonic(trials: &[(f64, bool)], unit: &dyn Fn(f64) -> String) -> Option<String> {
    let mut pairs = Vec::new();
    for &(lower, ok_lower) in trials {
        if ok_lower {
            continue;
        }
        if let Some(&(higher, _)) = trials
            .iter()
            .filter(|&&(r, ok)| ok && r > lower)
            .max_by(|a, b| a.0.total_cmp(&b.0))
        {
            pairs.push(format!(
                "{} failed below {} passing",
                unit(lower),
                unit(higher)
            ));
        }
    }
    pairs.dedup();
    (!pairs.is_empty()).then(|| {
        format!(
            "results were not monotonic in rate ({}): repeat the sweep or lengthen the trials (-t)",
            pairs.join("; ")
        )
    })
}

/// The rate asked for, summed over the streams, exactly as given (the
/// sender's own figure passes through its pacer's integer schedule, which
/// would print `--rates 1G` as 999999996.9 bit/s): (datagrams/s, bit/s).
fn requested(cfg: &SweepConfig, len: u32, rate: f64) -> (f64, f64) {
    let streams = f64::from(cfg.base.spec.connection_count() as u32);
    let bits_per_datagram = f64::from(len) * 8.0;
    if cfg.rates_are_bits {
        (rate / bits_per_datagram * streams, rate * streams)
    } else {
        (rate * streams, rate * bits_per_datagram * streams)
    }
}

/// Runs one trial: the base test at `len` bytes and `rate` per stream.
/// `None` when the user interrupted it: a trial cut short is not a point of
/// the grid, so it is left out.
fn trial(cfg: &SweepConfig, len: u32, rate: f64, search: bool) -> Result<Option<SweepTrial>> {
    let mut c = cfg.base.clone();
    c.spec.len = len;
    if let Some(u) = &mut c.spec.udp {
        u.pace = if cfg.rates_are_bits {
            Pace::Rate(rate.round().max(1.0) as u64)
        } else {
            Pace::MilliPps((rate * 1000.0).round().max(1.0) as u64)
        };
    }
    let (pps, bits) = requested(cfg, len, rate);
    Ok(udp_trial(&c, search)?.map(|(t, _)| SweepTrial {
        requested_pps: pps,
        requested_bits_per_second: bits,
        ..t
    }))
}

/// Runs the UDP test `c` (its size, pace and limit set) as one silent
/// trial of a series (a sweep's, a qualification's), summarised as a
/// sweep trial, with its report when it ran. A trial that failed is a row
/// saying why, with zero figures; `None`: the user interrupted it. A
/// refusal or a server shutting down is an error (every further trial
/// would end alike), its [`RunError`] inside.
pub(crate) fn udp_trial(
    c: &ClientConfig,
    search: bool,
) -> Result<Option<(SweepTrial, Option<Report>)>> {
    let len = c.spec.len;
    match linerate_run::run::run_trial(c) {
        Ok(report) => Ok(Some((
            build::sweep_trial(len, search, &report),
            Some(report),
        ))),
        // A refusal (parameters, version) ends the sweep: every trial
        // would be refused alike; so does a server that is shutting down.
        Err(e @ (RunError::Refused(_) | RunError::ServerStopped)) => Err(e.into()),
        Err(RunError::Interrupted { .. }) => Ok(None),
        Err(_) if outcome::INTERRUPTED.load(std::sync::atomic::Ordering::Relaxed) => Ok(None),
        Err(e) => Ok(Some((
            SweepTrial {
                len,
                search,
                requested_pps: 0.0,
                requested_bits_per_second: 0.0,
                sent_pps: 0.0,
                sent_bits_per_second: 0.0,
                received_pps: 0.0,
                received_bits_per_second: 0.0,
                issued: 0,
                received: 0,
                lost: 0,
                loss_ppm: 0.0,
                loss_percent: 0.0,
                kept_up: false,
                socket_drops: None,
                error: Some(e.chain().to_string()),
                inconclusive: None,
            },
            None,
        ))),
    }
}

pub(crate) fn passes(t: &SweepTrial, max_loss_percent: f64) -> bool {
    // A rate the sender could not offer was not tested, so it cannot pass.
    t.error.is_none() && t.kept_up && t.issued > 0 && t.loss_percent <= max_loss_percent
}

/// The trials of a sweep so far, each printed as it finishes.
struct Trials<'a> {
    cfg: &'a SweepConfig,
    sink: Box<dyn render::SweepSink + 'a>,
    done: Vec<SweepTrial>,
    /// The user pressed Ctrl-C: no further trial runs.
    interrupted: bool,
    /// On a terminal only (human output): grid trials, plus one per search
    /// trial.
    bar: Option<indicatif::ProgressBar>,
}

impl Trials<'_> {
    /// Runs and prints one trial; `None` once the sweep was interrupted.
    fn run(&mut self, len: u32, rate: f64, search: bool) -> Result<Option<&SweepTrial>> {
        if self.interrupted {
            return Ok(None);
        }
        if let (true, Some(b)) = (search, &self.bar) {
            b.inc_length(1);
        }
        let Some(t) = trial(self.cfg, len, rate, search)? else {
            self.interrupted = true;
            return Ok(None);
        };
        let sink = &mut self.sink;
        crate::progress::suspend(&self.bar, || sink.trial(&t)).context("writing output")?;
        self.done.push(t);
        Ok(self.done.last())
    }
}

/// Runs the sweep and renders it to stdout; writes the plot if asked. On
/// Ctrl-C the trial in progress is dropped and everything measured before
/// it is printed and plotted, marked as interrupted (issue 13).
pub fn run(cfg: &SweepConfig) -> Result<SweepReport, RunError> {
    let stdout = std::io::stdout();
    let sink = render::sweep_sink(cfg.base.format, Box::new(stdout.lock()));
    let info = sweep_info(cfg);
    let grid = (cfg.sizes.len() * cfg.points.len()) as u64;
    let mut trials = Trials {
        cfg,
        sink,
        done: Vec::new(),
        interrupted: false,
        bar: crate::progress::progress(grid, cfg.base.format, "sweep"),
    };
    // The bar is on screen already: the header goes above it, not over it
    // (a clear on Ctrl-C then erases the bar, not the header).
    let sink = &mut trials.sink;
    match &trials.bar {
        Some(b) => b.suspend(|| sink.start(&info)),
        None => sink.start(&info),
    }
    .context("writing output")
    .or_run()?;
    for &len in &cfg.sizes {
        for &rate in &cfg.points {
            trials.run(len, rate, false).or_run()?;
        }
    }
    let unit = |rate: f64| {
        if cfg.rates_are_bits {
            format_rate(rate)
        } else {
            format!("{}/s", format_count_rate(rate))
        }
    };
    let mut notes = vec![format!(
        "rates are per stream as requested; the table sums {} stream(s) per direction; \
         sent and received rates are both over the sender's time",
        cfg.base.spec.streams
    )];
    let mut zero_loss = Vec::new();
    for &len in &cfg.sizes {
        // (per-stream rate, passed) of every trial at this size.
        let mut verdicts: Vec<(f64, bool)> = cfg
            .points
            .iter()
            .zip(trials.done.iter().filter(|t| t.len == len))
            .map(|(&rate, t)| (rate, passes(t, cfg.max_loss_percent)))
            .collect();
        if cfg.find_zero_loss && !trials.interrupted {
            zero_loss.push(search_size(&mut trials, len, &mut verdicts, &unit).or_run()?);
        }
        if let Some(n) = non_monotonic(&verdicts, &unit) {
            notes.push(format!("{len} B: {n}"));
        }
    }
    if let Some(b) = &trials.bar {
        b.finish_and_clear();
    }
    notes.extend(closing_notes(&trials));
    let Trials {
        mut sink,
        done,
        interrupted,
        ..
    } = trials;
    let report = SweepReport {
        schema: SCHEMA_VERSION,
        test: info,
        trials: done,
        zero_loss,
        notes,
    };
    if let Some(path) = &cfg.plot {
        let svg = plot::sweep_svg(&report)
            .map_err(anyhow::Error::from)
            .or_run()?;
        std::fs::write(path, svg)
            .with_context(|| format!("writing {}", path.display()))
            .or_run()?;
    }
    sink.finish(&report).context("writing output").or_run()?;
    if interrupted {
        return Err(RunError::Interrupted { reported: true });
    }
    Ok(report)
}

/// What the sweep's header says about it: the grid, the server, the
/// trial length.
fn sweep_info(cfg: &SweepConfig) -> SweepInfo {
    SweepInfo {
        protocol: "udp".into(),
        server: match &cfg.base.target {
            Target::Remote { host, port } => format!("{host}:{port}"),
            Target::Embedded => "embedded loopback server".into(),
        },
        direction: cfg.base.spec.direction,
        streams: cfg.base.spec.streams,
        trial_s: match cfg.base.spec.limit {
            linerate_proto::spec::Limit::TimeMs(ms) => ms as f64 / 1e3,
            _ => 0.0,
        },
        sizes: cfg.sizes.clone(),
        points: cfg.points.clone(),
        rates_are_bits: cfg.rates_are_bits,
        max_loss_percent: cfg.max_loss_percent,
        client_software: linerate_run::about::software(),
        start_unix_ms: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
    }
}

/// The notes that depend on how the trials went: a sender that could not
/// keep up, and an interrupted sweep.
fn closing_notes(trials: &Trials<'_>) -> Vec<String> {
    let mut notes = Vec::new();
    if trials.done.iter().any(|t| !t.kept_up && t.error.is_none()) {
        notes.push(
            "where the sender could not keep up (or skipped over 0.5 % of its schedule after stalls), \
             the sent figures are what it achieved, not what was asked, and the trial did not \
             pass at the asked rate"
                .into(),
        );
    }
    if trials.interrupted {
        notes.push(format!(
            "interrupted by the user after {} trial(s): the trial in progress was dropped{}",
            trials.done.len(),
            if trials.cfg.find_zero_loss {
                " and the zero-loss search did not finish"
            } else {
                ""
            }
        ));
    }
    notes
}

/// The zero-loss search at one size, starting from the grid's `verdicts`
/// (extended with the search's own).
fn search_size(
    trials: &mut Trials<'_>,
    len: u32,
    verdicts: &mut Vec<(f64, bool)>,
    unit: &dyn Fn(f64) -> String,
) -> Result<ZeroLoss> {
    let cfg = trials.cfg;
    let lo = cfg.points.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = cfg.points.iter().copied().fold(0.0, f64::max);
    let mut search = ZeroLossSearch::new(lo, hi);
    for &(rate, ok) in verdicts.iter() {
        search.seed(rate, ok);
    }
    while let Some(rate) = search.next() {
        let Some(t) = trials.run(len, rate, true)? else {
            break;
        };
        let ok = passes(t, cfg.max_loss_percent);
        search.record(rate, ok);
        verdicts.push((rate, ok));
    }
    // The best passing trial at the answer (from the grid or the search).
    let best = search.best().and_then(|b| {
        let (pps, _) = requested(cfg, len, b);
        trials
            .done
            .iter()
            .rev()
            .find(|t| t.len == len && t.requested_pps == pps && passes(t, cfg.max_loss_percent))
    });
    Ok(ZeroLoss {
        len,
        max_loss_percent: cfg.max_loss_percent,
        pps: best.map(|b| b.requested_pps),
        bits_per_second: best.map(|b| b.requested_bits_per_second),
        received_pps: best.map(|b| b.received_pps),
        trials: search.trials(),
        note: search.note(unit),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The search against a path whose limit is `limit`.
    fn search(lo: f64, hi: f64, limit: f64) -> (Option<f64>, u32) {
        let mut s = ZeroLossSearch::new(lo, hi);
        while let Some(r) = s.next() {
            s.record(r, r <= limit);
        }
        (s.best(), s.trials())
    }

    #[test]
    fn binary_search_brackets_the_limit() {
        let (best, trials) = search(10_000.0, 1_000_000.0, 437_000.0);
        let best = best.expect("found");
        assert!(
            best <= 437_000.0 && best > 437_000.0 - 1_000_000.0 / 64.0,
            "{best}"
        );
        assert!(trials <= MAX_SEARCH_TRIALS);
        // Every pass is confirmed: the top rate passing takes CONFIRMATIONS trials.
        assert_eq!(search(1.0, 100.0, 1000.0), (Some(100.0), CONFIRMATIONS));
        assert_eq!(search(10.0, 100.0, 5.0), (None, 2));
        assert_eq!(search(50.0, 50.0, 10.0), (None, 1));
    }

    #[test]
    fn issue_13_search_starts_from_the_grid_and_never_answers_below_a_grid_pass() {
        // The grid passed up to 400 and failed at 500: the search confirms
        // 400 and then looks only between 400 and 500.
        let mut s = ZeroLossSearch::new(100.0, 500.0);
        for (rate, ok) in [
            (100.0, true),
            (200.0, true),
            (300.0, true),
            (400.0, true),
            (500.0, false),
        ] {
            s.seed(rate, ok);
        }
        assert_eq!(
            s.next(),
            Some(400.0),
            "the grid's best pass is confirmed first"
        );
        let mut tried = Vec::new();
        while let Some(r) = s.next() {
            tried.push(r);
            s.record(r, r <= 437.0);
        }
        let best = s.best().expect("found");
        assert!((400.0..=437.0).contains(&best), "{best}");
        assert!(tried.iter().all(|&r| r >= 400.0), "{tried:?}");
    }

    #[test]
    fn issue_13_a_pass_that_does_not_repeat_is_not_the_answer() {
        let mut s = ZeroLossSearch::new(100.0, 200.0);
        assert_eq!(s.next(), Some(200.0));
        s.record(200.0, true);
        assert_eq!(s.next(), Some(200.0), "a pass is repeated at the boundary");
        s.record(200.0, false);
        assert_eq!(s.best(), None);
        assert_eq!(s.next(), Some(100.0));
    }

    #[test]
    fn issue_13_non_monotonic_points_are_reported_with_units() {
        let unit = |r: f64| format_rate(r);
        let n = non_monotonic(&[(300e6, false), (400e6, true), (500e6, false)], &unit)
            .expect("reported");
        assert!(
            n.contains("300.00 Mbit/s failed below 400.00 Mbit/s passing"),
            "{n}"
        );
        assert!(non_monotonic(&[(300e6, true), (400e6, false)], &unit).is_none());
        let note = {
            let mut s = ZeroLossSearch::new(100e6, 500e6);
            s.seed(300e6, true);
            s.seed(500e6, false);
            s.record(300e6, true);
            s.note(&unit)
        };
        assert!(note.contains("Mbit/s"), "bounds carry units: {note}");
    }
}
