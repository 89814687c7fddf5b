//! `linerate compare`: the same test once per variant (engine, busy
//! polling, threading model), reduced to the figures a user compares, each with its ratio to
//! the first variant; and its renderers (a table, JSON, CSV).
//!
//! Every figure is taken from that variant's own [`Report`]s; a figure the
//! test kind does not have (datagrams/s of a TCP test) is absent, never
//! zero, and so is its ratio. With `--repeat N` each figure is the mean of
//! the variant's runs, with its spread ([`TrialStats`], as `--repeat`
//! reports elsewhere), and ratios are of means.

use std::io::{self, Write};

use linerate_stats::trials::TrialStats;
use linerate_stats::units::{format_count_rate, format_nanos, format_rate};
use serde::{Deserialize, Serialize};

use crate::model::Report;
use crate::render::Document;

/// Bumped on incompatible changes to [`CompareReport`].
pub const COMPARE_SCHEMA: u32 = 1;

/// The result of `linerate compare`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareReport {
    pub schema: u32,
    /// The test run for every variant: `tcp`, `udp`, `rr` or `crr`.
    pub test: String,
    /// The server as the first completed run connected to it (`host:port`;
    /// absent when nothing ran).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub server: Option<String>,
    /// Unix time the comparison started, milliseconds.
    #[serde(default)]
    pub start_unix_ms: u64,
    /// The test's flags, as given (the same for every variant).
    pub args: Vec<String>,
    /// `--threading`: the flows every threading model ran (absent
    /// without it).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub flows: Option<u32>,
    /// Runs per variant (`--repeat N`; 1 without it). Runs are interleaved:
    /// every variant's first run, then every variant's second, …
    #[serde(default = "one")]
    pub repeat: u32,
    /// The user stopped the comparison (Ctrl-C): the variants and runs
    /// after that point did not run.
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub interrupted: bool,
    /// In the order asked for; ratios are to the first.
    pub variants: Vec<CompareVariant>,
}

/// One variant's run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareVariant {
    /// `ENGINE` or `ENGINE+busy-poll`; with `--threading`, `MODEL` (or
    /// `ENGINE/MODEL` with `--engines` too), e.g. `loop:2`.
    pub name: String,
    /// The engine asked for (`auto` included).
    pub engine: String,
    /// The engines that ran, from the report (`auto` resolved).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub client_engine: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub server_engine: Option<String>,
    /// `auto`: what it chose, its order, and every engine it skipped with
    /// the reason (the note of the variant's report).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub engine_note: Option<String>,
    pub busy_poll: bool,
    /// How its sides waited for data, from its last report ([`waits`]):
    /// `client spin, server sleep` (rr), `sender sleep, receiver spin`
    /// (streams). `xdp` spins where the others block unless
    /// `--busy-poll`, so the table warns when variants differ here.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub waits: Option<String>,
    /// `--threading`: the model this variant ran its flows under:
    /// `per-flow` (a thread per flow per side, `-P N`) or `loop:T` (T
    /// event-loop threads per side, `--flows N --threads T`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub threading: Option<String>,
    /// `--preload LIB`: the library this variant's client ran under
    /// (`LD_PRELOAD`, in a process of its own).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub preload: Option<String>,
    /// Each side's `LD_PRELOAD` as its report recorded it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub client_ld_preload: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub server_ld_preload: Option<String>,
    /// Runs that completed (their figures are summarised).
    #[serde(default)]
    pub runs: u32,
    /// `run K: error` for each run that failed while others completed.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub failed: Vec<String>,
    /// Why the variant did not run or every run failed (then `metrics` is
    /// empty).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error: Option<String>,
    /// The figures, in [`METRICS`] order, those the test has.
    pub metrics: Vec<Metric>,
}

/// One figure of one variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metric {
    /// A name from [`METRICS`].
    pub name: String,
    pub value: f64,
    /// `value` ÷ the first variant's value of the same figure (absent when
    /// the first variant has none, or it is zero).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub ratio: Option<f64>,
    /// With `--repeat N` (N > 1): the figure over the runs (`value` is its
    /// mean): sd, min, max, 95% confidence interval of the mean.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub stats: Option<TrialStats>,
}

