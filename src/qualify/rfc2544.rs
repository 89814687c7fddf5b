//! RFC 2544 over UDP, per datagram size: throughput (§26.1, the binary
//! search of `sweep --find-zero-loss` between 1/64 of and the rate an
//! unpaced stream delivers, raised while the rate at it passes), latency at that rate (§26.2, UDP
//! request/response probes beside a stream at the throughput rate), frame
//! loss against offered load (§26.3, 100 % down in 10 % steps until two
//! steps in a row lose nothing) and back-to-back frames (§26.4, the
//! longest unpaced burst that arrives whole, by the same search over the
//! burst length).

use std::time::{Duration, Instant};

use linerate_proto::spec::{Limit, Pace};
use linerate_report::model::{SweepTrial, ZeroLoss};
use linerate_report::qualify::{Kpi, Latency, Rfc2544, Rfc2544Size, Verdict};
use linerate_stats::units::format_rate;

use super::ctx::Ctx;
use super::method;
use super::trials::{self, Stop, Trial};
use crate::sweep::{passes, ZeroLossSearch};

/// The search's floor: this fraction of its ceiling. The resolution is
/// 1/64 of the range (`ZeroLossSearch`), about 1.5 % of the ceiling.
const SEARCH_FLOOR: f64 = 64.0;
/// Probes this short have no room for the timestamps of one-way delay.
const MIN_PROBE_LEN: u32 = 64;
/// Back-to-back bursts: the shortest tried, and the longest (or one
/// trial's worth of the size's capacity, if less).
const MIN_BURST: f64 = 16.0;
const MAX_BURST: f64 = 100_000.0;

/// The search's words, for the report.
pub fn search_words(trial_ms: u64, quick: bool) -> String {
    format!(
        "throughput: binary search between 1/64 of and the rate an unpaced {:.1} s stream delivers \
         (raised by a quarter while the rate at it passes), to 1/64 of that range (about 1.5 %), \
         each pass confirmed by a second trial, no loss allowed; all sizes within about {:.0} s, \
         each search stopping at its best confirmed rate when its size's share is spent",
        trial_ms as f64 / 1e3,
        method_time(trial_ms, quick).as_secs_f64()
    )
}

/// The whole method's time ([`QUICK_TRIALS`], [`FULL_TRIALS`]).
fn method_time(trial_ms: u64, quick: bool) -> Duration {
    let trials = if quick { QUICK_TRIALS } else { FULL_TRIALS };
    (Duration::from_millis(trial_ms) + TRIAL_SETUP) * trials
}

/// When the rate at the search's ceiling passes, the ceiling was low: the
/// unpaced stream that measured it delivered less than the path carries
/// (on a busy host its sender stalls, and its flood competes for the CPU
/// that forwards it). The search then goes on above it, up to this many
/// times, each ceiling this factor above the last.
const CEILING_RAISES: u32 = 3;
const CEILING_STEP: f64 = 1.25;

/// RFC 2544's share of the run's time, as this many trials of the run's
/// length (`--quick`'s minute, a full run's 5 minutes), each with
/// [`TRIAL_SETUP`] (a test's connections and results: about 0.3 s on
/// loopback), split between the sizes as they come. Within a size's share
/// the throughput search may take [`SEARCH_SHARE`]; loss against load and
/// back-to-back the rest. Each runs at least its first trials; a search
/// cut short keeps its best confirmed rate and says so. (Without it, a
/// full run of the 7 sizes through a 10 Mbit/s router took over 10
/// minutes, some 90 trials a size.)
const QUICK_TRIALS: u32 = 36;
const FULL_TRIALS: u32 = 120;
const TRIAL_SETUP: Duration = Duration::from_millis(300);
const SEARCH_SHARE: f64 = 0.6;

/// When a step's trials stop (its share of [`method_time`]), if they do.
#[derive(Debug, Clone, Copy)]
struct Until(Option<Instant>);

impl Until {
    fn passed(self) -> bool {
        self.0.is_some_and(|t| Instant::now() >= t)
    }

    /// `share` of the time from now to this one.
    fn share(self, share: f64) -> Until {
        let now = Instant::now();
        Until(
            self.0
                .map(|t| now + t.saturating_duration_since(now).mul_f64(share)),
        )
    }
}

/// Inconclusive trials a search takes (each at the rate it would have
/// decided, tried again) before it stops at its best confirmed rate: a
/// host that stalls that often would spend the size's time on reruns.
const MAX_INCONCLUSIVE: u32 = 2;

