//! Builds the [`Report`] from the agreed spec and both sides' measurements.
//!
//! This is the only place results are computed; renderers only format.
//! Here: a stream test's report, its streams and per-direction sums;
//! the figures of each part are in the child modules (CPU, UDP, the
//! kernel's view, interval records, sweep trials).

use std::collections::HashMap;

use linerate_proto::measure::{SideResults, StreamMeasurement, TCP_SETTLE_CAP};
use linerate_proto::spec::TestSpec;
use linerate_proto::wire::Side;

pub use crate::rr::{keep_phases_run, phase_record};

mod cpu;
mod figures;
mod interval;
mod kernel;
mod sweep;
mod udp;

pub(crate) use cpu::side_cpu;
use figures::{ns_to_s, rate};
pub use interval::interval_record;
use kernel::{kernel_view, non_segmenting_path};
pub use sweep::sweep_trial;
use udp::{udp_flow, udp_stream};

use crate::model::{
    CpuSummary, Endpoint, Flow, FlowSum, KernelSides, Report, StreamSummary, TestInfo,
    SCHEMA_VERSION,
};

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

/// Maps stream id → flow from the agreed plan.
pub fn flows(spec: &TestSpec) -> HashMap<u32, Flow> {
    spec.stream_plan()
        .iter()
        .map(|p| (p.id, Flow::from_sender(p.sender)))
        .collect()
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
        if u.slipped > 0 {
            notes.push(format!(
                "stream {}: the sender was held up (a busy host?) and skipped {} due datagrams rather than send them in one burst (it catches up at most 10 ms of its schedule at once)",
                s.id, u.slipped
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
    notes.extend(unsettled_note(streams));
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

/// TCP streams whose sender read its `TCP_INFO` with data still
/// unacknowledged ([`TcpInfo::unacked_at_read`]): their retransmits, and
/// the sums', leave out what was resent after that (issue 26).
///
/// [`TcpInfo::unacked_at_read`]: linerate_proto::measure::TcpInfo::unacked_at_read
fn unsettled_note(streams: &[StreamSummary]) -> Option<String> {
    let tcp = streams.iter().filter(|s| s.sender.tcp.is_some()).count();
    let open: Vec<u32> = (streams.iter())
        .filter(|s| s.sender.tcp.is_some_and(|t| t.unacked_at_read))
        .map(|s| s.id)
        .collect();
    let named: Vec<String> = open.iter().take(5).map(u32::to_string).collect();
    let which = match open.len() {
        0 => return None,
        1 => format!("stream {}", open[0]),
        n if n <= 5 => format!("{n} of {tcp} streams ({})", named.join(", ")),
        n => format!(
            "{n} of {tcp} streams ({} and {} more)",
            named.join(", "),
            n - 5
        ),
    };
    Some(format!(
        "retransmits: {which} still had data unacknowledged {} s after the sender's end, when its TCP_INFO was read; segments resent after that are not counted (the kernel's TcpRetransSegs has them)",
        TCP_SETTLE_CAP.as_secs()
    ))
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
    mut notes: Vec<String>,
) -> Report {
    let rr = crate::rr::build(spec, client, server);
    notes.extend(rr.iter().flat_map(crate::rr::notes));
    Report {
        rr,
        ..per_message_report(info, client, server, notes)
    }
}

/// `--flows` (and compare's thread-per-flow rows): how evenly `of` (one
/// direction's flows) shared the path, by each flow's received rate.
pub(crate) fn fairness(of: &[&StreamSummary]) -> Option<crate::model::Fairness> {
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
    use crate::model::IntervalRecord;
    use linerate_proto::measure::IntervalMeasurement;
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

    /// A sender that read its end TCP_INFO with data still unacknowledged
    /// (after waiting the settle cap) counts only what it resent until
    /// then: the report says so, and names the streams; a settled one
    /// gets no note.
    #[test]
    fn issue_26_retransmits_read_before_the_data_was_acknowledged_get_a_note() {
        let side = |unacked: [bool; 2]| SideResults {
            streams: (1..=2)
                .map(|id| StreamMeasurement {
                    id,
                    sender: Some(Side::Client),
                    bytes: 1000,
                    tcp: Some(TcpInfo {
                        retransmits: 7,
                        unacked_at_read: unacked[id as usize - 1],
                        ..TcpInfo::default()
                    }),
                    ..StreamMeasurement::default()
                })
                .collect(),
            ..SideResults::default()
        };
        let spec = TestSpec {
            streams: 2,
            ..TestSpec::default()
        };
        let note = |unacked| {
            let info = TestInfo::from_spec(&spec, Side::Client);
            let r = build_stream(info, &spec, &side(unacked), &SideResults::default(), vec![]);
            assert_eq!(r.sums[0].retransmits, Some(14));
            r.notes.into_iter().find(|n| n.starts_with("retransmits:"))
        };
        let said = note([false, true]).expect("a note");
        assert!(
            said.starts_with("retransmits: stream 2 still had data unacknowledged 5 s after"),
            "{said}"
        );
        let said = note([true, true]).expect("a note");
        assert!(
            said.starts_with("retransmits: 2 of 2 streams (1, 2) still"),
            "{said}"
        );
        assert_eq!(note([false, false]), None);
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
