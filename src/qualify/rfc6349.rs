//! RFC 6349 TCP throughput: path MTU (the route's, from the preflight),
//! baseline RTT (§3.2.1: the minimum of UDP request/response probes on the
//! idle path), bottleneck bandwidth (§3.2.2: measured as the receive rate
//! of an unpaced UDP stream of the largest standard datagrams, in
//! Ethernet frame bit/s), the BDP, then a TCP stream each way with socket
//! buffers of at least the BDP, judged by the RFC's metrics (§4): transfer
//! time ratio, TCP efficiency and buffer delay, the latter from the
//! sender's TCP_INFO RTT sampled every interval and, as a second source,
//! from request/response probes beside the transfer (§3.3.3). A direction
//! whose TCP test could not run (refused, failed, Ctrl-C) is listed NOT
//! RUN with the reason and ends the run, as a Y.1564 step does.

use linerate_proto::spec::{Direction, Limit, Pace};
use linerate_report::qualify::{Kpi, Rfc6349, Rfc6349Direction, Verdict};
use linerate_report::Report;

use super::ctx::Ctx;
use super::method;
use super::trials::{self, Stop};

/// Socket buffers below this are not asked for, however small the BDP.
const MIN_WINDOW: u64 = 64 << 10;
/// How far TCP may exceed the ideal rate before the bottleneck estimate is
/// judged to be its sender's limit (the two trials' run-to-run spread).
const OVER_IDEAL: f64 = 0.05;
/// The request size of the baseline probes.
const PROBE_LEN: u32 = 64;

/// The sender's interval records of a one-way stream.
fn sender_intervals(r: &Report) -> &[linerate_report::model::IntervalRecord] {
    match r.test.direction {
        Some(Direction::Reverse) => &r.server_intervals,
        _ => &r.intervals,
    }
}

/// (seconds, RTT ns) of the sender's TCP_INFO per interval.
fn rtt_samples(r: &Report) -> Vec<(f64, f64)> {
    sender_intervals(r)
        .iter()
        .filter_map(|i| {
            let rtt = i.streams.first()?.tcp.as_ref()?.rtt_us;
            (rtt > 0).then(|| (i.end_s, f64::from(rtt) * 1e3))
        })
        .collect()
}

/// The client's socket buffers, when the kernel gave less than asked:
/// read from the note the client adds when a window is asked for.
fn clamped(r: &Report, window: u32) -> Option<String> {
    let note = r
        .notes
        .iter()
        .find(|n| n.starts_with("client socket buffers:"))?;
    let num = |key: &str| -> Option<u64> {
        let rest = &note[note.find(key)? + key.len()..];
        rest.trim_start().split(' ').next()?.parse().ok()
    };
    // The kernel reports twice what it grants (its bookkeeping share).
    let short = [num("SO_SNDBUF"), num("SO_RCVBUF")]
        .into_iter()
        .flatten()
        .any(|got| got < 2 * u64::from(window));
    short.then(|| format!("{note} (asked {window} bytes)"))
}

