//! Renderers: each is a [`Sink`] that receives the start of a test, interval
//! records as they happen, and the final [`Report`], and writes one format.

use std::io::{self, Write};

use linerate_proto::clock::ClockMethod;
use linerate_proto::spec::{Direction, Limit, RrLimit, TestKind};
use linerate_proto::wire::Side;
use linerate_stats::histogram::Summary;
use linerate_stats::units::{
    format_bytes, format_count_rate, format_micros, format_nanos, format_rate, format_size,
};

use crate::model::{
    BatchingSummary, Endpoint, IntervalRecord, KernelView, OneWay, Record, Report, RrReport,
    RrTiming, SideCpu, TestInfo, UdpIntervalRecord, UdpSummary,
};

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Human,
    Json,
    JsonLines,
    Csv,
}

/// Receives a test's records in order.
pub trait Sink {
    fn start(&mut self, info: &TestInfo) -> io::Result<()>;
    fn interval(&mut self, rec: &IntervalRecord) -> io::Result<()>;
    fn finish(&mut self, report: &Report) -> io::Result<()>;
}

/// A sink writing `format` to `out`.
pub fn sink<'a>(format: Format, out: Box<dyn Write + 'a>) -> Box<dyn Sink + 'a> {
    match format {
        Format::Human => Box::new(Human {
            out,
            printed_header: false,
        }),
        Format::Json => Box::new(Json { out }),
        Format::JsonLines => Box::new(JsonLines { out }),
        Format::Csv => Box::new(Csv {
            out,
            printed_header: false,
        }),
    }
}

struct Human<'a> {
    out: Box<dyn Write + 'a>,
    printed_header: bool,
}

/// Interval columns of a UDP stream: datagrams and rate, and for a
/// receiver its loss figures.
fn udp_interval_cols(u: &UdpIntervalRecord) -> String {
    let c = &u.counts;
    let mut s = format!(
        "{:>9}  {:>9}",
        c.datagrams,
        format_count_rate(u.packets_per_second)
    );
    if let Some(received) = c.received {
        s.push_str(&format!(
            "  {:>6}  {:>6}  {:>5}  {:>4}  {:>7}  {:>9}",
            c.lost.unwrap_or(0),
            received,
            c.reordered.unwrap_or(0),
            c.duplicates.unwrap_or(0),
            c.corrupt.unwrap_or(0),
            format_nanos(c.jitter_ns.unwrap_or(0.0))
        ));
    }
    s
}

fn udp_sender_words(u: &UdpSummary) -> String {
    let mut s = format!("{} datagrams, {}/s", u.sent, format_count_rate(u.sent_pps));
    if let Some(req) = u.requested_pps {
        s.push_str(&format!(" (requested {}/s)", format_count_rate(req)));
    }
    if let Some(g) = &u.gaps {
        s.push_str(&format!(
            "; gaps mean {} p50 {} p99 {} max {}",
            format_nanos(g.mean_ns),
            format_nanos(g.p50_ns as f64),
            format_nanos(g.p99_ns as f64),
            format_nanos(g.max_ns as f64)
        ));
        if let Some(want) = u.requested_gap_ns {
            s.push_str(&format!(" (requested {})", format_nanos(want)));
        }
    }
    if !u.kept_up {
        s.push_str("; COULD NOT KEEP UP");
    }
    if u.send_errors > 0 {
        s.push_str(&format!("; {} send errors", u.send_errors));
    }
    if let Some(b) = &u.sender_batching {
        s.push_str(&batching_words(b, true));
    }
    s
}

/// What a batching engine did, e.g. "; batch: GSO 44 datagrams/message,
/// ≤ 4 messages/call, 176.0 datagrams/call".
fn batching_words(b: &BatchingSummary, sender: bool) -> String {
    let mut s = String::from("; batch: ");
    if sender {
        match b.gso_segments {
            Some(n) => s.push_str(&format!("GSO {n} datagrams/message, ")),
            None => s.push_str("no GSO, "),
        }
    } else if b.gro {
        s.push_str(&format!("GRO on ({} super-buffers), ", b.gro_super_buffers));
    } else {
        s.push_str("no GRO, ");
    }
    s.push_str(&format!(
        "≤ {} messages/call, {:.1} datagrams/call",
        b.messages_per_call, b.datagrams_per_call
    ));
    for n in &b.notes {
        s.push_str(&format!(" ({n})"));
    }
    s
}

fn udp_receiver_words(u: &UdpSummary) -> String {
    let mut s = format!(
        "{} of {} received, {}/s; lost {} ({:.1} ppm, {:.4}%); reordered {} (max distance {}); duplicates {}; late {}; corrupt {}; jitter {}",
        u.received,
        u.issued,
        format_count_rate(u.received_pps),
        u.lost,
        u.loss_ppm,
        u.loss_percent,
        u.reordered,
        u.max_reorder_distance,
        u.duplicates,
        u.late,
        u.corrupt,
        format_nanos(u.jitter_ns)
    );
    if let Some(d) = u.socket_drops {
        s.push_str(&format!("; socket drops {d}"));
    }
    if let Some(c) = &u.first_corrupt {
        s.push_str(&format!(" (first corrupt: {c})"));
    }
    if let Some(b) = &u.receiver_batching {
        s.push_str(&batching_words(b, false));
    }
    s
}

