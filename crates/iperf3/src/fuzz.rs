//! iperf3's fuzz targets (issue 10), beside the protocol crate's
//! (`linerate_proto::fuzz`, whose [`Input`] reader and bounds they share):
//! `cargo fuzz` (the `fuzz/` crate) and the stable-toolchain property tests
//! (`tests/fuzz.rs`) drive these same functions.
//!
//! Not part of the crate's API: hidden from its documentation.

use std::time::Instant;

use linerate_proto::fuzz::{self, Input, Target, FOREVER, MAX_EVENTS};
use linerate_proto::session::server::Admission;

use crate::client::Iperf3ClientSession;
use crate::json::{self, Params};
use crate::server::{Iperf3Limits, Iperf3ServerSession};
use crate::udp::{self, Iperf3Datagrams};
use crate::{Cookie, COOKIE_LEN};

/// iperf3's length-prefixed JSON (parameters, results) as an untrusted
/// peer sends it: a message is never longer than the limit it was read
/// under.
pub fn iperf3_json(data: &[u8]) {
    let mut buf = data.to_vec();
    if let Ok(Some(m)) = json::take_message(&mut buf, json::MAX_PARAMS) {
        assert!(m.len() <= json::MAX_PARAMS);
    }
    let _ = json::parse_params(data);
    let _ = json::parse_results(data);
}

/// iperf3's server and client sessions fed a peer's byte chunks.
pub fn iperf3_sessions(data: &[u8]) {
    let mut i = Input::new(data);
    let t0 = Instant::now();
    let mut s = Iperf3ServerSession::new(Iperf3Limits::default(), t0);
    s.admission(Admission::Admit);
    let mut c =
        Iperf3ClientSession::new(Params::default(), Cookie::from_random([1; COOKIE_LEN]), t0);
    for _ in 0..MAX_EVENTS {
        if i.is_empty() {
            break;
        }
        let to_server = i.u8() & 1 == 0;
        let chunk = i.bytes(256);
        if to_server {
            s.receive(chunk, t0);
        } else {
            c.receive(chunk, t0);
        }
        while s.poll_action().is_some() {}
        while c.poll_action().is_some() {}
        let _ = s.take_outbox();
        let _ = c.take_outbox();
    }
    s.handle_timeout(t0 + FOREVER);
    c.handle_timeout(t0 + FOREVER);
    if !s.is_finished() {
        s.peer_closed();
    }
    if !c.is_finished() {
        c.peer_closed();
    }
    assert!(s.is_finished() && c.is_finished(), "iperf3 session runs on");
}

/// iperf3's datagrams: any bytes read as a header (both widths) without
/// panicking, and linerate's sender core in iperf3's format under any
/// configuration, clock and kernel behaviour (as the protocol crate's
/// `udp_sender`): every datagram it hands out carries iperf3's header,
/// numbered from 1.
pub fn iperf3_datagrams(data: &[u8]) {
    let _ = udp::read_header(data, false);
    let _ = udp::read_header(data, true);
    let mut i = Input::new(data);
    let counters_64bit = i.u8() & 1 == 1;
    let format = Iperf3Datagrams {
        counters_64bit,
        epoch_ns: i.u64(),
    };
    let cfg = fuzz::sender_config(&mut i, format);
    fuzz::udp_sender_runs(&mut i, cfg, |d| {
        let h = udp::read_header(d, counters_64bit).expect("an iperf3 datagram has its header");
        // Numbered from 1 (32-bit counters wrap).
        assert!(h.seq >= 1 || !counters_64bit, "{h:?}");
    });
}

/// iperf3's targets by name (the names of `fuzz/corpus/` and the fuzz
/// crate's binaries).
pub const TARGETS: &[(&str, Target)] = &[
    ("iperf3_json", iperf3_json),
    ("iperf3_sessions", iperf3_sessions),
    ("iperf3_datagrams", iperf3_datagrams),
];
