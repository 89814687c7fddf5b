//! Fuzzing entry points (issue 10): one function per target, taking the
//! raw bytes a fuzzer produces, so `cargo fuzz` (the `fuzz/` crate, on a
//! nightly toolchain) and the stable-toolchain property tests
//! (`tests/fuzz.rs`, run by `cargo test`) drive exactly the same code.
//!
//! Each target turns its bytes into what a peer (or, for the local data
//! plane cores, a misbehaving kernel or clock) could hand the code, and
//! panics when a property a user relies on breaks: a decoder claims more
//! bytes than it was given, a session fed garbage runs on past every
//! deadline, a receiver counts more datagrams than arrived, a sender
//! issues more than its count or a datagram it cannot parse back, an
//! interval cutter loses or invents bytes. Panics are what fuzzers catch.
//!
//! Not part of the protocol's API: hidden from its documentation.

use std::time::{Duration, Instant};

use crate::auth::{AuthChallenge, AuthInit, AuthKey, AuthProof, ClientAuth, ServerAuth};
use crate::clock::{ClockMethod, ClockOffset};
use crate::datagram::{DatagramHeader, Header, HEADER_LEN, MAX_LEN};
use crate::interval::{CutStream, IntervalCutter, Sample};
use crate::limits::ServerLimits;
use crate::measure::{Role, SideResults};
use crate::rr::{RequestRepr, ResponseRepr, RrHeader};
use crate::rr_core::{PhaseClock, ServerTimes, Tally};
use crate::rr_flow::{Response, RrClient, RrServer, Transaction, RESPONSE_TIMEOUT_NS};
use crate::session::client::ClientSession;
use crate::session::server::{Admission, ServerAction, ServerSession};
use crate::spec::{RrLimit, TestSpec};
use crate::udp_receiver::{ReceiverConfig, UdpReceiver, Verdict};
use crate::udp_sender::{DatagramFormat, Linerate, SenderConfig, Transmit, UdpSender};
use crate::wire::{self, DataHello, Side, Token};

/// Reads what a target needs from the fuzzer's bytes; past their end it
/// yields zeros, so every input is a complete (if dull) case.
#[derive(Debug)]
pub struct Input<'a> {
    bytes: &'a [u8],
}

impl<'a> Input<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Input { bytes }
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    pub fn u8(&mut self) -> u8 {
        match self.bytes.split_first() {
            Some((&b, rest)) => {
                self.bytes = rest;
                b
            }
            None => 0,
        }
    }

    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    pub fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | (u64::from(self.u32()) << 32)
    }

    /// Up to `max` bytes, the count read first.
    pub fn bytes(&mut self, max: usize) -> &'a [u8] {
        let n = (usize::from(self.u16()) % (max + 1)).min(self.bytes.len());
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        head
    }
}

/// Control frames: `wire::decode` on the whole input and on every prefix
/// a peer could have sent so far; a frame never claims bytes it was not
/// given, and a prefix of a whole frame is never an error.
pub fn control_frames(data: &[u8]) {
    let whole = wire::decode(data);
    if let Ok(Some((_, used))) = &whole {
        assert!(*used <= data.len(), "claims {used} of {} bytes", data.len());
        for cut in 0..*used {
            // Early bytes of a valid frame: wait for more, never fail.
            assert!(
                matches!(wire::decode(&data[..cut]), Ok(None)),
                "prefix {cut}"
            );
        }
    }
    let _ = wire::classify_greeting(data);
}

/// The data-plane headers a datagram or TCP message starts with: linerate
/// datagrams, request/response messages (iperf3's UDP header: the iperf3
/// crate's `iperf3_datagrams`). A parsed
/// datagram header re-emits to the same bytes.
pub fn data_headers(data: &[u8]) {
    if let Ok(h) = DatagramHeader::new_checked(data) {
        if let Ok(parsed) = h.parse() {
            let mut again = data.to_vec();
            assert!(parsed.emit(&mut again));
            assert_eq!(parse_header(&again), Some(parsed), "re-emitted header");
        }
    }
    if let Ok(h) = RrHeader::new_checked(data) {
        let _ = RequestRepr::parse(&h);
        let _ = ResponseRepr::parse(&h);
    }
}