fn kernel_words(k: &KernelView) -> String {
    format!("kernel: {}", k.explanation)
}

fn direction_words(d: Direction) -> &'static str {
    match d {
        Direction::Forward => "client→server (stream)",
        Direction::Reverse => "server→client (maerts)",
        Direction::Bidir => "both ways (bidir)",
    }
}

fn pace_words(p: linerate_proto::spec::Pace) -> String {
    use linerate_proto::spec::Pace;
    match p {
        Pace::Unlimited => "full speed (unpaced)".into(),
        Pace::Rate(bps) => format!("{} per stream", format_rate(bps as f64)),
        Pace::MilliPps(m) => format!(
            "{} datagrams/s per stream",
            format_count_rate(m as f64 / 1000.0)
        ),
    }
}

fn limit_words(l: Limit) -> String {
    match l {
        Limit::TimeMs(ms) => format!("{} s", ms as f64 / 1e3),
        Limit::Bytes(b) => format!("{} per direction", format_bytes(b)),
        Limit::Datagrams(n) => format!("{n} datagrams per direction"),
    }
}

fn tcp_cols(t: Option<&linerate_proto::measure::TcpInfo>) -> String {
    match t {
        Some(t) => format!(
            "{:>6}  {:>10}  {:>9}",
            t.retransmits,
            format_bytes(u64::from(t.snd_cwnd) * u64::from(t.snd_mss)),
            format_micros(f64::from(t.rtt_us))
        ),
        None => String::new(),
    }
}

impl Human<'_> {
    fn cpu_line(&mut self, name: &str, c: &SideCpu) -> io::Result<()> {
        write!(
            self.out,
            "  {name:<7} {:>6.1}% of a CPU (user {:.2} s, sys {:.2} s, {})",
            c.percent_of_cpu, c.user_s, c.system_s, c.scope
        )?;
        if let Some(h) = c.host_percent {
            write!(
                self.out,
                "; host {h:.1}% of {} CPUs",
                c.host_cpus.unwrap_or(0)
            )?;
        }
        if let Some(d) = c.service_demand_us_per_kib {
            write!(self.out, "; {d:.3} µs/KiB")?;
        }
        writeln!(self.out)
    }

    fn endpoint_line(&mut self, id: &str, role: &str, e: &Endpoint) -> io::Result<()> {
        writeln!(
            self.out,
            "[{id:>4}] {role:<9} {:<7} {:>11}  {:>8.2} s  {:>15}  {}{}",
            side_name(e.side),
            format_bytes(e.bytes),
            e.seconds,
            format_rate(e.bits_per_second),
            tcp_cols(e.tcp.as_ref()),
            e.error
                .as_deref()
                .map(|x| format!("  ERROR: {x}"))
                .unwrap_or_default()
        )
    }
}

