//! Builds the request/response section of the report from both sides'
//! [`RrMeasurement`]s: per phase, the flows' histograms merged (HdrHistogram
//! merges exactly), transaction counts of both sides, and the one-way
//! delays with the clock offset's bound, or the reason there are none.

use linerate_proto::clock::ClockOffset;
use linerate_proto::measure::{OneWayMeasurement, RrFlowMeasurement, RrMeasurement, SideResults};
use linerate_proto::rr::RESPONSE_HEADER_LEN;
use linerate_proto::spec::{RrPhase, RrSpec, TestSpec};
use linerate_stats::histogram::Histogram;

use crate::model::{LoadReport, OneWay, RrPhaseRecord, RrPhaseReport, RrReport, RrTiming};

/// Why a phase has no one-way figures, if it has none.
fn one_way_unavailable(
    spec: &TestSpec,
    rr: &RrSpec,
    phase: &RrPhase,
    clock: Option<&ClockOffset>,
) -> Option<String> {
    if !linerate_proto::test_type::of(spec).one_way {
        return Some("crr times the whole exchange; one-way delays come from rr".into());
    }
    if spec.flows.is_some() {
        return Some(
            "event-loop flows (--flows) time round trips only: two more histograms per flow \
             would multiply the memory of thousands of flows"
                .into(),
        );
    }
    if !rr.per_message() {
        return Some(format!(
            "batch mode (--batch {}) reads no clock per message",
            rr.batch
        ));
    }
    if (phase.response as usize) < RESPONSE_HEADER_LEN {
        return Some(format!(
            "{}-byte responses have no room for the {RESPONSE_HEADER_LEN}-byte timestamp header",
            phase.response
        ));
    }
    if clock.is_none() {
        return Some("the clock offset to the server was not measured".into());
    }
    None
}

fn one_way(
    flows: &[&RrFlowMeasurement],
    pick: impl Fn(&RrFlowMeasurement) -> Option<&OneWayMeasurement>,
    unavailable: Option<String>,
    clock: Option<&ClockOffset>,
) -> OneWay {
    let none = |why: String| OneWay {
        latency: None,
        uncertainty_ns: None,
        negative: 0,
        unavailable: Some(why),
        histogram: Vec::new(),
    };
    if let Some(why) = unavailable {
        return none(why);
    }
    let Some(clock) = clock else {
        return none("the clock offset to the server was not measured".into());
    };
    let mut h = Histogram::new();
    let mut negative = 0;
    for m in flows.iter().filter_map(|f| pick(f)) {
        h.merge(&Histogram::from_buckets(&m.histogram));
        negative += m.negative;
    }
    let mut out = OneWay {
        latency: None,
        uncertainty_ns: Some(clock.uncertainty_ns),
        negative,
        unavailable: None,
        histogram: Vec::new(),
    };
    if h.is_empty() {
        out.unavailable = Some("no timestamped responses".into());
        return out;
    }
    let s = h.summary();
    // The project's rule: a figure whose uncertainty is larger than the
    // figure itself is not printed.
    if clock.uncertainty_ns > s.p50_ns {
        out.unavailable = Some(format!(
            "the clock offset is known only to ±{:.1} µs (estimated over the control connection), more than the one-way delay itself; synchronised clocks (e.g. PTP) on both hosts are needed",
            clock.uncertainty_ns as f64 / 1e3
        ));
        return out;
    }
    out.latency = Some(s);
    out.histogram = h.to_buckets();
    out
}

