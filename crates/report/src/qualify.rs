//! `linerate qualify`'s model (the JSON schema of `qualify --json`) and its
//! human summary. Each method keeps the trials it ran in their existing
//! models (a sweep trial per UDP stream, the full [`Report`] of each probe
//! and TCP test) beside the figures the method derives from them and the
//! verdict of each KPI against its SLA threshold.

use std::io::{self, Write};

use linerate_host::doctor::DoctorReport;
use linerate_host::iface::Interface;
use linerate_host::ping::PingReport;
use linerate_stats::histogram::Summary;
use linerate_stats::units::{format_bytes, format_count_rate, format_nanos, format_rate};
use serde::{Deserialize, Serialize};

use crate::model::{SweepTrial, ZeroLoss};
use crate::Report;

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// `schema` of `qualify --json`.
pub const QUALIFY_SCHEMA: u32 = 1;

/// How every bit/s figure of a qualification counts headers.
pub const HEADER_CONVENTION: &str = "bit/s count Ethernet frames as RFC 2544 does: \
UDP payload + 8 (UDP) + 20 (IPv4; 40 IPv6) + 14 (Ethernet header) + 4 (FCS) bytes per \
frame, preamble and inter-frame gap excluded; frames/s are datagrams/s; payload rates \
are marked as such";

/// A KPI's, step's, method's or run's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Pass,
    Fail,
    /// Measured, no threshold given: reported only.
    NotJudged,
    /// Not measured (refused, interrupted, failed): the qualification is
    /// incomplete.
    NotRun,
    /// Measured, but the tester's own stalls (its sender descheduled on a
    /// busy host, or its receiving sockets overflowing) spoilt the trials
    /// that would have decided it: neither the path's pass nor its
    /// failure. Rerun on a less busy tester.
    Inconclusive,
}

impl Verdict {
    /// Fail if any failed, else not run if any did not run, else
    /// inconclusive if any was, else pass.
    pub fn all(vs: impl IntoIterator<Item = Verdict>) -> Verdict {
        let mut out = Verdict::Pass;
        for v in vs {
            match (out, v) {
                (_, Verdict::Fail) => return Verdict::Fail,
                (_, Verdict::NotRun) => out = Verdict::NotRun,
                (Verdict::Pass, Verdict::Inconclusive) => out = Verdict::Inconclusive,
                _ => {}
            }
        }
        out
    }

    pub fn word(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Fail => "FAIL",
            Verdict::NotJudged => "-",
            Verdict::NotRun => "NOT RUN",
            Verdict::Inconclusive => "INCONCLUSIVE",
        }
    }
}

/// The service-level thresholds (absent: reported, not judged).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sla {
    /// Frame loss ratio, percent, at most.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub loss_percent: Option<f64>,
    /// One-way frame transfer delay (mean), ns, at most.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub delay_ns: Option<u64>,
    /// Round-trip delay (mean), ns, at most.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rtt_ns: Option<u64>,
    /// Frame delay variation (RFC 3550 interarrival jitter), ns, at most.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub jitter_ns: Option<u64>,
    /// Information rate, Ethernet frame bit/s, at least.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rate_bps: Option<f64>,
    /// Availability, percent of intervals within the loss threshold, at least.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub availability_percent: Option<f64>,
}

/// One key performance indicator against its threshold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Kpi {
    pub name: String,
    /// `bit/s`, `ns`, `%` or `frames`.
    pub unit: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub value: Option<f64>,
    /// `<=` or `>=`.
    pub op: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub threshold: Option<f64>,
    pub verdict: Verdict,
}

impl Kpi {
    /// Judges `value` against `threshold` (`at_most`: value ≤ threshold).
    pub fn judge(
        name: &str,
        unit: &str,
        value: Option<f64>,
        threshold: Option<f64>,
        at_most: bool,
    ) -> Kpi {
        let verdict = match (value, threshold) {
            (None, _) => Verdict::NotRun,
            (Some(_), None) => Verdict::NotJudged,
            (Some(v), Some(t)) if (at_most && v <= t) || (!at_most && v >= t) => Verdict::Pass,
            (Some(_), Some(_)) => Verdict::Fail,
        };
        Kpi {
            name: name.into(),
            unit: unit.into(),
            value,
            op: if at_most { "<=" } else { ">=" }.into(),
            threshold,
            verdict,
        }
    }
}

