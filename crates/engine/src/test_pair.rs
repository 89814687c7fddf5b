//! Unit-test helpers shared by the engine's modules: a connected loopback
//! TCP pair, as it is or made ready for a wait policy, and a UDP pair (as
//! sockets, or as the kernel engines' endpoints).

use std::net::{TcpListener, TcpStream, UdpSocket};

/// A connected loopback TCP pair: (client end, accepted end).
pub(crate) fn tcp_pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").expect("listen");
    let a = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
    let (b, _) = l.accept().expect("accept");
    (a, b)
}

/// [`tcp_pair`] with both ends ready for `wait`: non-blocking and busy
/// polled when it spins.
pub(crate) fn tcp_pair_for(wait: crate::wait::Wait) -> (TcpStream, TcpStream) {
    let (a, b) = tcp_pair();
    if wait != crate::wait::Wait::Block {
        crate::wait::prepare_stream(&a).expect("busy poll");
        crate::wait::prepare_stream(&b).expect("busy poll");
    }
    (a, b)
}

/// Two loopback UDP sockets connected to each other: (sender, receiver).
pub(crate) fn udp_pair() -> (UdpSocket, UdpSocket) {
    let rx = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let tx = UdpSocket::bind("127.0.0.1:0").expect("bind");
    tx.connect(rx.local_addr().expect("addr")).expect("connect");
    rx.connect(tx.local_addr().expect("addr")).expect("connect");
    (tx, rx)
}

/// [`udp_pair`] as the kernel engines' endpoints: (sender, receiver).
pub(crate) fn kernel_udp_pair() -> (crate::engines::KernelUdp, crate::engines::KernelUdp) {
    let (tx, rx) = udp_pair();
    (
        crate::engines::KernelUdp::new(tx),
        crate::engines::KernelUdp::new(rx),
    )
}
