//! `linerate compare --plot FILE.svg`: one bar per variant of the test's
//! headline figure ([`compare::headline`]: bit/s for tcp, received
//! datagrams/s for udp, transactions/s for rr), each labelled with its
//! value and its ratio to the first variant; with `--repeat` a ±1 sd bar
//! and min/max marks, as `--repeat --plot` draws them.

use plotters::prelude::*;

use crate::chart_bars::{self, Bar, BarChart, BarValue};
use crate::chart_style::series_colour;
use crate::compare::{self, CompareReport};
use crate::plot_text::{si, utc, PlotError};

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

/// The chart title's words for a headline figure (the JSON name is for
/// programs).
fn title_of(name: &str) -> &str {
    match name {
        "receiver_bits_per_second" => "Received data rate",
        "received_datagrams_per_second" => "Received datagram rate",
        "transactions_per_second" => "Transaction rate",
        other => other,
    }
}

/// The figure as SVG; an error when no variant has the headline figure.
pub fn svg(r: &CompareReport) -> Result<String, PlotError> {
    let name = compare::headline(&r.test);
    // Variants without the figure (did not run) keep their place on the
    // axis, with a note instead of a bar.
    let bars: Vec<Bar<'_>> = r
        .variants
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let m = v.metrics.iter().find(|m| m.name == name);
            Bar {
                label: v.name.clone(),
                fill: series_colour(i).to_rgba().mix(0.7),
                value: match m {
                    Some(m) => BarValue::Bar {
                        value: m.value,
                        stats: m.stats.as_ref(),
                    },
                    None if v.error.is_some() => BarValue::Note("did not run"),
                    None => BarValue::Note("not measured"),
                },
                value_label: m.map(|m| m.ratio.map_or(String::new(), |x| format!(" ×{x:.2}"))),
            }
        })
        .collect();
    if bars.iter().all(|b| matches!(b.value, BarValue::Note(_))) {
        return Err(PlotError(format!("nothing to plot: no variant has {name}")));
    }
    let base = match compare::unit_of(name) {
        "bit/s" => "bit/s",
        "datagrams/s" => "datagrams/s",
        _ => "transactions/s",
    };
    let (scale, unit) = si(chart_bars::peak(&bars), base);
    chart_bars::svg(&BarChart {
        width: (220 * bars.len() as u32).clamp(900, 1600),
        caption: lines(r),
        title: format!(
            "{} per variant ({unit}), ratio to the first",
            title_of(name)
        ),
        scale,
        unit,
        // Room above the tallest bar for its label.
        headroom: 1.25,
        bars,
    })
}
