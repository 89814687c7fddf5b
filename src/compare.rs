//! `linerate compare`: each variant is a complete test through
//! [`client::run_to`] with a quiet sink (as a sweep's trials are), reduced
//! to the figures of `report::compare`, with ratios to the first variant.

use std::io::Write;

use anyhow::Result;
use linerate_report::compare::{
    metrics_of, render, set_ratios, CompareReport, CompareVariant, COMPARE_SCHEMA,
};
use linerate_report::model::{IntervalRecord, TestInfo};
use linerate_report::render::Sink;
use linerate_report::Report;

use crate::cli::CompareConfig;
use crate::client;

/// Renders nothing: compare prints only its own table.
struct Quiet;

impl Sink for Quiet {
    fn start(&mut self, _: &TestInfo) -> std::io::Result<()> {
        Ok(())
    }
    fn interval(&mut self, _: &IntervalRecord) -> std::io::Result<()> {
        Ok(())
    }
    fn finish(&mut self, _: &Report) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs every variant in order and prints the comparison. A variant that
/// cannot run or fails is a row saying why; the others still run.
pub fn run(cfg: &CompareConfig) -> Result<CompareReport> {
    let mut variants = Vec::new();
    for v in &cfg.variants {
        if client::INTERRUPTED.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
        let mut out = CompareVariant {
            name: v.name.clone(),
            engine: v.engine.clone(),
            client_engine: None,
            server_engine: None,
            busy_poll: v.busy_poll,
            error: None,
            metrics: Vec::new(),
        };
        match &v.config {
            Err(e) => out.error = Some(e.clone()),
            Ok(c) => match client::run_to(c, &mut Quiet) {
                Ok(r) => {
                    out.client_engine = Some(r.test.client_engine.clone());
                    out.server_engine = Some(r.test.server_engine.clone());
                    out.metrics = metrics_of(&r);
                }
                Err(e) => out.error = Some(format!("{:#}", anyhow::Error::from(e))),
            },
        }
        variants.push(out);
    }
    set_ratios(&mut variants);
    let report = CompareReport {
        schema: COMPARE_SCHEMA,
        test: cfg.test.clone(),
        args: cfg.args.clone(),
        variants,
    };
    // One write for the whole table or document, not one per line.
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    render(&report, cfg.format, &mut out)?;
    out.flush()?;
    Ok(report)
}
