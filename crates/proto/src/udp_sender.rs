//! The UDP sender's core, without I/O: what to send when, in which buffer.
//!
//! Driven by `now` (ns since Start) from the caller, it combines the
//! [`Pacer`] (when each datagram is due), the [`SeqSchedule`] (which
//! sequence number goes next, test faults applied), header stamping, the
//! `--verify` payload pattern and the malformed datagrams of
//! `--inject-faults`; it counts what left, records the achieved gaps and
//! says at the end whether the sender kept up ([`UdpSend`]).
//!
//! The I/O loop asks [`UdpSender::poll_transmit`] what to do at `now`:
//! wait until a time, send a batch of datagrams (up to the engine's batch
//! size, every one of them due at `now`, all stamped with that one `now`),
//! send one malformed datagram, or stop. After sending a batch it reports
//! how many datagrams the kernel took ([`UdpSender::on_sent`]); the rest is
//! offered again, restamped, by the next poll. Buffers are allocated once,
//! at construction: nothing is allocated per datagram.

use linerate_stats::histogram::Histogram;

use crate::datagram::{self, fill_pattern, Fault, Header, SeqSchedule, FLAG_PATTERN, HEADER_LEN};
use crate::measure::UdpSend;
use crate::pacing::Pacer;

/// A sending UDP stream's parameters.
#[derive(Debug, Clone)]
pub struct SenderConfig {
    pub stream: u32,
    /// Whole datagram length, header included (at least [`HEADER_LEN`]).
    pub len: usize,
    /// Datagrams per 1000 s; `None`: unpaced.
    pub millipps: Option<u64>,
    pub burst: u32,
    /// Fill payloads with the sequence number's pattern.
    pub verify: bool,
    /// Test-only faults (`--inject-faults`).
    pub faults: Vec<Fault>,
    /// Sequence numbers to issue (count-limited tests).
    pub limit: Option<u64>,
    /// Most datagrams handed out per [`UdpSender::poll_transmit`] (the
    /// engine's batch size; at least 1).
    pub max_batch: usize,
}

