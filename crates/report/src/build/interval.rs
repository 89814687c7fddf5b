//! Interval records: one side's interval measurement with rates, the
//! retransmits of that interval, and per-direction sums.

use std::collections::HashMap;

use linerate_proto::measure::IntervalMeasurement;
use linerate_proto::wire::Side;

use super::cpu::interval_cpu;
use super::figures::{ns_to_s, rate};
use super::udp::{sum_udp_intervals, udp_interval};
use crate::model::{Flow, IntervalRecord, IntervalStreamRecord, IntervalSum};

/// Turns one side's interval measurement into a record; `prev` is the
/// side's previous interval (none for the first), from which this
/// interval's retransmits are counted (TCP_INFO's are totals).
pub fn interval_record(
    side: Side,
    m: &IntervalMeasurement,
    prev: Option<&IntervalMeasurement>,
    flows: &HashMap<u32, Flow>,
) -> IntervalRecord {
    let seconds = ns_to_s(m.end_ns.saturating_sub(m.start_ns));
    let total_before = |id: u32| {
        prev.and_then(|p| p.streams.iter().find(|s| s.id == id))
            .and_then(|s| s.tcp)
            .map_or(0, |t| t.retransmits)
    };
    let streams: Vec<IntervalStreamRecord> = m
        .streams
        .iter()
        .map(|s| IntervalStreamRecord {
            id: s.id,
            flow: flows.get(&s.id).copied().unwrap_or(Flow::ClientToServer),
            bytes: s.bytes,
            bits_per_second: rate(s.bytes, seconds),
            retransmits: s
                .tcp
                .map(|t| t.retransmits.saturating_sub(total_before(s.id))),
            tcp: s.tcp,
            udp: s.udp.as_ref().map(|u| udp_interval(u, seconds)),
        })
        .collect();
    let mut sums = Vec::new();
    for flow in [Flow::ClientToServer, Flow::ServerToClient] {
        let of: Vec<_> = streams.iter().filter(|s| s.flow == flow).collect();
        if of.is_empty() {
            continue;
        }
        let bytes = of.iter().map(|s| s.bytes).sum();
        let retr: Option<u64> = of.iter().map(|s| s.retransmits).sum::<Option<u64>>();
        let udp = sum_udp_intervals(m.streams.iter().filter_map(|s| {
            let f = flows.get(&s.id).copied().unwrap_or(Flow::ClientToServer);
            (f == flow).then_some(s.udp.as_ref()).flatten()
        }));
        sums.push(IntervalSum {
            flow,
            bytes,
            bits_per_second: rate(bytes, seconds),
            retransmits: retr,
            udp: udp.map(|u| udp_interval(&u, seconds)),
        });
    }
    IntervalRecord {
        side,
        start_s: ns_to_s(m.start_ns),
        end_s: ns_to_s(m.end_ns),
        omitted: m.omitted,
        streams,
        sums,
        iface: None,
        cpu: m.cpu.as_ref().map(|c| Box::new(interval_cpu(c))),
    }
}
