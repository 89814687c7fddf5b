//! `--csv`: one table — interval rows as they happen, then a row per stream
//! end and per flow sum (request/response tests: a row per phase) — and
//! `--histogram`'s CSV of every bucket. Every row ends with the test's
//! parameters (kind, protocol, direction, streams, length, rate, engines)
//! and, on the rows covering the whole test, each side's CPU (issue 13), so
//! rows from many runs can be put in one table; then the CPU of the row's
//! side over the row's span with its busiest thread (issue 8).

use std::io::{self, Write};

use linerate_proto::spec::Pace;
use linerate_proto::test_type::Shape;
use linerate_proto::wire::Side;

use super::format::{Sink, SweepSink};
use super::text::side_name;
use crate::model::{
    IntervalCpuRecord, IntervalRecord, OneWay, Report, RrReport, SweepInfo, SweepReport,
    SweepTrial, TestInfo, UdpIntervalRecord, UdpSummary,
};

/// One table: interval rows as they happen, then a row per stream end and
/// per flow sum. Columns that do not apply to a row are empty.
pub(super) struct Csv<'a> {
    out: Box<dyn Write + 'a>,
    printed_header: bool,
    /// What the test is (from its start record), for the parameter columns.
    info: Option<TestInfo>,
}

const CSV_HEADER: &str = "record,side,flow,stream,role,start_s,end_s,seconds,bytes,bits_per_second,omitted,retransmits,snd_cwnd,snd_mss,rtt_us,datagrams,packets_per_second,issued,received,lost,loss_percent,reordered,duplicates,late,corrupt,jitter_ns,socket_drops,test,protocol,direction,streams,len,rate_bits_per_second,rate_pps,client_engine,server_engine,client_cpu_percent,server_cpu_percent,client_cpu_us_per_kib,server_cpu_us_per_kib,cpu_percent,user_percent,system_percent,busiest_thread,busiest_thread_percent";

/// A serde enum's name (`stream`, `reverse`, …).
fn name<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The parameter columns of a stream test's rows (`test` to
/// `server_engine`); `server_engine` is known once the server's results
/// arrive (empty on interval rows).
fn stream_params(i: Option<&TestInfo>) -> String {
    let Some(i) = i else {
        return ",,,,,,,,,".into();
    };
    let (rate, pps) = match i.udp.as_ref().map(|u| u.pace) {
        Some(Pace::Rate(b)) => (b.to_string(), String::new()),
        Some(Pace::MilliPps(m)) => (String::new(), format!("{:.3}", m as f64 / 1e3)),
        Some(Pace::Unlimited) => ("unlimited".into(), "unlimited".into()),
        None => (String::new(), String::new()),
    };
    format!(
        ",{},{},{},{},{},{rate},{pps},{},{}",
        name(&i.kind),
        i.protocol,
        opt(i.direction.as_ref().map(name)),
        i.streams,
        opt(i.len),
        i.client_engine,
        i.server_engine
    )
}

/// The CPU columns: each side's share of a CPU and (stream tests) its
/// service demand, on rows covering the whole test; empty otherwise.
fn cpu_cols(r: Option<&Report>) -> String {
    let Some(r) = r else {
        return ",,,,".into();
    };
    let (c, s) = (&r.cpu.client, &r.cpu.server);
    format!(
        ",{:.1},{:.1},{},{}",
        c.percent_of_cpu,
        s.percent_of_cpu,
        opt(c.service_demand_us_per_kib.map(|v| format!("{v:.4}"))),
        opt(s.service_demand_us_per_kib.map(|v| format!("{v:.4}")))
    )
}

/// The UDP columns of a CSV row (empty for TCP rows).
const UDP_EMPTY: &str = ",,,,,,,,,,,,";

/// The last columns: the CPU of the row's side (`side`) over the row's
/// interval (interval rows) or the whole test (stream and sum rows), and
/// its busiest thread's share of a core; empty where not measured.
fn side_cpu_cols(percents: Option<[f64; 3]>, busiest: Option<(&str, f64)>) -> String {
    let p = percents.map_or(",,".into(), |[a, u, s]| format!("{a:.2},{u:.2},{s:.2}"));
    let (name, share) = busiest.map_or((String::new(), String::new()), |(n, b)| {
        (csv_text(n), format!("{b:.2}"))
    });
    format!(",{p},{name},{share}")
}

