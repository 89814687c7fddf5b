//! Progress bars (indicatif) for long runs — repeated trials, sweeps and
//! request/response tests over several sizes — drawn on stderr only for
//! human output on a terminal: machine formats and pipes never get one.
//! Each shows the time left: indicatif's estimate from the steps so far for
//! trials and sweeps; for rr/crr sizes, [`time_left`] by the clock (a
//! time-limited run's total is known; a count-limited one goes by the rate
//! of the sizes finished so far).
//!
//! Every bar clears itself when dropped unfinished (an error return) and on
//! Ctrl-C ([`clear_all`], from the interrupt handler), so no half-drawn
//! bar is left on the screen above the shell prompt (issue 28).

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
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
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(len),
        indicatif::ProgressDrawTarget::term_like_with_hz(
            Box::new(Stderr(console::Term::buffered_stderr())),
            20,
        ),
    )
    .with_finish(indicatif::ProgressFinish::AndClear);
    let style = indicatif::ProgressStyle::with_template(TEMPLATE).map(|s| s.progress_chars("=> "));
    if let Ok(style) = style {
        bar.set_style(style);
    }
    bar.set_prefix(what.to_owned());
    let mut live = LIVE.lock().unwrap_or_else(PoisonError::into_inner);
    live.retain(|b| b.upgrade().is_some());
    live.push(bar.downgrade());
    Some(bar)
}

/// stderr as indicatif draws on it, less the spaces it pads a bar's last
/// line with up to the right margin. Those park the cursor in the last
/// column, so the `^C` the terminal echoes wraps onto a new line; the clear
/// on Ctrl-C then erases that line instead of the bar's (issue 28). Without
/// them the echo lands on the bar's line and goes with it. (The padding
/// only keeps stray prints off a bar's line; ours go through
/// [`suspend`] or `println`.)
#[derive(Debug)]
struct Stderr(console::Term);

impl indicatif::TermLike for Stderr {
    fn width(&self) -> u16 {
        self.0.size().1
    }

    fn height(&self) -> u16 {
        self.0.size().0
    }

    fn move_cursor_up(&self, n: usize) -> std::io::Result<()> {
        self.0.move_cursor_up(n)
    }

    fn move_cursor_down(&self, n: usize) -> std::io::Result<()> {
        self.0.move_cursor_down(n)
    }

    fn move_cursor_right(&self, n: usize) -> std::io::Result<()> {
        self.0.move_cursor_right(n)
    }

    fn move_cursor_left(&self, n: usize) -> std::io::Result<()> {
        self.0.move_cursor_left(n)
    }

    fn write_line(&self, s: &str) -> std::io::Result<()> {
        self.0.write_line(s)
    }

    fn write_str(&self, s: &str) -> std::io::Result<()> {
        if is_padding(s) {
            return Ok(());
        }
        self.0.write_str(s)
    }

    fn clear_line(&self) -> std::io::Result<()> {
        self.0.clear_line()
    }

    fn flush(&self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// The padding indicatif writes after a bar's last line, on its own: only
/// spaces (a bar's own line always starts with its name).
fn is_padding(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b == b' ')
}

/// The bars drawn so far, for [`clear_all`].
static LIVE: Mutex<Vec<indicatif::WeakProgressBar>> = Mutex::new(Vec::new());

/// Clears every bar from the screen and keeps it off: called on Ctrl-C,
/// before the run winds down (or the process exits at once on a second
/// Ctrl-C), so the last line on the terminal is not a stale bar.
pub fn clear_all() {
    let live = LIVE.lock().unwrap_or_else(PoisonError::into_inner);
    for bar in live.iter().filter_map(indicatif::WeakProgressBar::upgrade) {
        bar.finish_and_clear();
        // Updates still to come (a ticker, a trial's end) draw nothing.
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
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

/// How the time left of a request/response test over several sizes is
/// estimated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plan {
    /// Time-limited (`-t`): every size runs this long, so the total is
    /// known and the time left follows the clock.
    Timed(Duration),
    /// Count-limited (`-n`): a size's duration is unknown until one ends;
    /// the time left is the rate so far (sizes per second) over the rest.
    Counted,
}

/// The time left, given `done` of `phases` sizes finished, `elapsed` since
/// the start and `since_end` since the last size ended (or the start).
/// `None` while a count-limited run has finished no size yet (no rate).
fn time_left(
    plan: Plan,
    phases: u64,
    done: u64,
    elapsed: Duration,
    since_end: Duration,
) -> Option<Duration> {
    let left = u32::try_from(phases.saturating_sub(done)).unwrap_or(u32::MAX);
    if left == 0 {
        return Some(Duration::ZERO);
    }
    let per_phase = match plan {
        Plan::Timed(d) => d,
        Plan::Counted if done == 0 => return None,
        // The sizes finished took this long each, on average.
        Plan::Counted => {
            elapsed.saturating_sub(since_end) / u32::try_from(done).unwrap_or(u32::MAX)
        }
    };
    // The size in progress has run `since_end` of its share already (but
    // a slow one does not make the rest look shorter than they are).
    Some((per_phase * left).saturating_sub(since_end.min(per_phase)))
}

/// "ETA 1m 05s", or what stands in for it.
fn eta_text(left: Option<Duration>) -> String {
    let Some(d) = left else {
        return "ETA after the first size".into();
    };
    // Whole seconds, rounded up: "0s" only once nothing is left.
    let s = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    match s {
        0..60 => format!("ETA {s}s"),
        60..3600 => format!("ETA {}m {:02}s", s / 60, s % 60),
        _ => format!("ETA {}h {:02}m", s / 3600, s % 3600 / 60),
    }
}

const RR_TEMPLATE: &str = "{prefix} [{bar:30}] {pos}/{len} {elapsed_precise} elapsed, {msg}";

/// A request/response test over several sizes (or with `--under-load`): a
/// bar over its sizes, advanced as each one ends, with the time left by
/// the clock ([`time_left`]). Other tests, machine formats and
/// non-terminals get `inner` back unchanged.
pub fn rr_sink<'a>(
    inner: Box<dyn Sink + 'a>,
    spec: &TestSpec,
    format: Format,
) -> Box<dyn Sink + 'a> {
    let Some(rr) = &spec.rr else { return inner };
    let plan = match rr.limit {
        RrLimit::TimeMs(ms) => Plan::Timed(Duration::from_millis(ms)),
        RrLimit::Count(_) => Plan::Counted,
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
        plan,
        phases,
        ends: Arc::new(Mutex::new(Ends::default())),
        stop: Arc::new(AtomicBool::new(false)),
        ticker: None,
    })
}

