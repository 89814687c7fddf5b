//! `qualify --report FILE.html`: the qualification on one self-contained
//! page ([`crate::html::page`]): the summary with its verdicts, the RFC
//! 2544 throughput per size (`chart_lines`) and loss against
//! offered load (the sweep figure, [`crate::plot::sweep_svg`], drawn from
//! the loss steps), the Y.1564 step table, the RFC 6349 metrics with the
//! RTT over time (`plot_extra::time_lines_svg`), and the
//! preflight's interface and `doctor` findings.

use plotters::prelude::*;

use crate::chart_lines::{self, Line, Marker};
use crate::chart_style::series_colour;
use crate::html::{page as html_page, Page, Section};
use crate::model::{SweepInfo, SweepReport, SCHEMA_VERSION};
use crate::plot_text::{caption, err, utc, PlotError, CAPTION_H};
use crate::qualify::{QualifyReport, QualifyRun};
use crate::render::Document;
use linerate_proto::spec::Direction;

fn caption_lines(r: &QualifyReport, what: &str) -> Vec<String> {
    vec![
        format!(
            "{} · qualify {} · {}",
            r.client_software,
            r.server,
            utc(r.start_unix_ms)
        ),
        what.to_owned(),
    ]
}

/// RFC 2544 throughput (Ethernet frame bit/s) against datagram size, a
/// line per engine.
fn throughput_svg(r: &QualifyReport) -> Result<String, PlotError> {
    let lines: Vec<Line> = r
        .runs
        .iter()
        .enumerate()
        .filter_map(|(i, run)| {
            let points: Vec<(f64, f64, f64)> = run
                .rfc2544
                .as_ref()?
                .sizes
                .iter()
                .filter_map(|s| Some((f64::from(s.len), s.throughput_frame_bps? / 1e6, 0.0)))
                .filter(|p| p.1 > 0.0)
                .collect();
            (!points.is_empty()).then(|| Line {
                label: format!("engine {}", run.engine),
                colour: series_colour(i),
                dashed: false,
                marker: Marker::nth(i),
                points,
            })
        })
        .collect();
    if lines.is_empty() {
        return Err(PlotError("nothing to plot: no throughput found".into()));
    }
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (1000, 450 + CAPTION_H)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (band, body) = root.split_vertically(CAPTION_H);
        caption(
            &band,
            &caption_lines(r, "RFC 2544 throughput: highest zero-loss rate"),
        )?;
        chart_lines::fitted_panel(
            &body,
            "datagram size (bytes)",
            "RFC 2544 throughput per size (Ethernet frames)",
            "throughput (Mbit/s)",
            &lines,
        )?;
        root.present().map_err(err)?;
    }
    Ok(out)
}

/// RFC 2544 loss against offered load: the sweep figure of the loss
/// steps, those whose loss was the tester's own (inconclusive) left out
/// (the summary names them).
fn loss_svg(r: &QualifyReport, run: &QualifyRun) -> Option<Result<String, PlotError>> {
    let m = run.rfc2544.as_ref()?;
    let trials: Vec<_> = m
        .sizes
        .iter()
        .flat_map(|s| s.loss_vs_load.iter())
        .filter(|t| t.inconclusive.is_none())
        .cloned()
        .collect();
    if trials.is_empty() {
        return None;
    }
    let sweep = SweepReport {
        schema: SCHEMA_VERSION,
        test: SweepInfo {
            protocol: "udp".into(),
            server: r.server.clone(),
            direction: Direction::Forward,
            streams: 1,
            trial_s: m.trial_s,
            sizes: m.sizes.iter().map(|s| s.len).collect(),
            points: Vec::new(),
            rates_are_bits: true,
            max_loss_percent: 0.0,
            client_software: r.client_software.clone(),
            start_unix_ms: r.start_unix_ms,
        },
        trials,
        zero_loss: Vec::new(),
        notes: Vec::new(),
    };
    Some(crate::plot::sweep_svg(&sweep))
}

/// RFC 6349: the sender's TCP_INFO RTT per interval, a line per direction
/// that has samples (one that did not run has none).
fn rtt_svg(r: &QualifyReport, run: &QualifyRun) -> Option<Result<String, PlotError>> {
    let m = run.rfc6349.as_ref()?;
    let lines: Vec<(String, Vec<(f64, f64)>)> = m
        .directions
        .iter()
        .filter(|d| !d.rtt_samples.is_empty())
        .map(|d| {
            (
                d.direction.clone(),
                d.rtt_samples.iter().map(|&(t, ns)| (t, ns / 1e6)).collect(),
            )
        })
        .collect();
    if lines.is_empty() {
        return None;
    }
    Some(crate::plot_extra::time_lines_svg(
        &caption_lines(r, &format!("RFC 6349 TCP, engine {}", run.engine)),
        "RFC 6349: sender's RTT (TCP_INFO) during the transfer",
        "RTT (ms)",
        1.0,
        lines,
    ))
}

/// The page; `command_line` as the user typed it.
pub fn page(r: &QualifyReport, command_line: &str) -> Result<String, PlotError> {
    let mut text = Vec::new();
    r.human(&mut text).map_err(err)?;
    // The verdict is in the title; the plots come first, then the tables.
    let mut sections = Vec::new();
    if r.runs.iter().any(|run| run.rfc2544.is_some()) {
        if let Ok(svg) = throughput_svg(r) {
            sections.push(Section {
                heading: "RFC 2544 throughput per size".into(),
                text: None,
                svg: Some(svg),
            });
        }
    }
    for run in &r.runs {
        if let Some(svg) = loss_svg(r, run) {
            sections.push(Section {
                heading: format!("RFC 2544 loss against offered load (engine {})", run.engine),
                text: None,
                svg: Some(svg?),
            });
        }
        if let Some(svg) = rtt_svg(r, run) {
            sections.push(Section {
                heading: format!("RFC 6349 round-trip time (engine {})", run.engine),
                text: None,
                svg: Some(svg?),
            });
        }
    }
    sections.push(Section {
        heading: format!("Summary: {}", r.verdict.word()),
        text: Some(String::from_utf8_lossy(&text).into_owned()),
        svg: None,
    });
    let first = r.runs.first().map(|run| &run.preflight);
    let p = Page {
        title: format!("linerate qualify {}: {}", r.server, r.verdict.word()),
        command_line: command_line.to_owned(),
        version: r.client_software.clone(),
        engines: r
            .runs
            .iter()
            .map(|run| run.engine.clone())
            .collect::<Vec<_>>()
            .join(", "),
        generated: utc(r.start_unix_ms),
        host: Vec::new(),
        interfaces: first
            .and_then(|p| p.interface.as_ref())
            .map(|i| vec![format!("{} {} mtu {}", i.name, i.state, i.mtu.unwrap_or(0))])
            .unwrap_or_default(),
        checks: first
            .and_then(|p| p.doctor.as_ref())
            .map(|d| {
                d.checks
                    .iter()
                    .map(|c| {
                        (
                            format!("{:?}", c.status).to_lowercase(),
                            c.name.clone(),
                            c.value.clone().unwrap_or_default(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default(),
        sections,
    };
    Ok(html_page(&p))
}
