//! The bar chart with a spread (one chart kind, every caller): one bar per
//! group on a linear axis from 0; where several runs went into a bar, a
//! ±1 sd whisker and red crosses at the minimum and maximum; optionally the
//! bar's value printed above it. `compare --plot` ([`crate::compare_plot`])
//! and `--repeat --plot` ([`crate::plot_extra::repeat_svg`]) draw it.

use plotters::prelude::*;

use linerate_stats::trials::TrialStats;

use crate::plot_text::{caption, err, tick, PlotError, CAPTION_H};

/// What one bar shows, in the data's own unit (the chart scales it).
pub(crate) enum BarValue<'a> {
    /// A bar of `value`; with `stats`, its sd whisker and min/max marks.
    Bar {
        value: f64,
        stats: Option<&'a TrialStats>,
    },
    /// No bar: this note in its place (the group did not run).
    Note(&'static str),
}

/// One bar: its axis label, fill, value and the text after its printed
/// value (`None`: no value printed).
pub(crate) struct Bar<'a> {
    pub label: String,
    pub fill: RGBAColor,
    pub value: BarValue<'a>,
    pub value_label: Option<String>,
}

/// A whole figure: caption band, title, unit and bars.
pub(crate) struct BarChart<'a> {
    pub width: u32,
    pub caption: Vec<String>,
    pub title: String,
    /// The axis unit: values are divided by `scale` and named `unit`.
    pub scale: f64,
    pub unit: String,
    /// The axis reaches this many times the tallest mark (room for labels).
    pub headroom: f64,
    pub bars: Vec<Bar<'a>>,
}

/// The tallest mark of `bars` (bar, sd whisker or max), unscaled.
pub(crate) fn peak(bars: &[Bar<'_>]) -> f64 {
    bars.iter()
        .filter_map(|b| match b.value {
            BarValue::Bar { value, stats } => {
                Some(stats.map_or(value, |s| s.max.max(s.mean + s.sd)))
            }
            BarValue::Note(_) => None,
        })
        .fold(0.0, f64::max)
}

/// The figure as SVG.
pub(crate) fn svg(c: &BarChart<'_>) -> Result<String, PlotError> {
    let top = peak(&c.bars) / c.scale * c.headroom;
    let top = if top > 0.0 { top } else { 1.0 };
    let n = c.bars.len();
    let mut out = String::new();
    {
        let root =
            SVGBackend::with_string(&mut out, (c.width, 450 + CAPTION_H)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (band, body) = root.split_vertically(CAPTION_H);
        caption(&band, &c.caption)?;
        let mut chart = ChartBuilder::on(&body)
            .caption(&c.title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(-0.5..(n as f64 - 0.5), 0.0..top)
            .map_err(err)?;
        let labels: Vec<&str> = c.bars.iter().map(|b| b.label.as_str()).collect();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n)
            .x_label_formatter(&|x| {
                let i = x.round();
                if (x - i).abs() < 1e-6 && i >= 0.0 {
                    labels
                        .get(i as usize)
                        .map_or(String::new(), |l| l.to_string())
                } else {
                    String::new()
                }
            })
            .y_desc(c.unit.as_str())
            .y_label_formatter(&|v| tick(*v))
            .draw()
            .map_err(err)?;
        for (i, bar) in c.bars.iter().enumerate() {
            draw_bar(&mut chart, c, i as f64, bar, top)?;
        }
        root.present().map_err(err)?;
    }
    Ok(out)
}

type Chart<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// One bar at `x`: the note, or the bar, its spread and its value label.
fn draw_bar(
    chart: &mut Chart<'_, '_>,
    c: &BarChart<'_>,
    x: f64,
    bar: &Bar<'_>,
    top: f64,
) -> Result<(), PlotError> {
    let label_style = ("sans-serif", 15).into_font().color(&BLACK);
    let (value, stats) = match bar.value {
        BarValue::Note(why) => {
            chart
                .draw_series(std::iter::once(Text::new(
                    why.to_string(),
                    (x - 0.25, top * 0.05),
                    label_style,
                )))
                .map_err(err)?;
            return Ok(());
        }
        BarValue::Bar { value, stats } => (value, stats),
    };
    let y = value / c.scale;
    chart
        .draw_series(std::iter::once(Rectangle::new(
            [(x - 0.3, 0.0), (x + 0.3, y)],
            bar.fill.filled(),
        )))
        .map_err(err)?;
    let mut label_y = y;
    if let Some(s) = stats {
        let (lo, hi) = (
            (s.mean - s.sd).max(0.0) / c.scale,
            (s.mean + s.sd) / c.scale,
        );
        for seg in [
            [(x, lo), (x, hi)],
            [(x - 0.1, lo), (x + 0.1, lo)],
            [(x - 0.1, hi), (x + 0.1, hi)],
        ] {
            chart
                .draw_series(std::iter::once(PathElement::new(
                    seg,
                    BLACK.stroke_width(2),
                )))
                .map_err(err)?;
        }
        for y in [s.min / c.scale, s.max / c.scale] {
            chart
                .draw_series(std::iter::once(Cross::new((x, y), 5, RED.stroke_width(2))))
                .map_err(err)?;
        }
        label_y = label_y.max(hi).max(s.max / c.scale);
    }
    if let Some(after) = &bar.value_label {
        chart
            .draw_series(std::iter::once(Text::new(
                format!("{} {}{after}", tick(y), c.unit),
                (x - 0.28, label_y + top * 0.08),
                label_style,
            )))
            .map_err(err)?;
    }
    Ok(())
}
