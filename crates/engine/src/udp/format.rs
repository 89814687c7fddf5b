//! What varies between UDP streams of different wire formats: how the
//! sender frames each datagram and how the receiver counts them.
//! linerate's own streams are [`Native`]; iperf3's
//! (`linerate_iperf3::streams::Iperf3Streams`) live in the iperf3 crate,
//! which builds its receive loop from this module's building blocks
//! ([`super::stream_rx`], [`super::recv_batches`]). The runner is generic
//! over the format ([`crate::runner::start_with`]): monomorphised, nothing
//! dispatched per datagram or per batch.

use std::fmt::Debug;
use std::time::Instant;

use linerate_proto::measure::UdpRecv;
use linerate_proto::udp_sender::{DatagramFormat, Linerate};

use super::{RecvJob, UdpCounters};
use crate::engines::Engine;
use crate::stream::{Signals, StreamCounter, StreamEnd};
use crate::wait::Wait;

/// A UDP stream's wire format, as the runner's stream threads use it.
pub trait StreamFormat: Copy + Debug + Send + Sync + 'static {
    /// The sender core's datagram format.
    type Datagram: DatagramFormat;

    /// The sender's format for a test whose time zero is `start`.
    fn sender(self, start: Instant) -> Self::Datagram;

    /// Receives the stream on `ep` with `engine` until the drain deadline
    /// (then reads what is queued) or abort, counting bytes in `bytes`
    /// and datagrams in `live` as it goes.
    #[allow(clippy::too_many_arguments)]
    fn recv<E: Engine>(
        self,
        engine: E,
        ep: &E::UdpEndpoint,
        job: &RecvJob,
        bytes: &StreamCounter,
        live: &UdpCounters,
        signals: &Signals,
        wait: Wait,
    ) -> (UdpRecv, StreamEnd);
}

/// linerate's own datagrams ([`Linerate`]) and receive loop ([`super::recv`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Native;

impl StreamFormat for Native {
    type Datagram = Linerate;

    fn sender(self, _start: Instant) -> Linerate {
        Linerate
    }

    fn recv<E: Engine>(
        self,
        engine: E,
        ep: &E::UdpEndpoint,
        job: &RecvJob,
        bytes: &StreamCounter,
        live: &UdpCounters,
        signals: &Signals,
        wait: Wait,
    ) -> (UdpRecv, StreamEnd) {
        super::recv(engine, ep, job, bytes, live, signals, wait)
    }
}
