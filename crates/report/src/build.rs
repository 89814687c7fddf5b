//! Builds the [`Report`] from the agreed spec and both sides' measurements.
//!
//! This is the only place results are computed; renderers only format.

use std::collections::HashMap;

use linerate_proto::measure::{
    Batching, CpuMeasurement, IntervalCpu, IntervalMeasurement, KernelUdp, SideResults,
    StreamMeasurement, UdpInterval,
};
use linerate_proto::spec::TestSpec;
use linerate_proto::wire::Side;

pub use crate::rr::{keep_phases_run, phase_record};

use crate::model::{
    BatchingSummary, CpuSummary, Endpoint, Flow, FlowSum, GapSummary, IntervalCpuRecord,
    IntervalRecord, IntervalStreamRecord, IntervalSum, KernelSides, KernelView, Report, SideCpu,
    StreamSummary, TestInfo, UdpIntervalRecord, UdpSummary, SCHEMA_VERSION,
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
    Endpoint {
        side,
        bytes: m.bytes,
        omitted_bytes: m.omitted_bytes,
        seconds,
        bits_per_second: rate(m.bytes, seconds),
        calls: m.calls,
        tcp: m.tcp,
        error: m.error,
        engine_use: m.engine_use,
        busy_poll: m.busy_poll,
        poll_sleeps: m.poll_sleeps,
    }
}

pub(crate) fn side_cpu(c: &CpuMeasurement, bytes_moved: u64) -> SideCpu {
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
        busiest_thread: c.busiest_thread.clone(),
        busiest_thread_percent: c
            .busiest_thread_ns
            .filter(|_| c.wall_ns > 0)
            .map(|b| percent(b, c.wall_ns)),
    }
}

/// `part` ÷ `whole` × 100 (0 for no time).
fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64 * 100.0
    }
}

fn interval_cpu(c: &IntervalCpu) -> IntervalCpuRecord {
    IntervalCpuRecord {
        percent_of_cpu: percent(c.user_ns + c.system_ns, c.wall_ns),
        user_percent: percent(c.user_ns, c.wall_ns),
        system_percent: percent(c.system_ns, c.wall_ns),
        busiest_thread: c.busiest_thread.clone(),
        busiest_thread_percent: percent(c.busiest_thread_ns, c.wall_ns),
    }
}

/// Maps stream id → flow from the agreed plan.
pub fn flows(spec: &TestSpec) -> HashMap<u32, Flow> {
    spec.stream_plan()
        .iter()
        .map(|p| (p.id, Flow::from_sender(p.sender)))
        .collect()
}

fn per_second(n: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        n as f64 / seconds
    } else {
        0.0
    }
}

fn udp_interval(u: &UdpInterval, seconds: f64) -> UdpIntervalRecord {
    UdpIntervalRecord {
        counts: u.clone(),
        packets_per_second: per_second(u.datagrams, seconds),
    }
}

