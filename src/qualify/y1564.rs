//! ITU-T Y.1564 over UDP: the service configuration test (steps of
//! `method::y1564_steps`, each a stream at the step's rate, with UDP
//! request/response probes beside it when the SLA judges a delay) and the service
//! performance test at CIR for `--duration`. KPIs per step: information
//! rate, frame loss ratio, frame transfer delay (one-way mean where the
//! clock offset allows, else round trip), frame delay variation (RFC 3550
//! interarrival jitter of the stream) and availability (the share of the
//! receiver's intervals whose loss stays within the SLA's).

use linerate_proto::spec::Direction;
use linerate_report::model::{IntervalRecord, SweepTrial};
use linerate_report::qualify::{Kpi, Verdict, Y1564Step, Y1564};
use linerate_report::Report;

use super::ctx::Ctx;
use super::method::{self, Step};
use super::trials::{self, Stop};

/// The pacer's share of the information rate a step may fall short by.
pub const IR_TOLERANCE: f64 = 0.01;
/// The probes' request size: small, so they add little to the load.
const PROBE_LEN: u32 = 64;

/// Percent of `intervals` whose loss ratio stays within `max_loss`.
fn availability(intervals: &[IntervalRecord], max_loss_percent: f64) -> Option<f64> {
    let ratios: Vec<f64> = intervals
        .iter()
        .filter(|i| !i.omitted)
        .filter_map(|i| {
            let u = &i.sums.first()?.udp.as_ref()?.counts;
            let lost = u.lost?.max(0) as f64;
            let got = u.received? as f64;
            Some(if lost + got > 0.0 {
                lost / (lost + got) * 100.0
            } else {
                100.0
            })
        })
        .collect();
    (!ratios.is_empty()).then(|| {
        ratios.iter().filter(|&&r| r <= max_loss_percent).count() as f64 / ratios.len() as f64
            * 100.0
    })
}

/// The receiver's intervals of a forward stream (the server's).
fn receiver_intervals(r: &Report) -> &[IntervalRecord] {
    match r.test.direction {
        Some(Direction::Reverse) => &r.intervals,
        _ => &r.server_intervals,
    }
}

/// The stream's frame delay variation: the largest RFC 3550 jitter of
/// its directions' sums; `None` without a report or a UDP sum (nothing
/// measured it, so no 0 is reported).
fn jitter_ns(r: Option<&Report>) -> Option<f64> {
    r?.sums
        .iter()
        .filter_map(|s| s.udp.as_ref())
        .map(|u| u.jitter_ns)
        .reduce(f64::max)
}