impl Sink for Human<'_> {
    fn start(&mut self, i: &TestInfo) -> io::Result<()> {
        // Who is talking to whom, from the reporting side's point of view.
        let (who, route, engine) = match i.reported_by {
            Side::Server => (
                "linerate server",
                format!("from {}", i.client.as_deref().unwrap_or("a client")),
                &i.server_engine,
            ),
            Side::Client => (
                "linerate",
                format!(
                    "to {}{}",
                    i.server,
                    if i.embedded_server {
                        " (embedded server)"
                    } else {
                        ""
                    }
                ),
                &i.client_engine,
            ),
        };
        if i.kind != TestKind::Stream {
            return writeln!(
                self.out,
                "{who}: {} {} {route} · {} flow{} · engine {}",
                i.protocol,
                match i.kind {
                    TestKind::Crr => "connect/request/response (crr)",
                    _ => "request/response (rr)",
                },
                i.streams,
                if i.streams == 1 { "" } else { "s" },
                engine,
            );
        }
        let unit = match &i.udp {
            Some(u) => format!(
                "{} B datagrams at {}{}{}",
                i.len,
                pace_words(u.pace),
                if u.burst > 1 {
                    format!(" in bursts of {}", u.burst)
                } else {
                    String::new()
                },
                if u.verify { ", payloads verified" } else { "" }
            ),
            None => format!("{} writes", format_size(u64::from(i.len))),
        };
        writeln!(
            self.out,
            "{who}: {} {} {route} · {} stream{} · {unit} · {} · engine {}",
            i.protocol,
            direction_words(i.direction),
            i.streams,
            if i.streams == 1 { "" } else { "s" },
            limit_words(i.limit),
            engine,
        )?;
        if i.omit_s > 0.0 {
            writeln!(self.out, "omitting the first {} s (warm-up)", i.omit_s)?;
        }
        Ok(())
    }

    fn interval(&mut self, r: &IntervalRecord) -> io::Result<()> {
        let udp = r.streams.iter().any(|s| s.udp.is_some());
        if !self.printed_header {
            if udp {
                writeln!(
                    self.out,
                    "[  ID] Interval            Transfer         Bitrate  Datagrams        pps    Lost    Recv  Reord   Dup  Corrupt     Jitter"
                )?;
            } else {
                writeln!(
                    self.out,
                    "[  ID] Interval            Transfer         Bitrate     Retr        Cwnd        RTT"
                )?;
            }
            self.printed_header = true;
        }
        let span = format!("{:6.2}-{:<6.2} s", r.start_s, r.end_s);
        let tag = if r.omitted { "  (omitted)" } else { "" };
        for s in &r.streams {
            let extra = match &s.udp {
                Some(u) => udp_interval_cols(u),
                None => tcp_cols(s.tcp.as_ref()),
            };
            writeln!(
                self.out,
                "[{:>4}] {span} {:>11}  {:>15}  {extra}{tag}",
                s.id,
                format_bytes(s.bytes),
                format_rate(s.bits_per_second),
            )?;
        }
        if r.streams.len() > 1 || r.sums.len() > 1 {
            for s in &r.sums {
                let extra = match &s.udp {
                    Some(u) => udp_interval_cols(u),
                    None => s.retransmits.map(|r| format!("{r:>6}")).unwrap_or_default(),
                };
                writeln!(
                    self.out,
                    "[ SUM] {span} {:>11}  {:>15}  {}{}{tag}",
                    format_bytes(s.bytes),
                    format_rate(s.bits_per_second),
                    extra,
                    if r.sums.len() > 1 {
                        format!("  {}", s.flow.arrow())
                    } else {
                        String::new()
                    }
                )?;
            }
        }
        self.out.flush()
    }

    fn finish(&mut self, r: &Report) -> io::Result<()> {
        if let Some(rr) = &r.rr {
            self.rr(r, rr)?;
            writeln!(self.out, "CPU:")?;
            self.cpu_line("client", &r.cpu.client)?;
            self.cpu_line("server", &r.cpu.server)?;
            for (side, v) in [
                ("client", rr.client_cpu_us_per_transaction),
                ("server", rr.server_cpu_us_per_transaction),
            ] {
                if let Some(v) = v {
                    writeln!(self.out, "  {side:<7} {v:.2} CPU µs per transaction")?;
                }
            }
            for n in &r.notes {
                writeln!(self.out, "note: {n}")?;
            }
            return self.out.flush();
        }
        writeln!(
            self.out,
            "- - - - - - - - - - - - - - - - - - - - - - - - -"
        )?;
        if r.test.udp.is_some() {
            writeln!(
                self.out,
                "[  ID] {:<9} {:<7} {:>11}  {:>10}  {:>15}",
                "Role", "Side", "Transfer", "Time", "Bitrate"
            )?;
        } else {
            writeln!(
                self.out,
                "[  ID] {:<9} {:<7} {:>11}  {:>10}  {:>15}  {:>6}  {:>10}  {:>9}",
                "Role", "Side", "Transfer", "Time", "Bitrate", "Retr", "Cwnd", "RTT"
            )?;
        }
        for flow_sum in &r.sums {
            writeln!(
                self.out,
                "{} ({} stream{}):",
                flow_sum.flow.arrow(),
                flow_sum.streams,
                if flow_sum.streams == 1 { "" } else { "s" }
            )?;
            for s in r.streams.iter().filter(|s| s.flow == flow_sum.flow) {
                let id = s.id.to_string();
                self.endpoint_line(&id, "sender", &s.sender)?;
                if let Some(u) = &s.udp {
                    writeln!(self.out, "         {}", udp_sender_words(u))?;
                }
                self.endpoint_line(&id, "receiver", &s.receiver)?;
                if let Some(u) = &s.udp {
                    writeln!(self.out, "         {}", udp_receiver_words(u))?;
                }
            }
            writeln!(
                self.out,
                "[ SUM] sender    {:>19}  {:>8.2} s  {:>15}  {}",
                format_bytes(flow_sum.sender_bytes),
                flow_sum.sender_seconds,
                format_rate(flow_sum.sender_bits_per_second),
                flow_sum
                    .retransmits
                    .map(|x| format!("{x:>6}"))
                    .unwrap_or_default()
            )?;
            writeln!(
                self.out,
                "[ SUM] receiver  {:>19}  {:>8.2} s  {:>15}",
                format_bytes(flow_sum.receiver_bytes),
                flow_sum.receiver_seconds,
                format_rate(flow_sum.receiver_bits_per_second),
            )?;
            if let Some(u) = &flow_sum.udp {
                if r.streams.iter().filter(|s| s.flow == flow_sum.flow).count() > 1 {
                    writeln!(self.out, "         {}", udp_sender_words(u))?;
                    writeln!(self.out, "         {}", udp_receiver_words(u))?;
                }
            }
            if let Some(k) = &flow_sum.kernel {
                writeln!(self.out, "{}", kernel_words(k))?;
            }
        }
        writeln!(self.out, "CPU:")?;
        self.cpu_line("client", &r.cpu.client)?;
        self.cpu_line("server", &r.cpu.server)?;
        if let Some(cc) = &r.test.congestion_used {
            writeln!(self.out, "TCP congestion control: {cc}")?;
        }
        for n in &r.notes {
            writeln!(self.out, "note: {n}")?;
        }
        self.out.flush()
    }
}

