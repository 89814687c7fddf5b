//! iperf3's stream format ([`Iperf3Streams`]: its datagrams for the
//! sender core, and this receive loop) as the runner takes it.
//!
//! The receive loop of an iperf3 UDP stream, generic over the engine: the
//! engine fills receive slots (many datagrams per `recvmmsg`, GRO
//! super-buffers cut at the kernel's segment size, for the batch engine),
//! and every datagram goes through both accounts one by one — linerate's
//! exact [`SeqTracker`] and iperf3's [`Iperf3Receiver`] — exactly as when
//! they arrived one per call.
//!
//! Arrival times are the kernel's receive timestamps (`SO_TIMESTAMPNS`,
//! turned into this host's monotonic clock once, at the start), so jitter
//! and the omit boundary do not depend on when this thread got to read a
//! batch; where the kernel gives none the batch's read time stands in. A
//! GRO super-buffer carries one timestamp for all its datagrams (they
//! arrived as one run), as iperf3's own GRO receiver sees them.

use std::time::{Duration, Instant};

use linerate_engine::clock;
use linerate_engine::engines::{Engine, RecvSlots, UdpEndpoint};
use linerate_engine::stream::{StreamCounter, StreamEnd};
use linerate_engine::udp::{self, ns_since, RecvJob, RecvStream, StreamFormat};
use linerate_proto::measure::UdpRecv;
use linerate_proto::seq::{Jitter, SeqTracker};
use linerate_proto::udp_receiver::{finish_counts, live_counts, LiveCounts};

use crate::udp::{self as wire, Iperf3Datagrams, Iperf3Receiver};

/// How a side's iperf3 UDP streams run: the stream format the runner is
/// started with for iperf3 tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Iperf3Streams {
    /// `udp_counters_64bit`: 64-bit sequence numbers in the header.
    pub counters_64bit: bool,
    /// The omit period: iperf3's counters restart at its end.
    pub omit: Duration,
}

impl StreamFormat for Iperf3Streams {
    type Datagram = Iperf3Datagrams;

    /// iperf3's headers carry the sender's monotonic clock: the epoch is
    /// that clock at `start`.
    fn sender(self, start: Instant) -> Iperf3Datagrams {
        Iperf3Datagrams {
            counters_64bit: self.counters_64bit,
            epoch_ns: clock::mono_ns().saturating_sub(ns_since(start)),
        }
    }

    fn recv<E: Engine>(self, s: RecvStream<'_, E>) -> (UdpRecv, StreamEnd) {
        recv(s, self)
    }
}

/// Both accounts of one stream, fed one datagram at a time.
struct Accounts<'a> {
    job: &'a RecvJob,
    cfg: Iperf3Streams,
    iperf: Iperf3Receiver,
    tracker: SeqTracker,
    jitter: Jitter,
    out: UdpRecv,
    omit_ns: u64,
    omitting: bool,
    /// CLOCK_REALTIME and CLOCK_MONOTONIC ns at the test's start.
    realtime_at_start: u64,
    mono_at_start: u64,
}

impl<'a> Accounts<'a> {
    /// Empty accounts for a stream whose test started when the realtime
    /// and monotonic clocks read these.
    fn new(
        job: &'a RecvJob,
        cfg: Iperf3Streams,
        realtime_at_start: u64,
        mono_at_start: u64,
    ) -> Self {
        Accounts {
            job,
            cfg,
            iperf: Iperf3Receiver::new(cfg.counters_64bit),
            tracker: SeqTracker::default(),
            jitter: Jitter::default(),
            out: UdpRecv::default(),
            omit_ns: cfg.omit.as_nanos() as u64,
            omitting: !cfg.omit.is_zero(),
            realtime_at_start,
            mono_at_start,
        }
    }

    /// Accounts the first `filled` slots; `now` (ns since start) stands in
    /// for a missing kernel timestamp.
    fn deliver(&mut self, slots: &RecvSlots, filled: usize, now: u64, bytes: &StreamCounter) {
        for slot in 0..filled {
            let (_, m) = slots.get(slot);
            let at = m
                .stamp_ns
                .map_or(now, |t| t.saturating_sub(self.realtime_at_start));
            for d in slots.datagrams(slot) {
                self.datagram(d, m.truncated, at);
                bytes.add(d.len() as u64);
            }
        }
    }

