//! Parsers of flag values the commands share: durations, sizes, rates,
//! rate ranges, CPU lists and the output format.

use anyhow::{bail, Context, Result};
use linerate_proto::spec::Direction;
use linerate_report::render::Format;
use linerate_stats::units::{parse_duration, parse_size};

use super::common::OutputArgs;

pub(super) fn format_of(o: &OutputArgs) -> Format {
    if o.json {
        Format::Json
    } else if o.json_lines {
        Format::JsonLines
    } else if o.csv {
        Format::Csv
    } else {
        Format::Human
    }
}

/// `0-3,6` for the ids `[0, 1, 2, 3, 6]`.
pub(super) fn cpu_list(ids: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ids.len() {
        let mut j = i;
        while j + 1 < ids.len() && ids[j + 1] == ids[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            ids[i].to_string()
        } else {
            format!("{}-{}", ids[i], ids[j])
        });
        i = j + 1;
    }
    out.join(",")
}

/// Parses `0-3,6` into CPU numbers, checking each is one this process
/// may run on.
pub(super) fn parse_cpus(list: Option<&str>) -> Result<Vec<usize>> {
    let Some(list) = list else {
        return Ok(Vec::new());
    };
    // The CPUs this process may run on (taskset's mask), by id.
    let allowed = linerate_engine::cpu::allowed_cpus();
    let mut cpus = Vec::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let a: usize = a
            .trim()
            .parse()
            .with_context(|| format!("--cpus: {part:?} is not a CPU number or range"))?;
        let b: usize = b
            .trim()
            .parse()
            .with_context(|| format!("--cpus: {part:?} is not a CPU number or range"))?;
        if a > b {
            bail!("--cpus: range {part:?} runs backwards");
        }
        for c in a..=b {
            if !allowed.is_empty() && !allowed.contains(&c) {
                bail!(
                    "--cpus: CPU {c} is not available to this process (it may run on {})",
                    cpu_list(&allowed)
                );
            }
            cpus.push(c);
        }
    }
    if cpus.is_empty() {
        bail!("--cpus: empty list");
    }
    Ok(cpus)
}

pub(super) fn duration_ms(flag: &str, v: &str) -> Result<u64> {
    if v.trim_start().starts_with('-') {
        bail!("{flag}: {v} is negative; give a duration such as 10, 500ms or 2m");
    }
    let d = parse_duration(v).with_context(|| flag.to_string())?;
    Ok(d.as_millis() as u64)
}

/// `--interval`: at least 10 ms, or 0 for iperf3's "no interval lines"
/// (`-i 0`): then intervals are measured at the default 1 s but not
/// printed. Returns the interval and whether its lines are printed.
pub(super) fn interval_flag(v: &str) -> Result<(u64, bool)> {
    let ms = duration_ms("--interval", v)?;
    match ms {
        0 => Ok((1000, false)),
        1..=9 => bail!("--interval must be at least 10ms (or 0: no interval lines)"),
        _ => Ok((ms, true)),
    }
}

/// `--omit`, in ms (0 without one).
pub(super) fn omit_ms(v: Option<&str>) -> Result<u64> {
    v.map_or(Ok(0), |o| duration_ms("--omit", o))
}

pub(super) fn size_u32(flag: &str, v: &str) -> Result<u32> {
    let b = parse_size(v).with_context(|| flag.to_owned())?;
    // Say the limit in the user's terms, not the conversion's (issue 13).
    u32::try_from(b).map_err(|_| {
        anyhow::anyhow!(
            "{flag}: {v} is too large (at most {} bytes, just under 4 GiB)",
            u32::MAX
        )
    })
}

/// Parses a pps figure (`0.05`, `500k`, `2M`) into datagrams per 1000 s.
pub(super) fn parse_pps(v: &str) -> Result<u64> {
    let t = v.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1e3),
        Some((i, 'm' | 'M')) => (&t[..i], 1e6),
        Some((i, 'g' | 'G')) => (&t[..i], 1e9),
        _ => (t, 1.0),
    };
    let x: f64 = num
        .parse()
        .with_context(|| format!("--pps: {v:?} is not a number (e.g. 0.05, 500k, 2M)"))?;
    let milli = (x * mult * 1000.0).round();
    if !milli.is_finite() || milli < 1.0 {
        bail!("--pps: {v:?} must be at least 0.001");
    }
    if milli > 1e12 {
        bail!("--pps: {v:?} is above 10^9 datagrams/s");
    }
    Ok(milli as u64)
}

/// Parses `50k:1M:50k` (start:stop:step) or `1k,5k,10k` with `one` parsing
/// each value.
pub(super) fn parse_range(
    flag: &str,
    v: &str,
    one: impl Fn(&str) -> Result<f64>,
) -> Result<Vec<f64>> {
    let parts: Vec<&str> = v.split(':').collect();
    let points = match parts.as_slice() {
        [start, stop, step] => {
            let (a, b, st) = (one(start)?, one(stop)?, one(step)?);
            if st <= 0.0 || b < a {
                bail!("{flag}: {v:?} needs START ≤ STOP and STEP > 0");
            }
            let n = ((b - a) / st + 1e-9).floor() as u64 + 1;
            if n > 1000 {
                bail!("{flag}: {v:?} makes {n} points, at most 1000");
            }
            (0..n).map(|i| a + st * i as f64).collect()
        }
        [list] => list
            .split(',')
            .filter(|x| !x.is_empty())
            .map(&one)
            .collect::<Result<Vec<f64>>>()?,
        _ => bail!("{flag}: {v:?} is neither START:STOP:STEP nor a list"),
    };
    if points.is_empty() {
        bail!("{flag}: no rates in {v:?}");
    }
    Ok(points)
}

/// `--reverse` / `--bidir`: which way the data flows.
pub(super) fn direction(reverse: bool, bidir: bool) -> Direction {
    if reverse {
        Direction::Reverse
    } else if bidir {
        Direction::Bidir
    } else {
        Direction::Forward
    }
}

/// `--flows N --threads T`: the spec's flows (`None` without `--flows`).
pub(super) fn flows_spec(
    flows: Option<u32>,
    threads: Option<u16>,
    busy_poll: bool,
    iperf3: bool,
) -> Result<Option<linerate_proto::spec::Flows>> {
    let Some(count) = flows else {
        return Ok(None);
    };
    if count == 0 {
        bail!("--flows must be at least 1");
    }
    let threads = threads.unwrap_or(1);
    if threads == 0 {
        bail!("--threads must be at least 1");
    }
    if busy_poll {
        bail!("--flows waits in epoll; --busy-poll spins per-thread streams (-P) only");
    }
    if iperf3 {
        bail!("--flows is linerate's own protocol; an iperf3 server takes -P");
    }
    Ok(Some(linerate_proto::spec::Flows { count, threads }))
}
