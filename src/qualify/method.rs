//! The arithmetic of the three methods, without I/O: which sizes and rates
//! to try, how headers count, and the figures each RFC defines. The
//! runner (`qualify::run`) feeds these the measured trials.

/// Ethernet's bytes around an IP packet as RFC 2544 counts a frame: the
/// 14-byte header and the 4-byte FCS; the preamble and inter-frame gap
/// (20 bytes more on the wire) are not part of a frame (RFC 2544 §9.1,
/// RFC 1242 §3.17 "frame size").
pub const ETHERNET_FRAME_OVERHEAD: u32 = 18;
/// The UDP header.
pub const UDP_HEADER: u32 = 8;

/// RFC 2544 §9.1: the frame sizes to test on Ethernet.
pub const RFC2544_FRAMES: [u32; 7] = [64, 128, 256, 512, 1024, 1280, 1518];
/// The largest MTU of Ethernet jumbo frames (9216 on most switches).
const JUMBO_MAX: u32 = 9216;
/// `--quick`: the smallest, a middle and the largest standard frame.
pub const RFC2544_QUICK_FRAMES: [u32; 3] = [64, 512, 1518];

/// The IP header's bytes: 20 (IPv4) or 40 (IPv6).
pub fn ip_header(v6: bool) -> u32 {
    if v6 {
        40
    } else {
        20
    }
}

/// The Ethernet frame (RFC 2544's frame size) carrying a UDP datagram of
/// `len` payload bytes.
pub fn frame_len(len: u32, v6: bool) -> u32 {
    len + UDP_HEADER + ip_header(v6) + ETHERNET_FRAME_OVERHEAD
}

/// The datagram sizes for RFC 2544 on a path of `mtu` (IP) bytes: the
/// standard frames that fit (RFC 2544 §9.1), with payloads shorter than
/// `min_len` (linerate's own datagram header) raised to it, and on a
/// path whose MTU exceeds 1500 (jumbo frames, loopback) the largest frame
/// the MTU allows up to 9000 bytes of IP, as §9.1 asks for media with
/// larger frames. Loopback's 64 KiB MTU is no Ethernet: it gets the
/// standard frames only.
pub fn rfc2544_sizes(mtu: u32, v6: bool, min_len: u32, quick: bool) -> Vec<u32> {
    let frames: &[u32] = if quick {
        &RFC2544_QUICK_FRAMES
    } else {
        &RFC2544_FRAMES
    };
    let max_frame = mtu + ETHERNET_FRAME_OVERHEAD;
    let mut sizes: Vec<u32> = frames
        .iter()
        .filter(|&&f| f <= max_frame)
        .filter_map(|&f| {
            let p = f.checked_sub(frame_len(0, v6))?;
            Some(p.max(min_len))
        })
        .collect();
    if (1501..=JUMBO_MAX).contains(&mtu) && !quick {
        sizes.push(mtu.min(9000) - UDP_HEADER - ip_header(v6));
    }
    if sizes.is_empty() {
        sizes.push(mtu.saturating_sub(UDP_HEADER + ip_header(v6)).max(min_len));
    }
    sizes.dedup();
    sizes
}

/// Frames/s of a payload rate at `len` bytes per datagram.
pub fn frames_per_second(payload_bps: f64, len: u32) -> f64 {
    payload_bps / (f64::from(len) * 8.0)
}

/// The Ethernet frame rate (bit/s, RFC 2544 convention) of a payload rate.
pub fn frame_bps(payload_bps: f64, len: u32, v6: bool) -> f64 {
    payload_bps * f64::from(frame_len(len, v6)) / f64::from(len)
}

/// The payload rate that carries `frame_bps` of Ethernet frames.
pub fn payload_bps(frame_bps: f64, len: u32, v6: bool) -> f64 {
    frame_bps * f64::from(len) / f64::from(frame_len(len, v6))
}

/// RFC 2544 §26.3 (frame loss rate): offered loads from 100 % of the
/// throughput's search ceiling down in 10 % steps to 10 %.
pub fn loss_steps(max: f64) -> Vec<f64> {
    (1..=10).rev().map(|k| max * f64::from(k) / 10.0).collect()
}

/// ITU-T Y.1564 §8.1.2 (service configuration test, step load): 25, 50,
/// 75 and 100 % of CIR; then CIR + EIR when an EIR is given; then the
/// traffic policing test's overshoot (§8.1.3: CIR + EIR plus 25 % of CIR
/// when EIR is given, else 125 % of CIR).
pub fn y1564_steps(cir: f64, eir: f64) -> Vec<(Step, f64)> {
    let mut steps: Vec<(Step, f64)> = [25u8, 50, 75, 100]
        .into_iter()
        .map(|p| (Step::Cir(p), cir * f64::from(p) / 100.0))
        .collect();
    if eir > 0.0 {
        steps.push((Step::CirEir, cir + eir));
    }
    steps.push((Step::Overshoot, cir + eir + 0.25 * cir));
    steps
}

