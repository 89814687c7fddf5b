//! Simulated pair: `-O` over a linerate UDP stream whose link loses
//! datagrams around the sender's cut (issue 28). A datagram is the
//! warm-up's or the test's by its send stamp, and so is a number missing:
//! warm-up datagrams lost just before the cut are loss of no measured
//! interval (they showed in the first one, though the totals, cut at the
//! sender's number, left them out), and the measured intervals' loss adds
//! up to the totals'.

use linerate_proto::datagram::DatagramHeader;
use linerate_proto::interval::{leave_out_warmup, CutStream, IntervalCutter, Sample};
use linerate_proto::measure::{IntervalMeasurement, Role, StreamMeasurement, UdpRecv};
use linerate_proto::udp_receiver::{ReceiverConfig, UdpReceiver};
use linerate_proto::udp_sender::{Linerate, SenderConfig, Transmit, UdpSender};

const MS: u64 = 1_000_000;
const OMIT: u64 = 1_000 * MS;
const END: u64 = 3_000 * MS;
const LEN: usize = 100;
/// The link's one-way delay.
const DELAY: u64 = MS;

/// What arrives, in order: (arrival ns, datagram), the sender's final
/// counts (issued, omitted), and how many measured datagrams were lost.
type Sent = (Vec<(u64, Vec<u8>)>, (u64, u64), u64);

/// A sender at 1,000 datagrams/s from 0 to [`END`], with its warm-up cut
/// at [`OMIT`], through a link that loses what `lost(stamp)` says.
fn send(lost: impl Fn(u64) -> bool) -> Sent {
    let mut tx = UdpSender::new(SenderConfig {
        stream: 1,
        len: LEN,
        millipps: Some(1_000_000),
        burst: 1,
        verify: false,
        faults: Vec::new(),
        limit: None,
        max_batch: 1,
        format: Linerate,
        omit_ns: OMIT,
    });
    let (mut arrivals, mut measured_lost, mut now) = (Vec::new(), 0, 0);
    while now < END {
        let n = match tx.poll_transmit(now) {
            Transmit::Wait(t) => {
                now = t;
                continue;
            }
            Transmit::Send { bytes, segment } => {
                for d in bytes.chunks(segment) {
                    let h = DatagramHeader::new_checked(d)
                        .and_then(|v| v.parse())
                        .expect("a valid header");
                    if !lost(h.send_ns) {
                        arrivals.push((now + DELAY, d.to_vec()));
                    } else if h.send_ns >= OMIT {
                        measured_lost += 1;
                    }
                }
                bytes.len() / segment
            }
            other => panic!("{other:?}"),
        };
        tx.on_sent(n);
    }
    let done = tx.finish(now);
    (arrivals, (done.issued, done.omitted_numbers), measured_lost)
}

/// The receiving end: its sampler cuts every 500 ms on its own timer (the
/// cut at `omit` before the first measured datagram arrives); the
/// sender's SendDone comes at the end. Its interval records and totals.
fn receive((arrivals, (issued, omitted), _): &Sent) -> (Vec<IntervalMeasurement>, UdpRecv) {
    let mut rx = UdpReceiver::new(ReceiverConfig {
        stream: 1,
        len: LEN,
        verify: false,
        omit_ns: OMIT,
    });
    let role = Role::Receiver;
    let mut cutter =
        IntervalCutter::new(vec![CutStream { id: 1, role }], OMIT, 500 * MS, Some(END));
    let (mut records, mut bytes, mut now) = (Vec::new(), 0, 0);
    let mut next = arrivals.iter().peekable();
    loop {
        let wake = cutter.wake_at(now);
        while let Some((t, d)) = next.next_if(|(t, _)| *t < wake) {
            rx.on_datagram(d, false, *t, u64::MAX);
            bytes += d.len() as u64;
        }
        if next.peek().is_none() && wake >= END {
            break;
        }
        now = wake;
        cutter.take_stop(now);
        if cutter.cut_due(now) {
            let udp = Some(rx.live());
            records.push(cutter.cut(
                now,
                &[Sample {
                    bytes,
                    udp,
                    tcp: None,
                }],
            ));
        }
    }
    // The SendDone names the sender's cut (the engine's live counters).
    let udp = Some(rx.live().at_sender_cut(*omitted, *issued));
    records.extend(cutter.finish(
        END + DELAY,
        &[Sample {
            bytes,
            udp,
            tcp: None,
        }],
    ));
    let whole = StreamMeasurement {
        id: 1,
        bytes,
        udp_recv: Some(rx.finish((Some(*issued), *omitted), None, None)),
        ..StreamMeasurement::default()
    };
    let totals = leave_out_warmup(whole, &cutter.at_omit()[0]);
    (records, totals.udp_recv.expect("a receiver's counts"))
}

fn measured_loss(records: &[IntervalMeasurement]) -> Vec<i64> {
    let kept = records.iter().filter(|r| !r.omitted);
    kept.map(|r| {
        r.streams[0]
            .udp
            .as_ref()
            .and_then(|u| u.lost)
            .expect("lost")
    })
    .collect()
}

#[test]
fn issue_28_udp_loss_just_before_the_cut_is_the_warm_ups() {
    // The last 3 warm-up datagrams and one in the middle of the test lost.
    let sent =
        send(|t| (OMIT - 3 * MS..OMIT).contains(&t) || (2_000 * MS..2_001 * MS).contains(&t));
    assert_eq!(sent.2, 1);
    let (records, totals) = receive(&sent);
    assert_eq!((totals.omitted_numbers, totals.lost), (1_000, Some(1)));
    let lost = measured_loss(&records);
    assert_eq!(lost.len(), 4, "{records:?}");
    assert_eq!(
        lost[0], 0,
        "the warm-up's loss in the first measured interval"
    );
    assert_eq!(lost.iter().sum::<i64>(), 1, "{lost:?}");
    // The first measured datagram lost too: until the sender's SendDone
    // names its cut, it is the warm-up's; then the end counts it, and the
    // intervals still add up to the totals.
    let sent = send(|t| (OMIT - 3 * MS..=OMIT).contains(&t));
    assert_eq!(sent.2, 1);
    let (records, totals) = receive(&sent);
    assert_eq!(totals.lost, Some(1));
    let lost = measured_loss(&records);
    assert_eq!(lost.iter().sum::<i64>(), 1, "{lost:?}");
    assert_eq!(lost[0], 0, "{lost:?}");
}

#[test]
fn issue_28_an_older_sender_without_its_cut_keeps_the_receivers_own() {
    // An older sender's SendDone names no cut (`omitted` absent: 0). Three
    // warm-up datagrams lost (one just before the cut) and one measured.
    let lost = |t: u64| {
        (500 * MS..502 * MS).contains(&t)
            || (OMIT - MS..OMIT).contains(&t)
            || (2_000 * MS..2_001 * MS).contains(&t)
    };
    let (arrivals, (issued, _), measured_lost) = send(lost);
    assert_eq!(measured_lost, 1);
    let (records, totals) = receive(&(arrivals, (issued, 0), measured_lost));
    // The receiver's own cut holds: no warm-up number is measured loss.
    assert_eq!((totals.omitted_numbers, totals.lost), (1_000, Some(1)));
    let lost = measured_loss(&records);
    assert_eq!(lost.iter().sum::<i64>(), 1, "{lost:?}");
    assert!(lost.iter().all(|&l| l <= 1), "{lost:?}");
}