/// Ping's summary without its per-reply records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PingSummary {
    pub sent: u64,
    pub received: u64,
    pub loss_percent: f64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rtt: Option<Summary>,
}

impl From<&PingReport> for PingSummary {
    fn from(p: &PingReport) -> Self {
        PingSummary {
            sent: p.sent,
            received: p.received,
            loss_percent: p.loss_percent,
            rtt: p.rtt,
        }
    }
}

/// What was checked before any method ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Preflight {
    pub address: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub ping: Option<PingSummary>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub ping_error: Option<String>,
    /// The local egress interface's status (`linerate iface`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub interface: Option<Interface>,
    /// `linerate doctor`'s findings for UDP on the route to the server.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub doctor: Option<DoctorReport>,
    /// The route's MTU (IP bytes).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub path_mtu: Option<u32>,
    /// One-way delay is measurable (the clock offset is known or bounded).
    pub one_way_delay: bool,
    /// Why not, when not.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub one_way_unavailable: Option<String>,
    /// The server ran a probe beside a load (two tests at once).
    pub probes_beside_load: bool,
    /// The probe test of the preflight.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub probe: Option<Report>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// Latency of probes beside a load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// Round-trip times of the probes, ns.
    pub rtt: Summary,
    /// Client → server one-way delay, ns, where the clock offset allows.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub one_way: Option<Summary>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub one_way_uncertainty_ns: Option<u64>,
    /// The probe test itself.
    pub probe: Report,
}

/// RFC 2544 at one datagram size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rfc2544Size {
    /// UDP payload bytes (linerate's 28-byte header included).
    pub len: u32,
    /// The Ethernet frame that carries it.
    pub frame_len: u32,
    /// The unpaced trial whose received rate is the search's ceiling.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub capacity: Option<SweepTrial>,
    /// §26.1: the highest rate with no loss (payload bit/s, as `sweep`).
    pub throughput: ZeroLoss,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub throughput_frame_bps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub throughput_fps: Option<f64>,
    /// The search's trials (sweep trials).
    pub search: Vec<SweepTrial>,
    /// The search stopped at its best confirmed rate, short of its
    /// resolution, when this size's share of the method's time was spent.
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub search_cut: bool,
    /// Search trials the tester's own stalls spoilt past their reruns:
    /// neither a pass nor a loss, so they did not move the search.
    #[serde(skip_serializing_if = "is_zero", default)]
    pub inconclusive_trials: u32,
    /// Why the size's verdict is what it is when the throughput alone
    /// decided it (no zero-loss rate, only the search's floor, or a search
    /// the inconclusive trials ended), or why it is NOT RUN (the stop that
    /// ended it: a trial that could not run, a refusal).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub verdict_note: Option<String>,
    /// §26.2: latency of probes beside a stream at the throughput rate.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub latency: Option<Latency>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub latency_note: Option<String>,
    /// §26.3: loss at 100 %, 90 % … 10 % of the ceiling.
    pub loss_vs_load: Vec<SweepTrial>,
    /// §26.4: the longest burst (frames, unpaced) that arrived whole.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub back_to_back: Option<u64>,
    /// How the back-to-back search ended when trials the tester's own
    /// stalls or drops spoilt were in it (inconclusive: not loss).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub back_to_back_note: Option<String>,
    pub back_to_back_trials: Vec<SweepTrial>,
    pub kpis: Vec<Kpi>,
    pub verdict: Verdict,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rfc2544 {
    pub trial_s: f64,
    /// How the throughput search ran, in words.
    pub search: String,
    pub sizes: Vec<Rfc2544Size>,
    pub verdict: Verdict,
}

