//! The UDP receiver's core, without I/O: one datagram and its arrival time
//! in, its classification and the stream's counters out.
//!
//! Each datagram is classified (a test datagram of this stream, a repeated
//! control greeting, or corrupt — too long, bad header, another stream's
//! id, wrong length, payload not matching the `--verify` pattern), its
//! sequence number goes to the [`SeqTracker`] (loss, duplicates, reordering)
//! and its send and arrival times to the RFC 3550 [`Jitter`]. Arrival times
//! are the kernel's (ns since Start): a datagram that arrived at or after
//! the drain deadline is late — the tracker is closed then (the socket's
//! queue is in arrival order, so everything after it is late too), and late
//! datagrams count neither toward jitter nor the stream's end time.
//!
//! `-O`: a datagram's own send stamp says whether it belongs to the
//! omitted warm-up (stamped before `omit` on the sender's clock) or is
//! measured, whenever it arrives ([`Warmup`]); the sender's core cuts by
//! the same rule from the same stamps, so both ends leave out exactly the
//! same datagrams, however late either end's own timer fires.
//!
//! The I/O loop feeds every datagram to [`UdpReceiver::on_datagram`],
//! publishes [`UdpReceiver::live`] for the sampler once per batch, and
//! takes the stream's [`UdpRecv`] from [`UdpReceiver::finish`]. Nothing is
//! allocated per datagram (the first corruption's words excepted).

use std::fmt;

use crate::datagram::{
    check_pattern, DatagramError, DatagramHeader, Header, FLAG_PATTERN, HEADER_LEN,
};
use crate::measure::UdpRecv;
use crate::seq::{Arrival, Jitter, SeqTracker};
use crate::wire;

/// A receiving UDP stream's parameters.
#[derive(Debug, Clone, Copy)]
pub struct ReceiverConfig {
    pub stream: u32,
    /// The test's datagram length.
    pub len: usize,
    /// Check every payload against its sequence number's pattern.
    pub verify: bool,
    /// The omitted warm-up, ns on the sender's clock (0: none): datagrams
    /// stamped before it are the warm-up's.
    pub omit_ns: u64,
}

/// What one datagram was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// A valid test datagram of this stream.
    Data,
    /// A repeated control greeting (its echo was lost): the loop echoes it.
    Greeting,
    /// Not a valid test datagram.
    Corrupt(Corrupt),
}

/// Why a datagram is corrupt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Corrupt {
    /// Longer than the receive buffer of `buffer` bytes.
    Truncated { buffer: usize },
    /// The header or the payload pattern is wrong.
    Datagram(DatagramError),
    /// Another stream's id on this stream's socket.
    Stream { got: u32, want: u32 },
    /// Not the test's datagram length.
    Length { got: usize, want: usize },
    /// `--verify` is on but the sender did not fill the pattern.
    NoPattern,
}

impl fmt::Display for Corrupt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Corrupt::Truncated { buffer } => {
                write!(f, "datagram longer than the {buffer}-byte receive buffer")
            }
            Corrupt::Datagram(e) => write!(f, "{e}"),
            Corrupt::Stream { got, want } => write!(f, "stream id {got} on stream {want}'s socket"),
            Corrupt::Length { got, want } => write!(f, "{got} bytes, the test sends {want}"),
            Corrupt::NoPattern => f.write_str("no payload pattern to verify"),
        }
    }
}

/// A UDP stream's cumulative counters at a moment, for the sampler's
/// interval records (a sender's only count `datagrams`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LiveCounts {
    /// Valid datagrams read (receiver) or sent (sender).
    pub datagrams: u64,
    pub received: u64,
    pub next_expected: u64,
    pub duplicates: u64,
    pub reordered: u64,
    pub late: u64,
    pub corrupt: u64,
    /// The current jitter (not cumulative), ns.
    pub jitter_ns: f64,
    /// The socket's drop counter as last reported (SO_RXQ_OVFL).
    pub socket_drops: Option<u64>,
    /// What of the counts above is the omitted warm-up's, told by the
    /// datagrams' send stamps (linerate's datagrams); `None`: the stream
    /// cuts its warm-up by its own clock (iperf3's rule, and TCP).
    pub warmup: Option<Warmup>,
}

