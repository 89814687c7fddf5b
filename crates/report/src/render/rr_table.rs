//! The human format's request/response tables: round trip per size, one
//! way, without and with load, and the transaction counts.

use std::io::{self, Write};

use linerate_proto::clock::ClockMethod;
use linerate_proto::rr_core::SpinMode;
use linerate_proto::spec::RrLimit;
use linerate_proto::test_type::Attach;
use linerate_stats::histogram::Summary;
use linerate_stats::units::format_rate;

use super::text::wrap;
use crate::model::{OneWay, Report, RrPhaseReport, RrReport, RrTiming};

/// Microseconds for latency tables: two decimals below 1 ms, fewer above,
/// so a figure below 10 s fits a 7-column cell.
fn us(ns: impl Into<f64>) -> String {
    let v = ns.into() / 1e3;
    match v.abs() {
        a if a < 1e3 => format!("{v:.2}"),
        a if a < 1e4 => format!("{v:.1}"),
        _ => format!("{v:.0}"),
    }
}

/// The message size columns: one `Size` when every response is as large
/// as its request, else `Request` and `Response`.
struct SizeCols {
    symmetric: bool,
}

impl SizeCols {
    fn of(rr: &RrReport) -> SizeCols {
        SizeCols {
            symmetric: rr.phases.iter().all(|p| p.request_size == p.response_size),
        }
    }

    fn header(&self) -> String {
        if self.symmetric {
            format!("{:>7}", "Size")
        } else {
            format!("{:>7} {:>8}", "Request", "Response")
        }
    }

    fn row(&self, p: &RrPhaseReport) -> String {
        if self.symmetric {
            format!("{:>7}", p.request_size)
        } else {
            format!("{:>7} {:>8}", p.request_size, p.response_size)
        }
    }
}

/// Writes `row` for the unloaded phases, then under a heading the loaded
/// ones (the same sizes again with the bulk load running).
fn by_load(
    out: &mut dyn Write,
    rr: &RrReport,
    mut row: impl FnMut(&mut dyn Write, &RrPhaseReport) -> io::Result<()>,
) -> io::Result<()> {
    for p in rr.phases.iter().filter(|p| !p.loaded) {
        row(out, p)?;
    }
    if rr.phases.iter().any(|p| p.loaded) {
        writeln!(out, "under load:")?;
        for p in rr.phases.iter().filter(|p| p.loaded) {
            row(out, p)?;
        }
    }
    Ok(())
}

/// Busy polling (and shared memory, which spins by default): how each side
/// spun, and which flows slept (`sleep`: in `poll(2)`, or on shared
/// memory's futex).
fn spin(out: &mut dyn Write, rr: &RrReport, sleep: &str, crr: bool) -> io::Result<()> {
    let counted = rr
        .phases
        .iter()
        .any(|p| p.client_poll_sleeps.is_some() || p.server_poll_sleeps.is_some());
    if !counted && rr.spin_client.is_none() && rr.spin_server.is_none() {
        // A report from peers that did not say (older versions).
        return Ok(());
    }
    let how = |m: Option<SpinMode>| match m {
        Some(SpinMode::Dedicated) => "without yielding (a CPU per spinning flow)",
        Some(SpinMode::Shared) => "yielding, adaptive budget (CPUs may be shared)",
        // Asked of both sides and not said: a peer from before it was.
        None if rr.busy_poll => "not reported",
        // Not asked: a side spins only where its engine always does
        // (xdp's rings, shared memory); this one blocked.
        None => "no (blocking waits)",
    };
    writeln!(
        out,
        "spinning: client {}; server {}",
        how(rr.spin_client),
        how(rr.spin_server)
    )?;
    // Per flow, and how often the phase's transactions slept on that side.
    // An rr transaction waits once per side when its message arrives
    // whole, so a sleep is a transaction that paid a wake-up: a share. A
    // crr transaction waits more than once per side (the client on its
    // connect, the response and the close; the server on the accept and
    // the request), so it may sleep more than once: a rate.
    let list = |v: &Option<Vec<u64>>, transactions: u64| {
        v.as_ref().map_or("-".to_string(), |v| {
            let flows = v.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
            let per = v.iter().sum::<u64>() as f64 / transactions.max(1) as f64;
            if crr {
                format!("{flows} ({per:.3} per transaction)")
            } else {
                format!("{flows} ({:.2}%)", per * 100.0)
            }
        })
    };
    let any = |v: &Option<Vec<u64>>| v.iter().flatten().any(|&n| n > 0);
    let slept: Vec<String> = rr
        .phases
        .iter()
        .filter(|p| any(&p.client_poll_sleeps) || any(&p.server_poll_sleeps))
        .map(|p| {
            format!(
                "{} B{}: client {}, server {}",
                p.request_size,
                if p.loaded { " loaded" } else { "" },
                list(&p.client_poll_sleeps, p.transactions),
                list(&p.server_poll_sleeps, p.transactions)
            )
        })
        .collect();
    let yielded: Vec<String> = rr
        .phases
        .iter()
        .filter(|p| p.client_spin_yielded.is_some() || p.server_spin_yielded.is_some())
        .map(|p| {
            let n = |v: Option<u32>| v.unwrap_or(0);
            format!(
                "{} B{}: client {}, server {}",
                p.request_size,
                if p.loaded { " loaded" } else { "" },
                n(p.client_spin_yielded),
                n(p.server_spin_yielded)
            )
        })
        .collect();
    if !yielded.is_empty() {
        writeln!(
            out,
            "flows that yielded for a while (their sleeps showed the CPU shared): {}",
            yielded.join("; ")
        )?;
    }
    if !counted {
        writeln!(out, "{sleep} sleeps: not reported")
    } else if slept.is_empty() {
        writeln!(
            out,
            "{sleep} sleeps: none (every wait ended while spinning)"
        )
    } else {
        writeln!(
            out,
            "{sleep} sleeps per flow (waits that outlasted the spin budget; {}):",
            if crr {
                "sleeps per transaction"
            } else {
                "share of transactions"
            }
        )?;
        slept.iter().try_for_each(|s| writeln!(out, "  {s}"))
    }
}

