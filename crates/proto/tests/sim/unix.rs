//! Simulated pair: --transport unix (issue 28): a random name in the
//! Accept, the client's uid in the Hello.

use std::time::Instant;

use linerate_proto::session::client::{ClientAction, ClientSession};
use linerate_proto::session::server::ServerAction;
use linerate_proto::session::SessionError;
use linerate_proto::spec::{Direction, TestSpec};
use linerate_proto::wire::{self, Accept, Message, RefuseCode};

use crate::harness::*;

fn unix_spec() -> TestSpec {
    let mut s = TestSpec {
        direction: Direction::Reverse,
        streams: 2,
        ..TestSpec::default()
    };
    s.tcp.unix = true;
    s
}

/// The server binds the listener (for the uid the client announced)
/// before it accepts; the name it chose, not one derived from the token,
/// reaches the client; the test then runs as any other.
#[test]
fn issue_28_unix_listener_is_bound_for_the_announced_uid_and_named_in_the_accept() {
    let s = unix_spec();
    let mut p = Pair::new(s.clone());
    p.client = ClientSession::new(s.clone(), CLIENT_SW, p.now).with_unix_uid(4242);
    p.shuttle();
    let uid = p.server_actions.iter().find_map(|a| match a {
        ServerAction::BindUnixListener { spec, uid } if *spec == s => Some(*uid),
        _ => None,
    });
    assert_eq!(uid, Some(4242), "{:?}", p.server_actions);
    assert!(
        !p.server_actions
            .iter()
            .any(|a| matches!(a, ServerAction::ExpectStreams { .. })),
        "no TCP route for a unix test's token"
    );
    assert!(p.client_actions.is_empty(), "no Accept before the listener");
    let name = wire::unix_data_name(&[0x3c; wire::UNIX_NAME_RANDOM]);
    p.server.unix_listener_bound(name.clone(), p.now);
    p.shuttle();
    let got = p.client_actions.iter().find_map(|a| match a {
        ClientAction::OpenStreams { unix_name, .. } => unix_name.clone(),
        _ => None,
    });
    assert_eq!(got, Some(name));
    p.client.streams_opened(p.now);
    p.attach_all(TOKEN, &s);
    p.shuttle();
    let (cr, sr) = p.finish(&s, true);
    assert_completed(&p, &s, &cr, &sr);
}

/// A unix Hello without a uid (an older client) is refused; an Accept
/// without a valid name (an older or hostile server) is refused by the
/// client.
#[test]
fn issue_28_unix_tests_need_the_uid_and_a_valid_name() {
    let mut p = Pair::new(unix_spec());
    p.shuttle();
    assert!(matches!(
        client_error(&p.client),
        SessionError::Refused {
            code: RefuseCode::Invalid,
            message,
        } if message.contains("announce its uid")
    ));
    for bad in [None, Some("linerate-data-../../x".to_owned())] {
        let s = unix_spec();
        let mut c = ClientSession::new(s.clone(), CLIENT_SW, Instant::now()).with_unix_uid(1);
        let _ = c.outbox().take();
        c.receive(
            &wire::to_bytes(&Message::Accept(Accept {
                spec: s,
                token: TOKEN,
                notes: Vec::new(),
                software: SERVER_SW.into(),
                udp_ports: Vec::new(),
                server_engine: None,
                heartbeat_ms: None,
                unix_name: bad.clone(),
            })),
            Instant::now(),
        );
        assert!(
            matches!(client_error(&c), SessionError::Implausible { why, .. } if why.contains("data socket name")),
            "{bad:?}: {:?}",
            client_error(&c)
        );
    }
}
