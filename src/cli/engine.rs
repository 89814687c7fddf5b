//! The engine flags (`--engine`, `--server-engine` and the engine-only
//! options): resolved and checked against this kernel and this test.

use std::net::IpAddr;

use anyhow::{bail, Context, Result};
use linerate_engine::engines::auto;
use linerate_engine::engines::batch::Toggle;
use linerate_engine::engines::{Batch, EngineKind, Xdp, XdpMode};
use linerate_proto::spec::TestSpec;
use linerate_run::config::AUTO;

use super::args;

/// Whether the test's peer is reached over loopback (the embedded server,
/// or a host whose every address is a loopback one), where AF_XDP cannot
/// bind.
pub(super) fn to_loopback(host: Option<&str>, port: u16) -> bool {
    use std::net::ToSocketAddrs;
    let Some(host) = host else {
        return true;
    };
    match (host, port).to_socket_addrs() {
        Ok(addrs) => {
            let addrs: Vec<_> = addrs.collect();
            !addrs.is_empty() && addrs.iter().all(|a| a.ip().is_loopback())
        }
        Err(_) => false,
    }
}

/// `--server-engine`: a name this build knows, or `auto` (whether the
/// server has and allows it is the server's answer).
pub(super) fn server_engine(a: &args::EngineArgs) -> Result<Option<String>> {
    let Some(name) = &a.server_engine else {
        return Ok(None);
    };
    if name != AUTO {
        name.parse::<EngineKind>()
            .context("--server-engine (auto, or an engine)")?;
    }
    Ok(Some(name.clone()))
}

/// A server's `--engine`: `auto` is applied per test (the server learns
/// the test from the client's Hello), any other engine serves every test.
pub(super) fn server_side_engine(a: &args::EngineArgs) -> Result<auto::Configured> {
    if a.engine == AUTO {
        if let Some((flag, engine)) = engine_only_flag(a) {
            bail!(
                "{flag} needs --engine {engine} (auto picks an engine, and its options, per test)"
            );
        }
        return Ok(auto::Configured::Auto);
    }
    Ok(auto::Configured::Fixed(engine_kind(a)?))
}

/// `--engine` (not `auto`) and its options: resolved once, and checked
/// against this kernel (an option the kernel lacks is refused with the
/// reason).
pub(super) fn engine_kind(a: &args::EngineArgs) -> Result<EngineKind> {
    let toggle = |on: bool, off: bool| match (on, off) {
        (true, _) => Toggle::On,
        (_, true) => Toggle::Off,
        _ => Toggle::Auto,
    };
    let kind = a.engine.parse::<EngineKind>()?;
    if let Some((flag, engine)) = engine_only_flag(a).filter(|(_, e)| *e != kind.name()) {
        bail!("{flag} needs --engine {engine} (the {kind} engine has no such option)");
    }
    let kind = match kind {
        EngineKind::Batch(_) => EngineKind::Batch(Batch {
            gso: toggle(a.gso, a.no_gso),
            gro: toggle(a.gro, a.no_gro),
        }),
        EngineKind::Xdp(_) => EngineKind::Xdp(Xdp {
            mode: match a.xdp_mode.as_deref() {
                Some("native") => Some(XdpMode::Native),
                Some("generic") => Some(XdpMode::Generic),
                _ => None,
            },
            zero_copy: match (a.xdp_zerocopy, a.xdp_copy) {
                (true, _) => Some(true),
                (_, true) => Some(false),
                _ => None,
            },
            sleep: a.xdp_sleep,
        }),
        other => other,
    };
    Ok(kind.check()?)
}

/// The first engine-specific option given, if any, and its engine.
pub(super) fn engine_only_flag(a: &args::EngineArgs) -> Option<(&'static str, &'static str)> {
    [
        (a.gso, "--gso", "batch"),
        (a.no_gso, "--no-gso", "batch"),
        (a.gro, "--gro", "batch"),
        (a.no_gro, "--no-gro", "batch"),
        (a.xdp_mode.is_some(), "--xdp-mode", "xdp"),
        (a.xdp_copy, "--xdp-copy", "xdp"),
        (a.xdp_zerocopy, "--xdp-zerocopy", "xdp"),
        (a.xdp_sleep, "--xdp-sleep", "xdp"),
    ]
    .into_iter()
    .find_map(|(set, flag, engine)| set.then_some((flag, engine)))
}

/// A client's `--engine`: `auto` is resolved here, once, for this test by
/// the rule in `engines::auto`, and the note naming the choice and what
/// was skipped goes into the report.
pub(super) fn client_engine(
    a: &args::EngineArgs,
    spec: &TestSpec,
) -> Result<(EngineKind, Option<String>)> {
    let busy_poll = spec.busy_poll || spec.rr.as_ref().is_some_and(|r| r.busy_poll);
    if a.xdp_sleep && busy_poll {
        bail!("--xdp-sleep and --busy-poll ask for opposite waits: give one");
    }
    if a.engine != AUTO {
        return Ok((engine_kind(a)?, None));
    }
    if let Some((flag, engine)) = engine_only_flag(a) {
        bail!("{flag} needs --engine {engine} (auto picks an engine, and its options, per test)");
    }
    let (kind, mut note) = auto::choose_for(spec);
    // Event loops run the engines whose per-socket I/O costs nothing.
    let runs = match spec.flows {
        Some(_) => linerate_engine::event_loop::engine_for(kind, spec.protocol),
        None => kind,
    };
    if runs != kind {
        note.push_str(&format!("; event-loop flows (--flows) run {runs}"));
    }
    Ok((kind, Some(note)))
}

/// `uring:sqpoll` on a host with too few CPUs: each ring's kernel thread
/// polls its submission queue on a CPU of its own, so with fewer CPUs than
/// busy threads they time-share, and the test measures the scheduler
/// (2026-11-23 bench, 2 vCPUs, loopback: crr 71 connections/s against
/// 10,878 with `syscall`, rr p50 8 ms against 55 µs). The user asked for
/// it, so it runs; the report says why its figures look so.
pub(super) fn sqpoll_note(
    engine: EngineKind,
    spec: &TestSpec,
    host: Option<&str>,
    available: usize,
) -> Option<String> {
    if engine != (EngineKind::Uring { sqpoll: true }) {
        return None;
    }
    let rings = spec.connection_count().max(1);
    let local_server = host.map_or(true, |h| {
        h == "localhost" || h.parse::<IpAddr>().is_ok_and(|a| a.is_loopback())
    });
    // The application thread and the kernel's polling thread per ring, on
    // both sides when the server shares this host.
    let busy = 2 * rings * if local_server { 2 } else { 1 };
    (busy > available).then(|| {
        format!(
            "uring:sqpoll: {busy} threads want a CPU each on this host ({rings} ring(s) per side{}, \
             each with its kernel submission-polling thread) and this process may use {available}; \
             they time-share, so the figures measure the scheduler more than the path \
             (run with fewer streams, on a larger host, or with --engine uring)",
            if local_server { ", both sides here" } else { "" }
        )
    })
}
