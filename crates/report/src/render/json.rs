//! `--json`: one pretty-printed document at the end (the model itself).

use std::io::{self, Write};

use super::format::{Sink, SweepSink};
use crate::model::{IntervalRecord, Report, SweepInfo, SweepReport, SweepTrial, TestInfo};

pub(super) struct Json<'a> {
    out: Box<dyn Write + 'a>,
}

impl<'a> Json<'a> {
    pub(super) fn new(out: Box<dyn Write + 'a>) -> Self {
        Json { out }
    }
}

pub(super) fn document<T: serde::Serialize + ?Sized>(
    out: &mut dyn Write,
    value: &T,
) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, value)?;
    writeln!(out)?;
    out.flush()
}

impl Sink for Json<'_> {
    fn start(&mut self, _: &TestInfo) -> io::Result<()> {
        Ok(())
    }
    fn interval(&mut self, _: &IntervalRecord) -> io::Result<()> {
        Ok(())
    }
    fn finish(&mut self, r: &Report) -> io::Result<()> {
        document(&mut self.out, r)
    }
}

pub(super) struct JsonSweep<'a> {
    out: Box<dyn Write + 'a>,
}

impl<'a> JsonSweep<'a> {
    pub(super) fn new(out: Box<dyn Write + 'a>) -> Self {
        JsonSweep { out }
    }
}

impl SweepSink for JsonSweep<'_> {
    fn start(&mut self, _: &SweepInfo) -> io::Result<()> {
        Ok(())
    }
    fn trial(&mut self, _: &SweepTrial) -> io::Result<()> {
        Ok(())
    }
    fn finish(&mut self, r: &SweepReport) -> io::Result<()> {
        document(&mut self.out, r)
    }
}