/// Everything above the CPU lines of a request/response report.
pub(super) fn tables(out: &mut dyn Write, r: &Report, rr: &RrReport) -> io::Result<()> {
    // A connection per transaction: its whole exchange is timed.
    let crr = r.test.rules().attach == Attach::PerTransaction;
    how_measured(out, r, rr, crr)?;
    round_trip_table(out, rr, crr)?;
    if !crr {
        one_way_table(out, rr)?;
    }
    if rr.phases.iter().any(|p| p.loaded) {
        load_table(out, rr)?;
    }
    transaction_counts(out, rr)
}

/// How the figures were taken: the limit per size, the timing, busy
/// polling, each side's engine, spin and sleep counts, the clock offset.
fn how_measured(out: &mut dyn Write, r: &Report, rr: &RrReport, crr: bool) -> io::Result<()> {
    let per = match rr.limit {
        RrLimit::TimeMs(ms) => format!("{} s per size", ms as f64 / 1e3),
        RrLimit::Count(n) => format!("{n} transactions per flow per size"),
    };
    let timing = match rr.timing {
        // crr times the whole exchange, connection set-up and close included.
        RrTiming::PerMessage if crr => {
            "each transaction timed (clock read before the connect, after the close)".to_string()
        }
        RrTiming::PerMessage => {
            "each transaction timed (clock read before the request, after the response)"
                .to_string()
        }
        RrTiming::Batch { batch } => format!(
            "timed in batches of {batch} back-to-back transactions (figures are batch means per transaction)"
        ),
    };
    let paced = rr
        .rate
        .map(|n| format!("; paced: at most {n} transactions/s per flow"))
        .unwrap_or_default();
    writeln!(out, "{}", wrap(&format!("{per}{paced}; {timing}"), "; ", 2))?;
    let several = rr.phases.len() > 1;
    for p in &rr.phases {
        if let Some(f) = &p.per_flow {
            // Several sizes, or the same again under load: say which.
            let phase = several.then(|| {
                let load = if p.loaded { ", under load" } else { "" };
                format!(" ({} B{load})", p.request_size)
            });
            let line = per_flow_line(f, phase.as_deref().unwrap_or(""));
            writeln!(out, "{}", wrap(&line, " · ", 7))?;
        }
    }
    if rr.busy_poll {
        let line = format!(
            "busy polling: client: {}; server: {}",
            rr.busy_poll_client.as_deref().unwrap_or("not reported"),
            rr.busy_poll_server.as_deref().unwrap_or("not reported")
        );
        writeln!(out, "{}", wrap(&line, "; ", 2))?;
    }
    for (side, u) in [
        ("client", &rr.engine_use_client),
        ("server", &rr.engine_use_server),
    ] {
        if let Some(u) = u {
            let line = format!("{side} {}", super::engine_use::engine_use_words(u));
            writeln!(out, "{}", wrap(&line, "; ", 2))?;
        }
    }
    if rr.busy_poll || rr.spin_client.is_some() || rr.spin_server.is_some() {
        // Shared memory spins without --busy-poll, and sleeps on a futex.
        let sleep = if r.test.protocol.starts_with("shm") {
            "futex"
        } else {
            "poll(2)"
        };
        spin(out, rr, sleep, crr)?;
    }
    if let Some(c) = &rr.clock {
        let line = match c.method {
            ClockMethod::SameHost => {
                "clock: client and server share one kernel's monotonic clock: offset 0 ns exactly"
                    .to_string()
            }
            ClockMethod::Probes => format!(
                "clock: server − client offset {} µs ± {} µs ({} probes over the control connection; best round trip {} µs)",
                us(c.offset_ns as f64),
                us(c.uncertainty_ns as f64),
                c.probes,
                us(c.delay_ns as f64)
            ),
        };
        writeln!(out, "{}", wrap(&line, "; ", 2))?;
    }
    Ok(())
}

