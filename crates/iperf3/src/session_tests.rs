//! Session tests with a fake peer (no iperf3 needed): each side driven by
//! the exact bytes a real iperf3 peer sends, and the two sessions driven
//! against each other. The server's tests are here, the client's in
//! `client`.

use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::client::{ClientAction, ClientOutcome, Iperf3ClientSession};
use super::json::{self, Params, Protocol, Results, StreamResults};
use super::server::{Iperf3Limits, Iperf3ServerSession, ServerAction, ServerOutcome, StreamSlot};
use super::{code, Cookie, Direction, Iperf3Error, Role};
use linerate_proto::limits::ServerLimits;
use linerate_proto::measure::SideResults;
use linerate_proto::session::server::Admission;
use linerate_proto::session::Ended;

mod client;
mod sizes;

const COOKIE: &[u8; 37] = b"agiuwt4j3wkxt75cjjjzvef6aiwf6uxc3ydp\0";

fn framed(text: &str) -> Vec<u8> {
    let mut v = (text.len() as u32).to_be_bytes().to_vec();
    v.extend_from_slice(text.as_bytes());
    v
}

fn server(now: Instant) -> Iperf3ServerSession {
    decided(Iperf3Limits::default(), Admission::Admit, now)
}

/// A session whose admission was asked for, first, and answered.
fn decided(limits: Iperf3Limits, decision: Admission, now: Instant) -> Iperf3ServerSession {
    let mut s = Iperf3ServerSession::new(limits, now);
    assert_eq!(s.poll_action(), Some(ServerAction::RequestAdmission));
    s.admission(decision);
    s
}

fn results(ids: &[u32]) -> Results {
    Results {
        cpu_util_total: 1.5,
        cpu_util_user: 0.5,
        cpu_util_system: 1.0,
        sender_has_retransmits: 1,
        congestion_used: Some("cubic".into()),
        streams: ids
            .iter()
            .map(|&id| StreamResults {
                id,
                bytes: 1000,
                retransmits: 0,
                end_time: 2.0,
                omitted_errors: Some(0),
                omitted_packets: Some(0),
                ..StreamResults::default()
            })
            .collect(),
        server_output_text: None,
        server_output_json: None,
    }
}

/// Feeds `bytes` one at a time (the worst read boundaries).
fn feed_bytewise(s: &mut Iperf3ServerSession, bytes: &[u8], now: Instant) {
    for b in bytes {
        s.receive(std::slice::from_ref(b), now);
    }
}

/// Brings a server session to the point where its streams may attach.
fn to_streams(params: &str, now: Instant) -> Iperf3ServerSession {
    let mut s = server(now);
    feed_bytewise(&mut s, COOKIE, now);
    assert_eq!(s.take_outbox(), vec![0x09]);
    feed_bytewise(&mut s, &framed(params), now);
    assert_eq!(s.poll_action(), Some(ServerAction::PrepareStreams));
    assert!(
        s.take_outbox().is_empty(),
        "nothing before the listener is ready"
    );
    s.streams_prepared(now);
    assert_eq!(s.take_outbox(), vec![0x0A]);
    s
}

/// A client session asking for `params`, with the fixed cookie.
fn client(params: Params, now: Instant) -> Iperf3ClientSession {
    Iperf3ClientSession::new(params, Cookie(*COOKIE), now)
}