fn phase_report(
    spec: &TestSpec,
    rr: &RrSpec,
    phase: &RrPhase,
    client: &RrMeasurement,
    server: &RrMeasurement,
) -> RrPhaseReport {
    let of = |m: &'_ RrMeasurement| -> Vec<RrFlowMeasurement> {
        m.flows
            .iter()
            .filter(|f| f.phase == phase.index)
            .cloned()
            .collect()
    };
    let (cf, sf) = (of(client), of(server));
    let cref: Vec<&RrFlowMeasurement> = cf.iter().collect();
    // Event-loop flows' own histograms are coarse; their loops' are not.
    let loops = cf.iter().any(|f| !f.loop_rtt.is_empty());
    let mut rtt = Histogram::new();
    for f in &cf {
        let buckets = if loops { &f.loop_rtt } else { &f.rtt };
        rtt.merge(&Histogram::from_buckets(buckets));
    }
    let clock = client.clock.as_ref();
    let why = one_way_unavailable(spec, rr, phase, clock);
    let sum = |v: &[RrFlowMeasurement], f: fn(&RrFlowMeasurement) -> u64| v.iter().map(f).sum();
    let mut errors = errors(&cf, &sf);
    if phase.loaded {
        errors.extend(load_errors(client, server));
    }
    RrPhaseReport {
        request_size: phase.request,
        response_size: phase.response,
        loaded: phase.loaded,
        transactions: sum(&cf, |f| f.transactions),
        server_transactions: sum(&sf, |f| f.transactions),
        lost: sum(&cf, |f| f.lost),
        late: sum(&cf, |f| f.late),
        seconds: cf.iter().map(|f| f.elapsed_ns).max().unwrap_or(0) as f64 / 1e9,
        transactions_per_second: cf
            .iter()
            .filter(|f| f.elapsed_ns > 0)
            .map(|f| f.transactions as f64 / (f.elapsed_ns as f64 / 1e9))
            .fold(0.0, |a, b| a + b),
        client_sent_bytes: sum(&cf, |f| f.bytes_sent),
        server_received_bytes: sum(&sf, |f| f.bytes_received),
        server_sent_bytes: sum(&sf, |f| f.bytes_sent),
        client_received_bytes: sum(&cf, |f| f.bytes_received),
        latency: rtt.summary(),
        client_to_server: one_way(&cref, |f| f.client_to_server.as_ref(), why.clone(), clock),
        server_to_client: one_way(&cref, |f| f.server_to_client.as_ref(), why, clock),
        histogram: rtt.to_buckets(),
        per_flow: per_flow(spec, &cf),
        client_poll_sleeps: poll_sleeps(&cf),
        server_poll_sleeps: poll_sleeps(&sf),
        client_spin_yielded: spin_yielded(&cf),
        server_spin_yielded: spin_yielded(&sf),
        errors,
    }
}

/// A phase's errors, one per side and message: flows that failed alike
/// are named together (thousands of flows out of ports are one line).
fn errors(client: &[RrFlowMeasurement], server: &[RrFlowMeasurement]) -> Vec<String> {
    let mut groups: Vec<(&str, &str, Vec<u32>)> = Vec::new();
    let mut index: std::collections::HashMap<(&str, &str), usize> = Default::default();
    let sides = client.iter().map(|f| ("client", f));
    for (side, f) in sides.chain(server.iter().map(|f| ("server", f))) {
        let Some(e) = f.error.as_deref() else {
            continue;
        };
        let i = *index.entry((side, e)).or_insert_with(|| {
            groups.push((side, e, Vec::new()));
            groups.len() - 1
        });
        groups[i].2.push(f.flow);
    }
    const NAMED: usize = 5;
    groups
        .into_iter()
        .map(|(side, e, flows)| match flows.as_slice() {
            [one] => format!("{side}, flow {one}: {e}"),
            _ => {
                let named: Vec<String> = flows.iter().take(NAMED).map(u32::to_string).collect();
                let more = match flows.len().saturating_sub(NAMED) {
                    0 => String::new(),
                    n => format!(" and {n} more"),
                };
                format!(
                    "{side}, {} flows ({}{more}): {e}",
                    flows.len(),
                    named.join(", ")
                )
            }
        })
        .collect()
}

