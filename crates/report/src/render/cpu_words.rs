//! CPU in words: a side's summary line, an interval's line, and when a
//! busiest thread means one core was the limit.

use linerate_proto::wire::Side;

use super::text::{side_name, wrap};
use crate::model::{IntervalCpuRecord, IntervalRecord, Report, SideCpu};

/// A busiest thread at or above this share of a core over the test had a
/// core to itself: the report says one core is the limit, unless the test
/// was paced and met its rate ([`core_limit_words`]).
pub(crate) const CORE_LIMIT_PERCENT: f64 = 90.0;

/// Whether the test was paced and every paced sender kept its requested
/// rate: then no thread, however busy, was what limited it.
pub(crate) fn paced_rate_met(r: &Report) -> bool {
    let mut paced = r
        .sums
        .iter()
        .filter_map(|s| s.udp.as_ref())
        .filter(|u| u.requested_pps.is_some())
        .peekable();
    paced.peek().is_some() && paced.all(|u| u.kept_up)
}

/// What the CPU line says of a busiest thread at `busiest` % of a core:
/// from [`CORE_LIMIT_PERCENT`], that one core is the limit, unless the
/// test was paced and met its rate (issue 28: a sender that kept up
/// exactly was told its core was the limit).
pub(crate) fn core_limit_words(busiest: Option<f64>, rate_met: bool) -> Option<&'static str> {
    match busiest {
        Some(p) if p >= CORE_LIMIT_PERCENT && rate_met => {
            Some("the requested rate was met, so that core was not the limit")
        }
        Some(p) if p >= CORE_LIMIT_PERCENT => Some("one core is the limit"),
        _ => None,
    }
}

/// One interval's CPU line, `[ CPU] span side …`, wrapped.
pub(super) fn cpu_interval_line(span: &str, side: Side, c: &IntervalCpuRecord) -> String {
    let line = format!(
        "[ CPU] {span} {} {:.1}% (usr {:.1}, sys {:.1}) · busiest thread {:.1}% {}",
        side_name(side),
        c.percent_of_cpu,
        c.user_percent,
        c.system_percent,
        c.busiest_thread_percent,
        c.busiest_thread
    );
    wrap(&line, " · ", 7)
}
/// A side's CPU line; `intervals` are its interval records (for the
/// highest interval share of its busiest thread); `rate_met`: the test
/// was paced and met its rate ([`paced_rate_met`]).
pub(super) fn cpu_line(
    name: &str,
    c: &SideCpu,
    intervals: &[IntervalRecord],
    rate_met: bool,
) -> String {
    let mut line = format!(
        "  {name:<7} {:>6.1}% of a CPU (user {:.2} s, sys {:.2} s, {})",
        c.percent_of_cpu, c.user_s, c.system_s, c.scope
    );
    if let Some(h) = c.host_percent {
        line.push_str(&format!(
            "; host {h:.1}% of {} CPUs",
            c.host_cpus.unwrap_or(0)
        ));
    }
    if let Some(d) = c.service_demand_us_per_kib {
        line.push_str(&format!("; {d:.3} µs/KiB"));
    }
    if let (Some(t), Some(p)) = (&c.busiest_thread, c.busiest_thread_percent) {
        line.push_str(&format!("; busiest thread {t} {p:.1}% of a core"));
    }
    let peak = intervals
        .iter()
        .filter(|r| !r.omitted)
        .filter_map(|r| r.cpu.as_ref())
        .max_by(|a, b| {
            a.busiest_thread_percent
                .total_cmp(&b.busiest_thread_percent)
        });
    if let Some(p) = peak {
        line.push_str(&format!(
            "; busiest interval: {} {:.1}%",
            p.busiest_thread, p.busiest_thread_percent
        ));
    }
    if let Some(w) = core_limit_words(c.busiest_thread_percent, rate_met) {
        line.push_str("; ");
        line.push_str(w);
    }
    wrap(&line, "; ", 10)
}
