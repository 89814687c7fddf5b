//! `--plot`: an SVG of a request/response test, drawn from the report with
//! `plotters` (SVG backend): a caption saying what was measured; the
//! latency percentiles against message size (log-log, one line per
//! percentile; loaded phases dashed in the same colour) — or, for a single
//! size, a line of its figures instead of a one-point panel; and the
//! complementary distribution of the round trips of every phase on a log
//! axis (fraction slower than x), so the tail beyond p99 is as visible as
//! the median (issue 13). Responses are named where their size differs
//! from the request's.

use plotters::prelude::*;

use crate::chart_lines::{self, Axes, Line};
use crate::chart_style::series_colour;
use crate::model::{Report, RrPhaseReport, RrReport, RrTiming};
use crate::plot_text::{caption, decade, err, tick, utc, PlotError, CAPTION_H};

fn empty(why: &str) -> PlotError {
    PlotError(format!("nothing to plot: {why}"))
}

const WIDTH: u32 = 1000;
const PANEL: u32 = 540;
/// The note that stands in for the size panel of a single-size test.
const NOTE_H: u32 = 60;

/// The SVG document for `r`.
pub fn svg(r: &Report) -> Result<String, PlotError> {
    let rr =
        r.rr.as_ref()
            .ok_or_else(|| empty("not a request/response test"))?;
    let phases: Vec<&RrPhaseReport> = rr.phases.iter().filter(|p| p.latency.count > 0).collect();
    if phases.is_empty() {
        return Err(empty("no phase completed a transaction"));
    }
    let mut sizes: Vec<u32> = phases.iter().map(|p| p.request_size).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let one_size = sizes.len() < 2;
    let height = CAPTION_H + if one_size { NOTE_H } else { PANEL } + PANEL;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (band, rest) = root.split_vertically(CAPTION_H);
        caption(&band, &caption_lines(r, rr))?;
        let (top, bottom) = rest.split_vertically(if one_size { NOTE_H } else { PANEL });
        if one_size {
            single_size_note(&top, &phases)?;
        } else {
            percentiles(&top, &phases)?;
        }
        ccdf(&bottom, &phases)?;
        root.present().map_err(err)?;
    }
    Ok(out)
}