/// Sums interval counts over a flow's streams (jitter: the largest).
fn sum_udp_intervals<'a>(it: impl Iterator<Item = &'a UdpInterval>) -> Option<UdpInterval> {
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

/// A UDP stream's summary from its sender's and receiver's measurements.
fn udp_stream(
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
    // The numbers after the warm-up: from the first the receiver counted on
    // (iperf3's rule), so none sent in the warm-up is counted lost.
    let issued = s.issued.saturating_sub(r.omitted_numbers);
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
        }),
        kept_up: s.kept_up,
        behind: s.behind,
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

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// A flow's UDP totals from its streams' summaries.
fn udp_flow(
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

/// The kernel's counters beside a flow's counted loss, and what they say.
fn kernel_view(
    u: &UdpSummary,
    sender: Option<&KernelUdp>,
    receiver: Option<&KernelUdp>,
    bidir: bool,
    gro: bool,
    gso: bool,
) -> KernelView {
    let snd_snmp = sender.and_then(|k| k.snmp);
    let rcv_snmp = receiver.and_then(|k| k.snmp);
    let v = KernelView {
        counted_lost: u.lost,
        socket_drops: u.socket_drops,
        // A send the kernel refused (ENOBUFS) counts in SndbufErrors too,
        // but the sender offered the same datagram again: not a drop.
        sender_sndbuf_errors: snd_snmp.map(|s| s.sndbuf_errors.saturating_sub(u.send_errors)),
        receiver_rcvbuf_errors: rcv_snmp.map(|s| s.rcvbuf_errors),
        receiver_in_errors: rcv_snmp.map(|s| s.in_errors),
        sender_tx_dropped: sender
            .and_then(|k| k.interface.as_ref())
            .map(|i| i.tx_dropped),
        receiver_rx_dropped: receiver
            .and_then(|k| k.interface.as_ref())
            .map(|i| i.rx_dropped),
        explanation: String::new(),
    };
    let parts = [
        (v.socket_drops, "at the receiving sockets (SO_RXQ_OVFL)"),
        (
            v.sender_sndbuf_errors,
            "on the sending host's queues (Udp SndbufErrors: socket buffer or qdisc full)",
        ),
        (v.sender_tx_dropped, "by the sending interface (tx_dropped)"),
        (
            v.receiver_rx_dropped,
            "by the receiving interface (rx_dropped)",
        ),
    ];
    let explained: u64 = parts.iter().filter_map(|(n, _)| *n).sum();
    let listed: Vec<String> = parts
        .iter()
        .filter_map(|(n, what)| n.filter(|&n| n > 0).map(|n| format!("{n} {what}")))
        .collect();
    let unmeasured: Vec<&str> = parts
        .iter()
        .filter(|(n, _)| n.is_none())
        .map(|(_, what)| *what)
        .collect();
    let mut e = match (u.lost, explained) {
        (0, 0) => "no datagram lost; the kernel counted no drops".to_string(),
        (l, x) if l == x => format!(
            "all {l} lost datagrams are accounted for by the kernel: {}",
            listed.join(", ")
        ),
        (l, 0) => format!(
            "{l} datagrams lost and the kernel counted no drops on either host: they were lost on the path (a switch, a NIC, the far interface) or where these counters cannot see"
        ),
        // A dropped GRO super-buffer, or a GSO run a queue dropped whole,
        // is one drop however many datagrams it held, so the counters
        // cannot add up to the loss.
        (l, x) if l > x && (gro || gso) && x > 0 => format!(
            "{l} datagrams lost; the kernel counted {x} drops ({}), but {}, so its counters fall short of the loss",
            listed.join(", "),
            match (gso, gro) {
                (true, true) => "the sender used GSO and the receiver GRO: the kernel counts a GSO run (up to 128 datagrams) that a queue dropped whole, or a dropped GRO super-buffer (up to 64, 128 on loopback), as one drop",
                (true, false) => "the sender used GSO: the kernel counts a GSO run (up to 128 datagrams) that a queue dropped whole as one drop",
                _ => "the receiver used GRO: the kernel counts a dropped GRO super-buffer (up to 64 datagrams, 128 on loopback) as one drop",
            }
        ),
        (l, x) if l > x => format!(
            "{l} datagrams lost; the kernel accounts for {x} ({}); the other {} were lost on the path or where these counters cannot see",
            listed.join(", "),
            l - x
        ),
        (l, x) => format!(
            "{l} datagrams lost but the kernel counted {x} drops ({}): its counters cover every socket in the namespace and every packet on the interface, not only this test's",
            listed.join(", ")
        ),
    };
    if bidir && explained > 0 {
        e.push_str("; the hosts' counters are shared by both directions");
    }
    if u.send_errors > 0 && v.sender_sndbuf_errors.is_some() {
        e.push_str(&format!(
            "; the sender's {} refused sends (ENOBUFS), which Udp SndbufErrors counts too, were offered again, not lost",
            u.send_errors
        ));
    }
    if !unmeasured.is_empty() {
        e.push_str(&format!("; not measured: drops {}", unmeasured.join(", ")));
    }
    KernelView {
        explanation: e,
        ..v
    }
}

/// The path of a UDP test whose both ends' data interfaces are loopback or
/// veth (issue 28): such a path delivers datagrams without ever cutting a
/// GSO run into packets, so its datagram rates are not NIC packet rates.
/// Only fixed words come back (the peer's driver name is compared, not
/// printed).
fn non_segmenting_path(client: &SideResults, server: &SideResults) -> Option<&'static str> {
    let kind = |r: &SideResults| {
        let i = r.kernel_udp.as_ref()?.interface.as_ref()?;
        match (i.name.as_str(), i.driver.as_deref()) {
            ("lo", _) => Some("loopback"),
            (_, Some("veth")) => Some("veth"),
            _ => None,
        }
    };
    match (kind(client)?, kind(server)?) {
        (a, b) if a == b => Some(if a == "veth" { "a veth pair" } else { a }),
        _ => Some("loopback and veth"),
    }
}

