//! iperf3's `-J` document (and `--json-stream` events) from linerate's
//! report of a client test: `start` / `intervals` / `end` with the keys
//! iperf3 3.x writes (3.21's set, which holds every key of the older
//! releases), so scripts that parse iperf3's JSON read linerate's.
//!
//! Every figure comes from linerate's measurements of this run, with
//! iperf3's meaning: bytes after the omit period, `snd_cwnd` in bytes,
//! `rtt` in µs, UDP `packets` = datagrams the sender sent and
//! `lost_packets` = linerate's exact loss (sent − distinct received).
//! Where iperf3 itself writes 0 for a figure its side cannot know (the
//! remote sender's `max_rtt`, …), so does this, and `linerate.notes`
//! says which. `socket` is linerate's stream id (iperf3 writes its file
//! descriptor): unique per stream, the same in `start`, `intervals` and
//! `end`.

use linerate_proto::wire::Side;
use linerate_report::model::{
    Flow, IntervalRecord, IntervalStreamRecord, IntervalSum, Report, SideCpu, StreamSummary,
    TestInfo,
};
use serde_json::{json, Map, Value};

use super::Connection;
use crate::json::{Params, Protocol as IProtocol};
use crate::json::{Results, StreamResults};
use crate::stream_id;
use crate::Direction as IDirection;

/// This side (the drop-in is a client): a stream is "sender" when the
/// client sends on it, as in iperf3.
fn local_sends(flow: Flow) -> bool {
    flow.sender() == Side::Client
}

fn num(v: f64) -> Value {
    // NaN or infinity is not JSON; iperf3 never writes them either.
    if v.is_finite() {
        json!(v)
    } else {
        json!(0)
    }
}

