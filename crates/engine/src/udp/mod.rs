//! UDP data sockets: binding and connecting them, buffer sizes, the attach
//! handshake; and (in submodules) the live counters and the send and
//! receive loops of a UDP stream, generic over the engine and so over its
//! endpoint ([`crate::engines::endpoint`]): the handshake runs on the
//! control plane's kernel sockets, then the stream's engine takes the
//! socket as its endpoint, and the loops touch only that.
//!
//! Attach handshake (reusable by any datagram test): the server binds one
//! socket per stream on an ephemeral port and sends the ports in its Accept.
//! The client connects a socket to each and sends the stream's `DataHello`
//! control frame as a datagram, every [`GREET_EVERY`] until the server echoes
//! it back byte for byte (at most [`GREET_TRIES`] times). The server checks
//! the token and stream, connects its socket to the greeting's source (from
//! then on the kernel drops datagrams from anyone else) and echoes. Should
//! the echo of the last greeting be lost after the test started, a
//! receiving server echoes repeated greetings from its receive loop (through
//! its endpoint), and a
//! client whose server already sends data takes that as the answer.

mod format;
mod live;
mod recv;
mod send;
mod timing;

use std::io::ErrorKind;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use linerate_proto::datagram;

use crate::cmsg::{SO_RCVBUFFORCE, SO_SNDBUFFORCE};
use crate::socket::set_int;
use crate::EngineError;

pub use format::{Native, StreamFormat};
/// A receiving socket's greeting handshake is done: what arrives from now
/// on is the test's ([`crate::engines::Engine::udp_rx_greeted`]).
pub fn greeted(kind: crate::engines::EngineKind, sock: &std::net::UdpSocket) {
    use crate::engines::Engine;
    crate::engines::with_engine!(kind, e => e.udp_rx_greeted(sock))
}

pub use live::UdpCounters;
pub use recv::{prepare as prepare_recv, recv, RecvJob, RecvStream};

/// Prepares a client's sending socket when it is attached, before the
/// greeting and the test start: what engine `kind` takes long to set up
/// ([`crate::engines::Engine::udp_tx_attach`]).
pub fn prepare_send(kind: crate::engines::EngineKind, sock: &std::net::UdpSocket) {
    use crate::engines::Engine;
    crate::engines::with_engine!(kind, e => e.udp_tx_attach(sock))
}
pub(crate) use recv::Sink;
pub use recv::{realtime_at, recv_batches, stream_rx, Received};
pub(crate) use send::{count_beats, tighten_timer_slack};
pub use send::{send, SendJob};
pub use timing::{ns_since, RECV_POLL};

/// How often the client repeats an unanswered greeting.
pub const GREET_EVERY: Duration = Duration::from_millis(100);
/// Greetings sent before the client gives up on a stream.
pub const GREET_TRIES: u32 = 50;

fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// Binds a data socket to `local` (canonicalised: an IPv4-mapped address
/// gets an IPv4 socket) on an ephemeral port.
pub fn bind(local: IpAddr) -> Result<UdpSocket, EngineError> {
    let addr = SocketAddr::new(canonical_ip(local), 0);
    UdpSocket::bind(addr).map_err(|e| EngineError::io(format!("bind UDP {addr}"), e))
}

/// A socket connected to `peer` (from an ephemeral local port).
pub fn connect(peer: SocketAddr) -> Result<UdpSocket, EngineError> {
    connect_from(peer, None)
}

/// [`connect`] from `local` (an ephemeral port on it) when given:
/// iperf3's `-B` on a client.
pub fn connect_from(peer: SocketAddr, local: Option<IpAddr>) -> Result<UdpSocket, EngineError> {
    let peer = SocketAddr::new(canonical_ip(peer.ip()), peer.port());
    let any: IpAddr = match peer {
        SocketAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
        SocketAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
    };
    let from = SocketAddr::new(local.unwrap_or(any), 0);
    let sock = UdpSocket::bind(from)
        .map_err(|e| EngineError::io(format!("bind UDP socket to {from}"), e))?;
    sock.connect(peer)
        .map_err(|e| EngineError::io(format!("connect UDP to {peer}"), e))?;
    Ok(sock)
}