/// Builds the report of a stream test (tcp or udp). `info` carries the
/// descriptive fields; the rest is computed from `spec` and the two sides'
/// results.
pub fn build_stream(
    info: TestInfo,
    spec: &TestSpec,
    client: &SideResults,
    server: &SideResults,
    notes: Vec<String>,
) -> Report {
    let flows = flows(spec);
    let streams = stream_summaries(spec, client, server);
    let (sums, moved) = flow_sums(spec, &streams, client, server);
    let cpu = CpuSummary {
        client: side_cpu(&client.cpu, moved[&Side::Client]),
        server: side_cpu(&server.cpu, moved[&Side::Server]),
    };
    let records = |side: Side, r: &SideResults| {
        r.intervals
            .iter()
            .enumerate()
            .map(|(i, m)| {
                interval_record(side, m, i.checked_sub(1).map(|j| &r.intervals[j]), &flows)
            })
            .collect()
    };
    let mut notes = notes;
    notes.extend(stream_notes(spec, &streams, client, server));
    Report {
        schema: SCHEMA_VERSION,
        test: info,
        streams,
        sums,
        cpu,
        intervals: records(Side::Client, client),
        server_intervals: records(Side::Server, server),
        kernel_udp: (client.kernel_udp.is_some() || server.kernel_udp.is_some()).then(|| {
            KernelSides {
                client: client.kernel_udp.clone(),
                server: server.kernel_udp.clone(),
            }
        }),
        notes,
        rr: None,
        iface: None,
        interrupted: false,
        msg: None,
    }
}

/// One summary per planned stream: its sender's and receiver's figures.
fn stream_summaries(
    spec: &TestSpec,
    client: &SideResults,
    server: &SideResults,
) -> Vec<StreamSummary> {
    let omit_s = spec.omit_ms as f64 / 1e3;
    let find = |r: &SideResults, id: u32| r.streams.iter().find(|s| s.id == id).cloned();
    spec.stream_plan()
        .iter()
        .map(|p| {
            let (snd, rcv) = match p.sender {
                Side::Client => (client, server),
                Side::Server => (server, client),
            };
            let (sm, rm) = (find(snd, p.id), find(rcv, p.id));
            let sender = endpoint(p.sender, sm.as_ref(), omit_s);
            let receiver = endpoint(p.sender.other(), rm.as_ref(), omit_s);
            StreamSummary {
                id: p.id,
                flow: Flow::from_sender(p.sender),
                udp: udp_stream(spec.len, sm.as_ref(), rm.as_ref(), &sender, &receiver),
                sender,
                receiver,
            }
        })
        .collect()
}

/// One sum per direction that carried streams, and the bytes each side
/// moved over the whole test (what its CPU time is held to).
fn flow_sums(
    spec: &TestSpec,
    streams: &[StreamSummary],
    client: &SideResults,
    server: &SideResults,
) -> (Vec<FlowSum>, HashMap<Side, u64>) {
    let mut sums = Vec::new();
    let mut moved = HashMap::from([(Side::Client, 0u64), (Side::Server, 0u64)]);
    for flow in [Flow::ClientToServer, Flow::ServerToClient] {
        let of: Vec<_> = streams.iter().filter(|s| s.flow == flow).collect();
        if of.is_empty() {
            continue;
        }
        // CPU time covers the whole test: so do the bytes it is held to.
        let whole = |e: &Endpoint| e.bytes + e.omitted_bytes;
        *moved.entry(flow.sender()).or_default() +=
            of.iter().map(|s| whole(&s.sender)).sum::<u64>();
        *moved.entry(flow.sender().other()).or_default() +=
            of.iter().map(|s| whole(&s.receiver)).sum::<u64>();
        sums.push(flow_sum(spec, flow, &of, client, server));
    }
    (sums, moved)
}

