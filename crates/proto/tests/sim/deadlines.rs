//! Simulated pair: handshake, data-phase and results deadlines.

use std::time::Duration;

use linerate_proto::limits::ServerLimits;
use linerate_proto::session::server::Admission;
use linerate_proto::session::{
    ControlIoError, SessionError, DRAIN_CAP, HANDSHAKE_TIMEOUT, RESULTS_TIMEOUT, STALL_GRACE,
};
use linerate_proto::spec::{Direction, TestSpec};
use linerate_proto::wire::Side;

use crate::harness::*;

const NS: Duration = Duration::from_nanos(1);

#[test]
fn client_times_out_at_each_handshake_step() {
    let cases = [
        (Stage::Fresh, "waiting for the server to accept", 0),
        (Stage::Accepted, "opening data connections", 1),
        (Stage::Opened, "waiting for the server to start the test", 1),
    ];
    for (stage, state, aborts) in cases {
        let mut p = Pair::new(TestSpec::default());
        // Let time pass between steps so each deadline is visibly re-armed.
        if stage >= Stage::Accepted {
            p.advance(Duration::from_secs(7));
            p.handshake();
        }
        if stage >= Stage::Opened {
            p.advance(Duration::from_secs(7));
            p.client.streams_opened(p.now);
        }
        let deadline = p.client.poll_timeout().expect("handshake deadline");
        assert_eq!(deadline, p.now + HANDSHAKE_TIMEOUT, "{stage:?}");
        assert_eq!(
            deadline - p.base,
            Duration::from_secs(7) * (stage as u32) + HANDSHAKE_TIMEOUT
        );
        p.client.handle_timeout(deadline - NS);
        assert!(!p.client.is_finished(), "{stage:?} fired early");
        p.now = deadline;
        p.client.handle_timeout(p.now);
        assert_eq!(
            *client_error(&p.client),
            SessionError::Control(ControlIoError::Timeout(state))
        );
        assert_eq!(p.client_aborts(), aborts, "{stage:?}");
        assert_eq!(p.client.poll_timeout(), None);
    }
}

#[test]
fn server_times_out_at_each_handshake_step() {
    for (stage, state, aborts) in [
        (Stage::Fresh, "waiting for the client's hello", 0),
        (Stage::Accepted, "waiting for data connections", 1),
    ] {
        let mut p = Pair::new(spec(Direction::Bidir, 4));
        if stage >= Stage::Accepted {
            p.advance(Duration::from_secs(4));
            let (token, spec) = p.handshake();
            // Some, but not all, streams attach; they do not re-arm the deadline.
            p.advance(Duration::from_secs(4));
            let first = spec.stream_plan()[0];
            p.server
                .stream_attached(&data_hello(token, first.id, first.sender), p.now)
                .expect("first stream");
        }
        let armed_at = p.base + Duration::from_secs(4) * u32::from(stage >= Stage::Accepted);
        let deadline = p.server.poll_timeout().expect("handshake deadline");
        assert_eq!(deadline, armed_at + HANDSHAKE_TIMEOUT, "{stage:?}");
        p.server.handle_timeout(deadline - NS);
        assert!(!p.server.is_finished(), "{stage:?} fired early");
        p.server.handle_timeout(deadline + Duration::from_millis(5));
        assert_eq!(
            *server_error(&p.server),
            SessionError::Control(ControlIoError::Timeout(state))
        );
        assert_eq!(p.server_aborts(), aborts, "{stage:?}");
        assert!(p.server.outbox().is_empty(), "a timeout sends nothing");
    }
}

#[test]
fn running_deadline_is_start_plus_time_omit_and_grace() {
    let mut p = Pair::new(timed_spec());
    p.advance(Duration::from_millis(1234));
    p.start();
    let start = p.now;
    let expect = start + Duration::from_millis(7_000) + STALL_GRACE;
    assert_eq!(p.client.started(), Some(start));
    assert_eq!(p.client.poll_timeout(), Some(expect));
    assert_eq!(p.server.poll_timeout(), Some(expect));

    // Streams that never finish: both sides give up at the deadline and stop
    // their streams.
    p.client.handle_timeout(expect - NS);
    p.server.handle_timeout(expect - NS);
    assert!(!p.client.is_finished() && !p.server.is_finished());
    p.now = expect;
    p.client.handle_timeout(p.now);
    p.server.handle_timeout(p.now);
    let stalled = SessionError::Control(ControlIoError::Timeout(
        "waiting for the data streams to finish",
    ));
    assert_eq!(*client_error(&p.client), stalled);
    assert_eq!(*server_error(&p.server), stalled);
    assert_eq!(p.client_aborts(), 1);
    assert_eq!(p.server_aborts(), 1);
}

