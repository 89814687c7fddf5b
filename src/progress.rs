//! Progress bars (indicatif) for long runs — repeated trials, sweeps and
//! request/response tests over several sizes — drawn on stderr only for
//! human output on a terminal: machine formats and pipes never get one.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use linerate_proto::spec::{RrLimit, TestSpec};
use linerate_report::model::{IntervalRecord, RrPhaseRecord, TestInfo};
use linerate_report::render::{Format, Sink};
use linerate_report::Report;

/// A progress bar on stderr, only for people watching a terminal.
pub fn progress(len: u64, format: Format, what: &str) -> Option<indicatif::ProgressBar> {
    if format != Format::Human || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new(len);
    let style = indicatif::ProgressStyle::with_template(TEMPLATE).map(|s| s.progress_chars("=> "));
    if let Ok(style) = style {
        bar.set_style(style);
    }
    bar.set_prefix(what.to_owned());
    Some(bar)
}

/// Runs `f` with the bar (if any) hidden, so lines printed meanwhile do not
/// tangle with it; advances the bar by one.
pub fn suspend<R>(bar: &Option<indicatif::ProgressBar>, f: impl FnOnce() -> R) -> R {
    match bar {
        Some(b) => {
            let r = b.suspend(f);
            b.inc(1);
            r
        }
        None => f(),
    }
}

const TEMPLATE: &str = "{prefix} [{bar:30}] {pos}/{len} {elapsed_precise} elapsed, ETA {eta}";

/// A request/response test over several sizes (time-limited): a bar over
/// its planned duration, advanced by the clock from the start record until
/// the report arrives. Other tests get `inner` back unchanged.
pub fn rr_sink<'a>(
    inner: Box<dyn Sink + 'a>,
    spec: &TestSpec,
    format: Format,
) -> Box<dyn Sink + 'a> {
    let Some(rr) = &spec.rr else { return inner };
    let RrLimit::TimeMs(ms) = rr.limit else {
        return inner;
    };
    let phases = rr.sizes.len() as u64 * if rr.under_load > 0 { 2 } else { 1 };
    if phases < 2 {
        return inner;
    }
    if progress(phases, format, "sizes").is_none() {
        return inner;
    }
    Box::new(RrProgress {
        inner,
        bar: None,
        format,
        phase: Duration::from_millis(ms),
        phases,
        stop: Arc::new(AtomicBool::new(false)),
        ticker: None,
    })
}

struct RrProgress<'a> {
    inner: Box<dyn Sink + 'a>,
    /// Made once the start record is out, so the bar draws below it.
    bar: Option<indicatif::ProgressBar>,
    format: Format,
    phase: Duration,
    phases: u64,
    stop: Arc<AtomicBool>,
    ticker: Option<std::thread::JoinHandle<()>>,
}

impl RrProgress<'_> {
    fn end(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

impl Drop for RrProgress<'_> {
    fn drop(&mut self) {
        self.end();
    }
}

impl Sink for RrProgress<'_> {
    fn start(&mut self, info: &TestInfo) -> std::io::Result<()> {
        let r = self.inner.start(info);
        let Some(bar) = progress(self.phases, self.format, "sizes") else {
            return r;
        };
        self.bar = Some(bar.clone());
        let (stop, phase, phases) = (self.stop.clone(), self.phase, self.phases);
        let t0 = Instant::now();
        // The phases follow each other at the planned pace; the bar says
        // which one runs by the clock (an estimate, shown only as progress).
        self.ticker = Some(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let done = (t0.elapsed().as_nanos() / phase.as_nanos().max(1)) as u64;
                bar.set_position(done.min(phases.saturating_sub(1)));
                std::thread::sleep(Duration::from_millis(100));
            }
        }));
        r
    }

    fn interval(&mut self, rec: &IntervalRecord) -> std::io::Result<()> {
        match &self.bar {
            Some(b) => b.suspend(|| self.inner.interval(rec)),
            None => self.inner.interval(rec),
        }
    }

    fn rr_phase(&mut self, rec: &RrPhaseRecord) -> std::io::Result<()> {
        self.inner.rr_phase(rec)
    }

    fn finish(&mut self, report: &Report) -> std::io::Result<()> {
        self.end();
        self.inner.finish(report)
    }
}
