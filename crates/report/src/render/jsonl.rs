//! `--json-lines`: a `start` record, one record per interval (sweeps: per
//! trial; rr/crr: per phase) as it happens, then a `summary` holding the
//! whole report. With `--flows`, an interval record carries the sums and
//! each flow's interval follows as a `flow_interval` record of its own.

use std::io::{self, Write};

use super::format::{Sink, SweepSink};
use crate::model::{
    FlowIntervalRecord, IntervalRecord, Record, Report, RrPhaseRecord, SweepInfo, SweepReport,
    SweepTrial, TestInfo,
};

/// One compact JSON document and a newline, flushed at once (a reader
/// follows the test live).
fn line<T: serde::Serialize>(out: &mut dyn Write, record: &T) -> io::Result<()> {
    unflushed(out, record)?;
    out.flush()
}

/// [`line`] without the flush (the records of one interval's flows).
fn unflushed<T: serde::Serialize>(out: &mut dyn Write, record: &T) -> io::Result<()> {
    serde_json::to_writer(&mut *out, record)?;
    writeln!(out)
}

pub(super) struct JsonLines<'a> {
    out: Box<dyn Write + 'a>,
    /// `--flows` (from the start record): a record per flow per interval.
    per_flow: bool,
}

impl<'a> JsonLines<'a> {
    pub(super) fn new(out: Box<dyn Write + 'a>) -> Self {
        JsonLines {
            out,
            per_flow: false,
        }
    }
}

impl Sink for JsonLines<'_> {
    fn start(&mut self, i: &TestInfo) -> io::Result<()> {
        self.per_flow = i.flows.is_some();
        line(&mut self.out, &Record::Start(Box::new(i.clone())))
    }
    fn interval(&mut self, r: &IntervalRecord) -> io::Result<()> {
        if !self.per_flow {
            return line(&mut self.out, &Record::Interval(r.clone()));
        }
        let sums = IntervalRecord {
            side: r.side,
            start_s: r.start_s,
            end_s: r.end_s,
            omitted: r.omitted,
            streams: Vec::new(),
            sums: r.sums.clone(),
            iface: r.iface.clone(),
            cpu: r.cpu.clone(),
        };
        unflushed(&mut self.out, &Record::Interval(sums))?;
        for s in &r.streams {
            let flow = FlowIntervalRecord {
                side: r.side,
                start_s: r.start_s,
                end_s: r.end_s,
                omitted: r.omitted,
                stream: s.clone(),
            };
            unflushed(&mut self.out, &Record::FlowInterval(Box::new(flow)))?;
        }
        self.out.flush()
    }
    fn rr_phase(&mut self, r: &RrPhaseRecord) -> io::Result<()> {
        line(&mut self.out, &Record::RrPhase(Box::new(r.clone())))
    }
    fn finish(&mut self, r: &Report) -> io::Result<()> {
        line(&mut self.out, &Record::Summary(Box::new(r.clone())))
    }
}

/// One line of `sweep --json-lines`.
#[derive(serde::Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum SweepRecord<'a> {
    Start(&'a SweepInfo),
    Trial(&'a SweepTrial),
    Summary(&'a SweepReport),
}

pub(super) struct JsonLinesSweep<'a> {
    out: Box<dyn Write + 'a>,
}

impl<'a> JsonLinesSweep<'a> {
    pub(super) fn new(out: Box<dyn Write + 'a>) -> Self {
        JsonLinesSweep { out }
    }
}

impl SweepSink for JsonLinesSweep<'_> {
    fn start(&mut self, i: &SweepInfo) -> io::Result<()> {
        line(&mut self.out, &SweepRecord::Start(i))
    }
    fn trial(&mut self, t: &SweepTrial) -> io::Result<()> {
        line(&mut self.out, &SweepRecord::Trial(t))
    }
    fn finish(&mut self, r: &SweepReport) -> io::Result<()> {
        line(&mut self.out, &SweepRecord::Summary(r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Flow, IntervalStreamRecord};
    use linerate_proto::wire::Side;

    #[test]
    fn issue_26_a_flow_interval_record_reads_back() {
        let rec = Record::FlowInterval(Box::new(FlowIntervalRecord {
            side: Side::Client,
            start_s: 0.5,
            end_s: 1.0,
            omitted: false,
            stream: IntervalStreamRecord {
                id: 7,
                flow: Flow::ServerToClient,
                bytes: 1234,
                bits_per_second: 19744.0,
                retransmits: None,
                tcp: None,
                udp: None,
            },
        }));
        let line = serde_json::to_string(&rec).expect("serialises");
        assert!(
            line.starts_with(r#"{"type":"flow_interval","side":"client""#),
            "{line}"
        );
        let back: Record = serde_json::from_str(&line).expect("reads back");
        assert_eq!(back, rec);
    }
}
