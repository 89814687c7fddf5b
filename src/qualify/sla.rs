//! The service-level thresholds a qualification is judged against, from
//! `--sla loss=0.1%,delay=5ms,…` or a `--sla-file` in TOML (the same keys
//! at the top level, each a string with its unit). Flags given on the
//! command line override the file's keys.
//!
//! Every threshold carries its unit in its text: a bare number is refused
//! (is `delay=5` seconds or milliseconds?), as are keys this build does
//! not judge and thresholds no path can meet or every path meets
//! trivially (loss above 100 %, a zero delay).

use std::time::Duration;

pub use linerate_report::qualify::Sla;
use linerate_stats::units::{parse_duration, parse_rate};

/// The keys, with an example of each, for error messages and `--help`.
pub const KEYS: &str =
    "loss=0.1%, delay=5ms (one-way), rtt=10ms, jitter=1ms, rate=95M, availability=99.9%";

/// A threshold that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SlaError {
    #[error("unknown SLA key {0:?} (the keys: {KEYS})")]
    UnknownKey(String),
    #[error("SLA {key}: {value:?} {why}")]
    BadValue {
        key: &'static str,
        value: String,
        why: String,
    },
    #[error("SLA {key}: {value:?} is impossible: {why}")]
    Impossible {
        key: &'static str,
        value: String,
        why: &'static str,
    },
    #[error("SLA: {0:?} is not KEY=VALUE (the keys: {KEYS})")]
    NotPair(String),
    #[error("SLA {0} is given twice")]
    Twice(&'static str),
    #[error("SLA file: {0}")]
    Toml(String),
}

/// The canonical name of `key`, or why it is not one.
fn key_of(key: &str) -> Result<&'static str, SlaError> {
    Ok(match key.trim() {
        "loss" | "flr" => "loss",
        "delay" | "ftd" => "delay",
        "rtt" => "rtt",
        "jitter" | "fdv" => "jitter",
        "rate" | "ir" => "rate",
        "availability" | "avail" => "availability",
        other => return Err(SlaError::UnknownKey(other.to_owned())),
    })
}

/// A percentage written with its `%`.
fn percent(key: &'static str, v: &str) -> Result<f64, SlaError> {
    let bad = |why: &str| SlaError::BadValue {
        key,
        value: v.to_owned(),
        why: why.to_owned(),
    };
    let num = v
        .trim()
        .strip_suffix('%')
        .ok_or_else(|| bad("needs its unit: a percentage such as 0.1%"))?;
    let x: f64 = num
        .trim()
        .parse()
        .map_err(|_| bad("is not a number followed by %"))?;
    if !x.is_finite() || !(0.0..=100.0).contains(&x) {
        return Err(SlaError::Impossible {
            key,
            value: v.to_owned(),
            why: "a percentage lies in 0%..=100%",
        });
    }
    Ok(x)
}

/// A duration written with its unit (`5ms`, `250us`, `1s`).
fn duration(key: &'static str, v: &str) -> Result<u64, SlaError> {
    let t = v.trim();
    if t.ends_with(|c: char| c.is_ascii_digit() || c == '.') {
        return Err(SlaError::BadValue {
            key,
            value: v.to_owned(),
            why: "needs its unit: us, ms or s (e.g. 5ms)".into(),
        });
    }
    if t.starts_with('-') {
        return Err(SlaError::Impossible {
            key,
            value: v.to_owned(),
            why: "a delay cannot be negative",
        });
    }
    let d: Duration = parse_duration(t).map_err(|e| SlaError::BadValue {
        key,
        value: v.to_owned(),
        why: format!("is not a duration ({e})"),
    })?;
    if d.is_zero() {
        return Err(SlaError::Impossible {
            key,
            value: v.to_owned(),
            why: "no frame crosses a path in zero time",
        });
    }
    Ok(d.as_nanos().min(u128::from(u64::MAX)) as u64)
}

/// A rate written with its unit (`95M`, `1G`, `500kbit/s`).
fn rate(key: &'static str, v: &str) -> Result<f64, SlaError> {
    let t = v.trim();
    if t.ends_with(|c: char| c.is_ascii_digit() || c == '.') {
        return Err(SlaError::BadValue {
            key,
            value: v.to_owned(),
            why: "needs its unit: k, M or G bit/s (e.g. 95M)".into(),
        });
    }
    parse_rate(t).map_err(|e| {
        // parse_rate refuses zero and negative rates by this phrase.
        if t.starts_with('-') || e.to_string().contains("greater than zero") {
            SlaError::Impossible {
                key,
                value: v.to_owned(),
                why: "a rate must be greater than zero",
            }
        } else {
            SlaError::BadValue {
                key,
                value: v.to_owned(),
                why: format!("is not a rate ({e})"),
            }
        }
    })
}