/// Issue 27: what a sender queued before its planned end can take long to
/// cross a lossy bottleneck (a TCP transfer through qualify's 3000-byte
/// tbf queue read its last byte 7–10 s after the planned end): while the
/// peer's data still arrives, the phase is not stalled, on either side.
#[test]
fn issue_27_a_data_phase_still_receiving_is_not_stalled() {
    let mut p = Pair::new(timed_spec());
    p.start();
    let planned = p.now + Duration::from_millis(7_000) + STALL_GRACE;
    p.now = planned - Duration::from_secs(1);
    let mut last = p.now;
    while p.now < planned + Duration::from_secs(5) {
        p.client.peer_data_arrived(p.now);
        p.server.peer_data_arrived(p.now);
        last = p.now;
        p.advance(Duration::from_secs(1));
        p.client.handle_timeout(p.now);
        p.server.handle_timeout(p.now);
        assert!(
            !p.client.is_finished() && !p.server.is_finished(),
            "stalled {:?} after the planned deadline with data arriving",
            p.now - planned
        );
    }
    // Then nothing arrives: stalled the grace after the last data.
    assert_eq!(p.client.poll_timeout(), Some(last + STALL_GRACE));
    assert_eq!(p.server.poll_timeout(), Some(last + STALL_GRACE));
    p.client.handle_timeout(last + STALL_GRACE - NS);
    p.server.handle_timeout(last + STALL_GRACE - NS);
    assert!(!p.client.is_finished() && !p.server.is_finished());
    p.now = last + STALL_GRACE;
    p.client.handle_timeout(p.now);
    p.server.handle_timeout(p.now);
    let stalled = SessionError::Control(ControlIoError::Timeout(
        "waiting for the data streams to finish",
    ));
    assert_eq!(*client_error(&p.client), stalled);
    assert_eq!(*server_error(&p.server), stalled);
}

/// Issue 27: a peer that keeps trickling data holds a side at most
/// [`DRAIN_CAP`] past the planned deadline, and a server no longer than
/// its `--max-time` allows (though never less than the plan).
#[test]
fn issue_27_data_arriving_holds_a_side_only_up_to_its_cap() {
    let limits = ServerLimits {
        max_time_ms: 30_000,
        ..ServerLimits::default()
    };
    let mut p = Pair::with(timed_spec(), limits, Admission::Admit);
    p.start();
    let planned = p.now + Duration::from_millis(7_000) + STALL_GRACE;
    // --max-time 30 s, plus the spec's 2 s omit, plus a second.
    let server_cap = p.now + Duration::from_secs(33);
    for _ in 0..200 {
        p.client.peer_data_arrived(p.now);
        p.server.peer_data_arrived(p.now);
        p.advance(Duration::from_secs(1));
    }
    assert_eq!(p.client.poll_timeout(), Some(planned + DRAIN_CAP));
    assert_eq!(p.server.poll_timeout(), Some(server_cap));
}

#[test]
fn after_local_finished_the_deadline_is_the_results_timeout() {
    for client_side in [true, false] {
        let mut p = Pair::new(timed_spec());
        let spec = p.start();
        p.advance(Duration::from_millis(7_050));
        if client_side {
            p.client.local_finished(results(Side::Client, &spec), p.now);
            let d = p.client.poll_timeout().expect("results deadline");
            assert_eq!(d, p.now + RESULTS_TIMEOUT);
            // The server gets the client's results but never sends its own.
            p.shuttle();
            assert!(!p.client.is_finished());
            p.client.handle_timeout(d - NS);
            assert!(!p.client.is_finished());
            p.client.handle_timeout(d);
            assert_eq!(
                *client_error(&p.client),
                SessionError::Control(ControlIoError::Timeout("waiting for the server's results"))
            );
            assert_eq!(p.client_aborts(), 0, "streams already ended");
        } else {
            p.server.local_finished(results(Side::Server, &spec), p.now);
            let d = p.server.poll_timeout().expect("results deadline");
            assert_eq!(d, p.now + RESULTS_TIMEOUT);
            p.shuttle();
            p.server.handle_timeout(d - NS);
            assert!(!p.server.is_finished());
            p.server.handle_timeout(d);
            assert_eq!(
                *server_error(&p.server),
                SessionError::Control(ControlIoError::Timeout("waiting for the client's results"))
            );
            assert_eq!(p.server_aborts(), 0, "streams already ended");
        }
    }
}