fn one() -> u32 {
    1
}

/// The figure `--plot` draws for a test kind: what a user of that test
/// compares first.
pub fn headline(test: &str) -> &'static str {
    match test {
        "rr" | "crr" => "transactions_per_second",
        "udp" => "received_datagrams_per_second",
        _ => "receiver_bits_per_second",
    }
}

/// The unit of a metric from [`METRICS`].
pub fn unit_of(name: &str) -> &'static str {
    METRICS
        .iter()
        .find(|(n, _)| *n == name)
        .map_or("", |(_, u)| u)
}

/// The figures of one variant over its completed runs: each the mean of
/// the runs that have it, with [`TrialStats`] when there was more than one
/// run.
pub fn summarise(runs: &[Report]) -> Vec<Metric> {
    let per_run: Vec<Vec<Metric>> = runs.iter().map(metrics_of).collect();
    let mut out = Vec::new();
    for (name, _) in METRICS {
        let values: Vec<f64> = per_run
            .iter()
            .filter_map(|ms| ms.iter().find(|m| m.name == *name).map(|m| m.value))
            .collect();
        let Some(stats) = TrialStats::of(&values) else {
            continue;
        };
        out.push(Metric {
            name: (*name).into(),
            value: stats.mean,
            ratio: None,
            stats: (runs.len() > 1).then_some(stats),
        });
    }
    out
}

/// Every figure `compare` reports, with its unit, in table order.
pub const METRICS: &[(&str, &str)] = &[
    ("receiver_bits_per_second", "bit/s"),
    ("received_datagrams_per_second", "datagrams/s"),
    ("loss_percent", "%"),
    ("transactions_per_second", "1/s"),
    ("latency_p50_ns", "ns"),
    ("latency_p99_ns", "ns"),
    ("latency_p99_9_ns", "ns"),
    ("client_cpu_percent", "% of a CPU"),
    ("server_cpu_percent", "% of a CPU"),
    ("client_busiest_thread_percent", "% of a core"),
    ("server_busiest_thread_percent", "% of a core"),
    ("client_service_demand_us_per_kib", "µs/KiB"),
    ("server_service_demand_us_per_kib", "µs/KiB"),
    ("client_cpu_us_per_transaction", "µs"),
    ("server_cpu_us_per_transaction", "µs"),
    ("jain_index", "1 = even"),
];

/// The figures of one report (see [`METRICS`]). Request/response tests
/// contribute their first phase (the first size, unloaded).
pub fn metrics_of(r: &Report) -> Vec<Metric> {
    let mut v: Vec<(&str, f64)> = Vec::new();
    if r.rr.is_none() {
        v.push((
            "receiver_bits_per_second",
            r.sums.iter().map(|s| s.receiver_bits_per_second).sum(),
        ));
        let udp: Vec<_> = r.sums.iter().filter_map(|s| s.udp.as_ref()).collect();
        if !udp.is_empty() {
            v.push((
                "received_datagrams_per_second",
                udp.iter().map(|u| u.received_pps).sum(),
            ));
            let issued: u64 = udp.iter().map(|u| u.issued).sum();
            let lost: u64 = udp.iter().map(|u| u.lost).sum();
            if issued > 0 {
                v.push(("loss_percent", lost as f64 * 100.0 / issued as f64));
            }
        }
    }
    if let Some(p) = r.rr.as_ref().and_then(|rr| rr.phases.first()) {
        v.push(("transactions_per_second", p.transactions_per_second));
        v.push(("latency_p50_ns", p.latency.p50_ns as f64));
        v.push(("latency_p99_ns", p.latency.p99_ns as f64));
        v.push(("latency_p99_9_ns", p.latency.p99_9_ns as f64));
    }
    v.push(("client_cpu_percent", r.cpu.client.percent_of_cpu));
    v.push(("server_cpu_percent", r.cpu.server.percent_of_cpu));
    if let Some(b) = r.cpu.client.busiest_thread_percent {
        v.push(("client_busiest_thread_percent", b));
    }
    if let Some(b) = r.cpu.server.busiest_thread_percent {
        v.push(("server_busiest_thread_percent", b));
    }
    if let Some(d) = r.cpu.client.service_demand_us_per_kib {
        v.push(("client_service_demand_us_per_kib", d));
    }
    if let Some(d) = r.cpu.server.service_demand_us_per_kib {
        v.push(("server_service_demand_us_per_kib", d));
    }
    if let Some(rr) = &r.rr {
        for (name, d) in [
            (
                "client_cpu_us_per_transaction",
                rr.client_cpu_us_per_transaction,
            ),
            (
                "server_cpu_us_per_transaction",
                rr.server_cpu_us_per_transaction,
            ),
        ] {
            v.extend(d.map(|d| (name, d)));
        }
    }
    v.extend(jain_index(r).map(|j| ("jain_index", j)));
    v.into_iter()
        .map(|(name, value)| Metric {
            name: name.into(),
            value,
            ratio: None,
            stats: None,
        })
        .collect()
}