/// `Mon, 23 Nov 2026 12:35:58 GMT` from Unix seconds (iperf3's
/// `timestamp.time`).
pub fn http_date(secs: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = secs / 86_400;
    let ((y, m, d), rem) = linerate_report::civil::split_secs(secs as i64);
    format!(
        "{}, {d:02} {} {y} {:02}:{:02}:{:02} GMT",
        DAYS[(days % 7) as usize],
        MONTHS[(m - 1) as usize],
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The `start` object.
pub fn start(info: &TestInfo, ctx: &Connection) -> Value {
    let p = &ctx.params;
    let udp = p.protocol == IProtocol::Udp;
    let connected: Vec<Value> = ctx
        .streams
        .iter()
        .map(|s| {
            json!({
                "socket": s.id,
                "local_host": s.local.ip().to_string(),
                "local_port": s.local.port(),
                "remote_host": s.remote.ip().to_string(),
                "remote_port": s.remote.port(),
            })
        })
        .collect();
    let mut m = Map::new();
    m.insert("connected".into(), connected.into());
    m.insert("version".into(), ctx.version.clone().into());
    m.insert("system_info".into(), ctx.system_info.clone().into());
    let ms = ctx.connected_unix_ms;
    m.insert(
        "timestamp".into(),
        json!({"time": http_date(ms / 1000), "timesecs": ms / 1000, "timemillisecs": ms}),
    );
    m.insert(
        "connecting_to".into(),
        json!({"host": ctx.host, "port": ctx.port}),
    );
    m.insert("cookie".into(), ctx.cookie.clone().into());
    if !udp {
        if let Some(mss) = ctx.mss {
            m.insert("tcp_mss_default".into(), mss.into());
        }
    }
    m.insert("target_bitrate".into(), p.bandwidth.into());
    m.insert("fq_rate".into(), 0.into());
    m.insert("sock_bufsize".into(), p.window.unwrap_or(0).into());
    if let Some(b) = ctx.sndbuf {
        m.insert("sndbuf_actual".into(), b.into());
    }
    if let Some(b) = ctx.rcvbuf {
        m.insert("rcvbuf_actual".into(), b.into());
    }
    m.insert("test_start".into(), test_start(p, info));
    Value::Object(m)
}

fn test_start(p: &Params, info: &TestInfo) -> Value {
    json!({
        "protocol": if p.protocol == IProtocol::Udp { "UDP" } else { "TCP" },
        "num_streams": p.parallel,
        "blksize": p.len,
        "omit": p.omit,
        "duration": p.time,
        "bytes": p.num,
        "blocks": p.blockcount,
        "reverse": u8::from(p.direction == IDirection::Reverse),
        "tos": 0,
        "target_bitrate": p.bandwidth,
        "bidir": u8::from(p.direction == IDirection::Bidir),
        "fqrate": 0,
        "interval": info.interval_s.unwrap_or(1.0),
        "gso": 0,
        "gro": 0,
    })
}

/// The group a flow's sums go in: iperf3's plain `sum…` keys hold the
/// test's own direction (the client's sending streams; with `-R` the
/// server's), `…_bidir_reverse` the server's sending streams of `--bidir`.
fn suffix(flow: Flow, p: &Params) -> Option<&'static str> {
    match (p.direction, flow) {
        (IDirection::Bidir, Flow::ServerToClient) => Some("_bidir_reverse"),
        (IDirection::Bidir | IDirection::Normal, Flow::ClientToServer) => Some(""),
        (IDirection::Reverse, Flow::ServerToClient) => Some(""),
        _ => None,
    }
}

fn interval_stream(rec: &IntervalRecord, s: &IntervalStreamRecord, udp: bool) -> Value {
    let sender = local_sends(s.flow);
    let mut m = Map::new();
    m.insert("socket".into(), s.id.into());
    m.insert("start".into(), num(rec.start_s));
    m.insert("end".into(), num(rec.end_s));
    m.insert("seconds".into(), num(rec.end_s - rec.start_s));
    m.insert("bytes".into(), s.bytes.into());
    m.insert("bits_per_second".into(), num(s.bits_per_second));
    if !udp && sender {
        let t = s.tcp.unwrap_or_default();
        m.insert("retransmits".into(), s.retransmits.unwrap_or(0).into());
        m.insert(
            "snd_cwnd".into(),
            (u64::from(t.snd_cwnd) * u64::from(t.snd_mss)).into(),
        );
        if let Some(w) = t.snd_wnd {
            m.insert("snd_wnd".into(), w.into());
        }
        m.insert("rtt".into(), t.rtt_us.into());
        m.insert("rttvar".into(), t.rttvar_us.into());
        m.insert("pmtu".into(), t.pmtu.into());
        if let Some(r) = t.reord_seen {
            m.insert("reorder".into(), r.into());
        }
    }
    if udp {
        udp_interval_fields(&mut m, s.udp.as_ref().map(|u| &u.counts), sender);
    }
    m.insert("omitted".into(), rec.omitted.into());
    m.insert("sender".into(), sender.into());
    Value::Object(m)
}

/// iperf3's UDP interval keys: a sender's datagrams; a receiver's jitter
/// and loss (packets = distinct received + lost in the interval).
fn udp_interval_fields(
    m: &mut Map<String, Value>,
    c: Option<&linerate_proto::measure::UdpInterval>,
    sender: bool,
) {
    let c = c.cloned().unwrap_or_default();
    if sender {
        m.insert("packets".into(), c.datagrams.into());
        return;
    }
    let lost = c.lost.unwrap_or(0).max(0) as u64;
    let packets = c.received.unwrap_or(c.datagrams) + lost;
    m.insert("jitter_ms".into(), num(c.jitter_ns.unwrap_or(0.0) / 1e6));
    m.insert("lost_packets".into(), lost.into());
    m.insert("packets".into(), packets.into());
    m.insert("lost_percent".into(), num(percent(lost, packets)));
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

fn interval_sum(rec: &IntervalRecord, sum: &IntervalSum, udp: bool) -> Value {
    let sender = local_sends(sum.flow);
    let mut m = Map::new();
    m.insert("start".into(), num(rec.start_s));
    m.insert("end".into(), num(rec.end_s));
    m.insert("seconds".into(), num(rec.end_s - rec.start_s));
    m.insert("bytes".into(), sum.bytes.into());
    m.insert("bits_per_second".into(), num(sum.bits_per_second));
    if !udp && sender {
        m.insert("retransmits".into(), sum.retransmits.unwrap_or(0).into());
    }
    if udp {
        udp_interval_fields(&mut m, sum.udp.as_ref().map(|u| &u.counts), sender);
    }
    m.insert("omitted".into(), rec.omitted.into());
    m.insert("sender".into(), sender.into());
    Value::Object(m)
}

/// One element of `intervals` (one `--json-stream` interval event).
pub fn interval(rec: &IntervalRecord, p: &Params) -> Value {
    let udp = p.protocol == IProtocol::Udp;
    let mut streams: Vec<&IntervalStreamRecord> = rec.streams.iter().collect();
    streams.sort_by_key(|s| s.id);
    let mut m = Map::new();
    m.insert(
        "streams".into(),
        streams
            .iter()
            .map(|s| interval_stream(rec, s, udp))
            .collect::<Vec<_>>()
            .into(),
    );
    for sum in &rec.sums {
        if let Some(sfx) = suffix(sum.flow, p) {
            m.insert(format!("sum{sfx}"), interval_sum(rec, sum, udp));
        }
    }
    Value::Object(m)
}

/// TCP_INFO over a locally sending stream's intervals: (max cwnd bytes,
/// max snd_wnd, max, min and mean rtt µs), or `None` when this side
/// sampled none (a remote sender).
fn tcp_extremes(report: &Report, id: u32) -> Option<(u64, u64, u32, u32, u64)> {
    let infos: Vec<_> = report
        .intervals
        .iter()
        .flat_map(|r| r.streams.iter())
        .filter(|s| s.id == id)
        .filter_map(|s| s.tcp.as_ref())
        .collect();
    if infos.is_empty() {
        return None;
    }
    let cwnd = infos
        .iter()
        .map(|t| u64::from(t.snd_cwnd) * u64::from(t.snd_mss))
        .max()?;
    let wnd = infos
        .iter()
        .map(|t| u64::from(t.snd_wnd.unwrap_or(0)))
        .max()?;
    let max_rtt = infos.iter().map(|t| t.rtt_us).max()?;
    let min_rtt = infos.iter().map(|t| t.rtt_us).min()?;
    let mean = infos.iter().map(|t| u64::from(t.rtt_us)).sum::<u64>() / infos.len() as u64;
    Some((cwnd, wnd, max_rtt, min_rtt, mean))
}

/// The peer's results for linerate's stream `id` (linerate numbers
/// streams 1, 2, … in iperf3's creation order).
pub(super) fn peer_stream(server: &Results, id: u32) -> Option<&StreamResults> {
    let want = stream_id(id.checked_sub(1)?);
    server.streams.iter().find(|s| s.id == want)
}

fn end_base(id: u32, seconds: f64, bytes: u64, sender: bool) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("socket".into(), id.into());
    m.insert("start".into(), 0.into());
    m.insert("end".into(), num(seconds));
    m.insert("seconds".into(), num(seconds));
    m.insert("bytes".into(), bytes.into());
    m.insert("bits_per_second".into(), num(rate(bytes, seconds)));
    m.insert("sender".into(), sender.into());
    m
}

fn rate(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes as f64 * 8.0 / seconds
    } else {
        0.0
    }
}