/// Microseconds with two decimals, for latency tables.
fn us(ns: impl Into<f64>) -> String {
    format!("{:.2}", ns.into() / 1e3)
}

fn load_word(loaded: bool) -> &'static str {
    if loaded {
        "loaded"
    } else {
        "-"
    }
}

impl Human<'_> {
    fn rr(&mut self, r: &Report, rr: &RrReport) -> io::Result<()> {
        let crr = r.test.kind == TestKind::Crr;
        let per = match rr.limit {
            RrLimit::TimeMs(ms) => format!("{} s per size", ms as f64 / 1e3),
            RrLimit::Count(n) => format!("{n} transactions per flow per size"),
        };
        let timing = match rr.timing {
            RrTiming::PerMessage => {
                "each transaction timed (clock read before the request, after the response)"
                    .to_string()
            }
            RrTiming::Batch { batch } => format!(
                "timed in batches of {batch} back-to-back transactions (figures are batch means per transaction)"
            ),
        };
        writeln!(self.out, "{per}; {timing}")?;
        if rr.busy_poll {
            writeln!(
                self.out,
                "busy polling: client: {}; server: {}",
                rr.busy_poll_client.as_deref().unwrap_or("not reported"),
                rr.busy_poll_server.as_deref().unwrap_or("not reported")
            )?;
        }
        if let Some(c) = &rr.clock {
            match c.method {
                ClockMethod::SameHost => writeln!(
                    self.out,
                    "clock: client and server share one kernel's monotonic clock: offset 0 ns exactly"
                )?,
                ClockMethod::Probes => writeln!(
                    self.out,
                    "clock: server − client offset {} µs ± {} µs ({} probes over the control connection; best round trip {} µs)",
                    us(c.offset_ns as f64),
                    us(c.uncertainty_ns as f64),
                    c.probes,
                    us(c.delay_ns as f64)
                )?,
            }
        }
        writeln!(
            self.out,
            "{} (µs):",
            if crr {
                "Connect + request + response + close"
            } else {
                "Round trip"
            }
        )?;
        writeln!(
            self.out,
            "{:>8} {:>8} {:>6} {:>12} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "Request",
            "Response",
            "Load",
            if crr { "Conn/s" } else { "Trans/s" },
            "min",
            "mean",
            "stddev",
            "p50",
            "p90",
            "p99",
            "p99.9",
            "p99.99",
            "max"
        )?;
        for p in &rr.phases {
            let l: &Summary = &p.latency;
            writeln!(
                self.out,
                "{:>8} {:>8} {:>6} {:>12.0} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
                p.request_size,
                p.response_size,
                load_word(p.loaded),
                p.transactions_per_second,
                us(l.min_ns as f64),
                us(l.mean_ns),
                us(l.stddev_ns),
                us(l.p50_ns as f64),
                us(l.p90_ns as f64),
                us(l.p99_ns as f64),
                us(l.p99_9_ns as f64),
                us(l.p99_99_ns as f64),
                us(l.max_ns as f64),
            )?;
        }
        if !crr {
            self.one_way_table(rr)?;
        }
        if rr.phases.iter().any(|p| p.loaded) {
            self.load_table(rr)?;
        }
        let lost: u64 = rr.phases.iter().map(|p| p.lost).sum();
        writeln!(
            self.out,
            "transactions: client {} · server {}{}",
            rr.phases.iter().map(|p| p.transactions).sum::<u64>(),
            rr.phases.iter().map(|p| p.server_transactions).sum::<u64>(),
            if lost > 0 {
                format!(" · {lost} lost (no response within the timeout; left out of the figures)")
            } else {
                String::new()
            }
        )?;
        for p in &rr.phases {
            for e in &p.errors {
                writeln!(self.out, "ERROR ({} bytes): {e}", p.request_size)?;
            }
        }
        Ok(())
    }

    fn one_way_table(&mut self, rr: &RrReport) -> io::Result<()> {
        writeln!(self.out, "One way (µs):")?;
        writeln!(
            self.out,
            "{:>8} {:>8} {:>6}   {:>9} {:>9} {:>9}   {:>9} {:>9} {:>9}   {:>9}",
            "Request",
            "Response",
            "Load",
            "c→s min",
            "c→s p50",
            "c→s p99",
            "s→c min",
            "s→c p50",
            "s→c p99",
            "±"
        )?;
        let cols = |o: &OneWay| match &o.latency {
            Some(l) => format!(
                "{:>9} {:>9} {:>9}",
                us(l.min_ns as f64),
                us(l.p50_ns as f64),
                us(l.p99_ns as f64)
            ),
            None => format!("{:>29}", "-"),
        };
        let mut reasons: Vec<String> = Vec::new();
        for p in &rr.phases {
            let (a, b) = (&p.client_to_server, &p.server_to_client);
            let why = a.unavailable.as_ref().or(b.unavailable.as_ref());
            let tail = match (why, a.uncertainty_ns.or(b.uncertainty_ns)) {
                (Some(w), _) => {
                    let i = reasons.iter().position(|r| r == w).unwrap_or_else(|| {
                        reasons.push(w.clone());
                        reasons.len() - 1
                    });
                    format!("{:>9}", format!("[{}]", i + 1))
                }
                (None, Some(u)) => format!("{:>9}", us(u as f64)),
                (None, None) => String::new(),
            };
            writeln!(
                self.out,
                "{:>8} {:>8} {:>6}   {}   {}   {tail}",
                p.request_size,
                p.response_size,
                load_word(p.loaded),
                cols(a),
                cols(b)
            )?;
            for (dir, o) in [("client→server", a), ("server→client", b)] {
                if o.negative > 0 {
                    writeln!(
                        self.out,
                        "         {dir}: {} samples came out negative (offset error) and are left out",
                        o.negative
                    )?;
                }
            }
        }
        for (i, r) in reasons.iter().enumerate() {
            writeln!(self.out, "  [{}] no one-way figures: {r}", i + 1)?;
        }
        Ok(())
    }

    fn load_table(&mut self, rr: &RrReport) -> io::Result<()> {
        match &rr.load {
            Some(l) => writeln!(
                self.out,
                "Without and with load ({} bulk TCP stream{}, {} received by the server):",
                l.streams,
                if l.streams == 1 { "" } else { "s" },
                format_rate(l.bits_per_second)
            )?,
            None => writeln!(self.out, "Without and with load:")?,
        }
        writeln!(
            self.out,
            "{:>8} {:>8}   {:>9} {:>9}   {:>9} {:>9}   {:>9} {:>9}   {:>12} {:>12}",
            "Request",
            "Response",
            "p50",
            "loaded",
            "p99",
            "loaded",
            "p99.9",
            "loaded",
            "Trans/s",
            "loaded"
        )?;
        for idle in rr.phases.iter().filter(|p| !p.loaded) {
            let Some(busy) = rr.phases.iter().find(|p| {
                p.loaded
                    && p.request_size == idle.request_size
                    && p.response_size == idle.response_size
            }) else {
                continue;
            };
            let (a, b) = (&idle.latency, &busy.latency);
            writeln!(
                self.out,
                "{:>8} {:>8}   {:>9} {:>9}   {:>9} {:>9}   {:>9} {:>9}   {:>12.0} {:>12.0}",
                idle.request_size,
                idle.response_size,
                us(a.p50_ns as f64),
                us(b.p50_ns as f64),
                us(a.p99_ns as f64),
                us(b.p99_ns as f64),
                us(a.p99_9_ns as f64),
                us(b.p99_9_ns as f64),
                idle.transactions_per_second,
                busy.transactions_per_second
            )?;
        }
        Ok(())
    }
}

