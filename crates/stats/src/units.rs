//! Parsing and formatting of sizes, rates and durations.

use std::time::Duration;

/// A command-line value that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{input:?}: {reason}")]
pub struct ParseError {
    pub input: String,
    pub reason: &'static str,
}

fn err(input: &str, reason: &'static str) -> ParseError {
    ParseError {
        input: input.to_owned(),
        reason,
    }
}

fn split_number(s: &str) -> (&str, &str) {
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    (&s[..end], s[end..].trim())
}

/// Parses a byte size: `1472`, `128K`, `128KiB`, `1M`, `4G` (K = 1024).
pub fn parse_size(s: &str) -> Result<u64, ParseError> {
    let t = s.trim();
    let (num, suffix) = split_number(t);
    if num.is_empty() {
        return Err(err(s, "expected a number, optionally with K, M, G or T"));
    }
    let mult: u64 = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => return Err(err(s, "unknown suffix (use K, M, G or T)")),
    };
    let v: f64 = num.parse().map_err(|_| err(s, "not a number"))?;
    let bytes = v * mult as f64;
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
        return Err(err(s, "out of range"));
    }
    if bytes.fract() != 0.0 {
        return Err(err(s, "not a whole number of bytes"));
    }
    Ok(bytes as u64)
}

/// Parses a rate in bit/s with SI prefixes: `9.5G`, `100M`, `500k`.
pub fn parse_rate(s: &str) -> Result<f64, ParseError> {
    let t = s.trim();
    let (num, suffix) = split_number(t);
    if num.is_empty() {
        return Err(err(s, "expected a number, optionally with k, M, G or T"));
    }
    let suffix = suffix
        .trim_end_matches("bit/s")
        .trim_end_matches("bps")
        .trim_end_matches("b/s");
    let mult = match suffix {
        "" => 1e0,
        "k" | "K" => 1e3,
        "m" | "M" => 1e6,
        "g" | "G" => 1e9,
        "t" | "T" => 1e12,
        _ => return Err(err(s, "unknown suffix (use k, M, G or T)")),
    };
    let v: f64 = num.parse().map_err(|_| err(s, "not a number"))?;
    let r = v * mult;
    if !r.is_finite() || r <= 0.0 {
        return Err(err(s, "must be greater than zero"));
    }
    Ok(r)
}

/// Parses a duration: `10` (seconds), `10s`, `500ms`, `2m`, `1h`, `250us`.
pub fn parse_duration(s: &str) -> Result<Duration, ParseError> {
    let t = s.trim();
    let (num, suffix) = split_number(t);
    if num.is_empty() {
        return Err(err(
            s,
            "expected a number of seconds, or a number with ms, s, m or h",
        ));
    }
    let v: f64 = num.parse().map_err(|_| err(s, "not a number"))?;
    let secs = match suffix {
        "" | "s" => v,
        "ms" => v / 1e3,
        "us" | "µs" => v / 1e6,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        _ => return Err(err(s, "unknown unit (use us, ms, s, m or h)")),
    };
    Duration::try_from_secs_f64(secs).map_err(|_| err(s, "out of range"))
}

fn si(v: f64) -> (f64, &'static str) {
    let a = v.abs();
    if a >= 1e12 {
        (v / 1e12, "T")
    } else if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    }
}

/// `33.71 Gbit/s`.
pub fn format_rate(bits_per_second: f64) -> String {
    let (v, p) = si(bits_per_second);
    format!("{v:.2} {p}bit/s")
}

/// `4.21 GB` (SI).
pub fn format_bytes(bytes: u64) -> String {
    let (v, p) = si(bytes as f64);
    if p.is_empty() {
        format!("{bytes} B")
    } else {
        format!("{v:.2} {p}B")
    }
}

/// `131072` → `128 KiB` for buffer sizes, exact when it can be.
pub fn format_size(bytes: u64) -> String {
    for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{} {unit}", bytes >> shift);
        }
    }
    format!("{bytes} B")
}

/// `999`, `12.50 k`, `1.25 M` datagrams per second and similar counts/s.
pub fn format_count_rate(per_second: f64) -> String {
    let (v, p) = si(per_second);
    if p.is_empty() {
        format!("{v:.1}")
    } else {
        format!("{v:.2} {p}")
    }
}

/// Nanoseconds for people: `850 ns`, `12.3 µs`, `1.25 ms`, `2.00 s`.
pub fn format_nanos(ns: f64) -> String {
    if ns < 1000.0 {
        format!("{ns:.0} ns")
    } else if ns < 1e6 {
        format!("{:.1} µs", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

/// `12 µs`, `1.25 ms`, `2.00 s`.
pub fn format_micros(us: f64) -> String {
    if us < 1000.0 {
        format!("{us:.0} µs")
    } else if us < 1e6 {
        format!("{:.2} ms", us / 1e3)
    } else {
        format!("{:.2} s", us / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1472"), Ok(1472));
        assert_eq!(parse_size("128K"), Ok(131072));
        assert_eq!(parse_size("128KiB"), Ok(131072));
        assert_eq!(parse_size("1M"), Ok(1 << 20));
        assert_eq!(parse_size("1.5K"), Ok(1536));
        assert!(parse_size("1.1").is_err());
        assert!(parse_size("x").is_err());
        assert!(parse_size("5Q").is_err());
        assert!(parse_size("-1").is_err());
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("9.5G"), Ok(9.5e9));
        assert_eq!(parse_rate("100M"), Ok(1e8));
        assert_eq!(parse_rate("100Mbit/s"), Ok(1e8));
        assert!(parse_rate("0").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("0.25s"), Ok(Duration::from_millis(250)));
        assert!(parse_duration("1y").is_err());
    }

    #[test]
    fn formats_are_si() {
        assert_eq!(format_rate(33_712_000_000.0), "33.71 Gbit/s");
        assert_eq!(format_rate(999.0), "999.00 bit/s");
        assert_eq!(format_bytes(4_210_000_000), "4.21 GB");
        assert_eq!(format_bytes(12), "12 B");
        assert_eq!(format_size(131072), "128 KiB");
        assert_eq!(format_size(1000), "1000 B");
        assert_eq!(format_micros(12.4), "12 µs");
        assert_eq!(format_nanos(12_340.0), "12.3 µs");
        assert_eq!(format_count_rate(250_000.0), "250.00 k");
    }
}