/// How evenly the test's flows shared the path, where it had more than
/// one: Jain's index of the flows' received rates (the least even
/// direction), or of their transactions/s (rr and crr, thread-per-flow
/// or on event loops, from the phase's per-flow counts). Thread-per-flow
/// streams get the same index from their per-stream figures as
/// event-loop flows get in their sums.
fn jain_index(r: &Report) -> Option<f64> {
    if let Some(rr) = &r.rr {
        return rr
            .phases
            .first()
            .and_then(|p| p.per_flow.as_ref())
            .filter(|f| f.transactions.len() > 1)
            .map(|f| f.jain_index);
    }
    r.sums
        .iter()
        .filter_map(|sum| match &sum.fairness {
            Some(f) => Some(f.clone()),
            None => {
                let of: Vec<_> = r.streams.iter().filter(|s| s.flow == sum.flow).collect();
                crate::build::fairness(&of)
            }
        })
        .filter(|f| f.flows > 1)
        .map(|f| f.jain_index)
        .reduce(f64::min)
}

/// How a report's sides waited for data: `spin` (polling: `--busy-poll`,
/// or an engine that spins by default, `xdp`) or `sleep` (blocking
/// calls, `poll(2)`); rr by side (`client …, server …`), streams by role
/// (`sender …, receiver …`, spin where any stream's end spun).
pub fn waits(r: &Report) -> String {
    let how = |spun: bool| if spun { "spin" } else { "sleep" };
    match &r.rr {
        Some(rr) => format!(
            "client {}, server {}",
            how(rr.spin_client.is_some()),
            how(rr.spin_server.is_some())
        ),
        None => format!(
            "sender {}, receiver {}",
            how(r.streams.iter().any(|s| s.sender.busy_poll.is_some())),
            how(r.streams.iter().any(|s| s.receiver.busy_poll.is_some()))
        ),
    }
}

/// The caution a table carries when its variants did not wait alike
/// (issue 25): a spinning side's lower latency or higher rate is partly
/// the spin's, not its path's (`xdp` spins where kernel engines block
/// unless `--busy-poll`).
pub fn wait_caution(variants: &[CompareVariant]) -> Option<String> {
    let ran: Vec<(&str, &str)> = variants
        .iter()
        .filter_map(|v| Some((v.name.as_str(), v.waits.as_deref()?)))
        .collect();
    let first = ran.first()?.1;
    if ran.iter().all(|(_, w)| *w == first) {
        return None;
    }
    let each: Vec<String> = ran.iter().map(|(n, w)| format!("{n} {w}")).collect();
    Some(format!(
        "caution: the variants did not wait alike ({}): a spinning side's advantage is \
         partly the spin's, not its path's; --busy-poll makes every variant spin \
         (xdp spins by default; --xdp-sleep makes it sleep)",
        each.join("; ")
    ))
}

/// Fills every metric's ratio to the first variant's.
pub fn set_ratios(variants: &mut [CompareVariant]) {
    let Some(first) = variants.first().map(|v| v.metrics.clone()) else {
        return;
    };
    for v in variants.iter_mut() {
        for m in &mut v.metrics {
            m.ratio = first
                .iter()
                .find(|b| b.name == m.name)
                .filter(|b| b.value != 0.0)
                .map(|b| m.value / b.value);
        }
    }
}