/// One step of Y.1564's service configuration test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// A percentage of CIR: every KPI is judged (§8.1.2).
    Cir(u8),
    /// CIR + EIR: only the information rate is judged, and only up to
    /// CIR (the excess may be dropped).
    CirEir,
    /// The policing test: at least CIR must still get through (§8.1.3).
    Overshoot,
}

impl Step {
    pub fn name(self) -> String {
        match self {
            Step::Cir(p) => format!("{p}% CIR"),
            Step::CirEir => "CIR+EIR".into(),
            Step::Overshoot => "overshoot".into(),
        }
    }

    /// Whether loss, delay and delay variation are judged at this step
    /// (Y.1564 judges them on committed traffic only).
    pub fn committed(self) -> bool {
        matches!(self, Step::Cir(_))
    }
}

/// The information rate a step must deliver: the offered rate up to CIR
/// (less `tolerance`, a fraction, for the pacer's granularity), and CIR
/// at the steps above it.
pub fn y1564_ir_floor(step: Step, offered: f64, cir: f64, tolerance: f64) -> f64 {
    let want = match step {
        Step::Cir(_) => offered,
        Step::CirEir | Step::Overshoot => cir,
    };
    want * (1.0 - tolerance)
}

/// RFC 6349 §3.2.3: the bandwidth-delay product, bytes.
pub fn bdp_bytes(bottleneck_bps: f64, rtt_s: f64) -> u64 {
    (bottleneck_bps * rtt_s / 8.0).ceil() as u64
}

/// RFC 6349 §3.3.1: the maximum achievable TCP throughput (payload bit/s)
/// over a bottleneck of `bottleneck_frame_bps` (Ethernet frames): each
/// segment of `mss` bytes travels in a frame of `mtu + 18` bytes.
pub fn max_tcp_bps(bottleneck_frame_bps: f64, mss: u32, mtu: u32) -> f64 {
    bottleneck_frame_bps * f64::from(mss) / f64::from(mtu + ETHERNET_FRAME_OVERHEAD)
}

/// RFC 6349 §4.1: TCP transfer time ratio, actual over ideal transfer
/// time for the same bytes, which is the ideal rate over the actual.
pub fn transfer_time_ratio(actual_bps: f64, ideal_bps: f64) -> Option<f64> {
    (actual_bps > 0.0 && ideal_bps > 0.0).then(|| ideal_bps / actual_bps)
}

/// RFC 6349 §4.2: TCP efficiency, percent: (transmitted bytes −
/// retransmitted bytes) / transmitted bytes × 100.
pub fn tcp_efficiency(sent_bytes: u64, retransmitted_bytes: u64) -> Option<f64> {
    (sent_bytes > 0).then(|| {
        (sent_bytes.saturating_sub(retransmitted_bytes)) as f64 / sent_bytes as f64 * 100.0
    })
}

/// The TCP MSS a path of `mtu` carries (no options).
pub fn mss(mtu: u32, v6: bool) -> u32 {
    mtu.saturating_sub(ip_header(v6) + 20)
}

/// A BDP below one MSS (a µs baseline RTT: loopback, namespaces on one
/// host) means less than one segment fills the path: any window fills
/// the bottleneck and builds a queue there, so the window is set by the
/// floor `window`, not the BDP; said so. `None` for a usual BDP.
pub fn bdp_note(bdp: u64, mss: u32, window: u32) -> Option<String> {
    (bdp < u64::from(mss)).then(|| {
        format!(
            "{bdp} B is below one MSS ({mss} B): the baseline RTT is too short for a window \
             to matter, so the TCP test uses the {window}-byte minimum, which overfills the \
             bottleneck by design; its queue shows as buffer delay"
        )
    })
}