/// Takes `trial` at `at` into `search` (§26.1's rates, §26.4's bursts): a
/// pass or a fail moves its bounds; an inconclusive one (the tester's
/// own loss, `trials::judge`) lowers none, so `at` comes again, and is
/// counted in `inconclusive`. Whether the search stops on them: the
/// [`MAX_INCONCLUSIVE`]th ends it.
fn take(search: &mut ZeroLossSearch, at: f64, trial: Trial, inconclusive: &mut u32) -> bool {
    if trial == Trial::Inconclusive {
        *inconclusive += 1;
        return *inconclusive >= MAX_INCONCLUSIVE;
    }
    search.record(at, trial == Trial::Pass);
    false
}

/// How trials the tester spoilt ended a search, in words ("" for none).
fn inconclusive_words(n: u32, undecided: bool) -> String {
    match n {
        0 => String::new(),
        n => format!(
            "{n} trial(s) inconclusive (the tester's own stall or drop, past its reruns): not \
             counted as loss{}",
            if undecided {
                ", and the search stopped on them"
            } else {
                ""
            }
        ),
    }
}

/// A throughput search's outcome: the last search, its floor and ceiling,
/// how many times the ceiling was raised, whether its time cut it, its
/// inconclusive trials and whether they ended it (`undecided`), and the
/// ceiling that passed below the last search when it was raised.
struct Searched {
    search: ZeroLossSearch,
    /// The last ceiling, confirmed, when the search above it runs.
    passed: Option<f64>,
    floor: f64,
    ceiling: f64,
    raises: u32,
    cut: bool,
    inconclusive: u32,
    undecided: bool,
}

impl Searched {
    /// The best confirmed rate: the last search's, or the ceiling that
    /// passed below it (a search above it that its time or inconclusive
    /// trials cut short has confirmed nothing of its own).
    fn best(&self) -> Option<f64> {
        self.search.best().or(self.passed)
    }
}

/// The §26.1 search between `hi`/64 and `hi`, `try_rate` running a trial;
/// with `raise`, a ceiling that passes is raised ([`CEILING_RAISES`]) and
/// the search goes on between it and the next, the passed ceiling not
/// tried again; after `until`, no more trials once a rate has passed. An
/// inconclusive trial is not recorded (it lowers no bound): the rate is
/// tried again, and after [`MAX_INCONCLUSIVE`] of them the search stops.
fn search_throughput(
    hi: f64,
    raise: bool,
    until: Until,
    mut try_rate: impl FnMut(f64) -> Result<Trial, Stop>,
) -> Result<Searched, Stop> {
    let mut out = Searched {
        search: ZeroLossSearch::new(hi / SEARCH_FLOOR, hi),
        passed: None,
        floor: hi / SEARCH_FLOOR,
        ceiling: hi,
        raises: 0,
        cut: false,
        inconclusive: 0,
        undecided: false,
    };
    loop {
        while let Some(rate) = out.search.next() {
            if out.best().is_some() && until.passed() {
                out.cut = true;
                return Ok(out);
            }
            // The last ceiling passed its confirmations in the search below.
            let trial = if out.passed == Some(rate) {
                Trial::Pass
            } else {
                try_rate(rate)?
            };
            if take(&mut out.search, rate, trial, &mut out.inconclusive) {
                out.undecided = true;
                return Ok(out);
            }
        }
        let ceiling = out.ceiling;
        if !raise || out.raises == CEILING_RAISES || out.search.best() != Some(ceiling) {
            return Ok(out);
        }
        out.raises += 1;
        out.passed = Some(ceiling);
        out.search = ZeroLossSearch::new(ceiling, ceiling * CEILING_STEP);
        out.ceiling *= CEILING_STEP;
    }
}