fn end_tcp_stream(
    report: &Report,
    st: &StreamSummary,
    server: &Results,
    notes: &mut Vec<String>,
) -> Value {
    let sender = local_sends(st.flow);
    let (sent, got) = (st.sender.bytes, st.receiver.bytes);
    let mut s = end_base(st.id, st.sender.seconds, sent, sender);
    let retransmits = match (&st.sender.tcp, peer_stream(server, st.id)) {
        (Some(t), _) => t.retransmits as i64,
        (None, Some(r)) => r.retransmits,
        (None, None) => -1,
    };
    s.insert("retransmits".into(), retransmits.into());
    match &st.sender.tcp {
        Some(t) => {
            if let Some(r) = t.reord_seen {
                s.insert("reorder".into(), r.into());
            }
        }
        // The server's sending stream: as iperf3, 0 (see the note below).
        None => {
            s.insert("reorder".into(), 0.into());
        }
    }
    let (cwnd, wnd, max_rtt, min_rtt, mean_rtt) =
        tcp_extremes(report, st.id).unwrap_or_else(|| {
            let note = "the server's sending streams: max_snd_cwnd, max_snd_wnd, reorder and the rtt figures are not reported by the server, written as 0 (as iperf3 does)";
            if !notes.iter().any(|n| n == note) {
                notes.push(note.into());
            }
            (0, 0, 0, 0, 0)
        });
    s.insert("max_snd_cwnd".into(), cwnd.into());
    s.insert("max_snd_wnd".into(), wnd.into());
    s.insert("max_rtt".into(), max_rtt.into());
    s.insert("min_rtt".into(), min_rtt.into());
    s.insert("mean_rtt".into(), mean_rtt.into());
    // iperf3 keeps "sender" last.
    s.remove("sender");
    s.insert("sender".into(), sender.into());
    let r = end_base(st.id, st.receiver.seconds, got, sender);
    json!({"sender": s, "receiver": r})
}

