//! What every renderer is: the output formats, and the sink traits a test's
//! and a sweep's records go to.

use std::io;

use crate::model::{
    IntervalRecord, Report, RrPhaseRecord, SweepInfo, SweepReport, SweepTrial, TestInfo,
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
    /// rr/crr: a phase (message size) ended; only `--json-lines` prints
    /// it (the others print every size in the final report). A sink that
    /// wraps another passes it on.
    fn rr_phase(&mut self, _rec: &RrPhaseRecord) -> io::Result<()> {
        Ok(())
    }
    fn finish(&mut self, report: &Report) -> io::Result<()>;
    /// Whether the reader has closed the output (a write failed with a
    /// broken pipe) though the last hand-over succeeded: a sink that
    /// writes on another thread learns of it after the fact, and a test
    /// that prints nothing more until its end (rr) asks. A sink that
    /// wraps another passes it on.
    fn closed(&self) -> bool {
        false
    }
}

/// Receives a sweep's records in order.
pub trait SweepSink {
    fn start(&mut self, info: &SweepInfo) -> io::Result<()>;
    fn trial(&mut self, t: &SweepTrial) -> io::Result<()>;
    fn finish(&mut self, r: &SweepReport) -> io::Result<()>;
}
