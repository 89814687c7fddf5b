//! Simulated pair: the peer closing in every state.

use std::time::Duration;

use linerate_proto::session::{ControlIoError, Ended, SessionError};
use linerate_proto::spec::{Direction, TestSpec};
use linerate_proto::wire::Side;

use crate::harness::*;

#[test]
fn client_peer_closed_in_every_state() {
    let cases = [
        (Stage::Fresh, false, "waiting for the server to accept", 0),
        (Stage::Accepted, false, "opening data connections", 1),
        (
            Stage::Opened,
            false,
            "waiting for the server to start the test",
            1,
        ),
        (Stage::Running, false, "running the test", 1),
        (Stage::Running, true, "running the test", 0),
    ];
    for (stage, local_done, state, aborts) in cases {
        let (mut p, agreed) = pair_at(stage, spec(Direction::Bidir, 2));
        if local_done {
            let s = agreed.expect("running has a spec").1;
            p.client.local_finished(results(Side::Client, &s), p.now);
        }
        p.client.peer_closed();
        assert_eq!(
            *client_error(&p.client),
            SessionError::Control(ControlIoError::PeerClosed(state)),
            "{stage:?}"
        );
        assert_eq!(
            p.client_aborts(),
            aborts,
            "{stage:?} local_done={local_done}"
        );
        assert_eq!(p.client.poll_timeout(), None);
        // Nothing after the end asks for a second abort or changes the outcome.
        p.client.peer_closed();
        p.client.abort("late");
        p.client.handle_timeout(p.now + Duration::from_secs(3600));
        p.client.receive(b"garbage", p.now);
        p.client.streams_failed("late stream error".into());
        assert_eq!(p.client_aborts(), aborts, "{stage:?} second abort");
        assert_eq!(
            *client_error(&p.client),
            SessionError::Control(ControlIoError::PeerClosed(state))
        );
    }
}

#[test]
fn server_peer_closed_in_every_state() {
    let cases = [
        (Stage::Fresh, false, "waiting for the client's hello", 0),
        (Stage::Accepted, false, "waiting for data connections", 1),
        (Stage::Running, false, "running the test", 1),
        (Stage::Running, true, "running the test", 0),
    ];
    for (stage, local_done, state, aborts) in cases {
        let (mut p, agreed) = pair_at(stage, spec(Direction::Reverse, 4));
        if local_done {
            let s = agreed.expect("running has a spec").1;
            p.server.local_finished(results(Side::Server, &s), p.now);
            let _ = p.server.outbox().take();
        }
        p.server.peer_closed();
        assert_eq!(
            *server_error(&p.server),
            SessionError::Control(ControlIoError::PeerClosed(state)),
            "{stage:?}"
        );
        assert_eq!(
            p.server_aborts(),
            aborts,
            "{stage:?} local_done={local_done}"
        );
        assert_eq!(p.server.poll_timeout(), None);
        p.server.peer_closed();
        p.server.abort("late");
        p.server.stream_failed("late".into());
        p.server.handle_timeout(p.now + Duration::from_secs(3600));
        p.server.receive(b"garbage", p.now);
        assert_eq!(p.server_aborts(), aborts, "{stage:?} second abort");
        assert_eq!(
            *server_error(&p.server),
            SessionError::Control(ControlIoError::PeerClosed(state))
        );
        assert!(p.server.outbox().is_empty(), "nothing sent after the end");
    }
}

/// Issue 28: a reset control connection (ECONNRESET) and other failures
/// have their own words on both sides; only end of file is "peer closed".
#[test]
fn issue_28_a_reset_is_not_said_as_the_peers_close() {
    let (mut p, _) = pair_at(Stage::Running, spec(Direction::Forward, 1));
    p.client.connection_ended(Ended::Reset);
    let e = client_error(&p.client);
    assert_eq!(
        *e,
        SessionError::Control(ControlIoError::PeerReset("running the test"))
    );
    let words = e.to_string();
    assert!(
        words.contains("reset the control connection while running the test"),
        "{words}"
    );
    assert!(!words.contains("closed"), "{words}");
    p.server
        .connection_ended(Ended::Failed("No route to host (os error 113)".into()));
    assert_eq!(
        server_error(&p.server).to_string(),
        "the control connection failed while running the test: No route to host (os error 113)"
    );
}

#[test]
fn late_stream_failure_does_not_overwrite_a_completed_client() {
    let mut p = Pair::new(spec(Direction::Forward, 2));
    let spec = p.start();
    let (cr, sr) = p.finish(&spec, true);
    assert_completed(&p, &spec, &cr, &sr);
    p.client.streams_failed("connection reset".into());
    assert_completed(&p, &spec, &cr, &sr);
    assert_eq!(p.client_aborts(), 0);
}

#[test]
fn client_stream_failure_while_connecting_aborts_streams_once() {
    let (mut p, _) = pair_at(Stage::Accepted, TestSpec::default());
    p.client.streams_failed("connection refused".into());
    assert_eq!(
        *client_error(&p.client),
        SessionError::Stream("connection refused".into())
    );
    assert_eq!(p.client_aborts(), 1);
    p.client.streams_failed("second".into());
    assert_eq!(p.client_aborts(), 1);
}