/// Round trip (or crr's whole exchange) per size and load: rate and
/// latency percentiles.
fn round_trip_table(out: &mut dyn Write, rr: &RrReport, crr: bool) -> io::Result<()> {
    writeln!(
        out,
        "{} (µs):",
        if crr {
            "Connect + request + response + close"
        } else {
            "Round trip"
        }
    )?;
    let size = SizeCols::of(rr);
    writeln!(
        out,
        "{} {:>9} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7}",
        size.header(),
        if crr { "Conn/s" } else { "Trans/s" },
        "min",
        "mean",
        "stddev",
        "p50",
        "p90",
        "p99",
        "p99.9",
        "p99.99",
        "max"
    )?;
    by_load(out, rr, |out, p| {
        let l: &Summary = &p.latency;
        writeln!(
            out,
            "{} {:>9.0} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7}",
            size.row(p),
            p.transactions_per_second,
            us(l.min_ns as f64),
            us(l.mean_ns),
            us(l.stddev_ns),
            us(l.p50_ns as f64),
            us(l.p90_ns as f64),
            us(l.p99_ns as f64),
            us(l.p99_9_ns as f64),
            us(l.p99_99_ns as f64),
            us(l.max_ns as f64),
        )
    })
}

/// The transactions each side counted, those lost, the late responses,
/// and each size's errors.
fn transaction_counts(out: &mut dyn Write, rr: &RrReport) -> io::Result<()> {
    let lost: u64 = rr.phases.iter().map(|p| p.lost).sum();
    let late: u64 = rr.phases.iter().map(|p| p.late).sum();
    let line = format!(
        "transactions: client {} · server {}{}{}",
        rr.phases.iter().map(|p| p.transactions).sum::<u64>(),
        rr.phases.iter().map(|p| p.server_transactions).sum::<u64>(),
        if lost > 0 {
            format!(" · {lost} lost (no response within the timeout; left out of the figures)")
        } else {
            String::new()
        },
        if late > 0 {
            format!(" · {late} late responses (came after their request was counted lost; dropped)")
        } else {
            String::new()
        }
    );
    writeln!(out, "{}", wrap(&line, " · ", 2))?;
    for p in &rr.phases {
        for e in &p.errors {
            let line = format!("ERROR ({} bytes): {e}", p.request_size);
            writeln!(out, "{}", wrap(&line, "; ", 2))?;
        }
    }
    Ok(())
}

/// More than one flow, or `--flows`: the one line of per-flow figures
/// (never a row per flow). Event-loop flows' own percentiles come from
/// coarse histograms (up to 6.25% high: `Histogram::coarse`), which the
/// line says. `phase` names the phase when the test ran several.
fn per_flow_line(f: &crate::model::RrPerFlow, phase: &str) -> String {
    let idle = if f.idle_flows > 0 {
        format!(" · {} flows completed none", f.idle_flows)
    } else {
        String::new()
    };
    let within = if f.coarse { " (within 6.25%)" } else { "" };
    format!(
        "[FAIR] {} flows{phase}: Jain's index {:.3} (transactions/s) · per-flow p50 µs{within} min {} \
         median {} max {} · per-flow p99 µs{within} min {} median {} max {}{idle}",
        f.transactions.len(),
        f.jain_index,
        us(f.p50_ns.min),
        us(f.p50_ns.median),
        us(f.p50_ns.max),
        us(f.p99_ns.min),
        us(f.p99_ns.median),
        us(f.p99_ns.max),
    )
}

