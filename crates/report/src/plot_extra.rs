//! SVG figures for the HTML report and `--repeat --plot`: a stream test's
//! throughput per interval, and a repeated test's figures as mean ± 1
//! standard deviation.

use plotters::prelude::*;

use crate::chart_bars::{self, Bar, BarChart, BarValue};
use crate::chart_style::{legend, quiet_corner, series_colour};
use crate::model::Report;
use crate::plot_text::{caption, err, si, tick, utc, PlotError, CAPTION_H};
use crate::repeat::RepeatReport;

/// Received bit/s of every flow per client interval, against time.
pub fn intervals_svg(r: &Report) -> Result<String, PlotError> {
    // (flow label, points (end of interval s, Gbit/s))
    let mut lines: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for rec in &r.intervals {
        for s in &rec.sums {
            let label = s.flow.arrow().to_owned();
            // A step per interval: the rate holds from its start to its end.
            let y = s.bits_per_second;
            let pts = [(rec.start_s, y), (rec.end_s, y)];
            match lines.iter_mut().find(|l| l.0 == label) {
                Some(l) => l.1.extend(pts),
                None => lines.push((label, pts.to_vec())),
            }
        }
    }
    if lines.is_empty() {
        return Err(PlotError("nothing to plot: no interval records".into()));
    }
    let peak = lines
        .iter()
        .flat_map(|l| &l.1)
        .map(|p| p.1)
        .fold(0.0, f64::max);
    let (scale, unit) = si(peak, "bit/s");
    time_lines_svg(
        &stream_caption(r),
        "throughput per interval (client's intervals)",
        &format!("received ({unit})"),
        scale,
        lines,
    )
}

/// Lines against time (s): `lines` as (label, (s, y)), y divided by
/// `scale` and described by `y_desc`; the caption band above. The one
/// time-axis line chart (stream intervals, a qualification's RTT).
pub(crate) fn time_lines_svg(
    caption_lines: &[String],
    title: &str,
    y_desc: &str,
    scale: f64,
    mut lines: Vec<(String, Vec<(f64, f64)>)>,
) -> Result<String, PlotError> {
    if lines.iter().all(|l| l.1.is_empty()) {
        return Err(PlotError(format!("nothing to plot: {title}")));
    }
    let xmax = lines
        .iter()
        .flat_map(|l| &l.1)
        .map(|p| p.0)
        .fold(0.0, f64::max)
        .max(0.1);
    let peak = lines
        .iter()
        .flat_map(|l| &l.1)
        .map(|p| p.1)
        .fold(0.0, f64::max);
    for l in &mut lines {
        for p in &mut l.1 {
            p.1 /= scale;
        }
    }
    let ymax = (peak / scale).max(1e-6) * 1.1;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (1000, 450 + CAPTION_H)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (band, body) = root.split_vertically(CAPTION_H);
        caption(&band, caption_lines)?;
        let mut chart = ChartBuilder::on(&body)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..xmax, 0.0..ymax)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("time (s)")
            .y_desc(y_desc)
            .x_label_formatter(&|v| tick(*v))
            .y_label_formatter(&|v| tick(*v))
            .draw()
            .map_err(err)?;
        let corner = quiet_corner(
            &chart,
            &lines.iter().map(|l| l.1.clone()).collect::<Vec<_>>(),
            lines.len(),
            lines.iter().map(|l| l.0.chars().count()).max().unwrap_or(0),
        );
        for (i, (label, pts)) in lines.into_iter().enumerate() {
            let color = series_colour(i);
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(3)))
                .map_err(err)?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 20, y)], color.stroke_width(3))
                });
        }
        legend(&mut chart, corner)?;
        root.present().map_err(err)?;
    }
    Ok(out)
}

/// What a stream test measured: tool, test, host, date; its parameters.
pub(crate) fn stream_caption(r: &Report) -> Vec<String> {
    let t = &r.test;
    let direction = match t.direction {
        Some(linerate_proto::spec::Direction::Reverse) => "server → client",
        Some(linerate_proto::spec::Direction::Bidir) => "both ways",
        _ => "client → server",
    };
    let mut params = vec![format!(
        "{} stream{} per direction",
        t.streams,
        if t.streams == 1 { "" } else { "s" }
    )];
    match t.limit {
        Some(linerate_proto::spec::Limit::TimeMs(ms)) => {
            params.push(format!("{} s", tick(ms as f64 / 1e3)))
        }
        Some(linerate_proto::spec::Limit::Bytes(b)) => params.push(format!("{b} bytes")),
        Some(linerate_proto::spec::Limit::Datagrams(n)) => {
            params.push(format!("{n} datagrams per stream"))
        }
        None => {}
    }
    if let Some(len) = t.len {
        params.push(format!("--len {len}"));
    }
    params.push(format!("engine {}", t.client_engine));
    if r.interrupted {
        params.push("interrupted (Ctrl-C)".into());
    }
    vec![
        format!(
            "{} · {} {direction} to {} · {}",
            t.client_software,
            t.protocol,
            t.server,
            utc(t.start_unix_ms)
        ),
        params.join(" · "),
    ]
}

/// What the repeated test was: the test as its report heads it (kind,
/// direction, server, sizes and rates); tool, date and trials.
fn repeat_caption(r: &RepeatReport) -> Vec<String> {
    let t = &r.test;
    vec![
        crate::render::test_line(t),
        format!(
            "{} · {} · {} of {} trials completed",
            t.client_software,
            utc(t.start_unix_ms),
            r.completed,
            r.repeat,
        ),
    ]
}

/// The repeated test's headline figure per group (receiver bit/s per flow,
/// or transactions/s per message size) as mean with a ±1 sd bar, and its
/// min and max as small marks.
pub fn repeat_svg(r: &RepeatReport) -> Result<String, PlotError> {
    let name = if r.figures.iter().any(|f| f.name == "transactions/s") {
        "transactions/s"
    } else {
        "receiver bit/s"
    };
    let figs: Vec<_> = r.figures.iter().filter(|f| f.name == name).collect();
    if figs.is_empty() {
        return Err(PlotError(format!("nothing to plot: no {name} figure")));
    }
    // The unit from the data (Mbit/s for a 100 Mbit/s test).
    let top = figs.iter().map(|f| f.stats.max).fold(0.0, f64::max);
    let (scale, unit) = if name == "receiver bit/s" {
        si(top, "bit/s")
    } else {
        let (scale, prefix) = si(top, "");
        (
            scale,
            format!("{prefix} transactions/s").trim_start().to_owned(),
        )
    };
    let fill = series_colour(0).mix(0.6);
    chart_bars::svg(&BarChart {
        width: 1000,
        caption: repeat_caption(r),
        title: format!(
            "{name}: mean ± 1 sd over {} trials (min, max marked)",
            r.completed
        ),
        scale,
        unit,
        headroom: 1.15,
        bars: figs
            .iter()
            .map(|f| Bar {
                label: f.group.clone(),
                fill,
                value: BarValue::Bar {
                    value: f.stats.mean,
                    stats: Some(&f.stats),
                },
                value_label: None,
            })
            .collect(),
    })
}