/// A figure's value in its unit, for people.
pub fn format_value(name: &str, v: f64) -> String {
    match name {
        "receiver_bits_per_second" => format_rate(v),
        "received_datagrams_per_second" | "transactions_per_second" => {
            format!("{}/s", format_count_rate(v))
        }
        n if n.ends_with("_ns") => format_nanos(v),
        n if n.ends_with("_percent") => format!("{v:.2}%"),
        _ => format!("{v:.3}"),
    }
}

/// `compare`'s table and CSV; its JSON (and JSON Lines, one line) is the
/// report itself.
impl Document for CompareReport {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        table(self, out)
    }
    fn csv(&self, out: &mut dyn Write) -> io::Result<()> {
        csv(self, out)
    }
}

fn csv(r: &CompareReport, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "variant,engine,busy_poll,metric,unit,value,ratio,error,n,sd,ci95_low,ci95_high,\
         client_ld_preload,server_ld_preload,threading"
    )?;
    let opt = |x: Option<f64>| x.map(|x| x.to_string()).unwrap_or_default();
    // A path may hold a comma or a quote: quote it, doubling quotes (RFC 4180).
    let text = |x: &Option<String>| {
        x.as_ref()
            .map_or(String::new(), |p| format!("\"{}\"", p.replace('"', "\"\"")))
    };
    for v in &r.variants {
        let preload = format!(
            "{},{},{}",
            text(&v.client_ld_preload),
            text(&v.server_ld_preload),
            v.threading.as_deref().unwrap_or_default()
        );
        if let Some(e) = &v.error {
            let e = e.replace('"', "'");
            writeln!(
                out,
                "{},{},{},,,,,\"{e}\",,,,,{preload}",
                v.name, v.engine, v.busy_poll
            )?;
            continue;
        }
        for m in &v.metrics {
            let s = m.stats.as_ref();
            writeln!(
                out,
                "{},{},{},{},{},{},{},,{},{},{},{},{preload}",
                v.name,
                v.engine,
                v.busy_poll,
                m.name,
                unit_of(&m.name),
                m.value,
                opt(m.ratio),
                s.map_or(String::new(), |s| s.n.to_string()),
                opt(s.map(|s| s.sd)),
                opt(s.and_then(|s| s.ci95_low)),
                opt(s.and_then(|s| s.ci95_high)),
            )?;
        }
    }
    Ok(())
}

