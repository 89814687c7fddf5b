//! One loop thread's TCP stream flows: senders write their buffer until
//! stopped or their byte count is written, then shut down their write
//! side; receivers read to end of stream — the same ends as the
//! thread-per-stream loops ([`crate::tcp`]), over non-blocking sockets in
//! one edge-triggered epoll set. One send and one receive buffer per
//! thread, shared by its flows (the senders never look at what they
//! write, the receivers never at what they read).

use std::collections::VecDeque;
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use linerate_proto::measure::{Role, StreamMeasurement};
use linerate_proto::wire::Side;
use rustix::event::epoll;

use crate::engines::{with_engine, Engine, EngineKind, TcpRx, TcpTx, Wait};
use crate::stream::{is_timeout, map_err, Signals, StreamCounter, IDLE_LIMIT};
use crate::{tcp_info, EngineError};

/// Calls one ready flow gets per turn before the next ready flow's turn:
/// enough to fill a socket buffer in a few writes, few enough that a
/// thousand flows on a thread all move within a millisecond or so.
const CALLS_PER_TURN: u32 = 4;
/// Longest epoll wait: how often an idle loop looks at its signals.
const WAIT: Duration = Duration::from_millis(20);
/// Events taken per `epoll_wait`.
const EVENTS: usize = 256;

/// One flow of a loop: an attached data connection and what this side
/// does on it.
#[derive(Debug)]
pub struct TcpFlow {
    /// The flow's position in its side's list (the runner's index).
    pub index: usize,
    pub id: u32,
    pub role: Role,
    /// Which side sends on it.
    pub sender: Side,
    /// Senders of a byte-limited test: bytes to send.
    pub limit: Option<u64>,
    pub sock: TcpStream,
    pub counter: Arc<StreamCounter>,
}

/// What every loop of a side shares.
#[derive(Debug, Clone, Copy)]
pub struct LoopParams {
    pub engine: EngineKind,
    /// Bytes per read/write call.
    pub len: usize,
    /// Receivers consume with `MSG_TRUNC` (`--skip-rx-copy`).
    pub skip_rx_copy: bool,
    /// The test's time zero.
    pub start: Instant,
}

/// The engine a loop runs for a side asked to use `kind`: the engines
/// whose per-socket I/O objects cost nothing beyond the socket (plain
/// calls, `batch`) run as asked; the others keep per-socket rings or
/// completion queues, so a loop of thousands of flows runs `syscall`
/// (io_uring multishot loops are a later step).
pub fn engine_for(kind: EngineKind) -> EngineKind {
    match kind {
        EngineKind::Syscall | EngineKind::Batch(_) => kind,
        _ => EngineKind::Syscall,
    }
}

/// Runs `flows` to their ends on this thread; returns each flow's index
/// and measurement (bytes, calls, elapsed, TCP_INFO of senders, error).
pub fn run(
    params: &LoopParams,
    flows: Vec<TcpFlow>,
    signals: &Signals,
) -> Vec<(usize, StreamMeasurement)> {
    with_engine!(engine_for(params.engine), e => run_with(e, params, flows, signals))
}

/// A flow's I/O object and progress.
struct State<E: Engine> {
    flow: TcpFlow,
    /// `None` when it could not be made (the flow has ended).
    io: Option<Io<E>>,
    remaining: u64,
    calls: u64,
    /// In the ready queue.
    queued: bool,
    end: Option<End>,
}

enum Io<E: Engine> {
    Tx(E::TcpTx),
    Rx(E::TcpRx),
}

/// How a flow ended, and when (ns since Start).
struct End {
    result: Result<(), EngineError>,
    at_ns: u64,
}

/// What a turn of a flow came to.
enum Turn {
    /// Still ready: back in the queue.
    Again,
    /// Would block: wait for the next edge.
    Wait,
    Done(Result<(), EngineError>),
}

