//! Translations between an iperf3 test and linerate's model: the test spec
//! an iperf3 client's parameters amount to, the results message a linerate
//! server sends back (iperf3's keys, ids and UDP rules), and the client's
//! results as the remote side of linerate's report.

use std::time::Duration;

use linerate_iperf3::json::{Params, Protocol as IProtocol, Results, StreamResults};
use linerate_iperf3::udp::Iperf3Counts;
use linerate_iperf3::{self as iperf3, client_role, server_role, stream_id, Role};
use linerate_proto::measure::{CpuMeasurement, SideResults, StreamMeasurement, UdpRecv, UdpSend};
use linerate_proto::spec::TestSpec;
use linerate_proto::wire::Side;

/// One data stream of an iperf3 test on the server.
#[derive(Debug, Clone)]
pub struct StreamInfo {
    pub slot: iperf3::server::StreamSlot,
}

/// linerate's id for the `index`-th stream: linerate numbers its plan 1, 2,
/// 3, … in the order iperf3 creates streams (client senders first).
pub fn linerate_id(index: u32) -> u32 {
    index + 1
}

fn percent(ns: u64, wall_ns: u64) -> f64 {
    if wall_ns == 0 {
        0.0
    } else {
        ns as f64 / wall_ns as f64 * 100.0
    }
}

/// Datagrams a sending stream sent during the omit period (from the
/// omitted interval records).
fn omitted_datagrams(local: &SideResults, id: u32) -> u64 {
    local
        .intervals
        .iter()
        .filter(|r| r.omitted)
        .flat_map(|r| r.streams.iter().filter(|s| s.id == id))
        .filter_map(|s| s.udp.as_ref().map(|u| u.datagrams))
        .sum()
}

/// The results message this side sends its iperf3 peer (server or client).
pub fn local_results(
    p: &Params,
    local: &SideResults,
    streams: &[StreamInfo],
    congestion: Option<String>,
    ran: Duration,
) -> Results {
    // Every stream's time ends at TEST_END, as iperf3's do.
    let end_time = (ran.as_secs_f64() - f64::from(p.omit)).max(0.0);
    let udp = p.protocol == IProtocol::Udp;
    let sends = streams.iter().any(|s| s.slot.role == Role::Sender);
    let out = streams
        .iter()
        .map(|s| {
            let id = linerate_id(s.slot.index);
            let m = local
                .streams
                .iter()
                .find(|m| m.id == id)
                .cloned()
                .unwrap_or_default();
            let mut r = StreamResults {
                id: s.slot.id,
                bytes: m.bytes,
                retransmits: -1,
                omitted_errors: Some(0),
                omitted_packets: Some(0),
                end_time,
                ..StreamResults::default()
            };
            match s.slot.role {
                Role::Sender if udp => {
                    let sent = m.udp_send.as_ref().map_or(0, |u| u.issued);
                    r.packets = sent as i64;
                    r.omitted_packets = Some(omitted_datagrams(local, id) as i64);
                }
                Role::Sender => {
                    r.retransmits = m.tcp.as_ref().map_or(-1, |t| t.retransmits as i64);
                }
                Role::Receiver if udp => {
                    let c: Iperf3Counts = m
                        .udp_recv
                        .as_ref()
                        .and_then(|u| u.iperf3)
                        .unwrap_or_default();
                    r.packets = c.max_seq as i64;
                    r.errors = c.lost;
                    r.jitter = c.jitter;
                    r.omitted_packets = Some(c.omitted_packets as i64);
                    r.omitted_errors = Some(c.omitted_errors);
                }
                Role::Receiver => {}
            }
            r
        })
        .collect();
    let cpu = &local.cpu;
    Results {
        cpu_util_total: percent(cpu.user_ns + cpu.system_ns, cpu.wall_ns),
        cpu_util_user: percent(cpu.user_ns, cpu.wall_ns),
        cpu_util_system: percent(cpu.system_ns, cpu.wall_ns),
        sender_has_retransmits: match (sends, udp) {
            (false, _) => -1,
            (true, true) => 0,
            (true, false) => 1,
        },
        congestion_used: if udp { None } else { congestion },
        streams: out,
        server_output_text: None,
        server_output_json: None,
    }
}

