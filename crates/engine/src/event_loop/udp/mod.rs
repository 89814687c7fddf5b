//! One loop thread's UDP stream flows (`udp --flows N --threads T`): each
//! flow keeps the sans-IO cores a stream thread has — a sender's
//! [`UdpSender`](linerate_proto::udp_sender::UdpSender) (pacer, its own 64-bit sequence numbers), a receiver's
//! [`UdpReceiver`](linerate_proto::udp_receiver::UdpReceiver) (the flow's own loss, reordering and duplicates) — so
//! every flow's loss is exact; the loop only moves datagrams, without
//! blocking. A paced sender waits for its next due time on the loop's
//! timer heap ([`Turn::Until`](super::Turn::Until)); a receiver reads until its side's drain
//! deadline, then reads what is queued and ends, as a stream thread does
//! ([`crate::udp::recv`]).
//!
//! Flows beat as stream threads do ([`linerate_proto::data_beat`]): a
//! receiver sends its sender a beat each interval while data arrives, a
//! sender looks for beats on its turns at most each peek interval (a
//! beat's arrival is an edge that gives a waiting sender a turn).
//!
//! The flows run the `syscall` engine (one datagram per call): `batch`
//! keeps arrays of slots per socket, which thousands of flows would
//! multiply. One receive buffer per thread, shared by its receivers.
//! With `--engine uring` the same flows run on a completion loop instead
//! ([`ring`](super::ring): multishot receives into the thread's provided buffers,
//! queued sends).

mod epoll;
mod ring;

pub use epoll::{UdpFlow, UdpLoopParams, ENGINE};

use std::sync::Arc;

use crate::event_loop::driver::drive;
use crate::stream::Signals;
use epoll::{open_all, report_rest, Shared};
use linerate_proto::measure::StreamMeasurement;

/// Runs `flows` to their ends on this thread, handing each flow's index
/// and measurement (datagrams, the sender's or receiver's UDP figures,
/// calls, elapsed, error) to `ended` as soon as it ends: a side's
/// receivers drain only once the peer's senders have ended, and in a
/// bidirectional test both sides' loops hold both.
pub fn run(
    params: &UdpLoopParams,
    flows: Vec<UdpFlow>,
    signals: &Arc<Signals>,
    ended: Box<dyn FnMut(usize, StreamMeasurement)>,
) {
    // Due times are met within a few µs, not the default 50 µs slack.
    crate::udp::tighten_timer_slack();
    if let Some(engine) = super::ring::uring(params.engine) {
        return ring::run(engine, params, flows, signals, ended);
    }
    let mut slots = None;
    let (mut states, _) = open_all(flows, params, None, &mut slots);
    let mut shared = Shared::new(params, slots, signals, ended);
    drive(&mut states, &mut shared, signals);
    report_rest(&mut states, &mut shared, params);
}