/// Sizes finished so far, and when the last one ended.
#[derive(Debug, Default)]
struct Ends {
    done: u64,
    last: Option<Instant>,
}

struct RrProgress<'a> {
    inner: Box<dyn Sink + 'a>,
    /// Made once the start record is out, so the bar draws below it.
    bar: Option<indicatif::ProgressBar>,
    format: Format,
    plan: Plan,
    phases: u64,
    ends: Arc<Mutex<Ends>>,
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
        if let Ok(style) = indicatif::ProgressStyle::with_template(RR_TEMPLATE) {
            bar.set_style(style.progress_chars("=> "));
        }
        self.bar = Some(bar.clone());
        let (stop, ends, plan, phases) =
            (self.stop.clone(), self.ends.clone(), self.plan, self.phases);
        let t0 = Instant::now();
        // The sizes' ends move the bar; the clock moves the time left.
        self.ticker = Some(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let (done, last) = ends.lock().map_or((0, None), |e| (e.done, e.last));
                let left = time_left(
                    plan,
                    phases,
                    done,
                    t0.elapsed(),
                    last.unwrap_or(t0).elapsed(),
                );
                // The message first: a bar showing a size done never
                // shows the estimate from before it ended.
                bar.set_message(eta_text(left));
                bar.set_position(done.min(phases));
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
        if let Ok(mut e) = self.ends.lock() {
            e.done += 1;
            e.last = Some(Instant::now());
        }
        self.inner.rr_phase(rec)
    }

    fn finish(&mut self, report: &Report) -> std::io::Result<()> {
        self.end();
        self.inner.finish(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn issue_28_only_the_padding_after_a_bar_is_dropped() {
        assert!(is_padding("    "));
        assert!(!is_padding(""));
        assert!(!is_padding("sweep [=>  ] 1/4"));
        assert!(!is_padding("  trial 1/4 done"));
    }

    #[test]
    fn issue_13_timed_runs_count_down_by_the_clock() {
        let t = Plan::Timed(2 * S);
        // 4 sizes of 2 s: 8 s at the start, 7 s one second in.
        assert_eq!(
            time_left(t, 4, 0, Duration::ZERO, Duration::ZERO),
            Some(8 * S)
        );
        assert_eq!(time_left(t, 4, 0, S, S), Some(7 * S));
        // Two sizes done (slower than planned): the rest is still 2 × 2 s,
        // less what the current size has run.
        assert_eq!(time_left(t, 4, 2, 6 * S, S / 2), Some(4 * S - S / 2));
        // A size running late does not make the rest look shorter.
        assert_eq!(time_left(t, 4, 3, 9 * S, 5 * S), Some(Duration::ZERO));
        assert_eq!(time_left(t, 4, 4, 9 * S, 5 * S), Some(Duration::ZERO));
    }

    #[test]
    fn issue_13_counted_runs_estimate_from_the_rate_so_far() {
        let c = Plan::Counted;
        assert_eq!(time_left(c, 4, 0, 3 * S, 3 * S), None);
        assert_eq!(eta_text(None), "ETA after the first size");
        assert_eq!(eta_text(Some(S / 2)), "ETA 1s");
        assert_eq!(eta_text(Some(65 * S)), "ETA 1m 05s");
        assert_eq!(eta_text(Some(3725 * S)), "ETA 1h 02m");
        // One size took 3 s: three more, less the second's first second.
        assert_eq!(time_left(c, 4, 1, 4 * S, S), Some(8 * S));
        assert_eq!(time_left(c, 4, 3, 6 * S, Duration::ZERO), Some(2 * S));
        assert_eq!(
            time_left(c, 4, 4, 6 * S, Duration::ZERO),
            Some(Duration::ZERO)
        );
    }
}