/// The omitted warm-up's share of a UDP stream's counts, by the sender's
/// send stamp in each datagram: one stamped before `omit` is the
/// warm-up's, one stamped at or past it is measured, on both ends alike.
/// The sender stamps a batch with one time, so its cut falls between
/// batches; a warm-up datagram that arrives after measured ones (reordered,
/// or late) is still the warm-up's, and numbers below the sender's cut are
/// never measured loss: a number missing is the warm-up's or the test's
/// by when it was sent, not by when this end's timer cut (issue 28).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Warmup {
    /// Bytes and datagrams sent, or valid ones read, stamped before `omit`.
    pub bytes: u64,
    pub datagrams: u64,
    /// Receiver: of those, distinct numbers before the drain deadline,
    /// duplicates, reordered and late ones.
    pub received: u64,
    pub duplicates: u64,
    pub reordered: u64,
    pub late: u64,
    /// Numbers `0..numbers` are the warm-up's: the sender's first number
    /// stamped at or past `omit` (every number issued, until one is). The
    /// receiver's best account of that cut: the sender's own, once its
    /// SendDone named it ([`LiveCounts::at_sender_cut`]); until then the
    /// lowest number it saw stamped at or past `omit` (the cut itself,
    /// unless the first measured datagrams were lost: those are then the
    /// warm-up's until the sender's cut is known, and its last interval
    /// counts them); before any, one past the highest warm-up number seen.
    /// So warm-up datagrams lost just before the cut are never measured
    /// loss, in an interval or in the totals.
    pub numbers: u64,
}

impl Warmup {
    /// Counts one valid datagram of `len` bytes, number `seq`, stamped
    /// before `omit`, that the tracker saw as `arrival`.
    #[inline]
    fn record(&mut self, len: usize, seq: u64, arrival: Arrival) {
        self.bytes += len as u64;
        self.datagrams += 1;
        match arrival {
            Arrival::InOrder { .. } => self.received += 1,
            Arrival::Reordered { .. } => {
                self.received += 1;
                self.reordered += 1;
            }
            Arrival::Duplicate => self.duplicates += 1,
            Arrival::Late => self.late += 1,
            Arrival::BeyondWindow => {}
        }
        self.numbers = self.numbers.max(seq.saturating_add(1));
    }
}

/// The sans-IO core of one receiving UDP stream.
#[derive(Debug)]
pub struct UdpReceiver {
    cfg: ReceiverConfig,
    tracker: SeqTracker,
    jitter: Jitter,
    /// Past the drain deadline by arrival time: what arrives now is late.
    late: bool,
    drops: Option<u32>,
    warmup: Warmup,
    /// `-O`: the lowest number seen stamped at or past `omit`.
    measured_from: Option<u64>,
    out: UdpRecv,
}

impl UdpReceiver {
    pub fn new(cfg: ReceiverConfig) -> Self {
        UdpReceiver {
            cfg,
            tracker: SeqTracker::default(),
            jitter: Jitter::default(),
            late: false,
            drops: None,
            warmup: Warmup::default(),
            measured_from: None,
            out: UdpRecv::default(),
        }
    }