fn run_with<E: Engine>(
    engine: E,
    params: &LoopParams,
    flows: Vec<TcpFlow>,
    signals: &Signals,
) -> Vec<(usize, StreamMeasurement)> {
    let tx_buf = vec![0u8; params.len];
    let mut rx_buf = vec![0u8; params.len];
    let mut states: Vec<State<E>> = Vec::with_capacity(flows.len());
    for flow in flows {
        let (io, end) = match open(engine, &flow, &tx_buf, params.skip_rx_copy) {
            Ok(io) => (Some(io), None),
            Err(e) => (
                None,
                Some(End {
                    result: Err(e),
                    at_ns: 0,
                }),
            ),
        };
        states.push(State {
            io,
            remaining: flow.limit.unwrap_or(u64::MAX),
            calls: 0,
            queued: false,
            end,
            flow,
        });
    }
    let ep = match register(&states) {
        Ok(ep) => ep,
        Err(e) => {
            for s in states.iter_mut().filter(|s| s.end.is_none()) {
                s.end = Some(End {
                    result: Err(EngineError::io(
                        "adding a flow to its epoll set",
                        std::io::Error::new(e.kind(), e.to_string()),
                    )),
                    at_ns: 0,
                });
            }
            return measurements(states, params.start, signals);
        }
    };
    let now_ns = || params.start.elapsed().as_nanos() as u64;
    let mut open_flows = states.iter().filter(|s| s.end.is_none()).count();
    // Every flow starts ready: its first call finds out.
    let mut ready: VecDeque<usize> = (0..states.len())
        .filter(|&i| states[i].end.is_none())
        .collect();
    for &i in &ready {
        states[i].queued = true;
    }
    let mut events = Vec::with_capacity(EVENTS);
    let mut stopped = false;
    let mut idle_since: Option<Instant> = None;
    while open_flows > 0 {
        if signals.aborted() {
            break;
        }
        if signals.stopping() && !stopped {
            stopped = true;
            open_flows -= stop_senders(&mut states, now_ns());
        }
        let turns = ready.len();
        let mut progressed = false;
        for _ in 0..turns {
            // Looked at before every flow's turn: a turn over thousands of
            // flows takes long enough that the end of time must not wait
            // for it.
            if signals.aborted() {
                break;
            }
            if signals.stopping() && !stopped {
                stopped = true;
                open_flows -= stop_senders(&mut states, now_ns());
            }
            let Some(i) = ready.pop_front() else { break };
            let s = &mut states[i];
            s.queued = false;
            if s.end.is_some() {
                continue;
            }
            let before = s.flow.counter.get();
            match turn(s, &tx_buf, &mut rx_buf) {
                Turn::Again => {
                    s.queued = true;
                    ready.push_back(i);
                }
                Turn::Wait => {}
                Turn::Done(result) => {
                    s.end = Some(End {
                        result,
                        at_ns: now_ns(),
                    });
                    open_flows -= 1;
                }
            }
            progressed |= s.flow.counter.get() != before;
        }
        // Flows still ready only need new edges; otherwise sleep for one.
        let timeout = if ready.is_empty() {
            Some(WAIT)
        } else {
            Some(Duration::ZERO)
        };
        events.clear();
        let got = wait(&ep, &mut events, timeout);
        for ev in events.iter() {
            let i = ev.data.u64() as usize;
            if let Some(s) = states.get_mut(i) {
                if !s.queued && s.end.is_none() {
                    s.queued = true;
                    ready.push_back(i);
                }
            }
        }
        if progressed || got > 0 {
            idle_since = None;
        } else if ready.is_empty() {
            // Nothing moved and nothing woke: the peer may have stalled.
            if idle_since.get_or_insert_with(Instant::now).elapsed() >= IDLE_LIMIT {
                for s in states.iter_mut().filter(|s| s.end.is_none()) {
                    s.end = Some(End {
                        result: Err(EngineError::Stalled(IDLE_LIMIT.as_secs())),
                        at_ns: now_ns(),
                    });
                }
                break;
            }
        }
    }
    measurements(states, params.start, signals)
}

/// The flow's engine I/O object, made once.
fn open<E: Engine>(
    engine: E,
    flow: &TcpFlow,
    tx_buf: &[u8],
    skip_rx_copy: bool,
) -> Result<Io<E>, EngineError> {
    flow.sock
        .set_nonblocking(true)
        .map_err(|e| EngineError::io("making a flow's socket non-blocking", e))?;
    Ok(match flow.role {
        Role::Sender => Io::Tx(engine.tcp_tx_stream(&flow.sock, tx_buf)?),
        Role::Receiver => Io::Rx(engine.tcp_rx_stream(&flow.sock, skip_rx_copy)?),
    })
}

/// One epoll set with every flow's socket, edge-triggered, the flow's
/// position as its data.
fn register<E: Engine>(states: &[State<E>]) -> std::io::Result<std::os::fd::OwnedFd> {
    let ep = epoll::create(epoll::CreateFlags::CLOEXEC)?;
    let flags = epoll::EventFlags::IN
        | epoll::EventFlags::OUT
        | epoll::EventFlags::RDHUP
        | epoll::EventFlags::ET;
    for (i, s) in states.iter().enumerate() {
        epoll::add(
            &ep,
            &s.flow.sock,
            epoll::EventData::new_u64(i as u64),
            flags,
        )?;
    }
    Ok(ep)
}

