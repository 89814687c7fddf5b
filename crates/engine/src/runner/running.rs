//! What a side's sampler holds while its streams run: each stream's
//! counter, TCP_INFO probe, UDP live counters, thread and end. The stream
//! threads (`sampler`) and the event loops (`loops`) both fill one in, so
//! it sits below both.

use std::net::TcpStream;
use std::sync::Arc;
use std::thread::JoinHandle;

use linerate_proto::measure::StreamMeasurement;

use super::cpu_watch::{CpuWatch, Watched};
use crate::stream::StreamCounter;
use crate::udp::UdpCounters;

/// The sampler's hold on its streams while they run.
pub(super) struct Running {
    pub(super) counters: Vec<Arc<StreamCounter>>,
    /// Duplicates of the TCP sending sockets, to read TCP_INFO each interval.
    pub(super) probes: Vec<Option<TcpStream>>,
    pub(super) lives: Vec<Option<Arc<UdpCounters>>>,
    pub(super) handles: Vec<JoinHandle<()>>,
    pub(super) results: Vec<Option<StreamMeasurement>>,
    pub(super) finished: usize,
    /// The stream threads, for the side's CPU per interval.
    pub(super) threads: Vec<Watched>,
    pub(super) cpu: CpuWatch,
}
