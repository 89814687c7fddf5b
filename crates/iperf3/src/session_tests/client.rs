//! Client session tests with a fake iperf3 server: the exact bytes a real
//! server sends, and the client against this crate's server session.

use std::time::Instant;

use super::*;

#[test]
fn client_sends_cookie_then_params_and_follows_the_server() {
    let t0 = Instant::now();
    let mut c = client(
        Params {
            parallel: 2,
            time: 2,
            ..Params::default()
        },
        t0,
    );
    assert_eq!(c.take_outbox(), COOKIE.to_vec());
    c.receive(&[0x09], t0);
    let mut out = c.take_outbox();
    let body = json::take_message(&mut out, json::MAX_PARAMS)
        .expect("framed")
        .expect("whole");
    let p = json::parse_params(&body).expect("valid").params;
    assert_eq!((p.parallel, p.time, p.protocol), (2, 2, Protocol::Tcp));
    c.receive(&[0x0A], t0);
    assert_eq!(c.poll_action(), Some(ClientAction::CreateStreams));
    assert_eq!(c.stream_ids(), vec![1, 3]);
    // 01 02 may arrive in the same read as 0A, before the streams exist.
    c.receive(&[0x01, 0x02], t0);
    assert_eq!(c.poll_action(), None);
    c.streams_created(t0);
    assert_eq!(c.poll_action(), Some(ClientAction::TestStart));
    assert_eq!(c.poll_action(), Some(ClientAction::TestRunning));
    assert!(c.is_running());
    c.end_test(results(&[1, 3]), t0);
    assert_eq!(c.take_outbox(), vec![0x04]);
    c.receive(&[0x0D], t0);
    let mut out = c.take_outbox();
    let body = json::take_message(&mut out, json::MAX_RESULTS)
        .expect("framed")
        .expect("whole");
    assert_eq!(json::parse_results(&body).expect("valid").streams.len(), 2);
    // 3.12 server results: unsigned −1s, split at an awkward place, 0E in the same read.
    let server = r#"{"cpu_util_total":11.46,"cpu_util_user":1,"cpu_util_system":10.46,"sender_has_retransmits":18446744073709551615,"congestion_used":"bbr","streams":[{"id":1,"bytes":538957824,"retransmits":18446744073709551615,"jitter":0,"errors":0,"packets":0,"start_time":0,"end_time":2.001297},{"id":3,"bytes":5,"retransmits":18446744073709551615,"jitter":0,"errors":0,"packets":0,"start_time":0,"end_time":2.001297}]}"#;
    let mut bytes = framed(server);
    bytes.push(0x0E);
    c.receive(&bytes[..3], t0);
    c.receive(&bytes[3..], t0);
    assert_eq!(c.take_outbox(), vec![0x10]);
    match c.outcome() {
        Some(ClientOutcome::Completed { server }) => {
            assert_eq!(server.sender_has_retransmits, -1);
            assert_eq!(server.streams[0].retransmits, -1);
            assert_eq!(server.streams[0].bytes, 538_957_824);
        }
        o => panic!("{o:?}"),
    }
}

#[test]
fn client_reports_busy_server_errors_and_closes() {
    let t0 = Instant::now();
    let fails = |bytes: &[u8], close: bool| {
        let mut c = client(Params::default(), t0);
        c.receive(bytes, t0);
        if close {
            c.peer_closed();
        }
        match c.outcome() {
            Some(ClientOutcome::Failed(e)) => e.clone(),
            o => panic!("{o:?}"),
        }
    };
    assert_eq!(fails(&[0xFF], false), Iperf3Error::AccessDenied);
    assert_eq!(
        fails(&[0xFE, 0, 0, 0, 0x8D, 0, 0, 0, 0], false),
        Iperf3Error::ServerError {
            code: 141,
            errno: Some(0)
        }
    );
    // Code only, then close (authentication failure on ≤3.18).
    assert_eq!(
        fails(&[0x09, 0xFE, 0, 0, 0, 142], true),
        Iperf3Error::ServerError {
            code: 142,
            errno: None
        }
    );
    assert_eq!(fails(&[0x09, 0x0B], false), Iperf3Error::ServerTerminated);
    assert_eq!(fails(&[0x09, 0x03], false), Iperf3Error::UnknownState(3));
    assert!(matches!(
        fails(&[0x09], true),
        Iperf3Error::Control(linerate_proto::session::ControlIoError::PeerClosed(_))
    ));
    assert!(matches!(
        fails(&[0x0A], false),
        Iperf3Error::Unexpected { .. }
    ));
    let msg = fails(&[0xFF], false).to_string();
    assert!(msg.contains("busy"), "{msg}");
}