/// An iperf3 peer's results as its side (`peer`) of linerate's report.
/// Its figures are iperf3's: bytes after the omit period, CPU as
/// percentages, and for a receiving peer iperf3's UDP loss estimate.
pub fn peer_side(p: &Params, client: &Results, peer: Side) -> SideResults {
    let udp = p.protocol == IProtocol::Udp;
    let total = p.direction.stream_count(p.parallel);
    let omit_ns = u64::from(p.omit) * 1_000_000_000;
    let mut wall_ns = 0u64;
    let streams = (0..total)
        .filter_map(|index| {
            let r = client.streams.iter().find(|s| s.id == stream_id(index))?;
            let role = match peer {
                Side::Client => client_role(p.direction, p.parallel, index),
                Side::Server => server_role(p.direction, p.parallel, index),
            };
            let secs = (r.end_time - r.start_time).max(0.0);
            let elapsed_ns = (secs * 1e9) as u64 + omit_ns;
            wall_ns = wall_ns.max(elapsed_ns);
            let mut m = StreamMeasurement {
                id: linerate_id(index),
                sender: Some(match role {
                    Role::Sender => peer,
                    Role::Receiver => peer.other(),
                }),
                bytes: r.bytes,
                elapsed_ns,
                ..StreamMeasurement::default()
            };
            match role {
                // iperf3's packets and errors count from the start, its
                // omitted_* what of them fell in the warm-up: left out here
                // as linerate's own counts leave it out.
                Role::Sender if udp => {
                    let sent = r.packets.max(0) as u64;
                    let omitted = r.omitted_packets.unwrap_or(0).max(0) as u64;
                    m.udp_send = Some(UdpSend {
                        datagrams: sent.saturating_sub(omitted),
                        issued: sent,
                        burst: p.burst.unwrap_or(1),
                        kept_up: true,
                        ..UdpSend::default()
                    });
                }
                Role::Receiver if udp => {
                    let max = r.packets.max(0) as u64;
                    let omitted = r.omitted_packets.unwrap_or(0).clamp(0, r.packets.max(0));
                    let lost = r
                        .errors
                        .saturating_sub(r.omitted_errors.unwrap_or(0))
                        .max(0) as u64;
                    let got = (max - omitted as u64).saturating_sub(lost);
                    m.udp_recv = Some(UdpRecv {
                        datagrams: got,
                        received: got,
                        next_expected: max,
                        omitted_numbers: omitted as u64,
                        jitter_ns: r.jitter * 1e9,
                        ..UdpRecv::default()
                    });
                }
                _ => {}
            }
            Some(m)
        })
        .collect();
    let of = |pct: f64| (pct.max(0.0) / 100.0 * wall_ns as f64) as u64;
    SideResults {
        engine: "iperf3".into(),
        streams,
        cpu: CpuMeasurement {
            scope: "process".into(),
            user_ns: of(client.cpu_util_user),
            system_ns: of(client.cpu_util_system),
            wall_ns,
            host: None,
            ..CpuMeasurement::default()
        },
        ..SideResults::default()
    }
}

/// An iperf3 peer's results as its side of the report, checked as a
/// linerate peer's are ([`linerate_proto::check::check_results`]), on the
/// server (the client's results) and on the client (the server's) alike: a
/// count or rate no host could have measured is refused, never recorded
/// in the metrics or the report.
pub fn checked_peer_side(
    p: &Params,
    spec: &TestSpec,
    results: &Results,
    peer: Side,
) -> Result<SideResults, String> {
    let side = peer_side(p, results, peer);
    let whose = match peer {
        Side::Client => "client",
        Side::Server => "server",
    };
    linerate_proto::check::check_results(spec, &side)
        .map_err(|why| format!("the iperf3 {whose}'s results: {why}"))?;
    Ok(side)
}