/// Waits up to `timeout` for readiness edges; returns how many arrived (an
/// interrupted or failed wait counts as none: the loop looks again).
fn wait(
    ep: &std::os::fd::OwnedFd,
    events: &mut Vec<epoll::Event>,
    timeout: Option<Duration>,
) -> usize {
    let ts = timeout.map(|d| rustix::event::Timespec {
        tv_sec: d.as_secs() as _,
        tv_nsec: d.subsec_nanos() as _,
    });
    epoll::wait(ep, rustix::buffer::spare_capacity(events), ts.as_ref()).unwrap_or_default()
}

/// Up to [`CALLS_PER_TURN`] calls on one ready flow.
fn turn<E: Engine>(s: &mut State<E>, tx_buf: &[u8], rx_buf: &mut [u8]) -> Turn {
    let sock = &s.flow.sock;
    let Some(io) = &mut s.io else {
        return Turn::Done(Err(EngineError::Aborted));
    };
    for _ in 0..CALLS_PER_TURN {
        let r = match io {
            Io::Tx(tx) => {
                if s.remaining == 0 {
                    return Turn::Done(finish(tx, sock));
                }
                let n = tx_buf
                    .len()
                    .min(usize::try_from(s.remaining).unwrap_or(usize::MAX));
                let times = usize::try_from(s.remaining / tx_buf.len().max(1) as u64)
                    .unwrap_or(usize::MAX)
                    .max(1);
                tx.write_repeated(sock, &tx_buf[..n], times, Wait::DontWait)
            }
            Io::Rx(rx) => rx.read(sock, rx_buf, Wait::DontWait),
        };
        s.calls += 1;
        match r {
            Ok(0) => {
                return match io {
                    Io::Rx(_) => Turn::Done(Ok(())),
                    Io::Tx(_) => Turn::Done(Err(EngineError::PeerReset("write returned 0".into()))),
                }
            }
            Ok(k) => {
                s.flow.counter.add(k as u64);
                if matches!(io, Io::Tx(_)) {
                    s.remaining -= k as u64;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if is_timeout(&e) => return Turn::Wait,
            Err(e) => {
                let what = if matches!(io, Io::Tx(_)) {
                    "write"
                } else {
                    "read"
                };
                return Turn::Done(Err(map_err(what, e)));
            }
        }
    }
    Turn::Again
}

/// Time is up: every sender still running finishes now, wherever it was;
/// returns how many.
fn stop_senders<E: Engine>(states: &mut [State<E>], now_ns: u64) -> usize {
    let mut n = 0;
    for s in states.iter_mut().filter(|s| s.end.is_none()) {
        if let Some(Io::Tx(tx)) = &mut s.io {
            let result = finish(tx, &s.flow.sock);
            s.end = Some(End {
                result,
                at_ns: now_ns,
            });
            n += 1;
        }
    }
    n
}

/// A sender's clean end: completes what the engine holds, then shuts down
/// the write side so the receiver sees end of stream.
fn finish<T: TcpTx>(tx: &mut T, sock: &TcpStream) -> Result<(), EngineError> {
    tx.finish(sock)
        .and_then(|()| sock.shutdown(Shutdown::Write))
        .map_err(|e| map_err("shutdown", e))
}

/// Every flow's measurement: a flow the loop left running (abort) ends
/// with "aborted".
fn measurements<E: Engine>(
    states: Vec<State<E>>,
    start: Instant,
    signals: &Signals,
) -> Vec<(usize, StreamMeasurement)> {
    let now = start.elapsed().as_nanos() as u64;
    states
        .into_iter()
        .map(|s| {
            let (error, at_ns) = match s.end {
                Some(End {
                    result: Ok(()),
                    at_ns,
                }) if !signals.aborted() => (None, at_ns),
                Some(End {
                    result: Err(e),
                    at_ns,
                }) => (Some(e.to_string()), at_ns),
                _ => (Some("aborted".to_string()), now),
            };
            let m = StreamMeasurement {
                id: s.flow.id,
                sender: Some(s.flow.sender),
                bytes: s.flow.counter.get(),
                elapsed_ns: if at_ns == 0 { now } else { at_ns },
                calls: s.calls,
                tcp: (s.flow.role == Role::Sender)
                    .then(|| tcp_info::read(&s.flow.sock))
                    .flatten(),
                error,
                ..StreamMeasurement::default()
            };
            (s.flow.index, m)
        })
        .collect()
}