    /// One datagram that arrived `at` ns after the start.
    #[inline]
    fn datagram(&mut self, d: &[u8], truncated: bool, at: u64) {
        if self.omitting && at >= self.omit_ns {
            self.omitting = false;
            self.iperf.omit_ended();
        }
        let arrival = self.mono_at_start + at;
        self.iperf.datagram(d, arrival as f64 / 1e9);
        let header = wire::read_header(d, self.cfg.counters_64bit).filter(|h| h.seq > 0);
        match header {
            Some(h) if d.len() == self.job.len && !truncated => {
                self.tracker.record(h.seq - 1);
                let sent = u64::from(h.sec) * 1_000_000_000 + u64::from(h.usec) * 1000;
                self.jitter.record(sent, arrival);
                self.out.datagrams += 1;
                if self.out.first_recv_ns == 0 {
                    self.out.first_recv_ns = at;
                }
                self.out.last_recv_ns = at;
            }
            _ => {
                self.out.corrupt += 1;
                if self.out.first_corrupt.is_none() {
                    self.out.first_corrupt = Some(format!(
                        "{}-byte datagram{}, the test sends {} with a sequence number from 1",
                        d.len(),
                        if truncated { " (truncated)" } else { "" },
                        self.job.len
                    ));
                }
            }
        }
    }

    fn live(&self) -> LiveCounts {
        live_counts(&self.tracker, &self.jitter, &self.out, None)
    }
}

/// Receives iperf3 datagrams on `s` until the drain deadline (then reads
/// what is queued) or abort, counting them both ways ([`RecvStream::run`]).
/// Timestamps and GRO (where the engine has it) are already on when the
/// socket was accepted; the shared loop asks again for sockets nobody
/// prepared.
fn recv<E: Engine>(s: RecvStream<'_, E>, cfg: Iperf3Streams) -> (UdpRecv, StreamEnd) {
    let (ep, job, bytes, live) = (s.ep, s.job, s.bytes, s.live);
    let mut acc = Accounts::new(
        job,
        cfg,
        udp::realtime_at(job.start),
        clock::mono_ns().saturating_sub(ns_since(job.start)),
    );
    acc.out.rcvbuf = ep.recv_buffer();
    s.run(
        acc,
        |acc, slots, filled, now, _| {
            acc.deliver(slots, filled, now, bytes);
            live.publish(&acc.live());
        },
        |acc| {
            let rcvbuf = acc.out.rcvbuf;
            let mut out = finish_counts(
                &acc.tracker,
                &acc.jitter,
                acc.out,
                live.issued(),
                ep.drops(),
                rcvbuf,
            );
            out.iperf3 = Some(acc.iperf.counts());
            out
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};
    use wire::Header;

    /// The omit period ends by each datagram's arrival time (the kernel's
    /// stamp), not by when its batch was read: a batch read after the
    /// boundary that holds datagrams from before it splits there.
    #[test]
    fn the_omit_period_ends_at_each_datagrams_arrival() {
        let job = RecvJob {
            stream: 1,
            len: 100,
            verify: false,
            start: Instant::now(),
            omit_ns: 0,
        };
        let cfg = Iperf3Streams {
            counters_64bit: false,
            omit: Duration::from_millis(100),
        };
        let mut acc = Accounts::new(&job, cfg, 0, 5_000_000_000);
        let mut d = vec![0u8; 100];
        let ms = 1_000_000;
        for (seq, at) in [(1, 10 * ms), (2, 99 * ms), (3, 100 * ms), (5, 150 * ms)] {
            wire::write_header(&mut d, &Header::at_ns(5_000_000_000 + at, seq), false);
            acc.datagram(&d, false, at);
        }
        // A short datagram is corrupt for linerate; iperf3's rules count
        // it by its header.
        wire::write_header(&mut d, &Header::at_ns(5_160_000_000, 6), false);
        acc.datagram(&d[..50], false, 160 * ms);
        let c = acc.iperf.counts();
        assert_eq!((c.omitted_packets, c.omitted_errors), (2, 0));
        assert_eq!((c.max_seq, c.lost, c.bytes), (6, 1, 250));
        let t = acc.tracker.counts();
        assert_eq!((t.received, t.next_expected), (4, 5));
        assert_eq!((acc.out.datagrams, acc.out.corrupt), (4, 1));
        assert_eq!(
            (acc.out.first_recv_ns, acc.out.last_recv_ns),
            (10 * ms, 150 * ms)
        );
    }
}