/// Sets one key of `sla` from its text; a key set before is an error
/// unless `replace` (the command line over the file).
pub fn set(sla: &mut Sla, key: &str, value: &str, replace: bool) -> Result<(), SlaError> {
    let key = key_of(key)?;
    let had = match key {
        "loss" => sla.loss_percent.replace(percent(key, value)?).is_some(),
        "delay" => sla.delay_ns.replace(duration(key, value)?).is_some(),
        "rtt" => sla.rtt_ns.replace(duration(key, value)?).is_some(),
        "jitter" => sla.jitter_ns.replace(duration(key, value)?).is_some(),
        "rate" => sla.rate_bps.replace(rate(key, value)?).is_some(),
        _ => {
            let a = percent(key, value)?;
            if a == 0.0 {
                return Err(SlaError::Impossible {
                    key,
                    value: value.to_owned(),
                    why: "an availability of 0% accepts a dead path",
                });
            }
            sla.availability_percent.replace(a).is_some()
        }
    };
    if had && !replace {
        return Err(SlaError::Twice(key));
    }
    Ok(())
}

/// `--sla loss=0.1%,delay=5ms`, over what `sla` holds already.
pub fn apply_flag(sla: &mut Sla, text: &str) -> Result<(), SlaError> {
    let mut seen = Sla::default();
    for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| SlaError::NotPair(pair.to_owned()))?;
        // Twice within the flag is a mistake; over the file, a choice.
        set(&mut seen, k, v, false)?;
        set(sla, k, v, true)?;
    }
    Ok(())
}

/// The thresholds of a TOML document: top-level `key = "value"`.
pub fn from_toml(text: &str) -> Result<Sla, SlaError> {
    let table: toml::Table = toml::from_str(text).map_err(|e| SlaError::Toml(e.to_string()))?;
    let mut sla = Sla::default();
    for (k, v) in &table {
        let key = key_of(k)?;
        let Some(s) = v.as_str() else {
            return Err(SlaError::BadValue {
                key,
                value: v.to_string(),
                why: "must be a string with its unit, e.g. loss = \"0.1%\", delay = \"5ms\"".into(),
            });
        };
        set(&mut sla, key, s, false)?;
    }
    Ok(sla)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue_27_sla_flag_parses_every_key_with_units() {
        let mut s = Sla::default();
        apply_flag(
            &mut s,
            "loss=0.1%,delay=5ms,rtt=250us,jitter=1ms,rate=95M,availability=99.9%",
        )
        .expect("valid");
        assert_eq!(s.loss_percent, Some(0.1));
        assert_eq!(s.delay_ns, Some(5_000_000));
        assert_eq!(s.rtt_ns, Some(250_000));
        assert_eq!(s.jitter_ns, Some(1_000_000));
        assert_eq!(s.rate_bps, Some(95e6));
        assert_eq!(s.availability_percent, Some(99.9));
    }

    #[test]
    fn issue_27_sla_unknown_keys_bad_units_and_impossible_thresholds_are_errors() {
        let err = |t: &str| {
            let mut s = Sla::default();
            apply_flag(&mut s, t).expect_err(t).to_string()
        };
        assert!(err("latency=5ms").contains("unknown SLA key \"latency\""));
        assert!(
            err("loss=0.1").contains("needs its unit"),
            "{}",
            err("loss=0.1")
        );
        assert!(err("delay=5").contains("needs its unit: us, ms or s"));
        assert!(err("delay=5 parsecs").contains("is not a duration"));
        assert!(err("rate=100").contains("needs its unit"));
        assert!(err("loss=150%").contains("impossible"));
        assert!(err("loss=-1%").contains("impossible"));
        assert!(err("delay=0ms").contains("impossible"));
        assert!(err("delay=-3ms").contains("impossible"));
        assert!(err("availability=0%").contains("impossible"));
        assert!(err("loss=1%,loss=2%").contains("twice"));
        assert!(err("loss").contains("not KEY=VALUE"));
    }

    #[test]
    fn issue_27_sla_file_parses_and_rejects_like_the_flag() {
        let s = from_toml("loss = \"0.5%\"\njitter = \"2ms\"\n").expect("valid");
        assert_eq!(s.loss_percent, Some(0.5));
        assert_eq!(s.jitter_ns, Some(2_000_000));
        let e = from_toml("los = \"1%\"").expect_err("typo").to_string();
        assert!(e.contains("unknown SLA key \"los\""), "{e}");
        let e = from_toml("delay = 5").expect_err("bare").to_string();
        assert!(e.contains("must be a string with its unit"), "{e}");
        let e = from_toml("delay = \"5\"")
            .expect_err("unitless")
            .to_string();
        assert!(e.contains("needs its unit"), "{e}");
        let e = from_toml("loss = \"101%\"")
            .expect_err("impossible")
            .to_string();
        assert!(e.contains("impossible"), "{e}");
        let e = from_toml("loss = [").expect_err("syntax").to_string();
        assert!(e.starts_with("SLA file:"), "{e}");
        // The command line overrides the file.
        let mut s = from_toml("loss = \"1%\"").expect("valid");
        apply_flag(&mut s, "loss=2%").expect("override");
        assert_eq!(s.loss_percent, Some(2.0));
    }
}