fn one_way_table(out: &mut dyn Write, rr: &RrReport) -> io::Result<()> {
    writeln!(out, "One way (µs):")?;
    let size = SizeCols::of(rr);
    writeln!(
        out,
        "{}   {:>7} {:>7} {:>7}   {:>7} {:>7} {:>7}   {:>7}",
        size.header(),
        "c→s min",
        "c→s p50",
        "c→s p99",
        "s→c min",
        "s→c p50",
        "s→c p99",
        "±"
    )?;
    let cols = |o: &OneWay| match &o.latency {
        Some(l) => format!(
            "{:>7} {:>7} {:>7}",
            us(l.min_ns as f64),
            us(l.p50_ns as f64),
            us(l.p99_ns as f64)
        ),
        None => format!("{:>23}", "-"),
    };
    let mut reasons: Vec<String> = Vec::new();
    by_load(out, rr, |out, p| {
        let (a, b) = (&p.client_to_server, &p.server_to_client);
        let why = a.unavailable.as_ref().or(b.unavailable.as_ref());
        let tail = match (why, a.uncertainty_ns.or(b.uncertainty_ns)) {
            (Some(w), _) => {
                let i = reasons.iter().position(|r| r == w).unwrap_or_else(|| {
                    reasons.push(w.clone());
                    reasons.len() - 1
                });
                format!("{:>7}", format!("[{}]", i + 1))
            }
            (None, Some(u)) => format!("{:>7}", us(u as f64)),
            (None, None) => String::new(),
        };
        let row = format!("{}   {}   {}   {tail}", size.row(p), cols(a), cols(b));
        writeln!(out, "{}", row.trim_end())?;
        for (dir, o) in [("client→server", a), ("server→client", b)] {
            if o.negative > 0 {
                writeln!(
                    out,
                    "         {dir}: {} samples came out negative (offset error) and are left out",
                    o.negative
                )?;
            }
        }
        Ok(())
    })?;
    for (i, r) in reasons.iter().enumerate() {
        let line = format!("  [{}] no one-way figures: {r}", i + 1);
        writeln!(out, "{}", wrap(&line, "; ", 6))?;
    }
    Ok(())
}

fn load_table(out: &mut dyn Write, rr: &RrReport) -> io::Result<()> {
    match &rr.load {
        Some(l) => writeln!(
            out,
            "Without and with load ({} bulk TCP stream{}, {} received by the server):",
            l.streams,
            if l.streams == 1 { "" } else { "s" },
            format_rate(l.bits_per_second)
        )?,
        None => writeln!(out, "Without and with load:")?,
    }
    let size = SizeCols::of(rr);
    writeln!(
        out,
        "{}  {:>7} {:>7}  {:>7} {:>7}  {:>7} {:>7}  {:>9} {:>9}",
        size.header(),
        "p50",
        "loaded",
        "p99",
        "loaded",
        "p99.9",
        "loaded",
        "Trans/s",
        "loaded"
    )?;
    for idle in rr.phases.iter().filter(|p| !p.loaded) {
        let Some(busy) = rr.phases.iter().find(|p| {
            p.loaded && p.request_size == idle.request_size && p.response_size == idle.response_size
        }) else {
            continue;
        };
        let (a, b) = (&idle.latency, &busy.latency);
        writeln!(
            out,
            "{}  {:>7} {:>7}  {:>7} {:>7}  {:>7} {:>7}  {:>9.0} {:>9.0}",
            size.row(idle),
            us(a.p50_ns as f64),
            us(b.p50_ns as f64),
            us(a.p99_ns as f64),
            us(b.p99_ns as f64),
            us(a.p99_9_ns as f64),
            us(b.p99_9_ns as f64),
            idle.transactions_per_second,
            busy.transactions_per_second
        )?;
    }
    Ok(())
}