/// A table: one row per figure, one column per variant, each cell the
/// value and its ratio to the first variant.
fn table(r: &CompareReport, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "linerate compare: {} {} · {} variant{}{}",
        r.test,
        r.args.join(" "),
        r.variants.len(),
        if r.variants.len() == 1 { "" } else { "s" },
        if r.repeat > 1 {
            format!(
                " · {} runs each, interleaved: mean ± sd (95% intervals in --json/--csv)",
                r.repeat
            )
        } else {
            String::new()
        }
    )?;
    // Wide enough for the longest cell: `mean ± sd ×ratio` with --repeat.
    let w = if r.repeat > 1 { 37 } else { 24 };
    let w = r
        .variants
        .iter()
        .map(|v| v.name.chars().count() + 2)
        .fold(w, usize::max);
    write!(out, "{:<44}", "")?;
    for v in &r.variants {
        write!(out, "{:>w$}", v.name)?;
    }
    writeln!(out)?;
    for (name, unit) in METRICS {
        if !r
            .variants
            .iter()
            .any(|v| v.metrics.iter().any(|m| m.name == *name))
        {
            continue;
        }
        write!(out, "{:<44}", format!("{name} ({unit})"))?;
        for v in &r.variants {
            let cell = match v.metrics.iter().find(|m| m.name == *name) {
                Some(m) => {
                    let mut c = format_value(name, m.value);
                    if let Some(s) = &m.stats {
                        c.push_str(&format!(" ± {}", format_value(name, s.sd)));
                    }
                    if let Some(x) = m.ratio {
                        c.push_str(&format!(" ×{x:.2}"));
                    }
                    c
                }
                None => "-".into(),
            };
            write!(out, "{cell:>w$}")?;
        }
        writeln!(out)?;
    }
    for v in &r.variants {
        match (&v.error, &v.client_engine, &v.server_engine) {
            (Some(e), _, _) => writeln!(out, "{}: did not run: {e}", v.name)?,
            (None, Some(c), Some(s)) if c != &v.engine || s != &v.engine => {
                writeln!(out, "{}: client engine {c}, server engine {s}", v.name)?
            }
            _ => {}
        }
        if let Some(n) = &v.engine_note {
            writeln!(out, "{}: {n}", v.name)?;
        }
        for (side, lib) in [
            ("client", &v.client_ld_preload),
            ("server", &v.server_ld_preload),
        ] {
            if let Some(lib) = lib {
                writeln!(out, "{}: {side} ran with LD_PRELOAD={lib}", v.name)?;
            }
        }
        for f in &v.failed {
            writeln!(out, "{}: {f}", v.name)?;
        }
    }
    if let Some(c) = wait_caution(&r.variants) {
        writeln!(out, "{c}")?;
    }
    if let Some(n) = r.flows {
        writeln!(
            out,
            "threading: {n} flows per side; per-flow: a thread each (-P {n}); \
             loop:T: T event-loop threads (--flows {n} --threads T)"
        )?;
    }
    if r.interrupted {
        writeln!(
            out,
            "interrupted by the user: the runs after that point did not run"
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::{export, Format};
    use linerate_proto::rr_core::SpinMode;

    fn variant(name: &str, bps: f64) -> CompareVariant {
        CompareVariant {
            name: name.into(),
            engine: name.into(),
            client_engine: Some(name.into()),
            server_engine: Some(name.into()),
            engine_note: None,
            busy_poll: false,
            waits: None,
            threading: None,
            preload: None,
            client_ld_preload: None,
            server_ld_preload: None,
            runs: 1,
            failed: Vec::new(),
            error: None,
            metrics: vec![Metric {
                name: "receiver_bits_per_second".into(),
                value: bps,
                ratio: None,
                stats: None,
            }],
        }
    }

    fn fixture(json: &str) -> Report {
        serde_json::from_str(json).expect("a report fixture")
    }

    #[test]
    fn issue_26_fairness_is_jains_index_of_any_run_with_flows() {
        // Event-loop flows: the index of their own sums.
        let loops = fixture(include_str!("../tests/fixtures/tcp_flows.json"));
        let sum = loops.sums[0].fairness.as_ref().map(|f| f.jain_index);
        assert!(sum.is_some());
        assert_eq!(jain_index(&loops), sum);
        // Thread-per-flow streams (-P 2 each way): the same index from
        // each stream's received rate, the least even direction.
        let bidir = fixture(include_str!("../tests/fixtures/tcp_bidir.json"));
        assert!(bidir.sums.iter().all(|s| s.fairness.is_none()));
        let want = bidir
            .sums
            .iter()
            .filter_map(|sum| {
                let rates: Vec<f64> = bidir
                    .streams
                    .iter()
                    .filter(|s| s.flow == sum.flow)
                    .map(|s| s.receiver.bits_per_second)
                    .collect();
                linerate_stats::fairness::jain_index(&rates)
            })
            .reduce(f64::min);
        assert!(want.is_some_and(|j| j > 0.0 && j <= 1.0));
        assert_eq!(jain_index(&bidir), want);
        // One flow has no fairness to speak of.
        assert_eq!(
            jain_index(&fixture(include_str!("../tests/fixtures/tcp.json"))),
            None
        );
        // crr on event loops: its flows' transactions/s, and its CPU per
        // transaction, in the figures.
        let crr = fixture(include_str!("../tests/fixtures/crr_flows.json"));
        let names: Vec<String> = metrics_of(&crr).into_iter().map(|m| m.name).collect();
        for m in [
            "transactions_per_second",
            "client_cpu_us_per_transaction",
            "jain_index",
        ] {
            assert!(names.iter().any(|n| n == m), "{m}: {names:?}");
        }
        let rr = fixture(include_str!("../tests/fixtures/rr.json"));
        assert_eq!(jain_index(&rr), None);
    }

    #[test]
    fn ratios_are_to_the_first_variant_and_absent_without_a_base() {
        let mut vs = vec![variant("a", 2e9), variant("b", 3e9), variant("c", 1e9)];
        vs[2].metrics.push(Metric {
            name: "loss_percent".into(),
            value: 1.0,
            ratio: None,
            stats: None,
        });
        set_ratios(&mut vs);
        assert_eq!(vs[0].metrics[0].ratio, Some(1.0));
        assert_eq!(vs[1].metrics[0].ratio, Some(1.5));
        assert_eq!(vs[2].metrics[0].ratio, Some(0.5));
        assert_eq!(vs[2].metrics[1].ratio, None);
    }

    #[test]
    fn the_table_and_csv_carry_every_variant() {
        let mut vs = vec![variant("syscall", 2e9), variant("uring", 3e9)];
        vs[0].client_ld_preload = Some("/opt/x,y/libonload.so".into());
        set_ratios(&mut vs);
        let r = report("tcp", &["-t", "2"], vs);
        let t = human(&r);
        assert!(t.contains("syscall") && t.contains("uring"), "{t}");
        assert!(t.contains("×1.50"), "{t}");
        let mut c = Vec::new();
        export(&r, Format::Csv, &mut c).expect("csv");
        let c = String::from_utf8(c).expect("utf8");
        assert_eq!(c.lines().count(), 3, "{c}");
        assert!(c.contains("uring,uring,false,receiver_bits_per_second,bit/s,3000000000,1.5,"));
        // Each side's LD_PRELOAD, quoted (a path may hold a comma).
        assert!(c
            .lines()
            .next()
            .is_some_and(|h| h.ends_with(",client_ld_preload,server_ld_preload,threading")));
        assert!(c.contains(",\"/opt/x,y/libonload.so\","), "{c}");
    }

    /// A compare report of `variants` for `test` run with `args`.
    fn report(test: &str, args: &[&str], variants: Vec<CompareVariant>) -> CompareReport {
        CompareReport {
            schema: COMPARE_SCHEMA,
            test: test.into(),
            server: None,
            start_unix_ms: 0,
            interrupted: false,
            args: args.iter().map(|a| a.to_string()).collect(),
            flows: None,
            repeat: 1,
            variants,
        }
    }

    /// `r`'s human table.
    fn human(r: &CompareReport) -> String {
        let mut t = Vec::new();
        export(r, Format::Human, &mut t).expect("table");
        String::from_utf8(t).expect("utf8")
    }

    /// Issue 25: `compare rr --engines syscall,xdp` ran xdp spinning on
    /// its rings and syscall blocking; the table must say so, and say
    /// nothing when every variant waited alike.
    #[test]
    fn issue_25_the_table_cautions_when_variants_did_not_wait_alike() {
        let rr = fixture(include_str!("../tests/fixtures/rr.json"));
        assert_eq!(waits(&rr), "client sleep, server sleep");
        let mut spun = rr.clone();
        if let Some(x) = spun.rr.as_mut() {
            x.spin_client = Some(SpinMode::Dedicated);
            x.spin_server = Some(SpinMode::Dedicated);
        }
        assert_eq!(waits(&spun), "client spin, server spin");
        let mut vs = vec![variant("syscall", 2e9), variant("xdp", 3e9)];
        vs[0].waits = Some(waits(&rr));
        vs[1].waits = Some(waits(&spun));
        let r = report("rr", &[], vs);
        let t = human(&r);
        assert!(
            t.contains(
                "caution: the variants did not wait alike (syscall client sleep, server sleep; \
                 xdp client spin, server spin)"
            ),
            "{t}"
        );
        // Alike (both spun, or a variant that did not run): no caution.
        let mut alike = r.variants.clone();
        alike[0].waits = alike[1].waits.clone();
        assert_eq!(wait_caution(&alike), None);
        alike[0].waits = None;
        assert_eq!(wait_caution(&alike), None);
        // Streams: by role, from each end's busy-poll note.
        let mut udp = fixture(include_str!("../tests/fixtures/udp.json"));
        assert_eq!(waits(&udp), "sender sleep, receiver sleep");
        udp.streams[0].receiver.busy_poll = Some("spinning on the AF_XDP rings".into());
        assert_eq!(waits(&udp), "sender sleep, receiver spin");
    }
}