/// The load streams' errors (a loaded phase's: it ran without that
/// load), one per side and stream; a stream ended by its side's abort
/// adds nothing to the flows' own errors.
fn load_errors<'a>(
    client: &'a RrMeasurement,
    server: &'a RrMeasurement,
) -> impl Iterator<Item = String> + 'a {
    let side = |name: &'static str, m: &'a RrMeasurement| {
        m.load.iter().filter_map(move |l| {
            let e = l.error.as_deref().filter(|e| *e != "aborted")?;
            Some(format!("{name}, load stream {}: {e}", l.id))
        })
    };
    side("client", client).chain(side("server", server))
}

/// With more than one flow (a thread each, `-P N`) or on event loops
/// (`--flows`): each flow's transactions (in flow order), their fairness,
/// and the spread of the flows' own p50 and p99 round trips.
fn per_flow(spec: &TestSpec, flows: &[RrFlowMeasurement]) -> Option<crate::model::RrPerFlow> {
    use linerate_stats::fairness::{jain_index, min_median_max};
    if spec.flows.is_none() && spec.per_direction() < 2 {
        return None;
    }
    let mut by_flow: Vec<&RrFlowMeasurement> = flows.iter().collect();
    by_flow.sort_by_key(|f| f.flow);
    let rates: Vec<f64> = by_flow
        .iter()
        .map(|f| f.transactions as f64 / (f.elapsed_ns.max(1) as f64 / 1e9))
        .collect();
    let timed: Vec<linerate_stats::histogram::Summary> = by_flow
        .iter()
        .filter(|f| !f.rtt.is_empty())
        .map(|f| Histogram::from_buckets(&f.rtt).summary())
        .collect();
    let spread = |pick: fn(&linerate_stats::histogram::Summary) -> u64| {
        let v: Vec<f64> = timed.iter().map(|s| pick(s) as f64).collect();
        min_median_max(&v).map(|(min, median, max)| crate::model::Spread { min, median, max })
    };
    Some(crate::model::RrPerFlow {
        transactions: by_flow.iter().map(|f| f.transactions).collect(),
        lost: if by_flow.iter().any(|f| f.lost > 0) {
            by_flow.iter().map(|f| f.lost).collect()
        } else {
            Vec::new()
        },
        idle_flows: by_flow.iter().filter(|f| f.transactions == 0).count() as u32,
        jain_index: jain_index(&rates).unwrap_or(0.0),
        p50_ns: spread(|s| s.p50_ns)?,
        p99_ns: spread(|s| s.p99_ns)?,
        // Event-loop flows keep coarse histograms of their own.
        coarse: spec.flows.is_some(),
    })
}

/// Per flow, in flow order, the poll sleeps a busy-polling side counted
/// (`None` when it counted none: it did not busy-poll).
fn poll_sleeps(flows: &[RrFlowMeasurement]) -> Option<Vec<u64>> {
    let mut v: Vec<(u32, u64)> = flows
        .iter()
        .filter_map(|f| Some((f.flow, f.poll_sleeps?)))
        .collect();
    v.sort_unstable();
    (!v.is_empty()).then(|| v.into_iter().map(|(_, n)| n).collect())
}

/// Flows that turned from spinning without yielding to yielding (`None`
/// when none did).
fn spin_yielded(flows: &[RrFlowMeasurement]) -> Option<u32> {
    let n = flows
        .iter()
        .filter(|f| f.spin_yielded == Some(true))
        .count() as u32;
    (n > 0).then_some(n)
}