/// Runs one step: the stream, probes beside it when the server allows.
fn step(c: &Ctx<'_>, step: Step, offered: f64, ms: u64, len: u32) -> Result<Y1564Step, Stop> {
    let cir = c.cfg.cir.unwrap_or(0.0);
    let load = trials::udp_at(c.t, len, method::payload_bps(offered, len, c.v6), ms);
    // Probes run back to back (one outstanding, about 1/RTT per second of
    // request and response), which on a slow path is load of its own: they
    // run only when the SLA judges a delay.
    let sla = &c.cfg.sla;
    let want_delay = sla.delay_ns.is_some() || sla.rtt_ns.is_some();
    let ((trial, report), probe, note) = if want_delay && c.pre.probes_beside_load {
        let (l, p) = trials::beside(&load, &trials::probe_config(c.t, PROBE_LEN, ms), &c.stalls);
        let (p, note) = match p {
            Ok(p) => (Some(p), None),
            Err(e) => (None, Some(format!("probes failed: {e}"))),
        };
        (l?, p, note)
    } else {
        (trials::udp(&load, &c.stalls)?, None, None)
    };
    let ph = probe.as_ref().and_then(|p| p.rr.as_ref()?.phases.first());
    let ftd = ph
        .and_then(|p| p.client_to_server.latency.as_ref())
        .map(|l| l.mean_ns);
    let rtt = ph.map(|p| p.latency.mean_ns);
    let ir = method::frame_bps(trial.received_bits_per_second, len, c.v6);
    let avail = report
        .as_ref()
        .and_then(|r| availability(receiver_intervals(r), sla.loss_percent.unwrap_or(0.0)));
    let fdv = jitter_ns(report.as_ref());
    // Judged against what the sender put on the path (a sender that fell
    // behind its schedule is the tester's shortfall, not the path's; a
    // short step's rate also carries a datagram of rounding).
    let sent = method::frame_bps(trial.sent_bits_per_second, len, c.v6).min(offered);
    let mut kpis = vec![Kpi::judge(
        "information rate",
        "bit/s",
        Some(ir),
        Some(method::y1564_ir_floor(step, sent, cir, IR_TOLERANCE)),
        false,
    )];
    if step.committed() {
        let ns = |v: Option<u64>| v.map(|v| v as f64);
        kpis.extend([
            Kpi::judge(
                "frame loss ratio",
                "%",
                Some(trial.loss_percent),
                sla.loss_percent,
                true,
            ),
            Kpi::judge(
                "frame transfer delay (one-way)",
                "ns",
                ftd,
                ns(sla.delay_ns),
                true,
            ),
            Kpi::judge("round-trip delay", "ns", rtt, ns(sla.rtt_ns), true),
            Kpi::judge("frame delay variation", "ns", fdv, ns(sla.jitter_ns), true),
            Kpi::judge("availability", "%", avail, sla.availability_percent, false),
        ]);
    }
    let verdict = verdict_of(&mut kpis, &trial);
    // Said where it decided a KPI (a spoilt trial may still pass them all).
    let spoilt = trial
        .inconclusive
        .as_ref()
        .filter(|_| kpis.iter().any(|k| k.verdict == Verdict::Inconclusive))
        .map(|why| format!("inconclusive: {why}, past its reruns"));
    let note = [note, spoilt].into_iter().flatten().collect::<Vec<_>>();
    Ok(Y1564Step {
        name: step.name(),
        offered_bps: offered,
        seconds: ms as f64 / 1e3,
        ir_bps: Some(ir),
        flr_percent: Some(trial.loss_percent),
        ftd_ns: ftd,
        rtt_ns: rtt,
        fdv_ns: fdv,
        availability_percent: avail,
        kpis,
        verdict,
        note: (!note.is_empty()).then(|| note.join("; ")),
        trial,
        report,
        probe,
    })
}

/// A step's verdict: its judged KPIs (a trial that could not run is no
/// step's: `trials::udp` stops on it, and [`kept`] marks the step). A
/// trial whose loss was the tester's own on every try (`inconclusive`:
/// its sender stalled or its receiving sockets overflowed) measured the
/// tester, not the path: a KPI it fails (loss, and the rate, delay and
/// variation a stall also spoils) is marked inconclusive instead; one it
/// passes still passes (the path did at least as well).
fn verdict_of(kpis: &mut [Kpi], trial: &SweepTrial) -> Verdict {
    if trial.inconclusive.is_some() {
        for k in kpis.iter_mut().filter(|k| k.verdict == Verdict::Fail) {
            k.verdict = Verdict::Inconclusive;
        }
    }
    Verdict::all(
        kpis.iter()
            .filter(|k| k.threshold.is_some() || k.value.is_some())
            .map(|k| k.verdict),
    )
}

/// The datagram size of the service's frames: a full 1518-byte frame, or
/// the largest the path MTU allows.
pub fn service_len(mtu: Option<u32>, v6: bool) -> u32 {
    let max = mtu.unwrap_or(1500).min(1500);
    max - method::UDP_HEADER - method::ip_header(v6)
}