fn direction(
    c: &Ctx<'_>,
    out: &Rfc6349,
    window: u32,
    reverse: bool,
) -> Result<Rfc6349Direction, Stop> {
    let load = trials::tcp_config(c.t, window, reverse, c.cfg.tcp_ms);
    let (report, probe_rtt, probe_note) = if c.pre.probes_beside_load {
        // The baseline's probes, beside the transfer, at a share of the
        // bottleneck (or the most, when it is not known).
        let mut probe = trials::probe_config(c.t, PROBE_LEN, c.cfg.tcp_ms);
        if let Some(rr) = &mut probe.spec.rr {
            let pace = out
                .bottleneck_bps
                .map_or(Pace::Unlimited, |b| Pace::Rate(b as u64));
            rr.rate = Some(trials::probe_rate(pace, PROBE_LEN, PROBE_LEN));
        }
        let (l, p) = trials::beside_with(&load, &probe, trials::tcp);
        let (rtt, note) = trials::probe_latency(p);
        (l?, rtt, note)
    } else {
        let why = "not measured: the server refused probes beside a test";
        (trials::tcp(&load)?, None, Some(why.to_string()))
    };
    let sum = report.sums.first();
    let sender_tcp = report.streams.first().and_then(|s| s.sender.tcp);
    let mss = sender_tcp.as_ref().map_or(1448, |t| t.snd_mss.max(1));
    let mtu = sender_tcp
        .as_ref()
        .map(|t| t.pmtu)
        .filter(|&m| m > 0)
        .or(out.path_mtu)
        .unwrap_or(1500);
    let throughput = sum.map_or(0.0, |s| s.receiver_bits_per_second);
    let sent = sum.map_or(0, |s| s.sender_bytes);
    let retransmits = sum.and_then(|s| s.retransmits).unwrap_or(0);
    let ideal = out.bottleneck_bps.map(|b| method::max_tcp_bps(b, mss, mtu));
    let samples = rtt_samples(&report);
    let avg_rtt = (!samples.is_empty())
        .then(|| samples.iter().map(|s| s.1).sum::<f64>() / samples.len() as f64);
    let buffer_delay = avg_rtt
        .zip(out.baseline_rtt_ns)
        .and_then(|(a, b)| method::buffer_delay_percent(a, b as f64));
    let probe_buffer_delay = (probe_rtt.as_ref())
        .zip(out.baseline_rtt_ns)
        .and_then(|(p, b)| method::buffer_delay_percent(p.rtt.mean_ns, b as f64));
    let frame_rate = throughput * f64::from(mtu + method::ETHERNET_FRAME_OVERHEAD) / f64::from(mss);
    let kpis = vec![Kpi::judge(
        "TCP throughput",
        "bit/s",
        Some(frame_rate),
        c.cfg.sla.rate_bps,
        false,
    )];
    let verdict = Verdict::all(kpis.iter().map(|k| k.verdict));
    // TCP cannot beat the bottleneck it crosses: when it did (by more than
    // the trials' spread), the UDP estimate measured its own sender, and a
    // ratio from it would read as TCP doing better than ideal.
    let beat = ideal.is_some_and(|i| i > 0.0 && throughput > i * (1.0 + OVER_IDEAL));
    let transfer_time_note = beat.then(|| {
        format!(
            "not given: TCP carried {:.3} Gbit/s, more than the {:.3} Gbit/s the measured bottleneck \
             allows, so that measurement was limited by its UDP sender, not by the path",
            throughput / 1e9,
            ideal.unwrap_or(0.0) / 1e9
        )
    });
    Ok(Rfc6349Direction {
        direction: if reverse { "reverse" } else { "forward" }.into(),
        window_bytes: window,
        window_clamped: clamped(&report, window),
        throughput_bps: Some(throughput),
        ideal_bps: ideal,
        transfer_time_ratio: ideal
            .filter(|_| !beat)
            .and_then(|i| method::transfer_time_ratio(throughput, i)),
        transfer_time_note,
        efficiency_percent: method::tcp_efficiency(sent, retransmits * u64::from(mss)),
        buffer_delay_percent: buffer_delay,
        added_delay_ns: avg_rtt.zip(out.baseline_rtt_ns).map(|(a, b)| a - b as f64),
        avg_rtt_ns: avg_rtt,
        rtt_samples: samples,
        probe_rtt,
        probe_buffer_delay_percent: probe_buffer_delay,
        probe_note,
        retransmits: Some(retransmits),
        sent_bytes: Some(sent),
        kpis,
        verdict,
        note: None,
        report: Some(report),
    })
}