/// The rr section, for rr and crr specs.
pub(crate) fn build(
    spec: &TestSpec,
    client: &SideResults,
    server: &SideResults,
) -> Option<RrReport> {
    let rr = spec.rr.as_ref()?;
    let empty = RrMeasurement::default();
    let c = client.rr.as_ref().unwrap_or(&empty);
    let s = server.rr.as_ref().unwrap_or(&empty);
    let phases: Vec<RrPhaseReport> = rr
        .phases()
        .iter()
        .map(|p| phase_report(spec, rr, p, c, s))
        .collect();
    let load = (rr.under_load > 0).then(|| {
        let receiver_bytes = s.load.iter().map(|m| m.bytes).sum();
        let seconds = s.load_elapsed_ns as f64 / 1e9;
        LoadReport {
            streams: rr.under_load,
            sender_bytes: c.load.iter().map(|m| m.bytes).sum(),
            receiver_bytes,
            seconds,
            bits_per_second: if seconds > 0.0 {
                receiver_bytes as f64 * 8.0 / seconds
            } else {
                0.0
            },
        }
    });
    let per_tx = |side: &SideResults, n: u64| {
        (n > 0).then(|| (side.cpu.user_ns + side.cpu.system_ns) as f64 / 1e3 / n as f64)
    };
    let total: u64 = phases.iter().map(|p| p.transactions).sum();
    let server_total: u64 = phases.iter().map(|p| p.server_transactions).sum();
    Some(RrReport {
        flows: spec.per_direction(),
        limit: rr.limit,
        timing: if rr.per_message() {
            RrTiming::PerMessage
        } else {
            RrTiming::Batch { batch: rr.batch }
        },
        rate: spec.rr.as_ref().and_then(|r| r.rate),
        busy_poll: rr.busy_poll,
        busy_poll_client: c.busy_poll.clone(),
        busy_poll_server: s.busy_poll.clone(),
        engine_use_client: c.engine_use.clone(),
        engine_use_server: s.engine_use.clone(),
        spin_client: c.spin,
        spin_server: s.spin,
        clock: c.clock,
        phases,
        load,
        client_cpu_us_per_transaction: per_tx(client, total),
        server_cpu_us_per_transaction: per_tx(server, server_total),
    })
}

/// The share of its paced slots below which a flow is said to have fallen
/// behind `--rate` (a few slots lost to the phase's edges are no shortfall).
const PACE_KEPT: f64 = 0.95;

/// Notes an rr section's figures call for: paced flows (`--rate`) that
/// made fewer transactions than their schedule offered. Each flow keeps
/// one transaction in flight, so round trips longer than its slot, or a
/// host too busy to run it, hold it below the pace; the figures are what
/// ran, and the note says they are not the asked rate.
pub(crate) fn notes(rr: &RrReport) -> Vec<String> {
    let Some(rate) = rr.rate.filter(|&r| r > 0) else {
        return Vec::new();
    };
    let mut notes = Vec::new();
    for p in &rr.phases {
        let slots = f64::from(rate) * p.seconds;
        // A lost transaction (UDP) used its slot too: the pace is kept by
        // the transactions started, answered or not.
        let counts: Vec<u64> = match &p.per_flow {
            Some(f) => f
                .transactions
                .iter()
                .enumerate()
                .map(|(i, &n)| n + f.lost.get(i).copied().unwrap_or(0))
                .collect(),
            None => vec![p.transactions + p.lost],
        };
        let short: Vec<u64> = counts
            .iter()
            .copied()
            .filter(|&n| (n as f64) < slots * PACE_KEPT)
            .collect();
        let Some(&slowest) = short.iter().min() else {
            continue;
        };
        notes.push(format!(
            "{} B requests: {} of {} flow(s) fell behind the pace of {rate} transactions/s \
             (slowest {:.0}/s over {:.2} s); a flow has one transaction in flight, so \
             round trips longer than its slot or a busy host hold it below the asked rate",
            p.request_size,
            short.len(),
            counts.len(),
            slowest as f64 / p.seconds.max(f64::MIN_POSITIVE),
            p.seconds,
        ));
    }
    notes
}

/// The client's figures of phase `index` from its flows' measurements of
/// it, as the phase ended (`--json-lines`); `None` for a phase not in the
/// spec.
pub fn phase_record(
    spec: &TestSpec,
    index: u32,
    flows: Vec<RrFlowMeasurement>,
    clock: Option<ClockOffset>,
) -> Option<RrPhaseRecord> {
    let rr = spec.rr.as_ref()?;
    let phase = rr.phases().into_iter().find(|p| p.index == index)?;
    let client = RrMeasurement {
        flows,
        clock,
        ..RrMeasurement::default()
    };
    let p = phase_report(spec, rr, &phase, &client, &RrMeasurement::default());
    // The distributions' buckets stay in the summary: a line per phase.
    let bare = |mut w: OneWay| {
        w.histogram.clear();
        w
    };
    Some(RrPhaseRecord {
        phase: index,
        request_size: p.request_size,
        response_size: p.response_size,
        loaded: p.loaded,
        transactions: p.transactions,
        lost: p.lost,
        late: p.late,
        seconds: p.seconds,
        transactions_per_second: p.transactions_per_second,
        latency: p.latency,
        client_to_server: bare(p.client_to_server),
        server_to_client: bare(p.server_to_client),
        errors: p.errors,
    })
}

