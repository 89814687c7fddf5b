//! The lines-against-message-size chart (one chart kind, every caller):
//! log-log axes, one line per series with a dot per point, dashed series
//! for a second condition (loaded phases, concurrency > 1), an optional
//! ±1 sd band under a line, and a legend where the lines are not
//! ([`crate::chart_style`]). The x axis is a size in bytes, ticked at
//! powers of two ("64 B", "1 KiB"); a marker shape per condition tells
//! apart lines of one colour (issue 28). `msg --plot`
//! ([`crate::msg_plot`]) and the rr figure's percentile panel
//! ([`crate::plot_rr`]) draw it.

use std::ops::Range;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::chart_style::quiet_corner;
use crate::plot_text::{err, tick, PlotError};
use linerate_stats::units::format_size;

/// The dot on each point of a line (and in its legend entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Marker {
    Circle,
    Square,
    Triangle,
}

impl Marker {
    /// The shape around (10, 0), the middle of a legend's line sample.
    fn outline(self) -> Vec<(i32, i32)> {
        let shape: &[(i32, i32)] = match self {
            Marker::Circle => &[
                (3, 0),
                (2, 2),
                (0, 3),
                (-2, 2),
                (-3, 0),
                (-2, -2),
                (0, -3),
                (2, -2),
            ],
            Marker::Square => &[(-3, -3), (3, -3), (3, 3), (-3, 3)],
            Marker::Triangle => &[(0, -4), (4, 3), (-4, 3)],
        };
        shape.iter().map(|&(x, y)| (x + 10, y)).collect()
    }

    /// The `i`th shape (repeating).
    pub(crate) fn nth(i: usize) -> Self {
        [Marker::Circle, Marker::Square, Marker::Triangle][i % 3]
    }
}

/// One line: its legend label, colour, dashed or not, and its points as
/// (x, y, sd of y); a band is drawn where some sd is above 0.
pub(crate) struct Line {
    pub label: String,
    pub colour: RGBColor,
    pub dashed: bool,
    pub marker: Marker,
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
}

/// Byte sizes to tick on a log axis over `x`: powers of two, every
/// second or more of them when the range is wide (at most ten).
fn size_ticks(x: &Range<f64>) -> Vec<f64> {
    let lo = x.start.max(1.0).log2().ceil() as i32;
    let hi = x.end.max(1.0).log2().floor() as i32;
    let step = ((hi - lo) / 9 + 1).max(1);
    (lo..=hi)
        .filter(|e| e % step == 0)
        .map(|e| f64::from(2u32.saturating_pow(e.clamp(0, 31) as u32)))
        .collect()
}

/// Values to tick on a log axis over `y`: 1, 2 and 5 of each decade, or
/// every whole step of a decade when the range is too narrow for three
/// such ticks, so every value drawn has a labelled tick near it.
fn decade_ticks(y: &Range<f64>) -> Vec<f64> {
    let (lo, hi) = (y.start.max(f64::MIN_POSITIVE), y.end.max(f64::MIN_POSITIVE));
    let ticks = |steps: &[f64]| -> Vec<f64> {
        let (first, last) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
        (first..=last)
            .flat_map(|e| steps.iter().map(move |m| m * 10f64.powi(e)))
            .filter(|v| *v >= lo && *v <= hi)
            .collect()
    };
    let coarse = ticks(&[1.0, 2.0, 5.0]);
    if coarse.len() >= 3 {
        coarse
    } else {
        ticks(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])
    }
}

