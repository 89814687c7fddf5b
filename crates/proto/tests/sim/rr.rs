//! Simulated pair: request/response tests: clock probes, and crr's start
//! without streams.

use linerate_proto::clock::ClockMethod;
use linerate_proto::limits::ServerLimits;
use linerate_proto::session::client::ClientSession;
use linerate_proto::session::server::{ServerOutcome, ServerSession};
use linerate_proto::session::{ControlIoError, SessionError, HANDSHAKE_TIMEOUT};
use linerate_proto::spec::{RrSpec, TestKind, TestSpec};
use linerate_proto::wire::{self, ClockReply, Message, Side};

use crate::harness::*;

fn rr_spec(kind: TestKind) -> TestSpec {
    TestSpec {
        kind,
        rr: Some(RrSpec::default()),
        ..TestSpec::default()
    }
}

#[test]
fn rr_same_host_needs_one_probe_and_gives_offset_zero() {
    let mut p = Pair::new(rr_spec(TestKind::Rr)).one_byte_reads();
    p.client = ClientSession::new(rr_spec(TestKind::Rr), CLIENT_SW, p.base)
        .with_boot_id(Some("boot-1".into()));
    p.server = ServerSession::new(ServerLimits::default(), TOKEN, SERVER_SW, p.base)
        .with_boot_id(Some("boot-1".into()));
    // Even a clock that reads differently cannot matter: same kernel.
    p.server_clock_ahead = 12_345;
    let spec = p.start();
    let c = p.client.clock().expect("offset measured");
    assert_eq!(c.method, ClockMethod::SameHost);
    assert_eq!((c.offset_ns, c.uncertainty_ns, c.probes), (0, 0, 1));
    let (cr, sr) = p.finish(&spec, true);
    assert_completed(&p, &spec, &cr, &sr);
    let names = |b: &[u8]| frames(b).iter().map(Message::name).collect::<Vec<_>>();
    assert_eq!(names(&p.client_sent), ["Hello", "ClockProbe", "Results"]);
    assert_eq!(
        names(&p.server_sent),
        ["Accept", "ClockReply", "Start", "Results"]
    );
}

#[test]
fn rr_other_host_is_probed_and_the_offset_estimated() {
    let mut p = Pair::new(rr_spec(TestKind::Rr));
    p.client = ClientSession::new(rr_spec(TestKind::Rr), CLIENT_SW, p.base)
        .with_boot_id(Some("client-boot".into()));
    p.server_clock_ahead = 5_000_000_000;
    // The server sends no boot id (None never matches).
    p.start();
    let c = *p.client.clock().expect("offset measured");
    assert_eq!(c.method, ClockMethod::Probes);
    assert_eq!(c.probes as usize, linerate_proto::clock::PROBES);
    // The virtual link has no delay: the estimate is exact.
    assert_eq!((c.offset_ns, c.uncertainty_ns), (5_000_000_000, 0));
    let probes = frames(&p.client_sent)
        .iter()
        .filter(|m| matches!(m, Message::ClockProbe(_)))
        .count();
    assert_eq!(probes, linerate_proto::clock::PROBES);
}

#[test]
fn rr_clock_reply_for_no_probe_fails_the_client() {
    let mut p = Pair::new(rr_spec(TestKind::Rr));
    // Hello → Accept only (the probe is queued but not delivered).
    let hello = p.client.outbox().take();
    p.deliver_to_server(&hello);
    let accept = p.server.outbox().take();
    p.deliver_to_client(&accept);
    let bogus = wire::to_bytes(&Message::ClockReply(ClockReply {
        t1: 42,
        t2: 1,
        t3: 1,
        boot_id: None,
    }));
    p.deliver_to_client(&bogus);
    assert!(matches!(
        client_error(&p.client),
        SessionError::Unexpected { .. }
    ));
}

#[test]
fn crr_starts_as_soon_as_it_is_accepted() {
    let spec_in = rr_spec(TestKind::Crr);
    let mut p = Pair::new(spec_in.clone());
    let spec = p.start();
    assert_eq!(spec, spec_in);
    assert!(p.client.clock().is_none(), "crr measures no one-way delay");
    assert!(!p.server.peer_results_received());
    let (cr, sr) = p.finish(&spec, true);
    assert_completed(&p, &spec, &cr, &sr);
    let names = |b: &[u8]| frames(b).iter().map(Message::name).collect::<Vec<_>>();
    assert_eq!(names(&p.server_sent), ["Accept", "Start", "Results"]);
}

