//! The bulk load streams of an rr test run under load: TCP, client to
//! server, on the engine's stream loops, a thread each beside the flows
//! (flow threads or event loops alike); the client's start when the gate
//! says the loaded phases are near.

use std::net::{Shutdown, TcpStream};
use std::time::Instant;

use linerate_proto::measure::StreamMeasurement;
use linerate_proto::wire::Side;

use crate::cpu;
use crate::engines::EngineKind;
use crate::stream::{Signals, StreamCounter, POLL};
use crate::wait::Wait;
use crate::{socket, tcp, tcp_info};

use super::gate::Gate;
use super::params::RrParams;
use super::side::LoadEnd;

/// The client's load: its signals (stopped when the last phase ends) and
/// the gate that says when the loaded phases are near.
pub(super) type ClientLoad<'a> = (&'a Signals, &'a Gate);

/// A side's load streams as runs for `side::run_threads`: the client's
/// (`client` given) send from the gate's word until stopped, the server's
/// read to end of stream.
pub(super) fn load_runs<'a>(
    load: Vec<(u32, TcpStream)>,
    engine: EngineKind,
    p: &'a RrParams,
    signals: &'a Signals,
    client: Option<ClientLoad<'a>>,
) -> Vec<(u32, impl FnOnce() -> LoadEnd + Send + 'a)> {
    load.into_iter()
        .map(|(id, sock)| {
            let run = move || match client {
                Some((load_signals, gate)) => {
                    client_load(id, sock, engine, p, signals, load_signals, gate)
                }
                None => server_load(id, sock, engine, p, signals),
            };
            (id, run)
        })
        .collect()
}

/// The server's load time: its longest stream's.
pub(super) fn server_elapsed(load: &[StreamMeasurement]) -> u64 {
    load.iter().map(|m| m.elapsed_ns).max().unwrap_or(0)
}

/// A load stream's thread on the client: waits for the loaded phases, then
/// sends until told to stop.
fn client_load(
    id: u32,
    sock: TcpStream,
    engine: EngineKind,
    p: &RrParams,
    signals: &Signals,
    load_signals: &Signals,
    gate: &Gate,
) -> LoadEnd {
    let cpu0 = cpu::thread();
    let counter = StreamCounter::default();
    let mut m = StreamMeasurement {
        id,
        sender: Some(Side::Client),
        ..StreamMeasurement::default()
    };
    if gate.wait(signals, |s| s.load) {
        let buf = vec![0u8; (p.plan.load_len as usize).max(1)];
        let t0 = Instant::now();
        let end = tcp::send(
            engine,
            &sock,
            &buf,
            None,
            &counter,
            load_signals,
            Wait::Block,
        );
        m.elapsed_ns = t0.elapsed().as_nanos() as u64;
        m.calls = end.calls;
        m.error = end.result.err().map(|e| e.to_string());
        m.tcp = tcp_info::read(&sock);
    } else {
        // No loaded phase ran: end the stream so the server's reader ends.
        let _ = sock.shutdown(Shutdown::Write);
    }
    m.bytes = counter.get();
    (m, cpu::thread().saturating_sub(cpu0))
}

/// A load stream's thread on the server: reads until end of stream, waiting
/// without an idle limit for the load to begin (the unloaded phases come
/// first and may take long).
fn server_load(
    id: u32,
    sock: TcpStream,
    engine: EngineKind,
    p: &RrParams,
    signals: &Signals,
) -> LoadEnd {
    let cpu0 = cpu::thread();
    let counter = StreamCounter::default();
    let mut m = StreamMeasurement {
        id,
        sender: Some(Side::Client),
        ..StreamMeasurement::default()
    };
    loop {
        if signals.aborted() {
            m.error = Some("aborted".into());
            return (m, cpu::thread().saturating_sub(cpu0));
        }
        match socket::wait_readable(&sock, POLL) {
            Ok(true) => break,
            Ok(false) => {}
            Err(e) => {
                m.error = Some(format!("poll: {e}"));
                return (m, cpu::thread().saturating_sub(cpu0));
            }
        }
    }
    let mut buf = vec![0u8; (p.plan.load_len as usize).max(1)];
    let t0 = Instant::now();
    let end = tcp::recv(
        engine,
        &sock,
        &mut buf,
        &counter,
        signals,
        Wait::Block,
        tcp::RecvOpts::default(),
    );
    m.elapsed_ns = t0.elapsed().as_nanos() as u64;
    m.calls = end.calls;
    m.bytes = counter.get();
    m.error = end.result.err().map(|e| e.to_string());
    (m, cpu::thread().saturating_sub(cpu0))
}
