//! iperf3's output formats, rendered from linerate's report model
//! ([`linerate_report::model`]): its human layout ([`text`]) and its `-J`
//! document and `--json-stream` events ([`json`]), so that a person or a
//! script reading iperf3's output reads linerate's. Both take, beside the
//! report, what iperf3 prints that linerate's report does not hold: the
//! [`Connection`], which the client that ran the test fills from its
//! sockets, and the server's results as it sent them. Pure functions over
//! those values (strings and JSON values out): where they are written, and
//! when, is the caller's.

pub mod json;
pub mod text;

use std::net::SocketAddr;

use crate::json::Params;

/// One data connection as connected.
#[derive(Debug, Clone)]
pub struct StreamAddrs {
    /// linerate's stream id (iperf3's `socket` in its output).
    pub id: u32,
    pub local: SocketAddr,
    pub remote: SocketAddr,
}

/// What iperf3's output says about the test beyond linerate's report:
/// this side's software and host, and what was measured on this run's
/// sockets.
#[derive(Debug, Clone)]
pub struct Connection {
    /// The server as given on the command line, and its port.
    pub host: String,
    pub port: u16,
    pub cookie: String,
    /// The parameters sent to the server.
    pub params: Params,
    pub streams: Vec<StreamAddrs>,
    /// The first data socket's MSS (TCP_INFO), send and receive buffers.
    pub mss: Option<u32>,
    pub sndbuf: Option<usize>,
    pub rcvbuf: Option<usize>,
    /// Congestion control of the first TCP data socket.
    pub congestion: Option<String>,
    /// When the control connection was made, Unix milliseconds.
    pub connected_unix_ms: u64,
    /// This side's software and version (`start.version`).
    pub version: String,
    /// This host's `uname -a` fields (`start.system_info`).
    pub system_info: String,
}
