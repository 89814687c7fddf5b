//! Runs one side of a test: a thread per data stream plus a sampler thread
//! that cuts intervals, signals the senders to stop when time is up, and
//! assembles the side's [`SideResults`] when every stream has ended.
//!
//! [`SideRun`] owns all those threads: dropping it aborts and joins them, so a
//! failed test cannot leak a thread or a socket.
//!
//! UDP streams run the same way with three additions: senders pace and
//! number their datagrams, the side reports when all its senders finished
//! ([`SideRun::senders_done`], for the peer's SendDone), and receivers stop
//! at a drain deadline set when the peer's senders finished
//! ([`SideRun::peer_send_done`]).
//!
//! With `RunParams::loops` the TCP or UDP streams run as flows on a few event-loop
//! threads instead (`loops`), cut into intervals the same way.
//!
//! `cpu_watch`: the side's CPU and busiest thread per interval, from
//! `/proc`; `stream`: one stream's thread (pinning, the engine loop of its transport
//! and role, its measurement); `sampler`: the sampler thread (driving the
//! sans-IO interval cutter, collecting the streams' ends, CPU and kernel
//! deltas).

mod cpu_watch;
mod loops;
mod params;
mod running;
mod sampler;
mod stream;

use std::sync::mpsc::{self, Receiver};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use linerate_proto::measure::{IntervalMeasurement, Role, RrFlowMeasurement, SideResults};
use linerate_proto::wire::SentCount;

use crate::engines::EngineKind;
use crate::stream::{Signals, StreamCounter};
use crate::udp::{Native, StreamFormat, UdpCounters};
pub(crate) use cpu_watch::ProcessThreads;
pub use params::{CpuScope, DataSocket, RunParams, StreamSetup, UdpParams};
use sampler::{sample, Channels};

/// A side's test in progress.
#[derive(Debug)]
pub struct SideRun {
    signals: Arc<Signals>,
    intervals: Receiver<IntervalMeasurement>,
    done: Receiver<SideResults>,
    senders_done: Receiver<Vec<SentCount>>,
    /// Live UDP counters by stream id (empty for TCP).
    udp_live: Vec<(u32, Arc<UdpCounters>)>,
    /// Every stream's live byte counter with its role, for [`Progress`].
    live: Vec<(Role, Arc<StreamCounter>, Option<Arc<UdpCounters>>)>,
    /// rr/crr client: every flow's measurement of each phase, as the
    /// phase ends (none for other sides).
    phases: Option<Receiver<Vec<RrFlowMeasurement>>>,
    /// rr/crr: the transactions the side's flows completed so far.
    transactions: Option<Transactions>,
    start: Instant,
    sampler: Option<JoinHandle<()>>,
}

/// Starts the streams now; `start` is the test's time zero. UDP streams
/// speak linerate's own datagrams.
pub fn start(
    engine: EngineKind,
    streams: Vec<StreamSetup>,
    params: RunParams,
    start: Instant,
) -> SideRun {
    start_with(engine, streams, params, Native, start)
}

/// [`start`], with UDP streams in `format` (iperf3's, for iperf3 peers):
/// the runner is generic over it, so nothing is dispatched per datagram.
pub fn start_with<F: StreamFormat>(
    engine: EngineKind,
    streams: Vec<StreamSetup>,
    params: RunParams,
    format: F,
    start: Instant,
) -> SideRun {
    let signals = Arc::new(Signals::default());
    let (itx, intervals) = mpsc::channel();
    let (dtx, done) = mpsc::channel();
    let (stx, senders_done) = mpsc::channel();
    let udp_live: Vec<(u32, Arc<UdpCounters>)> = streams
        .iter()
        .filter(|s| matches!(s.sock, DataSocket::Udp(_)))
        .map(|s| (s.id, Arc::default()))
        .collect();
    let counters: Vec<Arc<StreamCounter>> = streams.iter().map(|_| Arc::default()).collect();
    let progress = streams
        .iter()
        .zip(&counters)
        .map(|(s, c)| {
            let udp = udp_live
                .iter()
                .find(|(id, _)| *id == s.id)
                .map(|(_, l)| Arc::clone(l));
            (s.role, Arc::clone(c), udp)
        })
        .collect();
    let sig = Arc::clone(&signals);
    let live = udp_live.clone();
    let sampler = std::thread::Builder::new()
        .name("linerate-sampler".into())
        .spawn(move || {
            let ch = Channels {
                intervals: itx,
                senders_done: stx,
            };
            let side = (engine, format, start);
            let results = sample(side, streams, counters, &params, &sig, &live, &ch);
            let _ = dtx.send(results);
        });
    let (sampler, done) = match sampler {
        Ok(h) => (Some(h), done),
        Err(_) => (None, empty_results(engine.to_string())),
    };
    SideRun {
        signals,
        intervals,
        done,
        senders_done,
        udp_live,
        live: progress,
        phases: None,
        transactions: None,
        start,
        sampler,
    }
}

/// Without a thread no test can run: the results of an empty, failed side.
fn empty_results(engine: String) -> Receiver<SideResults> {
    let (tx, rx) = mpsc::channel();
    let _ = tx.send(SideResults {
        engine,
        ..SideResults::default()
    });
    rx
}