struct Json<'a> {
    out: Box<dyn Write + 'a>,
}

impl Sink for Json<'_> {
    fn start(&mut self, _: &TestInfo) -> io::Result<()> {
        Ok(())
    }
    fn interval(&mut self, _: &IntervalRecord) -> io::Result<()> {
        Ok(())
    }
    fn finish(&mut self, r: &Report) -> io::Result<()> {
        serde_json::to_writer_pretty(&mut self.out, r)?;
        writeln!(self.out)?;
        self.out.flush()
    }
}

struct JsonLines<'a> {
    out: Box<dyn Write + 'a>,
}

impl JsonLines<'_> {
    fn line(&mut self, r: &Record) -> io::Result<()> {
        serde_json::to_writer(&mut self.out, r)?;
        writeln!(self.out)?;
        self.out.flush()
    }
}

impl Sink for JsonLines<'_> {
    fn start(&mut self, i: &TestInfo) -> io::Result<()> {
        self.line(&Record::Start(Box::new(i.clone())))
    }
    fn interval(&mut self, r: &IntervalRecord) -> io::Result<()> {
        self.line(&Record::Interval(r.clone()))
    }
    fn finish(&mut self, r: &Report) -> io::Result<()> {
        self.line(&Record::Summary(Box::new(r.clone())))
    }
}

