//! An iperf3 UDP test's streams attach only from its client (issue 28):
//! a hand-driven iperf3 control connection from 127.0.0.1 and a connect
//! datagram from 127.0.0.2, which must get nothing, while the client's
//! own datagram still attaches.

use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::time::Duration;

use super::logged_server;

/// iperf3's control states this test waits for.
const PARAM_EXCHANGE: u8 = 9;
const CREATE_STREAMS: u8 = 10;
const TEST_START: u8 = 1;

/// Reads one state byte from the control connection.
fn state(ctrl: &mut TcpStream) -> u8 {
    let mut b = [0u8; 1];
    ctrl.read_exact(&mut b).expect("state byte");
    b[0]
}

#[test]
fn issue_28_iperf3_connect_datagram_from_a_third_address_gets_nothing() {
    let (server, log) = logged_server(&[]);
    let Ok(victim) = UdpSocket::bind("127.0.0.2:0") else {
        eprintln!("SKIP: no 127.0.0.2 on this host");
        return;
    };
    let mut ctrl = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    ctrl.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    ctrl.write_all(b"issuetwentyeightissuetwentyeightabcd\0")
        .expect("cookie");
    assert_eq!(state(&mut ctrl), PARAM_EXCHANGE);
    // A reverse test: the server sends to whoever attaches the stream.
    let params = br#"{"udp":true,"reverse":true,"time":2,"parallel":1,"len":1000,"bandwidth":1000000,"client_version":"3.12"}"#;
    let mut framed = (params.len() as u32).to_be_bytes().to_vec();
    framed.extend_from_slice(params);
    ctrl.write_all(&framed).expect("params");
    assert_eq!(state(&mut ctrl), CREATE_STREAMS);
    let port = server.port;
    let mut buf = [0u8; 2048];
    victim
        .set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    for _ in 0..3 {
        victim.send_to(b"9876", ("127.0.0.1", port)).expect("send");
        assert!(
            victim.recv_from(&mut buf).is_err(),
            "the server answered a connect datagram from an address other than its client's"
        );
    }
    // The real client's datagram, from the control connection's address.
    let me = UdpSocket::bind("127.0.0.1:0").expect("bind");
    me.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    me.send_to(b"9876", ("127.0.0.1", port)).expect("send");
    let (n, _) = me.recv_from(&mut buf).expect("reply");
    assert_eq!(&buf[..n], b"6789");
    assert_eq!(state(&mut ctrl), TEST_START);
    // Data goes to the client only; the third address still hears nothing.
    assert!(me.recv_from(&mut buf).is_ok(), "no data to the client");
    assert!(
        victim.recv_from(&mut buf).is_err(),
        "test data reached 127.0.0.2"
    );
    drop(ctrl);
    let log = log.lock().map(|l| l.clone()).unwrap_or_default();
    assert!(log.contains("not from the test's client"), "{log}");
}
