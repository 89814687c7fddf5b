//! Simulated UDP stream for the data-plane cores, on a virtual clock.
//!
//! A [`UdpSender`] hands out batches; a simulated link carries each
//! datagram with a fixed delay, dropping the ones a test names; a
//! [`UdpReceiver`] takes them in arrival order, in receive batches of any
//! size; an [`IntervalCutter`] cuts the receiver's live counters into
//! intervals. Time only moves when the simulation says so; nothing sleeps.
//!
//! Covered: exact accounting of every injected fault (skip, dup, swap and
//! every malformed kind) and of link drops, with any send and receive batch
//! sizes and any partial sends; late arrivals after the drain deadline; and
//! intervals that add up to the final counts.

use linerate_proto::datagram::{Fault, FaultKind};
use linerate_proto::interval::{CutStream, IntervalCutter, Sample};
use linerate_proto::measure::{Role, UdpRecv, UdpSend};
use linerate_proto::udp_receiver::{ReceiverConfig, UdpReceiver, Verdict};
use linerate_proto::udp_sender::{Linerate, SenderConfig, Transmit, UdpSender};
use proptest::prelude::*;

const LEN: usize = 200;
const DELAY: u64 = 50_000;

/// One datagram in flight: its bytes and when it arrives.
struct InFlight {
    at: u64,
    bytes: Vec<u8>,
}

struct Sim {
    tx: UdpSender,
    rx: UdpReceiver,
    cutter: IntervalCutter,
    /// Good datagrams the link loses, by their order of sending.
    drop_nth: Vec<u64>,
    sent_good: u64,
    link: std::collections::VecDeque<InFlight>,
    now: u64,
    records: Vec<linerate_proto::measure::IntervalMeasurement>,
}

impl Sim {
    fn new(faults: Vec<Fault>, limit: u64, max_batch: usize, drop_nth: Vec<u64>) -> Self {
        Sim {
            tx: UdpSender::new(SenderConfig {
                stream: 1,
                len: LEN,
                millipps: Some(100_000_000), // 100 k/s: one per 10 µs
                burst: 2,
                verify: true,
                faults,
                limit: Some(limit),
                max_batch,
                format: Linerate,
                omit_ns: 0,
            }),
            rx: UdpReceiver::new(ReceiverConfig {
                stream: 1,
                len: LEN,
                verify: true,
                omit_ns: 0,
            }),
            cutter: IntervalCutter::new(
                vec![CutStream {
                    id: 1,
                    role: Role::Receiver,
                }],
                0,
                100_000,
                None,
            ),
            drop_nth,
            sent_good: 0,
            link: Default::default(),
            now: 0,
            records: Vec::new(),
        }
    }

    fn sample(&self) -> [Sample; 1] {
        let l = self.rx.live();
        [Sample {
            bytes: l.datagrams * LEN as u64,
            udp: Some(l),
            tcp: None,
        }]
    }

    /// Delivers what has arrived by `self.now`, `batch` at a time.
    fn receive(&mut self, batch: usize, drain_at: u64) {
        while self.link.front().is_some_and(|d| d.at <= self.now) {
            for _ in 0..batch {
                let Some(d) = self.link.pop_front() else {
                    break;
                };
                let v = self.rx.on_datagram(&d.bytes, false, d.at, drain_at);
                assert_ne!(v, Verdict::Greeting);
            }
        }
        if self.cutter.cut_due(self.now) {
            let s = self.sample();
            self.records.push(self.cutter.cut(self.now, &s));
        }
    }

    /// Sends everything; the receiver reads as it arrives. `accept` gives
    /// how many datagrams of each batch the kernel takes.
    fn run(&mut self, accept: &[usize], rx_batch: usize) -> UdpSend {
        let mut call = 0;
        loop {
            match self.tx.poll_transmit(self.now) {
                Transmit::Done => break,
                Transmit::Wait(t) => self.now = t,
                Transmit::Junk(d) => {
                    self.link.push_back(InFlight {
                        at: self.now + DELAY,
                        bytes: d.to_vec(),
                    });
                    self.tx.on_junk_sent();
                }
                Transmit::Send { bytes, segment } => {
                    let n = accept[call % accept.len()].clamp(1, bytes.len() / segment);
                    call += 1;
                    for d in bytes.chunks(segment).take(n) {
                        if !self.drop_nth.contains(&self.sent_good) {
                            self.link.push_back(InFlight {
                                at: self.now + DELAY,
                                bytes: d.to_vec(),
                            });
                        }
                        self.sent_good += 1;
                    }
                    self.tx.on_sent(n);
                    self.now += 1_000;
                }
            }
            self.receive(rx_batch, u64::MAX);
        }
        self.tx_finish()
    }

