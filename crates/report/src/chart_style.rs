//! What every chart's series share (issue 28): colours that read on a
//! white page — each at least 3:1 against white, WCAG's floor for
//! graphical objects, where plotters' `Palette99` has pale yellows — and a
//! legend put in the corner of the plotting area that its data use least,
//! so it never hides the points it names.

use plotters::coord::CoordTranslate;
use plotters::prelude::*;

use crate::plot_text::{err, PlotError};

/// Series colours in order: distinct hues, every one dark enough for a
/// 2-pixel line on white.
const SERIES: [RGBColor; 10] = [
    RGBColor(31, 119, 180),  // blue
    RGBColor(214, 39, 40),   // red
    RGBColor(44, 140, 44),   // green
    RGBColor(200, 90, 0),    // dark orange
    RGBColor(148, 103, 189), // purple
    RGBColor(140, 86, 75),   // brown
    RGBColor(190, 50, 150),  // magenta
    RGBColor(0, 128, 128),   // teal
    RGBColor(90, 90, 90),    // grey
    RGBColor(120, 120, 0),   // olive
];

/// The colour of series `i` (repeats after ten).
pub(crate) fn series_colour(i: usize) -> RGBColor {
    SERIES[i % SERIES.len()]
}

/// The corner of `chart`'s plotting area that the polylines `lines` (in
/// data coordinates) cross least, for a legend of `entries` lines whose
/// longest label has `longest` characters. Ties go to the upper left,
/// then clockwise round the corners, then the edges' middles.
pub(crate) fn quiet_corner<DB, CT>(
    chart: &ChartContext<'_, DB, CT>,
    lines: &[Vec<CT::From>],
    entries: usize,
    longest: usize,
) -> SeriesLabelPosition
where
    DB: DrawingBackend,
    CT: CoordTranslate,
{
    let area = chart.plotting_area();
    let (xr, yr) = area.get_pixel_range();
    // Points along every line, a few pixels apart (segments count, not
    // only the dots).
    let mut px: Vec<(i32, i32)> = Vec::new();
    for l in lines {
        let p: Vec<(i32, i32)> = l.iter().map(|c| area.map_coordinate(c)).collect();
        px.extend(p.first());
        for w in p.windows(2) {
            let (a, b) = (w[0], w[1]);
            let steps = ((b.0 - a.0).abs().max((b.1 - a.1).abs()) / 4).max(1);
            px.extend(
                (1..=steps).map(|k| (a.0 + (b.0 - a.0) * k / steps, a.1 + (b.1 - a.1) * k / steps)),
            );
        }
    }
    // plotters' legend: 12 px text rows, a 30 px sample and 10 px margins,
    // 5 px in from the edges; a little more, as its text sizes are guesses.
    let w = 7 * longest as i32 + 60;
    let h = 16 * entries as i32 + 25;
    // Corners first, then the middles of the edges, then the centre: a tie
    // goes to the earlier, so a legend leaves the middle unless the data
    // cross every edge.
    let (xm, ym) = ((xr.start + xr.end - w) / 2, (yr.start + yr.end - h) / 2);
    let boxes = [
        (SeriesLabelPosition::UpperLeft, xr.start, yr.start),
        (SeriesLabelPosition::UpperRight, xr.end - w, yr.start),
        (SeriesLabelPosition::LowerRight, xr.end - w, yr.end - h),
        (SeriesLabelPosition::LowerLeft, xr.start, yr.end - h),
        (SeriesLabelPosition::MiddleLeft, xr.start, ym),
        (SeriesLabelPosition::MiddleRight, xr.end - w, ym),
        (SeriesLabelPosition::UpperMiddle, xm, yr.start),
        (SeriesLabelPosition::LowerMiddle, xm, yr.end - h),
        (SeriesLabelPosition::MiddleMiddle, xm, ym),
    ];
    let covered = |x0: i32, y0: i32| {
        px.iter()
            .filter(|p| p.0 >= x0 && p.0 <= x0 + w && p.1 >= y0 && p.1 <= y0 + h)
            .count()
    };
    boxes
        .into_iter()
        .min_by_key(|&(_, x0, y0)| covered(x0, y0))
        .map_or(SeriesLabelPosition::UpperLeft, |b| b.0)
}

