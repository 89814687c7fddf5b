//! Renderers: each format is a [`Sink`] that receives the start of a test,
//! interval records as they happen, and the final [`Report`] — and a
//! [`SweepSink`] for sweeps. One file per format: [`human`] (with the
//! request/response tables in `rr_table`), [`json`], [`jsonl`] (JSON Lines)
//! and [`csv`] (with `--histogram`'s CSV). Every figure comes from the model.

use std::io::{self, Write};

use crate::model::{IntervalRecord, Report, SweepInfo, SweepReport, SweepTrial, TestInfo};

mod csv;
mod human;
mod json;
mod jsonl;
mod rr_table;

pub use csv::histogram_csv;

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
        Format::Human => Box::new(human::Human::new(out)),
        Format::Json => Box::new(json::Json::new(out)),
        Format::JsonLines => Box::new(jsonl::JsonLines::new(out)),
        Format::Csv => Box::new(csv::Csv::new(out)),
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
        Format::Human => Box::new(human::HumanSweep::new(out)),
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