/// Sets SO_SNDBUF and SO_RCVBUF to `bytes`: with the FORCE variants first
/// (root may exceed wmem_max/rmem_max), else the plain ones (capped by the
/// sysctls). Returns a note with what the kernel granted.
pub fn set_buffers(sock: &UdpSocket, bytes: u32) -> Result<String, EngineError> {
    let v = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    let mut forced = true;
    for (force, plain, name) in [
        (SO_SNDBUFFORCE, libc::SO_SNDBUF, "SO_SNDBUF"),
        (SO_RCVBUFFORCE, libc::SO_RCVBUF, "SO_RCVBUF"),
    ] {
        if set_int(sock, libc::SOL_SOCKET, force, v).is_err() {
            forced = false;
            set_int(sock, libc::SOL_SOCKET, plain, v).map_err(|e| EngineError::io(name, e))?;
        }
    }
    let s = socket2::SockRef::from(sock);
    let snd = s.send_buffer_size().unwrap_or(0);
    let rcv = s.recv_buffer_size().unwrap_or(0);
    Ok(format!(
        "UDP socket buffers: {bytes} bytes requested, SO_SNDBUF {snd} / SO_RCVBUF {rcv} granted ({})",
        if forced {
            "forced past the sysctl limits; the kernel doubles the request"
        } else {
            "not root: capped at wmem_max/rmem_max; the kernel doubles the request"
        }
    ))
}

/// Client side of the attach handshake: greets until the echo arrives.
pub fn greet(sock: &UdpSocket, hello: &[u8]) -> Result<(), EngineError> {
    sock.set_read_timeout(Some(GREET_EVERY))
        .map_err(|e| EngineError::io("UDP read timeout", e))?;
    let mut buf = [0u8; 128];
    for _ in 0..GREET_TRIES {
        match sock.send(hello) {
            Ok(_) => {}
            // A refused greeting (no socket yet, ICMP) is retried like a lost one.
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {}
            Err(e) => return Err(EngineError::io("send UDP greeting", e)),
        }
        let until = Instant::now() + GREET_EVERY;
        while Instant::now() < until {
            // Peek first: a data datagram must stay queued for the test.
            match sock.peek(&mut buf) {
                Ok(n) if buf.get(..n) == Some(hello) => {
                    let _ = sock.recv(&mut buf);
                    return Ok(());
                }
                // The server already sends data on this stream, so it took
                // our greeting (its echo was lost).
                Ok(n) if n >= 2 && buf[..2] == datagram::MAGIC => return Ok(()),
                Ok(_) => {
                    let _ = sock.recv(&mut buf);
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::WouldBlock
                            | ErrorKind::TimedOut
                            | ErrorKind::Interrupted
                            | ErrorKind::ConnectionRefused
                    ) =>
                {
                    if e.kind() != ErrorKind::Interrupted {
                        break;
                    }
                }
                Err(e) => return Err(EngineError::io("receive UDP greeting echo", e)),
            }
        }
    }
    Err(EngineError::Unanswered(format!(
        "the server did not answer {GREET_TRIES} UDP greetings over {:.1} s (is UDP to its port blocked?)",
        (GREET_EVERY * GREET_TRIES).as_secs_f64()
    )))
}

/// A datagram that would attach a UDP stream but came from an address
/// other than the test's client (its control connection's peer): ignored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("UDP datagram from {from}, not from the test's client {client}, ignored")]
pub struct NotTheClient {
    pub from: SocketAddr,
    pub client: IpAddr,
}

