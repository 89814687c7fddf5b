//! `linerate msg --plot`: throughput against message size with a ± 1 sd
//! band across trials (the reference study's figure), and the mean
//! per-message time against size with its ± 1 sd band; one line per
//! transport and concurrency: a colour per transport, a marker per
//! concurrency (concurrency > 1 dashed). Log-log axes, sizes ticked as
//! sizes; a caption says what ran (issue 28).

use std::path::Path;

use plotters::prelude::*;

use crate::chart_lines::{self, Line, Marker};
use crate::chart_style::series_colour;
use crate::msg::{MsgCell, MsgReport};
use crate::plot_text::{caption, err, PlotError, CAPTION_H};
use linerate_stats::trials::TrialStats;
use linerate_stats::units::format_size;

const WIDTH: u32 = 1000;
const HEIGHT: u32 = 1100;

/// The cells' distinct values of `key`, in the order they first ran.
fn distinct<T: PartialEq>(r: &MsgReport, key: impl Fn(&MsgCell) -> T) -> Vec<T> {
    let mut out = Vec::new();
    for c in &r.cells {
        let k = key(c);
        if !out.contains(&k) {
            out.push(k);
        }
    }
    out
}

/// One line per transport and concurrency, of the figure `pick` reads.
fn lines(r: &MsgReport, pick: fn(&MsgCell) -> Option<TrialStats>, scale: f64) -> Vec<Line> {
    let mut out: Vec<Line> = Vec::new();
    let transports = distinct(r, |c| c.transport.clone());
    let concurrencies = distinct(r, |c| c.concurrency);
    for c in r.cells.iter().filter(|c| c.skipped.is_none()) {
        let Some(s) = pick(c) else { continue };
        let label = format!("{} ×{}", c.transport, c.concurrency);
        let colour_ix = transports.iter().position(|t| *t == c.transport);
        let marker_ix = concurrencies.iter().position(|n| *n == c.concurrency);
        let i = match out.iter().position(|l| l.label == label) {
            Some(i) => i,
            None => {
                out.push(Line {
                    label,
                    dashed: c.concurrency > 1,
                    marker: Marker::nth(marker_ix.unwrap_or(0)),
                    colour: series_colour(colour_ix.unwrap_or(0)),
                    points: Vec::new(),
                });
                out.len() - 1
            }
        };
        out[i]
            .points
            .push((c.size as f64, s.mean / scale, s.sd / scale));
    }
    for l in &mut out {
        l.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

/// The SVG document for `r`.
pub fn svg_string(r: &MsgReport) -> Result<String, PlotError> {
    let thr = lines(r, |c| c.throughput_bps, 1e9);
    let lat = lines(r, |c| c.message_time_ns, 1e3);
    if thr.is_empty() {
        return Err(PlotError("nothing to plot: no cell ran".into()));
    }
    let mut out = String::new();
    {
        let root =
            SVGBackend::with_string(&mut out, (WIDTH, HEIGHT + CAPTION_H)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (band, body) = root.split_vertically(CAPTION_H);
        caption(&band, &msg_caption(r))?;
        let (top, bottom) = body.split_vertically(HEIGHT / 2);
        chart_lines::fitted_panel(
            &top,
            "message size (bytes)",
            "Throughput vs message size (mean ± 1 sd across trials)",
            "throughput (Gbit/s)",
            &thr,
        )?;
        chart_lines::fitted_panel(
            &bottom,
            "message size (bytes)",
            "Per-message time vs message size (mean ± 1 sd across trials)",
            "time per message (µs)",
            &lat,
        )?;
        root.present().map_err(err)?;
    }
    Ok(out)
}

/// What ran: tool, ends; transports, concurrencies, sizes and trials.
fn msg_caption(r: &MsgReport) -> Vec<String> {
    let ran: Vec<&MsgCell> = r.cells.iter().filter(|c| c.skipped.is_none()).collect();
    let sizes = ran.iter().map(|c| c.size);
    let (lo, hi) = (sizes.clone().min().unwrap_or(0), sizes.max().unwrap_or(0));
    let trials = distinct(r, |c| c.trials);
    let join = |v: Vec<String>| v.join(", ");
    vec![
        format!("{} · msg · {}", r.software, r.ends),
        format!(
            "transports {} · concurrency {} · sizes {} … {} · {} trial(s) per cell",
            join(distinct(r, |c| c.transport.clone())),
            join(distinct(r, |c| format!("×{}", c.concurrency))),
            format_size(lo),
            format_size(hi),
            join(trials.iter().map(u32::to_string).collect()),
        ),
    ]
}

/// Writes the SVG for `r` to `path`.
pub fn svg(r: &MsgReport, path: &Path) -> Result<(), PlotError> {
    let s = svg_string(r)?;
    std::fs::write(path, s).map_err(|e| PlotError(format!("writing {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::{build_cell, CellInput, MsgCounts, MsgTimer, MsgVerify, TrialInput};
    use linerate_stats::histogram::Histogram;

    fn cell(transport: &str, concurrency: u32, size: u64) -> MsgCell {
        let trial = |wall_ns| {
            let mut hist = Histogram::new();
            hist.record_n(wall_ns / 10, 10);
            TrialInput {
                wall_ns,
                messages: 10,
                bytes: 10 * size,
                hist,
                sender_cpu_ns: 1,
            }
        };
        build_cell(&CellInput {
            transport: transport.into(),
            concurrency,
            size,
            batch: 1,
            calibration_ns: 1,
            corrupt: None,
            trials: vec![trial(100_000), trial(150_000)],
            sent: MsgCounts::default(),
            received: MsgCounts::default(),
            receiver_cpu_ns: 0,
        })
    }

    #[test]
    fn one_line_per_transport_and_concurrency_with_bands() {
        let r = MsgReport {
            waiting: None,
            test: "msg".into(),
            software: "t".into(),
            ends: "here".into(),
            timer: MsgTimer {
                granularity_ns: 20,
                batch_factor: 50,
            },
            verify: MsgVerify {
                enabled: false,
                outside_timing: true,
            },
            cells: vec![
                cell("unix", 1, 56),
                cell("unix", 1, 4096),
                cell("unix", 8, 56),
                cell("unix", 8, 4096),
                cell("shm-bulk", 1, 56),
                cell("shm-bulk", 1, 4096),
            ],
        };
        let svg = svg_string(&r).expect("svg");
        for label in [
            "unix ×1",
            "unix ×8",
            "shm-bulk ×1",
            "Throughput vs message size",
        ] {
            // Each line's label appears in both panels' legends.
            assert!(svg.contains(label), "{label}");
        }
        // One ± 1 sd band per line per panel.
        assert_eq!(svg.matches(r#"opacity="0.15""#).count(), 6, "{svg}");
        // Issue 28: a caption, sizes ticked as sizes, and ×1 and ×8 of one
        // transport told apart by their markers (circles, squares).
        for needle in ["msg · here", "concurrency ×1, ×8", "\n1 KiB\n", "\n64 B\n"] {
            assert!(svg.contains(needle), "no {needle:?} in {svg}");
        }
        assert!(!svg.contains("1000000.0") && !svg.contains(">100.0<"));
        assert!(svg.contains("<circle") && svg.contains("<rect"), "{svg}");
        let empty = MsgReport {
            waiting: None,
            cells: Vec::new(),
            ..r
        };
        assert!(svg_string(&empty).is_err());
    }
}
