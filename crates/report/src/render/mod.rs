//! Renderers: each format is a [`Sink`] that receives the start of a test,
//! interval records as they happen, and the final [`Report`] — and a
//! [`SweepSink`] for sweeps. One file per format: `human` (with the
//! request/response tables in `rr_table`, its words in `heading`,
//! `stream_words` and `cpu_words`, and the sweep table in `human_sweep`),
//! `json`, `jsonl` (JSON Lines) and `csv` (with `--histogram`'s CSV).
//! Reports written whole (compare, repeat, msg, qualify) are a
//! [`Document`] written by [`export`]. Every figure comes from the model.

use std::io::{self, Write};

use crate::model::{IntervalRecord, Report, RrPhaseRecord, TestInfo};

mod columns;
mod cpu_words;
mod csv;
mod engine_use;
mod export;
mod format;
mod heading;
mod human;
mod human_sweep;
mod json;
mod jsonl;
pub mod msg;
mod rr_table;
mod stream_words;
mod text;

pub use csv::histogram_csv;
pub use export::{export, Document};
pub use format::{Format, Sink, SweepSink};
pub(crate) use heading::{test_heading, test_line};

/// A sink writing `format` to `out`. Machine formats are buffered and
/// flushed once per record (issue 8: a report went out one line per
/// `write(2)` through line-buffered stdout).
pub fn sink<'a>(format: Format, out: Box<dyn Write + 'a>) -> Box<dyn Sink + 'a> {
    if format == Format::Human {
        return Box::new(human::Human::new(out));
    }
    let out: Box<dyn Write + 'a> = Box::new(io::BufWriter::new(out));
    match format {
        Format::Json => Box::new(json::Json::new(out)),
        Format::JsonLines => Box::new(jsonl::JsonLines::new(out)),
        _ => Box::new(csv::Csv::new(out)),
    }
}

/// `-i 0`: a sink that prints no interval records (iperf3's habit for
/// "no periodic reports"). The intervals are still measured and reach the
/// final report, so `--json` carries them and the totals are unchanged.
pub fn sink_without_intervals<'a>(format: Format, out: Box<dyn Write + 'a>) -> Box<dyn Sink + 'a> {
    if format == Format::Human {
        return Box::new(human::Human::without_intervals(out));
    }
    Box::new(NoIntervals(sink(format, out)))
}

struct NoIntervals<'a>(Box<dyn Sink + 'a>);

impl Sink for NoIntervals<'_> {
    fn start(&mut self, info: &TestInfo) -> io::Result<()> {
        self.0.start(info)
    }
    fn interval(&mut self, _: &IntervalRecord) -> io::Result<()> {
        Ok(())
    }
    fn rr_phase(&mut self, rec: &RrPhaseRecord) -> io::Result<()> {
        self.0.rr_phase(rec)
    }
    fn finish(&mut self, report: &Report) -> io::Result<()> {
        self.0.finish(report)
    }
}

/// A sweep sink writing `format` to `out`.
pub fn sweep_sink<'a>(format: Format, out: Box<dyn Write + 'a>) -> Box<dyn SweepSink + 'a> {
    match format {
        Format::Human => Box::new(human_sweep::HumanSweep::new(out)),
        Format::Json => Box::new(json::JsonSweep::new(out)),
        Format::JsonLines => Box::new(jsonl::JsonLinesSweep::new(out)),
        Format::Csv => Box::new(csv::CsvSweep::new(out)),
    }
}

#[cfg(test)]
mod tests {
    use super::text::{wrap, WIDTH};
    use super::*;

    #[test]
    fn wrap_keeps_lines_within_the_width_and_breaks_at_separators() {
        let text = (0..30)
            .map(|i| format!("figure {i} is {}", i * 1000))
            .collect::<Vec<_>>()
            .join("; ");
        let out = wrap(&text, "; ", 9);
        for line in out.lines() {
            assert!(line.chars().count() <= WIDTH, "{line:?}");
        }
        assert!(out.lines().count() > 1);
        for line in out.lines().skip(1) {
            assert!(line.starts_with("         figure"), "{line:?}");
        }
        assert_eq!(
            out.lines().map(str::trim).collect::<Vec<_>>().join(" "),
            text
        );
        assert_eq!(wrap("short", "; ", 4), "short");
    }

    /// Counts the writes that reach the output (each one a `write(2)` on
    /// stdout).
    struct Counting<'a>(&'a std::cell::Cell<usize>);

    impl Write for Counting<'_> {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.set(self.0.get() + 1);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn issue_8_machine_formats_write_once_per_record() {
        let text = include_str!("../../tests/fixtures/tcp.json");
        let report: Report = serde_json::from_str(text).expect("fixture");
        for format in [Format::Json, Format::JsonLines, Format::Csv] {
            let writes = std::cell::Cell::new(0);
            {
                let mut s = sink(format, Box::new(Counting(&writes)));
                s.start(&report.test).expect("start");
                for i in &report.intervals {
                    s.interval(i).expect("interval");
                }
                s.finish(&report).expect("finish");
            }
            // start (json-lines), every interval, the summary.
            assert!(
                writes.get() <= report.intervals.len() + 2,
                "{format:?}: {} writes",
                writes.get()
            );
        }
    }
}
