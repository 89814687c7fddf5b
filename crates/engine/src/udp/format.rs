//! What varies between UDP streams of different wire formats: how the
//! sender frames each datagram and how the receiver counts them.
//! linerate's own streams are [`Native`]; iperf3's
//! (`linerate_iperf3::streams::Iperf3Streams`) live in the iperf3 crate,
//! which builds its receive loop on the same shared loop
//! ([`RecvStream::run`]). The runner is generic
//! over the format ([`crate::runner::start_with`]): monomorphised, nothing
//! dispatched per datagram or per batch.

use std::fmt::Debug;
use std::time::Instant;

use linerate_proto::measure::UdpRecv;
use linerate_proto::udp_sender::{DatagramFormat, Linerate};

use super::recv::RecvStream;
use crate::engines::Engine;
use crate::stream::StreamEnd;

/// A UDP stream's wire format, as the runner's stream threads use it.
pub trait StreamFormat: Copy + Debug + Send + Sync + 'static {
    /// The sender core's datagram format.
    type Datagram: DatagramFormat;

    /// The sender's format for a test whose time zero is `start`.
    fn sender(self, start: Instant) -> Self::Datagram;

    /// Receives the stream until the drain deadline (then reads what is
    /// queued) or abort, counting bytes and datagrams in its counters as
    /// it goes ([`RecvStream::run`]).
    fn recv<E: Engine>(self, s: RecvStream<'_, E>) -> (UdpRecv, StreamEnd);
}

/// linerate's own datagrams ([`Linerate`]) and receive loop ([`super::recv`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Native;

impl StreamFormat for Native {
    type Datagram = Linerate;

    fn sender(self, _start: Instant) -> Linerate {
        Linerate
    }

    fn recv<E: Engine>(self, s: RecvStream<'_, E>) -> (UdpRecv, StreamEnd) {
        super::recv(s)
    }
}
