//! Human text for the host models (their `--json` is the serde form).
//! Values a driver or kernel does not report print as "not reported".

use std::io::{self, Write};

use linerate_stats::units::{format_count_rate, format_rate};

use crate::counters::Traffic;
use crate::doctor::{DoctorReport, Status};
use crate::iface::Interface;

fn onoff(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "on",
        Some(false) => "off",
        None => "?",
    }
}

/// One interface as a block of lines.
pub fn interface(out: &mut dyn Write, i: &Interface) -> io::Result<()> {
    let nr = || "not reported".to_string();
    writeln!(
        out,
        "{}: {}{}",
        i.name,
        i.state,
        match i.carrier {
            Some(true) => ", carrier",
            Some(false) => ", no carrier",
            None => "",
        }
    )?;
    writeln!(
        out,
        "  link      speed {}, duplex {}, mtu {}, mac {}",
        i.speed_mbps.map_or_else(nr, |s| format!("{s} Mbit/s")),
        i.duplex.clone().unwrap_or_else(nr),
        i.mtu.map_or_else(nr, |m| m.to_string()),
        i.mac.clone().unwrap_or_else(|| "none".into()),
    )?;
    writeln!(
        out,
        "  addresses {}",
        if i.addresses.is_empty() {
            "none".into()
        } else {
            i.addresses.join(" ")
        }
    )?;
    let o = &i.offloads;
    writeln!(
        out,
        "  driver    {}, queues rx {} tx {}, txqueuelen {}, numa node {}",
        i.driver.clone().unwrap_or_else(nr),
        i.rx_queues,
        i.tx_queues,
        i.tx_queue_len.map_or_else(nr, |q| q.to_string()),
        i.numa_node.map_or_else(nr, |n| n.to_string()),
    )?;
    writeln!(
        out,
        "  offloads  gro {} gso {} tso {} lro {} rx-csum {} tx-csum {} sg {}",
        onoff(o.gro),
        onoff(o.gso),
        onoff(o.tso),
        onoff(o.lro),
        onoff(o.rx_checksum),
        onoff(o.tx_checksum),
        onoff(o.scatter_gather),
    )?;
    if let Some(c) = &i.counters {
        writeln!(
            out,
            "  rx        {} bytes, {} packets, {} dropped, {} errors",
            c.rx_bytes, c.rx_packets, c.rx_dropped, c.rx_errors
        )?;
        writeln!(
            out,
            "  tx        {} bytes, {} packets, {} dropped, {} errors",
            c.tx_bytes, c.tx_packets, c.tx_dropped, c.tx_errors
        )?;
    }
    Ok(())
}

/// Column header of [`traffic_line`].
pub const TRAFFIC_HEADER: &str = "interface         rx bit/s     rx pkt/s     tx bit/s     tx pkt/s  rx drop  tx drop   rx err   tx err";

/// One interval of one interface as a table row.
pub fn traffic_line(t: &Traffic) -> String {
    format!(
        "{:<12} {:>13} {:>12} {:>12} {:>12} {:>8} {:>8} {:>8} {:>8}",
        t.name,
        format_rate(t.rx_bits_per_second),
        format_count_rate(t.rx_packets_per_second),
        format_rate(t.tx_bits_per_second),
        format_count_rate(t.tx_packets_per_second),
        t.delta.rx_dropped,
        t.delta.tx_dropped,
        t.delta.rx_errors,
        t.delta.tx_errors,
    )
}

/// The doctor's findings, warnings first within each block's order.
pub fn doctor(out: &mut dyn Write, r: &DoctorReport) -> io::Result<()> {
    writeln!(
        out,
        "linerate doctor: checks for {} tests{}{}",
        match r.kind {
            crate::doctor::Kind::Tcp => "TCP throughput",
            crate::doctor::Kind::Udp => "UDP throughput",
            crate::doctor::Kind::Latency => "latency",
        },
        r.host
            .as_ref()
            .map_or(String::new(), |h| format!(" to {h}")),
        r.interface
            .as_ref()
            .map_or(String::new(), |d| format!(" (interface {d})")),
    )?;
    for c in &r.checks {
        let tag = match c.status {
            Status::Ok => "ok     ",
            Status::Warn => "WARN   ",
            Status::Unknown => "unknown",
        };
        writeln!(
            out,
            "{tag} {} = {}",
            c.name,
            c.value.as_deref().unwrap_or("not readable")
        )?;
        writeln!(out, "        why: {}", c.why)?;
        if c.status == Status::Warn {
            if let Some(fix) = &c.fix {
                writeln!(out, "        fix: {fix}")?;
            }
        }
    }
    writeln!(
        out,
        "{} warning(s), {} check(s) unreadable here",
        r.warnings(),
        r.checks
            .iter()
            .filter(|c| c.status == Status::Unknown)
            .count()
    )?;
    for a in &r.applied {
        writeln!(out, "applied: {} {} → {}", a.name, a.old, a.new)?;
    }
    for e in &r.apply_errors {
        writeln!(out, "not applied: {e}")?;
    }
    if let Some(cmd) = &r.restore_command {
        writeln!(out, "restore with: {cmd}")?;
    }
    Ok(())
}

/// One reply as ping prints it.
pub fn ping_reply(r: &crate::ping::ReplyRecord) -> String {
    format!(
        "{} bytes from {}: icmp_seq={} ttl={} time={}{}{}",
        r.bytes,
        r.from,
        r.seq,
        r.ttl.map_or_else(|| "?".into(), |t| t.to_string()),
        linerate_stats::units::format_nanos(r.rtt_ns as f64),
        if r.duplicate { " (DUP!)" } else { "" },
        if r.corrupt { " (payload differs)" } else { "" },
    )
}

/// The statistics block after a ping run.
pub fn ping_summary(out: &mut dyn Write, r: &crate::ping::PingReport) -> io::Result<()> {
    use linerate_stats::units::format_nanos as ns;
    writeln!(
        out,
        "--- {} ({}) ping statistics, {} ---",
        r.host,
        r.address,
        match r.method {
            crate::ping::Method::IcmpDatagram => "ICMP datagram socket",
            crate::ping::Method::Raw => "raw socket",
        }
    )?;
    writeln!(
        out,
        "{} sent, {} received, {} duplicates, {} corrupt, {:.1}% loss, {:.2} s{}",
        r.sent,
        r.received,
        r.duplicates,
        r.corrupt,
        r.loss_percent,
        r.seconds,
        r.send_error.as_ref().map_or(String::new(), |e| format!(
            ", {} not sent ({e})",
            r.send_errors
        )),
    )?;
    match &r.rtt {
        Some(s) => writeln!(
            out,
            "rtt min {} mean {} stddev {} | p50 {} p90 {} p99 {} p99.9 {} max {}",
            ns(s.min_ns as f64),
            ns(s.mean_ns),
            ns(s.stddev_ns),
            ns(s.p50_ns as f64),
            ns(s.p90_ns as f64),
            ns(s.p99_ns as f64),
            ns(s.p99_9_ns as f64),
            ns(s.max_ns as f64),
        ),
        None => writeln!(out, "no replies: no round-trip figures"),
    }
}