/// What a size's throughput alone says, before any SLA: the verdict and
/// why, or `None` when a rate above the floor was confirmed and the SLA
/// (or nothing) judges it. With an SLA rate, its KPI judges (a rate below
/// it failing, or inconclusive when stalls ended the search); without one,
/// no confirmed rate, or only the search's floor (1/64 of what an unpaced
/// stream delivered: everything above it lost), is FAIL, or INCONCLUSIVE
/// when the tester's stalls ended the search; a confirmed rate whose
/// search the stalls ended is INCONCLUSIVE (it is a lower bound only).
fn throughput_verdict(
    best: Option<f64>,
    floor: f64,
    undecided: bool,
    sla_met: Option<bool>,
) -> Option<(Verdict, String)> {
    const STALLS: &str =
        "the tester's own stalls or drops spoilt the trials that would have decided it \
        (rerun on a less busy host)";
    let at_floor = best.is_some_and(|b| b <= floor * (1.0 + 1e-9));
    match (sla_met, best) {
        (Some(true), _) => None,
        (Some(false), _) if undecided => Some((
            Verdict::Inconclusive,
            format!("below the SLA rate, but {STALLS}"),
        )),
        (Some(false), _) => None,
        (None, None) if undecided => Some((
            Verdict::Inconclusive,
            format!("no zero-loss rate confirmed: {STALLS}"),
        )),
        (None, None) => Some((Verdict::Fail, "no zero-loss rate found".into())),
        (None, Some(_)) if at_floor && undecided => Some((
            Verdict::Inconclusive,
            format!("only the search's floor passed: {STALLS}"),
        )),
        (None, Some(_)) if at_floor => Some((
            Verdict::Fail,
            "no zero-loss rate above the search's floor (1/64 of what an unpaced stream \
             delivered): every higher rate lost"
                .into(),
        )),
        (None, Some(_)) if undecided => Some((
            Verdict::Inconclusive,
            format!("the search stopped short of the limit: {STALLS}"),
        )),
        (None, Some(_)) => None,
    }
}

/// §26.1: the throughput search at one size, its trials kept in
/// `search_trials`; `hi` becomes the ceiling it ended with (a user's
/// `--max-rate` is never raised).
fn throughput(
    c: &Ctx<'_>,
    len: u32,
    hi: &mut f64,
    search_trials: &mut Vec<SweepTrial>,
    until: Until,
) -> Result<Searched, Stop> {
    let searched = search_throughput(*hi, c.cfg.max_rate.is_none(), until, |rate| {
        let (t, _) = trials::udp(&trials::udp_at(c.t, len, rate, c.cfg.trial_ms), &c.stalls)?;
        let trial = trials::judge(&t);
        search_trials.push(t);
        Ok(trial)
    })?;
    *hi = searched.ceiling;
    Ok(searched)
}

/// The search's figure and how it ended, in words.
fn zero_loss(s: &Searched, len: u32, search_trials: &[SweepTrial]) -> ZeroLoss {
    let best = s.best();
    let raised = match s.raises {
        0 => String::new(),
        n => format!(
            "the ceiling was raised {n} time(s) to {}: the rate at it passed, so the unpaced \
             stream that measured it delivered less than the path carries; ",
            format_rate(s.ceiling)
        ),
    };
    let inconclusive = match inconclusive_words(s.inconclusive, s.undecided) {
        w if w.is_empty() => w,
        w => format!("; {w}"),
    };
    ZeroLoss {
        len,
        max_loss_percent: 0.0,
        pps: best.map(|b| method::frames_per_second(b, len)),
        bits_per_second: best,
        received_pps: best.and_then(|b| {
            search_trials
                .iter()
                .rev()
                .find(|t| (t.requested_bits_per_second - b).abs() < 1.0 && passes(t, 0.0))
                .map(|t| t.received_pps)
        }),
        trials: search_trials.len() as u32,
        note: raised
            + &s.search.note(&|r| format_rate(r))
            + &inconclusive
            + if s.cut {
                "; stopped at the best confirmed rate when this size's share of the method's \
                 time was spent"
            } else {
                ""
            },
    }
}

/// §26.2: probes beside a stream at `rate` (payload bit/s).
fn latency(c: &Ctx<'_>, len: u32, rate: f64) -> Result<(Option<Latency>, Option<String>), Stop> {
    if !c.pre.probes_beside_load {
        return Ok((
            None,
            Some("not measured: the server refused probes beside a stream".into()),
        ));
    }
    let load = trials::udp_at(c.t, len, rate, c.cfg.trial_ms);
    let (l, p) = trials::beside(
        &load,
        &trials::probe_config(c.t, len.max(MIN_PROBE_LEN), c.cfg.trial_ms),
        &c.stalls,
    );
    l?;
    Ok(trials::probe_latency(p))
}

/// §26.3: from the ceiling `hi` down in tenths, `run` running a trial at
/// each load, until two steps lose nothing (an inconclusive one, its loss
/// the tester's, is no such step: `trials::judge`).
fn loss_vs_load(
    hi: f64,
    out: &mut Vec<SweepTrial>,
    until: Until,
    mut run: impl FnMut(f64) -> Result<SweepTrial, Stop>,
) -> Result<(), Stop> {
    for rate in method::loss_steps(hi) {
        // Out of time: at least the two steps the stopping rule looks at.
        if out.len() >= 2 && until.passed() {
            break;
        }
        out.push(run(rate)?);
        let n = out.len();
        if n >= 2 && out[n - 2..].iter().all(|t| trials::judge(t) == Trial::Pass) {
            break;
        }
    }
    Ok(())
}

