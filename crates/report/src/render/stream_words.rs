//! The words under a stream test's summary rows: UDP sender and receiver
//! figures, a batching engine's calls, the kernel's view, the fairness of
//! many flows, and the TCP columns of a row.

use linerate_proto::measure::TcpInfo;
use linerate_stats::units::{
    format_bytes, format_count_rate, format_micros, format_nanos, format_rate,
};

use crate::model::{BatchingSummary, Fairness, KernelView, UdpSummary};

/// A TCP row's retransmits, congestion window and RTT columns (empty
/// without TCP_INFO).
pub(super) fn tcp_cols(t: Option<&TcpInfo>) -> String {
    match t {
        Some(t) => format!(
            "{:>6}  {:>10}  {:>9}",
            t.retransmits,
            format_bytes(u64::from(t.snd_cwnd) * u64::from(t.snd_mss)),
            format_micros(f64::from(t.rtt_us))
        ),
        None => String::new(),
    }
}

/// A UDP sender's datagrams, rate, gaps between sends and errors.
pub(super) fn udp_sender_words(u: &UdpSummary) -> String {
    let mut s = format!("{} datagrams, {}/s", u.sent, format_count_rate(u.sent_pps));
    if let Some(req) = u.requested_pps {
        s.push_str(&format!(" (requested {}/s)", format_count_rate(req)));
    }
    if let Some(g) = &u.gaps {
        s.push_str(&format!(
            "; gaps mean {} p50 {} p99 {} max {}",
            format_nanos(g.mean_ns),
            format_nanos(g.p50_ns as f64),
            format_nanos(g.p99_ns as f64),
            format_nanos(g.max_ns as f64)
        ));
        if let Some(want) = u.requested_gap_ns {
            s.push_str(&format!(" (requested {})", format_nanos(want)));
        }
    }
    if !u.kept_up {
        s.push_str("; COULD NOT KEEP UP");
    }
    if u.send_errors > 0 {
        s.push_str(&format!("; {} send errors", u.send_errors));
    }
    if let Some(b) = &u.sender_batching {
        s.push_str(&batching_words(b, true));
    }
    s
}

/// What a batching engine did, e.g. "; batch: GSO 44 datagrams/message,
/// ≤ 4 messages/call, 176.0 datagrams/call".
pub(super) fn batching_words(b: &BatchingSummary, sender: bool) -> String {
    let mut s = String::from("; batch: ");
    if sender {
        match b.gso_segments {
            Some(n) => s.push_str(&format!("GSO {n} datagrams/message, ")),
            None => s.push_str("no GSO, "),
        }
    } else if b.gro {
        s.push_str(&format!("GRO on ({} super-buffers), ", b.gro_super_buffers));
    } else {
        s.push_str("no GRO, ");
    }
    s.push_str(&format!(
        "≤ {} messages/call, {:.1} datagrams/call",
        b.messages_per_call, b.datagrams_per_call
    ));
    for n in &b.notes {
        s.push_str(&format!(" ({n})"));
    }
    s
}

/// A UDP receiver's counts: received, lost, reordered, duplicated, late,
/// corrupt, jitter, and the socket's drops.
pub(super) fn udp_receiver_words(u: &UdpSummary) -> String {
    let mut s = format!(
        "{} of {} received, {}/s; lost {} ({:.1} ppm, {:.4}%); reordered {} (max distance {}); duplicates {}; late {}; corrupt {}; jitter {}",
        u.received,
        u.issued,
        format_count_rate(u.received_pps),
        u.lost,
        u.loss_ppm,
        u.loss_percent,
        u.reordered,
        u.max_reorder_distance,
        u.duplicates,
        u.late,
        u.corrupt,
        format_nanos(u.jitter_ns)
    );
    if let Some(d) = u.socket_drops {
        s.push_str(&format!("; socket drops {d}"));
    }
    if let Some(c) = &u.first_corrupt {
        s.push_str(&format!(" (first corrupt: {c})"));
    }
    if let Some(b) = &u.receiver_batching {
        s.push_str(&batching_words(b, false));
    }
    if u.receiver_coalesce_waits > 0 {
        s.push_str(&format!(
            "; coalesced: {} timer waits after emptying the socket",
            u.receiver_coalesce_waits
        ));
    }
    s
}

/// What the kernel's counters say about the direction.
pub(super) fn kernel_words(k: &KernelView) -> String {
    format!("kernel: {}", k.explanation)
}

/// The one line a `--flows` test gets per direction instead of a row per
/// flow: Jain's index and the spread of the flows' received rates.
pub(super) fn fairness_line(f: &Fairness) -> String {
    let idle = if f.idle_flows > 0 {
        format!(" · {} flows moved nothing", f.idle_flows)
    } else {
        String::new()
    };
    format!(
        "[FAIR] {} flows: Jain's index {:.3} · per flow min {} · median {} · max {}{idle}",
        f.flows,
        f.jain_index,
        format_rate(f.min_bits_per_second),
        format_rate(f.median_bits_per_second),
        format_rate(f.max_bits_per_second),
    )
}