/// What the sender should do now.
#[derive(Debug, PartialEq, Eq)]
pub enum Transmit<'a> {
    /// Nothing is due before this time (ns since Start): wait, then poll.
    Wait(u64),
    /// Send these datagrams: `bytes` holds them back to back, `segment`
    /// bytes each. Then call [`UdpSender::on_sent`].
    Send { bytes: &'a [u8], segment: usize },
    /// Send this one malformed datagram (a test fault) whatever happens to
    /// it, then call [`UdpSender::on_junk_sent`] and poll again with the
    /// same `now`.
    Junk(&'a [u8]),
    /// Every sequence number was issued (count-limited tests).
    Done,
}

/// The sans-IO core of one sending UDP stream.
#[derive(Debug)]
pub struct UdpSender {
    len: usize,
    verify: bool,
    max_batch: usize,
    /// `max_batch` datagrams back to back, headers emitted once.
    buf: Vec<u8>,
    /// Malformed-datagram faults, in sequence order, and the next one due.
    junk: Vec<Fault>,
    next_junk: usize,
    junk_buf: Vec<u8>,
    sched: SeqSchedule,
    pacer: Pacer,
    gaps: Histogram,
    limit: Option<u64>,
    /// The stamp of the batch last handed out.
    batch_now: u64,
    last_send: Option<u64>,
    out: UdpSend,
}

impl UdpSender {
    pub fn new(cfg: SenderConfig) -> Self {
        let len = cfg.len.max(HEADER_LEN);
        let max_batch = cfg.max_batch.max(1);
        let mut buf = vec![0u8; len * max_batch];
        let header = Header {
            flags: if cfg.verify { FLAG_PATTERN } else { 0 },
            stream: cfg.stream,
            seq: 0,
            send_ns: 0,
            len: len as u32,
        };
        for d in buf.chunks_exact_mut(len) {
            header.emit(d);
        }
        let junk: Vec<Fault> = cfg
            .faults
            .iter()
            .copied()
            .filter(|f| f.kind.is_malformed())
            .collect();
        let junk_buf = if junk.is_empty() {
            Vec::new()
        } else {
            vec![0u8; len]
        };
        let pacer = Pacer::new(cfg.millipps, cfg.burst);
        let out = UdpSend {
            requested_pps: pacer.pps(),
            requested_gap_ns: pacer.gap_ns(),
            burst: cfg.burst.max(1),
            kept_up: true,
            ..UdpSend::default()
        };
        UdpSender {
            len,
            verify: cfg.verify,
            max_batch,
            buf,
            junk,
            next_junk: 0,
            junk_buf,
            sched: SeqSchedule::new(cfg.faults).with_limit(cfg.limit),
            pacer,
            gaps: Histogram::new(),
            limit: cfg.limit,
            batch_now: 0,
            last_send: None,
            out,
        }
    }

    /// Bytes per datagram.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: a datagram has at least a header.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Datagrams the kernel accepted so far.
    #[inline]
    pub fn datagrams(&self) -> u64 {
        self.out.datagrams
    }

    /// The malformed datagram due before `seq`, if one is.
    #[inline]
    fn junk_before(&self, seq: u64) -> Option<Fault> {
        self.junk
            .get(self.next_junk)
            .copied()
            .filter(|f| f.seq <= seq)
    }

    /// Writes `seq`, `now` and (with `--verify`) the pattern into slot `i`.
    #[inline]
    fn stamp(&mut self, i: usize, seq: u64, now: u64) {
        let d = &mut self.buf[i * self.len..(i + 1) * self.len];
        Header::stamp(d, seq, now);
        if self.verify {
            fill_pattern(&mut d[HEADER_LEN..], seq);
        }
    }

    /// What to do at `now` (ns since Start).
    pub fn poll_transmit(&mut self, now: u64) -> Transmit<'_> {
        if self.sched.finished() {
            return Transmit::Done;
        }
        let due = self.pacer.due_ns();
        if due > now {
            return Transmit::Wait(due);
        }
        let first = self.sched.current();
        self.stamp(0, first, now);
        if let Some(f) = self.junk_before(first) {
            // Built from the good datagram it precedes, as stamped now.
            let n = datagram::malformed(f.kind, &self.buf[..self.len], &mut self.junk_buf);
            return Transmit::Junk(&self.junk_buf[..n]);
        }
        let mut n = 1;
        if self.max_batch > 1 {
            let mut up = self.sched.upcoming().skip(1);
            while n < self.max_batch {
                let Some(seq) = up.next() else { break };
                if self.pacer.due_after(n as u64) > now || self.junk_before(seq).is_some() {
                    break;
                }
                // `up` borrows the schedule, not the buffer.
                let d = &mut self.buf[n * self.len..(n + 1) * self.len];
                Header::stamp(d, seq, now);
                if self.verify {
                    fill_pattern(&mut d[HEADER_LEN..], seq);
                }
                n += 1;
            }
        }
        self.batch_now = now;
        Transmit::Send {
            bytes: &self.buf[..n * self.len],
            segment: self.len,
        }
    }

    /// The kernel took the first `n` datagrams of the batch last handed
    /// out; returns their bytes.
    #[inline]
    pub fn on_sent(&mut self, n: usize) -> u64 {
        let now = self.batch_now;
        for _ in 0..n {
            self.sched.advance();
            self.pacer.sent();
            match self.last_send {
                Some(prev) => self.gaps.record(now.saturating_sub(prev)),
                None => self.out.first_send_ns = now,
            }
            self.last_send = Some(now);
        }
        self.out.datagrams += n as u64;
        (n * self.len) as u64
    }

    /// The malformed datagram handed out was sent (or failed; either way
    /// it is done).
    pub fn on_junk_sent(&mut self) {
        self.next_junk += 1;
    }

    /// A send failed because the kernel was out of buffers (`ENOBUFS`);
    /// the same datagrams are offered again.
    pub fn on_no_buffers(&mut self) {
        self.out.send_errors += 1;
    }

    /// What the sender measured, as it stopped at `end_ns`.
    pub fn finish(self, end_ns: u64) -> UdpSend {
        let issued = self.sched.issued();
        // A count-limited sender is never behind on datagrams past its count.
        let behind = match self.limit {
            Some(l) => self.pacer.behind(end_ns).min(l.saturating_sub(issued)),
            None => self.pacer.behind(end_ns),
        };
        UdpSend {
            issued,
            gaps: self.gaps.summary(),
            behind,
            kept_up: self.pacer.within_tolerance(behind),
            last_send_ns: self.last_send.unwrap_or(0),
            ..self.out
        }
    }
}
