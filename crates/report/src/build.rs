//! Builds the [`Report`] from the agreed spec and both sides' measurements.
//!
//! This is the only place results are computed; renderers only format.

use std::collections::HashMap;

use linerate_proto::measure::{
    CpuMeasurement, IntervalMeasurement, SideResults, StreamMeasurement,
};
use linerate_proto::spec::{TestKind, TestSpec};
use linerate_proto::wire::Side;

use crate::model::{
    CpuSummary, Endpoint, Flow, FlowSum, IntervalRecord, IntervalStreamRecord, IntervalSum, Report,
    SideCpu, StreamSummary, TestInfo, SCHEMA_VERSION,
};

fn rate(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes as f64 * 8.0 / seconds
    } else {
        0.0
    }
}

fn ns_to_s(ns: u64) -> f64 {
    ns as f64 / 1e9
}

fn endpoint(side: Side, m: Option<&StreamMeasurement>, omit_s: f64) -> Endpoint {
    let m = m.cloned().unwrap_or_default();
    let seconds = (ns_to_s(m.elapsed_ns) - omit_s).max(0.0);
    let measured = m.bytes.saturating_sub(m.omitted_bytes);
    Endpoint {
        side,
        bytes: m.bytes,
        omitted_bytes: m.omitted_bytes,
        seconds,
        bits_per_second: rate(measured, seconds),
        calls: m.calls,
        tcp: m.tcp,
        error: m.error,
    }
}

fn side_cpu(c: &CpuMeasurement, bytes_moved: u64) -> SideCpu {
    let user_s = ns_to_s(c.user_ns);
    let system_s = ns_to_s(c.system_ns);
    let wall_s = ns_to_s(c.wall_ns);
    let used_us = (c.user_ns + c.system_ns) as f64 / 1e3;
    SideCpu {
        scope: c.scope.clone(),
        user_s,
        system_s,
        wall_s,
        percent_of_cpu: if wall_s > 0.0 {
            (user_s + system_s) / wall_s * 100.0
        } else {
            0.0
        },
        host_percent: c
            .host
            .as_ref()
            .filter(|h| h.total_ns > 0)
            .map(|h| h.busy_ns as f64 / h.total_ns as f64 * 100.0),
        host_cpus: c.host.as_ref().map(|h| h.cpus),
        service_demand_us_per_kib: (bytes_moved > 0)
            .then(|| used_us / (bytes_moved as f64 / 1024.0)),
    }
}

/// Maps stream id → flow from the agreed plan.
pub fn flows(spec: &TestSpec) -> HashMap<u32, Flow> {
    spec.stream_plan()
        .iter()
        .map(|p| (p.id, Flow::from_sender(p.sender)))
        .collect()
}

/// Turns one side's interval measurement into a record.
pub fn interval_record(
    side: Side,
    m: &IntervalMeasurement,
    flows: &HashMap<u32, Flow>,
) -> IntervalRecord {
    let seconds = ns_to_s(m.end_ns.saturating_sub(m.start_ns));
    let streams: Vec<IntervalStreamRecord> = m
        .streams
        .iter()
        .map(|s| IntervalStreamRecord {
            id: s.id,
            flow: flows.get(&s.id).copied().unwrap_or(Flow::ClientToServer),
            bytes: s.bytes,
            bits_per_second: rate(s.bytes, seconds),
            tcp: s.tcp,
        })
        .collect();
    let mut sums = Vec::new();
    for flow in [Flow::ClientToServer, Flow::ServerToClient] {
        let of: Vec<_> = streams.iter().filter(|s| s.flow == flow).collect();
        if of.is_empty() {
            continue;
        }
        let bytes = of.iter().map(|s| s.bytes).sum();
        let retr: Option<u64> = of
            .iter()
            .map(|s| s.tcp.map(|t| t.retransmits))
            .sum::<Option<u64>>();
        sums.push(IntervalSum {
            flow,
            bytes,
            bits_per_second: rate(bytes, seconds),
            retransmits: retr,
        });
    }
    IntervalRecord {
        side,
        start_s: ns_to_s(m.start_ns),
        end_s: ns_to_s(m.end_ns),
        omitted: m.omitted,
        streams,
        sums,
    }
}

