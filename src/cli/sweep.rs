//! Validation of `sweep` flags into a [`SweepConfig`].

use super::values::{parse_pps, parse_range, size_u32};
use anyhow::{bail, Context, Result};

use super::args;
use super::command::{Command, SweepConfig};
use super::test_line;
use super::values::format_of;
use linerate_stats::units::parse_rate;

pub(super) fn validate_sweep(a: args::SweepUdpArgs) -> Result<Command> {
    let mut sizes = Vec::new();
    for s in a.sizes.split(',').filter(|x| !x.is_empty()) {
        let len = size_u32("--sizes", s)?;
        let (min, max) = (
            linerate_proto::datagram::HEADER_LEN as u32,
            linerate_proto::datagram::MAX_LEN as u32,
        );
        if !(min..=max).contains(&len) {
            bail!("--sizes: {len} bytes; a datagram must be {min}..={max} bytes");
        }
        sizes.push(len);
    }
    if sizes.is_empty() {
        bail!("--sizes: no sizes given");
    }
    let (points, rates_are_bits) = match (&a.pps, &a.rates) {
        (Some(p), _) => (
            parse_range("--pps", p, |x| Ok(parse_pps(x)? as f64 / 1000.0))?,
            false,
        ),
        (None, Some(r)) => (
            parse_range("--rates", r, |x| parse_rate(x).context("--rates"))?,
            true,
        ),
        (None, None) => bail!("sweep udp needs --pps or --rates (e.g. --pps 50k:1M:50k)"),
    };
    if !(0.0..=100.0).contains(&a.max_loss) {
        bail!("--max-loss must be a percentage in 0..=100");
    }
    let mut argv = vec!["linerate".to_string(), "udp".to_string()];
    if let Some(h) = &a.host {
        argv.push(h.clone());
    }
    argv.extend([
        "-p".into(),
        a.port.to_string(),
        "-t".into(),
        a.time.clone(),
        "-P".into(),
        a.parallel.to_string(),
        "--burst".into(),
        a.burst.to_string(),
        "--engine".into(),
        a.engine.engine.clone(),
        "--connect-timeout".into(),
        a.connect_timeout.clone(),
    ]);
    if a.reverse {
        argv.push("-R".into());
    }
    if let Some(w) = &a.window {
        argv.extend(["-w".into(), w.clone()]);
    }
    let e = &a.engine;
    for (set, flag) in [
        (e.gso, "--gso"),
        (e.no_gso, "--no-gso"),
        (e.gro, "--gro"),
        (e.no_gro, "--no-gro"),
    ] {
        if set {
            argv.push(flag.into());
        }
    }
    // The trial template goes through the same validation as `linerate udp`.
    let Command::Udp(mut base) =
        test_line::validate(<args::Cli as clap::Parser>::try_parse_from(argv)?)?
    else {
        bail!("internal: sweep template is not a UDP test");
    };
    base.format = format_of(&a.output);
    Ok(Command::Sweep(SweepConfig {
        base,
        sizes,
        points,
        rates_are_bits,
        find_zero_loss: a.find_zero_loss,
        max_loss_percent: a.max_loss,
        plot: a.plot,
    }))
}
