//! Simulated pair: `-O` over a TCP stream whose receiver lags (issue 28).
//! Each end's interval cutter ends the warm-up on its own timer; the
//! receiver's sampler wakes late and reads what the sender wrote a while
//! ago, so its own cut falls at another byte of the stream. Once the
//! results cross, both ends must hold the same measured bytes, the
//! client's (whose intervals were printed live, cut by its own timer),
//! and each end's measured intervals must add up to them.

use linerate_proto::interval::{leave_out_warmup, CutStream, IntervalCutter, Sample};
use linerate_proto::measure::{Role, SideResults, StreamMeasurement};
use linerate_proto::session::server::ServerOutcome;
use linerate_proto::spec::{Direction, Limit, TestSpec};
use linerate_proto::wire::Side;

use crate::harness::*;

const MS: u64 = 1_000_000;

/// One end of stream 1 as its sampler sees it: `bytes_at(ns)` moved by
/// then, its stream ending at `end` ns, its sampler waking `late` ns
/// after each time it asked for.
fn one_end(
    spec: &TestSpec,
    sender: Side,
    role: Role,
    end: u64,
    late: u64,
    bytes_at: impl Fn(u64) -> u64,
) -> SideResults {
    let omit = spec.omit_ms * MS;
    let Limit::TimeMs(t) = spec.limit else {
        panic!("a timed spec")
    };
    let cut = vec![CutStream { id: 1, role }];
    let mut cutter = IntervalCutter::new(cut, omit, 250 * MS, Some(omit + t * MS));
    let sample = |now: u64| {
        vec![Sample {
            bytes: bytes_at(now.min(end)),
            ..Sample::default()
        }]
    };
    let mut intervals = Vec::new();
    let mut now = 0;
    loop {
        now = cutter.wake_at(now) + late;
        if now >= end {
            break;
        }
        cutter.take_stop(now);
        if cutter.cut_due(now) {
            intervals.push(cutter.cut(now, &sample(now)));
        }
    }
    intervals.extend(cutter.finish(end, &sample(end)));
    let whole = StreamMeasurement {
        id: 1,
        sender: Some(sender),
        bytes: bytes_at(end),
        elapsed_ns: end,
        ..StreamMeasurement::default()
    };
    SideResults {
        streams: vec![leave_out_warmup(whole, &cutter.at_omit()[0])],
        intervals,
        ..SideResults::default()
    }
}

/// What `r`'s measured intervals add up to.
fn measured(r: &SideResults) -> u64 {
    let kept = r.intervals.iter().filter(|iv| !iv.omitted);
    kept.map(|iv| iv.streams[0].bytes).sum()
}

#[test]
fn issue_28_both_ends_of_a_tcp_stream_leave_out_the_clients_warm_up() {
    for direction in [Direction::Forward, Direction::Reverse] {
        let spec = TestSpec {
            direction,
            streams: 1,
            limit: Limit::TimeMs(2_000),
            omit_ms: 1_000,
            ..TestSpec::default()
        };
        let mut p = Pair::new(spec.clone());
        let spec = p.start();
        let sender = match direction {
            Direction::Reverse => Side::Server,
            _ => Side::Client,
        };
        // 1000 bytes per ms until the planned end (3 s); the receiver
        // reads them 5 ms later, and its sampler wakes 40 ms late.
        let sent = |ns: u64| ns.min(3_000 * MS) / 1000;
        let tx = one_end(&spec, sender, Role::Sender, 3_000 * MS, 0, sent);
        let got = |ns: u64| sent(ns.saturating_sub(5 * MS));
        let rx = one_end(&spec, sender, Role::Receiver, 3_005 * MS, 40 * MS, got);
        assert_eq!(tx.streams[0].bytes, 2_000_000);
        assert_ne!(
            rx.streams[0].bytes, tx.streams[0].bytes,
            "the ends' own cuts differ"
        );
        let (cr, sr) = match sender {
            Side::Client => (tx, rx),
            Side::Server => (rx, tx),
        };
        // The client's own cut, and the intervals it printed live.
        let client_cut = (cr.streams[0].bytes, cr.streams[0].omitted_bytes);
        let printed = cr.intervals.clone();
        p.client.local_finished(cr, p.now);
        p.server.local_finished(sr, p.now);
        p.shuttle();
        let Some(Ok((c_local, c_remote))) = p.client.outcome() else {
            panic!("{:?}", p.client.outcome())
        };
        let Some(ServerOutcome::Completed {
            local: s_local,
            remote: s_remote,
            ..
        }) = p.server.outcome()
        else {
            panic!("{:?}", p.server.outcome())
        };
        // Both ends see the same four results: the client's as it
        // measured them, the server's cut at the client's offset.
        assert_eq!((c_local, c_remote), (s_remote, s_local), "{direction:?}");
        assert_eq!(c_local.intervals, printed, "{direction:?}");
        let expected = match sender {
            Side::Client => (2_000_000, 1_000_000),
            Side::Server => (1_965_000, 1_035_000),
        };
        assert_eq!(client_cut, expected, "{direction:?}");
        for r in [c_local, c_remote] {
            let s = &r.streams[0];
            assert_eq!((s.bytes, s.omitted_bytes), expected, "{direction:?}: {s:?}");
            assert_eq!(measured(r), s.bytes, "{direction:?}: {:?}", r.intervals);
        }
    }
}
