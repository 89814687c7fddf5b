//! Validation of `tcp` flags into a [`ClientConfig`](super::ClientConfig) test config.

use anyhow::{bail, Context, Result};
use linerate_proto::spec::{Limit, Protocol, TcpOptions, TestSpec};
use linerate_stats::units::{parse_rate, parse_size};

use super::args;
use super::client::{client_config, iperf3_refuses};
use super::command::Command;
use super::values::{direction, duration_ms, flows_spec, interval_flag, omit_ms, size_u32};

/// `linerate tcp`: the test spec from its flags, and the client config
/// every client command shares.
pub(super) fn validate_tcp(t: args::TcpArgs) -> Result<Command> {
    if t.udp {
        bail!("linerate tcp has no -u: a UDP test is `linerate udp HOST …` (the same flags, plus --rate/--pps)");
    }
    let limit = tcp_limit(&t)?;
    if t.parallel == 0 {
        bail!("--parallel must be at least 1");
    }
    let flows = flows_spec(t.flows, t.threads, t.busy_poll, t.iperf3)?;
    let len = size_u32("--len", &t.len)?;
    if len == 0 {
        bail!("--len must be at least 1 byte");
    }
    let (interval_ms, interval_lines) = interval_flag(&t.interval)?;
    let window = t
        .window
        .as_deref()
        .map(|w| size_u32("--window", w))
        .transpose()?;
    let spec = TestSpec {
        protocol: Protocol::Tcp,
        direction: direction(t.reverse, t.bidir),
        streams: t.parallel,
        limit,
        len,
        omit_ms: omit_ms(t.omit.as_deref())?,
        interval_ms,
        tcp: TcpOptions {
            unix: tcp_transport(&t)?,
            window,
            congestion: t.congestion,
            no_delay: t.no_delay,
            mss: t.mss,
            rate: tcp_rate(t.rate.as_deref())?,
            skip_rx_copy: t.skip_rx_copy,
            linger0: false,
        },
        busy_poll: t.busy_poll,
        flows,
        ..TestSpec::default()
    };
    if t.iperf3 {
        iperf3_refuses(t.skip_rx_copy, t.busy_poll)?;
    }
    let mut cfg = client_config(
        t.host,
        t.port,
        spec,
        &t.engine,
        t.cpus.as_deref(),
        &t.output,
        &t.connect_timeout,
    )?;
    cfg.iperf3 = t.iperf3;
    cfg.plot = t.plot;
    cfg.quiet_intervals = !interval_lines;
    Ok(Command::Tcp(cfg))
}

/// `--bytes` or `--time` (10 s without either): when the test ends.
fn tcp_limit(t: &args::TcpArgs) -> Result<Limit> {
    Ok(match (&t.time, &t.bytes) {
        (_, Some(b)) => {
            let n = parse_size(b).context("--bytes")?;
            if n == 0 {
                bail!("--bytes must be greater than zero");
            }
            Limit::Bytes(n)
        }
        (Some(d), None) => {
            let ms = duration_ms("--time", d)?;
            if ms == 0 {
                bail!("--time must be greater than zero (use --bytes for a byte count)");
            }
            Limit::TimeMs(ms)
        }
        (None, None) => Limit::TimeMs(10_000),
    })
}

/// `tcp --rate`: bit/s per sending stream; `0` or absent: unpaced. The
/// kernel paces in bytes per second, so 8 bit/s is the least.
fn tcp_rate(rate: Option<&str>) -> Result<Option<u64>> {
    match rate.map(str::trim) {
        None | Some("0") => Ok(None),
        Some(r) => {
            let bps = parse_rate(r).context("--rate")?;
            let min = linerate_proto::limits::MIN_TCP_RATE_BPS;
            if bps.is_nan() || bps < min as f64 {
                bail!(
                    "--rate: {r:?} is below {min} bit/s (the kernel paces whole bytes per second)"
                );
            }
            Ok(Some(bps.round() as u64))
        }
    }
}

/// `tcp --transport`: whether the data connections are Unix stream
/// sockets; the TCP-only flags are refused with it, by name.
fn tcp_transport(t: &args::TcpArgs) -> Result<bool> {
    match t.transport.as_str() {
        "tcp" => return Ok(false),
        "unix" => {}
        other => bail!("--transport: {other:?} is not tcp or unix"),
    }
    let tcp_only = [
        ("--window", t.window.is_some()),
        ("--congestion", t.congestion.is_some()),
        ("--no-delay", t.no_delay),
        ("--mss", t.mss.is_some()),
        ("--rate", t.rate.is_some()),
        ("--iperf3", t.iperf3),
        ("--skip-rx-copy", t.skip_rx_copy),
        ("--busy-poll", t.busy_poll),
    ];
    if let Some((flag, _)) = tcp_only.iter().find(|(_, set)| *set) {
        bail!("{flag} is a TCP option; --transport unix data connections are Unix stream sockets");
    }
    // The other engines' zero-copy sends and registered buffers are TCP's.
    for (flag, e) in [
        ("--engine", Some(t.engine.engine.as_str())),
        ("--server-engine", t.engine.server_engine.as_deref()),
    ] {
        if let Some(e) = e.filter(|e| !matches!(*e, "syscall" | "auto")) {
            bail!("{flag} {e}: --transport unix runs the syscall engine (read/write) only");
        }
    }
    Ok(true)
}