/// One Y.1564 step (or the service performance test).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Y1564Step {
    pub name: String,
    /// Offered, Ethernet frame bit/s.
    pub offered_bps: f64,
    pub seconds: f64,
    pub trial: SweepTrial,
    /// Information rate received, Ethernet frame bit/s; this and the other
    /// measured figures are null in a step that did not run (NOT RUN): it
    /// measured nothing, not a rate or loss of 0.
    pub ir_bps: Option<f64>,
    pub flr_percent: Option<f64>,
    /// Mean frame transfer delay, ns: one-way where measurable.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub ftd_ns: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rtt_ns: Option<f64>,
    /// Frame delay variation: RFC 3550 interarrival jitter, ns.
    pub fdv_ns: Option<f64>,
    /// Percent of the receiver's intervals within the loss threshold.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub availability_percent: Option<f64>,
    pub kpis: Vec<Kpi>,
    /// NOT RUN where its trial could not run (failed as a test, refused,
    /// interrupted): `note` says why, `trial.error` too.
    pub verdict: Verdict,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub note: Option<String>,
    /// The stream test and the probe beside it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub report: Option<Report>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub probe: Option<Report>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Y1564 {
    pub cir_bps: f64,
    pub eir_bps: f64,
    /// Datagram size of the service's frames (UDP payload bytes).
    pub len: u32,
    pub steps: Vec<Y1564Step>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub performance: Option<Y1564Step>,
    pub verdict: Verdict,
}

/// RFC 6349's TCP test in one direction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rfc6349Direction {
    /// `forward` (client sends) or `reverse`.
    pub direction: String,
    pub window_bytes: u32,
    /// The socket buffers the kernel gave, when smaller than asked.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub window_clamped: Option<String>,
    /// Payload bit/s the receiver got; this and the other measured
    /// figures are null in a direction that did not run (NOT RUN).
    pub throughput_bps: Option<f64>,
    /// §3.3.1: the most TCP could carry over the bottleneck (payload);
    /// null without a measured bottleneck, or where it did not run.
    pub ideal_bps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub transfer_time_ratio: Option<f64>,
    /// Why there is no transfer time ratio, when TCP ran faster than the
    /// measured bottleneck allows (the estimate was the UDP sender's
    /// limit, not the path's).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub transfer_time_note: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub efficiency_percent: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub buffer_delay_percent: Option<f64>,
    /// The same as an absolute figure: the mean RTT during the transfer
    /// less the baseline, ns (a µs baseline makes the percentage huge).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub added_delay_ns: Option<f64>,
    /// Mean of the sender's TCP_INFO smoothed RTT over the intervals, ns.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub avg_rtt_ns: Option<f64>,
    /// (seconds into the test, TCP_INFO RTT ns) per interval.
    pub rtt_samples: Vec<(f64, f64)>,
    /// §3.3.3's other RTT source: request/response probes beside the
    /// transfer (the baseline's size, paced to a share of the bottleneck),
    /// when the server allows them.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub probe_rtt: Option<Latency>,
    /// Buffer delay from the probes' mean RTT against the baseline (which
    /// the same probes measured on the idle path).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub probe_buffer_delay_percent: Option<f64>,
    /// The probes' rate, or why there are no probe figures.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub probe_note: Option<String>,
    pub retransmits: Option<u64>,
    pub sent_bytes: Option<u64>,
    pub kpis: Vec<Kpi>,
    /// NOT RUN where its TCP test could not run (refused, failed,
    /// interrupted): `note` says why.
    pub verdict: Verdict,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub note: Option<String>,
    /// The TCP test (absent: it did not run).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub report: Option<Report>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rfc6349 {
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub path_mtu: Option<u32>,
    /// Minimum RTT of idle probes, ns.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub baseline_rtt_ns: Option<u64>,
    pub baseline_how: String,
    /// Ethernet frame bit/s.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub bottleneck_bps: Option<f64>,
    pub bottleneck_how: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub bdp_bytes: Option<u64>,
    /// What the BDP means for the window, when it is below one MSS.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub bdp_note: Option<String>,
    pub directions: Vec<Rfc6349Direction>,
    pub verdict: Verdict,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub baseline_probe: Option<Report>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub bottleneck_trial: Option<SweepTrial>,
}

/// The whole qualification with one engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QualifyRun {
    pub engine: String,
    pub preflight: Preflight,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rfc2544: Option<Rfc2544>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub y1564: Option<Y1564>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rfc6349: Option<Rfc6349>,
    /// Methods asked for that did not run, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The step that ended the run early (a refusal, an error), if any.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub stopped: Option<String>,
    pub verdict: Verdict,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QualifyReport {
    pub schema: u32,
    pub server: String,
    pub start_unix_ms: u64,
    pub client_software: String,
    pub quick: bool,
    pub methods: Vec<String>,
    pub sla: Sla,
    pub header_convention: String,
    pub runs: Vec<QualifyRun>,
    pub verdict: Verdict,
    /// Ctrl-C ended it: what ran is reported.
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub interrupted: bool,
    pub exit_code: u8,
}