/// §26.4: the longest unpaced burst with no loss, between [`MIN_BURST`]
/// and `hi` datagrams, `run` sending a burst; its trials kept in `done`.
/// A burst the tester's own drops spoilt past its reruns is tried again
/// ([`take`]); the note says so.
fn back_to_back(
    hi: f64,
    done: &mut Vec<SweepTrial>,
    until: Until,
    mut run: impl FnMut(u64) -> Result<SweepTrial, Stop>,
) -> Result<(Option<u64>, Option<String>), Stop> {
    let mut search = ZeroLossSearch::new(MIN_BURST, hi.round());
    let (mut inconclusive, mut undecided, mut cut) = (0, false, false);
    while let Some(n) = search.next() {
        if search.best().is_some() && until.passed() {
            cut = true;
            break;
        }
        let n = n.round();
        let t = run(n as u64)?;
        let trial = trials::judge(&t);
        done.push(t);
        if take(&mut search, n, trial, &mut inconclusive) {
            undecided = true;
            break;
        }
    }
    let mut note = match (inconclusive_words(inconclusive, undecided), undecided) {
        (w, _) if w.is_empty() => None,
        (w, true) => Some(format!("{w}: the longest burst found is a lower bound")),
        (w, false) => Some(w),
    };
    if cut {
        // Cut by the size's time, the search may stand at its first
        // passing burst (its floor): a figure to read as "at least".
        let w = "the search stopped when this size's share of the time was spent \
                 (short of its resolution): the longest burst found is a lower bound";
        note = Some(note.map_or_else(|| w.to_owned(), |n| format!("{n}; {w}")));
    }
    Ok((search.best().map(|b| b as u64), note))
}

/// Every test of §26 at one size, filling `s` as each ends (so a stop
/// keeps what ran), within `until`; `found` gets the search's floor and
/// whether inconclusive trials ended it.
fn measure(
    c: &Ctx<'_>,
    s: &mut Rfc2544Size,
    found: &mut Option<(f64, bool)>,
    until: Until,
) -> Result<(), Stop> {
    let len = s.len;
    let unpaced = trials::udp_config(c.t, len, Pace::Unlimited, Limit::TimeMs(c.cfg.trial_ms));
    let (capacity, _) = trials::flood(&unpaced)?;
    let mut hi = c.cfg.max_rate.unwrap_or(capacity.received_bits_per_second);
    let capacity_pps = capacity.received_pps;
    if hi <= 0.0 {
        s.throughput.note = "the unpaced stream delivered nothing".into();
        s.capacity = Some(capacity);
        *found = Some((0.0, false));
        return Ok(());
    }
    s.capacity = Some(capacity);
    let searched = throughput(c, len, &mut hi, &mut s.search, until.share(SEARCH_SHARE))?;
    s.throughput = zero_loss(&searched, len, &s.search);
    s.search_cut = searched.cut;
    s.inconclusive_trials = searched.inconclusive;
    *found = Some((searched.floor, searched.undecided));
    s.throughput_fps = s.throughput.pps;
    s.throughput_frame_bps = s
        .throughput
        .bits_per_second
        .map(|b| method::frame_bps(b, len, c.v6));
    (s.latency, s.latency_note) = match s.throughput.bits_per_second {
        Some(r) => latency(c, len, r)?,
        None => (
            None,
            Some("no rate passed: no throughput to measure latency at".into()),
        ),
    };
    loss_vs_load(hi, &mut s.loss_vs_load, until.share(0.5), |rate| {
        let load = trials::udp_at(c.t, len, rate, c.cfg.trial_ms);
        Ok(trials::udp(&load, &c.stalls)?.0)
    })?;
    let longest = (capacity_pps * c.cfg.trial_ms as f64 / 1e3).clamp(MIN_BURST, MAX_BURST);
    (s.back_to_back, s.back_to_back_note) =
        back_to_back(longest, &mut s.back_to_back_trials, until, |n| {
            let burst = trials::udp_config(c.t, len, Pace::Unlimited, Limit::Datagrams(n));
            Ok(trials::udp(&burst, &c.stalls)?.0)
        })?;
    Ok(())
}