#[test]
fn client_refuses_server_results_for_streams_it_does_not_have() {
    let t0 = Instant::now();
    let mut c = client(Params::default(), t0);
    c.receive(&[0x09, 0x0A], t0);
    c.streams_created(t0);
    c.receive(&[0x01, 0x02], t0);
    c.end_test(results(&[1]), t0);
    c.receive(&[0x0D], t0);
    c.receive(
        &framed(&json::results_json(&results(&[1, 3])).to_string()),
        t0,
    );
    assert!(matches!(
        c.outcome(),
        Some(ClientOutcome::Failed(Iperf3Error::UnknownStream(3)))
    ));
}

/// The two sessions against each other, as linerate client ↔ linerate
/// iperf3 server would run.
#[test]
fn client_and_server_sessions_complete_a_udp_bidir_test() {
    let t0 = Instant::now();
    let params = Params {
        protocol: Protocol::Udp,
        parallel: 2,
        direction: Direction::Bidir,
        len: 1400,
        bandwidth: 1_000_000,
        udp_counters_64bit: true,
        ..Params::default()
    };
    let mut c = client(params, t0);
    let mut s = server(t0);
    let mut server_roles = Vec::new();
    for _ in 0..20 {
        s.receive(&c.take_outbox(), t0);
        while let Some(a) = s.poll_action() {
            match a {
                ServerAction::PrepareStreams => s.streams_prepared(t0),
                ServerAction::ClientResults(_) => s.send_results(&results(&[1, 3, 4, 5]), t0),
                ServerAction::StopStreams => s.streams_stopped(t0),
                _ => {}
            }
        }
        c.receive(&s.take_outbox(), t0);
        while let Some(a) = c.poll_action() {
            match a {
                ClientAction::CreateStreams => {
                    for _ in 0..4 {
                        server_roles.push(s.udp_stream(t0).expect("stream").role);
                    }
                    c.streams_created(t0);
                }
                // TEST_END first, results when asked (what the I/O layer does).
                ClientAction::TestRunning => c.stop(t0),
                ClientAction::SendResults => c.results(results(&[1, 3, 4, 5]), t0),
                ClientAction::TestStart => {}
            }
        }
        if c.is_finished() && s.is_finished() {
            break;
        }
    }
    assert!(
        matches!(c.outcome(), Some(ClientOutcome::Completed { .. })),
        "{:?}",
        c.outcome()
    );
    assert!(
        matches!(s.outcome(), Some(ServerOutcome::Completed { .. })),
        "{:?}",
        s.outcome()
    );
    assert_eq!(
        server_roles,
        vec![Role::Receiver, Role::Receiver, Role::Sender, Role::Sender]
    );
    let p = match s.outcome() {
        Some(ServerOutcome::Completed { params, .. }) => params.clone(),
        _ => unreachable!(),
    };
    assert!(p.udp_counters_64bit && p.direction == Direction::Bidir && p.len == 1400);
}

/// `stop()`: TEST_END goes out at once, this side's results only when the
/// server asks for them (its senders stopped), so receivers count all it
/// sent (issue 9: no false loss at the tail of a reverse UDP test).
#[test]
fn issue_9_client_stop_sends_test_end_then_results_when_asked() {
    let t0 = Instant::now();
    let mut c = client(
        Params {
            parallel: 1,
            time: 1,
            ..Params::default()
        },
        t0,
    );
    let _ = c.take_outbox();
    c.receive(&[0x09, 0x0A], t0);
    let _ = c.take_outbox();
    assert_eq!(c.poll_action(), Some(ClientAction::CreateStreams));
    c.streams_created(t0);
    c.receive(&[0x01, 0x02], t0);
    assert_eq!(c.poll_action(), Some(ClientAction::TestStart));
    assert_eq!(c.poll_action(), Some(ClientAction::TestRunning));
    c.stop(t0);
    assert_eq!(c.take_outbox(), vec![0x04]);
    assert_eq!(c.poll_action(), None);
    c.receive(&[0x0D], t0);
    assert_eq!(c.poll_action(), Some(ClientAction::SendResults));
    assert!(c.take_outbox().is_empty(), "results before they were given");
    c.results(results(&[1]), t0);
    let mut out = c.take_outbox();
    let body = json::take_message(&mut out, json::MAX_RESULTS)
        .expect("framed")
        .expect("whole");
    assert_eq!(json::parse_results(&body).expect("valid").streams.len(), 1);
    assert!(!c.is_finished());
}
