//! The message test's renderers: human tables and CSV (its JSON is the
//! model's serde form), as a [`Document`].

use std::io::{self, Write};

use linerate_stats::trials::TrialStats;
use linerate_stats::units::{format_count_rate, format_nanos, format_rate, format_size};

use super::export::Document;
use crate::msg::{MsgCell, MsgReport, MIN_TRIAL_NS};

/// The message test's tables and CSV; its JSON is the report itself.
impl Document for MsgReport {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        human(self, out)
    }
    fn csv(&self, out: &mut dyn Write) -> io::Result<()> {
        csv(self, out)
    }
}

fn pm(s: &Option<TrialStats>, f: fn(f64) -> String) -> String {
    match s {
        Some(s) if s.n > 1 => format!("{} ± {}", f(s.mean), f(s.sd)),
        Some(s) => f(s.mean),
        None => "-".into(),
    }
}

fn ci(s: &Option<TrialStats>, f: fn(f64) -> String) -> String {
    match s.and_then(|s| Some((s.ci95_low?, s.ci95_high?))) {
        Some((lo, hi)) => format!("{} … {}", f(lo), f(hi)),
        None => "- (1 trial)".into(),
    }
}

fn ns(v: u64) -> String {
    format_nanos(v as f64)
}

fn human(r: &MsgReport, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "msg: {}", r.ends)?;
    if let Some(w) = &r.waiting {
        writeln!(out, "waiting: {w}")?;
    }
    writeln!(
        out,
        "timer: clock granularity {} ns; a message shorter than {} granularities is timed in batches",
        r.timer.granularity_ns, r.timer.batch_factor
    )?;
    if r.verify.enabled {
        writeln!(
            out,
            "verify: every byte checked by the receiver after its acknowledgement, outside the timed section"
        )?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "{:<11} {:>4} {:>8} {:>6}  {:>22}  {:>30}",
        "transport", "conc", "size", "trials", "messages/s (mean ± sd)", "throughput (mean ± sd)"
    )?;
    let rate = |v: f64| format_count_rate(v);
    let bps = |v: f64| format_rate(v);
    for c in &r.cells {
        let head = format!(
            "{:<11} {:>4} {:>8}",
            c.transport,
            c.concurrency,
            format_size(c.size).replace(' ', "")
        );
        if let Some(why) = &c.skipped {
            writeln!(out, "{head} skipped: {why}")?;
            continue;
        }
        writeln!(
            out,
            "{head} {:>6}  {:>22}  {:>30}",
            c.trials,
            pm(&c.messages_per_sec, rate),
            pm(&c.throughput_bps, bps),
        )?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "{:<11} {:>4} {:>8} {:>5} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7}",
        "per message", "conc", "size", "batch", "min", "mean", "sd", "p50", "p99", "max", "corrupt"
    )?;
    for c in r.cells.iter().filter(|c| c.skipped.is_none()) {
        let Some(l) = &c.latency else { continue };
        writeln!(
            out,
            "{:<11} {:>4} {:>8} {:>5} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7}",
            c.transport,
            c.concurrency,
            format_size(c.size).replace(' ', ""),
            c.batch,
            ns(l.min_ns),
            format_nanos(l.mean_ns),
            format_nanos(l.stddev_ns),
            ns(l.p50_ns),
            ns(l.p99_ns),
            ns(l.max_ns),
            c.corrupt.map_or("-".into(), |n| n.to_string()),
        )?;
    }
    cpu_table(r, out)?;
    notes(r, out)
}

fn cpu_table(r: &MsgReport, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out)?;
    writeln!(
        out,
        "{:<11} {:>4} {:>8}  {:>14}  {:>16}  {:>18}",
        "CPU", "conc", "size", "sender % of CPU", "sender per msg", "receiver per msg"
    )?;
    for c in r.cells.iter().filter(|c| c.skipped.is_none()) {
        let Some(u) = &c.cpu else { continue };
        writeln!(
            out,
            "{:<11} {:>4} {:>8}  {:>14.1}  {:>16}  {:>18}",
            c.transport,
            c.concurrency,
            format_size(c.size).replace(' ', ""),
            u.sender_percent,
            format_nanos(u.sender_ns_per_message),
            format_nanos(u.receiver_ns_per_message),
        )?;
    }
    Ok(())
}