/// One table: interval rows as they happen, then a row per stream end and
/// per flow sum. Columns that do not apply to a row are empty.
struct Csv<'a> {
    out: Box<dyn Write + 'a>,
    printed_header: bool,
}

const CSV_HEADER: &str = "record,side,flow,stream,role,start_s,end_s,seconds,bytes,bits_per_second,omitted,retransmits,snd_cwnd,snd_mss,rtt_us,datagrams,packets_per_second,issued,received,lost,loss_percent,reordered,duplicates,late,corrupt,jitter_ns,socket_drops";

/// The UDP columns of a CSV row (empty for TCP rows).
const UDP_EMPTY: &str = ",,,,,,,,,,,,";

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

fn udp_interval_csv(u: Option<&UdpIntervalRecord>) -> String {
    let Some(u) = u else {
        return UDP_EMPTY.into();
    };
    let c = &u.counts;
    format!(
        ",{},{:.1},,{},{},,{},{},{},{},{},{}",
        c.datagrams,
        u.packets_per_second,
        opt(c.received),
        opt(c.lost),
        opt(c.reordered),
        opt(c.duplicates),
        opt(c.late),
        opt(c.corrupt),
        opt(c.jitter_ns.map(|j| format!("{j:.0}"))),
        opt(c.socket_drops)
    )
}

/// `sender` rows carry the sent side, `receiver` rows the received side.
fn udp_summary_csv(u: Option<&UdpSummary>, receiver: bool) -> String {
    let Some(u) = u else {
        return UDP_EMPTY.into();
    };
    if !receiver {
        return format!(",{},{:.1},{},,,,,,,,,", u.sent, u.sent_pps, u.issued);
    }
    format!(
        ",,{:.1},{},{},{},{:.6},{},{},{},{},{:.0},{}",
        u.received_pps,
        u.issued,
        u.received,
        u.lost,
        u.loss_percent,
        u.reordered,
        u.duplicates,
        u.late,
        u.corrupt,
        u.jitter_ns,
        opt(u.socket_drops)
    )
}

/// Request/response tests: one row per phase.
const RR_CSV_HEADER: &str = "record,request_size,response_size,loaded,transactions,server_transactions,seconds,transactions_per_second,min_ns,mean_ns,stddev_ns,p50_ns,p90_ns,p99_ns,p99_9_ns,p99_99_ns,max_ns,c2s_p50_ns,c2s_p99_ns,s2c_p50_ns,s2c_p99_ns";

impl Csv<'_> {
    fn header(&mut self) -> io::Result<()> {
        if !self.printed_header {
            writeln!(self.out, "{CSV_HEADER}")?;
            self.printed_header = true;
        }
        Ok(())
    }

    fn rr(&mut self, rr: &RrReport) -> io::Result<()> {
        let ow = |o: &OneWay| match &o.latency {
            Some(l) => format!("{},{}", l.p50_ns, l.p99_ns),
            None => ",".into(),
        };
        for p in &rr.phases {
            let l = &p.latency;
            writeln!(
                self.out,
                "phase,{},{},{},{},{},{:.6},{:.1},{},{:.1},{:.1},{},{},{},{},{},{},{},{}",
                p.request_size,
                p.response_size,
                p.loaded,
                p.transactions,
                p.server_transactions,
                p.seconds,
                p.transactions_per_second,
                l.min_ns,
                l.mean_ns,
                l.stddev_ns,
                l.p50_ns,
                l.p90_ns,
                l.p99_ns,
                l.p99_9_ns,
                l.p99_99_ns,
                l.max_ns,
                ow(&p.client_to_server),
                ow(&p.server_to_client)
            )?;
        }
        self.out.flush()
    }
}

/// `--histogram`: every phase's round-trip histogram (metric `rtt`) and,
/// where measured, its one-way histograms (`client_to_server`,
/// `server_to_client`) as CSV, one row per non-empty HdrHistogram bucket
/// (values at 3 significant digits).
pub fn histogram_csv(r: &Report, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "request_size,response_size,loaded,metric,value_ns,count,cumulative_fraction"
    )?;
    for p in r.rr.iter().flat_map(|rr| &rr.phases) {
        for (metric, buckets) in [
            ("rtt", &p.histogram),
            ("client_to_server", &p.client_to_server.histogram),
            ("server_to_client", &p.server_to_client.histogram),
        ] {
            let total: u64 = buckets.iter().map(|&(_, c)| c).sum();
            let mut acc = 0u64;
            for &(v, c) in buckets {
                acc += c;
                writeln!(
                    out,
                    "{},{},{},{metric},{v},{c},{:.9}",
                    p.request_size,
                    p.response_size,
                    p.loaded,
                    acc as f64 / total.max(1) as f64
                )?;
            }
        }
    }
    Ok(())
}

