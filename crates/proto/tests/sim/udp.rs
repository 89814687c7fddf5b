//! Simulated pair: UDP (issue 3): ports in the Accept, SendDone both ways.

use linerate_proto::session::client::ClientAction;
use linerate_proto::session::server::ServerAction;
use linerate_proto::session::SessionError;
use linerate_proto::spec::{Direction, TestSpec};
use linerate_proto::wire::{self, Message, RefuseCode};

use crate::harness::*;

fn udp_spec(direction: Direction, streams: u16) -> TestSpec {
    TestSpec {
        protocol: linerate_proto::spec::Protocol::Udp,
        direction,
        streams,
        len: 1472,
        udp: Some(linerate_proto::spec::UdpSpec::default()),
        ..TestSpec::default()
    }
}

#[test]
fn issue_3_udp_handshake_carries_ports_and_send_done_both_ways() {
    use linerate_proto::wire::{SendDone, SentCount};
    for direction in [Direction::Forward, Direction::Reverse, Direction::Bidir] {
        let s = udp_spec(direction, 2);
        let mut p = Pair::new(s.clone());
        p.shuttle();
        // The server binds sockets before it can accept.
        let bind = p
            .server_actions
            .iter()
            .find_map(|a| match a {
                ServerAction::BindDatagramSockets { token, spec } => Some((*token, spec.clone())),
                _ => None,
            })
            .expect("server asked to bind datagram sockets");
        assert_eq!(bind.1, s);
        assert!(p.client_actions.is_empty(), "no Accept before the ports");
        let ports: Vec<u16> = (0..s.connection_count() as u16)
            .map(|i| 40000 + i)
            .collect();
        p.server.datagram_sockets_bound(ports.clone(), p.now);
        p.shuttle();
        let got_ports = p
            .client_actions
            .iter()
            .find_map(|a| match a {
                ClientAction::OpenStreams { udp_ports, .. } => Some(udp_ports.clone()),
                _ => None,
            })
            .expect("client asked to open streams");
        assert_eq!(got_ports, ports);
        p.client.streams_opened(p.now);
        p.attach_all(TOKEN, &s);
        p.shuttle();
        assert_eq!(count(&p.client_actions, &ClientAction::StartStreams), 1);
        let done = |stream| SendDone {
            streams: vec![SentCount {
                stream,
                issued: 77,
                omitted: 0,
            }],
        };
        // Each side's senders finish: the peer is told, once.
        p.client.local_senders_finished(done(1).streams);
        p.client.local_senders_finished(done(1).streams);
        p.server.local_senders_finished(done(3).streams);
        p.shuttle();
        assert_eq!(
            count(&p.server_actions, &ServerAction::PeerSendDone(done(1))),
            1
        );
        assert_eq!(
            count(&p.client_actions, &ClientAction::PeerSendDone(done(3))),
            1
        );
        let (cr, sr) = p.finish(&s, true);
        assert_completed(&p, &s, &cr, &sr);
    }
}

#[test]
fn issue_3_udp_bind_failure_refuses_and_tcp_ignores_send_done() {
    let mut p = Pair::new(udp_spec(Direction::Forward, 1));
    p.shuttle();
    p.server.data_sockets_failed("no ports".into());
    p.shuttle();
    assert!(matches!(
        client_error(&p.client),
        SessionError::Refused {
            code: RefuseCode::Internal,
            ..
        }
    ));
    // SendDone in a TCP test is a protocol error.
    let (mut p, _) = pair_at(Stage::Running, TestSpec::default());
    p.deliver_to_server(&wire::to_bytes(&Message::SendDone(
        linerate_proto::wire::SendDone { streams: vec![] },
    )));
    assert!(matches!(
        server_error(&p.server),
        SessionError::Unexpected {
            message: "SendDone",
            ..
        }
    ));
}