/// A step as it ran, or, where it could not (its trial failed as a test,
/// the server refused it, Ctrl-C), the step marked NOT RUN with the stop's
/// words as its reason, and the stop. `offered` is Ethernet frame bit/s.
/// A step that did not run measured nothing: its figures are `None` (null
/// in the JSON, "-" in the table), never a rate or loss of 0.
fn kept(
    ran: Result<Y1564Step, Stop>,
    name: &str,
    offered: f64,
    ms: u64,
    len: u32,
) -> (Y1564Step, Option<Stop>) {
    let stop = match ran {
        Ok(s) => return (s, None),
        Err(stop) => stop,
    };
    let why = stop.words();
    let step = Y1564Step {
        name: name.into(),
        offered_bps: offered,
        seconds: ms as f64 / 1e3,
        trial: SweepTrial {
            len,
            error: Some(why.clone()),
            ..SweepTrial::default()
        },
        ir_bps: None,
        flr_percent: None,
        ftd_ns: None,
        rtt_ns: None,
        fdv_ns: None,
        availability_percent: None,
        kpis: Vec::new(),
        verdict: Verdict::NotRun,
        note: Some(why),
        report: None,
        probe: None,
    };
    (step, Some(stop))
}

/// The service performance test (§8.2): the 100 % step for `--duration`,
/// its information rate also judged against the SLA's rate.
fn performance(c: &Ctx<'_>, cir: f64, len: u32) -> Result<Y1564Step, Stop> {
    let mut perf = step(c, Step::Cir(100), cir, c.cfg.perf_ms, len)?;
    perf.name = PERFORMANCE.into();
    perf.kpis.push(Kpi::judge(
        "information rate (SLA)",
        "bit/s",
        perf.ir_bps,
        c.cfg.sla.rate_bps,
        false,
    ));
    perf.verdict = verdict_of(&mut perf.kpis, &perf.trial);
    Ok(perf)
}

const PERFORMANCE: &str = "performance";

/// The method's verdict: every step's, the performance test's too.
fn method_verdict(out: &Y1564) -> Verdict {
    Verdict::all(out.steps.iter().chain(&out.performance).map(|s| s.verdict))
}