    /// Classifies one datagram's bytes: this stream's test datagram (its
    /// header), a control greeting (`None`), or corrupt.
    #[inline]
    pub fn classify(&self, d: &[u8], truncated: bool) -> Result<Option<Header>, Corrupt> {
        if truncated {
            return Err(Corrupt::Truncated { buffer: d.len() });
        }
        if d.starts_with(&wire::MAGIC) {
            return Ok(None);
        }
        let h = DatagramHeader::new_checked(d)
            .and_then(|v| v.parse())
            .map_err(Corrupt::Datagram)?;
        if h.stream != self.cfg.stream {
            return Err(Corrupt::Stream {
                got: h.stream,
                want: self.cfg.stream,
            });
        }
        if d.len() != self.cfg.len {
            return Err(Corrupt::Length {
                got: d.len(),
                want: self.cfg.len,
            });
        }
        if self.cfg.verify {
            if h.flags & FLAG_PATTERN == 0 {
                return Err(Corrupt::NoPattern);
            }
            check_pattern(&d[HEADER_LEN..], h.seq).map_err(Corrupt::Datagram)?;
        }
        Ok(Some(h))
    }

    /// One datagram `d` (`truncated`: it did not fit the buffer) that
    /// arrived at `arrival`, with the drain deadline at `drain_at` (ns
    /// since Start; `u64::MAX` while unknown).
    #[inline]
    pub fn on_datagram(
        &mut self,
        d: &[u8],
        truncated: bool,
        arrival: u64,
        drain_at: u64,
    ) -> Verdict {
        if !self.late && arrival >= drain_at {
            // The queue is in arrival order: everything after is late too.
            self.tracker.close();
            self.late = true;
        }
        let h = match self.classify(d, truncated) {
            Ok(Some(h)) => h,
            Ok(None) => return Verdict::Greeting,
            Err(why) => {
                self.out.corrupt += 1;
                if self.out.first_corrupt.is_none() {
                    self.out.first_corrupt = Some(why.to_string());
                }
                return Verdict::Corrupt(why);
            }
        };
        let seen = self.tracker.record(h.seq);
        if h.send_ns < self.cfg.omit_ns {
            self.warmup.record(d.len(), h.seq, seen);
        } else if self.cfg.omit_ns > 0 {
            let low = self.measured_from.map_or(h.seq, |m| m.min(h.seq));
            self.measured_from = Some(low);
        }
        if !self.late {
            self.jitter.record(h.send_ns, arrival);
            self.out.last_recv_ns = arrival;
        }
        self.out.datagrams += 1;
        if self.out.first_recv_ns == 0 {
            self.out.first_recv_ns = arrival;
        }
        Verdict::Data
    }

    /// The socket's cumulative drop counter, as a receive reported it.
    #[inline]
    pub fn on_drops(&mut self, drops: u32) {
        self.drops = Some(drops);
    }

    /// The counters now.
    #[inline]
    pub fn live(&self) -> LiveCounts {
        let numbers = self.measured_from.unwrap_or(self.warmup.numbers);
        LiveCounts {
            warmup: Some(Warmup {
                numbers,
                ..self.warmup
            }),
            ..live_counts(
                &self.tracker,
                &self.jitter,
                &self.out,
                self.drops.map(u64::from),
            )
        }
    }

    /// What the stream measured, the warm-up still in (the sampler takes
    /// it out: [`crate::interval::leave_out_warmup`]). `issued` and
    /// `omitted`: the sender's counts from its SendDone (numbers
    /// `0..issued` issued, `0..omitted` in the warm-up); `meminfo_drops`: the socket's drop counter read at the end
    /// (SO_MEMINFO also sees drops after the last datagram delivered; the
    /// SO_RXQ_OVFL message only rides on delivered ones); `rcvbuf`: the
    /// receive buffer in effect.
    pub fn finish(
        self,
        (issued, omitted): (Option<u64>, u64),
        meminfo_drops: Option<u64>,
        rcvbuf: Option<u64>,
    ) -> UdpRecv {
        let cmsg_drops = self.drops.map(u64::from);
        let socket_drops = meminfo_drops
            .map(|m| m.max(cmsg_drops.unwrap_or(0)))
            .or(cmsg_drops);
        // A cut past what the sender issued is no cut it made: capped as
        // the intervals cap it (`LiveCounts::at_sender_cut`), so the
        // totals stay the sum of the intervals whatever a peer claims.
        let out = UdpRecv {
            omitted_numbers: issued.map_or(omitted, |i| omitted.min(i)),
            ..self.out
        };
        finish_counts(
            &self.tracker,
            &self.jitter,
            out,
            issued,
            socket_drops,
            rcvbuf,
        )
    }
}