/// Builds the report. `info` carries the descriptive fields; the rest is
/// computed from `spec` and the two sides' results.
pub fn build(
    info: TestInfo,
    spec: &TestSpec,
    client: &SideResults,
    server: &SideResults,
    notes: Vec<String>,
) -> Report {
    if spec.kind != TestKind::Stream {
        return build_rr(info, spec, client, server, notes);
    }
    let omit_s = spec.omit_ms as f64 / 1e3;
    let flows = flows(spec);
    let find = |r: &SideResults, id: u32| r.streams.iter().find(|s| s.id == id).cloned();
    let streams: Vec<StreamSummary> = spec
        .stream_plan()
        .iter()
        .map(|p| {
            let (snd, rcv) = match p.sender {
                Side::Client => (client, server),
                Side::Server => (server, client),
            };
            StreamSummary {
                id: p.id,
                flow: Flow::from_sender(p.sender),
                sender: endpoint(p.sender, find(snd, p.id).as_ref(), omit_s),
                receiver: endpoint(p.sender.other(), find(rcv, p.id).as_ref(), omit_s),
            }
        })
        .collect();
    let mut sums = Vec::new();
    let mut moved = HashMap::from([(Side::Client, 0u64), (Side::Server, 0u64)]);
    for flow in [Flow::ClientToServer, Flow::ServerToClient] {
        let of: Vec<_> = streams.iter().filter(|s| s.flow == flow).collect();
        if of.is_empty() {
            continue;
        }
        let measured = |e: &Endpoint| e.bytes - e.omitted_bytes.min(e.bytes);
        let sender_bytes: u64 = of.iter().map(|s| s.sender.bytes).sum();
        let receiver_bytes: u64 = of.iter().map(|s| s.receiver.bytes).sum();
        let sender_seconds = of.iter().map(|s| s.sender.seconds).fold(0.0, f64::max);
        let receiver_seconds = of.iter().map(|s| s.receiver.seconds).fold(0.0, f64::max);
        *moved.entry(flow.sender()).or_default() += sender_bytes;
        *moved.entry(flow.sender().other()).or_default() += receiver_bytes;
        sums.push(FlowSum {
            flow,
            streams: of.len() as u32,
            sender_bytes,
            receiver_bytes,
            sender_seconds,
            receiver_seconds,
            sender_bits_per_second: rate(
                of.iter().map(|s| measured(&s.sender)).sum(),
                sender_seconds,
            ),
            receiver_bits_per_second: rate(
                of.iter().map(|s| measured(&s.receiver)).sum(),
                receiver_seconds,
            ),
            retransmits: of
                .iter()
                .map(|s| s.sender.tcp.map(|t| t.retransmits))
                .sum::<Option<u64>>(),
        });
    }
    let cpu = CpuSummary {
        client: side_cpu(&client.cpu, moved[&Side::Client]),
        server: side_cpu(&server.cpu, moved[&Side::Server]),
    };
    let records = |side: Side, r: &SideResults| {
        r.intervals
            .iter()
            .map(|m| interval_record(side, m, &flows))
            .collect()
    };
    let mut notes = notes;
    for (side, r) in [("client", client), ("server", server)] {
        if r.intervals_dropped {
            notes.push(format!(
                "the {side}'s interval records were too many to send and were dropped; totals are complete"
            ));
        }
    }
    Report {
        schema: SCHEMA_VERSION,
        test: info,
        streams,
        sums,
        cpu,
        intervals: records(Side::Client, client),
        server_intervals: records(Side::Server, server),
        notes,
        rr: None,
    }
}

/// The report of a request/response (rr or crr) test: no streams or
/// intervals, an rr section instead.
fn build_rr(
    info: TestInfo,
    spec: &TestSpec,
    client: &SideResults,
    server: &SideResults,
    notes: Vec<String>,
) -> Report {
    Report {
        schema: SCHEMA_VERSION,
        test: info,
        streams: Vec::new(),
        sums: Vec::new(),
        cpu: CpuSummary {
            client: side_cpu(&client.cpu, crate::rr::bytes_moved(client)),
            server: side_cpu(&server.cpu, crate::rr::bytes_moved(server)),
        },
        intervals: Vec::new(),
        server_intervals: Vec::new(),
        notes,
        rr: crate::rr::build(spec, client, server),
    }
}
