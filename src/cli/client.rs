//! What every client command (tcp, udp, rr, sweep) shares: where the
//! server is, which engine, CPUs, output format and connect timeout.

use anyhow::{bail, Context, Result};
use linerate_engine::engines::EngineKind;
use linerate_proto::limits::ServerLimits;
use linerate_proto::spec::TestSpec;
use linerate_run::config::{ClientConfig, Target};
use linerate_stats::units::parse_duration;

use super::args;
use super::engine::{client_engine, server_engine, sqpoll_note, to_loopback};
use super::values::{format_of, parse_cpus};

/// The parts every client command shares: where the server is, which
/// engine, CPUs, output format and connect timeout — validated once here.
pub(super) fn client_config(
    host: Option<String>,
    port: u16,
    spec: TestSpec,
    engine: &args::EngineArgs,
    cpus: Option<&str>,
    output: &args::OutputArgs,
    connect_timeout: &str,
) -> Result<ClientConfig> {
    // What no server could run is a usage error here, not a refusal from
    // the server after a connection (issue 13).
    if let Err(e) = linerate_proto::negotiate::negotiate(&spec, &ServerLimits::unlimited()) {
        let flag = match e.field {
            "streams" => "parallel".to_owned(),
            f => f.replace('_', "-"),
        };
        bail!("--{flag}: {}", e.reason);
    }
    let asked_server_engine = server_engine(engine)?;
    // An engine that cannot carry this kind of test is refused here, by
    // name, never replaced (`zerocopy:sendfile` is TCP streams only).
    if let Some(why) = asked_server_engine
        .as_deref()
        .and_then(|n| n.parse::<EngineKind>().ok())
        .and_then(|k| k.refusal(&spec))
    {
        bail!("--server-engine {why}");
    }
    if let Ok(k) = engine.engine.parse::<EngineKind>() {
        if let Some(why) = k.refusal(&spec) {
            bail!("--engine {why}");
        }
    }
    // Before the engine's own checks: loopback is the usual first try,
    // and the answer there is the interface, whatever the privileges.
    let xdp_flag = if engine.engine == "xdp" {
        Some("--engine")
    } else {
        (asked_server_engine.as_deref() == Some("xdp")).then_some("--server-engine")
    };
    if let Some(flag) = xdp_flag.filter(|_| to_loopback(host.as_deref(), port)) {
        bail!(
            "{flag} xdp: {}",
            linerate_engine::engines::xdp::loopback_refusal()
        );
    }
    let (engine, engine_note) = client_engine(engine, &spec)?;
    let engine_note = engine_note.or_else(|| {
        let available = std::thread::available_parallelism().map_or(1, usize::from);
        sqpoll_note(engine, &spec, host.as_deref(), available)
    });
    Ok(ClientConfig {
        target: match host {
            Some(host) => Target::Remote { host, port },
            None => Target::Embedded,
        },
        spec,
        engine,
        engine_note,
        cpus: parse_cpus(cpus)?,
        format: format_of(output),
        connect_timeout: parse_duration(connect_timeout).context("--connect-timeout")?,
        iperf3: false,
        server_engine: asked_server_engine,
        auth_key: None,
        iface: None,
        report: None,
        plot: None,
        quiet_intervals: false,
        beside: linerate_run::config::Beside::Alone,
    })
}

/// Options an iperf3 server cannot be asked for (its protocol has no
/// busy polling, and linerate does not send iperf3's skip_rx_copy): refused
/// rather than applied to one side only.
pub(super) fn iperf3_refuses(skip_rx_copy: bool, busy_poll: bool) -> Result<()> {
    if skip_rx_copy {
        bail!("--skip-rx-copy is not available with --iperf3 (use iperf3's own --skip-rx-copy on its server)");
    }
    if busy_poll {
        bail!("--busy-poll is not available with --iperf3 (an iperf3 server cannot be asked to busy-poll)");
    }
    Ok(())
}
