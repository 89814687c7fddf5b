//! The send loop of an iperf3 UDP stream, generic over the engine: paced
//! datagrams in iperf3's format, handed to the engine in batches (one
//! `sendmmsg`, with GSO where the engine has it on, for the batch engine;
//! one `send` each for the syscall engine).
//!
//! A batch holds only datagrams already due by the pacer, so a sender on
//! schedule never sends more than one burst (`-b RATE/N`) at a time; one
//! that fell behind catches up back to back, as the one-call-per-datagram
//! loop did. Per batch: one clock read (the send time in every header of
//! the batch), one engine call, one relaxed store of the live counter.

use std::io::ErrorKind;
use std::net::UdpSocket;
use std::sync::atomic::Ordering;

use linerate_proto::iperf3::udp::{self as wire, Header};
use linerate_proto::measure::UdpSend;
use linerate_proto::pacing::Pacer;
use linerate_stats::histogram::Histogram;

use super::Iperf3Format;
use crate::clock;
use crate::engines::{with_engine, Engine, EngineKind, TxBatch, UdpTx};
use crate::stream::{Signals, StreamCounter, StreamEnd};
use crate::udp::{ns_since, tighten_timer_slack, wait_until, SendJob, UdpCounters, RECV_POLL};
use crate::wait::{stream_end, Wait, Waiter};
use crate::EngineError;

/// Fills a payload with a fixed pseudo-random pattern (iperf3 sends random
/// bytes; receivers never look at them).
fn fill(buf: &mut [u8]) {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for b in buf.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
}

/// Sends iperf3 datagrams on `sock` with engine `kind`, paced, until
/// stopped or `job.limit` are sent.
pub fn send(
    kind: EngineKind,
    sock: &UdpSocket,
    job: &SendJob,
    cfg: Iperf3Format,
    counters: (&StreamCounter, &UdpCounters),
    signals: &Signals,
    wait: Wait,
) -> (UdpSend, StreamEnd) {
    with_engine!(kind, e => send_loop(e, sock, job, cfg, counters, signals, wait))
}

/// How many of the next datagrams go in one batch at `now`: due by the
/// pacer, within the count limit (`left` still to issue) and the engine's
/// batch size; at least one.
fn batch_len(pacer: &Pacer, now: u64, left: u64, max_batch: usize) -> usize {
    let mut n = 1usize;
    while n < max_batch && (n as u64) < left && pacer.due_after(n as u64) <= now {
        n += 1;
    }
    n
}

pub(super) fn send_loop<E: Engine>(
    engine: E,
    sock: &UdpSocket,
    job: &SendJob,
    cfg: Iperf3Format,
    (bytes, live): (&StreamCounter, &UdpCounters),
    signals: &Signals,
    wait: Wait,
) -> (UdpSend, StreamEnd) {
    // Every datagram exactly `len` bytes: iperf3 receivers read that many.
    let len = job.len.max(wire::header_len(cfg.counters_64bit));
    let mut io = match engine.udp_tx(sock, len) {
        Ok(io) => io,
        Err(e) => return (UdpSend::default(), StreamEnd::failed(e)),
    };
    tighten_timer_slack();
    let max_batch = io.max_batch().max(1);
    // Allocated once: the payload pattern stays, headers are rewritten.
    let mut buf = vec![0u8; len * max_batch];
    fill(&mut buf);
    let mut pacer = Pacer::new(job.millipps, job.burst);
    let mut gaps = Histogram::new();
    let mut out = UdpSend {
        requested_pps: pacer.pps(),
        requested_gap_ns: pacer.gap_ns(),
        burst: job.burst.max(1),
        kept_up: true,
        ..UdpSend::default()
    };
    let mut waiter = Waiter::new(wait, signals, false);
    let call = waiter.call();
    // iperf3 numbers from 1; a datagram the kernel did not take does not
    // use its number up (the receiver would count it lost).
    let mut seq: u64 = 1;
    let limit = job.limit.unwrap_or(u64::MAX);
    let mut last_send: Option<u64> = None;
    let mut calls = 0u64;
    let result = loop {
        if signals.aborted() || signals.stopping() || seq > limit {
            break Ok(());
        }
        let due = pacer.due_ns();
        let now = match wait_until(job.start, due, signals) {
            Some(t) => t,
            None => continue,
        };
        let n = batch_len(&pacer, now, limit - seq + 1, max_batch);
        let stamp = Header::at_ns(clock::mono_ns(), 0);
        for (i, d) in buf.chunks_exact_mut(len).take(n).enumerate() {
            let h = Header {
                seq: seq + i as u64,
                ..stamp
            };
            wire::write_header(d, &h, cfg.counters_64bit);
        }
        calls += 1;
        match io.send_batch(sock, TxBatch::new(&buf[..n * len], len), call) {
            Ok(k) => {
                seq += k as u64;
                for _ in 0..k {
                    pacer.sent();
                    match last_send {
                        Some(prev) => gaps.record(now.saturating_sub(prev)),
                        None => out.first_send_ns = now,
                    }
                    last_send = Some(now);
                }
                bytes.add((k * len) as u64);
                out.datagrams += k as u64;
                live.datagrams.store(out.datagrams, Ordering::Relaxed);
                waiter.progressed();
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if let Err(e) = waiter.would_block(sock, libc::POLLOUT, RECV_POLL, None) {
                    break stream_end(e);
                }
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                out.send_errors += 1;
                std::thread::yield_now();
            }
            // The iperf3 peer closed its socket at the end of the test.
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => break Ok(()),
            Err(e) => break Err(EngineError::io("UDP send", e)),
        }
    };
    let end = ns_since(job.start);
    out.issued = seq - 1;
    out.gaps = gaps.summary();
    out.behind = pacer.behind(end);
    out.kept_up = pacer.within_tolerance(out.behind);
    out.last_send_ns = last_send.unwrap_or(0);
    out.batching = io.batching();
    (out, waiter.end(calls, result))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_holds_only_due_datagrams_within_the_limit() {
        // 1000 datagrams/s in bursts of 4 (a tick every 4 ms): at a tick,
        // one burst is due.
        let p = Pacer::new(Some(1_000_000), 4);
        assert_eq!(batch_len(&p, 0, u64::MAX, 64), 4);
        assert_eq!(batch_len(&p, 3_999_999, u64::MAX, 64), 4);
        // A sender 8.5 ms late catches up on the three bursts now due.
        assert_eq!(batch_len(&p, 8_500_000, u64::MAX, 64), 12);
        // Never past the count limit or the engine's batch size.
        assert_eq!(batch_len(&p, 8_500_000, 5, 64), 5);
        assert_eq!(batch_len(&p, 8_500_000, u64::MAX, 3), 3);
        // Unpaced: the engine's batch.
        let p = Pacer::new(None, 1);
        assert_eq!(batch_len(&p, 0, u64::MAX, 64), 64);
    }
}