/// Runs the steps, then the service performance test (§8.2) at CIR; what
/// ran before a stop is kept in `out`, with the step that stopped it
/// marked NOT RUN ([`kept`]), so the method's verdict is never a PASS.
pub fn run(c: &Ctx<'_>, out: &mut Y1564) -> Result<(), Stop> {
    for (st, rate) in method::y1564_steps(out.cir_bps, out.eir_bps) {
        let ran = step(c, st, rate, c.cfg.step_ms, out.len);
        let (s, stop) = kept(ran, &st.name(), rate, c.cfg.step_ms, out.len);
        out.steps.push(s);
        out.verdict = method_verdict(out);
        if let Some(stop) = stop {
            return Err(stop);
        }
    }
    let ran = performance(c, out.cir_bps, out.len);
    let (perf, stop) = kept(ran, PERFORMANCE, out.cir_bps, c.cfg.perf_ms, out.len);
    out.performance = Some(perf);
    out.verdict = method_verdict(out);
    stop.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 27: a step whose trial lost datagrams by the tester's own
    /// doing on every try (its sender stalled, its receiving sockets
    /// overflowed) is INCONCLUSIVE, not a FAIL: the loss KPI it failed is
    /// the tester's; a KPI it passed still passes. The same loss with no
    /// such evidence fails, and a trial that failed as a test fails.
    #[test]
    fn issue_27_a_step_the_tester_spoilt_is_inconclusive_not_a_fail() {
        let kpis = || {
            vec![
                Kpi::judge("information rate", "bit/s", Some(8e6), Some(7.9e6), false),
                Kpi::judge("frame loss ratio", "%", Some(2.0), Some(0.1), true),
            ]
        };
        let lossy = SweepTrial {
            issued: 1000,
            lost: 20,
            loss_percent: 2.0,
            kept_up: true,
            ..SweepTrial::default()
        };
        let mut k = kpis();
        assert_eq!(verdict_of(&mut k, &lossy), Verdict::Fail);
        let spoilt = SweepTrial {
            inconclusive: Some("the sending host stalled for 30 ms".into()),
            ..lossy.clone()
        };
        let mut k = kpis();
        assert_eq!(verdict_of(&mut k, &spoilt), Verdict::Inconclusive);
        assert_eq!(k[0].verdict, Verdict::Pass);
        assert_eq!(k[1].verdict, Verdict::Inconclusive);
    }

    /// Issue 27: a step that did not run measured nothing: its information
    /// rate, frame loss ratio and delay variation are null in the JSON, not
    /// 0 (a reader took 0 bit/s and 0 % loss for figures the path gave);
    /// the offered rate and duration it was asked for stay. Before, they
    /// were 0.
    #[test]
    fn issue_27_a_step_that_did_not_run_reports_no_measurement() {
        let stop = Stop::Refused("at most 2 s".into());
        let (s, _) = kept(Err(stop), PERFORMANCE, 10e6, 5000, 1472);
        let v = serde_json::to_value(&s).expect("a step serialises");
        for key in ["ir_bps", "flr_percent", "fdv_ns"] {
            assert!(v.get(key).is_some_and(|f| f.is_null()), "{key}: {v}");
        }
        assert!(v["ftd_ns"].is_null() && v["rtt_ns"].is_null(), "{v}");
        assert_eq!(v["offered_bps"], 10e6);
        assert_eq!(v["seconds"], 5.0);
        assert_eq!(v["verdict"], "not_run");
        // And it reads back as not measured.
        let back: Y1564Step = serde_json::from_value(v).expect("reads back");
        assert_eq!(
            (back.ir_bps, back.flr_percent, back.fdv_ns),
            (None, None, None)
        );
        // A stream with no UDP figures measured no delay variation either.
        assert_eq!(jitter_ns(None), None);
    }

    /// Issue 27: a step that could not run (its trial failed as a test,
    /// the server refused it) is NOT RUN, with the stop's words as its
    /// reason, and the method's verdict follows `Verdict::all`: NOT RUN
    /// after steps that passed, still FAIL after one that failed. Before,
    /// the step's errored trial failed it (exit 4), or a refused step was
    /// left out and the steps before it read PASS.
    #[test]
    fn issue_27_a_step_that_could_not_run_is_not_run_not_a_fail() {
        let passed = |name: &str, verdict| Y1564Step {
            verdict,
            ..kept(Err(Stop::Interrupted), name, 1e6, 1000, 1472).0
        };
        let stop = Stop::Failed("a 1472 B trial failed: peer closed the control connection".into());
        let (s, back) = kept(Err(stop.clone()), "50% CIR", 5e6, 2000, 1472);
        assert_eq!(back, Some(stop));
        assert_eq!(s.verdict, Verdict::NotRun);
        assert_eq!(
            (s.name.as_str(), s.offered_bps, s.seconds),
            ("50% CIR", 5e6, 2.0)
        );
        let why = s.note.as_deref().unwrap_or_default();
        assert!(
            why.starts_with("could not run: a 1472 B trial failed: peer closed"),
            "{why}"
        );
        assert_eq!(s.trial.error.as_deref(), Some(why));
        let mut m = Y1564 {
            cir_bps: 10e6,
            eir_bps: 0.0,
            len: 1472,
            steps: vec![passed("25% CIR", Verdict::Pass), s.clone()],
            performance: None,
            verdict: Verdict::NotRun,
        };
        assert_eq!(method_verdict(&m), Verdict::NotRun);
        m.steps[0].verdict = Verdict::Fail;
        assert_eq!(method_verdict(&m), Verdict::Fail);
        // The performance test refused: marked too, and counted.
        let (p, _) = kept(
            Err(Stop::Refused("at most 2 s".into())),
            PERFORMANCE,
            10e6,
            5000,
            1472,
        );
        assert!(p
            .note
            .is_some_and(|n| n == "the server refused it: at most 2 s"));
        m.steps = vec![passed("25% CIR", Verdict::Pass)];
        m.performance = Some(Y1564Step {
            verdict: Verdict::NotRun,
            ..s
        });
        assert_eq!(method_verdict(&m), Verdict::NotRun);
    }
}
