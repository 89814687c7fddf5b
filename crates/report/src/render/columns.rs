//! The human format's interval table: which columns carry figures for this
//! test as the reporting side sees it (issue 13: TCP_INFO columns only
//! where it sends, UDP loss columns only where it receives), their header,
//! and one row per stream or flow sum — within 100 columns.

use linerate_proto::spec::Direction;
use linerate_proto::wire::Side;
use linerate_stats::units::{format_bytes, format_micros, format_nanos, format_rate};

use crate::model::{
    Flow, IntervalRecord, IntervalStreamRecord, IntervalSum, TestInfo, UdpIntervalRecord,
};

/// The columns of an interval table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Columns {
    /// Retr, Cwnd, RTT (the sender's TCP_INFO).
    tcp: bool,
    /// Datagrams this side sent or read.
    udp: bool,
    /// Lost, Recv, Reord, Dup, Corr, Jitter (a UDP receiver's).
    udp_received: bool,
}

impl Columns {
    /// From the start of a test: what the reporting side sends and receives.
    pub(super) fn for_test(i: &TestInfo) -> Columns {
        let (sends, receives) =
            match (i.direction, i.reported_by) {
                (Some(Direction::Forward), Side::Client)
                | (Some(Direction::Reverse), Side::Server) => (true, false),
                (Some(Direction::Forward), Side::Server)
                | (Some(Direction::Reverse), Side::Client) => (false, true),
                (Some(Direction::Bidir), _) | (None, _) => (true, true),
            };
        let udp = i.udp.is_some();
        Columns {
            tcp: !udp && sends,
            udp,
            udp_received: udp && receives,
        }
    }

    /// Without a start: from what the first record carries.
    pub(super) fn for_record(r: &IntervalRecord) -> Columns {
        Columns {
            tcp: r.streams.iter().any(|s| s.tcp.is_some()),
            udp: r.streams.iter().any(|s| s.udp.is_some()),
            udp_received: r
                .streams
                .iter()
                .any(|s| s.udp.as_ref().is_some_and(|u| u.counts.received.is_some())),
        }
    }

    pub(super) fn header(&self) -> String {
        let mut h = format!(
            "[  ID] {:<15} {:>10}  {:>13}",
            "Interval", "Transfer", "Bitrate"
        );
        if self.tcp {
            h.push_str(&format!("  {:>5}  {:>10}  {:>9}", "Retr", "Cwnd", "RTT"));
        }
        if self.udp {
            h.push_str(&format!("  {:>9}", "Datagrams"));
        }
        if self.udp_received {
            h.push_str(&format!(
                " {:>6} {:>7} {:>5} {:>4} {:>4} {:>9}",
                "Lost", "Recv", "Reord", "Dup", "Corr", "Jitter"
            ));
        }
        h
    }

    /// One stream's row; `span` is the interval's "start-end s".
    pub(super) fn stream_row(&self, span: &str, s: &IntervalStreamRecord) -> String {
        let mut row = prefix(&format!("{:>4}", s.id), span, s.bytes, s.bits_per_second);
        if self.tcp {
            match &s.tcp {
                Some(t) => row.push_str(&format!(
                    "  {:>5}  {:>10}  {:>9}",
                    s.retransmits.unwrap_or(0),
                    format_bytes(u64::from(t.snd_cwnd) * u64::from(t.snd_mss)),
                    format_micros(f64::from(t.rtt_us))
                )),
                None => row.push_str(&" ".repeat(30)),
            }
        }
        self.udp_cols(&mut row, s.udp.as_ref());
        row.trim_end().to_string()
    }

    /// A flow's sum row; `flows` is how many flows the interval has (two:
    /// each sum says which way).
    pub(super) fn sum_row(&self, span: &str, s: &IntervalSum, flows: usize) -> String {
        let label = match (flows, s.flow) {
            (1, _) => " SUM",
            (_, Flow::ClientToServer) => " c→s",
            (_, Flow::ServerToClient) => " s→c",
        };
        let mut row = prefix(label, span, s.bytes, s.bits_per_second);
        if self.tcp {
            match s.retransmits {
                Some(r) => row.push_str(&format!("  {r:>5}{}", " ".repeat(23))),
                None => row.push_str(&" ".repeat(30)),
            }
        }
        self.udp_cols(&mut row, s.udp.as_ref());
        row.trim_end().to_string()
    }

    fn udp_cols(&self, row: &mut String, u: Option<&UdpIntervalRecord>) {
        if self.udp {
            match u {
                Some(u) => row.push_str(&format!("  {:>9}", u.counts.datagrams)),
                None => row.push_str(&" ".repeat(11)),
            }
        }
        if self.udp_received {
            if let Some(c) = u.map(|u| &u.counts).filter(|c| c.received.is_some()) {
                row.push_str(&format!(
                    " {:>6} {:>7} {:>5} {:>4} {:>4} {:>9}",
                    c.lost.unwrap_or(0),
                    c.received.unwrap_or(0),
                    c.reordered.unwrap_or(0),
                    c.duplicates.unwrap_or(0),
                    c.corrupt.unwrap_or(0),
                    format_nanos(c.jitter_ns.unwrap_or(0.0))
                ));
            }
        }
    }
}

fn prefix(label: &str, span: &str, bytes: u64, bits_per_second: f64) -> String {
    format!(
        "[{label}] {span} {:>10}  {:>13}",
        format_bytes(bytes),
        format_rate(bits_per_second)
    )
}