fn side_name(s: linerate_proto::wire::Side) -> &'static str {
    match s {
        linerate_proto::wire::Side::Client => "client",
        linerate_proto::wire::Side::Server => "server",
    }
}

fn flow_name(f: crate::model::Flow) -> &'static str {
    match f {
        crate::model::Flow::ClientToServer => "client_to_server",
        crate::model::Flow::ServerToClient => "server_to_client",
    }
}

fn tcp_csv(t: Option<&linerate_proto::measure::TcpInfo>) -> String {
    t.map(|t| {
        format!(
            "{},{},{},{}",
            t.retransmits, t.snd_cwnd, t.snd_mss, t.rtt_us
        )
    })
    .unwrap_or_else(|| ",,,".into())
}

impl Sink for Csv<'_> {
    fn start(&mut self, i: &TestInfo) -> io::Result<()> {
        if i.kind != TestKind::Stream {
            self.printed_header = true;
            return writeln!(self.out, "{RR_CSV_HEADER}");
        }
        self.header()
    }
    fn interval(&mut self, r: &IntervalRecord) -> io::Result<()> {
        self.header()?;
        for s in &r.streams {
            writeln!(
                self.out,
                "interval,{},{},{},,{:.6},{:.6},{:.6},{},{:.0},{},{}{}",
                side_name(r.side),
                flow_name(s.flow),
                s.id,
                r.start_s,
                r.end_s,
                r.end_s - r.start_s,
                s.bytes,
                s.bits_per_second,
                r.omitted,
                tcp_csv(s.tcp.as_ref()),
                udp_interval_csv(s.udp.as_ref())
            )?;
        }
        self.out.flush()
    }
    fn finish(&mut self, r: &Report) -> io::Result<()> {
        if let Some(rr) = &r.rr {
            if !self.printed_header {
                self.printed_header = true;
                writeln!(self.out, "{RR_CSV_HEADER}")?;
            }
            return self.rr(rr);
        }
        self.header()?;
        for s in &r.streams {
            for (role, e) in [("sender", &s.sender), ("receiver", &s.receiver)] {
                writeln!(
                    self.out,
                    "stream,{},{},{},{role},,,{:.6},{},{:.0},,{}{}",
                    side_name(e.side),
                    flow_name(s.flow),
                    s.id,
                    e.seconds,
                    e.bytes,
                    e.bits_per_second,
                    tcp_csv(e.tcp.as_ref()),
                    udp_summary_csv(s.udp.as_ref(), role == "receiver")
                )?;
            }
        }
        for f in &r.sums {
            writeln!(
                self.out,
                "sum,{},{},,sender,,,{:.6},{},{:.0},,{},,,{}",
                side_name(f.flow.sender()),
                flow_name(f.flow),
                f.sender_seconds,
                f.sender_bytes,
                f.sender_bits_per_second,
                f.retransmits.map(|x| x.to_string()).unwrap_or_default(),
                udp_summary_csv(f.udp.as_ref(), false)
            )?;
            writeln!(
                self.out,
                "sum,{},{},,receiver,,,{:.6},{},{:.0},,,,,{}",
                side_name(f.flow.sender().other()),
                flow_name(f.flow),
                f.receiver_seconds,
                f.receiver_bytes,
                f.receiver_bits_per_second,
                udp_summary_csv(f.udp.as_ref(), true)
            )?;
        }
        self.out.flush()
    }
}

/// Receives a sweep's records in order.
pub trait SweepSink {
    fn start(&mut self, info: &crate::model::SweepInfo) -> io::Result<()>;
    fn trial(&mut self, t: &crate::model::SweepTrial) -> io::Result<()>;
    fn finish(&mut self, r: &crate::model::SweepReport) -> io::Result<()>;
}

/// A sweep sink writing `format` to `out`.
pub fn sweep_sink<'a>(format: Format, out: Box<dyn Write + 'a>) -> Box<dyn SweepSink + 'a> {
    Box::new(SweepOut { format, out })
}

struct SweepOut<'a> {
    format: Format,
    out: Box<dyn Write + 'a>,
}