/// The one rule for every datagram that attaches a UDP stream on a server
/// (native greetings, iperf3 connect datagrams): only the control
/// connection's peer may, so no one can make the server send test traffic
/// to a third host. Addresses compare as IPv4 where one side is an
/// IPv4-mapped IPv6 address (a dual-stack control listener).
pub fn from_client(from: SocketAddr, client: IpAddr) -> Result<(), NotTheClient> {
    let ip = |a: IpAddr| crate::socket::canonical(SocketAddr::new(a, 0)).ip();
    if ip(from.ip()) == ip(client) {
        Ok(())
    } else {
        Err(NotTheClient { from, client })
    }
}

/// Server side: one pending datagram on an unattached socket, if any.
pub fn poll_greeting(sock: &UdpSocket, buf: &mut [u8]) -> Option<(usize, SocketAddr)> {
    let _ = sock.set_nonblocking(true);
    let r = sock.recv_from(buf).ok();
    let _ = sock.set_nonblocking(false);
    r
}

/// Server side, once a data socket is connected to its client: drops the
/// datagrams queued before `connect()` (they came from anyone; the client
/// sends data only after the server's answer), a bounded number.
pub fn drop_queued(sock: &UdpSocket) {
    let mut scratch = [0u8; 64];
    for _ in 0..4096 {
        if poll_greeting(sock, &mut scratch).is_none() {
            break;
        }
    }
}

