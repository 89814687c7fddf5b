//! The iperf3 UDP handshake and loops on loopback: both accounts exact
//! with every engine, and the batch engine's many datagrams per call.

use std::sync::Arc;
use std::time::{Duration, Instant};

use linerate_engine::caps::caps;
use linerate_engine::engines::batch::Toggle;
use linerate_engine::engines::{with_engine, Batch, Engine, EngineKind};
use linerate_engine::stream::{Signals, StreamCounter, StreamEnd};
use linerate_engine::udp::{self, RecvJob, SendJob, StreamFormat, UdpCounters};
use linerate_engine::wait::Wait;
use linerate_proto::measure::{UdpRecv, UdpSend};

use super::*;
use crate::udp as wire;

fn skip(why: &str) {
    eprintln!("SKIPPED: {why}");
}

const LOCALHOST: std::net::IpAddr = std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

/// The stream socket and next listener of an accepted connect datagram.
fn stream(
    r: Result<UdpAccepted, linerate_engine::EngineError>,
) -> (std::net::UdpSocket, std::net::UdpSocket) {
    match r.expect("io") {
        UdpAccepted::Stream { stream, next } => (stream, next),
        other => panic!("no stream: {other:?}"),
    }
}

/// A connect datagram from an address other than the control
/// connection's peer attaches nothing and gets no reply (else a reverse
/// test would flood that address); the listener stays open, and the real
/// client's datagram still attaches.
#[test]
fn issue_28_iperf3_connect_datagram_from_a_third_address_is_ignored() {
    let first = udp_listener("127.0.0.1:0".parse().expect("addr")).expect("bind");
    let addr = first.local_addr().expect("addr");
    let Ok(victim) = std::net::UdpSocket::bind("127.0.0.2:0") else {
        return skip("no 127.0.0.2 on this host");
    };
    victim.send_to(&wire::CONNECT, addr).expect("send");
    let listener = match udp_accept(first, LOCALHOST, Duration::from_secs(2)).expect("io") {
        UdpAccepted::Waiting {
            listener,
            stray: Some(stray),
        } => {
            assert_eq!(stray.from, victim.local_addr().expect("addr"));
            assert!(stray.to_string().contains("not from the test's client"));
            listener
        }
        other => panic!("a stray datagram was taken: {other:?}"),
    };
    victim
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let mut b = [0u8; 8];
    assert!(
        victim.recv(&mut b).is_err(),
        "the third address got a reply"
    );
    let client = udp::connect(addr).expect("client");
    client.send(&wire::CONNECT).expect("send");
    let (s, _next) = stream(udp_accept(listener, LOCALHOST, Duration::from_secs(2)));
    assert_eq!(
        s.peer_addr().expect("peer"),
        client.local_addr().expect("c")
    );
}

#[test]
fn udp_handshake_connects_replies_and_reopens_the_port() {
    let first = udp_listener("127.0.0.1:0".parse().expect("addr")).expect("bind");
    let addr = first.local_addr().expect("addr");
    let c1 = udp::connect(addr).expect("client 1");
    let c2 = udp::connect(addr).expect("client 2");
    c1.send(&wire::CONNECT).expect("send");
    let (s1, next) = stream(udp_accept(first, LOCALHOST, Duration::from_secs(2)));
    c1.set_read_timeout(Some(Duration::from_secs(2)))
        .expect("timeout");
    let mut b = [0u8; 8];
    let n = c1.recv(&mut b).expect("reply");
    assert_eq!(&b[..n], b"6789");
    c2.send(&wire::CONNECT).expect("send");
    // The second datagram reaches the new listener.
    let (s2, _next) = stream(udp_accept(next, LOCALHOST, Duration::from_secs(2)));
    assert_eq!(s1.peer_addr().expect("peer"), c1.local_addr().expect("c1"));
    assert_eq!(s2.peer_addr().expect("peer"), c2.local_addr().expect("c2"));
    // Data from client 1 goes to its stream socket.
    c1.send(b"data").expect("send");
    s1.set_read_timeout(Some(Duration::from_secs(2)))
        .expect("timeout");
    assert_eq!(s1.recv(&mut b).expect("data"), 4);
}