/// A direction as it ran, or, where its TCP test could not run (the
/// server refused it, it failed as a test, Ctrl-C), the direction marked
/// NOT RUN with the stop's words as its reason, and the stop (as
/// Y.1564's steps are). It measured nothing: its figures are `None`.
fn kept(
    ran: Result<Rfc6349Direction, Stop>,
    reverse: bool,
    window: u32,
) -> (Rfc6349Direction, Option<Stop>) {
    let stop = match ran {
        Ok(d) => return (d, None),
        Err(stop) => stop,
    };
    let d = Rfc6349Direction {
        direction: if reverse { "reverse" } else { "forward" }.into(),
        window_bytes: window,
        window_clamped: None,
        throughput_bps: None,
        ideal_bps: None,
        transfer_time_ratio: None,
        transfer_time_note: None,
        efficiency_percent: None,
        buffer_delay_percent: None,
        added_delay_ns: None,
        avg_rtt_ns: None,
        rtt_samples: Vec::new(),
        probe_rtt: None,
        probe_buffer_delay_percent: None,
        probe_note: None,
        retransmits: None,
        sent_bytes: None,
        kpis: Vec::new(),
        verdict: Verdict::NotRun,
        note: Some(stop.words()),
        report: None,
    };
    (d, Some(stop))
}

/// Runs the TCP test each way (`one`: [`direction`]), forward first; a
/// direction that could not run is listed NOT RUN ([`kept`]) and its stop
/// ends the method there, its verdict then no PASS (`Verdict::all`: NOT
/// RUN, or FAIL after a direction that failed).
fn directions(
    out: &mut Rfc6349,
    window: u32,
    mut one: impl FnMut(&Rfc6349, bool) -> Result<Rfc6349Direction, Stop>,
) -> Result<(), Stop> {
    for reverse in [false, true] {
        let (d, stop) = kept(one(out, reverse), reverse, window);
        out.directions.push(d);
        out.verdict = Verdict::all(out.directions.iter().map(|d| d.verdict));
        if let Some(stop) = stop {
            return Err(stop);
        }
    }
    Ok(())
}

/// The words for how the bottleneck was measured.
fn bottleneck_how(len: u32, ms: u64) -> String {
    format!(
        "receive rate of an unpaced UDP stream of {len}-byte datagrams for {:.1} s, as Ethernet frames",
        ms as f64 / 1e3
    )
}