/// Gives this side's UDP receivers the peer's count of datagrams sent (an
/// iperf3 peer reports it only in its results), so linerate's exact loss =
/// sent − distinct received.
pub fn apply_sender_counts(local: &mut SideResults, remote: &SideResults) {
    for m in &mut local.streams {
        let sent = remote
            .streams
            .iter()
            .find(|r| r.id == m.id)
            .and_then(|r| r.udp_send.as_ref())
            .map(|u| u.issued);
        if let Some(r) = m.udp_recv.as_mut().filter(|_| sent.is_some()) {
            r.count_loss(sent);
        }
    }
}

/// Notes for streams whose iperf3 sender reported fewer bytes than this
/// side received. TCP cannot deliver bytes that were not sent, so the
/// sender's count is short: iperf3 3.16 and later end each sender thread
/// with `pthread_cancel`, which takes effect inside a blocked `write`
/// (a cancellation point), so what that write had already sent is never
/// added to the stream's count (`iperf_client_api.c`; seen against iperf3
/// 3.21, with iperf3's own server too: a partial block per stream). The receiver's count is the measurement; the
/// note keeps the gap from reading as linerate's.
pub fn short_sender_notes(local: &SideResults, remote: &SideResults, here: Side) -> Vec<String> {
    local
        .streams
        .iter()
        .filter(|m| m.sender.is_some_and(|s| s != here) && m.udp_recv.is_none())
        .filter_map(|m| {
            let sent = remote.streams.iter().find(|r| r.id == m.id)?.bytes;
            (m.bytes > sent).then(|| {
                format!(
                    "stream {}: the iperf3 sender reported {sent} bytes sent, {} fewer than arrived; the receiver's count is the measurement (iperf3 3.16 and later end a sender thread with pthread_cancel, inside its write, and do not count what that write had sent)",
                    m.id,
                    m.bytes - sent
                )
            })
        })
        .collect()
}

/// Lines for the server's report: what the iperf3 client was told for its
/// UDP streams (iperf3's rules), beside linerate's exact counts.
pub fn sent_to_client_notes(p: &Params, sent: &Results, streams: &[StreamInfo]) -> Vec<String> {
    if p.protocol != IProtocol::Udp {
        return Vec::new();
    }
    streams
        .iter()
        .filter(|s| s.slot.role == Role::Receiver)
        .filter_map(|s| {
            let r = sent.streams.iter().find(|r| r.id == s.slot.id)?;
            Some(format!(
                "stream {} (iperf3 id {}): the iperf3 client was told packets {}, lost {}, jitter {:.3} ms (iperf3's rules: packets = highest sequence number, a late or duplicate datagram cancels a loss)",
                linerate_id(s.slot.index),
                s.slot.id,
                r.packets,
                r.errors,
                r.jitter * 1e3
            ))
        })
        .collect()
}