/// A test the user stopped early (Ctrl-C): keeps the phases that ran
/// (the last of them cut short) and drops those that ended at once, with
/// no transaction on either side. Returns the note that says so.
pub fn keep_phases_run(rr: &mut RrReport) -> String {
    let ran = |p: &RrPhaseReport| {
        p.transactions > 0 || p.server_transactions > 0 || p.lost > 0 || !p.errors.is_empty()
    };
    let name = |p: &RrPhaseReport| {
        format!(
            "{}{}",
            p.request_size,
            if p.loaded { " under load" } else { "" }
        )
    };
    let skipped: Vec<String> = rr.phases.iter().filter(|p| !ran(p)).map(name).collect();
    rr.phases.retain(ran);
    let last = rr.phases.last().map(name);
    let mut note = match last {
        Some(l) => format!("the {l}-byte phase, the last to run, ran shorter than asked"),
        None => "no transaction completed before the interruption".to_string(),
    };
    if !skipped.is_empty() {
        note.push_str(&format!(
            "; not measured: {} (request bytes)",
            skipped.join(", ")
        ));
    }
    note
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_proto::spec::{RrLimit, TestKind};
    use proptest::prelude::*;

    fn flow(phase: u32, flow: u32, values: &[u64]) -> RrFlowMeasurement {
        let mut h = Histogram::new();
        for &v in values {
            h.record(v);
        }
        RrFlowMeasurement {
            phase,
            flow,
            transactions: values.len() as u64,
            elapsed_ns: 1_000_000_000,
            rtt: h.to_buckets(),
            ..RrFlowMeasurement::default()
        }
    }

    fn spec(streams: u16) -> TestSpec {
        TestSpec {
            kind: TestKind::Rr,
            streams,
            rr: Some(RrSpec {
                sizes: vec![64],
                limit: RrLimit::Count(10),
                ..RrSpec::default()
            }),
            ..TestSpec::default()
        }
    }

    fn side(flows: Vec<RrFlowMeasurement>, clock: Option<ClockOffset>) -> SideResults {
        SideResults {
            rr: Some(RrMeasurement {
                flows,
                clock,
                ..RrMeasurement::default()
            }),
            ..SideResults::default()
        }
    }

    #[test]
    fn issue_26_flows_failing_alike_are_one_error_line() {
        let out_of_ports = "connect: no free local port";
        let mut flows: Vec<RrFlowMeasurement> = (0..60u32)
            .map(|i| RrFlowMeasurement {
                flow: i,
                transactions: 1,
                error: (i >= 3).then(|| out_of_ports.to_string()),
                ..RrFlowMeasurement::default()
            })
            .collect();
        flows[1].error = Some("reset".into());
        let server = vec![RrFlowMeasurement {
            flow: 7,
            error: Some(out_of_ports.into()),
            ..RrFlowMeasurement::default()
        }];
        let r = build(&spec(60), &side(flows, None), &side(server, None)).expect("rr");
        assert_eq!(
            r.phases[0].errors,
            vec![
                "client, flow 1: reset".to_string(),
                format!("client, 57 flows (3, 4, 5, 6, 7 and 52 more): {out_of_ports}"),
                format!("server, flow 7: {out_of_ports}"),
            ]
        );
    }

    /// A load stream's error is its loaded phases' (they ran without that
    /// load), named by side and stream; one ended by its side's abort
    /// adds nothing. Before, no report showed a load stream's error.
    #[test]
    fn issue_26_a_load_streams_error_is_its_loaded_phases() {
        let mut s = spec(1);
        if let Some(rr) = s.rr.as_mut() {
            rr.under_load = 2;
        }
        let load = |id, e: &str| linerate_proto::measure::StreamMeasurement {
            id,
            error: Some(e.into()),
            ..Default::default()
        };
        let mut c = side(Vec::new(), None);
        let mut v = side(Vec::new(), None);
        if let (Some(c), Some(v)) = (c.rr.as_mut(), v.rr.as_mut()) {
            c.load = vec![load(3, "no data moved for 30 s: peer stalled")];
            v.load = vec![load(3, "aborted"), load(4, "peer reset the connection")];
        }
        let r = build(&s, &c, &v).expect("rr");
        assert!(r.phases[0].errors.is_empty(), "{:?}", r.phases[0]);
        assert_eq!(
            r.phases[1].errors,
            [
                "client, load stream 3: no data moved for 30 s: peer stalled",
                "server, load stream 4: peer reset the connection",
            ]
        );
    }

    #[test]
    fn issue_26_flows_report_each_flows_transactions_and_the_spread_of_their_percentiles() {
        let a: Vec<u64> = (1..=100).collect();
        let b: Vec<u64> = (1..=100).map(|v| v * 10).collect();
        let c: Vec<u64> = (1..=100).map(|v| v * 100).collect();
        let mut s = spec(3);
        s.flows = Some(linerate_proto::spec::Flows {
            count: 3,
            threads: 2,
        });
        let flows = vec![flow(0, 2, &c), flow(0, 0, &a), flow(0, 1, &b)];
        let r = build(&s, &side(flows.clone(), None), &side(flows, None)).expect("rr");
        let p = &r.phases[0];
        let f = p.per_flow.as_ref().expect("per-flow figures with --flows");
        assert_eq!(f.transactions, vec![100, 100, 100]);
        assert_eq!(f.idle_flows, 0);
        assert!((f.jain_index - 1.0).abs() < 1e-12);
        // Each flow's own p50 and p99, directly: 50, 500, 5000 and 99, 990,
        // 9900 (within HdrHistogram's 3 significant digits).
        let within = |got: f64, want: f64| (got - want).abs() <= want / 1000.0 + 1.0;
        let spread = |s: crate::model::Spread| [s.min, s.median, s.max];
        for (got, want) in [
            (spread(f.p50_ns), [50.0, 500.0, 5000.0]),
            (spread(f.p99_ns), [99.0, 990.0, 9900.0]),
        ] {
            assert!(
                got.iter().zip(want).all(|(&g, w)| within(g, w)),
                "{got:?} vs {want:?}"
            );
        }
        // The merged p99 is that of all 300 values together (the 297th).
        let mut all: Vec<u64> = a.iter().chain(&b).chain(&c).copied().collect();
        all.sort_unstable();
        let direct = all[(0.99 * all.len() as f64).ceil() as usize - 1] as f64;
        let merged = p.latency.p99_ns as f64;
        assert!(within(merged, direct), "{merged} vs {direct}");
        // One flow (`-P 1`, no --flows) has no per-flow section.
        assert!(build(
            &spec(1),
            &side(vec![flow(0, 0, &a)], None),
            &side(vec![], None)
        )
        .expect("rr")
        .phases[0]
            .per_flow
            .is_none());
    }

    /// A thread per flow (`-P 3`, no `--flows`) gets the same per-flow
    /// section as event loops, its percentiles exact (not coarse).
    #[test]
    fn issue_26_thread_per_flow_reports_per_flow_counts_and_fairness() {
        let a: Vec<u64> = (1..=100).collect();
        let b: Vec<u64> = (1..=300).collect();
        let c: Vec<u64> = (1..=200).collect();
        let flows = vec![flow(0, 1, &b), flow(0, 0, &a), flow(0, 2, &c)];
        let r = build(&spec(3), &side(flows.clone(), None), &side(flows, None)).expect("rr");
        let f = r.phases[0]
            .per_flow
            .as_ref()
            .expect("per-flow figures with -P 3");
        assert_eq!(f.transactions, vec![100, 300, 200]);
        assert_eq!(f.transactions.iter().sum::<u64>(), r.phases[0].transactions);
        let direct = linerate_stats::fairness::jain_index(&[100.0, 300.0, 200.0]).expect("index");
        assert!((f.jain_index - direct).abs() < 1e-12);
        assert!(!f.coarse);
        assert_eq!(
            f.p50_ns.max,
            Histogram::from_buckets(&flow(0, 1, &b).rtt)
                .summary()
                .p50_ns as f64
        );
    }

    /// Issue 28 (a loaded CI run): 16 flows paced at 200/s made 250
    /// transactions in 2 s where their schedule offered 400; the report
    /// said nothing of it. Flows that fell behind the pace are now noted;
    /// flows that kept it (a slot or two lost at the edges) are not.
    #[test]
    fn issue_28_paced_flows_that_fell_behind_the_rate_are_noted() {
        let paced = |counts: &[u64]| {
            let flows: Vec<RrFlowMeasurement> = counts
                .iter()
                .enumerate()
                .map(|(i, &n)| {
                    let v: Vec<u64> = (1..=n).map(|k| k * 1000).collect();
                    flow(0, i as u32, &v)
                })
                .collect();
            let mut s = spec(counts.len() as u16);
            if let Some(rr) = s.rr.as_mut() {
                rr.rate = Some(200);
            }
            build(&s, &side(flows.clone(), None), &side(flows, None)).expect("rr")
        };
        // Each flow's second: 200 slots.
        assert!(notes(&paced(&[200, 199, 195])).is_empty());
        let n = notes(&paced(&[200, 125, 150]));
        assert_eq!(n.len(), 1, "{n:?}");
        assert!(
            n[0].contains("2 of 3 flow(s) fell behind the pace of 200"),
            "{n:?}"
        );
        assert!(n[0].contains("slowest 125/s"), "{n:?}");
        // Lost transactions (UDP) kept their slots: no shortfall.
        let mut lossy = paced(&[200, 150]);
        lossy.phases[0].lost = 50;
        if let Some(f) = lossy.phases[0].per_flow.as_mut() {
            f.lost = vec![0, 50];
        }
        assert!(notes(&lossy).is_empty(), "{:?}", notes(&lossy));
        // Unpaced: nothing to fall behind.
        let flows = vec![flow(0, 0, &[1, 2, 3])];
        let r = build(&spec(1), &side(flows.clone(), None), &side(flows, None)).expect("rr");
        assert!(notes(&r).is_empty());
    }

    /// Event-loop flows carry coarse histograms of their own and, on each
    /// loop's first flow, the loop's precise one: the phase's figures are
    /// exactly those of every value recorded at full precision (as a
    /// thread per flow gives), not the coarse flows' merge.
    #[test]
    fn issue_26_loop_flows_merge_their_loops_precise_histograms() {
        let values = |k: u64| (1..=200).map(move |v| v * 997 * k).collect::<Vec<u64>>();
        let (mut loops, mut all) = ([Histogram::new(), Histogram::new()], Histogram::new());
        let mut flows: Vec<RrFlowMeasurement> = (0..4u32)
            .map(|f| {
                let mut own = Histogram::coarse();
                for v in values(u64::from(f) + 1) {
                    own.record(v);
                    loops[f as usize % 2].record(v);
                    all.record(v);
                }
                RrFlowMeasurement {
                    flow: f,
                    transactions: own.count(),
                    elapsed_ns: 1_000_000_000,
                    rtt: own.to_buckets(),
                    ..RrFlowMeasurement::default()
                }
            })
            .collect();
        flows[0].loop_rtt = loops[0].to_buckets();
        flows[1].loop_rtt = loops[1].to_buckets();
        let r = build(&spec(4), &side(flows, None), &side(vec![], None)).expect("rr");
        let p = &r.phases[0];
        assert_eq!(p.latency, all.summary());
        assert_eq!(p.histogram, all.to_buckets());
    }

    proptest! {
        /// The phase's distribution is exactly that of every flow's values
        /// recorded into one histogram, and counts add up.
        #[test]
        fn flows_merge_into_the_phase(a in proptest::collection::vec(1u64..10_000_000, 1..100),
                                      b in proptest::collection::vec(1u64..10_000_000, 1..100),
                                      c in proptest::collection::vec(1u64..10_000_000, 1..100)) {
            let client = side(vec![flow(0, 0, &a), flow(0, 1, &b), flow(0, 2, &c)], None);
            let server = side(vec![flow(0, 0, &a), flow(0, 1, &b), flow(0, 2, &c)], None);
            let r = build(&spec(3), &client, &server).expect("rr section");
            let mut all = Histogram::new();
            for &v in a.iter().chain(&b).chain(&c) { all.record(v); }
            let p = &r.phases[0];
            prop_assert_eq!(p.latency, all.summary());
            prop_assert_eq!(&p.histogram, &all.to_buckets());
            prop_assert_eq!(p.transactions, (a.len() + b.len() + c.len()) as u64);
            prop_assert_eq!(p.transactions, p.server_transactions);
            prop_assert!((p.transactions_per_second - p.transactions as f64).abs() < 1e-6);
        }
    }

    #[test]
    fn one_way_is_withheld_when_the_offset_is_too_uncertain() {
        let mut f = flow(0, 0, &[10_000]);
        let mut h = Histogram::new();
        h.record(5_000);
        f.client_to_server = Some(OneWayMeasurement {
            histogram: h.to_buckets(),
            negative: 0,
        });
        f.server_to_client = f.client_to_server.clone();
        let est = ClockOffset {
            method: linerate_proto::clock::ClockMethod::Probes,
            offset_ns: 1,
            uncertainty_ns: 20_000,
            probes: 16,
            delay_ns: 40_000,
        };
        let r = build(
            &spec(1),
            &side(vec![f.clone()], Some(est)),
            &side(vec![], None),
        )
        .expect("rr");
        let ow = &r.phases[0].client_to_server;
        assert!(ow.latency.is_none());
        assert!(ow.unavailable.as_deref().unwrap_or("").contains("±20.0 µs"));
        // On one host the same samples are exact.
        let r = build(
            &spec(1),
            &side(vec![f], Some(ClockOffset::same_host(1))),
            &side(vec![], None),
        )
        .expect("rr");
        let ow = &r.phases[0].server_to_client;
        assert_eq!(ow.uncertainty_ns, Some(0));
        assert_eq!(ow.latency.map(|s| s.count), Some(1));
    }

    #[test]
    fn small_responses_and_batches_say_why_there_is_no_one_way() {
        let rr = RrSpec::default();
        let p = |resp| RrPhase {
            index: 0,
            request: resp,
            response: resp,
            loaded: false,
        };
        let same = ClockOffset::same_host(1);
        let rr_spec = spec(1);
        let why = one_way_unavailable(&rr_spec, &rr, &p(1), Some(&same));
        assert!(why.unwrap_or_default().contains("1-byte responses"));
        assert_eq!(
            one_way_unavailable(&rr_spec, &rr, &p(32), Some(&same)),
            None
        );
        // Event-loop flows time round trips only, and say so.
        let flows = TestSpec {
            flows: Some(linerate_proto::spec::Flows {
                count: 10,
                threads: 1,
            }),
            ..spec(1)
        };
        assert!(one_way_unavailable(&flows, &rr, &p(64), Some(&same))
            .unwrap_or_default()
            .contains("--flows"));
        let batch = RrSpec {
            batch: 10,
            ..RrSpec::default()
        };
        assert!(one_way_unavailable(&rr_spec, &batch, &p(64), Some(&same))
            .unwrap_or_default()
            .contains("batch"));
    }
}