/// RFC 6349 §4.3: buffer delay percentage: (average RTT during the
/// transfer − baseline RTT) / baseline RTT × 100 (both in one unit).
pub fn buffer_delay_percent(avg_rtt_s: f64, baseline_rtt_s: f64) -> Option<f64> {
    (baseline_rtt_s > 0.0).then(|| (avg_rtt_s - baseline_rtt_s) / baseline_rtt_s * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 27: the shaped-router run's BDP (11.7 µs × 10.36 Mbit/s = 16 B)
    /// is below one MSS, and the summary says why the window is 64 KiB.
    #[test]
    fn issue_27_a_bdp_below_one_mss_is_said() {
        let bdp = bdp_bytes(10.36e6, 11.7e-6);
        assert_eq!(bdp, 16);
        let mss = mss(1500, false);
        assert_eq!(mss, 1460);
        let note = bdp_note(bdp, mss, 65_536).expect("said");
        assert!(
            note.contains("below one MSS") && note.contains("65536"),
            "{note}"
        );
        assert_eq!(bdp_note(bdp_bytes(10e6, 0.02), mss, 65_536), None);
        // Buffer delay stays the RFC's figure.
        let p = buffer_delay_percent(15.1e-3 + 11.7e-6, 11.7e-6).expect("baseline");
        assert!((p - 129_059.8).abs() < 1.0, "{p}");
    }

    #[test]
    fn issue_27_rfc2544_sizes_are_the_standard_frames_that_fit() {
        // RFC 2544 §9.1 on a 1500-byte Ethernet MTU: all seven frames;
        // the 64-byte frame's 18-byte payload is raised to the 28-byte
        // datagram header.
        assert_eq!(
            rfc2544_sizes(1500, false, 28, false),
            vec![28, 82, 210, 466, 978, 1234, 1472]
        );
        assert_eq!(rfc2544_sizes(1500, false, 28, true), vec![28, 466, 1472]);
        // A smaller MTU drops the frames that do not fit.
        assert_eq!(rfc2544_sizes(1000, false, 28, true), vec![28, 466]);
        // Jumbo: one frame at the MTU (up to 9000) is added.
        assert_eq!(rfc2544_sizes(9000, false, 28, false).last(), Some(&8972));
        assert_eq!(rfc2544_sizes(9000, true, 28, false).last(), Some(&8952));
        // Loopback is not Ethernet: the standard frames only.
        assert_eq!(rfc2544_sizes(65536, false, 28, false).last(), Some(&1472));
        assert_eq!(frame_len(1472, false), 1518);
    }

    #[test]
    fn issue_27_header_convention_round_trips() {
        let f = frame_bps(1472.0 * 8.0 * 1000.0, 1472, false);
        assert!((f - 1518.0 * 8.0 * 1000.0).abs() < 1e-6);
        assert!((payload_bps(f, 1472, false) - 1472.0 * 8000.0).abs() < 1e-6);
        assert!((frames_per_second(1472.0 * 8.0 * 1000.0, 1472) - 1000.0).abs() < 1e-9);
    }

    #[test]
    fn issue_27_loss_steps_are_tenths_from_the_top() {
        let s = loss_steps(100.0);
        assert_eq!(s.len(), 10);
        assert_eq!(s[0], 100.0);
        assert_eq!(s[9], 10.0);
    }

    #[test]
    fn issue_27_y1564_step_plan() {
        // Y.1564 §8.1.2: 25/50/75/100 % of CIR, CIR+EIR, then overshoot.
        let s = y1564_steps(100.0, 20.0);
        let names: Vec<String> = s.iter().map(|(st, _)| st.name()).collect();
        assert_eq!(
            names,
            [
                "25% CIR",
                "50% CIR",
                "75% CIR",
                "100% CIR",
                "CIR+EIR",
                "overshoot"
            ]
        );
        let rates: Vec<f64> = s.iter().map(|&(_, r)| r).collect();
        assert_eq!(rates, [25.0, 50.0, 75.0, 100.0, 120.0, 145.0]);
        // Without EIR there is no CIR+EIR step.
        assert_eq!(y1564_steps(100.0, 0.0).len(), 5);
        assert_eq!(y1564_steps(100.0, 0.0)[4], (Step::Overshoot, 125.0));
        assert!(Step::Cir(50).committed() && !Step::Overshoot.committed());
        assert_eq!(y1564_ir_floor(Step::Cir(50), 50.0, 100.0, 0.01), 49.5);
        assert_eq!(y1564_ir_floor(Step::Overshoot, 125.0, 100.0, 0.0), 100.0);
    }

    #[test]
    fn issue_27_rfc6349_metrics() {
        // §3.2.3: 100 Mbit/s × 20 ms = 250,000 bytes.
        assert_eq!(bdp_bytes(100e6, 0.020), 250_000);
        // §3.3.1: 1460-byte MSS in 1518-byte frames.
        let ideal = max_tcp_bps(100e6, 1460, 1500);
        assert!((ideal - 100e6 * 1460.0 / 1518.0).abs() < 1e-3);
        // §4.1: half the ideal rate takes twice the ideal time.
        assert_eq!(transfer_time_ratio(50.0, 100.0), Some(2.0));
        assert_eq!(transfer_time_ratio(0.0, 100.0), None);
        // §4.2: 100 bytes sent of which 5 retransmitted: 95 %.
        assert_eq!(tcp_efficiency(100, 5), Some(95.0));
        assert_eq!(tcp_efficiency(0, 0), None);
        // §4.3: 25 ms average over a 20 ms baseline: 25 %.
        assert!((buffer_delay_percent(0.025, 0.020).expect("baseline") - 25.0).abs() < 1e-9);
    }
}