/// Runs the measurements, then the TCP test each way; what ran before a
/// stop is kept in `out`.
pub fn run(c: &Ctx<'_>, out: &mut Rfc6349) -> Result<(), Stop> {
    let base_ms = c.cfg.trial_ms.max(500);
    let probe = trials::probe(&trials::probe_config(c.t, PROBE_LEN, base_ms))?;
    out.baseline_rtt_ns = probe
        .rr
        .as_ref()
        .and_then(|rr| rr.phases.first())
        .map(|p| p.latency.min_ns);
    out.baseline_how = format!(
        "minimum round trip of {PROBE_LEN}-byte UDP request/response probes over {:.1} s on the idle path",
        base_ms as f64 / 1e3
    );
    out.baseline_probe = Some(probe);
    let len = super::y1564::service_len(out.path_mtu, c.v6);
    let bb_ms = c.cfg.trial_ms.max(1000);
    let (bb, _) = trials::flood(&trials::udp_config(
        c.t,
        len,
        Pace::Unlimited,
        Limit::TimeMs(bb_ms),
    ))?;
    out.bottleneck_how = bottleneck_how(len, bb_ms);
    out.bottleneck_bps = (bb.received_bits_per_second > 0.0)
        .then(|| method::frame_bps(bb.received_bits_per_second, len, c.v6));
    out.bottleneck_trial = Some(bb);
    out.bdp_bytes = out
        .bottleneck_bps
        .zip(out.baseline_rtt_ns)
        .map(|(b, r)| method::bdp_bytes(b, r as f64 / 1e9));
    let window = out
        .bdp_bytes
        .unwrap_or(0)
        .max(MIN_WINDOW)
        .min(u64::from(u32::MAX / 4)) as u32;
    let mss = method::mss(out.path_mtu.unwrap_or(1500), c.v6);
    out.bdp_note = out.bdp_bytes.and_then(|b| method::bdp_note(b, mss, window));
    directions(out, window, |out, reverse| {
        direction(c, out, window, reverse)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blank() -> Rfc6349 {
        Rfc6349 {
            path_mtu: Some(1500),
            baseline_rtt_ns: Some(20_000),
            baseline_how: String::new(),
            bottleneck_bps: Some(10e6),
            bottleneck_how: String::new(),
            bdp_bytes: Some(25),
            bdp_note: None,
            directions: Vec::new(),
            verdict: Verdict::NotRun,
            baseline_probe: None,
            bottleneck_trial: None,
        }
    }

    /// A direction that ran, with `verdict` (its figures do not matter here).
    fn ran(reverse: bool, verdict: Verdict) -> Rfc6349Direction {
        Rfc6349Direction {
            throughput_bps: Some(9e6),
            verdict,
            note: None,
            ..kept(Err(Stop::Interrupted), reverse, 65536).0
        }
    }

    /// Issue 27: a direction whose TCP test could not run (the server
    /// refused it, the test failed) is listed NOT RUN with the reason and
    /// no figures, as Y.1564's steps are; its stop ends the method there,
    /// whose verdict follows `Verdict::all` (NOT RUN after a direction
    /// that passed, FAIL after one that failed). Before, the direction was
    /// left out and the method read as the forward direction's PASS.
    #[test]
    fn issue_27_a_direction_that_could_not_run_is_listed_not_run() {
        let refused = Stop::Refused("at most 2 s".into());
        let mut m = blank();
        let mut asked = Vec::new();
        let back = directions(&mut m, 65536, |_, reverse| {
            asked.push(reverse);
            if reverse {
                Err(refused.clone())
            } else {
                Ok(ran(false, Verdict::Pass))
            }
        });
        assert_eq!(back, Err(refused.clone()));
        assert_eq!(asked, [false, true]);
        let names: Vec<_> = m.directions.iter().map(|d| d.direction.as_str()).collect();
        assert_eq!(names, ["forward", "reverse"]);
        let r = &m.directions[1];
        assert_eq!(r.verdict, Verdict::NotRun);
        assert_eq!(
            r.note.as_deref(),
            Some("the server refused it: at most 2 s")
        );
        assert_eq!(
            (r.throughput_bps, r.retransmits, r.sent_bytes),
            (None, None, None)
        );
        assert!(r.report.is_none() && r.kpis.is_empty(), "{r:?}");
        assert_eq!(r.window_bytes, 65536);
        assert_eq!(m.verdict, Verdict::NotRun);
        // In the JSON its measured figures are null, not 0.
        let v = serde_json::to_value(r).expect("serialises");
        assert!(
            v["throughput_bps"].is_null() && v["sent_bytes"].is_null(),
            "{v}"
        );

        // After a direction that failed the SLA, the method still fails.
        let mut m = blank();
        let back = directions(&mut m, 65536, |_, reverse| {
            if reverse {
                Err(refused.clone())
            } else {
                Ok(ran(false, Verdict::Fail))
            }
        });
        assert!(back.is_err());
        assert_eq!(m.verdict, Verdict::Fail);

        // The forward test failed as a test: it is NOT RUN with the error,
        // and the reverse is not tried.
        let mut m = blank();
        let mut calls = 0;
        let failed = Stop::Failed("peer closed the control connection".into());
        let back = directions(&mut m, 65536, |_, _| {
            calls += 1;
            Err(failed.clone())
        });
        assert_eq!(back, Err(failed));
        assert_eq!(calls, 1);
        assert_eq!(m.directions.len(), 1);
        let why = m.directions[0].note.as_deref().unwrap_or_default();
        assert!(why.starts_with("could not run: peer closed"), "{why}");
        assert_eq!(m.verdict, Verdict::NotRun);

        // Both ran: the method's verdict is theirs.
        let mut m = blank();
        let back = directions(&mut m, 65536, |_, r| Ok(ran(r, Verdict::Pass)));
        assert_eq!(back, Ok(()));
        assert_eq!(m.directions.len(), 2);
        assert_eq!(m.verdict, Verdict::Pass);
    }
}
