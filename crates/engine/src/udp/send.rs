//! The send loop of a UDP stream — linerate's own datagrams or another
//! format's (iperf3's, for iperf3 peers): the sans-IO [`UdpSender`] core decides what leaves
//! when, and how to wait for it; this loop reads the clock, sleeps or spins
//! as told, and hands each batch to the engine.
//!
//! Per batch: one clock read (the stamp of every datagram in it), one
//! engine call, one relaxed store of the live counter. Nothing allocated.

use std::io::ErrorKind;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use linerate_proto::data_beat::{self, PEEK_EVERY_NS};
use linerate_proto::datagram::Fault;
use linerate_proto::measure::UdpSend;
use linerate_proto::pacing::{wait_step, WaitStep};
use linerate_proto::udp_sender::{DatagramFormat, Linerate, SenderConfig, Transmit, UdpSender};

use super::live::UdpCounters;
use super::timing::{ns_since, RECV_POLL};
use crate::engines::{self, Engine, Interest, TxBatch, UdpTx};
use crate::stream::{Signals, StreamCounter, StreamEnd};
use crate::wait::{stream_end, Wait, Waiter};
use crate::EngineError;

/// A sending UDP stream's parameters.
#[derive(Debug, Clone)]
pub struct SendJob<F = Linerate> {
    pub stream: u32,
    /// Whole datagram length, header included.
    pub len: usize,
    /// Datagrams per 1000 s; `None`: unpaced.
    pub millipps: Option<u64>,
    pub burst: u32,
    pub verify: bool,
    pub faults: Vec<Fault>,
    /// Sequence numbers to issue (count-limited tests).
    pub limit: Option<u64>,
    /// The test's time zero.
    pub start: Instant,
    /// linerate's datagrams, or another format's (iperf3's).
    pub format: F,
    /// The omitted warm-up, ns since `start` (0: none).
    pub omit_ns: u64,
}

/// Waits until `due_ns` after `start`, sleeping or spinning as the core's
/// [`wait_step`] says (sleep until the last few µs, spin those). Returns
/// the time it saw at or past `due_ns`, or `None` when a stop or abort
/// arrived meanwhile.
fn wait_until(start: Instant, due_ns: u64, signals: &Signals) -> Option<u64> {
    loop {
        let now = ns_since(start);
        match wait_step(now, due_ns) {
            WaitStep::Go => return Some(now),
            WaitStep::Sleep(ns) => {
                std::thread::sleep(Duration::from_nanos(ns));
                if signals.stopping() || signals.aborted() {
                    return None;
                }
            }
            WaitStep::Spin => std::hint::spin_loop(),
        }
    }
}

/// Counts the beats its receiver sent back since the last look (module
/// [`linerate_proto::data_beat`]): one non-blocking read per datagram
/// queued, a few per look. Anything else queued (a late greeting echo) is
/// read and left. Shared by stream threads and event-loop flows.
pub(crate) fn count_beats<P: crate::engines::UdpEndpoint>(ep: &P, live: &UdpCounters) {
    let mut buf = [0u8; 64];
    // Bounded: a peer cannot keep a sender reading.
    for _ in 0..64 {
        match ep.recv_control(&mut buf) {
            Ok(Some(n)) if data_beat::is_beat(&buf[..n.min(buf.len())]) => {
                live.peer_beats.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => return,
        }
    }
}

/// Lets this thread's sleeps end within about a microsecond of their due
/// time instead of the default 50 µs timer slack.
pub(crate) fn tighten_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes an unsigned long; no pointers.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
    }
}

/// Sends paced, numbered datagrams on `ep` with `engine` until stopped or
/// the count is issued. `wait`: blocking sends, or busy polling on a full
/// send queue (an endpoint switched to it by [`crate::engines::UdpEndpoint::busy_poll`]).
pub fn send<E: Engine, F: DatagramFormat>(
    engine: E,
    ep: &E::UdpEndpoint,
    job: &SendJob<F>,
    bytes: &StreamCounter,
    live: &UdpCounters,
    signals: &Signals,
    wait: Wait,
) -> (UdpSend, StreamEnd) {
    // The core pads a datagram to its format's header: the engine must
    // plan (GSO segments, staging slots) with that same length.
    let len = job.len.max(job.format.min_len());
    let mut io = match engine.udp_tx(ep, len) {
        Ok(io) => io,
        Err(e) => return (UdpSend::default(), StreamEnd::failed(e)),
    };
    tighten_timer_slack();
    let mut core = UdpSender::new(SenderConfig {
        stream: job.stream,
        len,
        millipps: job.millipps,
        burst: job.burst,
        verify: job.verify,
        faults: job.faults.clone(),
        limit: job.limit,
        max_batch: io.max_batch(),
        format: job.format,
        omit_ns: job.omit_ns,
    });
    let mut waiter = Waiter::new(wait, signals, false);
    let call = waiter.call();
    let mut calls = 0u64;
    let mut now = ns_since(job.start);
    let mut next_peek = PEEK_EVERY_NS;
    let result = loop {
        if signals.aborted() || signals.stopping() {
            break Ok(());
        }
        if now >= next_peek {
            next_peek = now + PEEK_EVERY_NS;
            count_beats(ep, live);
        }
        match core.poll_transmit(now) {
            Transmit::Done => break Ok(()),
            Transmit::Wait(due) => match wait_until(job.start, due, signals) {
                Some(t) => now = t,
                None => continue,
            },
            Transmit::Junk(d) => {
                // Test faults: whatever becomes of it, it was sent.
                let _ = io.send_batch(ep, TxBatch::new(d, d.len()), engines::Wait::Block);
                core.on_junk_sent();
            }
            Transmit::Send { bytes: b, segment } => {
                calls += 1;
                match io.send_batch(ep, TxBatch::new(b, segment), call) {
                    Ok(n) => {
                        bytes.add(core.on_sent(n));
                        live.publish(&core.live());
                        waiter.progressed();
                    }
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                        // The socket buffer is full: spin (busy polling) or
                        // go round again (a blocking send timed out).
                        if let Err(e) = waiter.would_block(ep, Interest::Send, RECV_POLL, None) {
                            break stream_end(e);
                        }
                    }
                    Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                        core.on_no_buffers();
                        std::thread::yield_now();
                    }
                    // An iperf3 peer closes its socket at the end of the test.
                    Err(e) if e.kind() == ErrorKind::ConnectionRefused && F::PEER_CLOSES_AT_END => {
                        break Ok(())
                    }
                    Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                        break Err(EngineError::PeerReset(
                            "the receiver's UDP port is closed (ICMP port unreachable)".into(),
                        ))
                    }
                    Err(e) => break Err(EngineError::io("UDP send", e)),
                }
                now = ns_since(job.start);
            }
        }
    };
    let end = ns_since(job.start);
    let mut out = core.finish(end);
    out.batching = io.batching();
    (out, waiter.end(calls, result))
}