/// A connected pair on loopback with room for every datagram a test
/// queues, the receiver prepared for `rx_engine` as a server prepares an
/// accepted stream.
fn pair(rx_engine: EngineKind) -> (std::net::UdpSocket, std::net::UdpSocket) {
    let rx = udp::bind("127.0.0.1".parse().expect("ip")).expect("bind");
    let tx = udp::connect(rx.local_addr().expect("addr")).expect("connect");
    rx.connect(tx.local_addr().expect("addr"))
        .expect("connect back");
    udp::set_buffers(&rx, 8 << 20).expect("buffers");
    udp::prepare_recv(rx_engine, &rx);
    (tx, rx)
}

/// Sends `count` datagrams of `len` bytes (unpaced when `millipps` is
/// `None`) with `tx_engine`; with `queued`, all before the receiver with
/// `rx_engine` starts. Returns both ends' measurements.
fn run(
    tx_engine: EngineKind,
    rx_engine: EngineKind,
    len: usize,
    count: u64,
    millipps: Option<u64>,
    queued: bool,
) -> ((UdpSend, StreamEnd), (UdpRecv, StreamEnd)) {
    let (tx, rx) = pair(rx_engine);
    let cfg = Iperf3Streams {
        counters_64bit: true,
        omit: Duration::ZERO,
    };
    let start = Instant::now();
    let signals = Arc::new(Signals::default());
    let rjob = RecvJob {
        stream: 1,
        len,
        verify: false,
        start,
        omit_ns: 0,
    };
    let s2 = Arc::clone(&signals);
    let receive = move || {
        with_engine!(rx_engine, e => {
            let rx = e.udp_endpoint(rx).expect("endpoint");
            cfg.recv(udp::RecvStream {
                engine: e,
                ep: &rx,
                job: &rjob,
                bytes: &StreamCounter::default(),
                live: &UdpCounters::default(),
                signals: &s2,
                wait: Wait::Block,
            })
        })
    };
    let job = SendJob {
        stream: 1,
        len,
        millipps,
        burst: 1,
        verify: false,
        faults: Vec::new(),
        limit: Some(count),
        start,
        format: cfg.sender(start),
        omit_ns: 0,
    };
    let sender = || {
        with_engine!(tx_engine, e => {
            let tx = e.udp_endpoint(tx).expect("endpoint");
            let (bytes, live) = (StreamCounter::default(), UdpCounters::default());
            udp::send(e, &tx, &job, &bytes, &live, &signals, Wait::Block)
        })
    };
    let (sent, got) = if queued {
        let sent = sender();
        signals.drain_at(0);
        (sent, std::thread::spawn(receive).join().expect("receiver"))
    } else {
        let receiver = std::thread::spawn(receive);
        let sent = sender();
        signals.drain_at(udp::ns_since(start) + 50_000_000);
        (sent, receiver.join().expect("receiver"))
    };
    sent.1.result.as_ref().expect("sent");
    got.1.result.as_ref().expect("received");
    (sent, got)
}

/// Both accounts saw exactly `count` datagrams of `len` bytes, in order.
fn assert_exact(got: &UdpRecv, count: u64, len: usize) {
    assert_eq!(
        (got.received, got.next_expected, got.corrupt, got.duplicates),
        (count, count, 0, 0)
    );
    assert_eq!(got.reordered, 0);
    let c = got.iperf3.expect("iperf3 counts");
    assert_eq!(
        (c.max_seq, c.lost, c.out_of_order, c.bytes, c.datagrams),
        (count, 0, 0, count * len as u64, count)
    );
}

#[test]
fn iperf3_datagrams_counted_both_ways_with_every_engine() {
    let mut engines = vec![
        EngineKind::Syscall,
        EngineKind::Batch(Batch {
            gso: Toggle::Off,
            gro: Toggle::Off,
        }),
    ];
    if caps().udp_segment.is_ok() && caps().udp_gro.is_ok() {
        engines.push(EngineKind::Batch(Batch {
            gso: Toggle::On,
            gro: Toggle::On,
        }));
    }
    for tx in &engines {
        for rx in &engines {
            // Paced at 10 k/s: arrives while the receiver runs.
            let ((sent, _), (got, _)) = run(*tx, *rx, 100, 50, Some(10_000_000), false);
            assert_eq!((sent.issued, sent.datagrams), (50, 50), "{tx} → {rx}");
            assert_exact(&got, 50, 100);
        }
    }
}

