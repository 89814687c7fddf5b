//! `linerate compare --plot FILE.svg`: one bar per variant of the test's
//! headline figure ([`compare::headline`]: bit/s for tcp, received
//! datagrams/s for udp, transactions/s for rr), each labelled with its
//! value and its ratio to the first variant; with `--repeat` a ±1 sd bar
//! and min/max marks, as `--repeat --plot` draws them.

use plotters::prelude::*;

use crate::compare::{self, CompareReport};
use crate::plot_text::{caption, si, tick, utc, PlotError, CAPTION_H};

fn err<E: std::fmt::Display>(e: E) -> PlotError {
    PlotError(e.to_string())
}

/// The caption: what ran, how often, by which linerate, where and when.
fn lines(r: &CompareReport) -> Vec<String> {
    let runs = if r.repeat > 1 {
        format!(
            " · {} runs per variant, interleaved (mean ± 1 sd; min, max marked)",
            r.repeat
        )
    } else {
        String::new()
    };
    vec![
        format!("linerate compare: {} {}{runs}", r.test, r.args.join(" ")),
        format!(
            "linerate {} · to {} · {} · ratios to the first variant ({})",
            env!("CARGO_PKG_VERSION"),
            r.server.as_deref().unwrap_or("no server reached"),
            utc(r.start_unix_ms),
            r.variants.first().map_or("", |v| v.name.as_str()),
        ),
    ]
}

/// The figure as SVG; an error when no variant has the headline figure.
pub fn svg(r: &CompareReport) -> Result<String, PlotError> {
    let name = compare::headline(&r.test);
    // (variant, value, ratio, stats) — variants without the figure (did
    // not run) keep their place on the axis, with a note instead of a bar.
    let bars: Vec<_> = r
        .variants
        .iter()
        .map(|v| {
            let m = v.metrics.iter().find(|m| m.name == name);
            (v, m)
        })
        .collect();
    if bars.iter().all(|(_, m)| m.is_none()) {
        return Err(PlotError(format!("nothing to plot: no variant has {name}")));
    }
    let max = bars
        .iter()
        .filter_map(|(_, m)| *m)
        .map(|m| m.stats.map_or(m.value, |s| s.max.max(s.mean + s.sd)))
        .fold(0.0, f64::max);
    let base = match compare::unit_of(name) {
        "bit/s" => "bit/s",
        "datagrams/s" => "datagrams/s",
        _ => "transactions/s",
    };
    let (scale, unit) = si(max, base);
    // Room above the tallest bar for its label.
    let top = if max > 0.0 { max / scale * 1.25 } else { 1.0 };
    let n = bars.len();
    let mut out = String::new();
    {
        let width = (220 * n as u32).clamp(900, 1600);
        let root = SVGBackend::with_string(&mut out, (width, 450 + CAPTION_H)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (band, body) = root.split_vertically(CAPTION_H);
        caption(&band, &lines(r))?;
        let mut chart = ChartBuilder::on(&body)
            .caption(
                format!("{name} per variant ({unit}), ratio to the first"),
                ("sans-serif", 20),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(-0.5..(n as f64 - 0.5), 0.0..top)
            .map_err(err)?;
        let labels: Vec<String> = bars.iter().map(|(v, _)| v.name.clone()).collect();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n)
            .x_label_formatter(&|x| {
                let i = x.round();
                if (x - i).abs() < 1e-6 && i >= 0.0 {
                    labels.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .y_desc(unit.clone())
            .y_label_formatter(&|v| tick(*v))
            .draw()
            .map_err(err)?;
        for (i, (v, m)) in bars.iter().enumerate() {
            let x = i as f64;
            let label_style = ("sans-serif", 15).into_font().color(&BLACK);
            let Some(m) = m else {
                let why = if v.error.is_some() {
                    "did not run"
                } else {
                    "not measured"
                };
                chart
                    .draw_series(std::iter::once(Text::new(
                        why.to_string(),
                        (x - 0.25, top * 0.05),
                        label_style,
                    )))
                    .map_err(err)?;
                continue;
            };
            let color = Palette99::pick(i).to_rgba();
            let y = m.value / scale;
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(x - 0.3, 0.0), (x + 0.3, y)],
                    color.mix(0.7).filled(),
                )))
                .map_err(err)?;
            let mut label_y = y;
            if let Some(s) = &m.stats {
                let (lo, hi) = ((s.mean - s.sd).max(0.0) / scale, (s.mean + s.sd) / scale);
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
                for y in [s.min / scale, s.max / scale] {
                    chart
                        .draw_series(std::iter::once(Cross::new((x, y), 5, RED.stroke_width(2))))
                        .map_err(err)?;
                }
                label_y = label_y.max(hi).max(s.max / scale);
            }
            let ratio = m.ratio.map_or(String::new(), |x| format!(" ×{x:.2}"));
            chart
                .draw_series(std::iter::once(Text::new(
                    format!("{} {unit}{ratio}", tick(y)),
                    (x - 0.28, label_y + top * 0.08),
                    label_style,
                )))
                .map_err(err)?;
        }
        root.present().map_err(err)?;
    }
    Ok(out)
}