/// The sum of one direction's streams `of`, with its UDP and kernel views.
fn flow_sum(
    spec: &TestSpec,
    flow: Flow,
    of: &[&StreamSummary],
    client: &SideResults,
    server: &SideResults,
) -> FlowSum {
    let sender_bytes: u64 = of.iter().map(|s| s.sender.bytes).sum();
    let receiver_bytes: u64 = of.iter().map(|s| s.receiver.bytes).sum();
    let sender_seconds = of.iter().map(|s| s.sender.seconds).fold(0.0, f64::max);
    let receiver_seconds = of.iter().map(|s| s.receiver.seconds).fold(0.0, f64::max);
    let udp = udp_flow(of, sender_seconds, receiver_seconds);
    let side_of = |s: Side| match s {
        Side::Client => client.kernel_udp.as_ref(),
        Side::Server => server.kernel_udp.as_ref(),
    };
    let gro = of.iter().any(|s| {
        s.udp
            .as_ref()
            .and_then(|u| u.receiver_batching.as_ref())
            .is_some_and(|b| b.gro)
    });
    let gso = of.iter().any(|s| {
        s.udp
            .as_ref()
            .and_then(|u| u.sender_batching.as_ref())
            .is_some_and(|b| b.gso_segments.is_some())
    });
    let kernel = udp.as_ref().map(|u| {
        kernel_view(
            u,
            side_of(flow.sender()),
            side_of(flow.sender().other()),
            spec.direction == linerate_proto::spec::Direction::Bidir,
            gro,
            gso,
        )
    });
    FlowSum {
        flow,
        streams: of.len() as u32,
        sender_bytes,
        receiver_bytes,
        sender_seconds,
        receiver_seconds,
        sender_bits_per_second: rate(sender_bytes, sender_seconds),
        receiver_bits_per_second: rate(receiver_bytes, receiver_seconds),
        retransmits: of
            .iter()
            .map(|s| s.sender.tcp.map(|t| t.retransmits))
            .sum::<Option<u64>>(),
        udp,
        kernel,
        fairness: spec.flows.and_then(|_| fairness(of)),
    }
}

/// The notes a stream test's figures call for: a sender that fell behind,
/// loss counted without the final count, datagrams beyond the window, a
/// path that never segments, interval records dropped.
fn stream_notes(
    spec: &TestSpec,
    streams: &[StreamSummary],
    client: &SideResults,
    server: &SideResults,
) -> Vec<String> {
    let mut notes = Vec::new();
    for s in streams {
        let Some(u) = &s.udp else { continue };
        if !u.kept_up {
            notes.push(format!(
                "stream {}: the sender could not keep up with the requested rate: {:.0} datagrams/s sent of {:.0} requested ({} due datagrams unsent at the end); the figures are what it achieved",
                s.id,
                u.sent_pps,
                u.requested_pps.unwrap_or(0.0),
                u.behind
            ));
        }
        if !u.receiver_had_final_count {
            notes.push(format!(
                "stream {}: the receiver did not learn the sender's final count before it stopped; loss is counted against the sender's {} issued sequence numbers",
                s.id, u.issued
            ));
        }
        if u.beyond_window > 0 {
            notes.push(format!(
                "stream {}: {} datagrams arrived more than the tracker's window behind the highest number and were counted as lost",
                s.id, u.beyond_window
            ));
        }
    }
    let udp = spec.protocol == linerate_proto::spec::Protocol::Udp;
    if let Some(path) = non_segmenting_path(client, server).filter(|_| udp) {
        notes.push(format!(
            "the data crossed {path}, which hands a GSO run over whole and never splits it into packets: the datagrams/s figures are datagrams delivered, not packets/s a NIC would carry"
        ));
    }
    for (side, r) in [("client", client), ("server", server)] {
        if r.intervals_dropped {
            notes.push(format!(
                "the {side}'s interval records were too many to send and were dropped; totals are complete"
            ));
        }
    }
    notes
}

/// A report with no streams or intervals, for tests measured per message
/// (rr, crr, msg): CPU per KiB of small messages says nothing (issue 13),
/// so the CPU figures carry none; the test's own section says per message.
pub(crate) fn per_message_report(
    info: TestInfo,
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
            client: side_cpu(&client.cpu, 0),
            server: side_cpu(&server.cpu, 0),
        },
        intervals: Vec::new(),
        server_intervals: Vec::new(),
        kernel_udp: None,
        notes,
        rr: None,
        iface: None,
        interrupted: false,
        msg: None,
    }
}

