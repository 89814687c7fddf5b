//! SVG figures from the result model, with plotters' SVG backend only:
//! text goes out as SVG `<text>` elements sized by plotters' built-in
//! estimate, so no font or image library is needed on the host.
//!
//! [`crate::plot_rr::svg`] draws a request/response test (latency against
//! size, and the tail of the round trips).
//!
//! [`sweep_svg`] draws what a UDP sweep found: received against sent data
//! rate, and received against sent packet rate, one line per datagram size,
//! beside the `received = sent` diagonal (where a line leaves it, the path
//! or the receiving host starts dropping), and the loss against the sent
//! rate on a log axis (zero loss on its own "0" line). Trials whose sender
//! could not keep up are marked: their rate was not offered. A caption line
//! says what was measured (issue 13).

use plotters::coord::Shift;
use plotters::prelude::*;

use linerate_proto::spec::Direction;

use crate::chart_style::{legend, quiet_corner, series_colour};
use crate::model::{SweepReport, SweepTrial};
use crate::plot_text::{caption, decade, si, tick, utc, CAPTION_H};

pub use crate::plot_text::PlotError;

fn err<E: std::fmt::Display>(e: E) -> PlotError {
    PlotError(e.to_string())
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// The mark of a trial whose sender could not keep up with its rate.
const NOT_KEPT_UP: RGBColor = RGBColor(200, 0, 0);
const NOT_KEPT_UP_LABEL: &str = "sender did not keep up (rate not offered)";

/// One size's grid trials, sorted by sent rate.
fn of_size<'t>(trials: &[&'t SweepTrial], len: u32) -> Vec<&'t SweepTrial> {
    let mut v: Vec<&SweepTrial> = trials
        .iter()
        .copied()
        .filter(|t| t.len == len && t.error.is_none())
        .collect();
    v.sort_by(|a, b| a.sent_bits_per_second.total_cmp(&b.sent_bits_per_second));
    v
}

/// Draws the "sender did not keep up" crosses for `pts` and, once, their
/// legend entry.
fn mark_not_kept_up<'a, DB, CT>(
    chart: &mut ChartContext<'a, DB, CT>,
    pts: Vec<(f64, f64)>,
    with_label: bool,
) -> Result<(), PlotError>
where
    DB: DrawingBackend + 'a,
    CT: CoordTranslate<From = (f64, f64)>,
{
    let anno = chart
        .draw_series(
            pts.into_iter()
                .map(|p| Cross::new(p, 7, NOT_KEPT_UP.stroke_width(2))),
        )
        .map_err(err)?;
    if with_label {
        anno.label(NOT_KEPT_UP_LABEL)
            .legend(|(x, y)| Cross::new((x + 10, y), 6, NOT_KEPT_UP.stroke_width(2)));
    }
    Ok(())
}

/// One line with points per size, crosses on the trials whose sender did
/// not keep up, and the legend: what the sweep panels share.
fn per_size<'a, DB, CT>(
    chart: &mut ChartContext<'a, DB, CT>,
    sizes: &[u32],
    trials: &[&SweepTrial],
    point: impl Fn(&SweepTrial) -> (f64, f64),
) -> Result<(), PlotError>
where
    DB: DrawingBackend + 'a,
    CT: CoordTranslate<From = (f64, f64)>,
{
    let mut missed = Vec::new();
    let mut drawn = Vec::new();
    for (i, &len) in sizes.iter().enumerate() {
        let color = series_colour(i);
        let of = of_size(trials, len);
        let pts: Vec<(f64, f64)> = of.iter().map(|t| point(t)).collect();
        drawn.push(pts.clone());
        missed.extend(
            pts.iter()
                .zip(&of)
                .filter(|(_, t)| !t.kept_up)
                .map(|(p, _)| *p),
        );
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(format!("{len} B"))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2)));
        chart
            .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))
            .map_err(err)?;
    }
    let any = !missed.is_empty();
    mark_not_kept_up(chart, missed, any)?;
    // The legend: a line per size, the reference line, the crosses.
    let longest = if any { NOT_KEPT_UP_LABEL.len() } else { 16 };
    let corner = quiet_corner(chart, &drawn, sizes.len() + 1 + usize::from(any), longest);
    legend(chart, corner)?;
    Ok(())
}