/// Draws `chart`'s legend in `corner` (from [`quiet_corner`]): the same
/// box on every chart, translucent over what it covers.
pub(crate) fn legend<'a, DB, CT>(
    chart: &mut ChartContext<'a, DB, CT>,
    corner: SeriesLabelPosition,
) -> Result<(), PlotError>
where
    DB: DrawingBackend + 'a,
    CT: CoordTranslate,
{
    chart
        .configure_series_labels()
        .position(corner)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK.mix(0.3))
        .draw()
        .map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// WCAG contrast ratio of `c` against white (1 to 21).
    fn contrast_on_white(c: RGBColor) -> f64 {
        let lin = |v: u8| {
            let s = f64::from(v) / 255.0;
            if s <= 0.040_45 {
                s / 12.92
            } else {
                ((s + 0.055) / 1.055).powf(2.4)
            }
        };
        let l = 0.2126 * lin(c.0) + 0.7152 * lin(c.1) + 0.0722 * lin(c.2);
        1.05 / (l + 0.05)
    }

    #[test]
    fn issue_28_every_series_colour_reads_on_white() {
        for (i, c) in SERIES.iter().enumerate() {
            let r = contrast_on_white(*c);
            assert!(r >= 3.0, "series {i} {c:?}: contrast {r:.2} < 3");
        }
        // The check itself: white is 1:1, black 21:1, plotters' pale
        // yellow (the old 8972 B line) fails.
        assert!((contrast_on_white(RGBColor(255, 255, 255)) - 1.0).abs() < 1e-9);
        assert!((contrast_on_white(RGBColor(0, 0, 0)) - 21.0).abs() < 1e-9);
        let old: Vec<f64> = (0..4)
            .map(|i| {
                let (r, g, b) = Palette99::pick(i).to_rgba().rgb();
                contrast_on_white(RGBColor(r, g, b))
            })
            .collect();
        assert!(old.iter().any(|r| *r < 3.0), "{old:?}");
    }

    #[test]
    fn issue_28_the_legend_goes_where_the_data_are_not() {
        let mut svg = String::new();
        let root = SVGBackend::with_string(&mut svg, (600, 400)).into_drawing_area();
        let chart = ChartBuilder::on(&root)
            .build_cartesian_2d(0.0..10.0, 0.0..10.0)
            .expect("chart");
        let corner = |lines: &[Vec<(f64, f64)>]| quiet_corner(&chart, lines, 3, 10);
        // Points high on the left (the 64 B loss points): not upper left.
        let high_left = vec![vec![(0.2, 9.8), (1.0, 9.5), (2.0, 9.0)]];
        assert_eq!(corner(&high_left), SeriesLabelPosition::UpperRight);
        // A rising diagonal: the upper left is free.
        assert_eq!(
            corner(&[vec![(0.0, 0.0), (10.0, 10.0)]]),
            SeriesLabelPosition::UpperLeft
        );
        // Across the top and down the right: lower left.
        let top_right = vec![vec![(0.0, 9.9), (9.9, 9.9), (9.9, 0.0)]];
        assert_eq!(corner(&top_right), SeriesLabelPosition::LowerLeft);
        // Flat lines along the top and the bottom (msg's per-message time
        // for two concurrencies): no corner is free, the middle of the
        // left edge is.
        let bands = vec![vec![(0.5, 9.0), (9.5, 9.3)], vec![(0.5, 1.0), (9.5, 1.3)]];
        assert_eq!(corner(&bands), SeriesLabelPosition::MiddleLeft);
    }
}
