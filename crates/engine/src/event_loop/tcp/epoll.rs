//! The epoll side of a loop thread's TCP stream flows: each flow's state,
//! its bounded turn on the readiness loop, and its measurement at the end
//! (shared with the completion loop, [`super::ring`]). A flow owns its
//! connection as a TCP endpoint ([`TcpEndpoint`]): the loops are generic
//! over the endpoint type and monomorphised, as the engines' TCP calls are.

use crate::engines::{Engine, EngineKind, TcpEndpoint, TcpRx, TcpTx, Wait};
use crate::event_loop::driver::{drive, Flow, LoopFlow, Turn};
use crate::stream::{is_timeout, map_err, Signals, StreamCounter};
use crate::EngineError;
use linerate_proto::measure::{Role, StreamMeasurement};
use linerate_proto::wire::Side;
use std::net::Shutdown;
use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::time::Instant;

/// Calls one ready flow gets per turn before the next ready flow's turn:
/// enough to fill a socket buffer in a few writes, few enough that a
/// thousand flows on a thread all move within a millisecond or so.
const CALLS_PER_TURN: u32 = 4;

/// One flow of a loop: an attached data connection (endpoint `S`: the
/// kernel's `TcpStream` for every engine here) and what this side does
/// on it.
#[derive(Debug)]
pub struct TcpFlow<S> {
    /// The flow's position in its side's list (the runner's index).
    pub index: usize,
    pub id: u32,
    pub role: Role,
    /// Which side sends on it.
    pub sender: Side,
    /// Senders of a byte-limited test: bytes to send.
    pub limit: Option<u64>,
    pub sock: S,
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
    /// `SO_SNDBUF` for every sending flow of the completion loop
    /// ([`super::sndbuf`]); the epoll loop leaves its senders autotuned.
    pub sndbuf_bound: Option<u32>,
}

/// The engine an epoll loop runs for a side asked to use `kind`: the
/// engines whose per-socket I/O objects cost nothing beyond the socket
/// (plain calls, `batch`) run as asked; the others keep per-socket rings
/// or completion queues, so a loop of thousands of flows runs `syscall`
/// (`uring` stream flows run the completion loop instead, [`ring`](crate::event_loop::ring); rr
/// flows have none).
pub fn engine_for(kind: EngineKind) -> EngineKind {
    match kind {
        EngineKind::Syscall | EngineKind::Batch(_) => kind,
        _ => EngineKind::Syscall,
    }
}

/// A flow's I/O object and progress.
pub(super) struct State<E: Engine, S> {
    pub(super) flow: TcpFlow<S>,
    /// `None` when it could not be made (the flow has ended).
    pub(super) io: Option<Io<E>>,
    pub(super) remaining: u64,
    pub(super) calls: u64,
    pub(super) end: Option<End>,
}

pub(super) enum Io<E: Engine> {
    Tx(E::TcpTx),
    Rx(E::TcpRx),
}

/// How a flow ended, and when (ns since Start).
pub(super) struct End {
    pub(super) result: Result<(), EngineError>,
    pub(super) at_ns: u64,
}

pub(super) fn run_with<E: Engine, S: TcpEndpoint>(
    engine: E,
    params: &LoopParams,
    flows: Vec<TcpFlow<S>>,
    signals: &Signals,
) -> Vec<(usize, StreamMeasurement)> {
    let tx_buf = vec![0u8; params.len];
    let rx_buf = vec![0u8; params.len];
    let mut states = open_all(engine, flows, &tx_buf, params.skip_rx_copy);
    let mut shared = Shared {
        tx_buf,
        rx_buf,
        start: params.start,
    };
    drive(&mut states, &mut shared, signals);
    measurements(states, params.start, signals)
}

/// Every flow's I/O object and progress.
pub(super) fn open_all<E: Engine, S: TcpEndpoint>(
    engine: E,
    flows: Vec<TcpFlow<S>>,
    tx_buf: &[u8],
    skip_rx_copy: bool,
) -> Vec<State<E, S>> {
    let mut states: Vec<State<E, S>> = Vec::with_capacity(flows.len());
    for flow in flows {
        let (io, end) = match open(engine, &flow, tx_buf, skip_rx_copy) {
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
            end,
            flow,
        });
    }
    states
}

