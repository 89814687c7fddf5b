//! Simulated pair: the checks `stream_attached` makes on data connections.

use linerate_proto::session::client::ClientAction;
use linerate_proto::session::server::ServerAction;
use linerate_proto::spec::{Direction, TestSpec};
use linerate_proto::wire::{Side, TOKEN_LEN};

use crate::harness::*;

#[test]
fn stream_attached_rejects_bad_greetings_and_keeps_waiting() {
    let (mut p, agreed) = pair_at(Stage::Opened, spec(Direction::Bidir, 2));
    let (token, s) = agreed.expect("spec");
    let plan = s.stream_plan();
    assert_eq!(plan.len(), 4);
    let deadline = p.server.poll_timeout();
    let now = p.now;

    let mut wrong = token;
    wrong.0[TOKEN_LEN - 1] ^= 0xff;
    let bad = [
        (data_hello(wrong, 1, Side::Client), "token"),
        (data_hello(token, 0, Side::Client), "not in the test plan"),
        (data_hello(token, 5, Side::Server), "not in the test plan"),
        (data_hello(token, 1, Side::Server), "wrong direction"),
        (data_hello(token, 3, Side::Client), "wrong direction"),
    ];
    let check_bad = |p: &mut Pair| {
        for (h, why) in &bad {
            let e = p.server.stream_attached(h, now).expect_err("rejected");
            assert!(e.contains(why), "{h:?}: {e}");
        }
    };
    check_bad(&mut p);

    // Attach all but the last, with a duplicate in between.
    for sp in &plan[..3] {
        p.server
            .stream_attached(&data_hello(token, sp.id, sp.sender), now)
            .expect("valid");
        let e = p
            .server
            .stream_attached(&data_hello(token, sp.id, sp.sender), now)
            .expect_err("duplicate");
        assert!(e.contains("twice"), "{e}");
        check_bad(&mut p);
    }
    // Still waiting: nothing sent, nothing started, same deadline.
    p.drain_actions();
    assert!(p.server.outbox().is_empty());
    assert!(!p.server.is_finished());
    assert_eq!(count(&p.server_actions, &ServerAction::StartStreams), 0);
    assert_eq!(p.server.poll_timeout(), deadline);

    let last = plan[3];
    p.server
        .stream_attached(&data_hello(token, last.id, last.sender), now)
        .expect("last valid");
    p.shuttle();
    assert_eq!(count(&p.server_actions, &ServerAction::StartStreams), 1);
    assert_eq!(count(&p.client_actions, &ClientAction::StartStreams), 1);

    // Once running, no more data connections are taken.
    let e = p
        .server
        .stream_attached(&data_hello(token, last.id, last.sender), now)
        .expect_err("running");
    assert!(e.contains("not expecting"), "{e}");

    let (cr, sr) = p.finish(&s, true);
    assert_completed(&p, &s, &cr, &sr);
}

#[test]
fn stream_attached_before_hello_is_rejected() {
    let mut p = Pair::new(TestSpec::default());
    let e = p
        .server
        .stream_attached(&data_hello(TOKEN, 1, Side::Client), p.now)
        .expect_err("no test yet");
    assert!(e.contains("not expecting"), "{e}");
    p.shuttle();
    p.handshake();
}