impl LiveCounts {
    /// A receiver's counts with the warm-up's numbers at its sender's cut
    /// (`omitted`, from its SendDone: numbers `0..omitted` were the
    /// warm-up's, of `issued`), where the stream tells its warm-up by the
    /// datagrams' stamps: the end's interval then counts, as the totals
    /// do ([`crate::interval::leave_out_warmup`]), the first measured
    /// numbers lost before the receiver saw any measured one. An `omitted`
    /// of 0 names no cut (an older sender's SendDone has none, and the wire
    /// leaves 0 out): the receiver's own account stands, so an older peer's
    /// warm-up is never counted as lost.
    pub fn at_sender_cut(mut self, omitted: u64, issued: u64) -> Self {
        if let Some(w) = self.warmup.as_mut().filter(|_| omitted > 0) {
            w.numbers = omitted.min(issued);
        }
        self
    }
}

/// A receiving stream's counters now, from its sequence and jitter
/// accounts and what it has counted itself (datagrams, corrupt ones): the
/// one place both receivers (linerate's datagrams and iperf3's, which keep
/// the same exact account beside iperf3's own) build them.
pub fn live_counts(
    tracker: &SeqTracker,
    jitter: &Jitter,
    out: &UdpRecv,
    socket_drops: Option<u64>,
) -> LiveCounts {
    let c = tracker.counts();
    LiveCounts {
        datagrams: out.datagrams,
        received: c.received,
        next_expected: c.next_expected,
        duplicates: c.duplicates,
        reordered: c.reordered,
        late: c.late,
        corrupt: out.corrupt,
        jitter_ns: jitter.ns(),
        socket_drops,
        warmup: None,
    }
}