/// Server side: the greeting from `from` was accepted; connect to it and
/// echo the greeting back.
pub fn accept_greeting(
    sock: &UdpSocket,
    from: SocketAddr,
    greeting: &[u8],
) -> Result<(), EngineError> {
    sock.connect(from)
        .map_err(|e| EngineError::io(format!("connect UDP to {from}"), e))?;
    sock.send(greeting)
        .map_err(|e| EngineError::io("echo UDP greeting", e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use crate::engines::{Engine, Interest, KernelUdp, Readiness, Syscall, UdpEndpoint};
    use crate::stream::{Signals, StreamCounter};
    use crate::test_endpoint::{mem_pair, Mem};
    use crate::wait::Wait;
    use linerate_proto::datagram;
    use linerate_proto::rr_core::SpinMode;

    #[test]
    fn greeting_is_echoed_and_connects_the_server_socket() {
        let server = bind("127.0.0.1".parse().expect("ip")).expect("bind");
        let port = server.local_addr().expect("addr").port();
        let client = connect(SocketAddr::from(([127, 0, 0, 1], port))).expect("connect");
        let t = std::thread::spawn(move || {
            let mut buf = [0u8; 64];
            for _ in 0..200 {
                if let Some((n, from)) = poll_greeting(&server, &mut buf) {
                    accept_greeting(&server, from, &buf[..n]).expect("echo");
                    return;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            panic!("no greeting");
        });
        greet(&client, b"LR hello").expect("echoed");
        t.join().expect("server thread");
    }

    #[test]
    fn data_from_the_server_answers_a_greeting_and_stays_queued() {
        let server = bind("127.0.0.1".parse().expect("ip")).expect("bind");
        let client = connect(server.local_addr().expect("addr")).expect("connect");
        server
            .connect(client.local_addr().expect("addr"))
            .expect("connect back");
        // The server attached this stream and started; the echo was lost.
        server.send(b"LU data").expect("send");
        greet(&client, b"LR hello").expect("data counts as the answer");
        let mut buf = [0u8; 16];
        let n = client.recv(&mut buf).expect("still queued");
        assert_eq!(&buf[..n], b"LU data");
    }

    #[test]
    fn loops_count_faults_exactly_on_loopback() {
        for wait in [Wait::Block, Wait::Spin(SpinMode::Shared)] {
            let rx = bind("127.0.0.1".parse().expect("ip")).expect("bind");
            let tx = connect(rx.local_addr().expect("addr")).expect("connect");
            rx.connect(tx.local_addr().expect("addr"))
                .expect("connect back");
            set_buffers(&rx, 4 << 20).expect("buffers");
            count_faults(Syscall, KernelUdp::new(tx), KernelUdp::new(rx), wait);
        }
    }

    /// What a kernel-bypass engine needs of the UDP loops: they run on its
    /// own endpoint, here in-memory queues with no socket at all, count
    /// exactly, and echo a repeated greeting through the endpoint.
    #[test]
    fn issue_24_udp_loops_run_on_an_endpoint_without_a_kernel_socket() {
        for wait in [Wait::Block, Wait::Spin(SpinMode::Shared)] {
            let (tx, rx) = mem_pair();
            // The client repeated its greeting: queued before the data.
            tx.inject(b"LR\x01hello");
            let (tx, rx) = count_faults(Mem, tx, rx, wait);
            assert_eq!(rx.controls.get(), 1, "the greeting was echoed");
            assert!(tx.wait_ready(Interest::Recv, Duration::ZERO).expect("echo"));
        }
    }

    /// Sends 100 datagrams with faults from `tx` to `rx` through `engine`'s
    /// loops and checks the receiver's exact counts; hands the endpoints
    /// back.
    fn count_faults<E: Engine>(
        engine: E,
        tx: E::UdpEndpoint,
        rx: E::UdpEndpoint,
        wait: Wait,
    ) -> (E::UdpEndpoint, E::UdpEndpoint)
    where
        E::UdpEndpoint: Send + 'static,
    {
        if wait != Wait::Block {
            rx.busy_poll().expect("busy poll");
            tx.busy_poll().expect("busy poll");
        }
        let start = Instant::now();
        let signals = Arc::new(Signals::default());
        let live_rx = Arc::new(UdpCounters::default());
        let job = RecvJob {
            stream: 1,
            len: 200,
            verify: true,
            start,
            omit_ns: 0,
        };
        let (s2, l2) = (Arc::clone(&signals), Arc::clone(&live_rx));
        let receiver = std::thread::spawn(move || {
            let (got, end) = recv(RecvStream {
                engine,
                ep: &rx,
                job: &job,
                bytes: &StreamCounter::default(),
                live: &l2,
                signals: &s2,
                wait,
            });
            (got, end, rx)
        });
        let send = SendJob {
            stream: 1,
            len: 200,
            millipps: Some(20_000_000),
            burst: 1,
            verify: true,
            faults: datagram::parse_faults("skip:3,dup:10,swap:20,magic:30,payload:40,stream:50")
                .expect("faults"),
            limit: Some(100),
            start,
            format: linerate_proto::udp_sender::Linerate,
            omit_ns: 0,
        };
        let (sent, end) = super::send(
            engine,
            &tx,
            &send,
            &StreamCounter::default(),
            &UdpCounters::default(),
            &signals,
            wait,
        );
        end.result.expect("sent");
        assert_eq!(sent.issued, 100);
        assert_eq!(sent.datagrams, 100);
        live_rx.set_issued(sent.issued);
        // The receiver's drain: a second after the last send, not a tenth
        // of one from the start, so a receiving thread descheduled on a
        // busy host (issue 28: tests under two busy loops) still reads
        // every datagram that was sent before the drain ends it.
        signals.drain_at(ns_since(start) + 1_000_000_000);
        let (got, end, rx) = receiver.join().expect("receiver");
        end.result.expect("received");
        assert_eq!(got.lost, Some(1));
        assert_eq!(got.duplicates, 1);
        assert_eq!(got.reordered, 1);
        assert_eq!(got.max_reorder_distance, 1);
        assert_eq!(got.corrupt, 3);
        assert_eq!(got.received, 99, "{wait:?}");
        assert_eq!(got.socket_drops, Some(0));
        // Every valid datagram's bytes, and the counters the sampler reads.
        let live = live_rx.totals();
        assert_eq!((live.datagrams, live.received, live.corrupt), (100, 99, 3));
        (tx, rx)
    }
}