/// Issue 9: an iperf3 stream's receiver took one `recv` per datagram
/// whatever the engine. With the batch engine, datagrams queued on the
/// socket are taken many per `recvmmsg` (and with GRO many per message),
/// every one still counted exactly by both accounts; the sender hands
/// whole batches to `sendmmsg`.
#[test]
fn issue_9_iperf3_streams_move_many_datagrams_per_call_with_the_batch_engine() {
    let plain = EngineKind::Batch(Batch {
        gso: Toggle::Off,
        gro: Toggle::Off,
    });
    let count = 600;
    let len = 1448;
    let ((sent, tx_end), (got, rx_end)) = run(plain, plain, len, count, None, true);
    assert_eq!(sent.datagrams, count);
    assert_exact(&got, count, len);
    // 64 datagrams per sendmmsg; the kernel may take fewer when its buffer
    // is full, so only "many per call" is certain.
    assert!(tx_end.calls * 4 <= count, "{} sendmmsg calls", tx_end.calls);
    assert!(rx_end.calls * 4 <= count, "{} recvmmsg calls", rx_end.calls);
    let b = got.batching.as_ref().expect("the receiver says it batched");
    assert_eq!((b.messages_per_call, b.gro), (64, false));
    let b = sent.batching.as_ref().expect("the sender says it batched");
    assert_eq!((b.messages_per_call, b.gso_segments), (64, None));

    let c = caps();
    if let Err(e) = c.udp_segment.as_ref().and(c.udp_gro.as_ref()) {
        return skip(&format!(
            "the GSO/GRO half needs UDP_SEGMENT and UDP_GRO: {e}"
        ));
    }
    let gsro = EngineKind::Batch(Batch {
        gso: Toggle::On,
        gro: Toggle::On,
    });
    let ((sent, tx_end), (got, rx_end)) = run(gsro, gsro, len, count, None, true);
    assert_exact(&got, count, len);
    let b = sent.batching.as_ref().expect("GSO batching");
    // 128 segments where the kernel takes them, else 64 (noted).
    use linerate_engine::engines::batch::mmsg::{
        segments_per_send, GSO_MAX_SEGMENTS, GSO_PORTABLE_SEGMENTS,
    };
    let segs =
        [GSO_MAX_SEGMENTS, GSO_PORTABLE_SEGMENTS].map(|m| Some(segments_per_send(len, m) as u32));
    assert!(segs.contains(&b.gso_segments), "{b:?}");
    assert!(tx_end.calls * 40 <= count, "{} GSO calls", tx_end.calls);
    let b = got.batching.as_ref().expect("GRO batching");
    assert!(b.gro && b.gro_super_buffers > 0, "{b:?}");
    assert!(rx_end.calls * 40 <= count, "{} GRO calls", rx_end.calls);
}

/// The listener is bound without SO_REUSEADDR: a socket that asks for it
/// cannot bind the same address and take the next connect datagram
/// (another uid is kept out of SO_REUSEPORT by the kernel; the e2e test
/// `issue_28_another_user_cannot_bind_the_iperf3_udp_listener` runs it
/// as `nobody`).
#[test]
fn issue_28_iperf3_udp_listener_cannot_be_shared_by_so_reuseaddr() {
    let listener = udp_listener("127.0.0.1:0".parse().expect("addr")).expect("bind");
    let addr = listener.local_addr().expect("addr");
    let s = socket2::Socket::new(
        socket2::Domain::IPV4,
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )
    .expect("socket");
    s.set_reuse_address(true).expect("SO_REUSEADDR");
    assert!(
        s.bind(&addr.into()).is_err(),
        "a SO_REUSEADDR socket bound the listener's address"
    );
}
