//! UDP figures: a stream's summary from its sender's and receiver's
//! counts, a direction's totals, and interval counts summed over streams.

use linerate_proto::measure::{Batching, StreamMeasurement, UdpInterval};

use super::figures::{per_second, ratio};
use crate::model::{
    BatchingSummary, Endpoint, GapSummary, StreamSummary, UdpIntervalRecord, UdpSummary,
};

/// A UDP stream's summary from its sender's and receiver's measurements.
pub(super) fn udp_stream(
    len: u32,
    snd: Option<&StreamMeasurement>,
    rcv: Option<&StreamMeasurement>,
    sender: &Endpoint,
    receiver: &Endpoint,
) -> Option<UdpSummary> {
    let s = snd.and_then(|m| m.udp_send.clone());
    let r = rcv.and_then(|m| m.udp_recv.clone());
    if s.is_none() && r.is_none() {
        return None;
    }
    let s = s.unwrap_or_default();
    let r = r.unwrap_or_default();
    let bits = f64::from(len) * 8.0;
    // The numbers after the warm-up: from the sender's cut by the
    // datagrams' stamps (linerate's), else from the first the receiver
    // counted on (iperf3's rule), so none sent in the warm-up is lost.
    let omitted = match s.omitted_numbers {
        0 => r.omitted_numbers,
        n => n,
    };
    let issued = s.issued.saturating_sub(omitted);
    let lost = issued.saturating_sub(r.received);
    let g = s.gaps;
    Some(UdpSummary {
        len,
        sent: s.datagrams,
        issued,
        send_errors: s.send_errors,
        requested_pps: s.requested_pps,
        requested_bits_per_second: s.requested_pps.map(|p| p * bits),
        requested_gap_ns: s.requested_gap_ns,
        sent_pps: per_second(s.datagrams, sender.seconds),
        sent_bits_per_second: per_second(s.datagrams, sender.seconds) * bits,
        gaps: (g.count > 0).then_some(GapSummary {
            count: g.count,
            mean_ns: g.mean_ns,
            p50_ns: g.p50_ns,
            p99_ns: g.p99_ns,
            max_ns: g.max_ns,
            stalls: s.stalls,
            first_send_ns: Some(s.first_send_ns),
        }),
        kept_up: s.kept_up,
        behind: s.behind,
        slipped: s.slipped,
        received: r.received,
        lost,
        loss_ppm: ratio(lost, issued) * 1e6,
        loss_percent: ratio(lost, issued) * 100.0,
        reordered: r.reordered,
        max_reorder_distance: r.max_reorder_distance,
        duplicates: r.duplicates,
        late: r.late,
        corrupt: r.corrupt,
        beyond_window: r.beyond_window,
        first_corrupt: r.first_corrupt,
        jitter_ns: r.jitter_ns,
        received_pps: per_second(r.received, receiver.seconds),
        received_bits_per_second: per_second(r.received, receiver.seconds) * bits,
        socket_drops: r.socket_drops,
        rcvbuf: r.rcvbuf,
        receiver_coalesce_waits: r.coalesce_waits,
        receiver_had_final_count: r.issued == Some(issued),
        sender_batching: s
            .batching
            .as_ref()
            .map(|b| batching(b, s.datagrams, snd.map_or(0, |m| m.calls))),
        receiver_batching: r
            .batching
            .as_ref()
            .map(|b| batching(b, r.datagrams, rcv.map_or(0, |m| m.calls))),
    })
}

fn batching(b: &Batching, datagrams: u64, calls: u64) -> BatchingSummary {
    BatchingSummary {
        messages_per_call: b.messages_per_call,
        datagrams_per_call: ratio(datagrams, calls),
        gso_segments: b.gso_segments,
        gro: b.gro,
        gro_super_buffers: b.gro_super_buffers,
        notes: b.notes.clone(),
    }
}