/// The KPIs of a size against the SLA, and its verdict ([`throughput_verdict`]
/// from the search's `found` floor and whether stalls ended it).
fn judge(c: &Ctx<'_>, s: &mut Rfc2544Size, found: Option<(f64, bool)>) {
    let sla = &c.cfg.sla;
    let lat = s.latency.as_ref();
    s.kpis = vec![
        Kpi::judge(
            "throughput",
            "bit/s",
            Some(s.throughput_frame_bps.unwrap_or(0.0)),
            sla.rate_bps,
            false,
        ),
        Kpi::judge(
            "latency (round trip, mean)",
            "ns",
            lat.map(|l| l.rtt.mean_ns),
            sla.rtt_ns.map(|v| v as f64),
            true,
        ),
        Kpi::judge(
            "latency (one-way, mean)",
            "ns",
            lat.and_then(|l| l.one_way.as_ref()).map(|o| o.mean_ns),
            sla.delay_ns.map(|v| v as f64),
            true,
        ),
    ];
    if s.latency.is_none() && s.throughput.bits_per_second.is_none() {
        unmeasured_latency(&mut s.kpis[1..], found.is_some_and(|f| f.1));
    }
    // A latency that was not measured fails only a threshold set for it.
    s.verdict = Verdict::all(
        s.kpis
            .iter()
            .filter(|k| k.threshold.is_some() || k.value.is_some())
            .map(|k| k.verdict),
    );
    // The throughput alone, where it decides (a search that ran, or an
    // unpaced stream that delivered nothing, found no rate).
    let Some((floor, undecided)) = found else {
        return;
    };
    let sla_met = sla.rate_bps.map(|_| s.kpis[0].verdict == Verdict::Pass);
    if let Some((v, why)) =
        throughput_verdict(s.throughput.bits_per_second, floor, undecided, sla_met)
    {
        let others = s.kpis[1..]
            .iter()
            .filter(|k| k.threshold.is_some() || k.value.is_some())
            .map(|k| k.verdict);
        s.verdict = Verdict::all(others.chain([v]));
        s.verdict_note = Some(why);
    }
}

/// The latency KPIs of a size whose search passed no rate, so nothing
/// measured them: NOT RUN, or, where the tester's stalls undecided the
/// search (`undecided`), INCONCLUSIVE as the search is. Issue 28: a loaded
/// run's stalls left no rate, and its SLA's delay, NOT RUN, outranked the
/// search's INCONCLUSIVE: exit 5, "could not run", for a run that ran
/// every step and whose only fault was the tester's load.
fn unmeasured_latency(kpis: &mut [Kpi], undecided: bool) {
    if undecided {
        for k in kpis.iter_mut().filter(|k| k.verdict == Verdict::NotRun) {
            k.verdict = Verdict::Inconclusive;
        }
    }
}

/// One size: what was measured (all of it, or up to a stop) and judged.
fn size(c: &Ctx<'_>, len: u32, until: Until) -> (Rfc2544Size, Option<Stop>) {
    let mut s = Rfc2544Size {
        len,
        frame_len: method::frame_len(len, c.v6),
        capacity: None,
        throughput: ZeroLoss {
            len,
            max_loss_percent: 0.0,
            pps: None,
            bits_per_second: None,
            received_pps: None,
            trials: 0,
            note: "not run".into(),
        },
        throughput_frame_bps: None,
        throughput_fps: None,
        search: Vec::new(),
        search_cut: false,
        inconclusive_trials: 0,
        verdict_note: None,
        latency: None,
        latency_note: None,
        loss_vs_load: Vec::new(),
        back_to_back: None,
        back_to_back_note: None,
        back_to_back_trials: Vec::new(),
        kpis: Vec::new(),
        verdict: Verdict::NotRun,
    };
    let mut found = None;
    let stop = measure(c, &mut s, &mut found, until).err();
    // A stop before the search decided leaves nothing to judge: its
    // throughput (0 unmeasured) failing an SLA rate is no FAIL. A size
    // stopped (a trial that could not run, a refusal) is NOT RUN, the
    // stop's words its reason, unless what ran had already failed.
    let decided = found.is_some();
    judge(c, &mut s, found);
    if let Some(stop) = stop
        .as_ref()
        .filter(|_| s.verdict != Verdict::Fail || !decided)
    {
        s.verdict = Verdict::NotRun;
        s.verdict_note = Some(stop.words());
    }
    (s, stop)
}

