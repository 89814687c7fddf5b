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

/// Share of its schedule a paced sender may skip after stalls and still
/// count as having offered the asked rate: the rate a trial credits is then
/// at most this much above what it sent (1/200: 0.5 %).
pub const SLIP_TOLERANCE: u64 = 200;

/// Whether a stream's sender offered the rate it was asked for: it kept up
/// with its schedule and skipped at most 1/[`SLIP_TOLERANCE`] of it after
/// stalls. A trial whose sender skipped more tested a lower rate than the
/// one asked, so it may neither pass nor fail at the asked one (a zero-loss
/// search credited 9.42 Mbit/s through a tbf that carries 9.17 on a loaded
/// host, whose sender had skipped part of its schedule).
pub fn offered_its_rate(u: &UdpSummary) -> bool {
    u.kept_up && u.slipped.saturating_mul(SLIP_TOLERANCE) <= u.issued
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
        kept_up: us.iter().all(|u| offered_its_rate(u)),
        socket_drops: us.iter().map(|u| u.socket_drops).sum(),
        error: r
            .streams
            .iter()
            .flat_map(|s| [&s.sender.error, &s.receiver.error])
            .find_map(|e| e.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 28: a paced sender that skipped part of its schedule after a
    /// stall (the catch-up cap) ends "kept up" (no backlog at the end),
    /// yet it did not offer the asked rate, so its trial must not count
    /// as kept up. The summary is one such stream's, from a loaded run.
    #[test]
    fn issue_28_a_sender_that_skipped_part_of_its_schedule_did_not_offer_its_rate() {
        let json = r#"{"behind":1,"beyond_window":0,"corrupt":0,"duplicates":0,
            "issued":3397,"jitter_ns":2248.4,"kept_up":true,"late":0,"len":1472,
            "loss_percent":0.0,"loss_ppm":0.0,"lost":0,"max_reorder_distance":0,
            "received":3397,"received_bits_per_second":20003351.4,"received_pps":1698.6,
            "receiver_had_final_count":true,"reordered":0,
            "requested_bits_per_second":20000005.1,"requested_gap_ns":588799.8,
            "requested_pps":1698.37,"send_errors":0,"sent":3006,
            "sent_bits_per_second":17692172.1,"sent_pps":1502.3,"slipped":92,
            "socket_drops":0}"#;
        let mut u: UdpSummary = serde_json::from_str(json).expect("a stream's summary");
        assert!(u.kept_up);
        assert!(!offered_its_rate(&u), "92 of 3397 skipped");
        u.slipped = 3397 / SLIP_TOLERANCE;
        assert!(offered_its_rate(&u), "a stall's few skipped");
        u.slipped = 0;
        assert!(offered_its_rate(&u));
        u.kept_up = false;
        assert!(!offered_its_rate(&u));
    }
}
