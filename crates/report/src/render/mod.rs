//! Renderers: each format is a [`Sink`] that receives the start of a test,
//! interval records as they happen, and the final [`Report`] — and a
//! [`SweepSink`] for sweeps. One file per format: [`human`] (with the
//! request/response tables in `rr_table`, its words in `heading`,
//! `stream_words` and `cpu_words`, and the sweep table in `human_sweep`),
//! [`json`], [`jsonl`] (JSON Lines) and [`csv`] (with `--histogram`'s CSV).
//! Reports written whole (compare, repeat, msg, qualify) are a
//! [`Document`] written by [`export`]. Every figure comes from the model.

use std::io::{self, Write};

use crate::model::{
    IntervalRecord, Report, RrPhaseRecord, SweepInfo, SweepReport, SweepTrial, TestInfo,
};

mod columns;
mod cpu_words;
mod csv;
mod engine_use;
mod export;
mod heading;
mod human;
mod human_sweep;
mod json;
mod jsonl;
pub mod msg;
mod rr_table;
mod stream_words;

pub use csv::histogram_csv;
pub use export::{export, Document};
pub(crate) use heading::{test_heading, test_line};

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
    /// rr/crr: a phase (message size) ended; only `--json-lines` prints
    /// it (the others print every size in the final report). A sink that
    /// wraps another passes it on.
    fn rr_phase(&mut self, _rec: &RrPhaseRecord) -> io::Result<()> {
        Ok(())
    }
    fn finish(&mut self, report: &Report) -> io::Result<()>;
}

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

/// Receives a sweep's records in order.
pub trait SweepSink {
    fn start(&mut self, info: &SweepInfo) -> io::Result<()>;
    fn trial(&mut self, t: &SweepTrial) -> io::Result<()>;
    fn finish(&mut self, r: &SweepReport) -> io::Result<()>;
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

fn side_name(s: linerate_proto::wire::Side) -> &'static str {
    match s {
        linerate_proto::wire::Side::Client => "client",
        linerate_proto::wire::Side::Server => "server",
    }
}

/// The widest line the human format writes (issue 13).
pub(super) const WIDTH: usize = 100;

/// `text` as lines of at most [`WIDTH`] columns, each after the first
/// indented by `indent` spaces: broken after a `sep` where it can, else at
/// a space. Ends without a newline.
pub(super) fn wrap(text: &str, sep: &str, indent: usize) -> String {
    let cols = |s: &str| s.chars().count();
    let pad = " ".repeat(indent);
    let mut lines: Vec<String> = vec![String::new()];
    let mut pieces: Vec<String> = Vec::new();
    // Pieces keep their separator, so joining them gives the text back.
    let mut rest = text;
    while let Some(i) = rest.find(sep) {
        pieces.push(rest[..i + sep.len()].to_string());
        rest = &rest[i + sep.len()..];
    }
    pieces.push(rest.to_string());
    for piece in pieces {
        for (k, word) in piece.split(' ').enumerate() {
            let word = if k == 0 {
                word.to_string()
            } else {
                format!(" {word}")
            };
            let line = lines.last_mut().expect("one line at least");
            let fits = cols(line) + cols(&word) <= WIDTH;
            // A new piece starts a new line when it would not fit whole.
            let piece_fits = k > 0 || cols(line) + cols(piece.trim_end()) <= WIDTH;
            if line.trim().is_empty() || (fits && piece_fits) {
                line.push_str(&word);
            } else {
                let trimmed = line.trim_end().to_string();
                *line = trimmed;
                lines.push(format!("{pad}{}", word.trim_start()));
            }
        }
    }
    lines
        .iter()
        .map(|l| l.trim_end())
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
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