fn interval_cpu_cols(c: Option<&IntervalCpuRecord>) -> String {
    side_cpu_cols(
        c.map(|c| [c.percent_of_cpu, c.user_percent, c.system_percent]),
        c.map(|c| (c.busiest_thread.as_str(), c.busiest_thread_percent)),
    )
}

fn whole_cpu_cols(r: &Report, side: Side) -> String {
    let c = match side {
        Side::Client => &r.cpu.client,
        Side::Server => &r.cpu.server,
    };
    let pct = |x: f64| {
        if c.wall_s > 0.0 {
            x / c.wall_s * 100.0
        } else {
            0.0
        }
    };
    side_cpu_cols(
        Some([c.percent_of_cpu, pct(c.user_s), pct(c.system_s)]),
        c.busiest_thread.as_deref().zip(c.busiest_thread_percent),
    )
}

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
const RR_CSV_HEADER: &str = "record,request_size,response_size,loaded,transactions,server_transactions,seconds,transactions_per_second,min_ns,mean_ns,stddev_ns,p50_ns,p90_ns,p99_ns,p99_9_ns,p99_99_ns,max_ns,c2s_p50_ns,c2s_p99_ns,s2c_p50_ns,s2c_p99_ns,test,protocol,flows,client_engine,server_engine,client_cpu_percent,server_cpu_percent,client_cpu_us_per_transaction,server_cpu_us_per_transaction";

impl<'a> Csv<'a> {
    pub(super) fn new(out: Box<dyn Write + 'a>) -> Self {
        Csv {
            out,
            printed_header: false,
            info: None,
        }
    }

    fn header(&mut self) -> io::Result<()> {
        if !self.printed_header {
            writeln!(self.out, "{CSV_HEADER}")?;
            self.printed_header = true;
        }
        Ok(())
    }

