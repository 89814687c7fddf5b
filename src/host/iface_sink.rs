//! `--iface DEV` on a test: a [`Sink`] wrapper that reads the interface's
//! counters when the test starts, at every interval record the client
//! relays (within a control-loop tick, ≤ 20 ms, of the interval's cut) and
//! at the end, and adds them to the records and the report. It runs on
//! the control loop's thread, so the counters are read on time however
//! long the output takes to be written. The renderers stay unaware of it:
//! machine formats print the fields, and human output gets a line per
//! interval and a block after the summary from [`lines`], which runs with
//! the renderer on the printer's thread
//! ([`linerate_run::printer`]).

use std::io::{self, Write};
use std::time::Instant;

use linerate_host::counters::{self, Counters, Traffic};
use linerate_host::render;
use linerate_report::model::{Flow, IfaceReport, IntervalRecord, TestInfo};
use linerate_report::render::{Format, Sink};
use linerate_report::Report;
use linerate_stats::units::format_bytes;

pub struct IfaceSink<'a> {
    inner: Box<dyn Sink + 'a>,
    dev: String,
    start: Option<(Instant, Counters)>,
    last: Option<(Instant, Counters)>,
    /// Per relayed interval, for the final report's interval records.
    seen: Vec<(f64, Traffic)>,
}

/// Wraps `inner` when `dev` is given.
pub fn wrap<'a>(inner: Box<dyn Sink + 'a>, dev: Option<&str>) -> Box<dyn Sink + 'a> {
    match dev {
        Some(dev) => Box::new(IfaceSink {
            inner,
            dev: dev.to_owned(),
            start: None,
            last: None,
            seen: Vec::new(),
        }),
        None => inner,
    }
}

/// Human output's lines for the counters [`IfaceSink`] added: wraps the
/// human renderer `inner` when `dev` is given.
pub fn lines<'a>(
    inner: Box<dyn Sink + 'a>,
    dev: Option<&str>,
    format: Format,
) -> Box<dyn Sink + 'a> {
    match dev {
        Some(dev) if format == Format::Human => Box::new(IfaceLines {
            inner,
            dev: dev.to_owned(),
            header: false,
        }),
        _ => inner,
    }
}

struct IfaceLines<'a> {
    inner: Box<dyn Sink + 'a>,
    dev: String,
    /// The traffic lines' header was printed.
    header: bool,
}

impl Sink for IfaceLines<'_> {
    fn start(&mut self, info: &TestInfo) -> io::Result<()> {
        self.inner.start(info)
    }

    fn interval(&mut self, rec: &IntervalRecord) -> io::Result<()> {
        self.inner.interval(rec)?;
        let Some(traffic) = &rec.iface else {
            return Ok(());
        };
        let mut out = super::Clean(io::stdout().lock());
        if !std::mem::replace(&mut self.header, true) {
            writeln!(out, "        {}", render::TRAFFIC_HEADER)?;
        }
        writeln!(out, "  iface {}", render::traffic_line(traffic))
    }

    fn finish(&mut self, report: &Report) -> io::Result<()> {
        self.inner.finish(report)?;
        if let Some(i) = &report.iface {
            let mut out = super::Clean(io::stdout().lock());
            writeln!(out, "Interface {} over the test:", self.dev)?;
            writeln!(out, "  {}", render::TRAFFIC_HEADER)?;
            writeln!(out, "  {}", render::traffic_line(&i.traffic))?;
            writeln!(out, "  {}", i.explanation)?;
        }
        Ok(())
    }
}

impl IfaceSink<'_> {
    fn read(&self) -> io::Result<(Instant, Counters)> {
        let c = counters::read(&self.dev).ok_or_else(|| {
            io::Error::other(format!(
                "--iface: interface {} vanished during the test",
                self.dev
            ))
        })?;
        Ok((Instant::now(), c))
    }
}

impl Sink for IfaceSink<'_> {
    fn start(&mut self, info: &TestInfo) -> io::Result<()> {
        let now = self.read()?;
        self.start = Some(now);
        self.last = Some(now);
        self.inner.start(info)
    }

    fn interval(&mut self, rec: &IntervalRecord) -> io::Result<()> {
        let (t1, c1) = self.read()?;
        let Some((t0, c0)) = self.last.replace((t1, c1)) else {
            return self.inner.interval(rec);
        };
        let traffic = Traffic::between(&self.dev, &c0, &c1, t1.duration_since(t0).as_secs_f64());
        self.seen.push((rec.start_s, traffic.clone()));
        let mut rec = rec.clone();
        rec.iface = Some(traffic);
        self.inner.interval(&rec)
    }

    fn finish(&mut self, report: &Report) -> io::Result<()> {
        let (t1, c1) = self.read()?;
        let Some((t0, c0)) = self.start else {
            return self.inner.finish(report);
        };
        let traffic = Traffic::between(&self.dev, &c0, &c1, t1.duration_since(t0).as_secs_f64());
        let mut report = report.clone();
        report.iface = Some(compare(&self.dev, traffic, &report));
        // The final report rebuilds the client's intervals from its
        // results: give each the counters read when it was relayed.
        for rec in &mut report.intervals {
            if let Some((_, t)) = self
                .seen
                .iter()
                .find(|(s, _)| (s - rec.start_s).abs() < 1e-6)
            {
                rec.iface = Some(t.clone());
            }
        }
        self.inner.finish(&report)
    }

    fn closed(&self) -> bool {
        self.inner.closed()
    }
}

/// The interface's counters beside the payload the test moved.
pub fn compare(dev: &str, traffic: Traffic, report: &Report) -> IfaceReport {
    // The counters cover the whole data phase: the payload too, warm-up
    // included.
    let sent: u64 = report
        .streams
        .iter()
        .filter(|s| s.flow == Flow::ClientToServer)
        .map(|s| s.sender.bytes + s.sender.omitted_bytes)
        .sum();
    let received: u64 = report
        .streams
        .iter()
        .filter(|s| s.flow == Flow::ServerToClient)
        .map(|s| s.receiver.bytes + s.receiver.omitted_bytes)
        .sum();
    let loopback = dev == "lo";
    let wire = if loopback {
        traffic.delta.tx_bytes
    } else {
        traffic.delta.tx_bytes + traffic.delta.rx_bytes
    };
    let payload = sent + received;
    let overhead = (payload > 0).then(|| (wire as f64 - payload as f64) / payload as f64 * 100.0);
    let explanation = match overhead {
        Some(o) => format!(
            "payload {} ({} sent, {} received), interface {} {}: {:+.2}% (headers, acknowledgements, control traffic, anything else on {dev}){}",
            format_bytes(payload),
            format_bytes(sent),
            format_bytes(received),
            if loopback { "sent" } else { "sent + received" },
            format_bytes(wire),
            o,
            if loopback { "; on loopback every packet is counted as sent and as received, so only sent bytes are compared" } else { "" },
        ),
        None => format!("no payload moved; interface {dev} carried {}", format_bytes(wire)),
    };
    IfaceReport {
        traffic,
        payload_sent_bytes: sent,
        payload_received_bytes: received,
        wire_bytes: wire,
        overhead_percent: overhead,
        explanation,
    }
}
