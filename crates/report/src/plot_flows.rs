//! The per-flow rate distribution of a `--flows` test (issue 26): the CDF
//! of the flows' rates — stream tests each flow's received bit/s, a line
//! per direction; rr and crr each flow's transactions (crr: connections)
//! per second, a line per phase — with each line's Jain's index in its
//! legend. A steep line is a fair test; a long foot or tail names the
//! flows that got less or more. `--plot FILE` writes it beside the test's
//! figure ([`beside`]), and the HTML report shows it under the results.

use std::path::{Path, PathBuf};

use plotters::prelude::*;

use crate::chart_style::{legend, quiet_corner, series_colour};
use crate::model::Report;
use crate::plot_text::{caption, err, si, tick, PlotError, CAPTION_H};

/// One line of the figure: its label and its flows' rates.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowRates {
    pub label: String,
    pub rates: Vec<f64>,
}

/// Where `--plot FILE` puts the per-flow figure: beside FILE, its stem
/// with `-flows.svg` (`rr.svg` → `rr-flows.svg`).
pub fn beside(plot: &Path) -> PathBuf {
    let stem = plot
        .file_stem()
        .map_or_else(|| "plot".into(), |s| s.to_string_lossy().into_owned());
    plot.with_file_name(format!("{stem}-flows.svg"))
}

/// The flows' rates of a `--flows` report, a line per direction or
/// phase, each labelled with its Jain's index as the report gives it, and
/// the rates' unit; none without `--flows`. An rr or crr flow's rate is
/// its transactions over the phase's time (the report keeps counts).
pub fn rates(r: &Report) -> (Vec<FlowRates>, &'static str) {
    if r.test.flows.is_none() {
        return (Vec::new(), "");
    }
    let label =
        |what: &str, n: usize, jain: f64| format!("{what}: {n} flows, Jain's index {jain:.3}");
    if let Some(rr) = &r.rr {
        let unit = r.test.rules().rate_unit;
        let lines = rr
            .phases
            .iter()
            .filter(|p| p.seconds > 0.0)
            .filter_map(|p| {
                let f = p.per_flow.as_ref()?;
                let rates: Vec<f64> = f
                    .transactions
                    .iter()
                    .map(|&n| n as f64 / p.seconds)
                    .collect();
                let what = format!("{} B requests", p.request_size);
                Some(FlowRates {
                    label: label(&what, rates.len(), f.jain_index),
                    rates,
                })
            })
            .collect();
        return (lines, unit);
    }
    let lines = r
        .sums
        .iter()
        .filter_map(|sum| {
            let fair = sum.fairness.as_ref()?;
            let rates: Vec<f64> = r
                .streams
                .iter()
                .filter(|s| s.flow == sum.flow)
                .map(|s| s.receiver.bits_per_second)
                .collect();
            Some(FlowRates {
                label: label(sum.flow.arrow(), rates.len(), fair.jain_index),
                rates,
            })
        })
        .collect();
    (lines, "bit/s")
}

/// The empirical CDF of `rates` as a step line: at each rate (ascending)
/// the share of flows below it, then the share at or below it.
pub fn cdf(rates: &[f64]) -> Vec<(f64, f64)> {
    let mut v: Vec<f64> = rates.iter().copied().filter(|r| r.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let n = v.len() as f64;
    let mut pts = Vec::with_capacity(2 * v.len());
    for (i, &x) in v.iter().enumerate() {
        pts.push((x, i as f64 / n));
        pts.push((x, (i + 1) as f64 / n));
    }
    pts
}

/// The figure: the caption band (what was measured), then the CDF of the
/// flows' rates, a line each.
pub fn svg(r: &Report) -> Result<String, PlotError> {
    let (lines, unit) = rates(r);
    if lines.iter().all(|l| l.rates.is_empty()) {
        return Err(PlotError(
            "nothing to plot: the per-flow rates come from --flows tests".into(),
        ));
    }
    let all = || lines.iter().flat_map(|l| &l.rates).copied();
    let peak = all().fold(0.0, f64::max);
    let least = all().fold(f64::MAX, f64::min);
    // Bit rates take an SI prefix; transaction counts read as they are.
    let (scale, unit) = match unit {
        "bit/s" => si(peak, unit),
        _ => (1.0, unit.to_string()),
    };
    // The flows' range, padded: a fair test's flows sit close together,
    // and an axis from 0 would draw them as one vertical line.
    let (lo, hi) = (least / scale, (peak / scale).max(1e-6));
    let pad = ((hi - lo) * 0.1).max(hi * 0.01);
    let (xmin, xmax) = ((lo - pad).max(0.0), hi + pad);
    let steps: Vec<Vec<(f64, f64)>> = lines
        .iter()
        .map(|l| {
            let mut pts = cdf(&l.rates);
            for p in &mut pts {
                p.0 /= scale;
            }
            pts
        })
        .collect();
    let caption_lines = match &r.rr {
        Some(rr) => crate::plot_rr::caption_lines(r, rr),
        None => crate::plot_extra::stream_caption(r),
    };
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (1000, 450 + CAPTION_H)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (band, body) = root.split_vertically(CAPTION_H);
        caption(&band, &caption_lines)?;
        let mut chart = ChartBuilder::on(&body)
            .caption("per-flow rate distribution (CDF)", ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(xmin..xmax, 0.0..1.0)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc(format!("rate of a flow ({unit})"))
            .y_desc("share of flows at or below")
            .x_label_formatter(&|v| tick(*v))
            .y_label_formatter(&|v| tick(*v))
            .draw()
            .map_err(err)?;
        let longest = lines.iter().map(|l| l.label.chars().count()).max();
        let corner = quiet_corner(&chart, &steps, lines.len(), longest.unwrap_or(0));
        for (i, (l, pts)) in lines.iter().zip(steps).enumerate() {
            let color = series_colour(i);
            chart
                .draw_series(LineSeries::new(pts, color.stroke_width(3)))
                .map_err(err)?
                .label(l.label.clone())
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 20, y)], color.stroke_width(3))
                });
        }
        legend(&mut chart, corner)?;
        root.present().map_err(err)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue_26_the_cdf_steps_through_every_flow_in_rate_order() {
        assert_eq!(
            cdf(&[3.0, 1.0, 2.0, 2.0]),
            vec![
                (1.0, 0.0),
                (1.0, 0.25),
                (2.0, 0.25),
                (2.0, 0.5),
                (2.0, 0.5),
                (2.0, 0.75),
                (3.0, 0.75),
                (3.0, 1.0),
            ]
        );
        assert!(cdf(&[]).is_empty());
        assert_eq!(
            beside(Path::new("out/rr.svg")),
            PathBuf::from("out/rr-flows.svg")
        );
    }
}