fn udp_fields(m: &mut Map<String, Value>, jitter_ns: f64, lost: u64, packets: u64) {
    let sender = m.remove("sender");
    m.insert("jitter_ms".into(), num(jitter_ns / 1e6));
    m.insert("lost_packets".into(), lost.into());
    m.insert("packets".into(), packets.into());
    m.insert("lost_percent".into(), num(percent(lost, packets)));
    if let Some(s) = sender {
        m.insert("sender".into(), s);
    }
}

fn end_udp_stream(st: &StreamSummary) -> Value {
    let sender = local_sends(st.flow);
    let ep = if sender { &st.sender } else { &st.receiver };
    let mut m = end_base(st.id, ep.seconds, ep.bytes, sender);
    let u = st.udp.as_ref();
    udp_fields(
        &mut m,
        u.map_or(0.0, |u| u.jitter_ns),
        u.map_or(0, |u| u.lost),
        u.map_or(0, |u| u.issued),
    );
    let sender = m.remove("sender");
    m.insert("out_of_order".into(), u.map_or(0, |u| u.reordered).into());
    if let Some(s) = sender {
        m.insert("sender".into(), s);
    }
    json!({ "udp": m })
}

/// Sums of one group of streams (one flow), iperf3's `sum_sent` and
/// `sum_received` (UDP: and `sum`).
fn end_sums(m: &mut Map<String, Value>, report: &Report, flow: Flow, sfx: &str, udp: bool) {
    let streams: Vec<&StreamSummary> = report.streams.iter().filter(|s| s.flow == flow).collect();
    let sender = local_sends(flow);
    let sent: u64 = streams.iter().map(|s| s.sender.bytes).sum();
    let got: u64 = streams.iter().map(|s| s.receiver.bytes).sum();
    let s_secs = streams.iter().map(|s| s.sender.seconds).fold(0.0, f64::max);
    let r_secs = streams
        .iter()
        .map(|s| s.receiver.seconds)
        .fold(0.0, f64::max);
    let mut sum_sent = end_base_sum(s_secs, sent, sender);
    let mut sum_received = end_base_sum(r_secs, got, sender);
    if udp {
        let fsum = report.sums.iter().find(|s| s.flow == flow);
        let u = fsum.and_then(|s| s.udp.as_ref());
        let (jitter, lost, packets) = (
            u.map_or(0.0, |u| u.jitter_ns),
            u.map_or(0, |u| u.lost),
            u.map_or(0, |u| u.issued),
        );
        udp_fields(&mut sum_sent, 0.0, 0, packets);
        udp_fields(&mut sum_received, jitter, lost, packets);
        let mut sum = sum_received.clone();
        sum.insert("bits_per_second".into(), num(rate(got, r_secs)));
        m.insert(format!("sum{sfx}"), Value::Object(sum));
    } else {
        let retr: i64 = streams
            .iter()
            .filter_map(|s| s.sender.tcp.as_ref().map(|t| t.retransmits as i64))
            .sum();
        let sender_flag = sum_sent.remove("sender");
        sum_sent.insert("retransmits".into(), retr.into());
        if let Some(s) = sender_flag {
            sum_sent.insert("sender".into(), s);
        }
    }
    m.insert(format!("sum_sent{sfx}"), Value::Object(sum_sent));
    m.insert(format!("sum_received{sfx}"), Value::Object(sum_received));
}