/// One panel: x = sent, y = received, per size.
fn panel(
    area: &Area<'_>,
    title: &str,
    base: &str,
    sizes: &[u32],
    trials: &[&SweepTrial],
    value: fn(&SweepTrial) -> (f64, f64),
) -> Result<(), PlotError> {
    let max = trials
        .iter()
        .map(|t| {
            let (s, r) = value(t);
            s.max(r)
        })
        .fold(0.0, f64::max);
    let (scale, unit) = si(max, base);
    let max = max / scale;
    let top = if max > 0.0 { max * 1.05 } else { 1.0 };
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..top, 0.0..top)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(format!("sent ({unit})"))
        .y_desc(format!("received ({unit})"))
        .x_label_formatter(&|v| tick(*v))
        .y_label_formatter(&|v| tick(*v))
        .draw()
        .map_err(err)?;
    chart
        .draw_series(LineSeries::new(
            [(0.0, 0.0), (top, top)],
            ShapeStyle::from(&BLACK.mix(0.3)).stroke_width(1),
        ))
        .map_err(err)?
        .label("received = sent")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLACK.mix(0.3)));
    per_size(&mut chart, sizes, trials, |t| {
        let (s, r) = value(t);
        (s / scale, r / scale)
    })
}

/// Loss (percent, log axis) against the sent data rate, per size. A log
/// axis cannot show zero: trials without loss sit on the bottom line,
/// labelled "0", a decade below the smallest loss measured.
fn loss_panel(area: &Area<'_>, sizes: &[u32], trials: &[&SweepTrial]) -> Result<(), PlotError> {
    let max_x = trials
        .iter()
        .map(|t| t.sent_bits_per_second)
        .fold(0.0, f64::max);
    let (scale, unit) = si(max_x, "bit/s");
    let right = if max_x > 0.0 {
        max_x / scale * 1.05
    } else {
        1.0
    };
    let smallest = trials
        .iter()
        .map(|t| t.loss_percent)
        .filter(|&l| l > 0.0)
        .fold(f64::MAX, f64::min);
    // One lost datagram in a million is 1e-4 %: the floor never sits above
    // what a trial could measure.
    let zero = if smallest < f64::MAX {
        10f64.powf(smallest.log10().floor() - 1.0)
    } else {
        1e-4
    };
    let top = trials
        .iter()
        .map(|t| t.loss_percent)
        .fold(zero * 10.0, f64::max)
        .min(100.0)
        * 2.0;
    let mut chart = ChartBuilder::on(area)
        .caption("UDP loss vs sent rate (log)", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..right, (zero * 0.7..top).log_scale())
        .map_err(err)?;
    let floor = zero;
    chart
        .configure_mesh()
        .x_desc(format!("sent ({unit})"))
        .y_desc("loss (%)")
        .x_label_formatter(&|v| tick(*v))
        .y_label_formatter(&|v| {
            if (v / floor - 1.0).abs() < 1e-6 {
                "0".into()
            } else {
                decade(*v)
            }
        })
        .draw()
        .map_err(err)?;
    chart
        .draw_series(LineSeries::new(
            [(0.0, zero), (right, zero)],
            BLACK.mix(0.3).stroke_width(1),
        ))
        .map_err(err)?
        .label("0 (no loss)")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLACK.mix(0.3)));
    per_size(&mut chart, sizes, trials, |t| {
        (t.sent_bits_per_second / scale, t.loss_percent.max(zero))
    })
}