/// A loop's buffers and clock zero, shared by its flows.
pub(super) struct Shared {
    pub(super) tx_buf: Vec<u8>,
    pub(super) rx_buf: Vec<u8>,
    pub(super) start: Instant,
}

impl Shared {
    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }
}

/// A flow on either loop (this one, and the ring's, whose flows keep this
/// state).
impl<E: Engine, S: TcpEndpoint> Flow for State<E, S> {
    fn ended(&self) -> bool {
        self.end.is_some()
    }

    fn fail(&mut self, e: EngineError) {
        self.end = Some(End {
            result: Err(e),
            at_ns: 0,
        });
    }

    fn progress(&self) -> u64 {
        self.flow.counter.get()
    }
}

impl<E: Engine, S: TcpEndpoint> LoopFlow for State<E, S> {
    type Shared = Shared;

    fn sock(&self) -> Option<BorrowedFd<'_>> {
        Some(self.flow.sock.as_fd())
    }

    fn turn(&mut self, sh: &mut Shared) -> Turn {
        match turn(self, &sh.tx_buf, &mut sh.rx_buf) {
            Ok(t) => t,
            Err(result) => {
                self.end = Some(End {
                    result,
                    at_ns: sh.now_ns(),
                });
                Turn::Done
            }
        }
    }

    /// Time is up: a sender finishes now, wherever it was.
    fn stop(&mut self, sh: &mut Shared) -> bool {
        let Some(Io::Tx(tx)) = &mut self.io else {
            return false;
        };
        let result = finish(tx, &self.flow.sock);
        self.end = Some(End {
            result,
            at_ns: sh.now_ns(),
        });
        true
    }
}

/// The flow's engine I/O object, made once.
pub(super) fn open<E: Engine, S: TcpEndpoint>(
    engine: E,
    flow: &TcpFlow<S>,
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

/// Up to [`CALLS_PER_TURN`] calls on one ready flow; `Err` holds how the
/// flow ended.
pub(super) fn turn<E: Engine, S: TcpEndpoint>(
    s: &mut State<E, S>,
    tx_buf: &[u8],
    rx_buf: &mut [u8],
) -> Result<Turn, Result<(), EngineError>> {
    let sock = &s.flow.sock;
    let Some(io) = &mut s.io else {
        return Err(Err(EngineError::Aborted));
    };
    for _ in 0..CALLS_PER_TURN {
        let r = match io {
            Io::Tx(tx) => {
                if s.remaining == 0 {
                    return Err(finish(tx, sock));
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
                return Err(match io {
                    Io::Rx(_) => Ok(()),
                    Io::Tx(_) => Err(EngineError::PeerReset("write returned 0".into())),
                })
            }
            Ok(k) => {
                s.flow.counter.add(k as u64);
                if matches!(io, Io::Tx(_)) {
                    s.remaining -= k as u64;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if is_timeout(&e) => return Ok(Turn::Wait),
            Err(e) => {
                let what = if matches!(io, Io::Tx(_)) {
                    "write"
                } else {
                    "read"
                };
                return Err(Err(map_err(what, e)));
            }
        }
    }
    Ok(Turn::Again)
}

/// A sender's clean end: completes what the engine holds, then shuts down
/// the write side so the receiver sees end of stream.
pub(super) fn finish<T: TcpTx>(tx: &mut T, sock: &impl TcpEndpoint) -> Result<(), EngineError> {
    tx.finish(sock)
        .and_then(|()| sock.shutdown(Shutdown::Write))
        .map_err(|e| map_err("shutdown", e))
}

/// Every flow's measurement: a flow the loop left running (abort) ends
/// with "aborted". A sender's TCP_INFO is read once its data is
/// acknowledged ([`crate::tcp::settle`]).
pub(super) fn measurements<E: Engine, S: TcpEndpoint>(
    states: Vec<State<E, S>>,
    start: Instant,
    signals: &Signals,
) -> Vec<(usize, StreamMeasurement)> {
    let now = start.elapsed().as_nanos() as u64;
    let senders: Vec<&S> = (states.iter())
        .filter(|s| s.flow.role == Role::Sender)
        .map(|s| &s.flow.sock)
        .collect();
    crate::tcp::settle(&senders, signals);
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
                    .then(|| crate::tcp::end_info(&s.flow.sock))
                    .flatten(),
                error,
                ..StreamMeasurement::default()
            };
            (s.flow.index, m)
        })
        .collect()
}