    fn rr(&mut self, r: &Report, rr: &RrReport) -> io::Result<()> {
        let ow = |o: &OneWay| match &o.latency {
            Some(l) => format!("{},{}", l.p50_ns, l.p99_ns),
            None => ",".into(),
        };
        let t = &r.test;
        let params = format!(
            "{},{},{},{},{},{:.1},{:.1},{},{}",
            name(&t.kind),
            t.protocol,
            rr.flows,
            t.client_engine,
            t.server_engine,
            r.cpu.client.percent_of_cpu,
            r.cpu.server.percent_of_cpu,
            opt(rr.client_cpu_us_per_transaction.map(|v| format!("{v:.3}"))),
            opt(rr.server_cpu_us_per_transaction.map(|v| format!("{v:.3}")))
        );
        for p in &rr.phases {
            let l = &p.latency;
            writeln!(
                self.out,
                "phase,{},{},{},{},{},{:.6},{:.1},{},{:.1},{:.1},{},{},{},{},{},{},{},{},{params}",
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

/// One `interval` row per stream of `r` (either side's record).
fn interval_rows(
    out: &mut dyn Write,
    r: &IntervalRecord,
    info: Option<&TestInfo>,
) -> io::Result<()> {
    let params = stream_params(info) + &cpu_cols(None) + &interval_cpu_cols(r.cpu.as_deref());
    for s in &r.streams {
        writeln!(
            out,
            "interval,{},{},{},,{:.6},{:.6},{:.6},{},{:.0},{},{}{}{params}",
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
    Ok(())
}

impl Sink for Csv<'_> {
    fn start(&mut self, i: &TestInfo) -> io::Result<()> {
        self.info = Some(i.clone());
        if i.rules().shape != Shape::Stream {
            self.printed_header = true;
            return writeln!(self.out, "{RR_CSV_HEADER}");
        }
        self.header()
    }
    fn interval(&mut self, r: &IntervalRecord) -> io::Result<()> {
        self.header()?;
        interval_rows(&mut self.out, r, self.info.as_ref())?;
        self.out.flush()
    }
    fn finish(&mut self, r: &Report) -> io::Result<()> {
        if let Some(rr) = &r.rr {
            if !self.printed_header {
                self.printed_header = true;
                writeln!(self.out, "{RR_CSV_HEADER}")?;
            }
            return self.rr(r, rr);
        }
        self.header()?;
        // The server's intervals arrive with its results, at the end: its
        // rows follow the client's, with `side` telling them apart.
        for i in &r.server_intervals {
            interval_rows(&mut self.out, i, Some(&r.test))?;
        }
        let params = stream_params(Some(&r.test));
        let (part, whole) = (
            params.clone() + &cpu_cols(None),
            params + &cpu_cols(Some(r)),
        );
        for s in &r.streams {
            for (role, e) in [("sender", &s.sender), ("receiver", &s.receiver)] {
                writeln!(
                    self.out,
                    "stream,{},{},{},{role},,,{:.6},{},{:.0},,{}{}{part}{}",
                    side_name(e.side),
                    flow_name(s.flow),
                    s.id,
                    e.seconds,
                    e.bytes,
                    e.bits_per_second,
                    tcp_csv(e.tcp.as_ref()),
                    udp_summary_csv(s.udp.as_ref(), role == "receiver"),
                    whole_cpu_cols(r, e.side)
                )?;
            }
        }
        for f in &r.sums {
            writeln!(
                self.out,
                "sum,{},{},,sender,,,{:.6},{},{:.0},,{},,,{}{whole}{}",
                side_name(f.flow.sender()),
                flow_name(f.flow),
                f.sender_seconds,
                f.sender_bytes,
                f.sender_bits_per_second,
                f.retransmits.map(|x| x.to_string()).unwrap_or_default(),
                udp_summary_csv(f.udp.as_ref(), false),
                whole_cpu_cols(r, f.flow.sender())
            )?;
            writeln!(
                self.out,
                "sum,{},{},,receiver,,,{:.6},{},{:.0},,,,,{}{whole}{}",
                side_name(f.flow.sender().other()),
                flow_name(f.flow),
                f.receiver_seconds,
                f.receiver_bytes,
                f.receiver_bits_per_second,
                udp_summary_csv(f.udp.as_ref(), true),
                whole_cpu_cols(r, f.flow.sender().other())
            )?;
        }
        self.out.flush()
    }
}

const SWEEP_CSV_HEADER: &str = "record,len,search,requested_pps,requested_bits_per_second,sent_pps,sent_bits_per_second,received_pps,received_bits_per_second,issued,received,lost,loss_ppm,loss_percent,kept_up,socket_drops,error,protocol,direction,streams,trial_s";

fn csv_text(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

/// A sweep: a row per trial as it finishes, then a row per size's
/// zero-loss result.
pub(super) struct CsvSweep<'a> {
    out: Box<dyn Write + 'a>,
    /// The sweep's parameter columns, from its start record.
    params: String,
}

impl<'a> CsvSweep<'a> {
    pub(super) fn new(out: Box<dyn Write + 'a>) -> Self {
        CsvSweep {
            out,
            params: ",,,,".into(),
        }
    }
}

impl SweepSink for CsvSweep<'_> {
    fn start(&mut self, i: &SweepInfo) -> io::Result<()> {
        self.params = format!(
            ",{},{},{},{}",
            i.protocol,
            name(&i.direction),
            i.streams,
            i.trial_s
        );
        writeln!(self.out, "{SWEEP_CSV_HEADER}")?;
        self.out.flush()
    }

    fn trial(&mut self, t: &SweepTrial) -> io::Result<()> {
        writeln!(
            self.out,
            "trial,{},{},{:.3},{:.0},{:.3},{:.0},{:.3},{:.0},{},{},{},{:.3},{:.6},{},{},{}{}",
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
            t.error.as_deref().map(csv_text).unwrap_or_default(),
            self.params
        )?;
        self.out.flush()
    }

    fn finish(&mut self, r: &SweepReport) -> io::Result<()> {
        for z in &r.zero_loss {
            writeln!(
                self.out,
                "zero_loss,{},,{},{},,,{},,,,,,{},,,{}{}",
                z.len,
                opt(z.pps.map(|p| format!("{p:.3}"))),
                opt(z.bits_per_second.map(|b| format!("{b:.0}"))),
                opt(z.received_pps.map(|p| format!("{p:.3}"))),
                z.max_loss_percent,
                csv_text(&z.note),
                self.params
            )?;
        }
        self.out.flush()
    }
}
