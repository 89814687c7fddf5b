//! Never-panic properties over every decoder a peer can reach and over the
//! session state machines (issue 10): the stable-toolchain stand-in for
//! `cargo fuzz`, about 10⁶ cases in all, each target bounded in cases (and
//! so in time: well under a minute in a debug build).
//!
//! Inputs mix raw random bytes with valid frames cut, spliced and
//! corrupted, so the properties reach past the first length check. Besides
//! "no panic", each asserts what a user relies on: a decoder never claims
//! more bytes than it was given, and a session fed garbage ends (refused or
//! failed) instead of running on.

use std::time::{Duration, Instant};

use linerate_proto::auth::{AuthChallenge, AuthInit, AuthProof};
use linerate_proto::datagram::DatagramHeader;
use linerate_proto::iperf3::{self, json, server::Iperf3Limits};
use linerate_proto::measure::SideResults;
use linerate_proto::rr::{RequestRepr, ResponseRepr, RrHeader};
use linerate_proto::session::client::ClientSession;
use linerate_proto::session::server::{Admission, ServerSession};
use linerate_proto::spec::{Direction, Limit, Protocol, ServerLimits, TestSpec, UdpSpec};
use linerate_proto::wire::{
    self, Abort, ClockProbe, DataHello, Hello, Message, SendDone, Side, Token,
};
use linerate_proto::PROTOCOL_VERSION;
use proptest::prelude::*;
use proptest::test_runner::Config;

fn cfg(cases: u32) -> Config {
    Config {
        cases,
        // Shrinking only runs on failure; keep it bounded then too.
        max_shrink_iters: 2000,
        failure_persistence: None,
        ..Config::default()
    }
}

/// Encoded frames a peer could send, to splice into random input.
fn frames() -> Vec<Vec<u8>> {
    let udp = TestSpec {
        protocol: Protocol::Udp,
        direction: Direction::Bidir,
        limit: Limit::Datagrams(100),
        len: 100,
        udp: Some(UdpSpec::default()),
        ..TestSpec::default()
    };
    let token = Token([0; wire::TOKEN_LEN]);
    [
        Message::Hello(Hello {
            protocol: PROTOCOL_VERSION,
            software: "f".into(),
            spec: TestSpec::default(),
        }),
        Message::Hello(Hello {
            protocol: PROTOCOL_VERSION,
            software: "f".into(),
            spec: udp,
        }),
        Message::DataHello(DataHello {
            token,
            stream: 1,
            sender: Side::Client,
        }),
        Message::Start,
        Message::Results(Box::default()),
        Message::Abort(Abort {
            reason: "\x1b[2J".into(),
        }),
        Message::ClockProbe(ClockProbe { t1: 1 }),
        Message::SendDone(SendDone { streams: vec![] }),
        Message::AuthInit(AuthInit { nonce: [1; 32] }),
        Message::AuthChallenge(AuthChallenge {
            nonce: [2; 32],
            proof: [3; 32],
        }),
        Message::AuthProof(AuthProof { proof: [4; 32] }),
    ]
    .iter()
    .map(wire::to_bytes)
    .collect()
}

/// Random bytes, or a valid frame corrupted at a random place and cut.
fn peer_bytes() -> impl Strategy<Value = Vec<u8>> {
    let frames = frames();
    let whole = frames.clone();
    let n = frames.len();
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..96),
        (0..n, any::<usize>(), any::<u8>(), any::<usize>()).prop_map(move |(i, at, b, cut)| {
            let mut f = frames[i].clone();
            let at = at % f.len();
            f[at] ^= b;
            f.truncate(cut % (f.len() + 1));
            f
        }),
        (0..n).prop_map(move |i| whole[i].clone()),
    ]
}

proptest! {
    #![proptest_config(cfg(300_000))]
    #[test]
    fn issue_10_fuzz_control_frame_decoder(bytes in peer_bytes()) {
        if let Ok(Some((_, used))) = wire::decode(&bytes) {
            prop_assert!(used <= bytes.len());
        }
    }
}

proptest! {
    #![proptest_config(cfg(200_000))]
    #[test]
    fn issue_10_fuzz_datagram_and_rr_headers(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        if let Ok(h) = DatagramHeader::new_checked(&bytes[..]) {
            let _ = h.parse();
        }
        if let Ok(h) = RrHeader::new_checked(&bytes[..]) {
            let _ = RequestRepr::parse(&h);
            let _ = ResponseRepr::parse(&h);
        }
        let _ = iperf3::udp::read_header(&bytes, false);
        let _ = iperf3::udp::read_header(&bytes, true);
    }
}

