//! The lines-against-message-size chart (one chart kind, every caller):
//! log-log axes, one line per series with a dot per point, dashed series
//! for a second condition (loaded phases, concurrency > 1), an optional
//! ±1 sd band under a line, and a legend. `msg --plot`
//! ([`crate::msg_plot`]) and the rr figure's percentile panel
//! ([`crate::plot_rr`]) draw it.

use std::ops::Range;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::plot_text::{err, tick, PlotError};

/// One line: its legend label, colour, dashed or not, and its points as
/// (x, y, sd of y); a band is drawn where some sd is above 0.
pub(crate) struct Line {
    pub label: String,
    pub colour: RGBColor,
    pub dashed: bool,
    pub points: Vec<(f64, f64, f64)>,
}

/// The panel's title, axes and their ranges (the callers choose the
/// margins around their data).
pub(crate) struct Axes<'a> {
    pub title: &'a str,
    pub title_size: u32,
    pub y_label_area: u32,
    pub x: Range<f64>,
    pub y: Range<f64>,
    pub x_desc: &'a str,
    pub y_desc: &'a str,
    /// Tick labels as people write numbers ([`tick`]) rather than
    /// plotters' own.
    pub readable_ticks: bool,
}

/// Draws `lines` on `area` with `axes`.
pub(crate) fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    axes: &Axes<'_>,
    lines: &[Line],
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    let mut chart = ChartBuilder::on(area)
        .caption(axes.title, ("sans-serif", axes.title_size))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(axes.y_label_area)
        .build_cartesian_2d(axes.x.clone().log_scale(), axes.y.clone().log_scale())
        .map_err(err)?;
    let fmt = |v: &f64| tick(*v);
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(axes.x_desc).y_desc(axes.y_desc);
    if axes.readable_ticks {
        mesh.x_label_formatter(&fmt).y_label_formatter(&fmt);
    }
    mesh.draw().map_err(err)?;
    for l in lines {
        // The ± 1 sd band: upper edge forwards, lower edge back, cut at
        // the axis.
        if l.points.len() > 1 && l.points.iter().any(|p| p.2 > 0.0) {
            let mut poly: Vec<(f64, f64)> = l.points.iter().map(|p| (p.0, p.1 + p.2)).collect();
            poly.extend(
                l.points
                    .iter()
                    .rev()
                    .map(|p| (p.0, (p.1 - p.2).max(axes.y.start))),
            );
            chart
                .draw_series(std::iter::once(Polygon::new(poly, l.colour.mix(0.15))))
                .map_err(err)?;
        }
        let pts: Vec<(f64, f64)> = l.points.iter().map(|p| (p.0, p.1)).collect();
        let style = l.colour.stroke_width(2);
        let s = if l.dashed {
            chart.draw_series(DashedLineSeries::new(pts.clone(), 6, 4, style))
        } else {
            chart.draw_series(LineSeries::new(pts.clone(), style))
        };
        s.map_err(err)?
            .label(l.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 3, l.colour.filled())))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    Ok(())
}