/// A KPI's value or threshold in its unit.
fn kpi_value(unit: &str, v: f64) -> String {
    match unit {
        "bit/s" => format_rate(v),
        "ns" => format_nanos(v),
        "%" => format!("{v:.3}%"),
        _ => format!("{v:.0} {unit}"),
    }
}

fn kpi_line(k: &Kpi) -> String {
    let v = k
        .value
        .map_or("not measured".into(), |v| kpi_value(&k.unit, v));
    match k.threshold {
        Some(t) => format!(
            "{} {v} (SLA {} {}) {}",
            k.name,
            k.op,
            kpi_value(&k.unit, t),
            k.verdict.word()
        ),
        None => format!("{} {v}", k.name),
    }
}

/// §26.3's steps in words: each load as a share of the first (the
/// ceiling) and its loss; a step whose loss was the tester's own on every
/// try is inconclusive, not the path's loss. The steps end at two losing
/// nothing, so there may be few.
fn loss_steps_words(steps: &[SweepTrial]) -> String {
    let top = steps
        .first()
        .map_or(1.0, |t| t.requested_bits_per_second.max(1.0));
    let words: Vec<String> = steps
        .iter()
        .map(|t| {
            let load = 100.0 * t.requested_bits_per_second / top;
            match t.inconclusive {
                Some(_) => format!("{load:.0}% load inconclusive (the tester's own stall or drop)"),
                None => format!("{load:.0}% load {:.2}%", t.loss_percent),
            }
        })
        .collect();
    words.join(", ")
}

fn rfc2544_human(m: &Rfc2544, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "RFC 2544 (UDP; trials of {:.1} s; {})",
        m.trial_s, m.search
    )?;
    writeln!(
        out,
        "  {:>5} {:>5}  {:>15} {:>12}  {:>11} {:>11} {:>11}  {:>9}  verdict",
        "len", "frame", "throughput", "frames/s", "rtt p50", "rtt p99", "one-way", "b2b"
    )?;
    for s in &m.sizes {
        let lat = s.latency.as_ref();
        let ns = |v: Option<u64>| v.map_or("-".into(), |v| format_nanos(v as f64));
        writeln!(
            out,
            "  {:>5} {:>5}  {:>15} {:>12}  {:>11} {:>11} {:>11}  {:>9}  {}",
            s.len,
            s.frame_len,
            s.throughput_frame_bps.map_or("none".into(), format_rate),
            s.throughput_fps
                .map_or("-".into(), |f| format!("{}/s", format_count_rate(f))),
            ns(lat.map(|l| l.rtt.p50_ns)),
            ns(lat.map(|l| l.rtt.p99_ns)),
            ns(lat.and_then(|l| l.one_way.as_ref()).map(|o| o.p50_ns)),
            s.back_to_back.map_or("-".into(), |b| b.to_string()),
            s.verdict.word()
        )?;
        for k in s.kpis.iter().filter(|k| k.threshold.is_some()) {
            writeln!(out, "        {}", kpi_line(k))?;
        }
        if let Some(n) = &s.verdict_note {
            writeln!(out, "        verdict: {n}")?;
        }
        if s.search_cut {
            writeln!(
                out,
                "        throughput: the search stopped at its best confirmed rate when this \
                 size's share of the time was spent (short of its resolution)"
            )?;
        }
        if let Some(n) = &s.latency_note {
            writeln!(out, "        latency: {n}")?;
        }
        if !s.loss_vs_load.is_empty() {
            writeln!(out, "        loss: {}", loss_steps_words(&s.loss_vs_load))?;
        }
        if let Some(n) = &s.back_to_back_note {
            writeln!(out, "        back-to-back: {n}")?;
        }
    }
    writeln!(out, "  verdict: {}", m.verdict.word())
}

