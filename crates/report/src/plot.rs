//! SVG figures from the result model, with plotters' SVG backend only:
//! text goes out as SVG `<text>` elements sized by plotters' built-in
//! estimate, so no font or image library is needed on the host.
//!
//! [`crate::plot_rr::svg`] draws a request/response test (latency against
//! size, and the CDFs).
//!
//! [`sweep_svg`] draws what a UDP sweep found: received against sent data
//! rate, and received against sent packet rate, one line per datagram size,
//! beside the `received = sent` diagonal. Where a line leaves the diagonal,
//! the path (or the receiving host) starts dropping.

use plotters::prelude::*;

use crate::model::{SweepReport, SweepTrial};

/// A figure that could not be drawn.
#[derive(Debug, thiserror::Error)]
#[error("drawing the plot: {0}")]
pub struct PlotError(pub(crate) String);

fn err<E: std::fmt::Display>(e: E) -> PlotError {
    PlotError(e.to_string())
}

/// One panel: x = sent, y = received, per size.
fn panel(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    title: &str,
    unit: &str,
    scale: f64,
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
        .fold(0.0, f64::max)
        / scale;
    let top = if max > 0.0 { max * 1.05 } else { 1.0 };
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..top, 0.0..top)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(format!("sent ({unit})"))
        .y_desc(format!("received ({unit})"))
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
    for (i, &len) in sizes.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let mut pts: Vec<(f64, f64)> = trials
            .iter()
            .filter(|t| t.len == len && t.error.is_none())
            .map(|t| {
                let (s, r) = value(t);
                (s / scale, r / scale)
            })
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(format!("{len} B"))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2)));
        chart
            .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK.mix(0.3))
        .draw()
        .map_err(err)?;
    Ok(())
}

/// The sweep figure as an SVG document (grid trials only; the zero-loss
/// search's trials are in the table and JSON).
pub fn sweep_svg(r: &SweepReport) -> Result<String, PlotError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1280, 560)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let trials: Vec<&SweepTrial> = r.trials.iter().filter(|t| !t.search).collect();
        let panels = root.split_evenly((1, 2));
        panel(
            &panels[0],
            "UDP data rate: received vs sent",
            "Mbit/s",
            1e6,
            &r.test.sizes,
            &trials,
            |t| (t.sent_bits_per_second, t.received_bits_per_second),
        )?;
        panel(
            &panels[1],
            "UDP packet rate: received vs sent",
            "kpps",
            1e3,
            &r.test.sizes,
            &trials,
            |t| (t.sent_pps, t.received_pps),
        )?;
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
        }
    }

    #[test]
    fn sweep_figure_has_both_panels_and_a_line_per_size() {
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
            "Mbit/s",
            "kpps",
            "polyline",
        ] {
            assert!(svg.contains(needle), "no {needle:?} in the SVG");
        }
    }
}
