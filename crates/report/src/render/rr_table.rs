//! The human format's request/response tables: round trip per size, one
//! way, without and with load, and the transaction counts.

use std::io::{self, Write};

use linerate_proto::clock::ClockMethod;
use linerate_proto::rr_core::SpinMode;
use linerate_proto::spec::{RrLimit, TestKind};
use linerate_stats::histogram::Summary;
use linerate_stats::units::format_rate;

use crate::model::{OneWay, Report, RrReport, RrTiming};

/// Microseconds with two decimals, for latency tables.
fn us(ns: impl Into<f64>) -> String {
    format!("{:.2}", ns.into() / 1e3)
}

fn load_word(loaded: bool) -> &'static str {
    if loaded {
        "loaded"
    } else {
        "-"
    }
}

/// Busy polling: how each side spun, and which flows slept in `poll(2)`.
fn spin(out: &mut dyn Write, rr: &RrReport) -> io::Result<()> {
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
        None => "not reported",
    };
    writeln!(
        out,
        "spinning: client {}; server {}",
        how(rr.spin_client),
        how(rr.spin_server)
    )?;
    let list = |v: &Option<Vec<u64>>| {
        v.as_ref().map_or("-".to_string(), |v| {
            v.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
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
                list(&p.client_poll_sleeps),
                list(&p.server_poll_sleeps)
            )
        })
        .collect();
    if !counted {
        writeln!(out, "poll(2) sleeps: not reported")
    } else if slept.is_empty() {
        writeln!(
            out,
            "poll(2) sleeps: none (every wait ended while spinning)"
        )
    } else {
        writeln!(
            out,
            "poll(2) sleeps per flow (waits that outlasted the spin budget): {}",
            slept.join("; ")
        )
    }
}

/// Everything above the CPU lines of a request/response report.
pub(super) fn tables(out: &mut dyn Write, r: &Report, rr: &RrReport) -> io::Result<()> {
    let crr = r.test.kind == TestKind::Crr;
    let per = match rr.limit {
        RrLimit::TimeMs(ms) => format!("{} s per size", ms as f64 / 1e3),
        RrLimit::Count(n) => format!("{n} transactions per flow per size"),
    };
    let timing = match rr.timing {
        RrTiming::PerMessage => {
            "each transaction timed (clock read before the request, after the response)"
                .to_string()
        }
        RrTiming::Batch { batch } => format!(
            "timed in batches of {batch} back-to-back transactions (figures are batch means per transaction)"
        ),
    };
    writeln!(out, "{per}; {timing}")?;
    if rr.busy_poll {
        writeln!(
            out,
            "busy polling: client: {}; server: {}",
            rr.busy_poll_client.as_deref().unwrap_or("not reported"),
            rr.busy_poll_server.as_deref().unwrap_or("not reported")
        )?;
        spin(out, rr)?;
    }
    if let Some(c) = &rr.clock {
        match c.method {
                ClockMethod::SameHost => writeln!(
                    out,
                    "clock: client and server share one kernel's monotonic clock: offset 0 ns exactly"
                )?,
                ClockMethod::Probes => writeln!(
                    out,
                    "clock: server − client offset {} µs ± {} µs ({} probes over the control connection; best round trip {} µs)",
                    us(c.offset_ns as f64),
                    us(c.uncertainty_ns as f64),
                    c.probes,
                    us(c.delay_ns as f64)
                )?,
            }
    }
    writeln!(
        out,
        "{} (µs):",
        if crr {
            "Connect + request + response + close"
        } else {
            "Round trip"
        }
    )?;
    writeln!(
        out,
        "{:>8} {:>8} {:>6} {:>12} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "Request",
        "Response",
        "Load",
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
    for p in &rr.phases {
        let l: &Summary = &p.latency;
        writeln!(
            out,
            "{:>8} {:>8} {:>6} {:>12.0} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            p.request_size,
            p.response_size,
            load_word(p.loaded),
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
        )?;
    }
    if !crr {
        one_way_table(out, rr)?;
    }
    if rr.phases.iter().any(|p| p.loaded) {
        load_table(out, rr)?;
    }
    let lost: u64 = rr.phases.iter().map(|p| p.lost).sum();
    writeln!(
        out,
        "transactions: client {} · server {}{}",
        rr.phases.iter().map(|p| p.transactions).sum::<u64>(),
        rr.phases.iter().map(|p| p.server_transactions).sum::<u64>(),
        if lost > 0 {
            format!(" · {lost} lost (no response within the timeout; left out of the figures)")
        } else {
            String::new()
        }
    )?;
    for p in &rr.phases {
        for e in &p.errors {
            writeln!(out, "ERROR ({} bytes): {e}", p.request_size)?;
        }
    }
    Ok(())
}

fn one_way_table(out: &mut dyn Write, rr: &RrReport) -> io::Result<()> {
    writeln!(out, "One way (µs):")?;
    writeln!(
        out,
        "{:>8} {:>8} {:>6}   {:>9} {:>9} {:>9}   {:>9} {:>9} {:>9}   {:>9}",
        "Request",
        "Response",
        "Load",
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
            "{:>9} {:>9} {:>9}",
            us(l.min_ns as f64),
            us(l.p50_ns as f64),
            us(l.p99_ns as f64)
        ),
        None => format!("{:>29}", "-"),
    };
    let mut reasons: Vec<String> = Vec::new();
    for p in &rr.phases {
        let (a, b) = (&p.client_to_server, &p.server_to_client);
        let why = a.unavailable.as_ref().or(b.unavailable.as_ref());
        let tail = match (why, a.uncertainty_ns.or(b.uncertainty_ns)) {
            (Some(w), _) => {
                let i = reasons.iter().position(|r| r == w).unwrap_or_else(|| {
                    reasons.push(w.clone());
                    reasons.len() - 1
                });
                format!("{:>9}", format!("[{}]", i + 1))
            }
            (None, Some(u)) => format!("{:>9}", us(u as f64)),
            (None, None) => String::new(),
        };
        writeln!(
            out,
            "{:>8} {:>8} {:>6}   {}   {}   {tail}",
            p.request_size,
            p.response_size,
            load_word(p.loaded),
            cols(a),
            cols(b)
        )?;
        for (dir, o) in [("client→server", a), ("server→client", b)] {
            if o.negative > 0 {
                writeln!(
                    out,
                    "         {dir}: {} samples came out negative (offset error) and are left out",
                    o.negative
                )?;
            }
        }
    }
    for (i, r) in reasons.iter().enumerate() {
        writeln!(out, "  [{}] no one-way figures: {r}", i + 1)?;
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
    writeln!(
        out,
        "{:>8} {:>8}   {:>9} {:>9}   {:>9} {:>9}   {:>9} {:>9}   {:>12} {:>12}",
        "Request",
        "Response",
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
            "{:>8} {:>8}   {:>9} {:>9}   {:>9} {:>9}   {:>9} {:>9}   {:>12.0} {:>12.0}",
            idle.request_size,
            idle.response_size,
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