fn y1564_human(m: &Y1564, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "Y.1564 (CIR {}, EIR {}, {} B datagrams)",
        format_rate(m.cir_bps),
        format_rate(m.eir_bps),
        m.len
    )?;
    writeln!(
        out,
        "  {:<12} {:>15} {:>15} {:>9} {:>11} {:>11} {:>9}  verdict",
        "step", "offered", "IR", "FLR", "FTD", "FDV", "avail"
    )?;
    for s in m.steps.iter().chain(&m.performance) {
        // A step that did not run measured nothing: "-", never a 0.
        writeln!(
            out,
            "  {:<12} {:>15} {:>15} {:>9} {:>11} {:>11} {:>9}  {}",
            s.name,
            format_rate(s.offered_bps),
            s.ir_bps.map_or("-".into(), format_rate),
            s.flr_percent.map_or("-".into(), |f| format!("{f:.3}%")),
            s.ftd_ns.or(s.rtt_ns).map_or("-".into(), format_nanos),
            s.fdv_ns.map_or("-".into(), format_nanos),
            s.availability_percent
                .map_or("-".into(), |a| format!("{a:.1}%")),
            s.verdict.word()
        )?;
        let unmet = |k: &&Kpi| matches!(k.verdict, Verdict::Fail | Verdict::Inconclusive);
        for k in s.kpis.iter().filter(unmet) {
            writeln!(out, "        {}", kpi_line(k))?;
        }
        if let Some(n) = &s.note {
            writeln!(out, "        {n}")?;
        }
    }
    writeln!(out, "  verdict: {}", m.verdict.word())
}

/// RFC 6349's buffer delay: the RFC's percentage beside the delay it
/// stands for ("+15.1 ms over a 11.7 µs baseline"), which stays readable
/// when a µs baseline makes the percentage run to thousands.
fn buffer_delay_words(
    percent: Option<f64>,
    added_ns: Option<f64>,
    baseline_ns: Option<u64>,
) -> String {
    let Some(p) = percent else {
        return "-".into();
    };
    match added_ns.zip(baseline_ns) {
        Some((a, b)) => format!(
            "{p:.1}% ({}{} over a {} baseline)",
            if a < 0.0 { "-" } else { "+" },
            format_nanos(a.abs()),
            format_nanos(b as f64)
        ),
        None => format!("{p:.1}%"),
    }
}

fn rfc6349_human(m: &Rfc6349, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "RFC 6349 (TCP)")?;
    writeln!(
        out,
        "  path MTU {}, baseline RTT {} ({}), bottleneck {} ({}), BDP {}",
        m.path_mtu.map_or("?".into(), |m| m.to_string()),
        m.baseline_rtt_ns
            .map_or("-".into(), |r| format_nanos(r as f64)),
        m.baseline_how,
        m.bottleneck_bps.map_or("-".into(), format_rate),
        m.bottleneck_how,
        m.bdp_bytes.map_or("-".into(), format_bytes)
    )?;
    if let Some(n) = &m.bdp_note {
        writeln!(out, "  BDP: {n}")?;
    }
    for d in &m.directions {
        if d.report.is_none() {
            // Its TCP test did not run: the reason, no figures.
            writeln!(
                out,
                "  {:<8} window {}: {}  {}",
                d.direction,
                format_bytes(u64::from(d.window_bytes)),
                d.note.as_deref().unwrap_or("not run"),
                d.verdict.word()
            )?;
            continue;
        }
        writeln!(
            out,
            "  {:<8} window {}: {} of ideal {}; transfer time ratio {}, TCP efficiency {}, buffer delay {}  {}",
            d.direction,
            format_bytes(u64::from(d.window_bytes)),
            d.throughput_bps.map_or("-".into(), format_rate),
            d.ideal_bps.map_or("-".into(), format_rate),
            d.transfer_time_ratio.map_or("-".into(), |r| format!("{r:.2}")),
            d.efficiency_percent.map_or("-".into(), |e| format!("{e:.2}%")),
            buffer_delay_words(d.buffer_delay_percent, d.added_delay_ns, m.baseline_rtt_ns),
            d.verdict.word()
        )?;
        if let Some(p) = &d.probe_rtt {
            writeln!(
                out,
                "        probes beside it: RTT mean {}, p99 {}; buffer delay {}",
                format_nanos(p.rtt.mean_ns),
                format_nanos(p.rtt.p99_ns as f64),
                d.probe_buffer_delay_percent
                    .map_or("-".into(), |b| format!("{b:.1}%")),
            )?;
        }
        if let Some(n) = &d.probe_note {
            writeln!(out, "        probes: {n}")?;
        }
        if let Some(n) = &d.transfer_time_note {
            writeln!(out, "        transfer time ratio: {n}")?;
        }
        if let Some(c) = &d.window_clamped {
            writeln!(out, "        window clamped: {c}")?;
        }
        for k in d.kpis.iter().filter(|k| k.threshold.is_some()) {
            writeln!(out, "        {}", kpi_line(k))?;
        }
    }
    writeln!(out, "  verdict: {}", m.verdict.word())
}