/// One line of `sweep --json-lines`.
#[derive(serde::Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum SweepRecord<'a> {
    Start(&'a crate::model::SweepInfo),
    Trial(&'a crate::model::SweepTrial),
    Summary(&'a crate::model::SweepReport),
}

const SWEEP_CSV_HEADER: &str = "record,len,search,requested_pps,requested_bits_per_second,sent_pps,sent_bits_per_second,received_pps,received_bits_per_second,issued,received,lost,loss_ppm,loss_percent,kept_up,socket_drops,error";

fn csv_text(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

impl SweepOut<'_> {
    fn line(&mut self, r: &SweepRecord<'_>) -> io::Result<()> {
        serde_json::to_writer(&mut self.out, r)?;
        writeln!(self.out)?;
        self.out.flush()
    }
}

impl SweepSink for SweepOut<'_> {
    fn start(&mut self, i: &crate::model::SweepInfo) -> io::Result<()> {
        match self.format {
            Format::Human => {
                writeln!(
                    self.out,
                    "linerate sweep: udp {} to {} · {} stream{} · sizes {} · {} s per trial",
                    direction_words(i.direction),
                    i.server,
                    i.streams,
                    if i.streams == 1 { "" } else { "s" },
                    i.sizes
                        .iter()
                        .map(|s| s.to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                    i.trial_s
                )?;
                writeln!(
                    self.out,
                    "{:>6} {:>12} {:>12} {:>12} {:>15} {:>15} {:>15} {:>10} {:>10}  note",
                    "size",
                    "req pps",
                    "sent pps",
                    "recv pps",
                    "requested",
                    "sent",
                    "received",
                    "lost",
                    "loss %"
                )?;
                self.out.flush()
            }
            Format::JsonLines => self.line(&SweepRecord::Start(i)),
            Format::Csv => {
                writeln!(self.out, "{SWEEP_CSV_HEADER}")?;
                self.out.flush()
            }
            Format::Json => Ok(()),
        }
    }

    fn trial(&mut self, t: &crate::model::SweepTrial) -> io::Result<()> {
        match self.format {
            Format::Human => {
                let note = match (&t.error, t.kept_up, t.search) {
                    (Some(e), _, _) => format!("FAILED: {e}"),
                    (None, false, s) => format!(
                        "sender could not keep up{}",
                        if s { " (search)" } else { "" }
                    ),
                    (None, true, true) => "search".into(),
                    (None, true, false) => String::new(),
                };
                writeln!(
                    self.out,
                    "{:>6} {:>12} {:>12} {:>12} {:>15} {:>15} {:>15} {:>10} {:>10.4}  {note}",
                    t.len,
                    format_count_rate(t.requested_pps),
                    format_count_rate(t.sent_pps),
                    format_count_rate(t.received_pps),
                    format_rate(t.requested_bits_per_second),
                    format_rate(t.sent_bits_per_second),
                    format_rate(t.received_bits_per_second),
                    t.lost,
                    t.loss_percent
                )?;
                self.out.flush()
            }
            Format::JsonLines => self.line(&SweepRecord::Trial(t)),
            Format::Csv => {
                writeln!(
                    self.out,
                    "trial,{},{},{:.3},{:.0},{:.3},{:.0},{:.3},{:.0},{},{},{},{:.3},{:.6},{},{},{}",
                    t.len,
                    t.search,
                    t.requested_pps,
                    t.requested_bits_per_second,
                    t.sent_pps,
                    t.sent_bits_per_second,
                    t.received_pps,
                    t.received_bits_per_second,
                    t.issued,
                    t.received,
                    t.lost,
                    t.loss_ppm,
                    t.loss_percent,
                    t.kept_up,
                    opt(t.socket_drops),
                    t.error.as_deref().map(csv_text).unwrap_or_default()
                )?;
                self.out.flush()
            }
            Format::Json => Ok(()),
        }
    }

    fn finish(&mut self, r: &crate::model::SweepReport) -> io::Result<()> {
        match self.format {
            Format::Human => {
                for z in &r.zero_loss {
                    match (z.pps, z.bits_per_second) {
                        (Some(p), Some(b)) => writeln!(
                            self.out,
                            "highest rate with loss ≤ {}% at {} B: {}/s requested ({}), {}/s received; {} trials ({})",
                            z.max_loss_percent,
                            z.len,
                            format_count_rate(p),
                            format_rate(b),
                            format_count_rate(z.received_pps.unwrap_or(0.0)),
                            z.trials,
                            z.note
                        )?,
                        _ => writeln!(
                            self.out,
                            "highest rate with loss ≤ {}% at {} B: none ({}; {} trials)",
                            z.max_loss_percent, z.len, z.note, z.trials
                        )?,
                    }
                }
                for n in &r.notes {
                    writeln!(self.out, "note: {n}")?;
                }
                self.out.flush()
            }
            Format::Json => {
                serde_json::to_writer_pretty(&mut self.out, r)?;
                writeln!(self.out)?;
                self.out.flush()
            }
            Format::JsonLines => self.line(&SweepRecord::Summary(r)),
            Format::Csv => {
                for z in &r.zero_loss {
                    writeln!(
                        self.out,
                        "zero_loss,{},,{},{},,,{},,,,,,{},,,{}",
                        z.len,
                        opt(z.pps.map(|p| format!("{p:.3}"))),
                        opt(z.bits_per_second.map(|b| format!("{b:.0}"))),
                        opt(z.received_pps.map(|p| format!("{p:.3}"))),
                        z.max_loss_percent,
                        csv_text(&z.note)
                    )?;
                }
                self.out.flush()
            }
        }
    }
}
