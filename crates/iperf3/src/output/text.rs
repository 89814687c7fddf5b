//! iperf3's human output (what `linerate iperf3 -c` prints): the
//! connection lines, one row per stream per interval (`[SUM]` rows with
//! `-P` > 1), then the sender and receiver rows of the whole test.
//! Transfers are in 1024-based units, rates in 1000-based bits/s, as
//! iperf3 prints them.

use linerate_report::model::{Flow, IntervalRecord, Report, StreamSummary};

use super::Connection;
use crate::json::{Params, Protocol as IProtocol, Results};
use crate::Direction as IDirection;

/// iperf3's adaptive unit: three significant figures, the largest unit
/// that keeps the value at or above 1.
fn unit(v: f64, base: f64, units: [&str; 5]) -> String {
    let mut v = v.max(0.0);
    let mut i = 0;
    while v >= base && i < units.len() - 1 {
        v /= base;
        i += 1;
    }
    let digits = if v < 9.995 {
        2
    } else if v < 99.95 {
        1
    } else {
        0
    };
    format!("{v:.digits$} {}", units[i])
}

pub fn bytes(b: u64) -> String {
    unit(
        b as f64,
        1024.0,
        ["Bytes", "KBytes", "MBytes", "GBytes", "TBytes"],
    )
}

pub fn bits(bps: f64) -> String {
    unit(
        bps,
        1000.0,
        [
            "bits/sec",
            "Kbits/sec",
            "Mbits/sec",
            "Gbits/sec",
            "Tbits/sec",
        ],
    )
}

/// `[  1]` or `[SUM]`, with `--bidir`'s role tag (`[TX-C]`: the client
/// sends).
fn tag(id: Option<u32>, flow: Flow, p: &Params) -> String {
    let id = id.map_or_else(|| "SUM".to_owned(), |i| format!("{i:>3}"));
    if p.direction == IDirection::Bidir {
        let role = if flow == Flow::ClientToServer {
            "TX-C"
        } else {
            "RX-C"
        };
        format!("[{id}][{role}]")
    } else {
        format!("[{id}]")
    }
}

fn span(a: f64, b: f64) -> String {
    format!("{:>6}-{:<6} sec", format!("{a:.2}"), format!("{b:.2}"))
}

/// The connection lines and the interval header.
pub fn start(ctx: &Connection, intervals: bool) -> String {
    let p = &ctx.params;
    let mut s = format!("Connecting to host {}, port {}\n", ctx.host, ctx.port);
    if p.direction == IDirection::Reverse {
        s += &format!("Reverse mode, remote host {} is sending\n", ctx.host);
    }
    for c in &ctx.streams {
        s += &format!(
            "[{:>3}] local {} port {} connected to {} port {}\n",
            c.id,
            c.local.ip(),
            c.local.port(),
            c.remote.ip(),
            c.remote.port()
        );
    }
    if intervals {
        s += &header(p, true);
    }
    s
}

fn header(p: &Params, interval: bool) -> String {
    let id = if p.direction == IDirection::Bidir {
        "[ ID][Role]"
    } else {
        "[ ID]"
    };
    let sends = p.direction != IDirection::Reverse;
    let tail = match (p.protocol, sends, interval) {
        (IProtocol::Tcp, true, true) => "         Retr  Cwnd",
        (IProtocol::Tcp, true, false) => "         Retr",
        (IProtocol::Tcp, false, _) => "",
        (IProtocol::Udp, true, true) => "         Total Datagrams",
        (IProtocol::Udp, _, _) => "         Jitter    Lost/Total Datagrams",
    };
    format!("{id} Interval           Transfer     Bitrate{tail}\n")
}

/// The rows of one interval.
pub fn interval(rec: &IntervalRecord, p: &Params) -> String {
    let udp = p.protocol == IProtocol::Udp;
    let mut out = String::new();
    let mut streams: Vec<_> = rec.streams.iter().collect();
    streams.sort_by_key(|s| s.id);
    let omitted = if rec.omitted { "  (omitted)" } else { "" };
    for s in &streams {
        let mut row = format!(
            "{} {}  {}  {}",
            tag(Some(s.id), s.flow, p),
            span(rec.start_s, rec.end_s),
            bytes(s.bytes),
            bits(s.bits_per_second)
        );
        let sends = s.flow == Flow::ClientToServer;
        match (udp, sends) {
            (false, true) => {
                let t = s.tcp.unwrap_or_default();
                row += &format!(
                    "  {:>4}   {}",
                    s.retransmits.unwrap_or(0),
                    bytes(u64::from(t.snd_cwnd) * u64::from(t.snd_mss))
                );
            }
            (true, true) => {
                let n = s.udp.as_ref().map_or(0, |u| u.counts.datagrams);
                row += &format!("  {n}");
            }
            (true, false) => {
                let c = s.udp.as_ref().map(|u| u.counts.clone()).unwrap_or_default();
                let lost = c.lost.unwrap_or(0).max(0) as u64;
                let total = c.received.unwrap_or(c.datagrams) + lost;
                row += &format!(
                    "  {:.3} ms  {lost}/{total} ({}%)",
                    c.jitter_ns.unwrap_or(0.0) / 1e6,
                    pct(lost, total)
                );
            }
            (false, false) => {}
        }
        out += &row;
        out += omitted;
        out.push('\n');
    }
    if p.parallel > 1 {
        for sum in &rec.sums {
            out += &format!(
                "{} {}  {}  {}{omitted}\n",
                tag(None, sum.flow, p),
                span(rec.start_s, rec.end_s),
                bytes(sum.bytes),
                bits(sum.bits_per_second)
            );
        }
    }
    out
}

fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        "0".into()
    } else {
        let v = part as f64 * 100.0 / whole as f64;
        if v == 0.0 {
            "0".into()
        } else {
            format!("{v:.2}")
        }
    }
}

fn summary_rows(st: &StreamSummary, p: &Params, id: Option<u32>, retr: Option<u64>) -> String {
    let udp = p.protocol == IProtocol::Udp;
    let tag = tag(id, st.flow, p);
    let (sent, got) = (st.sender.bytes, st.receiver.bytes);
    let mut s = format!(
        "{tag} {}  {}  {}",
        span(0.0, st.sender.seconds),
        bytes(sent),
        bits(st.sender.bits_per_second)
    );
    if udp {
        let n = st.udp.as_ref().map_or(0, |u| u.issued);
        s += &format!("  0.000 ms  0/{n} (0%)  sender\n");
    } else {
        match retr {
            Some(r) => s += &format!("  {r:>4}             sender\n"),
            None => s += "                   sender\n",
        }
    }
    s += &format!(
        "{tag} {}  {}  {}",
        span(0.0, st.receiver.seconds),
        bytes(got),
        bits(st.receiver.bits_per_second)
    );
    if let (true, Some(u)) = (udp, &st.udp) {
        s += &format!(
            "  {:.3} ms  {}/{} ({}%)  receiver\n",
            u.jitter_ns / 1e6,
            u.lost,
            u.issued,
            pct(u.lost, u.issued)
        );
    } else {
        s += "                  receiver\n";
    }
    s
}

/// Retransmits of a stream's sender: this side's TCP_INFO, or what the
/// server's results said for its sending streams.
fn retransmits(st: &StreamSummary, server: &Results) -> Option<u64> {
    match &st.sender.tcp {
        Some(t) => Some(t.retransmits),
        None => {
            super::json::peer_stream(server, st.id).and_then(|r| u64::try_from(r.retransmits).ok())
        }
    }
}

/// The whole test's rows, the server's output when asked, and the end.
pub fn finish(report: &Report, p: &Params, server: &Results) -> String {
    let server_output = server.server_output_text.clone().or_else(|| {
        server
            .server_output_json
            .as_ref()
            .and_then(|j| serde_json::to_string_pretty(j).ok())
    });
    let mut s = "- - - - - - - - - - - - - - - - - - - - - - - - -\n".to_owned();
    s += &header(p, false);
    let mut streams: Vec<&StreamSummary> = report.streams.iter().collect();
    streams.sort_by_key(|s| s.id);
    for st in &streams {
        s += &summary_rows(st, p, Some(st.id), retransmits(st, server));
    }
    if p.parallel > 1 {
        for flow in [Flow::ClientToServer, Flow::ServerToClient] {
            let of: Vec<&&StreamSummary> = streams.iter().filter(|s| s.flow == flow).collect();
            let Some(first) = of.first() else { continue };
            let mut total = (**first).clone();
            let retr = of
                .iter()
                .map(|st| retransmits(st, server))
                .sum::<Option<u64>>();
            for st in &of[1..] {
                total.sender.bytes += st.sender.bytes;
                total.sender.omitted_bytes += st.sender.omitted_bytes;
                total.sender.bits_per_second += st.sender.bits_per_second;
                total.sender.seconds = total.sender.seconds.max(st.sender.seconds);
                total.receiver.bytes += st.receiver.bytes;
                total.receiver.omitted_bytes += st.receiver.omitted_bytes;
                total.receiver.bits_per_second += st.receiver.bits_per_second;
                total.receiver.seconds = total.receiver.seconds.max(st.receiver.seconds);
            }
            total.udp = report
                .sums
                .iter()
                .find(|f| f.flow == flow)
                .and_then(|f| f.udp.clone());
            s += &summary_rows(&total, p, None, retr);
        }
    }
    for n in &report.notes {
        s += &format!("note: {n}\n");
    }
    if let Some(text) = server_output.as_deref() {
        s += "\nServer output:\n";
        s += text;
        if !text.ends_with('\n') {
            s.push('\n');
        }
    }
    s += "\niperf Done.\n";
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_read_as_iperf3_prints_them() {
        assert_eq!(bytes(1_598_423_040), "1.49 GBytes");
        assert_eq!(bits(12_783_076_363.0), "12.8 Gbits/sec");
        assert_eq!(bits(10_085_055.8), "10.1 Mbits/sec");
        assert_eq!(bytes(2_523_136), "2.41 MBytes");
        assert_eq!(bits(0.0), "0.00 bits/sec");
        assert_eq!(bytes(512), "512 Bytes");
    }
}