/// A receiving stream's final account: `out` (what the stream counted
/// itself) with the sequence and jitter accounts, loss against `issued`
/// (the sender's count, when known), the socket's drops and buffer size.
pub fn finish_counts(
    tracker: &SeqTracker,
    jitter: &Jitter,
    out: UdpRecv,
    issued: Option<u64>,
    socket_drops: Option<u64>,
    rcvbuf: Option<u64>,
) -> UdpRecv {
    let c = tracker.counts();
    let mut r = UdpRecv {
        received: c.received,
        duplicates: c.duplicates,
        reordered: c.reordered,
        max_reorder_distance: c.max_reorder_distance,
        late: c.late,
        beyond_window: c.beyond_window,
        next_expected: c.next_expected,
        jitter_ns: jitter.ns(),
        socket_drops,
        rcvbuf,
        ..out
    };
    r.count_loss(issued);
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datagram::{fill_pattern, malformed, FaultKind};

    fn datagram(stream: u32, seq: u64, send_ns: u64, len: usize) -> Vec<u8> {
        let mut d = vec![0u8; len];
        Header {
            flags: FLAG_PATTERN,
            stream,
            seq,
            send_ns,
            len: len as u32,
        }
        .emit(&mut d);
        fill_pattern(&mut d[HEADER_LEN..], seq);
        d
    }

    fn rx(verify: bool) -> UdpReceiver {
        UdpReceiver::new(ReceiverConfig {
            stream: 3,
            len: 100,
            verify,
            omit_ns: 0,
        })
    }

    #[test]
    fn corruption_is_named_as_before() {
        let r = rx(true);
        let good = datagram(3, 5, 0, 100);
        let why = |d: &[u8], t| r.classify(d, t).expect_err("corrupt").to_string();
        assert_eq!(
            why(&good, true),
            "datagram longer than the 100-byte receive buffer"
        );
        assert_eq!(
            why(&datagram(4, 5, 0, 100), false),
            "stream id 4 on stream 3's socket"
        );
        assert_eq!(
            why(&datagram(3, 5, 0, 99), false),
            "99 bytes, the test sends 100"
        );
        let mut junk = vec![0u8; 100];
        let n = malformed(FaultKind::Payload, &good, &mut junk);
        assert_eq!(
            why(&junk[..n], false),
            "payload differs from the pattern at byte 99"
        );
        let n = malformed(FaultKind::Short, &good, &mut junk);
        assert_eq!(
            why(&junk[..n], false),
            "shorter than the 28-byte header (10 bytes)"
        );
        let mut plain = good.clone();
        plain[3] = 0; // no pattern flag
        assert_eq!(why(&plain, false), "no payload pattern to verify");
        // Without --verify the payload is not looked at.
        assert!(rx(false).classify(&junk[..100], false).is_ok());
    }

    #[test]
    fn a_greeting_is_neither_data_nor_corrupt() {
        let mut r = rx(true);
        assert_eq!(
            r.on_datagram(b"LR\x01hello", false, 10, u64::MAX),
            Verdict::Greeting
        );
        let l = r.live();
        assert_eq!((l.datagrams, l.corrupt), (0, 0));
    }

    #[test]
    fn arrivals_at_or_after_the_deadline_are_late_and_untimed() {
        let mut r = rx(true);
        for (seq, arrival) in [(0, 1_000), (2, 2_000), (1, 5_000), (3, 5_001)] {
            let v = r.on_datagram(&datagram(3, seq, arrival - 500, 100), false, arrival, 5_000);
            assert_eq!(v, Verdict::Data);
        }
        r.on_drops(4);
        let live = r.live();
        assert_eq!((live.datagrams, live.received, live.late), (4, 2, 2));
        assert_eq!(live.socket_drops, Some(4));
        let out = r.finish((Some(4), 0), Some(2), Some(1 << 20));
        assert_eq!(out.received, 2);
        assert_eq!(out.late, 2);
        assert_eq!(out.lost, Some(2), "late datagrams are not subtracted");
        assert_eq!((out.first_recv_ns, out.last_recv_ns), (1_000, 2_000));
        assert_eq!(out.jitter_ns, 0.0, "equal transit times");
        // The larger of the two drop counters.
        assert_eq!(out.socket_drops, Some(4));
        assert_eq!(out.rcvbuf, Some(1 << 20));
    }

    /// Issue 28 (noticed in round 2): a SendDone whose warm-up cut lies
    /// past the numbers it issued was capped in the intervals only; the
    /// totals took it whole.
    #[test]
    fn issue_28_a_senders_cut_past_what_it_issued_is_capped_in_the_totals() {
        let mut r = rx(true);
        for seq in 0..4 {
            r.on_datagram(&datagram(3, seq, 500, 100), false, 1_000, u64::MAX);
        }
        let out = r.finish((Some(4), u64::MAX), None, None);
        assert_eq!(out.omitted_numbers, 4, "the cut, at most what was issued");
        assert_eq!((out.issued, out.lost), (Some(0), Some(0)));
    }

    #[test]
    fn only_the_first_corruption_is_put_in_words() {
        let mut r = rx(true);
        for _ in 0..3 {
            let v = r.on_datagram(&[0u8; 5], false, 1, u64::MAX);
            assert!(matches!(v, Verdict::Corrupt(Corrupt::Datagram(_))));
        }
        let out = r.finish((None, 0), None, None);
        assert_eq!(out.corrupt, 3);
        assert_eq!(
            out.first_corrupt.as_deref(),
            Some("shorter than the 28-byte header (5 bytes)")
        );
        assert_eq!(out.lost, None);
    }
}
