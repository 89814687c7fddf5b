//! The bulk load streams of an rr test run under load: TCP, client to
//! server, on the engine's stream loops, a thread each beside the flows
//! (flow threads or event loops alike); the client's start when the gate
//! says the loaded phases are near. Each registers with the side's
//! [`Watch`] while it moves data, which holds it to the idle limit as it
//! holds the flows, and stops the side when it fails. A load thread owns
//! its connection as a TCP endpoint ([`TcpEndpoint`]), generic and
//! monomorphised like the stream loops it runs.

use std::net::Shutdown;
use std::time::Instant;

use linerate_proto::measure::StreamMeasurement;
use linerate_proto::wire::Side;

use crate::cpu;
use crate::engines::{EngineKind, Interest, TcpEndpoint};
use crate::stream::{Signals, StreamCounter, POLL};
use crate::tcp;
use crate::wait::Wait;

use super::gate::Gate;
use super::params::RrParams;
use super::side::LoadEnd;
use super::watch::Watch;

/// The client's load: its signals (stopped when the last phase ends) and
/// the gate that says when the loaded phases are near.
pub(super) type ClientLoad<'a> = (&'a Signals, &'a Gate);

/// The ids of a side's load streams, in the order of its load runs (the
/// side's [`Watch`] is made with them).
pub(super) fn load_ids<S>(load: &[(u32, S)]) -> Vec<u32> {
    load.iter().map(|(id, _)| *id).collect()
}

/// A side's load streams as runs for `side::run_threads`: the client's
/// (`client` given) send from the gate's word until stopped, the server's
/// read to end of stream; each watched by `watch` (made with
/// [`load_ids`]) while it runs.
pub(super) fn load_runs<'a, S: TcpEndpoint + Send + 'a>(
    load: Vec<(u32, S)>,
    engine: EngineKind,
    p: &'a RrParams,
    (signals, watch): (&'a Signals, &'a Watch),
    client: Option<ClientLoad<'a>>,
) -> Vec<(u32, impl FnOnce() -> LoadEnd + Send + 'a)> {
    load.into_iter()
        .enumerate()
        .map(|(i, (id, sock))| {
            let run = move || {
                let cpu0 = cpu::thread();
                let own = StreamCounter::default();
                let counter = watch.load_bytes(i).unwrap_or(&own);
                let l = Load {
                    id,
                    engine,
                    p,
                    counter,
                    started: &|| watch.load_started(i, &sock),
                };
                let mut m = match client {
                    Some((load_signals, gate)) => {
                        client_load(&l, &sock, signals, load_signals, gate)
                    }
                    None => server_load(&l, &sock, signals),
                };
                m.bytes = counter.get();
                watch.load_ended(i, m.error.as_deref(), signals);
                // Stopped for a stall: that, not the shutdown's error.
                m.error = watch.load_error(id).or(m.error);
                (m, cpu::thread().saturating_sub(cpu0))
            };
            (id, run)
        })
        .collect()
}

/// One load stream: its id, how it moves data, where it counts, and what
/// it calls as it starts moving data.
struct Load<'a> {
    id: u32,
    engine: EngineKind,
    p: &'a RrParams,
    counter: &'a StreamCounter,
    started: &'a dyn Fn(),
}

/// The server's load time: its longest stream's.
pub(super) fn server_elapsed(load: &[StreamMeasurement]) -> u64 {
    load.iter().map(|m| m.elapsed_ns).max().unwrap_or(0)
}

/// A load stream's thread on the client: waits for the loaded phases, then
/// sends until told to stop.
fn client_load(
    l: &Load<'_>,
    sock: &impl TcpEndpoint,
    signals: &Signals,
    load_signals: &Signals,
    gate: &Gate,
) -> StreamMeasurement {
    let mut m = StreamMeasurement {
        id: l.id,
        sender: Some(Side::Client),
        ..StreamMeasurement::default()
    };
    if gate.wait(signals, |s| s.load) {
        let buf = vec![0u8; (l.p.plan.load_len as usize).max(1)];
        (l.started)();
        let t0 = Instant::now();
        let end = tcp::send(
            l.engine,
            sock,
            buf,
            None,
            l.counter,
            load_signals,
            Wait::Block,
        );
        m.elapsed_ns = t0.elapsed().as_nanos() as u64;
        m.calls = end.calls;
        m.error = end.result.err().map(|e| e.to_string());
        m.tcp = sock.tcp_info();
    } else {
        // No loaded phase ran: end the stream so the server's reader ends.
        let _ = sock.shutdown(Shutdown::Write);
    }
    m
}

/// A load stream's thread on the server: reads until end of stream, waiting
/// without an idle limit for the load to begin (the unloaded phases come
/// first and may take long).
fn server_load(l: &Load<'_>, sock: &impl TcpEndpoint, signals: &Signals) -> StreamMeasurement {
    let mut m = StreamMeasurement {
        id: l.id,
        sender: Some(Side::Client),
        ..StreamMeasurement::default()
    };
    loop {
        if signals.aborted() {
            m.error = Some("aborted".into());
            return m;
        }
        match sock.wait_ready(Interest::Recv, POLL) {
            Ok(true) => break,
            Ok(false) => {}
            Err(e) => {
                m.error = Some(format!("poll: {e}"));
                return m;
            }
        }
    }
    let mut buf = vec![0u8; (l.p.plan.load_len as usize).max(1)];
    (l.started)();
    let t0 = Instant::now();
    let end = tcp::recv(
        l.engine,
        sock,
        &mut buf,
        l.counter,
        signals,
        Wait::Block,
        tcp::RecvOpts::default(),
    );
    m.elapsed_ns = t0.elapsed().as_nanos() as u64;
    m.calls = end.calls;
    m.error = end.result.err().map(|e| e.to_string());
    m
}
