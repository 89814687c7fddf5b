//! Simulated pair: refusals (busy, authentication, invalid spec, protocol
//! and frame version).

use std::time::{Duration, Instant};

use linerate_proto::auth::{AuthKey, ClientAuth, ServerAuth, NONCE_LEN};
use linerate_proto::limits::ServerLimits;
use linerate_proto::session::client::ClientSession;
use linerate_proto::session::server::{Admission, ServerAction, ServerSession};
use linerate_proto::session::{ControlIoError, SessionError};
use linerate_proto::spec::{Direction, TestSpec};
use linerate_proto::wire::{self, Hello, Message, RefuseCode, FRAME_VERSION};
use linerate_proto::PROTOCOL_VERSION;

use crate::harness::*;

#[test]
fn busy_server_refuses_with_busy() {
    let mut p = Pair::with(
        TestSpec::default(),
        ServerLimits::default(),
        Admission::Busy { running: 3, max: 3 },
    )
    .one_byte_reads();
    p.shuttle();
    let r = server_refusal(&p.server);
    assert_eq!(r.code, RefuseCode::Busy);
    match client_error(&p.client) {
        SessionError::Refused { code, message } => {
            assert_eq!(*code, RefuseCode::Busy);
            assert_eq!(*message, r.message);
            assert!(message.contains('3'), "{message}");
        }
        e => panic!("expected Refused, got {e:?}"),
    }
    assert_eq!(p.admission_requests, 1);
    assert!(p.client_actions.is_empty(), "{:?}", p.client_actions);
    assert!(p.server_actions.is_empty(), "{:?}", p.server_actions);
    assert_eq!(p.client.poll_timeout(), None);
    assert_eq!(p.server.poll_timeout(), None);
}

// Issue 28: admission (a test slot) only after authentication.

const SERVER_KEY: &[u8] = b"a fleet-wide secret, 32 bytes ok";

/// A pair whose server requires `SERVER_KEY` and whose client proves
/// `client_key` (`None`: the client has no key).
fn keyed_pair(client_key: Option<&[u8]>) -> Pair {
    let key = |b: &[u8]| AuthKey::from_file_contents(b).expect("key");
    let mut p = Pair::new(TestSpec::default());
    p.server = ServerSession::new(ServerLimits::default(), TOKEN, SERVER_SW, p.base)
        .with_auth(Some(ServerAuth::new(key(SERVER_KEY), [1; NONCE_LEN])));
    if let Some(k) = client_key {
        p.client = ClientSession::new(TestSpec::default(), CLIENT_SW, p.base)
            .with_auth(ClientAuth::new(key(k), [2; NONCE_LEN]));
    }
    p
}

#[test]
fn issue_28_admission_is_asked_only_after_the_proof_verifies() {
    let mut p = keyed_pair(Some(SERVER_KEY));
    p.handshake();
    assert_eq!(p.admission_requests, 1);
    let names = |b: &[u8]| frames(b).iter().map(Message::name).collect::<Vec<_>>();
    assert_eq!(names(&p.client_sent), ["AuthInit", "AuthProof", "Hello"]);
    // A wrong key (the client refuses the server's proof), no key (the
    // server refuses the Hello): over without asking for a slot.
    for client_key in [Some(&b"another secret, entirely unknown"[..]), None] {
        let mut p = keyed_pair(client_key);
        p.shuttle();
        assert!(p.server.is_finished(), "{client_key:?}");
        assert_eq!(p.admission_requests, 0, "{client_key:?}");
    }
}

#[test]
fn issue_28_a_session_that_got_only_auth_init_does_not_request_admission() {
    let mut p = keyed_pair(Some(SERVER_KEY));
    let handshake = Duration::from_millis(ServerLimits::default().handshake_timeout_ms);
    // The AuthInit comes late and nothing follows it.
    p.advance(handshake - Duration::from_secs(1));
    let init = p.client.outbox().take();
    p.deliver_to_server(&init);
    assert!(matches!(
        &frames(&p.server.outbox().take())[..],
        [Message::AuthChallenge(_)]
    ));
    assert_eq!(p.admission_requests, 0);
    // The handshake timeout counts from the session's start, not from the
    // last frame: the pre-authentication phase is bounded as a whole.
    assert_eq!(p.server.poll_timeout(), Some(p.base + handshake));
    p.advance(Duration::from_millis(999));
    p.server.handle_timeout(p.now);
    assert!(!p.server.is_finished());
    p.advance(Duration::from_millis(1));
    p.server.handle_timeout(p.now);
    assert!(matches!(
        server_error(&p.server),
        SessionError::Control(ControlIoError::Timeout("waiting for the client's hello"))
    ));
    p.drain_actions();
    assert_eq!(p.admission_requests, 0);
    assert!(p.server_actions.is_empty(), "{:?}", p.server_actions);
}