fn parse_header(d: &[u8]) -> Option<Header> {
    DatagramHeader::new_checked(d).ok()?.parse().ok()
}

/// Pre-shared-key authentication with a peer that sends whatever it
/// likes: no forged proof verifies on either side, and the server never
/// counts a client as verified before a challenge was issued.
pub fn auth(data: &[u8]) {
    let mut i = Input::new(data);
    let Ok(key) = AuthKey::from_file_contents(b"fuzzing key, sixteen bytes or more") else {
        panic!("fixed key refused");
    };
    let mut nonce = [0u8; 32];
    nonce.iter_mut().for_each(|b| *b = i.u8());
    let mut server = ServerAuth::new(key.clone(), [7; 32]);
    let mut peer = [0u8; 32];
    peer.iter_mut().for_each(|b| *b = i.u8());
    if i.u8() & 1 == 1 {
        let _ = server.on_init(&AuthInit { nonce });
    }
    // The proof a forger guesses from the rest of the input.
    assert!(server.on_proof(&AuthProof { proof: peer }).is_err());
    assert!(!server.verified());
    let client = ClientAuth::new(key, [9; 32]);
    let mut proof = [0u8; 32];
    proof.iter_mut().for_each(|b| *b = i.u8());
    assert!(
        client
            .on_challenge(&AuthChallenge { nonce, proof })
            .is_err(),
        "a forged challenge proof verified"
    );
}

/// One thing that can happen to a control session, read from the input.
enum Event<'a> {
    Bytes(&'a [u8]),
    Advance(Duration),
    PeerClosed,
    LocalFinished,
    Attach(u32, Side),
}

fn next_event<'a>(i: &mut Input<'a>) -> Event<'a> {
    match i.u8() % 10 {
        0..=5 => Event::Bytes(i.bytes(512)),
        6 => Event::Advance(Duration::from_millis(u64::from(i.u16()) * 16)),
        7 => Event::PeerClosed,
        8 => Event::LocalFinished,
        _ => {
            let side = if i.u8() & 1 == 0 {
                Side::Client
            } else {
                Side::Server
            };
            Event::Attach(u32::from(i.u8() % 6), side)
        }
    }
}

/// Time enough for every deadline a session can set to pass.
pub const FOREVER: Duration = Duration::from_secs(100 * 86_400);
/// Most events one input drives (bounds the time per case).
pub const MAX_EVENTS: usize = 64;

/// The server's control session (with or without a key) fed a peer's
/// bytes, its own events and time: it ends by its deadlines whatever
/// happened, with an outcome to report.
pub fn server_session(data: &[u8]) {
    let mut i = Input::new(data);
    let t0 = Instant::now();
    let mut now = t0;
    let limits = ServerLimits {
        max_time_ms: 60_000,
        ..ServerLimits::default()
    };
    let token = Token([0; wire::TOKEN_LEN]);
    let auth = (i.u8() & 1 == 1).then(|| {
        let k = AuthKey::from_file_contents(b"0123456789abcdef").expect("key");
        ServerAuth::new(k, [9; 32])
    });
    // Heartbeats as the binary takes them: a Hello that offers them turns
    // them on, one that does not leaves them off.
    let mut s = ServerSession::new(limits, token, "fuzz", now)
        .with_auth(auth)
        .with_heartbeat(crate::session::heartbeat::HEARTBEAT_INTERVAL);
    for _ in 0..MAX_EVENTS {
        if i.is_empty() {
            break;
        }
        match next_event(&mut i) {
            Event::Bytes(b) => s.receive_at(b, now, 5),
            Event::Advance(d) => now += d,
            Event::PeerClosed => s.peer_closed(),
            Event::LocalFinished => s.local_finished(SideResults::default(), now),
            Event::Attach(stream, sender) => {
                let _ = s.stream_attached(
                    &DataHello {
                        token,
                        stream,
                        sender,
                    },
                    now,
                );
            }
        }
        s.handle_timeout(now);
        // The driver answers an admission request at once, as the
        // binary's does.
        while let Some(a) = s.poll_action() {
            if a == ServerAction::RequestAdmission {
                s.admission(Admission::Admit, now);
            }
        }
        let _ = s.outbox().take();
    }
    s.handle_timeout(t0 + FOREVER);
    if !s.is_finished() {
        s.peer_closed();
    }
    assert!(s.is_finished() && s.outcome().is_some(), "session runs on");
}