fn preflight_human(p: &Preflight, out: &mut dyn Write) -> io::Result<()> {
    let ping = match (&p.ping, &p.ping_error) {
        (Some(s), _) => format!(
            "ping {}/{} answered{}",
            s.received,
            s.sent,
            s.rtt.as_ref().map_or(String::new(), |r| format!(
                ", rtt min {}",
                format_nanos(r.min_ns as f64)
            ))
        ),
        (None, Some(e)) => format!("ping: {e}"),
        (None, None) => "ping: not run".into(),
    };
    let iface = p.interface.as_ref().map_or("egress unknown".into(), |i| {
        format!(
            "egress {} ({}{})",
            i.name,
            i.state,
            i.speed_mbps
                .map_or(String::new(), |s| format!(", {s} Mbit/s"))
        )
    });
    writeln!(
        out,
        "Preflight: {} {ping}; {iface}; path MTU {}; one-way delay {}; doctor: {} warning(s)",
        p.address,
        p.path_mtu.map_or("?".into(), |m| m.to_string()),
        if p.one_way_delay {
            "measurable".to_string()
        } else {
            format!(
                "not measurable ({})",
                p.one_way_unavailable.as_deref().unwrap_or("?")
            )
        },
        p.doctor.as_ref().map_or(0, DoctorReport::warnings)
    )?;
    for n in &p.notes {
        writeln!(out, "  {n}")?;
    }
    Ok(())
}

/// `qualify`'s summary; its JSON is the report itself (no CSV: a verdict
/// per method with its KPIs does not fit one table).
impl crate::render::Document for QualifyReport {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        human(self, out)
    }
}

