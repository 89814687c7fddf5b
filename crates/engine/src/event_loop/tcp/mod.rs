//! One loop thread's TCP stream flows: senders write their buffer until
//! stopped or their byte count is written, then shut down their write
//! side; receivers read to end of stream — the same ends as the
//! thread-per-stream loops ([`crate::tcp`]), over non-blocking sockets in
//! one edge-triggered epoll set. One send and one receive buffer per
//! thread, shared by its flows (the senders never look at what they
//! write, the receivers never at what they read). With `--engine uring`
//! the same flows run on a completion loop instead ([`ring`](super::ring): multishot
//! receives into the thread's provided buffers, queued sends), whose
//! senders' buffers are bounded when many flows need it ([`sndbuf`]).

mod epoll;
mod ring;
pub mod sndbuf;

pub use epoll::{engine_for, LoopParams, TcpFlow};

use crate::engines::{with_engine, TcpEndpoint};
use crate::stream::Signals;
use epoll::run_with;
use linerate_proto::measure::StreamMeasurement;

/// Runs `flows` to their ends on this thread; returns each flow's index
/// and measurement (bytes, calls, elapsed, TCP_INFO of senders, error).
pub fn run<S: TcpEndpoint>(
    params: &LoopParams,
    flows: Vec<TcpFlow<S>>,
    signals: &Signals,
) -> Vec<(usize, StreamMeasurement)> {
    if let Some(engine) = super::ring::uring(params.engine) {
        return ring::run(engine, params, flows, signals);
    }
    with_engine!(engine_for(params.engine), e => run_with(e, params, flows, signals))
}
