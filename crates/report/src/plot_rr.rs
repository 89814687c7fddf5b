//! `--plot`: an SVG of a request/response test, drawn from the report with
//! `plotters` (SVG backend): the latency percentiles against message size
//! (log-log, one line per percentile; loaded phases dashed in the same
//! colour), and below it the round-trip CDF of every phase (one colour per
//! size; dashed under load).

use plotters::prelude::*;

use crate::model::{Report, RrPhaseReport};
use crate::plot::PlotError;

fn draw<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> PlotError {
    PlotError(e.to_string())
}

fn empty(why: &str) -> PlotError {
    PlotError(format!("nothing to plot: {why}"))
}

const WIDTH: u32 = 1000;
const HEIGHT: u32 = 1100;

/// The SVG document for `r`.
pub fn svg(r: &Report) -> Result<String, PlotError> {
    let rr =
        r.rr.as_ref()
            .ok_or_else(|| empty("not a request/response test"))?;
    let phases: Vec<&RrPhaseReport> = rr.phases.iter().filter(|p| p.latency.count > 0).collect();
    if phases.is_empty() {
        return Err(empty("no phase completed a transaction"));
    }
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(draw)?;
        let (top, bottom) = root.split_vertically(HEIGHT / 2);
        percentiles(&top, &phases)?;
        cdf(&bottom, &phases)?;
        root.present().map_err(draw)?;
    }
    Ok(out)
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
    let mut chart = ChartBuilder::on(area)
        .caption("Round-trip latency vs request size", ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(65)
        .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())
        .map_err(draw)?;
    chart
        .configure_mesh()
        .x_desc("request size (bytes)")
        .y_desc("latency (µs)")
        .draw()
        .map_err(draw)?;
    let picks: [Percentile; 5] = [
        ("min", |p| p.latency.min_ns, RGBColor(120, 120, 120)),
        ("p50", |p| p.latency.p50_ns, RGBColor(31, 119, 180)),
        ("p90", |p| p.latency.p90_ns, RGBColor(44, 160, 44)),
        ("p99", |p| p.latency.p99_ns, RGBColor(255, 127, 14)),
        ("p99.9", |p| p.latency.p99_9_ns, RGBColor(214, 39, 40)),
    ];
    for loaded in [false, true] {
        let of: Vec<&&RrPhaseReport> = phases.iter().filter(|p| p.loaded == loaded).collect();
        if of.is_empty() {
            continue;
        }
        for (name, pick, colour) in picks {
            let points: Vec<(f64, f64)> = of
                .iter()
                .map(|p| (f64::from(p.request_size), us(pick(p))))
                .collect();
            let style = colour.stroke_width(2);
            let series = if loaded {
                chart.draw_series(DashedLineSeries::new(points.clone(), 6, 4, style))
            } else {
                chart.draw_series(LineSeries::new(points.clone(), style))
            };
            let label = if loaded {
                format!("{name} under load (dashed)")
            } else {
                name.to_string()
            };
            series
                .map_err(draw)?
                .label(label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
            chart
                .draw_series(points.iter().map(|&p| Circle::new(p, 3, colour.filled())))
                .map_err(draw)?;
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(draw)?;
    Ok(())
}

fn cdf<DB: DrawingBackend>(
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
    let mut chart = ChartBuilder::on(area)
        .caption("Round-trip CDF per size", ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(65)
        .build_cartesian_2d((x0..x1).log_scale(), 0f64..1f64)
        .map_err(draw)?;
    chart
        .configure_mesh()
        .x_desc("round trip (µs)")
        .y_desc("fraction ≤ x")
        .draw()
        .map_err(draw)?;
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
        let points: Vec<(f64, f64)> = p
            .histogram
            .iter()
            .map(|&(v, c)| {
                acc += c;
                (us(v), acc as f64 / total.max(1) as f64)
            })
            .collect();
        let style = Palette99::pick(i).stroke_width(2);
        let label = format!(
            "{} B{}",
            p.request_size,
            if p.loaded { " under load (dashed)" } else { "" }
        );
        let series = if p.loaded {
            chart.draw_series(DashedLineSeries::new(points, 6, 4, style))
        } else {
            chart.draw_series(LineSeries::new(points, style))
        };
        series
            .map_err(draw)?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(draw)?;
    Ok(())
}