/// A flow's UDP totals from its streams' summaries.
pub(super) fn udp_flow(
    of: &[&StreamSummary],
    sender_seconds: f64,
    receiver_seconds: f64,
) -> Option<UdpSummary> {
    let us: Vec<&UdpSummary> = of.iter().filter_map(|s| s.udp.as_ref()).collect();
    let first = us.first()?;
    let sum = |f: fn(&UdpSummary) -> u64| us.iter().map(|u| f(u)).sum::<u64>();
    let sum_opt = |f: fn(&UdpSummary) -> Option<f64>| us.iter().map(|u| f(u)).sum::<Option<f64>>();
    let (issued, received, sent) = (sum(|u| u.issued), sum(|u| u.received), sum(|u| u.sent));
    let lost = issued.saturating_sub(received);
    let bits = f64::from(first.len) * 8.0;
    Some(UdpSummary {
        len: first.len,
        sent,
        issued,
        send_errors: sum(|u| u.send_errors),
        requested_pps: sum_opt(|u| u.requested_pps),
        requested_bits_per_second: sum_opt(|u| u.requested_bits_per_second),
        requested_gap_ns: first.requested_gap_ns,
        sent_pps: per_second(sent, sender_seconds),
        sent_bits_per_second: per_second(sent, sender_seconds) * bits,
        gaps: None,
        kept_up: us.iter().all(|u| u.kept_up),
        behind: sum(|u| u.behind),
        slipped: sum(|u| u.slipped),
        received,
        lost,
        loss_ppm: ratio(lost, issued) * 1e6,
        loss_percent: ratio(lost, issued) * 100.0,
        reordered: sum(|u| u.reordered),
        max_reorder_distance: us.iter().map(|u| u.max_reorder_distance).max().unwrap_or(0),
        duplicates: sum(|u| u.duplicates),
        late: sum(|u| u.late),
        corrupt: sum(|u| u.corrupt),
        beyond_window: sum(|u| u.beyond_window),
        first_corrupt: us.iter().find_map(|u| u.first_corrupt.clone()),
        jitter_ns: us.iter().map(|u| u.jitter_ns).fold(0.0, f64::max),
        received_pps: per_second(received, receiver_seconds),
        received_bits_per_second: per_second(received, receiver_seconds) * bits,
        socket_drops: us.iter().map(|u| u.socket_drops).sum(),
        rcvbuf: first.rcvbuf,
        receiver_coalesce_waits: sum(|u| u.receiver_coalesce_waits),
        receiver_had_final_count: us.iter().all(|u| u.receiver_had_final_count),
        sender_batching: None,
        receiver_batching: None,
    })
}

pub(super) fn udp_interval(u: &UdpInterval, seconds: f64) -> UdpIntervalRecord {
    UdpIntervalRecord {
        counts: u.clone(),
        packets_per_second: per_second(u.datagrams, seconds),
    }
}

/// Sums interval counts over a flow's streams (jitter: the largest).
pub(super) fn sum_udp_intervals<'a>(
    it: impl Iterator<Item = &'a UdpInterval>,
) -> Option<UdpInterval> {
    let mut acc: Option<UdpInterval> = None;
    let add = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    };
    for u in it {
        let a = acc.get_or_insert_with(UdpInterval::default);
        a.datagrams += u.datagrams;
        a.received = add(a.received, u.received);
        a.lost = match (a.lost, u.lost) {
            (None, None) => None,
            (x, y) => Some(x.unwrap_or(0) + y.unwrap_or(0)),
        };
        a.reordered = add(a.reordered, u.reordered);
        a.duplicates = add(a.duplicates, u.duplicates);
        a.late = add(a.late, u.late);
        a.corrupt = add(a.corrupt, u.corrupt);
        a.socket_drops = add(a.socket_drops, u.socket_drops);
        a.jitter_ns = match (a.jitter_ns, u.jitter_ns) {
            (None, None) => None,
            (x, y) => Some(x.unwrap_or(0.0).max(y.unwrap_or(0.0))),
        };
    }
    acc
}
