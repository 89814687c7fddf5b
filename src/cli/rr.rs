//! Validation of `rr` and `crr` flags into an [`RrConfig`].

use super::client::client_config;
use super::values::{duration_ms, flows_spec, size_u32};
use anyhow::{bail, Result};
use linerate_proto::spec::{TestKind, TestSpec};
use linerate_run::config::{RrConfig, AUTO};

use super::args;
use linerate_local::Transport;
use linerate_proto::spec::{Limit, Protocol, RrLimit, RrSpec, TcpOptions, DEFAULT_RR_SIZES};

/// Parses `1,64,1K` into message sizes.
pub(super) fn parse_sizes(flag: &str, list: &str) -> Result<Vec<u32>> {
    let sizes = list
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            let n = size_u32(flag, p)?;
            if n == 0 {
                bail!("{flag}: sizes must be at least 1 byte");
            }
            Ok(n)
        })
        .collect::<Result<Vec<_>>>()?;
    if sizes.is_empty() {
        bail!("{flag}: empty list");
    }
    Ok(sizes)
}

pub(super) fn validate_rr(mut r: args::RrArgs, kind: TestKind) -> Result<RrConfig> {
    let local = local_transport(&mut r, kind)?;
    let protocol = match r.proto.as_str() {
        "tcp" => Protocol::Tcp,
        "udp" if kind == TestKind::Crr => {
            bail!("--proto udp: crr opens a TCP connection per transaction; it has no UDP form")
        }
        "udp" => Protocol::Udp,
        other => bail!("--proto: {other:?} is not tcp or udp"),
    };
    if kind == TestKind::Crr {
        if let Some(e) = r
            .engine
            .server_engine
            .as_deref()
            .filter(|e| *e != "syscall" && *e != AUTO)
        {
            bail!(
                "--server-engine {e}: a server answers crr connections on its accepting thread \
                 with plain syscalls (accept, read, send, close each); crr has no server engine \
                 to choose"
            );
        }
    }
    if r.parallel == 0 {
        bail!("--parallel must be at least 1");
    }
    if r.batch == 0 {
        bail!("--batch must be at least 1");
    }
    if r.linger0 && kind != TestKind::Crr {
        bail!("--linger0 is for crr (a connection per transaction); rr keeps its connections");
    }
    let flows = flows_spec(r.flows, r.threads, r.busy_poll, false)?;
    let sizes = match (&r.size, &r.sizes) {
        (Some(s), _) => parse_sizes("--size", s)?,
        (None, Some(l)) => parse_sizes("--sizes", l)?,
        // Event-loop flows default to one size (neper's tcp_rr default).
        (None, None) if kind == TestKind::Crr || flows.is_some() => vec![1],
        (None, None) => DEFAULT_RR_SIZES.to_vec(),
    };
    let response_size = r
        .response_size
        .as_deref()
        .map(|v| parse_sizes("--response-size", v))
        .transpose()?
        .map(|v| v[0]);
    let limit = match (r.count, &r.time) {
        (Some(0), _) => bail!("--count must be greater than zero"),
        (Some(n), _) => RrLimit::Count(n),
        (None, Some(t)) => {
            let ms = duration_ms("--time", t)?;
            if ms == 0 {
                bail!("--time must be greater than zero");
            }
            RrLimit::TimeMs(ms)
        }
        (None, None) => RrLimit::TimeMs(1000),
    };
    check_rate(&r, kind)?;
    let under_load = r.under_load.unwrap_or(0);
    if r.under_load == Some(0) {
        bail!("--under-load needs at least 1 stream");
    }
    let spec = TestSpec {
        kind,
        protocol,
        streams: r.parallel,
        flows,
        limit: match limit {
            RrLimit::TimeMs(ms) => Limit::TimeMs(ms),
            RrLimit::Count(_) => Limit::default(),
        },
        tcp: TcpOptions {
            // Nagle would hold every small message for the previous one's ACK.
            no_delay: true,
            linger0: r.linger0,
            ..TcpOptions::default()
        },
        rr: Some(RrSpec {
            sizes,
            response_size,
            limit,
            batch: r.batch,
            busy_poll: r.busy_poll,
            under_load,
            rate: r.rate,
        }),
        ..TestSpec::default()
    };
    Ok(RrConfig {
        client: client_config(
            r.host,
            r.port,
            spec,
            &r.engine,
            r.cpus.as_deref(),
            &r.output,
            &r.connect_timeout,
        )?,
        histogram: r.histogram,
        plot: r.plot,
        probe_clock: r.probe_clock,
        local,
    })
}

/// `--rate`: paced rr only, on flow threads or event-loop flows (what
/// the server accepts, `linerate_proto::negotiate`), refused here before
/// anything connects.
fn check_rate(r: &args::RrArgs, kind: TestKind) -> Result<()> {
    let Some(rate) = r.rate else {
        return Ok(());
    };
    let max = linerate_proto::spec::MAX_RR_RATE;
    if rate == 0 || rate > max {
        bail!("--rate: {rate} transactions/s per flow, must be 1..={max}");
    }
    if kind == TestKind::Crr {
        bail!("--rate: crr is not paced (a connection per transaction)");
    }
    Ok(())
}

/// `--transport`: tcp and udp set the protocol (as `--proto`); a local
/// transport is returned, after refusing what it cannot run.
fn local_transport(r: &mut args::RrArgs, kind: TestKind) -> Result<Option<Transport>> {
    let Some(t) = r.transport.as_deref() else {
        return Ok(None);
    };
    if matches!(t, "tcp" | "udp") {
        if r.proto != "tcp" && r.proto != t {
            bail!("--transport {t} contradicts --proto {}", r.proto);
        }
        r.proto = t.to_owned();
        return Ok(None);
    }
    let t = match t {
        // rr's messages go both ways whole: direct slots, sized to fit.
        "shm" | "shm-direct" => Transport::ShmDirect,
        "shm-bulk" => bail!(
            "--transport shm-bulk: bulk carries messages one way (use `linerate msg --transport shm-bulk`); rr uses shm (direct slots)"
        ),
        other => other
            .parse::<Transport>()
            .map_err(|e| anyhow::anyhow!("--transport: {e}"))?,
    };
    if kind == TestKind::Crr {
        bail!("--transport {t}: crr measures TCP connection set-up; it has no local form");
    }
    if let Some(h) = &r.host {
        bail!("--transport {t} runs both ends on this host: drop HOST ({h})");
    }
    if r.under_load.is_some() {
        bail!("--under-load: the load streams are TCP; not available with --transport {t}");
    }
    if r.rate.is_some() {
        bail!("--rate: a local --transport {t} is not paced");
    }
    if r.flows.is_some() {
        bail!(
            "--flows: a local --transport {t} runs a thread per flow on each end (-P N); \
             event-loop flows (--flows) run over the network"
        );
    }
    if r.proto != "tcp" {
        bail!("--transport {t} replaces --proto");
    }
    Ok(Some(t))
}