proptest! {
    #![proptest_config(cfg(150_000))]
    #[test]
    fn issue_10_fuzz_iperf3_codecs(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
        let mut buf = bytes.clone();
        if let Ok(Some(m)) = json::take_message(&mut buf, json::MAX_PARAMS) {
            prop_assert!(m.len() <= json::MAX_PARAMS);
        }
        let _ = json::parse_params(&bytes);
        let _ = json::parse_results(&bytes);
    }
}

/// One thing that can happen to a session.
#[derive(Debug, Clone)]
enum Event {
    Bytes(Vec<u8>),
    Advance(u16),
    PeerClosed,
    LocalFinished,
    Attach(u32, bool),
}

fn events() -> impl Strategy<Value = Vec<Event>> {
    proptest::collection::vec(
        prop_oneof![
            6 => peer_bytes().prop_map(Event::Bytes),
            1 => any::<u16>().prop_map(Event::Advance),
            1 => Just(Event::PeerClosed),
            1 => Just(Event::LocalFinished),
            1 => (0u32..4, any::<bool>()).prop_map(|(s, c)| Event::Attach(s, c)),
        ],
        0..12,
    )
}

/// Time moves on until every deadline has passed.
const FOREVER: Duration = Duration::from_secs(100 * 86_400);

proptest! {
    #![proptest_config(cfg(60_000))]
    #[test]
    fn issue_10_fuzz_server_session(evs in events(), key in any::<bool>()) {
        let t0 = Instant::now();
        let mut now = t0;
        let limits = ServerLimits {
            max_time_ms: 60_000,
            ..ServerLimits::default()
        };
        let token = Token([0; wire::TOKEN_LEN]);
        let auth = key.then(|| {
            let k = linerate_proto::auth::AuthKey::from_file_contents(b"0123456789abcdef")
                .expect("key");
            linerate_proto::auth::ServerAuth::new(k, [9; 32])
        });
        let mut s = ServerSession::new(limits, Admission::Admit, token, "fuzz", now).with_auth(auth);
        for e in evs {
            match e {
                Event::Bytes(b) => s.receive_at(&b, now, 5),
                Event::Advance(ms) => now += Duration::from_millis(u64::from(ms)),
                Event::PeerClosed => s.peer_closed(),
                Event::LocalFinished => s.local_finished(SideResults::default(), now),
                Event::Attach(stream, client) => {
                    let side = if client { Side::Client } else { Side::Server };
                    let _ = s.stream_attached(&DataHello { token, stream, sender: side }, now);
                }
            }
            s.handle_timeout(now);
            while s.poll_action().is_some() {}
            let _ = s.outbox().take();
        }
        // Whatever happened, the session ends by its deadlines.
        s.handle_timeout(t0 + FOREVER);
        if !s.is_finished() {
            s.peer_closed();
        }
        prop_assert!(s.is_finished());
        prop_assert!(s.outcome().is_some());
    }
}

proptest! {
    #![proptest_config(cfg(60_000))]
    #[test]
    fn issue_10_fuzz_client_session(evs in events()) {
        let t0 = Instant::now();
        let mut now = t0;
        let mut c = ClientSession::new(TestSpec::default(), "fuzz", now);
        for e in evs {
            match e {
                Event::Bytes(b) => c.receive_at(&b, now, 5),
                Event::Advance(ms) => now += Duration::from_millis(u64::from(ms)),
                Event::PeerClosed => c.peer_closed(),
                Event::LocalFinished => c.local_finished(SideResults::default(), now),
                Event::Attach(..) => c.streams_opened(now),
            }
            c.handle_timeout(now);
            while c.poll_action().is_some() {}
            let _ = c.outbox().take();
        }
        c.handle_timeout(t0 + FOREVER);
        if !c.is_finished() {
            c.peer_closed();
        }
        prop_assert!(c.is_finished());
    }
}

proptest! {
    #![proptest_config(cfg(60_000))]
    #[test]
    fn issue_10_fuzz_iperf3_server_session(
        chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..8),
    ) {
        let t0 = Instant::now();
        let mut s = iperf3::server::Iperf3ServerSession::new(Iperf3Limits::default(), Admission::Admit, t0);
        for c in &chunks {
            s.receive(c, t0);
            while s.poll_action().is_some() {}
            let _ = s.take_outbox();
        }
        s.handle_timeout(t0 + FOREVER);
        if !s.is_finished() {
            s.peer_closed();
        }
        prop_assert!(s.is_finished());
    }
}