/// The report of a request/response (rr or crr) test: no streams or
/// intervals, an rr section instead.
pub fn build_rr(
    info: TestInfo,
    spec: &TestSpec,
    client: &SideResults,
    server: &SideResults,
    notes: Vec<String>,
) -> Report {
    Report {
        rr: crate::rr::build(spec, client, server),
        ..per_message_report(info, client, server, notes)
    }
}

/// A sweep trial from the report of its test (summed over the flows).
/// A flow's received datagrams per second of its *sender's* time, so a
/// sweep's sent and received rates share one time base and received never
/// exceeds sent (issue 13): the receiver's own seconds start at its first
/// arrival and end at its last, which under heavy loss can be much shorter.
fn received_on_sender_clock(u: &UdpSummary) -> f64 {
    if u.sent == 0 || u.sent_pps <= 0.0 {
        return 0.0;
    }
    u.received as f64 * u.sent_pps / u.sent as f64
}

/// One sweep trial from its test's report. Requested rates are the sender's
/// view; the sweep replaces them with the exact rate the user asked for.
pub fn sweep_trial(len: u32, search: bool, r: &Report) -> crate::model::SweepTrial {
    let us: Vec<&UdpSummary> = r.sums.iter().filter_map(|s| s.udp.as_ref()).collect();
    let sum = |f: fn(&UdpSummary) -> f64| us.iter().map(|u| f(u)).sum::<f64>();
    let sumu = |f: fn(&UdpSummary) -> u64| us.iter().map(|u| f(u)).sum::<u64>();
    let (issued, lost) = (sumu(|u| u.issued), sumu(|u| u.lost));
    crate::model::SweepTrial {
        len,
        search,
        requested_pps: sum(|u| u.requested_pps.unwrap_or(0.0)),
        requested_bits_per_second: sum(|u| u.requested_bits_per_second.unwrap_or(0.0)),
        sent_pps: sum(|u| u.sent_pps),
        sent_bits_per_second: sum(|u| u.sent_bits_per_second),
        received_pps: sum(received_on_sender_clock),
        received_bits_per_second: sum(|u| received_on_sender_clock(u) * f64::from(u.len) * 8.0),
        issued,
        received: sumu(|u| u.received),
        lost,
        loss_ppm: ratio(lost, issued) * 1e6,
        loss_percent: ratio(lost, issued) * 100.0,
        kept_up: us.iter().all(|u| u.kept_up),
        socket_drops: us.iter().map(|u| u.socket_drops).sum(),
        error: r
            .streams
            .iter()
            .flat_map(|s| [&s.sender.error, &s.receiver.error])
            .find_map(|e| e.clone()),
    }
}