/// What was measured: tool, test, host, date; then the parameters.
pub(crate) fn caption_lines(r: &Report, rr: &RrReport) -> Vec<String> {
    let t = &r.test;
    let kind = serde_json::to_value(t.kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    let limit = match rr.limit {
        linerate_proto::spec::RrLimit::TimeMs(ms) => {
            format!("{} s per size", tick(ms as f64 / 1e3))
        }
        linerate_proto::spec::RrLimit::Count(n) => format!("{n} transactions per flow and size"),
    };
    let timing = match rr.timing {
        RrTiming::PerMessage => "each transaction timed".to_string(),
        RrTiming::Batch { batch } => format!("timed per batch of {batch}"),
    };
    let mut params = vec![
        format!("{} flow{}", rr.flows, if rr.flows == 1 { "" } else { "s" }),
        limit,
        timing,
        format!("engine {}", t.client_engine),
    ];
    if rr.busy_poll {
        params.push("busy poll".into());
    }
    if let Some(l) = &rr.load {
        params.push(format!("under load: {} bulk stream(s)", l.streams));
    }
    if r.interrupted {
        params.push("interrupted (Ctrl-C)".into());
    }
    vec![
        format!(
            "{} · {} {} to {} · {}",
            t.client_software,
            t.protocol,
            kind,
            t.server,
            utc(t.start_unix_ms)
        ),
        params.join(" · "),
    ]
}

/// "64 B" or "64 B → 4096 B": the response is named where it differs.
fn size_label(p: &RrPhaseReport) -> String {
    if p.response_size == p.request_size {
        format!("{} B", p.request_size)
    } else {
        format!("{} B → {} B", p.request_size, p.response_size)
    }
}

/// A single size gets its figures as a line of text: one point is no
/// curve.
fn single_size_note<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    phases: &[&RrPhaseReport],
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    for (i, p) in phases.iter().take(2).enumerate() {
        let l = &p.latency;
        let text = format!(
            "{}{}: round trip p50 {} µs, p99 {} µs, p99.9 {} µs, max {} µs \
             ({} transactions; one size: no latency-vs-size panel)",
            size_label(p),
            if p.loaded { " under load" } else { "" },
            tick(us(l.p50_ns)),
            tick(us(l.p99_ns)),
            tick(us(l.p99_9_ns)),
            tick(us(l.max_ns)),
            p.transactions,
        );
        let style = ("sans-serif", 15).into_font().color(&BLACK);
        area.draw(&Text::new(text, (15, 10 + 22 * i as i32), style))
            .map_err(err)?;
    }
    Ok(())
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

fn span(lo: f64, hi: f64) -> (f64, f64) {
    let lo = lo.max(1e-3);
    (lo / 1.5, hi.max(lo) * 1.5)
}

/// A line of the percentile chart: its name, what it reads, its colour.
type Percentile = (&'static str, fn(&RrPhaseReport) -> u64, RGBColor);

fn percentiles<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    phases: &[&RrPhaseReport],
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    let (x0, x1) = span(
        phases.iter().map(|p| p.request_size).min().unwrap_or(1) as f64,
        phases.iter().map(|p| p.request_size).max().unwrap_or(1) as f64,
    );
    let (y0, y1) = span(
        phases
            .iter()
            .map(|p| us(p.latency.min_ns))
            .fold(f64::MAX, f64::min),
        phases
            .iter()
            .map(|p| us(p.latency.p99_9_ns))
            .fold(0.0, f64::max),
    );
    let responses: Vec<String> = phases
        .iter()
        .filter(|p| p.response_size != p.request_size)
        .map(|p| p.response_size.to_string())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let title = if responses.is_empty() {
        "Round-trip latency vs request size".to_string()
    } else {
        format!(
            "Round-trip latency vs request size (responses {} B)",
            responses.join(", ")
        )
    };
    let picks: [Percentile; 5] = [
        ("min", |p| p.latency.min_ns, RGBColor(120, 120, 120)),
        ("p50", |p| p.latency.p50_ns, RGBColor(31, 119, 180)),
        ("p90", |p| p.latency.p90_ns, RGBColor(44, 160, 44)),
        ("p99", |p| p.latency.p99_ns, RGBColor(255, 127, 14)),
        ("p99.9", |p| p.latency.p99_9_ns, RGBColor(214, 39, 40)),
    ];
    let mut lines = Vec::new();
    for loaded in [false, true] {
        let of: Vec<&&RrPhaseReport> = phases.iter().filter(|p| p.loaded == loaded).collect();
        if of.is_empty() {
            continue;
        }
        for (name, pick, colour) in picks {
            lines.push(Line {
                label: if loaded {
                    format!("{name} under load (dashed)")
                } else {
                    name.to_string()
                },
                colour,
                dashed: loaded,
                marker: chart_lines::Marker::nth(usize::from(loaded)),
                points: of
                    .iter()
                    .map(|p| (f64::from(p.request_size), us(pick(p)), 0.0))
                    .collect(),
            });
        }
    }
    let axes = Axes {
        title: &title,
        title_size: 20,
        y_label_area: 65,
        x: x0..x1,
        y: y0..y1,
        x_desc: "request size (bytes)",
        y_desc: "latency (µs)",
    };
    chart_lines::panel(area, &axes, &lines)
}

/// The complementary distribution per phase: the fraction of round trips
/// slower than x, on a log axis down to one transaction in the phase.
fn ccdf<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    phases: &[&RrPhaseReport],
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    let (x0, x1) = span(
        phases
            .iter()
            .map(|p| us(p.latency.min_ns))
            .fold(f64::MAX, f64::min),
        phases
            .iter()
            .map(|p| us(p.latency.max_ns))
            .fold(0.0, f64::max),
    );
    let most = phases
        .iter()
        .map(|p| p.histogram.iter().map(|&(_, c)| c).sum::<u64>())
        .max()
        .unwrap_or(1)
        .max(1);
    // The slowest round trip of the largest phase is 1/most of it.
    let floor = 10f64.powf((1.0 / most as f64).log10().floor());
    let mut chart = ChartBuilder::on(area)
        .caption(
            "Round-trip tail per size: fraction slower than x (log)",
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(75)
        .build_cartesian_2d((x0..x1).log_scale(), (floor * 0.8..1.2).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("round trip (µs)")
        .y_desc("fraction of round trips > x")
        .x_label_formatter(&|v| tick(*v))
        .y_label_formatter(&|v| decade(*v))
        .draw()
        .map_err(err)?;
    // One colour per size, the same with and without load.
    let mut sizes: Vec<(u32, u32)> = phases
        .iter()
        .map(|p| (p.request_size, p.response_size))
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    for p in phases {
        let i = sizes
            .iter()
            .position(|&s| s == (p.request_size, p.response_size))
            .unwrap_or(0);
        let total: u64 = p.histogram.iter().map(|&(_, c)| c).sum();
        let mut acc = 0u64;
        // A step per bucket; the last (nothing slower) is off a log axis.
        let mut points: Vec<(f64, f64)> = vec![(us(p.latency.min_ns), 1.0)];
        for &(v, c) in &p.histogram {
            acc += c;
            let above = (total - acc.min(total)) as f64 / total.max(1) as f64;
            if above <= 0.0 {
                break;
            }
            points.push((us(v), above));
        }
        let style = series_colour(i).stroke_width(2);
        let label = format!(
            "{}{}",
            size_label(p),
            if p.loaded { " under load (dashed)" } else { "" }
        );
        let series = if p.loaded {
            chart.draw_series(DashedLineSeries::new(points, 6, 4, style))
        } else {
            chart.draw_series(LineSeries::new(points, style))
        };
        series
            .map_err(err)?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    Ok(())
}