/// How long the server waits for its streams to end after TEST_END.
pub const STOP_WAIT: Duration = Duration::from_secs(10);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_iperf3_sender_count_is_named_and_an_exact_one_is_not() {
        let stream = |id, sender, bytes| StreamMeasurement {
            id,
            sender: Some(sender),
            bytes,
            ..StreamMeasurement::default()
        };
        let side = |streams| SideResults {
            streams,
            ..SideResults::default()
        };
        // Stream 1 the server sends (short by 4096), stream 2 the client
        // sends (equal), stream 3 the server sends (equal).
        let here = side(vec![
            stream(1, Side::Server, 10_000),
            stream(2, Side::Client, 7_000),
            stream(3, Side::Server, 5_000),
        ]);
        let peer = side(vec![
            stream(1, Side::Server, 5_904),
            stream(2, Side::Client, 7_000),
            stream(3, Side::Server, 5_000),
        ]);
        let notes = short_sender_notes(&here, &peer, Side::Client);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0]
                .starts_with("stream 1: the iperf3 sender reported 5904 bytes sent, 4096 fewer"),
            "{}",
            notes[0]
        );
        assert!(short_sender_notes(&peer, &here, Side::Server).is_empty());
    }
    use linerate_iperf3::json::parse_params;
    use linerate_iperf3::spec_of;

    /// Every TCP `-b` an iperf3 client may ask becomes the spec's rate, so
    /// the server's senders are paced to it and `--max-rate`'s watch (the
    /// native server's [`crate::watch::RateWatch`]) holds the client's
    /// senders to it; a rate dropped here ran unpaced past the limit.
    #[test]
    fn issue_28_every_iperf3_tcp_rate_is_paced_and_watched() {
        for (bandwidth, reverse) in [(1, true), (7, true), (8, false), (10_000_000, false)] {
            let json =
                format!(r#"{{"tcp":true,"reverse":{reverse},"time":2,"bandwidth":{bandwidth}}}"#);
            let p = parse_params(json.as_bytes()).expect("valid").params;
            let s = spec_of(&p);
            assert_eq!(s.tcp.rate, Some(bandwidth), "{json}");
        }
        let p = parse_params(br#"{"tcp":true,"time":2,"bandwidth":1}"#)
            .expect("valid")
            .params;
        let spec = spec_of(&p);
        let capped = linerate_proto::limits::ServerLimits {
            max_rate_bps: Some(10_000_000),
            ..Default::default()
        };
        assert!(
            crate::watch::RateWatch::new(&spec, &capped).is_some(),
            "a forward -b 1 test runs unwatched"
        );
        let p = parse_params(br#"{"tcp":true,"time":2}"#)
            .expect("valid")
            .params;
        assert_eq!(spec_of(&p).tcp.rate, None, "-b 0 is unpaced");
    }

    #[test]
    fn client_results_become_the_client_side() {
        let p = parse_params(br#"{"udp":true,"time":2,"parallel":1,"reverse":true,"len":1000}"#)
            .expect("valid")
            .params;
        let r = Results {
            cpu_util_total: 10.0,
            cpu_util_user: 4.0,
            cpu_util_system: 6.0,
            sender_has_retransmits: -1,
            streams: vec![StreamResults {
                id: 1,
                bytes: 500_000,
                retransmits: -1,
                jitter: 0.001,
                errors: 3,
                packets: 503,
                end_time: 2.0,
                ..StreamResults::default()
            }],
            ..Results::default()
        };
        let side = peer_side(&p, &r, Side::Client);
        let m = &side.streams[0];
        assert_eq!((m.id, m.sender, m.bytes), (1, Some(Side::Server), 500_000));
        let u = m.udp_recv.as_ref().expect("receiver");
        assert_eq!((u.received, u.next_expected), (500, 503));
        assert!((u.jitter_ns - 1e6).abs() < 1.0);
        assert_eq!(side.cpu.wall_ns, 2_000_000_000);
        assert_eq!(side.cpu.user_ns, 80_000_000);
    }

    #[test]
    fn issue_28_impossible_iperf3_results_are_refused() {
        let p = Params {
            protocol: IProtocol::Udp,
            len: 1470,
            time: 2,
            parallel: 1,
            ..Params::default()
        };
        let spec = spec_of(&p);
        let results = |bytes: u64, packets: i64| Results {
            streams: vec![StreamResults {
                id: 1,
                bytes,
                packets,
                end_time: 2.0,
                ..StreamResults::default()
            }],
            ..Results::default()
        };
        assert!(checked_peer_side(&p, &spec, &results(2_000_000, 1400), Side::Client).is_ok());
        let why = checked_peer_side(
            &p,
            &spec,
            &results(1 << 20, 9_000_000_000_000_000_000),
            Side::Client,
        )
        .expect_err("9e18 datagrams");
        assert!(why.contains("datagrams"), "{why}");
        // 10^24 bytes/s is beyond any u64 count over 2 s; 10^19 bytes is not possible either.
        let why = checked_peer_side(
            &p,
            &spec,
            &results(10_000_000_000_000_000_000, 1400),
            Side::Client,
        )
        .expect_err("5e18 B/s");
        assert!(why.contains("not a possible rate"), "{why}");
    }
}
