//! Validation of `udp` flags into a [`ClientConfig`](super::ClientConfig) test config.

use anyhow::{bail, Context, Result};
use linerate_proto::spec::{Limit, Pace, Protocol, TcpOptions, TestSpec, UdpSpec};
use linerate_stats::units::parse_rate;

use super::args;
use super::client::{client_config, iperf3_refuses};
use super::command::Command;
use super::values::{
    direction, duration_ms, flows_spec, interval_flag, omit_ms, parse_pps, size_u32,
};

pub(super) fn validate_udp(u: args::UdpArgs) -> Result<Command> {
    let limit = match (&u.time, u.count) {
        (_, Some(0)) => bail!("--count must be greater than zero"),
        (_, Some(n)) => Limit::Datagrams(n),
        (Some(d), None) => {
            let ms = duration_ms("--time", d)?;
            if ms == 0 {
                bail!("--time must be greater than zero (use --count for a datagram count)");
            }
            Limit::TimeMs(ms)
        }
        (None, None) => Limit::TimeMs(10_000),
    };
    if u.parallel == 0 {
        bail!("--parallel must be at least 1");
    }
    let flows = flows_spec(u.flows, u.threads, u.busy_poll, u.iperf3)?;
    if flows.is_some() && u.priority.is_some() {
        bail!(
            "--priority renices receiving stream threads (-P); an event loop of --flows is not one"
        );
    }
    let len = size_u32("--len", &u.len)?;
    let (min, max) = (
        linerate_proto::datagram::HEADER_LEN as u32,
        linerate_proto::datagram::MAX_LEN as u32,
    );
    if !(min..=max).contains(&len) {
        bail!(
            "--len: {len} bytes; a datagram must be {min}..={max} bytes (the header takes {min})"
        );
    }
    let pace = udp_pace(&u)?;
    if u.burst == 0 {
        bail!("--burst must be at least 1");
    }
    let (interval_ms, interval_lines) = interval_flag(&u.interval)?;
    if let Some(p) = u.priority {
        if !(-20..=19).contains(&p) {
            bail!("--priority: nice value {p} is outside -20..=19");
        }
    }
    let faults = match &u.inject_faults {
        Some(f) => linerate_proto::datagram::parse_faults(f)
            .map_err(|e| anyhow::anyhow!("--inject-faults: {e}"))?,
        None => Vec::new(),
    };
    let mut spec = TestSpec {
        protocol: Protocol::Udp,
        direction: direction(u.reverse, u.bidir),
        streams: u.parallel,
        limit,
        len,
        omit_ms: omit_ms(u.omit.as_deref())?,
        interval_ms,
        tcp: TcpOptions::default(),
        udp: Some(UdpSpec {
            pace,
            burst: u.burst,
            verify: u.verify,
            window: u
                .window
                .as_deref()
                .map(|w| size_u32("--window", w))
                .transpose()?,
            priority: u.priority,
            drain_ms: duration_ms("--drain", &u.drain)?,
            faults,
        }),
        busy_poll: u.busy_poll,
        flows,
        ..TestSpec::default()
    };
    if u.iperf3 {
        iperf3_refuses(false, u.busy_poll)?;
    }
    let conns = spec.connection_count();
    if let Some(udp) = spec.udp.as_mut() {
        // Not with --iperf3: the window travels as iperf3's -w, which a
        // real iperf3 server sets without force and fails the test when
        // rmem_max is lower (a linerate server deepens its own receive
        // buffers for unpaced iperf3 clients).
        if udp.pace == Pace::Unlimited && udp.window.is_none() && !u.iperf3 {
            // A client does not know the server's --max-test-memory.
            udp.window = linerate_proto::limits::unpaced_udp_window(
                conns,
                linerate_proto::limits::DEFAULT_MAX_TEST_MEMORY,
            );
        }
    }
    let mut cfg = client_config(
        u.host,
        u.port,
        spec,
        &u.engine,
        u.cpus.as_deref(),
        &u.output,
        &u.connect_timeout,
    )?;
    cfg.iperf3 = u.iperf3;
    cfg.plot = u.plot;
    cfg.quiet_intervals = !interval_lines;
    Ok(Command::Udp(cfg))
}

/// `--rate` or `--pps` (1 Mbit/s without either; `--rate 0`: unpaced).
fn udp_pace(u: &args::UdpArgs) -> Result<Pace> {
    Ok(match (&u.rate, &u.pps) {
        (Some(r), _) if r.trim() == "0" => Pace::Unlimited,
        (Some(r), _) => {
            let bps = parse_rate(r).context("--rate")?;
            if bps < 1.0 {
                bail!("--rate: {r:?} is below 1 bit/s");
            }
            Pace::Rate(bps.round() as u64)
        }
        (None, Some(p)) => Pace::MilliPps(parse_pps(p)?),
        (None, None) => Pace::Rate(1_000_000),
    })
}