/// One panel: the lines with log axes a margin beyond their points and
/// bands.
pub(crate) fn fitted_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    x_desc: &str,
    title: &str,
    y_desc: &str,
    ls: &[Line],
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    let xs = ls.iter().flat_map(|l| l.points.iter().map(|p| p.0));
    let x0 = xs.clone().fold(f64::MAX, f64::min).max(1.0);
    let x1 = xs.fold(0.0, f64::max).max(x0);
    let ys = ls.iter().flat_map(|l| l.points.iter());
    let y0 = ys
        .clone()
        .map(|p| (p.1 - p.2).max(p.1 / 10.0))
        .fold(f64::MAX, f64::min)
        .max(1e-6);
    let y1 = ys.map(|p| p.1 + p.2).fold(0.0, f64::max).max(y0);
    let axes = Axes {
        title,
        title_size: 22,
        y_label_area: 70,
        x: x0 / 1.5..x1 * 1.5,
        y: y0 / 1.5..y1 * 1.5,
        x_desc,
        y_desc,
    };
    panel(area, &axes, ls)
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
        .build_cartesian_2d(
            axes.x
                .clone()
                .log_scale()
                .with_key_points(size_ticks(&axes.x)),
            axes.y
                .clone()
                .log_scale()
                .with_key_points(decade_ticks(&axes.y)),
        )
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(axes.x_desc)
        .y_desc(axes.y_desc)
        .x_label_formatter(&|v| format_size(v.round() as u64))
        .y_label_formatter(&|v| tick(*v))
        .draw()
        .map_err(err)?;
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
        let (dashed, marker) = (l.dashed, l.marker);
        s.map_err(err)?
            .label(l.label.clone())
            .legend(move |(x, y)| {
                // The line sample (two dashes when dashed), the marker on it.
                let (first, second) = if dashed {
                    (vec![(0, 0), (7, 0)], vec![(13, 0), (20, 0)])
                } else {
                    (vec![(0, 0), (20, 0)], vec![(20, 0), (20, 0)])
                };
                let sample = EmptyElement::at((x, y))
                    + PathElement::new(first, style)
                    + PathElement::new(second, style);
                sample + Polygon::new(marker.outline(), style.color.filled())
            });
        draw_markers(&mut chart, &pts, l.marker, l.colour)?;
    }
    let drawn: Vec<Vec<(f64, f64)>> = lines
        .iter()
        .map(|l| l.points.iter().map(|p| (p.0, p.1)).collect())
        .collect();
    let longest = lines.iter().map(|l| l.label.chars().count()).max();
    let corner = quiet_corner(&chart, &drawn, lines.len(), longest.unwrap_or(0));
    chart
        .configure_series_labels()
        .position(corner)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    Ok(())
}

/// A `marker` on each of `pts`.
fn draw_markers<DB, CT>(
    chart: &mut ChartContext<'_, DB, CT>,
    pts: &[(f64, f64)],
    marker: Marker,
    colour: RGBColor,
) -> Result<(), PlotError>
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
    CT: CoordTranslate<From = (f64, f64)>,
{
    let fill = colour.filled();
    let at = pts.iter().copied();
    match marker {
        Marker::Circle => chart.draw_series(at.map(|p| Circle::new(p, 3, fill))),
        Marker::Square => chart.draw_series(
            at.map(|p| EmptyElement::at(p) + Rectangle::new([(-3, -3), (3, 3)], fill)),
        ),
        Marker::Triangle => chart.draw_series(at.map(|p| TriangleMarker::new(p, 5, fill))),
    }
    .map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue_28_size_ticks_are_powers_of_two() {
        let t = size_ticks(&(40.0..2.0e6));
        assert_eq!(t.first(), Some(&64.0));
        assert!(t.len() <= 10 && t.contains(&1024.0), "{t:?}");
        let labels: Vec<String> = t.iter().map(|v| format_size(*v as u64)).collect();
        assert!(labels.contains(&"1 KiB".to_string()), "{labels:?}");
        assert_eq!(size_ticks(&(50.0..300.0)), vec![64.0, 128.0, 256.0]);
    }

    #[test]
    fn value_ticks_label_every_decade_the_data_use() {
        // msg's per-message time: 4 µs … 120 µs has ticks below 10.
        assert_eq!(
            decade_ticks(&(4.0..120.0)),
            vec![5.0, 10.0, 20.0, 50.0, 100.0]
        );
        // Under a decade wide: every whole step.
        assert_eq!(decade_ticks(&(6.5..9.5)), vec![7.0, 8.0, 9.0]);
    }
}