/// What the sweep measured, in two lines.
fn sweep_caption(r: &SweepReport) -> Vec<String> {
    let t = &r.test;
    let sizes: Vec<String> = t.sizes.iter().map(u32::to_string).collect();
    let grid = r.trials.iter().filter(|x| !x.search).count();
    let missed = r
        .trials
        .iter()
        .filter(|x| !x.search && !x.kept_up && x.error.is_none())
        .count();
    vec![
        format!(
            "{} · {} sweep to {} ({}) · {}",
            t.client_software,
            t.protocol,
            t.server,
            match t.direction {
                Direction::Forward => "client → server",
                Direction::Reverse => "server → client",
                Direction::Bidir => "both ways",
            },
            utc(t.start_unix_ms)
        ),
        format!(
            "{} grid trials of {} s, {} stream{} each · datagram sizes {} B{}",
            grid,
            tick(t.trial_s),
            t.streams,
            if t.streams == 1 { "" } else { "s" },
            sizes.join(", "),
            if missed > 0 {
                format!(" · {missed} trial(s) where the sender did not keep up (red ×)")
            } else {
                String::new()
            }
        ),
    ]
}

/// The sweep figure as an SVG document (grid trials only; the zero-loss
/// search's trials are in the table and JSON).
pub fn sweep_svg(r: &SweepReport) -> Result<String, PlotError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1500, 520 + CAPTION_H)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (band, body) = root.split_vertically(CAPTION_H);
        caption(&band, &sweep_caption(r))?;
        let trials: Vec<&SweepTrial> = r.trials.iter().filter(|t| !t.search).collect();
        let panels = body.split_evenly((1, 3));
        panel(
            &panels[0],
            "UDP data rate: received vs sent",
            "bit/s",
            &r.test.sizes,
            &trials,
            |t| (t.sent_bits_per_second, t.received_bits_per_second),
        )?;
        panel(
            &panels[1],
            "UDP packet rate: received vs sent",
            "pps",
            &r.test.sizes,
            &trials,
            |t| (t.sent_pps, t.received_pps),
        )?;
        loss_panel(&panels[2], &r.test.sizes, &trials)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{SweepInfo, SCHEMA_VERSION};
    use linerate_proto::spec::Direction;

    fn trial(len: u32, sent: f64, received: f64) -> SweepTrial {
        SweepTrial {
            len,
            search: false,
            requested_pps: sent,
            requested_bits_per_second: sent * f64::from(len) * 8.0,
            sent_pps: sent,
            sent_bits_per_second: sent * f64::from(len) * 8.0,
            received_pps: received,
            received_bits_per_second: received * f64::from(len) * 8.0,
            issued: sent as u64,
            received: received as u64,
            lost: (sent - received) as u64,
            loss_ppm: 0.0,
            loss_percent: 0.0,
            kept_up: true,
            socket_drops: Some(0),
            error: None,
            inconclusive: None,
        }
    }

    #[test]
    fn sweep_figure_has_its_panels_and_a_line_per_size() {
        let r = SweepReport {
            schema: SCHEMA_VERSION,
            test: SweepInfo {
                protocol: "udp".into(),
                server: "127.0.0.1:5201".into(),
                direction: Direction::Forward,
                streams: 1,
                trial_s: 1.0,
                sizes: vec![1472, 8972],
                points: vec![1e4, 2e4],
                rates_are_bits: false,
                max_loss_percent: 0.0,
                client_software: "test".into(),
                start_unix_ms: 0,
            },
            trials: vec![
                trial(1472, 1e4, 1e4),
                trial(1472, 2e4, 1.5e4),
                trial(8972, 1e4, 1e4),
                trial(8972, 2e4, 2e4),
            ],
            zero_loss: vec![],
            notes: vec![],
        };
        let svg = sweep_svg(&r).expect("draws");
        assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(100)]);
        for needle in [
            "received vs sent",
            "1472 B",
            "8972 B",
            // 2e4 pps of 8972 B is 1.4 Gbit/s: the unit follows the data.
            "Gbit/s",
            "kpps",
            "loss (%)",
            "polyline",
        ] {
            assert!(svg.contains(needle), "no {needle:?} in the SVG");
        }
    }
}