#[test]
fn server_runs_a_tcp_test_with_every_message_split_across_reads() {
    let t0 = Instant::now();
    let mut s = to_streams(
        r#"{"tcp":true,"omit":0,"time":2,"num":0,"blockcount":0,"parallel":2,"len":131072,"pacing_timer":1000,"client_version":"3.12"}"#,
        t0,
    );
    let cookie = Cookie(*COOKIE);
    let a = s.tcp_stream(&cookie, t0).expect("first stream");
    assert_eq!(
        a,
        StreamSlot {
            index: 0,
            id: 1,
            role: Role::Receiver
        }
    );
    assert!(s.take_outbox().is_empty());
    let b = s.tcp_stream(&cookie, t0).expect("second stream");
    assert_eq!(b.id, 3);
    assert_eq!(s.take_outbox(), vec![0x01, 0x02]);
    assert_eq!(s.poll_action(), Some(ServerAction::StartStreams));
    assert!(s.is_running());
    // A stray TEST_START from the client is ignored.
    s.receive(&[0x01], t0);
    s.receive(&[0x04], t0);
    assert_eq!(s.poll_action(), Some(ServerAction::StopStreams));
    assert!(
        s.take_outbox().is_empty(),
        "0D only once the streams are closed"
    );
    s.streams_stopped(t0);
    assert_eq!(s.take_outbox(), vec![0x0D]);
    let client = json::results_json(&results(&[1, 3])).to_string();
    feed_bytewise(&mut s, &framed(&client), t0);
    let Some(ServerAction::ClientResults(r)) = s.poll_action() else {
        panic!("client results expected");
    };
    assert_eq!(r.streams.len(), 2);
    let ours = results(&[1, 3]);
    s.send_results(&ours, t0);
    let out = s.take_outbox();
    assert_eq!(out.last(), Some(&0x0E));
    let mut body = out[..out.len() - 1].to_vec();
    let sent = json::take_message(&mut body, json::MAX_RESULTS)
        .expect("framed")
        .expect("complete");
    assert_eq!(json::parse_results(&sent).expect("valid"), ours);
    s.receive(&[0x10], t0);
    match s.outcome() {
        Some(ServerOutcome::Completed { params, client }) => {
            assert_eq!(params.parallel, 2);
            assert_eq!(client.streams[1].id, 3);
        }
        o => panic!("{o:?}"),
    }
}

#[test]
fn busy_server_denies_access_without_reading_the_cookie() {
    let mut s = Iperf3ServerSession::new(Iperf3Limits::default(), Instant::now());
    // The cookie arrived before the decision: it is not read.
    s.receive(COOKIE, Instant::now());
    assert!(s.take_outbox().is_empty(), "nothing before admission");
    assert_eq!(s.poll_action(), Some(ServerAction::RequestAdmission));
    s.admission(Admission::Busy { running: 1, max: 1 });
    assert_eq!(s.take_outbox(), vec![0xFF]);
    assert!(s.is_finished());
    s.receive(COOKIE, Instant::now());
    assert!(s.take_outbox().is_empty());
    assert!(matches!(s.outcome(), Some(ServerOutcome::Refused(_))));
}

#[test]
fn oversized_and_empty_parameters_are_refused_from_the_length() {
    for prefix in [8193u32, 0, u32::MAX] {
        let t0 = Instant::now();
        let mut s = server(t0);
        s.receive(COOKIE, t0);
        s.take_outbox();
        s.receive(&prefix.to_be_bytes(), t0);
        assert_eq!(
            s.take_outbox(),
            vec![0xFE, 0, 0, 0, 114, 0, 0, 0, 0],
            "length {prefix}"
        );
        assert!(matches!(s.outcome(), Some(ServerOutcome::Refused(_))));
        assert_eq!(s.poll_action(), None);
    }
}