/// `--flows`: how evenly `of` (one direction's flows) shared the path,
/// by each flow's received rate.
fn fairness(of: &[&StreamSummary]) -> Option<crate::model::Fairness> {
    use linerate_stats::fairness::{jain_index, min_median_max};
    let rates: Vec<f64> = of.iter().map(|s| s.receiver.bits_per_second).collect();
    let (min, median, max) = min_median_max(&rates)?;
    Some(crate::model::Fairness {
        flows: rates.len() as u32,
        idle_flows: of.iter().filter(|s| s.receiver.bytes == 0).count() as u32,
        jain_index: jain_index(&rates).unwrap_or(0.0),
        min_bits_per_second: min,
        median_bits_per_second: median,
        max_bits_per_second: max,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_proto::measure::{IntervalStream, TcpInfo};

    fn interval(start_ns: u64, retransmits: [u64; 2]) -> IntervalMeasurement {
        IntervalMeasurement {
            start_ns,
            end_ns: start_ns + 1_000_000_000,
            omitted: false,
            streams: (1..=2)
                .map(|id| IntervalStream {
                    id,
                    bytes: 1000,
                    tcp: Some(TcpInfo {
                        retransmits: retransmits[id as usize - 1],
                        ..TcpInfo::default()
                    }),
                    udp: None,
                })
                .collect(),
            cpu: None,
        }
    }

    /// UDP over loopback or veth (issue 28): the report says its datagram
    /// rates are not NIC packet rates; over a NIC, or for TCP, it does not.
    #[test]
    fn issue_28_non_segmenting_paths_say_datagrams_are_not_nic_packets() {
        use linerate_proto::measure::{InterfaceDrops, KernelUdp};
        use linerate_proto::spec::Protocol;
        let side = |name: &str, driver: Option<&str>| SideResults {
            kernel_udp: Some(KernelUdp {
                interface: Some(InterfaceDrops {
                    name: name.into(),
                    driver: driver.map(str::to_owned),
                    ..InterfaceDrops::default()
                }),
                ..KernelUdp::default()
            }),
            ..SideResults::default()
        };
        let udp = TestSpec {
            protocol: Protocol::Udp,
            ..TestSpec::default()
        };
        let note = |spec: &TestSpec, c: &SideResults, s: &SideResults| {
            let info = TestInfo::from_spec(spec, Side::Client);
            build_stream(info, spec, c, s, Vec::new())
                .notes
                .into_iter()
                .find(|n| n.contains("not packets/s a NIC would carry"))
        };
        let lo = side("lo", None);
        let veth = side("va", Some("veth"));
        let nic = side("eth0", Some("ixgbe"));
        let said = note(&udp, &lo, &lo).expect("loopback note");
        assert!(said.starts_with("the data crossed loopback,"), "{said}");
        let said = note(&udp, &veth, &side("vb", Some("veth"))).expect("veth note");
        assert!(said.contains("a veth pair"), "{said}");
        assert_eq!(note(&udp, &nic, &nic), None);
        assert_eq!(note(&udp, &veth, &nic), None, "a NIC on one end");
        assert_eq!(note(&udp, &SideResults::default(), &lo), None, "unknown");
        assert_eq!(note(&TestSpec::default(), &lo, &lo), None, "tcp");
    }

    /// TCP_INFO counts retransmits since the connection began; an interval
    /// row shows that interval's (iperf3's "Retr"), per stream and summed.
    #[test]
    fn issue_13_interval_retransmits_are_per_interval_not_cumulative() {
        let flows = HashMap::from([(1, Flow::ClientToServer), (2, Flow::ClientToServer)]);
        let first = interval(0, [14, 3]);
        let second = interval(1_000_000_000, [20, 3]);
        let a = interval_record(Side::Client, &first, None, &flows);
        let b = interval_record(Side::Client, &second, Some(&first), &flows);
        let retr = |r: &IntervalRecord| -> Vec<Option<u64>> {
            r.streams.iter().map(|s| s.retransmits).collect()
        };
        assert_eq!(retr(&a), [Some(14), Some(3)]);
        assert_eq!(retr(&b), [Some(6), Some(0)]);
        assert_eq!(b.sums[0].retransmits, Some(6));
        // The TCP_INFO snapshot itself still holds the connection's total.
        assert_eq!(b.streams[0].tcp.map(|t| t.retransmits), Some(20));
    }

    /// Request/response reports carry no stream-only fields, no empty
    /// server engine (the start record), and no CPU per KiB of messages.
    #[test]
    fn issue_13_rr_reports_have_no_stream_fields_or_cpu_per_kib() {
        use linerate_proto::spec::{RrSpec, TestKind};
        let spec = TestSpec {
            kind: TestKind::Rr,
            rr: Some(RrSpec::default()),
            ..TestSpec::default()
        };
        let info = TestInfo::from_spec(&spec, Side::Client);
        let json = serde_json::to_value(&info).expect("json");
        for field in [
            "direction",
            "limit",
            "len",
            "omit_s",
            "interval_s",
            "server_engine",
        ] {
            assert!(
                json.get(field).is_none(),
                "rr test info has {field}: {json}"
            );
        }
        let stream = TestInfo::from_spec(&TestSpec::default(), Side::Client);
        let json = serde_json::to_value(&stream).expect("json");
        for field in ["direction", "limit", "len", "omit_s", "interval_s"] {
            assert!(json.get(field).is_some(), "stream test info lacks {field}");
        }
        let mut side = SideResults::default();
        side.cpu.user_ns = 1_000_000;
        side.cpu.wall_ns = 1_000_000_000;
        let report = build_rr(info, &spec, &side, &side, Vec::new());
        assert_eq!(report.cpu.client.service_demand_us_per_kib, None);
        assert_eq!(report.cpu.server.service_demand_us_per_kib, None);
    }
}