/// The human summary.
fn human(r: &QualifyReport, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "Qualification of {} ({})",
        r.server,
        r.methods.join(", ")
    )?;
    writeln!(out, "{}", r.header_convention)?;
    for run in &r.runs {
        writeln!(out)?;
        writeln!(out, "== engine {} ==", run.engine)?;
        preflight_human(&run.preflight, out)?;
        if let Some(m) = &run.rfc2544 {
            rfc2544_human(m, out)?;
        }
        if let Some(m) = &run.y1564 {
            y1564_human(m, out)?;
        }
        if let Some(m) = &run.rfc6349 {
            rfc6349_human(m, out)?;
        }
        for s in &run.skipped {
            writeln!(out, "skipped: {s}")?;
        }
        for n in &run.notes {
            writeln!(out, "note: {n}")?;
        }
        if let Some(s) = &run.stopped {
            writeln!(out, "stopped: {s}")?;
        }
        writeln!(out, "engine {}: {}", run.engine, run.verdict.word())?;
    }
    writeln!(out)?;
    if r.interrupted {
        writeln!(
            out,
            "interrupted by the user: the figures above cover what ran"
        )?;
    }
    writeln!(
        out,
        "Overall: {} (exit status {})",
        r.verdict.word(),
        r.exit_code
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue_27_buffer_delay_shows_the_absolute_delay_beside_the_percentage() {
        // The shaped-router run: an 11.7 µs loopback baseline, 15.1 ms of
        // tbf queue during the transfer.
        let w = buffer_delay_words(Some(129_000.3), Some(15.1e6), Some(11_700));
        assert!(w.starts_with("129000.3%"), "{w}");
        assert!(w.contains("+15.1") && w.contains("ms over a 11.7"), "{w}");
        assert!(w.contains("baseline"), "{w}");
        assert_eq!(buffer_delay_words(None, None, Some(11_700)), "-");
        assert_eq!(buffer_delay_words(Some(3.0), None, None), "3.0%");
    }

    /// Issue 27: a loss-vs-load step whose loss was the tester's own on
    /// every try is said to be inconclusive, not printed as the path's
    /// loss; the others keep their figures.
    #[test]
    fn issue_27_a_loss_step_the_tester_spoilt_is_not_reported_as_loss() {
        let step = |rate: f64, loss: f64, spoilt: bool| SweepTrial {
            requested_bits_per_second: rate,
            loss_percent: loss,
            inconclusive: spoilt.then(|| "the sending host stalled for 31 ms".into()),
            ..SweepTrial::default()
        };
        let w = loss_steps_words(&[
            step(10e6, 4.0, false),
            step(9e6, 12.5, true),
            step(8e6, 0.0, false),
        ]);
        assert_eq!(
            w,
            "100% load 4.00%, 90% load inconclusive (the tester's own stall or drop), 80% load 0.00%"
        );
    }

    /// Issue 27: the Y.1564 table prints "-" for what a step that did not
    /// run did not measure, never 0 bit/s or 0 % loss; a step that ran
    /// keeps its figures.
    #[test]
    fn issue_27_a_step_that_did_not_run_prints_no_figures() {
        let step = |name: &str, ran: bool| Y1564Step {
            name: name.into(),
            offered_bps: 10e6,
            seconds: 2.0,
            trial: SweepTrial {
                error: (!ran).then(|| "the server refused it: at most 2 s".into()),
                ..SweepTrial::default()
            },
            ir_bps: ran.then_some(9.9e6),
            flr_percent: ran.then_some(0.25),
            ftd_ns: None,
            rtt_ns: None,
            fdv_ns: ran.then_some(12_000.0),
            availability_percent: None,
            kpis: Vec::new(),
            verdict: if ran { Verdict::Pass } else { Verdict::NotRun },
            note: (!ran).then(|| "the server refused it: at most 2 s".into()),
            report: None,
            probe: None,
        };
        let m = Y1564 {
            cir_bps: 10e6,
            eir_bps: 0.0,
            len: 1472,
            steps: vec![step("25% CIR", true)],
            performance: Some(step("performance", false)),
            verdict: Verdict::NotRun,
        };
        let mut out = Vec::new();
        y1564_human(&m, &mut out).expect("writes");
        let text = String::from_utf8(out).expect("utf-8");
        let row = |name: &str| {
            let line = text.lines().find(|l| l.trim_start().starts_with(name));
            line.unwrap_or_else(|| panic!("no {name} row in {text}"))
                .split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        let perf = row("performance");
        assert!(perf.ends_with(&["NOT".into(), "RUN".into()]), "{perf:?}");
        assert!(!perf.iter().any(|c| c.starts_with('0')), "{perf:?}");
        assert_eq!(perf.iter().filter(|c| *c == "-").count(), 5, "{perf:?}");
        let ran = row("25%");
        assert!(ran.contains(&"0.250%".to_string()), "{ran:?}");
    }

    #[test]
    fn issue_27_inconclusive_ranks_below_fail_and_not_run() {
        use Verdict::*;
        assert_eq!(Verdict::all([Pass, Inconclusive, NotJudged]), Inconclusive);
        assert_eq!(Verdict::all([Inconclusive, Fail]), Fail);
        assert_eq!(Verdict::all([Inconclusive, NotRun, Pass]), NotRun);
        assert_eq!(Verdict::all([NotRun, Inconclusive]), NotRun);
        assert_eq!(Inconclusive.word(), "INCONCLUSIVE");
    }

    #[test]
    fn issue_27_verdicts_combine_fail_first_then_not_run() {
        use Verdict::*;
        assert_eq!(Verdict::all([Pass, NotJudged, Pass]), Pass);
        assert_eq!(Verdict::all([Pass, NotRun, Fail]), Fail);
        assert_eq!(Verdict::all([Pass, NotRun]), NotRun);
        assert_eq!(Verdict::all([]), Pass);
        let k = Kpi::judge("loss", "%", Some(0.2), Some(0.1), true);
        assert_eq!(k.verdict, Fail);
        assert_eq!(
            Kpi::judge("ir", "bit/s", Some(9e6), Some(8e6), false).verdict,
            Pass
        );
        assert_eq!(Kpi::judge("x", "%", None, Some(1.0), true).verdict, NotRun);
        assert_eq!(
            Kpi::judge("x", "%", Some(1.0), None, true).verdict,
            NotJudged
        );
    }
}
