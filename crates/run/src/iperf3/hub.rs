//! The state every iperf3 test on one server shares: the routes from
//! cookies to the tests waiting for their data connections, the one UDP
//! port iperf3 streams connect to, and its hold.

use std::collections::HashMap;
use std::net::{IpAddr, TcpStream};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::Sender;
use std::sync::Mutex;

use linerate_iperf3::COOKIE_LEN;

/// A data connection and its place in the server's accept order.
pub(super) type DataConn = (u64, TcpStream);

/// A test's control peer and where its data connections go.
type DataRoute = (IpAddr, Sender<DataConn>);

/// Routes from cookies to the tests waiting for their data connections,
/// and the one UDP port iperf3 streams connect to.
#[derive(Debug, Default)]
pub struct Iperf3Hub {
    /// Each with the address of its control connection's peer: data
    /// connections from elsewhere are refused.
    pub(super) routes: Mutex<HashMap<[u8; COOKIE_LEN], DataRoute>>,
    /// Set while a test accepts UDP streams on the server's port (two
    /// tests cannot share the unconnected socket).
    pub(super) udp_busy: AtomicBool,
    /// The server's port held for UDP from its start
    /// ([`linerate_iperf3::streams::udp_port_hold`]), never read.
    _port_hold: Option<std::net::UdpSocket>,
}

impl Iperf3Hub {
    /// The hub of a server listening on `port`, holding that port for
    /// iperf3's UDP streams.
    pub fn holding(port: u16) -> Self {
        Iperf3Hub {
            _port_hold: linerate_iperf3::streams::udp_port_hold(port),
            ..Iperf3Hub::default()
        }
    }
}
