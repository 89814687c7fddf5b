//! Simulated pair: handshake, data-phase and results deadlines.

use std::time::Duration;

use linerate_proto::limits::ServerLimits;
use linerate_proto::session::client::ClientSession;
use linerate_proto::session::server::Admission;
use linerate_proto::session::server::ServerSession;
use linerate_proto::session::{
    ControlIoError, SessionError, DRAIN_CAP, HANDSHAKE_TIMEOUT, RESULTS_CAP, RESULTS_TIMEOUT,
    STALL_GRACE,
};
use linerate_proto::spec::{Direction, Limit, TestSpec};
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
        let told = p.server.outbox().take();
        if stage == Stage::Fresh {
            assert!(told.is_empty(), "no hello: the client is not told");
            continue;
        }
        // Issue 28: the client waiting for the start is told why it will
        // not come (it printed only "peer closed the control connection").
        p.deliver_to_client(&told);
        let SessionError::PeerAborted(why) = client_error(&p.client) else {
            panic!("the client was not told: {:?}", client_error(&p.client));
        };
        assert!(
            why.contains("timed out waiting for data connections: 1 of 8 arrived within 10 s"),
            "{why}"
        );
        assert!(why.contains("--handshake-timeout"), "{why}");
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

const BEAT: Duration = Duration::from_millis(250);

/// A pair whose sides offer heartbeats, as the binary's do.
fn beating_pair(spec: TestSpec) -> Pair {
    let mut p = Pair::new(spec.clone());
    p.client = ClientSession::new(spec, CLIENT_SW, p.base).with_heartbeat(BEAT);
    p.server =
        ServerSession::new(ServerLimits::default(), TOKEN, SERVER_SW, p.base).with_heartbeat(BEAT);
    p
}

/// Moves virtual time on by `total` in heartbeat steps, calling both
/// sides back and carrying their frames across; the `draining` side's
/// receivers still get the peer's data at each step.
fn run_for(p: &mut Pair, total: Duration, draining: Side) {
    let end = p.now + total;
    while p.now < end {
        p.advance(BEAT);
        match draining {
            Side::Client => p.client.peer_data_arrived(p.now),
            Side::Server => p.server.peer_data_arrived(p.now),
        }
        p.client.handle_timeout(p.now);
        p.server.handle_timeout(p.now);
        p.shuttle();
    }
}

/// Issue 26: the side that stopped first waits for the peer's results
/// while the peer is heard (its heartbeats), however long its receivers
/// take to drain what was queued, past the fixed wait.
#[test]
fn issue_26_the_results_wait_moves_on_while_the_peer_is_heard() {
    for client_waits in [true, false] {
        let mut p = beating_pair(timed_spec());
        let spec = p.start();
        p.advance(Duration::from_millis(7_050));
        let (cr, sr) = (results(Side::Client, &spec), results(Side::Server, &spec));
        if client_waits {
            p.client.local_finished(cr.clone(), p.now);
        } else {
            p.server.local_finished(sr.clone(), p.now);
        }
        // The peer's receivers drain for 40 s (its own data deadline
        // moving on as the data arrives), beating all along: far past the
        // fixed wait (RESULTS_TIMEOUT plus the 7 s the streams ran).
        let peer = if client_waits {
            Side::Server
        } else {
            Side::Client
        };
        run_for(&mut p, Duration::from_secs(40), peer);
        assert!(
            !p.client.is_finished() && !p.server.is_finished(),
            "client waits: {client_waits}: {:?} / {:?}",
            p.client.outcome(),
            p.server.outcome()
        );
        if client_waits {
            p.server.local_finished(sr.clone(), p.now);
        } else {
            p.client.local_finished(cr.clone(), p.now);
        }
        p.shuttle();
        assert_completed(&p, &spec, &cr, &sr);
    }
}

/// Issue 26: a peer heard but never reporting holds the waiting side
/// RESULTS_CAP after its end at most; one gone silent (no heartbeats
/// agreed here, so nothing else ends it) RESULTS_TIMEOUT after it was
/// last heard — here its data, arriving after this side's end.
#[test]
fn issue_26_the_results_wait_is_capped_and_ends_after_the_peer_goes_quiet() {
    // Heard forever (its heartbeats; a byte-limited test, whose data
    // phase has no deadline of its own), never reporting: the cap.
    let mut p = beating_pair(TestSpec {
        limit: Limit::Bytes(1 << 40),
        ..timed_spec()
    });
    let spec = p.start();
    p.advance(Duration::from_millis(7_000));
    p.client.local_finished(results(Side::Client, &spec), p.now);
    run_for(&mut p, RESULTS_CAP - BEAT, Side::Server);
    assert!(!p.client.is_finished(), "{:?}", p.client.outcome());
    run_for(&mut p, BEAT, Side::Server);
    assert_eq!(
        *client_error(&p.client),
        SessionError::Control(ControlIoError::Timeout("waiting for the server's results"))
    );
    // Heard last 20 s after this side's end: the wait ends RESULTS_TIMEOUT
    // after that, not RESULTS_TIMEOUT after the end.
    for client_waits in [true, false] {
        let mut p = Pair::new(timed_spec());
        let spec = p.start();
        p.advance(Duration::from_millis(7_050));
        let end = p.now;
        for s in 0..=20 {
            p.now = end + Duration::from_secs(s);
            if client_waits {
                if s == 0 {
                    p.client.local_finished(results(Side::Client, &spec), p.now);
                }
                p.client.peer_data_arrived(p.now);
            } else {
                if s == 0 {
                    p.server.local_finished(results(Side::Server, &spec), p.now);
                }
                p.server.peer_data_arrived(p.now);
            }
        }
        let last = end + Duration::from_secs(20);
        let d = if client_waits {
            p.client.poll_timeout()
        } else {
            p.server.poll_timeout()
        };
        assert_eq!(
            d,
            Some(last + RESULTS_TIMEOUT),
            "client waits: {client_waits}"
        );
        p.now = last + RESULTS_TIMEOUT;
        if client_waits {
            p.client.handle_timeout(p.now - NS);
            assert!(!p.client.is_finished());
            p.client.handle_timeout(p.now);
            assert!(matches!(client_error(&p.client), SessionError::Control(_)));
        } else {
            p.server.handle_timeout(p.now - NS);
            assert!(!p.server.is_finished());
            p.server.handle_timeout(p.now);
            assert!(matches!(server_error(&p.server), SessionError::Control(_)));
        }
    }
}
