//! Simulated pair: aborts from either side, early stops and the server
//! shutting down.

use std::time::Duration;

use linerate_proto::session::client::ClientAction;
use linerate_proto::session::server::ServerAction;
use linerate_proto::session::{EarlyStop, SessionError};
use linerate_proto::spec::{Direction, TestSpec};
use linerate_proto::wire::Message;

use crate::harness::*;

#[test]
fn client_abort_while_running_reaches_the_server() {
    let (mut p, _) = pair_at(Stage::Running, spec(Direction::Bidir, 4));
    p.client.abort("interrupted");
    assert_eq!(
        *client_error(&p.client),
        SessionError::Aborted("interrupted".into())
    );
    assert_eq!(p.client_aborts(), 1);
    let sent = p.client.outbox().take();
    match &frames(&sent)[..] {
        [Message::Abort(a)] => assert_eq!(a.reason, "interrupted"),
        other => panic!("expected one Abort frame, got {other:?}"),
    }
    p.chunks = vec![1];
    p.deliver_to_server(&sent);
    assert_eq!(
        *server_error(&p.server),
        SessionError::PeerAborted("interrupted".into())
    );
    assert_eq!(p.server_aborts(), 1);
    // Aborting twice queues nothing more.
    p.client.abort("again");
    assert!(p.client.outbox().is_empty());
    assert_eq!(p.client_aborts(), 1);
}

#[test]
fn server_abort_and_stream_failure_reach_the_client() {
    for via_stream_failure in [false, true] {
        let (mut p, _) = pair_at(Stage::Running, TestSpec::default());
        if via_stream_failure {
            p.server.stream_failed("disk on fire".into());
            assert_eq!(
                *server_error(&p.server),
                SessionError::Stream("disk on fire".into())
            );
        } else {
            p.server.abort("disk on fire");
            assert_eq!(
                *server_error(&p.server),
                SessionError::Aborted("disk on fire".into())
            );
        }
        p.shuttle();
        assert_eq!(
            *client_error(&p.client),
            SessionError::PeerAborted("disk on fire".into())
        );
        assert_eq!(p.server_aborts(), 1);
        assert_eq!(p.client_aborts(), 1);
    }
}

#[test]
fn issue_13_stop_early_finishes_both_sides_with_results() {
    let (mut p, started) = pair_at(Stage::Running, spec(Direction::Bidir, 2));
    let (_, spec) = started.expect("running");
    p.advance(Duration::from_secs(2));
    assert!(p.client.stop_early(), "a running test can stop early");
    assert!(!p.client.stop_early(), "once");
    p.shuttle();
    assert!(p.server.stopped_early());
    assert_eq!(
        count(&p.server_actions, &ServerAction::StopStreams),
        1,
        "{:?}",
        p.server_actions
    );
    // Both sides finish as at the limit: results cross, nothing aborted.
    let (cr, sr) = p.finish(&spec, true);
    assert_completed(&p, &spec, &cr, &sr);
    assert!(p.client.stopped_early());
    assert_eq!(p.client_aborts(), 0);
    assert_eq!(p.server_aborts(), 0);
}

#[test]
fn issue_13_stop_early_is_refused_before_the_test_runs() {
    for stage in [Stage::Fresh, Stage::Accepted, Stage::Opened] {
        let (mut p, _) = pair_at(stage, spec(Direction::Forward, 1));
        assert!(!p.client.stop_early(), "{stage:?}: not running yet");
        assert!(!p.client.stopped_early());
    }
}

/// The server's operator stops it mid-test: the client is told with a
/// Stop, stops its streams too, and both sides still exchange what they
/// measured, each knowing the server stopped it.
#[test]
fn issue_28_server_shutdown_stops_the_test_and_both_sides_report() {
    let (mut p, started) = pair_at(Stage::Running, spec(Direction::Forward, 1));
    let (_, spec) = started.expect("running");
    p.advance(Duration::from_secs(2));
    p.server.shutdown("the server is shutting down");
    p.server.shutdown("the server is shutting down");
    p.shuttle();
    assert_eq!(count(&p.server_actions, &ServerAction::StopStreams), 1);
    assert_eq!(
        count(&p.client_actions, &ClientAction::StopStreams),
        1,
        "{:?}",
        p.client_actions
    );
    assert_eq!(p.server.early_stop(), Some(EarlyStop::ByServer));
    assert_eq!(p.client.early_stop(), Some(EarlyStop::ByServer));
    // The client's own Ctrl-C now has nothing left to stop.
    assert!(!p.client.stop_early());
    let (cr, sr) = p.finish(&spec, true);
    assert_completed(&p, &spec, &cr, &sr);
    assert_eq!(p.client_aborts(), 0);
    assert_eq!(p.server_aborts(), 0);
}

/// A test not running yet when the server stops is aborted with the
/// server's reason, which the client gets.
#[test]
fn issue_28_server_shutdown_before_the_test_runs_tells_the_client_why() {
    for stage in [Stage::Accepted, Stage::Opened] {
        let (mut p, _) = pair_at(stage, spec(Direction::Forward, 1));
        p.server.shutdown("the server is shutting down");
        p.shuttle();
        assert_eq!(
            *client_error(&p.client),
            SessionError::PeerAborted("the server is shutting down".into()),
            "{stage:?}"
        );
    }
}

#[test]
fn abort_before_accept_reaches_the_server() {
    let mut p = Pair::new(TestSpec::default());
    p.client.abort("changed my mind");
    p.shuttle();
    // The Hello went first, so the server accepted, then saw the Abort.
    assert_eq!(
        *server_error(&p.server),
        SessionError::PeerAborted("changed my mind".into())
    );
    assert_eq!(p.server_aborts(), 1, "streams may have been expected");
    assert_eq!(p.client_aborts(), 0, "the client never opened any");
}