/// The client's control session against a hostile server.
pub fn client_session(data: &[u8]) {
    let mut i = Input::new(data);
    let t0 = Instant::now();
    let mut now = t0;
    let mut c = ClientSession::new(TestSpec::default(), "fuzz", now)
        .with_heartbeat(crate::session::heartbeat::HEARTBEAT_INTERVAL);
    for _ in 0..MAX_EVENTS {
        if i.is_empty() {
            break;
        }
        match next_event(&mut i) {
            Event::Bytes(b) => c.receive_at(b, now, 5),
            Event::Advance(d) => now += d,
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
    assert!(c.is_finished(), "session runs on");
}

/// A UDP receiving stream fed datagrams from anyone: garbage, other
/// streams' headers, valid headers with any sequence number and send
/// time, truncated, in any order and time. It counts each valid datagram
/// once, never more than arrived, and its report adds up.
pub fn udp_receiver(data: &[u8]) {
    let mut i = Input::new(data);
    let len = HEADER_LEN + usize::from(i.u16()) % 2000;
    let cfg = ReceiverConfig {
        stream: 1,
        len,
        verify: i.u8() & 1 == 1,
        omit_ns: u64::from(i.u8()) * 1_000,
    };
    let mut r = UdpReceiver::new(cfg);
    let mut arrival = 0u64;
    let mut drain_at = u64::MAX;
    let mut fed = 0u64;
    let mut valid = 0u64;
    let mut d = vec![0u8; len];
    for _ in 0..MAX_EVENTS * 4 {
        if i.is_empty() {
            break;
        }
        arrival = arrival.saturating_add(u64::from(i.u16()));
        let verdict = match i.u8() % 4 {
            // Raw bytes.
            0 => r.on_datagram(i.bytes(len + 8), i.u8() & 1 == 1, arrival, drain_at),
            // A header (maybe another stream's), pattern or not.
            1 | 2 => {
                let h = Header {
                    flags: i.u8() & 1,
                    stream: if i.u8() < 240 { 1 } else { 2 },
                    seq: u64::from(i.u16()),
                    send_ns: i.u64(),
                    len: len as u32,
                };
                d.fill(0);
                h.emit(&mut d);
                if h.flags & 1 == 1 {
                    crate::datagram::fill_pattern(&mut d[HEADER_LEN..], h.seq);
                }
                r.on_datagram(&d, false, arrival, drain_at)
            }
            _ => {
                drain_at = arrival.saturating_add(u64::from(i.u16()));
                r.on_drops(i.u32());
                continue;
            }
        };
        fed += 1;
        valid += u64::from(verdict == Verdict::Data);
    }
    let live = r.live();
    assert!(live.datagrams <= fed && live.datagrams == valid);
    assert!(live.received <= live.datagrams, "{live:?}");
    let issued = u64::from(i.u16());
    let out = r.finish((Some(issued), 0), None, None);
    assert!(out.received <= valid);
    if let Some(lost) = out.lost {
        assert!(lost <= issued, "lost {lost} of {issued}");
    }
}

/// A UDP sending stream under any configuration, clock and kernel
/// behaviour (partial batches, ENOBUFS, time standing still or jumping):
/// never more sequence numbers than its count, every datagram parses
/// back with the stream's id and length, and it never asks to wait for a
/// time that has already come.
pub fn udp_sender(data: &[u8]) {
    let mut i = Input::new(data);
    let cfg = sender_config(&mut i, Linerate);
    let len = cfg.len;
    udp_sender_runs(&mut i, cfg, |d| {
        let h = parse_header(d).expect("a sent datagram parses");
        assert_eq!((h.stream, h.len as usize), (3, len));
    });
}

/// A sending stream's configuration (stream 3) in `format`, from the
/// fuzzer's bytes (shared with the iperf3 crate's datagram target).
pub fn sender_config<F: DatagramFormat>(i: &mut Input, format: F) -> SenderConfig<F> {
    // Mostly up to a jumbo frame; now and then the largest datagram (a
    // batch of those costs a megabyte of stamping per poll).
    let len = match i.u8() {
        0 => MAX_LEN,
        1..=15 => HEADER_LEN + usize::from(i.u16()) % 9000,
        _ => HEADER_LEN + usize::from(i.u16()) % 1500,
    };
    let limit = (i.u8() & 1 == 1).then(|| u64::from(i.u16()));
    let millipps = match i.u8() % 3 {
        0 => None,
        _ => Some(i.u64()),
    };
    SenderConfig {
        stream: 3,
        len,
        millipps,
        burst: u32::from(i.u8()),
        verify: i.u8() & 1 == 1,
        faults: Vec::new(),
        limit,
        max_batch: if len == MAX_LEN {
            1
        } else {
            1 + usize::from(i.u8() % 8)
        },
        format,
        omit_ns: u64::from(i.u8()) * 1_000,
    }
}

/// Drives a sender built from `cfg` with the fuzzer's clock and kernel
/// behaviour; `check` looks at every datagram handed out. The sender
/// never issues past its count, never waits for a time that has come,
/// and counts what the kernel took.
pub fn udp_sender_runs<F: DatagramFormat>(
    i: &mut Input,
    cfg: SenderConfig<F>,
    check: impl Fn(&[u8]),
) {
    let (len, limit) = (cfg.len, cfg.limit);
    let mut s = UdpSender::new(cfg);
    let mut now = 0u64;
    let mut sent = 0u64;
    for _ in 0..MAX_EVENTS {
        if i.is_empty() {
            break;
        }
        now = now.saturating_add(i.u32().into());
        let take = usize::from(i.u8());
        match s.poll_transmit(now) {
            Transmit::Wait(t) => assert!(t > now, "waits for {t} at {now}"),
            Transmit::Done => assert!(limit.is_some(), "an unlimited sender is done"),
            Transmit::Junk(_) => s.on_junk_sent(),
            Transmit::Send { bytes, segment } => {
                assert_eq!(segment, len);
                assert_eq!(bytes.len() % len, 0);
                bytes.chunks_exact(len).for_each(&check);
                let n = bytes.len() / len;
                if take % 8 == 0 {
                    s.on_no_buffers();
                } else {
                    let k = take % (n + 1);
                    sent += s.on_sent(k) / len as u64;
                }
            }
        }
    }
    if let Some(l) = limit {
        assert!(sent <= l, "sent {sent} past a count of {l}");
    }
    let out = s.finish(now);
    assert_eq!(out.datagrams, sent);
}

/// The interval cutter under any schedule and sampler readings (counters
/// only grow, as they do): the intervals it cuts hold every byte once.
pub fn interval(data: &[u8]) {
    let mut i = Input::new(data);
    let n = 1 + usize::from(i.u8() % 4);
    let streams = (0..n)
        .map(|k| CutStream {
            id: k as u32 + 1,
            role: if k % 2 == 0 {
                Role::Sender
            } else {
                Role::Receiver
            },
        })
        .collect();
    let omit = u64::from(i.u16()) * 1000;
    let interval = 1 + u64::from(i.u16()) * 1000;
    let stop = (i.u8() & 1 == 1).then(|| u64::from(i.u32()));
    let mut c = IntervalCutter::new(streams, omit, interval, stop);
    let mut samples = vec![Sample::default(); n];
    let mut now = 0u64;
    let mut cut_bytes = 0u64;
    let mut prev_end = 0u64;
    let mut account = |m: crate::measure::IntervalMeasurement| {
        assert!(m.start_ns == prev_end && m.start_ns <= m.end_ns, "{m:?}");
        prev_end = m.end_ns;
        cut_bytes += m.streams.iter().map(|s| s.bytes).sum::<u64>();
    };
    for _ in 0..MAX_EVENTS * 2 {
        if i.is_empty() {
            break;
        }
        now = now.saturating_add(u64::from(i.u32() % 10_000_000));
        for s in &mut samples {
            s.bytes = s.bytes.saturating_add(u64::from(i.u16()));
        }
        let _ = c.take_stop(now);
        let _ = c.wake_at(now);
        if c.cut_due(now) {
            account(c.cut(now, &samples));
        }
    }
    if let Some(m) = c.finish(now, &samples) {
        account(m);
    }
    // Every byte is in exactly one interval (the omitted warm-up's too).
    let total: u64 = samples.iter().map(|s| s.bytes).sum();
    assert_eq!(cut_bytes, total);
    assert!(c.at_omit().iter().map(|s| s.bytes).sum::<u64>() <= total);
}

/// The request/response bookkeeping: a phase's budget handed out in
/// batches never exceeds a count limit, and a flow's tally takes any
/// server times (a hostile server's response) and clock offset.
pub fn rr_core(data: &[u8]) {
    let mut i = Input::new(data);
    let limit = if i.u8() & 1 == 0 {
        RrLimit::Count(u64::from(i.u16()))
    } else {
        RrLimit::TimeMs(u64::from(i.u16()))
    };
    let batch = u32::from(i.u8());
    let mut now = u64::from(i.u32());
    let mut clock = PhaseClock::new(limit, batch, now);
    let offset = (i.u8() & 1 == 1).then(|| ClockOffset {
        method: ClockMethod::Probes,
        offset_ns: i.u64() as i64,
        uncertainty_ns: i.u64(),
        probes: u32::from(i.u8()),
        delay_ns: i.u64(),
    });
    let mut tally = Tally::new(offset);
    let mut handed = 0u64;
    for _ in 0..MAX_EVENTS {
        if i.is_empty() {
            break;
        }
        now = now.saturating_add(u64::from(i.u32()));
        let Some(b) = clock.next(now) else { break };
        assert!(b.len >= 1 && b.first == handed, "{b:?} after {handed}");
        handed += b.len;
        tally.start(b);
        for _ in 0..b.len.min(8) {
            match i.u8() % 3 {
                0 => tally.lost(),
                1 => tally.answered(None),
                _ => tally.answered(Some(ServerTimes {
                    rx: i.u64(),
                    tx: i.u64(),
                })),
            }
        }
        let _ = tally.finish(now.saturating_add(u64::from(i.u16())));
    }
    if let RrLimit::Count(n) = limit {
        assert!(handed <= n, "handed {handed} of {n}");
    }
    assert_eq!(clock.issued(), handed);
}

/// A request/response flow's cores fed a hostile peer's bytes: any
/// request or response (garbage, wrong sizes, flows and sequences, late
/// and duplicated copies) and timeouts at any point never panic; a client
/// counts each transaction answered or lost at most once, and a server
/// writes only within its response and answers only what it accepted.
pub fn rr_flow(data: &[u8]) {
    let mut i = Input::new(data);
    let req_len = usize::from(i.u8()) % 64 + 1;
    let resp_len = usize::from(i.u8()) % 64 + 1;
    let reliable = i.u8() & 1 == 1;
    let flow = u32::from(i.u8() % 3);
    let mut client = RrClient::new(flow, resp_len, (!reliable).then_some(RESPONSE_TIMEOUT_NS));
    let mut server = RrServer::new(flow, req_len, reliable);
    let mut req = vec![0u8; req_len];
    let mut resp = vec![0u8; resp_len];
    let (mut issued, mut ended, mut accepted) = (0u64, 0u64, 0u64);
    let mut waiting = false;
    for _ in 0..MAX_EVENTS {
        if i.is_empty() {
            break;
        }
        match i.u8() % 6 {
            0 => {
                let header = RequestRepr {
                    flow,
                    sequence: issued,
                    sent_ns: (i.u8() & 1 == 1).then(|| i.u64()),
                };
                client.request(&header, &mut req);
                ended += u64::from(waiting);
                waiting = true;
                issued += 1;
                // The server answers the client's own request.
                if server
                    .on_request(&req, Some(i.u64()), || 7, &mut resp)
                    .is_ok()
                {
                    accepted += 1;
                }
            }
            1 => {
                if client.on_timeout() == Transaction::Lost && waiting {
                    waiting = false;
                    ended += 1;
                }
            }
            2 => {
                // The server's last response, or a mangled copy of it.
                let mut r = resp.clone();
                if let Some(b) = r.get_mut(usize::from(i.u8()) % resp_len) {
                    *b ^= i.u8();
                }
                if let Ok(Response::Matched(_)) = client.on_response(&r) {
                    assert!(waiting, "matched with nothing waiting");
                    waiting = false;
                }
            }
            3 => {
                let n = usize::from(i.u8());
                if let Ok(Response::Matched(_)) = client.on_response(i.bytes(n)) {
                    assert!(waiting, "matched with nothing waiting");
                    waiting = false;
                }
            }
            4 => {
                let n = usize::from(i.u8());
                let before = resp.len();
                if server.on_request(i.bytes(n), None, || 0, &mut resp).is_ok() {
                    accepted += 1;
                }
                assert_eq!(resp.len(), before);
            }
            _ => {
                let _ = client.deadline(i.u64());
            }
        }
    }
    assert!(client.answered() + client.lost() <= issued);
    assert!(client.lost() <= ended + u64::from(waiting));
    assert_eq!(server.answered(), accepted);
}

/// Ethernet frames as an AF_XDP receiver reads them (any bytes the XDP
/// program let through): parsing never panics, and a datagram that parsed
/// with a valid checksum rebuilds to the same frame (IP fields the builder
/// fixes aside) and parses back to itself.
pub fn packets(data: &[u8]) {
    use crate::packet::{parse, UdpChecksum, UdpFlow};
    let Ok(d) = parse(data) else { return };
    if d.checksum != UdpChecksum::Valid {
        return;
    }
    let flow = UdpFlow {
        src_mac: d.src_mac,
        dst_mac: d.dst_mac,
        src: d.src,
        dst: d.dst,
    };
    let mut again = vec![0u8; flow.header_len() + d.payload.len()];
    assert!(
        flow.emit(&mut again, d.payload).is_ok(),
        "a parsed datagram rebuilds"
    );
    let back = parse(&again).expect("a rebuilt frame parses");
    assert_eq!(
        (back.src, back.dst, back.payload),
        (d.src, d.dst, d.payload)
    );
    assert_eq!(back.checksum, UdpChecksum::Valid);
}

/// A fuzz target: bytes in, a panic when a property breaks.
pub type Target = fn(&[u8]);

/// Every target of this crate by name (the names of `fuzz/corpus/` and
/// the fuzz crate's binaries; iperf3's are `linerate_iperf3::fuzz::TARGETS`).
pub const TARGETS: &[(&str, Target)] = &[
    ("control_frames", control_frames),
    ("data_headers", data_headers),
    ("auth", auth),
    ("server_session", server_session),
    ("client_session", client_session),
    ("udp_receiver", udp_receiver),
    ("udp_sender", udp_sender),
    ("interval", interval),
    ("rr_core", rr_core),
    ("rr_flow", rr_flow),
    ("packets", packets),
];