#[test]
fn crr_server_sees_the_client_results_before_finishing() {
    let mut p = Pair::new(rr_spec(TestKind::Crr));
    let spec = p.start();
    p.client.local_finished(results(Side::Client, &spec), p.now);
    p.shuttle();
    assert!(p.server.peer_results_received());
    p.server.local_finished(results(Side::Server, &spec), p.now);
    p.shuttle();
    assert!(p.client.is_finished() && p.server.is_finished());
}

#[test]
fn rr_unanswered_clock_probe_times_out_naming_the_step() {
    let mut p = Pair::new(rr_spec(TestKind::Rr));
    let hello = p.client.outbox().take();
    p.deliver_to_server(&hello);
    let accept = p.server.outbox().take();
    p.deliver_to_client(&accept);
    // The probe goes out but no reply ever comes back.
    let probe = p.client.outbox().take();
    assert_eq!(
        frames(&probe).iter().map(Message::name).collect::<Vec<_>>(),
        ["ClockProbe"]
    );
    p.advance(HANDSHAKE_TIMEOUT);
    let now = p.now;
    p.client.handle_timeout(now);
    assert_eq!(
        client_error(&p.client),
        &SessionError::Control(ControlIoError::Timeout(
            "measuring the clock offset to the server"
        ))
    );
    // No streams were opened, so none are aborted.
    assert_eq!(p.client_aborts(), 0);
}

#[test]
fn clock_probe_before_hello_ends_the_session() {
    let mut p = Pair::new(rr_spec(TestKind::Rr));
    let probe = wire::to_bytes(&Message::ClockProbe(linerate_proto::wire::ClockProbe {
        t1: 1,
    }));
    p.deliver_to_server(&probe);
    assert!(p.server.is_finished());
    assert!(matches!(
        p.server.outcome(),
        Some(ServerOutcome::Failed(SessionError::Unexpected { .. }))
    ));
}

/// Issue 27: a probe beside the client's running test names that test's
/// token in its Hello, and the server holds it for the admission (made
/// by the I/O layer: `linerate_run::guard`); anything but a probe beside a
/// test is refused before any admission.
#[test]
fn issue_27_a_probe_beside_a_test_names_it_and_only_probes_may() {
    use linerate_proto::session::server::{Admission, ServerAction};
    use linerate_proto::wire::{RefuseCode, Token};
    const LEAD: Token = Token([3; linerate_proto::wire::TOKEN_LEN]);
    let mut p = Pair::new(rr_spec(TestKind::Rr));
    p.client = ClientSession::new(rr_spec(TestKind::Rr), CLIENT_SW, p.base).with_beside(Some(LEAD));
    let hello = p.client.outbox().take();
    match frames(&hello).first() {
        Some(Message::Hello(h)) => assert_eq!(h.beside, Some(LEAD)),
        m => panic!("expected the Hello, got {m:?}"),
    }
    p.server.receive_at(&hello, p.now, 0);
    assert_eq!(p.server.poll_action(), Some(ServerAction::RequestAdmission));
    assert_eq!(p.server.beside(), Some(LEAD));
    p.server.admission(Admission::Admit, p.now);
    assert_eq!(p.server.beside(), None, "only while it waits for admission");

    for spec in [
        TestSpec::default(),
        TestSpec {
            rr: Some(RrSpec {
                under_load: 1,
                ..RrSpec::default()
            }),
            ..rr_spec(TestKind::Rr)
        },
    ] {
        let mut p = Pair::with(spec.clone(), ServerLimits::default(), Admission::Admit);
        p.client = ClientSession::new(spec, CLIENT_SW, p.base).with_beside(Some(LEAD));
        p.shuttle();
        let r = server_refusal(&p.server);
        assert_eq!(r.code, RefuseCode::Invalid, "{r:?}");
        assert!(r.message.contains("beside"), "{r:?}");
        assert_eq!(p.admission_requests, 0, "refused before admission");
    }
}