    fn tx_finish(&mut self) -> UdpSend {
        let tx = std::mem::replace(
            &mut self.tx,
            UdpSender::new(SenderConfig {
                stream: 0,
                len: LEN,
                millipps: None,
                burst: 1,
                verify: false,
                faults: Vec::new(),
                limit: Some(0),
                max_batch: 1,
                format: Linerate,
                omit_ns: 0,
            }),
        );
        tx.finish(self.now)
    }

    /// Lets the link drain, with the deadline at `drain_at`, and finishes.
    fn drain(
        mut self,
        rx_batch: usize,
        drain_at: u64,
        issued: u64,
    ) -> (UdpRecv, Vec<linerate_proto::measure::IntervalMeasurement>) {
        while !self.link.is_empty() {
            self.now += 10_000;
            self.receive(rx_batch, drain_at);
        }
        let s = self.sample();
        self.records.extend(self.cutter.finish(self.now, &s));
        (self.rx.finish((Some(issued), 0), None, None), self.records)
    }
}

fn any_faults() -> impl Strategy<Value = Vec<Fault>> {
    let kind = prop_oneof![
        Just(FaultKind::Skip),
        Just(FaultKind::Dup),
        Just(FaultKind::Swap),
        Just(FaultKind::Short),
        Just(FaultKind::Magic),
        Just(FaultKind::Stream),
        Just(FaultKind::Length),
        Just(FaultKind::Payload),
    ];
    proptest::collection::vec((0u64..100, kind), 0..12).prop_map(|v| {
        let mut f: Vec<Fault> = v
            .into_iter()
            .map(|(seq, kind)| Fault { seq, kind })
            .collect();
        f.sort();
        let mut next_free = 0;
        f.retain(|x| {
            let ok = x.seq >= next_free;
            if ok {
                next_free = x.seq + if x.kind == FaultKind::Swap { 2 } else { 1 };
            }
            ok
        });
        f
    })
}

proptest! {
    /// The receiver counts exactly what the sender injected and the link
    /// lost, whatever the batch sizes on either side; the intervals add up
    /// to the same counts.
    #[test]
    fn issue_7_every_fault_and_drop_is_counted_exactly_with_any_batch_sizes(
        faults in any_faults(),
        max_batch in 1usize..9,
        accept in proptest::collection::vec(1usize..9, 1..5),
        rx_batch in 1usize..9,
        drops in proptest::collection::btree_set(0u64..130, 0..5),
    ) {
        // Faults must be below the count so each shows (one at the limit
        // may issue past it; the sender tests cover that).
        let limit = 120;
        let faults: Vec<Fault> = faults.into_iter().filter(|f| f.seq + 2 < limit).collect();
        let count = |k: FaultKind| faults.iter().filter(|f| f.kind == k).count() as u64;
        let drops: Vec<u64> = drops.into_iter().collect();
        let mut sim = Sim::new(faults.clone(), limit, max_batch, drops.clone());
        let sent = sim.run(&accept, rx_batch);
        prop_assert_eq!(sent.issued, limit);
        let good = limit - count(FaultKind::Skip) + count(FaultKind::Dup);
        prop_assert_eq!(sent.datagrams, good);
        let lost_on_link = drops.iter().filter(|&&n| n < good).count() as u64;
        let (got, records) = sim.drain(rx_batch, u64::MAX, sent.issued);
        let malformed = count(FaultKind::Short) + count(FaultKind::Magic) + count(FaultKind::Stream)
            + count(FaultKind::Length) + count(FaultKind::Payload);
        prop_assert_eq!(got.corrupt, malformed);
        prop_assert_eq!(got.datagrams, good - lost_on_link);
        // A dropped copy of a duplicated number is no loss, only one
        // duplicate fewer; the counts still balance exactly.
        prop_assert_eq!(got.received + got.duplicates, got.datagrams);
        prop_assert_eq!(got.lost, Some(sent.issued - got.received));
        if lost_on_link == 0 {
            prop_assert_eq!(got.lost, Some(count(FaultKind::Skip)));
            prop_assert_eq!(got.duplicates, count(FaultKind::Dup));
            prop_assert_eq!(got.reordered, count(FaultKind::Swap));
            prop_assert_eq!(got.max_reorder_distance, u64::from(count(FaultKind::Swap) > 0));
        }
        // Intervals add up to the final counts.
        let sum = |f: fn(&linerate_proto::measure::UdpInterval) -> u64| -> u64 {
            records.iter().map(|r| f(r.streams[0].udp.as_ref().expect("udp"))).sum()
        };
        prop_assert_eq!(sum(|u| u.datagrams), got.datagrams);
        prop_assert_eq!(sum(|u| u.received.unwrap_or(0)), got.received);
        prop_assert_eq!(sum(|u| u.corrupt.unwrap_or(0)), got.corrupt);
        prop_assert_eq!(sum(|u| u.duplicates.unwrap_or(0)), got.duplicates);
        let lost: i64 = records.iter().map(|r| r.streams[0].udp.as_ref().and_then(|u| u.lost).unwrap_or(0)).sum();
        prop_assert_eq!(lost as u64, got.next_expected - got.received);
    }
}

