//! A sweep trial's row from the report of its test.

use super::figures::ratio;
use crate::model::{Report, SweepTrial, UdpSummary};

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
pub fn sweep_trial(len: u32, search: bool, r: &Report) -> SweepTrial {
    let us: Vec<&UdpSummary> = r.sums.iter().filter_map(|s| s.udp.as_ref()).collect();
    let sum = |f: fn(&UdpSummary) -> f64| us.iter().map(|u| f(u)).sum::<f64>();
    let sumu = |f: fn(&UdpSummary) -> u64| us.iter().map(|u| f(u)).sum::<u64>();
    let (issued, lost) = (sumu(|u| u.issued), sumu(|u| u.lost));
    SweepTrial {
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
        inconclusive: None,
    }
}
