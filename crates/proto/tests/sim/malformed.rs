//! Simulated pair: malformed and unexpected frames.

use linerate_proto::session::SessionError;
use linerate_proto::spec::TestSpec;
use linerate_proto::wire::{
    self, Hello, Message, RefuseCode, Side, WireError, FRAME_VERSION, MAX_PAYLOAD,
};
use linerate_proto::PROTOCOL_VERSION;

use crate::harness::*;

fn oversized_header() -> Vec<u8> {
    let mut h = Vec::from(wire::MAGIC);
    h.push(FRAME_VERSION);
    h.push(1); // Hello: limited to MAX_PAYLOAD
    h.extend_from_slice(&(MAX_PAYLOAD as u32 + 1).to_be_bytes());
    h
}

fn frame(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::from(wire::MAGIC);
    f.push(FRAME_VERSION);
    f.push(kind);
    f.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    f.extend_from_slice(payload);
    f
}

#[test]
fn server_refuses_garbage_before_hello() {
    for (bytes, what) in [
        (b"GET / HTTP/1.1\r\n\r\n".to_vec(), "bad frame magic"),
        (oversized_header(), "exceeds"),
        (frame(1, b"{not json"), "malformed Hello"),
        (frame(200, b""), "unknown frame kind"),
    ] {
        let mut p = Pair::new(TestSpec::default()).one_byte_reads();
        let _ = p.client.outbox().take();
        p.deliver_to_server(&bytes);
        let r = server_refusal(&p.server);
        assert_eq!(r.code, RefuseCode::Invalid);
        assert!(r.message.contains(what), "{}", r.message);
        p.shuttle();
        assert!(matches!(
            client_error(&p.client),
            SessionError::Refused {
                code: RefuseCode::Invalid,
                ..
            }
        ));
        assert!(p.server_actions.is_empty() && p.client_actions.is_empty());
    }
}

#[test]
fn server_fails_on_garbage_after_accept() {
    for bytes in [
        b"\x00\x01garbage".to_vec(),
        oversized_header(),
        frame(6, b"[]"),
    ] {
        let (mut p, _) = pair_at(Stage::Accepted, TestSpec::default());
        p.deliver_to_server(&bytes);
        assert!(
            matches!(server_error(&p.server), SessionError::Wire(_)),
            "{:?}",
            p.server.outcome()
        );
        assert_eq!(p.server_aborts(), 1);
    }
}

#[test]
fn client_fails_cleanly_on_malformed_frames() {
    type Check = fn(&SessionError) -> bool;
    let cases: Vec<(Vec<u8>, Check)> = vec![
        (b"\xff\xfe\xfd".to_vec(), |e| {
            matches!(e, SessionError::Wire(WireError::BadMagic([0xff, 0xfe])))
        }),
        (b"XXXXXXXXXXXX".to_vec(), |e| {
            matches!(e, SessionError::Wire(WireError::BadMagic(_)))
        }),
        (oversized_header(), |e| {
            matches!(e, SessionError::Wire(WireError::TooLong(_)))
        }),
        (frame(2, b"{\"spec\":1}"), |e| {
            matches!(
                e,
                SessionError::Wire(WireError::Malformed { kind: "Accept", .. })
            )
        }),
        (frame(5, b"x"), |e| {
            matches!(
                e,
                SessionError::Wire(WireError::Malformed { kind: "Start", .. })
            )
        }),
    ];
    for stage in [Stage::Fresh, Stage::Accepted, Stage::Opened, Stage::Running] {
        for (bytes, check) in &cases {
            let (mut p, _) = pair_at(stage, TestSpec::default());
            p.chunks = vec![1];
            p.deliver_to_client(bytes);
            let e = client_error(&p.client);
            assert!(check(e), "{stage:?}: {e:?}");
            let aborts = usize::from(stage != Stage::Fresh);
            assert_eq!(p.client_aborts(), aborts, "{stage:?}");
        }
    }
}

#[test]
fn unexpected_frames_end_the_session() {
    // Start before Accept.
    let mut p = Pair::new(TestSpec::default());
    p.deliver_to_client(&wire::to_bytes(&Message::Start));
    assert_eq!(
        *client_error(&p.client),
        SessionError::Unexpected {
            message: "Start",
            state: "waiting for the server to accept"
        }
    );
    assert_eq!(p.client_aborts(), 0);

    // Start while the client is still opening its streams.
    let (mut p, _) = pair_at(Stage::Accepted, TestSpec::default());
    p.deliver_to_client(&wire::to_bytes(&Message::Start));
    assert!(matches!(
        client_error(&p.client),
        SessionError::Unexpected {
            message: "Start",
            ..
        }
    ));
    assert_eq!(p.client_aborts(), 1);

    // A second Accept while running; a Results frame twice.
    let (mut p, agreed) = pair_at(Stage::Running, TestSpec::default());
    let (token, s) = agreed.expect("spec");
    let results_frame = wire::to_bytes(&Message::Results(Box::new(results(Side::Server, &s))));
    p.deliver_to_client(&results_frame);
    assert!(!p.client.is_finished(), "first Results is fine");
    p.deliver_to_client(&results_frame);
    assert_eq!(
        *client_error(&p.client),
        SessionError::Unexpected {
            message: "Results",
            state: "running the test"
        }
    );
    assert_eq!(p.client_aborts(), 1);
    let (mut p, _) = pair_at(Stage::Running, TestSpec::default());
    p.deliver_to_client(&wire::to_bytes(&Message::Accept(wire::Accept {
        spec: s.clone(),
        token,
        notes: vec![],
        software: "again".into(),
        udp_ports: vec![],
        server_engine: None,
        heartbeat_ms: None,
        unix_name: None,
    })));
    assert!(matches!(
        client_error(&p.client),
        SessionError::Unexpected {
            message: "Accept",
            ..
        }
    ));

    // A second Hello to the server.
    let (mut p, _) = pair_at(Stage::Accepted, TestSpec::default());
    p.deliver_to_server(&wire::to_bytes(&Message::Hello(Hello {
        protocol: PROTOCOL_VERSION,
        software: "again".into(),
        spec: TestSpec::default(),
        server_engine: None,
        heartbeat_ms: None,
        unix_uid: None,
        beside: None,
    })));
    assert_eq!(
        *server_error(&p.server),
        SessionError::Unexpected {
            message: "Hello",
            state: "waiting for data connections"
        }
    );
    assert_eq!(p.server_aborts(), 1);

    // Start or Results sent to a server that has not seen a Hello.
    for msg in [Message::Start, Message::Results(Box::default())] {
        let mut p = Pair::new(TestSpec::default());
        let _ = p.client.outbox().take();
        p.deliver_to_server(&wire::to_bytes(&msg));
        assert!(
            matches!(server_error(&p.server), SessionError::Unexpected { .. }),
            "{:?}",
            p.server.outcome()
        );
        assert_eq!(p.server_aborts(), 0);
    }

    // Results before the data phase.
    let (mut p, _) = pair_at(Stage::Accepted, TestSpec::default());
    p.deliver_to_server(&wire::to_bytes(&Message::Results(Box::default())));
    assert!(matches!(
        server_error(&p.server),
        SessionError::Unexpected {
            message: "Results",
            ..
        }
    ));
}

#[test]
fn frames_after_the_end_are_ignored() {
    let mut p = Pair::new(TestSpec::default());
    let spec = p.start();
    let (cr, sr) = p.finish(&spec, false);
    p.deliver_to_client(b"garbage after the end");
    p.deliver_to_server(&wire::to_bytes(&Message::Start));
    assert_completed(&p, &spec, &cr, &sr);
}
