//! Runs `linerate iperf3 -c HOST …` (the drop-in): one test over iperf3's
//! protocol by `linerate_run`'s iperf3 client ([`client`]), printed as
//! iperf3 prints it — its human layout ([`text_out`]), its `-J` document or
//! its `--json-stream` events ([`json_out`]), both from `linerate-iperf3` —
//! to stdout or the `--logfile`. What is here is which style, where it is
//! written and on which thread.

use crate::caller::OrRun as _;
use std::io::Write;

use linerate_iperf3::json::Results;
use linerate_iperf3::output::{json as json_out, text as text_out, Connection};
use linerate_report::model::{IntervalRecord, Report, TestInfo};
use serde_json::{json, Value};

use crate::cli::{Iperf3Config, Iperf3Style as Style};
use linerate_run::error::RunError;
use linerate_run::iperf3::client::{self, Output};
use linerate_run::printer::Printer;

/// The drop-in's [`Output`], written on a printer thread
/// ([`linerate_run::printer`]: a stdout nobody reads never stops the
/// control loop).
struct DropIn {
    style: Style,
    out: Box<dyn Write + Send>,
    intervals: bool,
    ctx: Option<Connection>,
}

impl DropIn {
    fn line(&mut self, v: &Value) -> std::io::Result<()> {
        writeln!(self.out, "{v}")?;
        self.out.flush()
    }

    fn event(&mut self, event: &str, data: Value) -> std::io::Result<()> {
        self.line(&json!({ "event": event, "data": data }))
    }
}

impl Output for DropIn {
    fn start(&mut self, info: &TestInfo, ctx: &Connection) -> std::io::Result<()> {
        self.ctx = Some(ctx.clone());
        match self.style {
            Style::Text => {
                let s = text_out::start(ctx, self.intervals);
                self.out.write_all(s.as_bytes())?;
                self.out.flush()
            }
            Style::JsonStream => self.event("start", json_out::start(info, ctx)),
            Style::Json => Ok(()),
        }
    }

    fn interval(&mut self, rec: &IntervalRecord) -> std::io::Result<()> {
        let Some(p) = self.ctx.as_ref().map(|c| c.params.clone()) else {
            return Ok(());
        };
        if !self.intervals {
            return Ok(());
        }
        match self.style {
            Style::Text => {
                let s = text_out::interval(rec, &p);
                self.out.write_all(s.as_bytes())?;
                self.out.flush()
            }
            Style::JsonStream => self.event("interval", json_out::interval(rec, &p)),
            Style::Json => Ok(()),
        }
    }

    fn finish(&mut self, report: &Report, server: &Results) -> std::io::Result<()> {
        let Some(ctx) = self.ctx.clone() else {
            return Ok(());
        };
        match self.style {
            Style::Text => {
                let s = text_out::finish(report, &ctx.params, server);
                self.out.write_all(s.as_bytes())?;
                self.out.flush()
            }
            Style::Json => {
                let mut doc = json_out::document(report, &ctx, server);
                if !self.intervals {
                    doc["intervals"] = json!([]);
                }
                let text = serde_json::to_string_pretty(&doc).map_err(std::io::Error::other)?;
                writeln!(self.out, "{text}")?;
                self.out.flush()
            }
            Style::JsonStream => {
                let (end, _) = json_out::end(report, &ctx.params, server);
                self.event("end", end)?;
                if let Some(t) = &server.server_output_text {
                    self.event("server_output_text", t.clone().into())?;
                }
                if let Some(j) = &server.server_output_json {
                    self.event("server_output_json", j.clone())?;
                }
                Ok(())
            }
        }
    }
}

/// Runs the test; a failure is also written in the chosen JSON style
/// (iperf3's `error` document or event) before it is returned.
pub fn run(cfg: &Iperf3Config) -> Result<(), RunError> {
    let out: Box<dyn Write + Send> = match &cfg.logfile {
        Some(path) => Box::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| anyhow::anyhow!("--logfile {}: {e}", path.display()))
                .or_run()?,
        ),
        None => Box::new(std::io::stdout()),
    };
    let (style, intervals) = (cfg.style, cfg.intervals);
    let mut o = Printer::spawn(move || DropIn {
        style,
        out,
        intervals,
        ctx: None,
    })
    .map_err(|e| anyhow::anyhow!("starting the output thread: {e}"))
    .or_run()?;
    let result = client::run(&cfg.client, &cfg.extras, &mut o);
    if let Err(e) = &result {
        let message = e.chain().to_string();
        let _ = o.send(move |o| match style {
            Style::Json => o.line(&json_out::error_document(&message)),
            Style::JsonStream => o.event("error", message.into()),
            Style::Text => Ok(()),
        });
    }
    // Everything is written before main says how the test ended.
    drop(o);
    result.map(drop)
}