fn notes(r: &MsgReport, out: &mut dyn Write) -> io::Result<()> {
    let mut first = true;
    for c in r.cells.iter().filter(|c| c.skipped.is_none()) {
        let name = format!("{} ×{} {}", c.transport, c.concurrency, format_size(c.size));
        if let Some(w) = short_trials(c) {
            if first {
                writeln!(out)?;
                first = false;
            }
            writeln!(out, "{name}: {w}")?;
        }
        let mut lines = Vec::new();
        if c.trials > 1 {
            lines.push(format!(
                "throughput 95% CI {}",
                ci(&c.throughput_bps, format_rate)
            ));
        }
        if c.batch > 1 {
            lines.push(format!(
                "timed in batches of {} (one message ≈ {} is below {}× the clock granularity); \
                 per-message times are batch means",
                c.batch,
                ns(c.calibration_ns),
                r.timer.batch_factor
            ));
        }
        if c.sent != c.received {
            lines.push(format!(
                "ends disagree: sent {} messages / {} B, received {} / {} B",
                c.sent.messages, c.sent.bytes, c.received.messages, c.received.bytes
            ));
        }
        if lines.is_empty() {
            continue;
        }
        if first {
            writeln!(out)?;
            first = false;
        }
        writeln!(out, "{name}: {}", lines.join("; "))?;
    }
    Ok(())
}

/// The warning for a cell whose trials were too short to time (see
/// [`MIN_TRIAL_NS`]), with the `--messages` that would make them long
/// enough.
fn short_trials(c: &MsgCell) -> Option<String> {
    let t = c.shortest_trial_ns;
    if t == 0 || t >= MIN_TRIAL_NS {
        return None;
    }
    let per_channel = c.messages_per_trial / u64::from(c.concurrency.max(1));
    let need = (u128::from(per_channel.max(1)) * u128::from(MIN_TRIAL_NS)).div_ceil(u128::from(t));
    Some(format!(
        "WARNING: trials too short to time ({} < {}): use --messages {need} or more",
        format_nanos(t as f64),
        format_nanos(MIN_TRIAL_NS as f64)
    ))
}

fn csv(r: &MsgReport, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "transport,concurrency,size,skipped,trials,messages_per_trial,batch,\
         messages_per_sec_mean,messages_per_sec_sd,throughput_bps_mean,throughput_bps_sd,\
         throughput_bps_ci95_low,throughput_bps_ci95_high,latency_min_ns,latency_mean_ns,\
         latency_sd_ns,latency_p50_ns,latency_p90_ns,latency_p99_ns,latency_p99_9_ns,latency_max_ns,\
         corrupt,sent_messages,sent_bytes,received_messages,received_bytes,\
         cpu_sender_percent,cpu_sender_ns_per_message,cpu_receiver_ns_per_message"
    )?;
    let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v}"));
    for c in &r.cells {
        let l = c.latency;
        let m = c.messages_per_sec;
        let t = c.throughput_bps;
        let skipped = c.skipped.as_deref().unwrap_or("").replace(['"', ','], ";");
        writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            c.transport,
            c.concurrency,
            c.size,
            skipped,
            c.trials,
            c.messages_per_trial,
            c.batch,
            opt(m.map(|s| s.mean)),
            opt(m.map(|s| s.sd)),
            opt(t.map(|s| s.mean)),
            opt(t.map(|s| s.sd)),
            opt(t.and_then(|s| s.ci95_low)),
            opt(t.and_then(|s| s.ci95_high)),
            opt(l.map(|l| l.min_ns as f64)),
            opt(l.map(|l| l.mean_ns)),
            opt(l.map(|l| l.stddev_ns)),
            opt(l.map(|l| l.p50_ns as f64)),
            opt(l.map(|l| l.p90_ns as f64)),
            opt(l.map(|l| l.p99_ns as f64)),
            opt(l.map(|l| l.p99_9_ns as f64)),
            opt(l.map(|l| l.max_ns as f64)),
            c.corrupt.map_or(String::new(), |n| n.to_string()),
            c.sent.messages,
            c.sent.bytes,
            c.received.messages,
            c.received.bytes,
            opt(c.cpu.map(|u| u.sender_percent)),
            opt(c.cpu.map(|u| u.sender_ns_per_message)),
            opt(c.cpu.map(|u| u.receiver_ns_per_message)),
        )?;
    }
    Ok(())
}