#[test]
fn bad_parameters_get_server_error_with_iperf3_codes() {
    for (params, want) in [
        (r#"{"tcp":true,"parallel":200}"#, code::NUM_STREAMS),
        (r#"{"udp":true,"len":8}"#, code::UDP_BLOCK_SIZE),
        (r#"{"sctp":true}"#, code::UNIMPLEMENTED),
        (r#"not json"#, code::RECV_PARAMS),
    ] {
        let t0 = Instant::now();
        let mut s = server(t0);
        s.receive(COOKIE, t0);
        s.take_outbox();
        s.receive(&framed(params), t0);
        let out = s.take_outbox();
        assert_eq!(out[0], 0xFE, "{params}");
        assert_eq!(
            i32::from_be_bytes([out[1], out[2], out[3], out[4]]),
            want,
            "{params}"
        );
    }
}

#[test]
fn server_limits_apply_to_iperf3_clients() {
    let t0 = Instant::now();
    let limits = Iperf3Limits {
        max_time: Duration::from_secs(5),
        max_omit: Duration::from_secs(1),
        max_streams: 2,
        max_rate_bps: None,
        ..Iperf3Limits::default()
    };
    for (params, want) in [
        (r#"{"tcp":true,"time":6}"#, code::MAX_SERVER_DURATION),
        (r#"{"tcp":true,"time":5,"omit":2}"#, code::OMIT),
        (
            r#"{"tcp":true,"time":1,"parallel":3,"bidirectional":true}"#,
            code::NUM_STREAMS,
        ),
    ] {
        let out = after_params(&limits, params, t0).take_outbox();
        assert_eq!(out[..5], [0xFE, 0, 0, 0, want as u8], "{params}");
    }
    // A byte-limited test (time 0) runs under the server's max time.
    let mut s = decided(limits.clone(), Admission::Admit, t0);
    s.receive(COOKIE, t0);
    s.receive(&framed(r#"{"tcp":true,"time":0,"num":1000}"#), t0);
    s.streams_prepared(t0);
    s.tcp_stream(&Cookie(*COOKIE), t0).expect("stream");
    assert_eq!(
        s.poll_timeout(),
        Some(t0 + Duration::from_secs(5) + super::SAFETY_SLACK)
    );
}

/// A session under `limits` that has read the cookie and `params` (what
/// it answered to the cookie already taken).
fn after_params(limits: &Iperf3Limits, params: &str, t0: Instant) -> Iperf3ServerSession {
    let mut s = decided(limits.clone(), Admission::Admit, t0);
    s.receive(COOKIE, t0);
    s.take_outbox();
    s.receive(&framed(params), t0);
    s
}

#[test]
fn issue_10_max_rate_refuses_iperf3_clients_asking_for_more() {
    let t0 = Instant::now();
    let limits = Iperf3Limits {
        max_rate_bps: Some(100_000_000),
        ..Iperf3Limits::default()
    };
    let run = |params: &str| after_params(&limits, params, t0).take_outbox();
    for params in [
        r#"{"tcp":true,"time":1}"#,
        r#"{"tcp":true,"time":1,"reverse":true,"parallel":2,"bandwidth":60000000}"#,
        r#"{"udp":true,"time":1,"len":1400,"bidirectional":true,"bandwidth":60000000}"#,
    ] {
        let out = run(params);
        assert_eq!(
            out[..5],
            [0xFE, 0, 0, 0, code::TOTAL_RATE as u8],
            "{params}"
        );
    }
    let out = run(r#"{"tcp":true,"time":1,"parallel":2,"bandwidth":50000000}"#);
    assert_ne!(out.first(), Some(&0xFE), "within the limit: {out:?}");
}

/// An iperf3 TCP `-b` below 8 bit/s cannot be paced (the kernel paces
/// whole bytes per second): it is refused in iperf3's error channel, with
/// or without a server limit, instead of running unpaced past
/// `--max-rate`; 8 bit/s and UDP's low rates (paced per datagram) run.
#[test]
fn issue_28_iperf3_tcp_rate_below_8_bits_is_refused_not_run_unpaced() {
    let t0 = Instant::now();
    let capped = Iperf3Limits {
        max_rate_bps: Some(10_000_000),
        ..Iperf3Limits::default()
    };
    for limits in [Iperf3Limits::default(), capped] {
        for params in [
            r#"{"tcp":true,"time":2,"bandwidth":1}"#,
            r#"{"tcp":true,"time":2,"reverse":true,"bandwidth":7}"#,
            r#"{"tcp":true,"time":2,"bidirectional":true,"parallel":4,"bandwidth":3}"#,
        ] {
            let mut s = after_params(&limits, params, t0);
            let out = s.take_outbox();
            assert_eq!(
                out[..5],
                [0xFE, 0, 0, 0, code::UNIMPLEMENTED as u8],
                "{params}"
            );
            assert_eq!(s.poll_action(), None, "{params}: streams prepared");
            let Some(ServerOutcome::Refused(why)) = s.outcome() else {
                panic!("{params}: {:?}", s.outcome());
            };
            assert!(why.contains("-b 8 or more"), "{why}");
        }
        for params in [
            r#"{"tcp":true,"time":2,"reverse":true,"bandwidth":8}"#,
            r#"{"udp":true,"time":2,"reverse":true,"len":1000,"bandwidth":1}"#,
        ] {
            let mut s = after_params(&limits, params, t0);
            assert_ne!(s.take_outbox().first(), Some(&0xFE), "{params}");
            assert_eq!(s.poll_action(), Some(ServerAction::PrepareStreams));
        }
    }
}

/// A server whose own engine serves TCP only (`--engine
/// zerocopy:sendfile`) refuses an iperf3 UDP test in the handshake, with
/// the reason, instead of admitting it and failing its stream; TCP runs.
#[test]
fn issue_8_tcp_only_server_engine_refuses_iperf3_udp_up_front() {
    let t0 = Instant::now();
    use linerate_proto::limits::EngineRefusal;
    let limits = Iperf3Limits {
        server: ServerLimits {
            own_engine_refusal: Some(EngineRefusal::new(|spec| {
                (spec.protocol == linerate_proto::spec::Protocol::Udp)
                    .then(|| "zerocopy:sendfile: TCP stream tests only".to_string())
            })),
            ..ServerLimits::default()
        },
        ..Iperf3Limits::default()
    };
    let run = |params: &str| {
        let mut s = after_params(&limits, params, t0);
        (s.take_outbox(), s.is_finished())
    };
    let (out, finished) = run(r#"{"udp":true,"time":1,"len":1400,"bandwidth":1000000}"#);
    assert_eq!(out[..5], [0xFE, 0, 0, 0, code::UNIMPLEMENTED as u8]);
    let text = String::from_utf8_lossy(&out);
    assert!(finished, "{text}");
    let (out, _) = run(r#"{"tcp":true,"time":1}"#);
    assert_ne!(out.first(), Some(&0xFE), "TCP is served: {out:?}");
}

/// Issue 24: the iperf3 server asks the server's own engine about a test
/// (`ServerLimits::own_engine_refusal`, the native admission's one
/// question), not a UDP-only reason of its own: a server on `xdp`, which
/// runs UDP only, refuses an iperf3 TCP test up front with the engine's
/// reason, as it refuses a native one (it was admitted, and its streams
/// ran on plain syscalls under xdp's name); UDP runs.
#[test]
fn issue_24_iperf3_server_asks_its_own_engine_about_the_test() {
    use linerate_proto::limits::{EngineRefusal, ServerLimits};
    let t0 = Instant::now();
    let limits = Iperf3Limits {
        server: ServerLimits {
            own_engine_refusal: Some(EngineRefusal::new(|spec| {
                (spec.protocol == linerate_proto::spec::Protocol::Tcp)
                    .then(|| "xdp: UDP tests only".to_string())
            })),
            ..ServerLimits::default()
        },
        ..Iperf3Limits::default()
    };
    let mut s = after_params(&limits, r#"{"tcp":true,"time":1}"#, t0);
    let out = s.take_outbox();
    assert_eq!(out[..5], [0xFE, 0, 0, 0, code::UNIMPLEMENTED as u8]);
    let Some(ServerOutcome::Refused(why)) = s.outcome() else {
        panic!("TCP was not refused: {:?}", s.outcome());
    };
    assert!(why.contains("server --engine xdp: UDP tests only"), "{why}");
    let mut s = after_params(
        &limits,
        r#"{"udp":true,"time":1,"len":1400,"bandwidth":1000000}"#,
        t0,
    );
    assert_ne!(s.take_outbox().first(), Some(&0xFE), "UDP is served");
}

#[test]
fn issue_10_max_total_rate_is_shared_with_iperf3_clients() {
    let t0 = Instant::now();
    let budget = linerate_proto::limits::RateBudget::new(100_000_000);
    let start = |params: &str| {
        let mut s = decided(Iperf3Limits::default(), Admission::Admit, t0)
            .with_rate_budget(Some(budget.clone()));
        s.receive(COOKIE, t0);
        s.take_outbox();
        s.receive(&framed(params), t0);
        let out = s.take_outbox();
        (s, out)
    };
    let refused = |out: &[u8]| out.starts_with(&[0xFE, 0, 0, 0, code::TOTAL_RATE as u8]);
    // Unpaced (TCP's default) cannot be reserved.
    let (_, out) = start(r#"{"tcp":true,"time":1}"#);
    assert!(refused(&out), "{out:?}");
    assert_eq!(budget.in_use(), 0);
    // 60 of 100 Mbit/s held while the first test lives…
    let (first, out) = start(r#"{"udp":true,"time":1,"len":1400,"bandwidth":60000000}"#);
    assert!(!refused(&out));
    assert_eq!(budget.in_use(), 60_000_000);
    // …so a second asking for 2 × 30 does not fit, and is refused in
    // words naming the limit…
    let (second, out) =
        start(r#"{"tcp":true,"time":1,"reverse":true,"parallel":2,"bandwidth":30000000}"#);
    assert!(refused(&out));
    let Some(ServerOutcome::Refused(why)) = second.outcome() else {
        panic!("{:?}", second.outcome());
    };
    assert!(
        why.contains("--max-total-rate") && why.contains("40"),
        "{why}"
    );
    assert_eq!(budget.in_use(), 60_000_000);
    // …and fits once the first test has gone.
    drop(first);
    assert_eq!(budget.in_use(), 0);
    let (_third, out) =
        start(r#"{"tcp":true,"time":1,"reverse":true,"parallel":2,"bandwidth":30000000}"#);
    assert!(!refused(&out));
    assert_eq!(budget.in_use(), 60_000_000);
}

/// Issue 28: an iperf3 test's share of `--max-total-rate` goes back when
/// its streams end, before the client has gone: iperf3 exits without
/// waiting for the server's close, and its next test came too early.
#[test]
fn issue_28_an_iperf3_tests_rate_share_goes_back_when_its_streams_end() {
    let t0 = Instant::now();
    let budget = linerate_proto::limits::RateBudget::new(100_000_000);
    let mut s = decided(Iperf3Limits::default(), Admission::Admit, t0)
        .with_rate_budget(Some(budget.clone()));
    s.receive(COOKIE, t0);
    s.receive(
        &framed(r#"{"udp":true,"time":1,"len":1400,"bandwidth":60000000}"#),
        t0,
    );
    assert_eq!(budget.in_use(), 60_000_000);
    s.local_finished(SideResults::default());
    assert_eq!(budget.in_use(), 0);
    assert!(!s.is_finished(), "the results exchange is still to come");
}

#[test]
fn data_connection_with_another_cookie_is_refused_and_the_test_goes_on() {
    let t0 = Instant::now();
    let mut s = to_streams(r#"{"tcp":true,"parallel":1}"#, t0);
    let mut other = *COOKIE;
    other[0] = b'b';
    assert!(s.tcp_stream(&Cookie(other), t0).is_err());
    assert!(!s.is_finished());
    assert_eq!(s.tcp_stream(&Cookie(*COOKIE), t0).expect("ours").id, 1);
    // After all streams are in, another is not a stream of this test.
    assert!(s.tcp_stream(&Cookie(*COOKIE), t0).is_err());
}

#[test]
fn bidir_streams_get_ids_in_order_and_receivers_first() {
    let t0 = Instant::now();
    let mut s = to_streams(
        r#"{"udp":true,"parallel":2,"bidirectional":true,"len":1400}"#,
        t0,
    );
    let slots: Vec<StreamSlot> = (0..4).map(|_| s.udp_stream(t0).expect("stream")).collect();
    let got: Vec<(u32, Role)> = slots.iter().map(|s| (s.id, s.role)).collect();
    assert_eq!(
        got,
        vec![
            (1, Role::Receiver),
            (3, Role::Receiver),
            (4, Role::Sender),
            (5, Role::Sender)
        ]
    );
    assert!(s.is_running());
}

#[test]
fn signed_state_bytes_from_the_client() {
    // 0xFF (−1) while running is not a client message: IEMESSAGE.
    let t0 = Instant::now();
    let mut s = to_streams(r#"{"tcp":true}"#, t0);
    s.tcp_stream(&Cookie(*COOKIE), t0).expect("stream");
    s.take_outbox();
    s.poll_action();
    s.receive(&[0xFF], t0);
    assert_eq!(s.take_outbox()[..5], [0xFE, 0, 0, 0, 110]);
    assert_eq!(s.poll_action(), Some(ServerAction::AbortStreams));
    assert!(matches!(
        s.outcome(),
        Some(ServerOutcome::Failed(Iperf3Error::Unexpected {
            got: super::State::AccessDenied,
            ..
        }))
    ));

    // CLIENT_TERMINATE: drop everything, send nothing.
    let mut s = to_streams(r#"{"tcp":true}"#, t0);
    s.tcp_stream(&Cookie(*COOKIE), t0).expect("stream");
    s.take_outbox();
    s.poll_action();
    s.receive(&[0x0C], t0);
    assert!(s.take_outbox().is_empty());
    assert_eq!(s.poll_action(), Some(ServerAction::AbortStreams));
    assert!(matches!(
        s.outcome(),
        Some(ServerOutcome::Failed(Iperf3Error::ClientTerminated))
    ));
}

#[test]
fn client_results_naming_an_unknown_stream_fail_with_iestreamid() {
    let t0 = Instant::now();
    let mut s = to_streams(r#"{"tcp":true}"#, t0);
    s.tcp_stream(&Cookie(*COOKIE), t0).expect("stream");
    s.receive(&[0x04], t0);
    s.streams_stopped(t0);
    s.take_outbox();
    s.receive(&framed(&json::results_json(&results(&[2])).to_string()), t0);
    assert_eq!(s.take_outbox()[..5], [0xFE, 0, 0, 0, 208]);
    assert!(matches!(
        s.outcome(),
        Some(ServerOutcome::Failed(Iperf3Error::UnknownStream(2)))
    ));
}

#[test]
fn client_closing_after_display_results_completes_and_safety_timer_fires() {
    let t0 = Instant::now();
    let mut s = to_streams(r#"{"tcp":true,"time":1}"#, t0);
    s.tcp_stream(&Cookie(*COOKIE), t0).expect("stream");
    s.receive(&[0x04], t0);
    s.streams_stopped(t0);
    s.receive(&framed(&json::results_json(&results(&[1])).to_string()), t0);
    s.send_results(&results(&[1]), t0);
    s.peer_closed();
    assert!(matches!(s.outcome(), Some(ServerOutcome::Completed { .. })));

    let mut s = to_streams(r#"{"tcp":true,"time":1,"omit":1}"#, t0);
    s.tcp_stream(&Cookie(*COOKIE), t0).expect("stream");
    s.take_outbox();
    let at = s.poll_timeout().expect("safety deadline");
    assert_eq!(at, t0 + Duration::from_secs(42));
    s.handle_timeout(at - Duration::from_millis(1));
    assert!(!s.is_finished());
    s.handle_timeout(at);
    assert_eq!(s.take_outbox()[..5], [0xFE, 0, 0, 0, 160]);
}

#[test]
fn server_vanishing_client_in_every_phase_ends_cleanly() {
    let t0 = Instant::now();
    for cut in 0..6 {
        let mut s = to_streams(r#"{"tcp":true}"#, t0);
        if cut > 0 {
            s.tcp_stream(&Cookie(*COOKIE), t0).expect("stream");
        }
        if cut > 1 {
            s.receive(&[0x04], t0);
        }
        if cut > 2 {
            s.streams_stopped(t0);
        }
        if cut > 3 {
            s.receive(&framed(&json::results_json(&results(&[1])).to_string()), t0);
        }
        if cut > 4 {
            s.send_results(&results(&[1]), t0);
        }
        s.peer_closed();
        assert!(s.is_finished(), "cut {cut}");
        let aborted =
            std::iter::from_fn(|| s.poll_action()).any(|a| a == ServerAction::AbortStreams);
        assert_eq!(aborted, cut <= 2, "cut {cut}");
    }
}

proptest! {
    #[test]
    fn server_session_never_panics(chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..12)) {
        let t0 = Instant::now();
        let mut s = server(t0);
        let mut input = COOKIE.to_vec();
        input.extend(framed(r#"{"tcp":true,"parallel":1}"#));
        s.receive(&input, t0);
        s.streams_prepared(t0);
        let _ = s.tcp_stream(&Cookie(*COOKIE), t0);
        for c in &chunks {
            s.receive(c, t0);
            if s.poll_action() == Some(ServerAction::StopStreams) {
                s.streams_stopped(t0);
            }
        }
        s.handle_timeout(t0 + Duration::from_secs(100_000));
        prop_assert!(s.is_finished() || s.poll_timeout().is_none());
    }

    #[test]
    fn server_session_never_panics_from_the_first_byte(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let t0 = Instant::now();
        let mut s = server(t0);
        s.receive(&bytes, t0);
        s.streams_prepared(t0);
        let _ = s.udp_stream(t0);
        s.peer_closed();
        prop_assert!(s.is_finished());
    }

    #[test]
    fn client_session_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200), split in 0usize..200) {
        let t0 = Instant::now();
        let mut c = client(Params::default(), t0);
        let split = split.min(bytes.len());
        c.receive(&bytes[..split], t0);
        c.streams_created(t0);
        c.end_test(results(&[1]), t0);
        c.receive(&bytes[split..], t0);
        c.peer_closed();
        prop_assert!(c.is_finished());
    }
}

#[test]
fn issue_28_a_keyed_server_refuses_iperf3_before_admission() {
    let t0 = Instant::now();
    let limits = Iperf3Limits {
        auth_required: true,
        ..Iperf3Limits::default()
    };
    let mut s = Iperf3ServerSession::new(limits, t0);
    assert_eq!(
        s.poll_action(),
        None,
        "admission (and --max-tests-per-minute) not asked"
    );
    // SERVER_ERROR with IEAUTHTEST ("test authorization failed"), not
    // ACCESS_DENIED ("the server is busy").
    assert_eq!(s.take_outbox(), vec![0xFE, 0, 0, 0, 142, 0, 0, 0, 0]);
    assert!(matches!(s.outcome(), Some(ServerOutcome::Refused(why)) if why.contains("--auth-key")));
}

#[test]
fn issue_28_stream_setup_has_one_deadline() {
    let t0 = Instant::now();
    let mut s = to_streams(
        r#"{"udp":true,"time":1,"len":1400,"parallel":4,"bandwidth":1000000}"#,
        t0,
    );
    // One stream every 3 s: each inside a step's time, all of them not.
    for i in 1..4u64 {
        let at = t0 + Duration::from_secs(3 * i);
        s.handle_timeout(at);
        if s.is_finished() {
            break;
        }
        s.udp_stream(at).expect("stream");
    }
    s.handle_timeout(t0 + super::STEP_TIMEOUT);
    assert!(
        matches!(s.outcome(), Some(ServerOutcome::Failed(_))),
        "setup past one step's time: {:?}",
        s.outcome()
    );
}

#[test]
fn issue_28_client_results_are_capped_small() {
    let t0 = Instant::now();
    let mut s = to_streams(r#"{"tcp":true,"time":1,"parallel":1}"#, t0);
    s.tcp_stream(&Cookie(*COOKIE), t0).expect("stream");
    s.receive(&[0x04], t0);
    assert_eq!(s.poll_action(), Some(ServerAction::StartStreams));
    assert_eq!(s.poll_action(), Some(ServerAction::StopStreams));
    s.streams_stopped(t0);
    s.take_outbox();
    // The length prefix of a 1 MiB results message is refused at once.
    s.receive(&(1u32 << 20).to_be_bytes(), t0);
    assert!(matches!(s.outcome(), Some(ServerOutcome::Failed(_))));
    assert_eq!(
        s.take_outbox()[..5],
        [0xFE, 0, 0, 0, code::RECV_RESULTS as u8]
    );
}

/// Both iperf3 sessions offer the native sessions' interface (issue 24),
/// which is what the one control driver runs: driven here only through
/// [`Session`], they ask for admission first, agree on the test, hand the
/// driver its spec (the linerate test the parameters describe) and end on
/// a closed connection.
#[test]
fn issue_24_iperf3_sessions_offer_the_drivers_session_interface() {
    use linerate_proto::session::Session;
    use linerate_proto::spec::Limit;
    fn pass<A: Session, B: Session>(from: &mut A, to: &mut B, now: Instant) {
        let bytes = from.outbox().take();
        to.receive_at(&bytes, now, 0);
    }
    let t0 = Instant::now();
    let params = Params {
        protocol: Protocol::Udp,
        time: 2,
        parallel: 1,
        len: 1400,
        bandwidth: 1_000_000,
        ..Params::default()
    };
    let mut c = Iperf3ClientSession::new(params, Cookie(*COOKIE), t0);
    let mut s = Iperf3ServerSession::new(Iperf3Limits::default(), t0);
    assert_eq!(
        Session::poll_action(&mut s),
        Some(ServerAction::RequestAdmission)
    );
    s.admission(Admission::Admit);
    pass(&mut c, &mut s, t0); // the cookie
    pass(&mut s, &mut c, t0); // PARAM_EXCHANGE
    pass(&mut c, &mut s, t0); // the parameters
    assert_eq!(
        Session::poll_action(&mut s),
        Some(ServerAction::PrepareStreams)
    );
    let limit = |spec: Option<&linerate_proto::spec::TestSpec>| spec.map(|x| x.limit);
    assert_eq!(limit(Session::spec(&s)), Some(Limit::TimeMs(2000)));
    assert_eq!(limit(Session::spec(&c)), Some(Limit::TimeMs(2000)));
    Session::connection_ended(&mut s, Ended::Reset);
    Session::connection_ended(&mut c, Ended::Closed);
    assert!(Session::is_finished(&s) && Session::is_finished(&c));
}

/// Issue 28: an iperf3 session says a reset control connection as a reset,
/// in the native sessions' words; end of file stays "peer closed".
#[test]
fn issue_28_a_reset_is_not_said_as_the_peers_close() {
    let reset = Iperf3Error::from(Ended::Reset.error("running the test")).to_string();
    assert!(
        reset.starts_with("the peer reset the control connection while running the test"),
        "{reset}"
    );
    let closed = Iperf3Error::from(Ended::Closed.error("running the test")).to_string();
    assert_eq!(
        closed,
        "peer closed the control connection while running the test"
    );
}

/// Issue 24: the iperf3 server's setup steps waited a fixed 10 s each
/// (`STEP_TIMEOUT`), a second copy of the handshake deadline that ignored
/// the server's `--handshake-timeout`; a native session's steps wait that
/// long. Now the same limit: the cookie and the parameters within one
/// handshake time of the connection's accept (however they are spread),
/// each later step within one more.
#[test]
fn issue_24_iperf3_setup_steps_wait_the_servers_handshake_timeout() {
    let t0 = Instant::now();
    let limits = Iperf3Limits {
        server: ServerLimits {
            handshake_timeout_ms: 1_000,
            ..ServerLimits::default()
        },
        ..Iperf3Limits::default()
    };
    let mut s = decided(limits.clone(), Admission::Admit, t0);
    // The cookie just inside the time, the parameters never.
    s.receive(COOKIE, t0 + Duration::from_millis(900));
    s.handle_timeout(t0 + Duration::from_millis(1_500));
    assert!(
        matches!(s.outcome(), Some(ServerOutcome::Failed(_))),
        "parameters past --handshake-timeout from the accept: {:?}",
        s.outcome()
    );
    // Streams asked for, none opened within the server's step time.
    let mut s = decided(limits, Admission::Admit, t0);
    s.receive(COOKIE, t0);
    s.receive(&framed(r#"{"tcp":true,"time":1,"parallel":1}"#), t0);
    assert_eq!(s.poll_action(), Some(ServerAction::PrepareStreams));
    s.streams_prepared(t0);
    s.handle_timeout(t0 + Duration::from_millis(1_500));
    assert!(
        matches!(s.outcome(), Some(ServerOutcome::Failed(_))),
        "streams past --handshake-timeout: {:?}",
        s.outcome()
    );
}