/// Runs every size; what ran before a stop (the size in progress too) is
/// kept in `out`.
pub fn run(c: &Ctx<'_>, sizes: &[u32], out: &mut Rfc2544) -> Result<(), Stop> {
    let end = Some(Instant::now() + method_time(c.cfg.trial_ms, c.cfg.quick));
    for (i, &len) in sizes.iter().enumerate() {
        // What is left of the method's time, shared by the sizes left.
        let until = Until(end).share(1.0 / (sizes.len() - i) as f64);
        let (s, stop) = size(c, len, until);
        out.sizes.push(s);
        out.verdict = Verdict::all(out.sizes.iter().map(|s| s.verdict));
        if let Some(stop) = stop {
            return Err(stop);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path that passes every rate up to `limit`.
    fn path(limit: f64) -> impl FnMut(f64) -> Result<Trial, Stop> {
        move |rate| Ok(pass(rate <= limit))
    }

    fn pass(ok: bool) -> Trial {
        if ok {
            Trial::Pass
        } else {
            Trial::Fail
        }
    }

    /// Issue 27 (the shaped router's 2 % test, flaky on a busy host): an
    /// unpaced stream measured the ceiling 10 % below what the path
    /// carries; the rate at it passed, so the search goes on above it and
    /// finds the limit within its resolution, not the low ceiling.
    /// Issue 28: with no rate passed, a latency SLA nothing measured is
    /// INCONCLUSIVE where the tester's stalls undecided the search, and
    /// NOT RUN otherwise; a latency without a threshold stays as it was.
    #[test]
    fn issue_28_latency_the_testers_stalls_left_unmeasured_is_inconclusive() {
        let kpis = || {
            vec![
                Kpi::judge("latency (round trip, mean)", "ns", None, None, true),
                Kpi::judge("latency (one-way, mean)", "ns", None, Some(1e9), true),
            ]
        };
        let mut k = kpis();
        unmeasured_latency(&mut k, true);
        assert_eq!(k[1].verdict, Verdict::Inconclusive);
        let mut k = kpis();
        unmeasured_latency(&mut k, false);
        assert_eq!(k[1].verdict, Verdict::NotRun);
        // The size's verdict: the search's INCONCLUSIVE, not NOT RUN.
        let mut k = kpis();
        unmeasured_latency(&mut k, true);
        let judged = k
            .iter()
            .filter(|k| k.threshold.is_some())
            .map(|k| k.verdict);
        assert_eq!(
            Verdict::all(judged.chain([Verdict::Inconclusive])),
            Verdict::Inconclusive
        );
    }

    #[test]
    fn issue_27_a_ceiling_that_passes_is_raised_to_the_limit() {
        let (ceiling, limit) = (8.77e6, 9.72e6);
        let s = search_throughput(ceiling, true, Until(None), path(limit)).expect("runs");
        let best = s.search.best().expect("a rate passed");
        assert!(best <= limit && (limit - best) / limit < 0.01, "{best}");
        assert_eq!(s.raises, 1);
        assert!((s.ceiling - ceiling * CEILING_STEP).abs() < 1.0);
        // The passed ceiling is not tried again; the user's ceiling stays.
        let mut tried = Vec::new();
        search_throughput(ceiling, true, Until(None), |r| {
            tried.push(r);
            Ok(pass(r <= limit))
        })
        .expect("runs");
        assert_eq!(
            tried.iter().filter(|&&r| r == ceiling).count(),
            2,
            "{tried:?}"
        );
        let fixed = search_throughput(ceiling, false, Until(None), path(limit)).expect("runs");
        assert_eq!(fixed.search.best(), Some(ceiling));
        // A ceiling above the limit is searched below as before.
        let s = search_throughput(11e6, true, Until(None), path(limit)).expect("runs");
        assert_eq!(s.raises, 0);
        assert!(s.search.best().is_some_and(|b| (limit - b) / limit < 0.02));
        // A path faster than every raise ends at the last ceiling.
        let s = search_throughput(1e6, true, Until(None), path(1e9)).expect("runs");
        assert_eq!(s.raises, CEILING_RAISES);
        assert_eq!(s.search.best(), Some(s.ceiling));
    }

    /// `--quick` (issue 27: 26–48 s for one size on a loaded host): once
    /// its time is spent, the search stops at its best confirmed rate,
    /// after no more trials than that takes; with time left it goes on.
    #[test]
    fn issue_27_a_quick_search_stops_at_its_best_confirmed_rate_when_its_time_is_spent() {
        let mut tried = 0;
        let spent = Until(Some(Instant::now()));
        let s = search_throughput(1e6, true, spent, |r| {
            tried += 1;
            Ok(pass(r <= 0.5e6))
        })
        .expect("runs");
        // The ceiling fails, the floor passes twice (confirmed): cut there.
        assert!(s.cut);
        assert_eq!(tried, 3);
        assert_eq!(s.search.best(), Some(1e6 / SEARCH_FLOOR));
        let later = Until(Some(Instant::now() + Duration::from_secs(60)));
        let s = search_throughput(1e6, true, later, path(0.5e6)).expect("runs");
        assert!(!s.cut);
        assert!(s.search.best().is_some_and(|b| (0.5e6 - b) / 0.5e6 < 0.02));
    }

    /// Issue 27 (a loaded host: "18 trial(s) … counted as failed", the
    /// search left far below the link): a trial the tester's stalls spoilt
    /// past its reruns lowers no bound; the rate is tried again and the
    /// search finds the limit, saying how many were inconclusive.
    #[test]
    fn issue_27_inconclusive_trials_do_not_lower_the_search() {
        let (ceiling, limit) = (8.77e6, 9.72e6);
        let mut spoilt = 1;
        let s = search_throughput(ceiling, true, Until(None), |r| {
            if r == ceiling && spoilt > 0 {
                spoilt -= 1;
                return Ok(Trial::Inconclusive);
            }
            Ok(pass(r <= limit))
        })
        .expect("runs");
        let best = s.search.best().expect("a rate passed");
        assert!(
            (limit - best) / limit < 0.01,
            "{best}: the spoilt ceiling lowered it"
        );
        assert_eq!((s.inconclusive, s.undecided), (1, false));
        // Stalls at every rate above 5 Mbit/s: the search stops on them,
        // its best confirmed rate below, and the size is inconclusive.
        let s = search_throughput(ceiling, true, Until(None), |r| {
            Ok(if r > 5e6 {
                Trial::Inconclusive
            } else {
                pass(r <= limit)
            })
        })
        .expect("runs");
        assert_eq!((s.inconclusive, s.undecided), (MAX_INCONCLUSIVE, true));
        let v = throughput_verdict(s.best(), s.floor, s.undecided, None);
        assert_eq!(v.map(|v| v.0), Some(Verdict::Inconclusive));
    }

    /// A trial of 1000 datagrams at `rate` that lost `lost`, marked
    /// inconclusive (its loss the tester's on every try) when `spoilt`.
    fn fake(rate: f64, lost: u64, spoilt: bool) -> SweepTrial {
        SweepTrial {
            requested_bits_per_second: rate,
            issued: 1000,
            received: 1000 - lost,
            lost,
            loss_percent: lost as f64 / 10.0,
            kept_up: true,
            inconclusive: spoilt.then(|| "the receiving sockets overflowed".into()),
            ..SweepTrial::default()
        }
    }

    /// Issue 27: back-to-back's search goes through the same mechanism as
    /// the throughput search: a burst the tester's own stalls or drops
    /// spoilt past its reruns lowers no bound (it is tried again, and the
    /// longest burst the path carries is found); spoilt ones that keep
    /// coming stop the search, its figure said to be a lower bound.
    #[test]
    fn issue_27_a_burst_the_tester_spoilt_does_not_shorten_back_to_back() {
        let (hi, limit) = (2000.0, 2000);
        let mut spoilt = 1;
        let mut done = Vec::new();
        let (best, note) = back_to_back(hi, &mut done, Until(None), |n| {
            let first = std::mem::replace(&mut spoilt, 0) == 1;
            Ok(fake(
                n as f64,
                if first || n > limit { 7 } else { 0 },
                first,
            ))
        })
        .expect("runs");
        assert_eq!(
            best,
            Some(limit),
            "the spoilt top burst lowered it: {done:?}"
        );
        let note = note.expect("said");
        assert!(note.contains("1 trial(s) inconclusive"), "{note}");
        // The tester's drops above 500 datagrams on every try: stopped,
        // and what it found is a lower bound.
        let (best, note) = back_to_back(hi, &mut Vec::new(), Until(None), |n| {
            Ok(fake(n as f64, u64::from(n > 500), n > 500))
        })
        .expect("runs");
        assert!(best.is_none_or(|b| b <= 500), "{best:?}");
        assert!(note.is_some_and(|n| n.contains("lower bound")));
    }

    /// Issue 27 (the default run through a 10 Mbit/s tbf printed "b2b 16"
    /// for every size, the search's floor, as if measured): a burst search
    /// cut by the size's time says its figure is a lower bound.
    #[test]
    fn issue_27_a_back_to_back_search_cut_by_time_says_it_is_a_lower_bound() {
        let spent = Until(Some(Instant::now()));
        let (best, note) = back_to_back(2000.0, &mut Vec::new(), spent, |n| {
            Ok(fake(n as f64, u64::from(n > 600), false))
        })
        .expect("runs");
        assert!(best.is_some_and(|b| b < 600), "{best:?}");
        let note = note.expect("a cut search says so");
        assert!(note.contains("lower bound"), "{note}");
        // With time left it finds the longest burst and says nothing.
        let later = Until(Some(Instant::now() + Duration::from_secs(60)));
        let (best, note) = back_to_back(2000.0, &mut Vec::new(), later, |n| {
            Ok(fake(n as f64, u64::from(n > 600), false))
        })
        .expect("runs");
        assert!(best.is_some_and(|b| b > 560 && b <= 600), "{best:?}");
        assert_eq!(note, None);
    }

    /// Issue 27: loss against load takes a step whose loss was the
    /// tester's (inconclusive) as no step that lost nothing (the steps go
    /// on down), and keeps it, marked, for the report to say so.
    #[test]
    fn issue_27_loss_vs_load_keeps_a_spoilt_step_marked_and_goes_on() {
        let mut out = Vec::new();
        loss_vs_load(10e6, &mut out, Until(None), |rate| {
            Ok(match rate {
                r if r > 9.5e6 => fake(r, 100, false),
                r if r > 8.5e6 => fake(r, 30, true),
                r => fake(r, 0, false),
            })
        })
        .expect("runs");
        let rates: Vec<f64> = out.iter().map(|t| t.requested_bits_per_second).collect();
        assert_eq!(rates.len(), 4, "{rates:?}");
        assert_eq!(
            out[1].inconclusive.as_deref(),
            Some("the receiving sockets overflowed")
        );
        assert_eq!(trials::judge(&out[1]), Trial::Inconclusive);
        assert_eq!(trials::judge(&out[0]), Trial::Fail);
    }

    /// Issue 27 (the shaped router on a busy host: "466 B: no throughput …
    /// the ceiling was raised 2 time(s) … 2 trial(s) inconclusive"): a
    /// search above a ceiling that passed, stopped by inconclusive trials
    /// (or its time) before it confirmed a rate of its own, keeps that
    /// ceiling as its figure instead of none.
    #[test]
    fn issue_27_a_raised_search_cut_short_keeps_the_ceiling_that_passed() {
        let (ceiling, limit) = (8e6, 9.72e6);
        let s = search_throughput(ceiling, true, Until(None), |r| {
            Ok(if r > ceiling {
                Trial::Inconclusive
            } else {
                pass(r <= limit)
            })
        })
        .expect("runs");
        assert_eq!((s.raises, s.undecided), (1, true));
        assert_eq!(s.best(), Some(ceiling));
        // Cut by its time above the passed ceiling: that ceiling too.
        let mut n = 0;
        let s = search_throughput(ceiling, true, Until(Some(Instant::now())), |r| {
            n += 1;
            Ok(pass(r <= limit))
        })
        .expect("runs");
        assert!(s.cut && s.raises == 1, "{n} trials");
        assert_eq!(s.best(), Some(ceiling));
    }

    /// Issue 27 ("none … PASS", "162.89 kbit/s … PASS" at the floor): a
    /// size with no zero-loss rate, or only the search's floor, is not a
    /// pass without an SLA rate: FAIL, or INCONCLUSIVE when stalls ended
    /// its search; an SLA rate's KPI judges where one is given.
    #[test]
    fn issue_27_floor_and_none_sizes_are_not_pass() {
        let floor = 10e6 / SEARCH_FLOOR;
        let verdict = |best, undecided, sla| {
            throughput_verdict(best, floor, undecided, sla).map(|(v, why)| {
                assert!(!why.is_empty());
                v
            })
        };
        assert_eq!(verdict(None, false, None), Some(Verdict::Fail));
        assert_eq!(verdict(Some(floor), false, None), Some(Verdict::Fail));
        assert_eq!(verdict(None, true, None), Some(Verdict::Inconclusive));
        assert_eq!(
            verdict(Some(floor), true, None),
            Some(Verdict::Inconclusive)
        );
        // A rate above the floor: the SLA (or nothing) judges it …
        assert_eq!(verdict(Some(9e6), false, None), None);
        assert_eq!(verdict(Some(9e6), false, Some(false)), None);
        assert_eq!(verdict(Some(floor), false, Some(true)), None);
        // … unless stalls stopped its search short of deciding.
        assert_eq!(verdict(Some(9e6), true, None), Some(Verdict::Inconclusive));
        assert_eq!(
            verdict(Some(5e6), true, Some(false)),
            Some(Verdict::Inconclusive)
        );
        assert_eq!(verdict(Some(9e6), true, Some(true)), None);
    }
}
