//! What every figure's text shares (issue 13): tick labels people can
//! read ("7 000", "0.001", never "7000.0" or "1e9" noise), SI units chosen
//! from the data, and the caption line that says what was measured — by
//! which linerate, against which host, when, with which parameters.

use plotters::coord::Shift;
use plotters::prelude::*;

/// A figure that could not be drawn.
#[derive(Debug, thiserror::Error)]
#[error("drawing the plot: {0}")]
pub struct PlotError(pub(crate) String);

/// Any drawing error as a [`PlotError`].
pub(crate) fn err<E: std::fmt::Display>(e: E) -> PlotError {
    PlotError(e.to_string())
}

/// A tick label: at most three significant digits after the point, no
/// trailing zeros, no exponent for the ranges figures take.
pub(crate) fn tick(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return "0".into();
    }
    let a = v.abs();
    let decimals = if a >= 100.0 {
        0
    } else {
        // Three significant digits: 12.3, 1.23, 0.0123 …
        (2 - a.log10().floor() as i32).clamp(0, 9) as usize
    };
    let s = format!("{v:.decimals$}");
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    // Thousands apart, as the human tables print them.
    let (int, frac) = s.split_once('.').map_or((s.as_str(), ""), |(i, f)| (i, f));
    let (sign, digits) = int.strip_prefix('-').map_or(("", int), |d| ("-", d));
    let mut grouped = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 && digits.len() > 4 {
            grouped.push(' ');
        }
        grouped.push(c);
    }
    if frac.is_empty() {
        format!("{sign}{grouped}")
    } else {
        format!("{sign}{grouped}.{frac}")
    }
}

/// A log axis's label: the decades only (1, 0.1, 0.01 …), the ticks
/// between them unlabelled, so the axis reads as orders of magnitude.
pub(crate) fn decade(v: f64) -> String {
    let l = v.log10();
    if (l - l.round()).abs() < 1e-9 {
        tick(v)
    } else {
        String::new()
    }
}

/// The SI scale and unit name for values up to `max` of a `base` unit
/// (`"bit/s"`, `"pps"`): the largest prefix that keeps `max` at 1 or more.
pub(crate) fn si(max: f64, base: &str) -> (f64, String) {
    let (scale, prefix) = [(1e9, "G"), (1e6, "M"), (1e3, "k")]
        .into_iter()
        .find(|(s, _)| max >= *s)
        .unwrap_or((1.0, ""));
    (scale, format!("{prefix}{base}"))
}

/// `ms` since the Unix epoch as `YYYY-MM-DD HH:MM UTC`.
pub(crate) fn utc(ms: u64) -> String {
    let ((y, m, d), rem) = crate::civil::split_secs((ms / 1000) as i64);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60
    )
}

/// Height of the caption band above a figure's panels.
pub(crate) const CAPTION_H: u32 = 44;

/// Draws `lines` (at most two) small and left-aligned in `band`.
pub(crate) fn caption(
    band: &DrawingArea<SVGBackend<'_>, Shift>,
    lines: &[String],
) -> Result<(), PlotError> {
    for (i, line) in lines.iter().take(2).enumerate() {
        let style = ("sans-serif", 14).into_font().color(&BLACK.mix(0.8));
        band.draw(&Text::new(line.clone(), (12, 6 + 18 * i as i32), style))
            .map_err(err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_read_like_numbers_people_write() {
        assert_eq!(tick(7000.0), "7000");
        assert_eq!(tick(12_000.0), "12 000");
        assert_eq!(tick(2.5), "2.5");
        assert_eq!(tick(0.001), "0.001");
        assert_eq!(tick(0.000_123_4), "0.000123");
        assert_eq!(tick(100.0), "100");
        assert_eq!(tick(0.0), "0");
        assert_eq!(tick(-1500.0), "-1500");
        assert_eq!(decade(0.01), "0.01");
        assert_eq!(decade(1000.0), "1000");
        assert_eq!(decade(0.02), "");
    }

    #[test]
    fn units_follow_the_data() {
        assert_eq!(si(9.5e9, "bit/s"), (1e9, "Gbit/s".into()));
        assert_eq!(si(400e6, "bit/s"), (1e6, "Mbit/s".into()));
        assert_eq!(si(50.0, "pps"), (1.0, "pps".into()));
    }

    #[test]
    fn dates_are_utc_calendar_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00 UTC");
        // 2024-02-29 12:34:56 UTC
        assert_eq!(utc(1_709_210_096_000), "2024-02-29 12:34 UTC");
    }
}
