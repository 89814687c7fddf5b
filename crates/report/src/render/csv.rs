//! `--csv`: one table — interval rows as they happen, then a row per stream
//! end and per flow sum (request/response tests: a row per phase) — and
//! `--histogram`'s CSV of every bucket.

use std::io::{self, Write};

use linerate_proto::spec::TestKind;

use super::{side_name, Sink, SweepSink};
use crate::model::{
    IntervalRecord, OneWay, Report, RrReport, SweepInfo, SweepReport, SweepTrial, TestInfo,
    UdpIntervalRecord, UdpSummary,
};

/// One table: interval rows as they happen, then a row per stream end and
/// per flow sum. Columns that do not apply to a row are empty.
pub(super) struct Csv<'a> {
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

impl<'a> Csv<'a> {
    pub(super) fn new(out: Box<dyn Write + 'a>) -> Self {
        Csv {
            out,
            printed_header: false,
        }
    }

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

const SWEEP_CSV_HEADER: &str = "record,len,search,requested_pps,requested_bits_per_second,sent_pps,sent_bits_per_second,received_pps,received_bits_per_second,issued,received,lost,loss_ppm,loss_percent,kept_up,socket_drops,error";

fn csv_text(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

/// A sweep: a row per trial as it finishes, then a row per size's
/// zero-loss result.
pub(super) struct CsvSweep<'a> {
    out: Box<dyn Write + 'a>,
}

impl<'a> CsvSweep<'a> {
    pub(super) fn new(out: Box<dyn Write + 'a>) -> Self {
        CsvSweep { out }
    }
}

impl SweepSink for CsvSweep<'_> {
    fn start(&mut self, _: &SweepInfo) -> io::Result<()> {
        writeln!(self.out, "{SWEEP_CSV_HEADER}")?;
        self.out.flush()
    }

    fn trial(&mut self, t: &SweepTrial) -> io::Result<()> {
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

    fn finish(&mut self, r: &SweepReport) -> io::Result<()> {
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
