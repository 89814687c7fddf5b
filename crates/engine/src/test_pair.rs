//! Unit-test helper shared by the engine's modules: a connected loopback
//! TCP pair.

use std::net::{TcpListener, TcpStream};

/// A connected loopback TCP pair: (client end, accepted end).
pub(crate) fn tcp_pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").expect("listen");
    let a = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
    let (b, _) = l.accept().expect("accept");
    (a, b)
}