fn end_base_sum(seconds: f64, bytes: u64, sender: bool) -> Map<String, Value> {
    let mut m = end_base(0, seconds, bytes, sender);
    m.remove("socket");
    m
}

fn cpu_percent(c: &SideCpu) -> (f64, f64, f64) {
    if c.wall_s <= 0.0 {
        return (0.0, 0.0, 0.0);
    }
    let u = c.user_s / c.wall_s * 100.0;
    let s = c.system_s / c.wall_s * 100.0;
    (u + s, u, s)
}

/// The `end` object, and the notes on what it could not measure.
pub fn end(report: &Report, p: &Params, server: &Results) -> (Value, Vec<String>) {
    let udp = p.protocol == IProtocol::Udp;
    let mut notes = Vec::new();
    let mut streams: Vec<&StreamSummary> = report.streams.iter().collect();
    streams.sort_by_key(|s| s.id);
    let list: Vec<Value> = streams
        .iter()
        .map(|st| {
            if udp {
                end_udp_stream(st)
            } else {
                end_tcp_stream(report, st, server, &mut notes)
            }
        })
        .collect();
    let mut m = Map::new();
    m.insert("streams".into(), list.into());
    for flow in [Flow::ClientToServer, Flow::ServerToClient] {
        if let Some(sfx) = suffix(flow, p) {
            if report.streams.iter().any(|s| s.flow == flow) {
                end_sums(&mut m, report, flow, sfx, udp);
            }
        }
    }
    let (ht, hu, hs) = cpu_percent(&report.cpu.client);
    let (rt, ru, rs) = cpu_percent(&report.cpu.server);
    m.insert(
        "cpu_utilization_percent".into(),
        json!({
            "host_total": num(ht), "host_user": num(hu), "host_system": num(hs),
            "remote_total": num(rt), "remote_user": num(ru), "remote_system": num(rs),
        }),
    );
    if !udp {
        let local = report.test.congestion_used.clone();
        let remote = server.congestion_used.clone();
        let (snd, rcv) = if p.direction == IDirection::Reverse {
            (remote, local)
        } else {
            (local, remote)
        };
        for (key, v) in [
            ("sender_tcp_congestion", snd),
            ("receiver_tcp_congestion", rcv),
        ] {
            match v {
                Some(v) => {
                    m.insert(key.into(), v.into());
                }
                None => notes.push(format!("{key}: not reported, left out")),
            }
        }
    }
    (Value::Object(m), notes)
}

/// The whole `-J` document of a completed test.
pub fn document(report: &Report, ctx: &Connection, server: &Results) -> Value {
    let p = &ctx.params;
    let (end, mut notes) = end(report, p, server);
    notes.extend(report.notes.iter().cloned());
    let mut m = Map::new();
    m.insert("start".into(), start(&report.test, ctx));
    m.insert(
        "intervals".into(),
        report
            .intervals
            .iter()
            .map(|r| interval(r, p))
            .collect::<Vec<_>>()
            .into(),
    );
    m.insert("end".into(), end);
    if let Some(t) = &server.server_output_text {
        m.insert("server_output_text".into(), t.clone().into());
    }
    if let Some(j) = &server.server_output_json {
        m.insert("server_output_json".into(), j.clone());
    }
    m.insert("linerate".into(), json!({ "notes": notes }));
    Value::Object(m)
}

/// iperf3's document for a test that failed: what it had, and the error.
pub fn error_document(message: &str) -> Value {
    json!({"start": {}, "intervals": [], "end": {}, "error": message})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_written_as_iperf3_writes_them() {
        assert_eq!(http_date(1_795_437_358), "Mon, 23 Nov 2026 12:35:58 GMT");
        assert_eq!(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(http_date(951_782_400), "Tue, 29 Feb 2000 00:00:00 GMT");
    }
}