/// Runs `side` on its own thread as a [`SideRun`]: `side` gets the side's
/// signals and returns its results (used by the request/response runner,
/// which has no interval records).
pub fn spawn_side(
    engine_name: &'static str,
    side: impl FnOnce(&Arc<Signals>) -> SideResults + Send + 'static,
) -> SideRun {
    let signals = Arc::new(Signals::default());
    let (_itx, intervals) = mpsc::channel();
    let (dtx, done) = mpsc::channel();
    let (_stx, senders_done) = mpsc::channel();
    let sig = Arc::clone(&signals);
    let sampler = std::thread::Builder::new()
        .name("linerate-side".into())
        .spawn(move || {
            let _ = dtx.send(side(&sig));
        });
    let (sampler, done) = match sampler {
        Ok(h) => (Some(h), done),
        Err(_) => (None, empty_results(engine_name.into())),
    };
    SideRun {
        signals,
        intervals,
        done,
        senders_done,
        udp_live: Vec::new(),
        live: Vec::new(),
        phases: None,
        transactions: None,
        start: Instant::now(),
        sampler,
    }
}

/// What a side's streams have moved so far, all streams of a role
/// together (an iperf3 client's `-n`/`-k` end: bytes or blocks sent or
/// received in all).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    pub sent_bytes: u64,
    pub received_bytes: u64,
    /// UDP: datagrams sent, and valid datagrams read.
    pub sent_datagrams: u64,
    pub received_datagrams: u64,
    /// UDP senders: beats their receivers sent back
    /// ([`linerate_proto::data_beat`]).
    pub peer_beats: u64,
    /// rr/crr: transactions the side's flows completed, each one a
    /// request (server) or a response (client) from the peer.
    pub transactions: u64,
}

/// A running count a side's own threads keep, read by [`SideRun::progress`]
/// (rr/crr: the transactions their flows completed).
#[derive(Clone)]
struct Transactions(Arc<dyn Fn() -> u64 + Send + Sync>);

impl std::fmt::Debug for Transactions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Transactions({})", (self.0)())
    }
}

impl SideRun {
    /// Stops every stream at once (the test failed).
    pub fn abort(&self) {
        self.signals.abort();
    }

    /// Finishes now as if the test's limit were reached: senders stop and
    /// shut down cleanly, receivers drain, results follow (the user
    /// interrupted a stream test and still wants what was measured).
    pub fn stop(&self) {
        self.signals.stop();
    }

    /// Tells the senders to finish now (a peer that decides the end, as an
    /// iperf3 client does, instead of this side's time limit).
    pub fn stop_senders(&self) {
        self.stop();
    }

    /// UDP: every sending stream of this side has finished, with the
    /// sequence numbers each issued (once; never for a side with no senders).
    pub fn senders_done(&self) -> Option<Vec<SentCount>> {
        self.senders_done.try_recv().ok()
    }

    /// UDP: the peer's senders finished with `counts`; receivers keep
    /// reading for `drain` from now, then stop.
    pub fn peer_send_done(&self, counts: &[SentCount], drain: Duration) {
        for c in counts {
            if let Some((_, live)) = self.udp_live.iter().find(|(id, _)| *id == c.stream) {
                live.set_issued(c.issued);
                live.set_peer_omitted(c.omitted);
            }
        }
        let at = self.start.elapsed() + drain;
        self.signals.drain_at(at.as_nanos() as u64);
    }

    /// What the streams have moved so far.
    pub fn progress(&self) -> Progress {
        let mut p = Progress::default();
        for (role, bytes, udp) in &self.live {
            let datagrams = udp.as_ref().map_or(0, |u| u.totals().datagrams);
            match role {
                Role::Sender => {
                    p.sent_bytes += bytes.get();
                    p.sent_datagrams += datagrams;
                    p.peer_beats += udp.as_ref().map_or(0, |u| u.peer_beats());
                }
                Role::Receiver => {
                    p.received_bytes += bytes.get();
                    p.received_datagrams += datagrams;
                }
            }
        }
        p.transactions = self.transactions.as_ref().map_or(0, |t| (t.0)());
        p
    }

    /// rr/crr: counts the transactions a side spawned with [`spawn_side`]
    /// completes, for [`Self::progress`] (the peer heard on the data path).
    pub(crate) fn with_transactions(
        mut self,
        count: impl Fn() -> u64 + Send + Sync + 'static,
    ) -> Self {
        self.transactions = Some(Transactions(Arc::new(count)));
        self
    }

    /// Counts what a side spawned with [`spawn_side`] moves, for
    /// [`Self::progress`]: one live counter per stream, with its role.
    pub fn with_progress(mut self, live: Vec<(Role, Arc<StreamCounter>)>) -> Self {
        self.live = live.into_iter().map(|(r, c)| (r, c, None)).collect();
        self
    }

    /// Next interval record, if one is ready.
    pub fn next_interval(&self) -> Option<IntervalMeasurement> {
        self.intervals.try_recv().ok()
    }

    /// rr/crr client: the flows' measurements of the next phase that
    /// ended, if one did.
    pub fn next_phase(&self) -> Option<Vec<RrFlowMeasurement>> {
        self.phases.as_ref()?.try_recv().ok()
    }

    /// Where [`Self::next_phase`] reads from.
    pub(crate) fn with_phases(mut self, rx: Receiver<Vec<RrFlowMeasurement>>) -> Self {
        self.phases = Some(rx);
        self
    }

    /// The side's results once every stream has ended.
    pub fn try_finish(&mut self) -> Option<SideResults> {
        let r = self.done.try_recv().ok()?;
        if let Some(h) = self.sampler.take() {
            let _ = h.join();
        }
        Some(r)
    }
}

impl Drop for SideRun {
    fn drop(&mut self) {
        if let Some(h) = self.sampler.take() {
            self.signals.abort();
            let _ = h.join();
        }
    }
}