#[test]
fn issue_28_frames_after_the_hello_wait_for_the_admission_decision() {
    // A Hello and a stray frame in one read: the stray one is judged in
    // the state the decision leads to (here: refused, so never).
    let mut server = ServerSession::new(ServerLimits::default(), TOKEN, SERVER_SW, Instant::now());
    let mut bytes = wire::to_bytes(&Message::Hello(Hello {
        protocol: PROTOCOL_VERSION,
        software: CLIENT_SW.into(),
        spec: TestSpec::default(),
        server_engine: None,
        heartbeat_ms: None,
        unix_uid: None,
        beside: None,
    }));
    bytes.extend(wire::to_bytes(&Message::Start));
    let now = Instant::now();
    server.receive(&bytes, now);
    assert!(!server.is_finished(), "judged before the decision");
    assert_eq!(server.poll_action(), Some(ServerAction::RequestAdmission));
    server.admission(Admission::Busy { running: 1, max: 1 }, now);
    assert_eq!(server_refusal(&server).code, RefuseCode::Busy);
}

#[test]
fn invalid_spec_is_refused_naming_the_field() {
    let limits = ServerLimits {
        max_streams: 8,
        ..ServerLimits::default()
    };
    for (streams, needle) in [(0u16, "at least 1"), (9, "at most 8")] {
        let mut p = Pair::with(
            spec(Direction::Forward, streams),
            limits.clone(),
            Admission::Admit,
        );
        p.shuttle();
        assert_eq!(server_refusal(&p.server).code, RefuseCode::Invalid);
        match client_error(&p.client) {
            SessionError::Refused { code, message } => {
                assert_eq!(*code, RefuseCode::Invalid);
                assert!(message.contains("streams"), "{message}");
                assert!(message.contains(needle), "{message}");
            }
            e => panic!("expected Refused, got {e:?}"),
        }
        assert!(p.client_actions.is_empty() && p.server_actions.is_empty());
    }
}

#[test]
fn protocol_version_mismatch_is_refused_with_version() {
    let mut p = Pair::new(TestSpec::default());
    // Replace the client's Hello with one from a future protocol.
    let real = p.client.outbox().take();
    assert!(matches!(&frames(&real)[..], [Message::Hello(h)] if h.protocol == PROTOCOL_VERSION));
    let hello = wire::to_bytes(&Message::Hello(Hello {
        protocol: 99,
        software: "linerate 99".into(),
        spec: TestSpec::default(),
        server_engine: None,
        heartbeat_ms: None,
        unix_uid: None,
        beside: None,
    }));
    p.deliver_to_server(&hello);
    let r = server_refusal(&p.server);
    assert_eq!(r.code, RefuseCode::Version);
    assert!(r.message.contains("99"), "{}", r.message);
    assert_eq!(p.server.client_software(), Some("linerate 99"));
    p.shuttle();
    assert!(matches!(
        client_error(&p.client),
        SessionError::Refused {
            code: RefuseCode::Version,
            ..
        }
    ));
}

#[test]
fn future_frame_version_is_refused_with_version() {
    let mut p = Pair::new(TestSpec::default()).one_byte_reads();
    let mut hello = p.client.outbox().take();
    assert_eq!(hello[2], FRAME_VERSION);
    hello[2] = 2;
    p.deliver_to_server(&hello);
    let r = server_refusal(&p.server);
    assert_eq!(r.code, RefuseCode::Version);
    let sent = p.server.outbox().take();
    match &frames(&sent)[..] {
        [Message::Refuse(on_wire)] => {
            assert_eq!(*on_wire, r);
            assert!(on_wire.message.contains("version 2"), "{}", on_wire.message);
        }
        other => panic!("expected one Refuse frame, got {other:?}"),
    }
    p.deliver_to_client(&sent);
    assert!(matches!(
        client_error(&p.client),
        SessionError::Refused {
            code: RefuseCode::Version,
            ..
        }
    ));
    assert!(p.server_actions.is_empty());
}

/// Issue 26: a server's own engine is asked about the test at admission,
/// with the refusal its client would give (`uring --flows` without
/// multishot receives), so the test is refused with the reason, not
/// failed at run time; a test whose server side runs without the engine
/// (crr) is not asked.
#[test]
fn issue_26_admission_asks_the_servers_own_engine_about_the_test() {
    use linerate_proto::limits::EngineRefusal;
    use linerate_proto::spec::{Flows, TestKind};
    let limits = ServerLimits {
        own_engine_refusal: Some(EngineRefusal::new(|spec: &TestSpec| {
            spec.flows
                .map(|_| "uring: --flows loops need multishot receives".to_string())
        })),
        ..ServerLimits::default()
    };
    let flows = TestSpec {
        flows: Some(Flows {
            count: 8,
            threads: 2,
        }),
        ..TestSpec::default()
    };
    let mut p = Pair::with(flows.clone(), limits.clone(), Admission::Admit);
    p.shuttle();
    let r = server_refusal(&p.server);
    assert_eq!(r.code, RefuseCode::Invalid);
    assert!(
        r.message
            .contains("server --engine uring: --flows loops need multishot receives"),
        "{}",
        r.message
    );
    assert!(p.server_actions.is_empty(), "{:?}", p.server_actions);
    // crr's server side accepts without the engine: not asked.
    let crr = TestSpec {
        kind: TestKind::Crr,
        rr: Some(Default::default()),
        ..flows
    };
    let mut p = Pair::with(crr, limits, Admission::Admit);
    p.shuttle();
    assert!(
        !matches!(
            p.server.outcome(),
            Some(linerate_proto::session::server::ServerOutcome::Refused(_))
        ),
        "{:?}",
        p.server.outcome()
    );
}