#[test]
fn issue_7_datagrams_arriving_after_the_drain_deadline_are_late_not_lost() {
    let mut sim = Sim::new(Vec::new(), 50, 4, Vec::new());
    // Send everything before reading anything, then read with a deadline
    // the last ten arrivals miss.
    loop {
        match sim.tx.poll_transmit(sim.now) {
            Transmit::Done => break,
            Transmit::Wait(t) => sim.now = t,
            Transmit::Junk(_) => unreachable!("no faults"),
            Transmit::Send { bytes, segment } => {
                let n = bytes.len() / segment;
                for d in bytes.chunks(segment) {
                    sim.link.push_back(InFlight {
                        at: sim.now + DELAY,
                        bytes: d.to_vec(),
                    });
                }
                sim.tx.on_sent(n);
                sim.now += 1_000;
            }
        }
    }
    let sent = sim.tx_finish();
    let deadline = sim.link[40].at;
    let (got, _) = sim.drain(3, deadline, sent.issued);
    assert_eq!(got.received, 40);
    assert_eq!(got.late, 10);
    assert_eq!(got.datagrams, 50);
    assert_eq!(
        got.lost,
        Some(10),
        "late ones are not subtracted from the loss"
    );
    assert!(got.last_recv_ns < deadline);
}

/// Issue 28: `udp -O` with the receiver's sampler descheduled. The sender
/// (paced, a datagram per 10 µs) and its cutter run on the sender's clock;
/// the receiver's cutter sees its clock `LAG` behind, so its omit cut
/// comes 2.3 ms (230 datagrams) late. One datagram stamped just before the
/// omit arrives 3 ms late (after measured ones), and the link drops the
/// 100th datagram (the warm-up's) and the first stamped at or past the
/// omit. Both ends must count the same measured datagrams: the receiver's
/// are the sender's less the one measured dropped, its loss that one (not
/// the warm-up's), and each end's intervals add up to its totals.
#[test]
fn issue_28_both_ends_count_the_same_measured_datagrams_when_the_receiver_lags() {
    use linerate_proto::interval::leave_out_warmup;
    use linerate_proto::measure::StreamMeasurement;
    const MS: u64 = 1_000_000;
    const OMIT: u64 = 10 * MS;
    const LAG: u64 = 2_300_000;
    let mut tx = UdpSender::new(SenderConfig {
        stream: 1,
        len: LEN,
        millipps: Some(100_000_000),
        burst: 1,
        verify: true,
        faults: Vec::new(),
        limit: Some(3_000),
        max_batch: 1,
        format: Linerate,
        omit_ns: OMIT,
    });
    let mut rx = UdpReceiver::new(ReceiverConfig {
        stream: 1,
        len: LEN,
        verify: true,
        omit_ns: OMIT,
    });
    let cutter = |role| IntervalCutter::new(vec![CutStream { id: 1, role }], OMIT, 5 * MS, None);
    let (mut tx_cut, mut rx_cut) = (cutter(Role::Sender), cutter(Role::Receiver));
    // (arrival, bytes), delivered in arrival order.
    let mut link: Vec<(u64, Vec<u8>)> = Vec::new();
    let (mut tx_records, mut rx_records) = (Vec::new(), Vec::new());
    let (mut now, mut dropped_first_measured, mut sent_good) = (0u64, false, 0u64);
    let receive = |now: u64, link: &mut Vec<(u64, Vec<u8>)>, rx: &mut UdpReceiver| {
        link.sort_by_key(|d| d.0);
        let n = link.iter().take_while(|d| d.0 <= now).count();
        for (at, d) in link.drain(..n) {
            assert_eq!(rx.on_datagram(&d, false, at, u64::MAX), Verdict::Data);
        }
    };
    loop {
        match tx.poll_transmit(now) {
            Transmit::Done => break,
            Transmit::Wait(t) => now = t,
            Transmit::Junk(_) => unreachable!("no faults"),
            Transmit::Send { bytes, segment } => {
                for d in bytes.chunks(segment) {
                    let late = (OMIT - 10_000..OMIT).contains(&now);
                    let extra = if late { 3 * MS } else { 0 };
                    sent_good += 1;
                    if now >= OMIT && !dropped_first_measured {
                        dropped_first_measured = true;
                    } else if sent_good != 100 {
                        link.push((now + DELAY + extra, d.to_vec()));
                    }
                }
                let n = bytes.len() / segment;
                tx.on_sent(n);
                now += 1_000;
            }
        }
        if tx_cut.cut_due(now) {
            tx_records.push(tx_cut.cut(now, &tx_sample(&tx)));
        }
        receive(now, &mut link, &mut rx);
        let rx_now = now.saturating_sub(LAG);
        if rx_cut.cut_due(rx_now) {
            rx_records.push(rx_cut.cut(rx_now, &rx_sample(&rx)));
        }
    }
    tx_records.extend(tx_cut.finish(now, &tx_sample(&tx)));
    let sent = tx.finish(now);
    let sender = leave_out_warmup(
        StreamMeasurement {
            id: 1,
            bytes: sent.datagrams * LEN as u64,
            udp_send: Some(sent.clone()),
            ..StreamMeasurement::default()
        },
        &tx_cut.at_omit()[0],
    );
    now += 10 * MS;
    receive(now, &mut link, &mut rx);
    rx_records.extend(rx_cut.finish(now, &rx_sample(&rx)));
    let got = rx.finish((Some(sent.issued), sent.omitted_numbers), None, None);
    let receiver = leave_out_warmup(
        StreamMeasurement {
            id: 1,
            bytes: got.datagrams * LEN as u64,
            udp_recv: Some(got),
            ..StreamMeasurement::default()
        },
        &rx_cut.at_omit()[0],
    );
    let s = sender.udp_send.clone().expect("sender");
    let r = receiver.udp_recv.clone().expect("receiver");
    assert_eq!(r.received + 1, s.datagrams, "sender {s:?}\nreceiver {r:?}");
    assert_eq!((r.issued, r.lost), (Some(s.datagrams), Some(1)), "{r:?}");
    assert_eq!(r.reordered, 0, "the late warm-up datagram is the warm-up's");
    assert_eq!(measured(&tx_records), (sender.bytes, s.datagrams));
    assert_eq!(measured(&rx_records), (receiver.bytes, r.datagrams));
}

/// A sender's live counters as its side's sampler reads them.
fn tx_sample(tx: &UdpSender) -> [Sample; 1] {
    [Sample {
        bytes: tx.datagrams() * LEN as u64,
        udp: Some(tx.live()),
        tcp: None,
    }]
}

/// A receiver's live counters as its side's sampler reads them.
fn rx_sample(rx: &UdpReceiver) -> [Sample; 1] {
    let l = rx.live();
    [Sample {
        bytes: l.datagrams * LEN as u64,
        udp: Some(l),
        tcp: None,
    }]
}

/// The bytes and datagrams of the non-omitted intervals.
fn measured(records: &[linerate_proto::measure::IntervalMeasurement]) -> (u64, u64) {
    let stream = |r: &linerate_proto::measure::IntervalMeasurement| {
        let s = &r.streams[0];
        (s.bytes, s.udp.as_ref().map_or(0, |u| u.datagrams))
    };
    let kept = records.iter().filter(|r| !r.omitted).map(stream);
    kept.fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
}
