//! Simulated client/server pair for the session state machines.
//!
//! A [`Pair`] holds a [`ClientSession`] and a [`ServerSession`], a virtual
//! clock (`base` is read once from [`Instant::now`]; time only moves when a
//! test adds a [`Duration`], nothing sleeps) and a shuttle that carries each
//! side's outbox bytes to the other, optionally cut into chunks (1-byte
//! chunks, or arbitrary ones from proptest) to prove that framing survives
//! any split across reads. Every action either side emits is recorded so the
//! tests can check what the I/O layer would have been asked to do.
//!
//! Covered: the happy path in every direction, refusals (busy, invalid spec,
//! protocol and frame version), the peer closing in every state, handshake,
//! data-phase and results deadlines, malformed and unexpected frames, data
//! connection checks in `stream_attached`, and aborts; for request/response
//! tests, the clock probes (same host, estimated offset, stray or missing
//! replies) and crr's start without data connections.

use std::time::{Duration, Instant};

use linerate_proto::auth::{AuthKey, ClientAuth, ServerAuth, NONCE_LEN};
use linerate_proto::clock::ClockMethod;
use linerate_proto::limits::ServerLimits;
use linerate_proto::measure::{
    CpuMeasurement, HostCpu, IntervalMeasurement, IntervalStream, SideResults, StreamMeasurement,
    TcpInfo,
};
use linerate_proto::session::client::{ClientAction, ClientSession};
use linerate_proto::session::server::{Admission, ServerAction, ServerOutcome, ServerSession};
use linerate_proto::session::{
    EarlyStop, SessionError, HANDSHAKE_TIMEOUT, RESULTS_TIMEOUT, STALL_GRACE,
};
use linerate_proto::spec::{Direction, Limit, RrSpec, TestKind, TestSpec};
use linerate_proto::wire::{
    self, Accept, ClockReply, DataHello, Hello, Message, Refuse, RefuseCode, Side, Token,
    WireError, FRAME_VERSION, MAX_PAYLOAD, TOKEN_LEN,
};
use linerate_proto::PROTOCOL_VERSION;
use proptest::prelude::*;

const TOKEN: Token = Token([
    0x6c, 0x72, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e,
]);
const CLIENT_SW: &str = "linerate-sim client";
const SERVER_SW: &str = "linerate-sim server";

// ---------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------

/// A client and a server session joined by a simulated control connection.
struct Pair {
    client: ClientSession,
    server: ServerSession,
    /// The one real instant; everything else is `base + offset`.
    base: Instant,
    /// Virtual now.
    now: Instant,
    /// Chunk sizes used, cyclically, to cut bytes on their way across;
    /// empty means "deliver each outbox in one read".
    chunks: Vec<usize>,
    cursor: usize,
    /// Every action each side has emitted so far, in order.
    client_actions: Vec<ClientAction>,
    /// The server's actions but its admission requests, which the pair
    /// answers with `admission` and counts in `admission_requests`.
    server_actions: Vec<ServerAction>,
    admission: Admission,
    admission_requests: usize,
    /// Bytes each side has written, for decoding in tests.
    client_sent: Vec<u8>,
    server_sent: Vec<u8>,
    /// The server's monotonic clock minus the client's, ns (clock probes).
    server_clock_ahead: u64,
}

impl Pair {
    fn new(spec: TestSpec) -> Self {
        Self::with(spec, ServerLimits::default(), Admission::Admit)
    }

    fn with(spec: TestSpec, limits: ServerLimits, admission: Admission) -> Self {
        let base = Instant::now();
        Pair {
            client: ClientSession::new(spec, CLIENT_SW, base),
            server: ServerSession::new(limits, TOKEN, SERVER_SW, base),
            base,
            now: base,
            chunks: Vec::new(),
            cursor: 0,
            client_actions: Vec::new(),
            server_actions: Vec::new(),
            admission,
            admission_requests: 0,
            client_sent: Vec::new(),
            server_sent: Vec::new(),
            server_clock_ahead: 0,
        }
    }

    /// The client's monotonic clock reading at virtual now, ns.
    fn client_ns(&self) -> u64 {
        1_000_000_000 + (self.now - self.base).as_nanos() as u64
    }

    fn server_ns(&self) -> u64 {
        self.client_ns() + self.server_clock_ahead
    }

    /// Cuts every delivery into pieces of these sizes (cyclically).
    fn split(mut self, chunks: Vec<usize>) -> Self {
        assert!(chunks.iter().all(|&c| c > 0), "chunk sizes must be > 0");
        self.chunks = chunks;
        self
    }

    fn one_byte_reads(self) -> Self {
        self.split(vec![1])
    }

    fn advance(&mut self, d: Duration) {
        self.now += d;
    }

    /// Splits `bytes` into the reads the receiver will see.
    fn reads(&mut self, bytes: &[u8]) -> Vec<Vec<u8>> {
        if self.chunks.is_empty() {
            return vec![bytes.to_vec()];
        }
        let mut out = Vec::new();
        let mut rest = bytes;
        while !rest.is_empty() {
            let n = self.chunks[self.cursor % self.chunks.len()].min(rest.len());
            self.cursor += 1;
            let (head, tail) = rest.split_at(n);
            out.push(head.to_vec());
            rest = tail;
        }
        out
    }

    /// Delivers `bytes` to the server as if the client had written them.
    fn deliver_to_server(&mut self, bytes: &[u8]) {
        for read in self.reads(bytes) {
            let t = self.server_ns();
            self.server.receive_at(&read, self.now, t);
        }
        self.drain_actions();
    }

    /// Delivers `bytes` to the client as if the server had written them.
    fn deliver_to_client(&mut self, bytes: &[u8]) {
        for read in self.reads(bytes) {
            let t = self.client_ns();
            self.client.receive_at(&read, self.now, t);
        }
        self.drain_actions();
    }

    /// Moves outbox bytes both ways until both outboxes stay empty.
    fn shuttle(&mut self) {
        loop {
            self.drain_actions();
            let c = self.client.outbox().take();
            let s = self.server.outbox().take();
            if c.is_empty() && s.is_empty() {
                break;
            }
            self.client_sent.extend_from_slice(&c);
            self.server_sent.extend_from_slice(&s);
            self.deliver_to_server(&c);
            self.deliver_to_client(&s);
        }
    }

    fn drain_actions(&mut self) {
        while let Some(a) = self.client.poll_action() {
            if a == ClientAction::SendClockProbe {
                // As the I/O layer does: read the clock, queue the probe.
                let t = self.client_ns();
                self.client.clock_probe(t);
            }
            self.client_actions.push(a);
        }
        while let Some(a) = self.server.poll_action() {
            if a == ServerAction::RequestAdmission {
                // As the I/O layer does: decide at once.
                self.admission_requests += 1;
                self.server.admission(self.admission.clone(), self.now);
                continue;
            }
            self.server_actions.push(a);
        }
    }

    fn client_aborts(&mut self) -> usize {
        self.drain_actions();
        count(&self.client_actions, &ClientAction::AbortStreams)
    }

    fn server_aborts(&mut self) -> usize {
        self.drain_actions();
        count(&self.server_actions, &ServerAction::AbortStreams)
    }

    /// Hello → Accept. Checks both sides' actions and returns the token and
    /// spec the client was told to open streams with.
    fn handshake(&mut self) -> (Token, TestSpec) {
        self.shuttle();
        let expect = self
            .server_actions
            .iter()
            .find_map(|a| match a {
                ServerAction::ExpectStreams { token, spec } => Some((*token, spec.clone())),
                _ => None,
            })
            .expect("server asked to expect streams");
        let open = self
            .client_actions
            .iter()
            .find_map(|a| match a {
                ClientAction::OpenStreams {
                    token,
                    spec,
                    server_software,
                    ..
                } => Some((*token, spec.clone(), server_software.clone())),
                _ => None,
            })
            .expect("client asked to open streams");
        assert_eq!(open.0, TOKEN, "client got the server's token");
        assert_eq!(expect.0, TOKEN);
        assert_eq!(open.1, expect.1, "both sides agree on the spec");
        assert_eq!(open.2, SERVER_SW);
        assert_eq!(self.client.spec(), Some(&open.1));
        assert_eq!(self.server.spec(), Some(&open.1));
        assert_eq!(self.server.client_software(), Some(CLIENT_SW));
        assert!(!self.client.is_finished() && !self.server.is_finished());
        (open.0, open.1)
    }

    /// Attaches every planned data connection to the server, each greeting
    /// round-tripped through the wire codec as the I/O layer would see it.
    fn attach_all(&mut self, token: Token, spec: &TestSpec) {
        for p in spec.stream_plan() {
            let hello = data_hello(token, p.id, p.sender);
            let got = self
                .server
                .stream_attached(&hello, self.now)
                .expect("planned stream is accepted");
            assert_eq!(got, p);
        }
        self.drain_actions();
    }

    /// Runs the handshake up to both sides Running, with StartStreams
    /// emitted exactly once on each side.
    fn start(&mut self) -> TestSpec {
        let (token, spec) = self.handshake();
        self.client.streams_opened(self.now);
        self.attach_all(token, &spec);
        assert_eq!(count(&self.server_actions, &ServerAction::StartStreams), 1);
        self.shuttle();
        assert_eq!(count(&self.client_actions, &ClientAction::StartStreams), 1);
        assert_eq!(self.client.started(), Some(self.now));
        assert!(!self.client.is_finished() && !self.server.is_finished());
        spec
    }

    /// Both sides finish their streams, in the given order, with the other's
    /// results crossing the wire in between.
    fn finish(&mut self, spec: &TestSpec, client_first: bool) -> (SideResults, SideResults) {
        let cr = results(Side::Client, spec);
        let sr = results(Side::Server, spec);
        if client_first {
            self.client.local_finished(cr.clone(), self.now);
            self.shuttle();
            self.advance(Duration::from_millis(3));
            self.server.local_finished(sr.clone(), self.now);
        } else {
            self.server.local_finished(sr.clone(), self.now);
            self.shuttle();
            self.advance(Duration::from_millis(3));
            self.client.local_finished(cr.clone(), self.now);
        }
        self.shuttle();
        (cr, sr)
    }
}

fn count<T: PartialEq>(v: &[T], x: &T) -> usize {
    v.iter().filter(|a| *a == x).count()
}

fn data_hello(token: Token, stream: u32, sender: Side) -> DataHello {
    let bytes = wire::to_bytes(&Message::DataHello(DataHello {
        token,
        stream,
        sender,
    }));
    match wire::decode(&bytes) {
        Ok(Some((Message::DataHello(h), used))) if used == bytes.len() => h,
        other => panic!("DataHello did not round-trip: {other:?}"),
    }
}

/// Distinct, fully populated results for one side.
fn results(side: Side, spec: &TestSpec) -> SideResults {
    let salt = match side {
        Side::Client => 1,
        Side::Server => 2,
    };
    let plan = spec.stream_plan();
    SideResults {
        engine: format!("{side:?}-sim-engine"),
        streams: plan
            .iter()
            .map(|p| StreamMeasurement {
                id: p.id,
                sender: Some(p.sender),
                bytes: p.bytes.unwrap_or(1_000_000 * u64::from(p.id)) + salt,
                omitted_bytes: salt,
                elapsed_ns: 1_000_000_000 + u64::from(p.id),
                calls: 10 * u64::from(p.id) + salt,
                tcp: (p.sender == side).then_some(TcpInfo {
                    retransmits: salt,
                    rtt_us: 50,
                    rttvar_us: 5,
                    snd_cwnd: 10,
                    snd_mss: 1448,
                    pmtu: 1500,
                    pacing_rate: Some(1 << 30),
                    delivery_rate: None,
                    snd_wnd: None,
                    reord_seen: None,
                }),
                error: None,
                udp_send: None,
                udp_recv: None,
                engine_use: None,
                busy_poll: None,
                poll_sleeps: None,
            })
            .collect(),
        intervals: vec![IntervalMeasurement {
            start_ns: 0,
            end_ns: 1_000_000_000,
            omitted: false,
            streams: plan
                .iter()
                .map(|p| IntervalStream {
                    id: p.id,
                    bytes: 1000 + salt,
                    tcp: None,
                    udp: None,
                })
                .collect(),
            cpu: Some(linerate_proto::measure::IntervalCpu {
                wall_ns: 1_000_000_000,
                user_ns: 10_000_000 * salt,
                system_ns: 20_000_000,
                busiest_thread: "stream 1 sender".into(),
                busiest_thread_ns: 25_000_000,
            }),
        }],
        cpu: CpuMeasurement {
            scope: "process".into(),
            user_ns: 100 * salt,
            system_ns: 200 * salt,
            wall_ns: 1_000_000_000,
            host: Some(HostCpu {
                cpus: 4,
                busy_ns: 10,
                total_ns: 40,
            }),
            ..Default::default()
        },
        intervals_dropped: false,
        rr: None,
        kernel_udp: None,
        // Carried through the exchange like every other field.
        ld_preload: (side == Side::Server).then(|| "/opt/sim/libbypass.so".into()),
        // Kind msg: the sender's timing and the receiver's totals.
        msg: Some(linerate_proto::measure::MsgMeasurement {
            error: None,
            sent: vec![linerate_proto::measure::MsgSizeSent {
                messages: 10 + salt,
                bytes: 640 + salt,
                batch: 1,
                calibration_ns: 5_000 + salt,
                trials: vec![linerate_proto::measure::MsgTrial {
                    wall_ns: 1_000_000 + salt,
                    messages: 2,
                    bytes: 128,
                    sender_cpu_ns: 900,
                    histogram: vec![(1_000, 2)],
                }],
            }],
            received: vec![linerate_proto::measure::MsgSizeReceived {
                messages: 10 + salt,
                bytes: 640,
                corrupt: salt,
                cpu_ns: 700,
            }],
        }),
    }
}

fn spec(direction: Direction, streams: u16) -> TestSpec {
    TestSpec {
        direction,
        streams,
        ..TestSpec::default()
    }
}

fn client_error(c: &ClientSession) -> &SessionError {
    match c.outcome() {
        Some(Err(e)) => e,
        other => panic!("expected the client to have failed, got {other:?}"),
    }
}

fn server_error(s: &ServerSession) -> &SessionError {
    match s.outcome() {
        Some(ServerOutcome::Failed(e)) => e,
        other => panic!("expected the server to have failed, got {other:?}"),
    }
}

fn server_refusal(s: &ServerSession) -> Refuse {
    match s.outcome() {
        Some(ServerOutcome::Refused(r)) => r.clone(),
        other => panic!("expected the server to have refused, got {other:?}"),
    }
}

/// Decodes every frame in `bytes`, which must be whole frames.
fn frames(mut bytes: &[u8]) -> Vec<Message> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let (m, used) = wire::decode(bytes)
            .expect("valid frame")
            .expect("complete frame");
        out.push(m);
        bytes = &bytes[used..];
    }
    out
}

/// Asserts a complete, successful test on both sides with crossed results.
fn assert_completed(p: &Pair, spec: &TestSpec, cr: &SideResults, sr: &SideResults) {
    let (c_local, c_remote) = p
        .client
        .outcome()
        .expect("client finished")
        .expect("client succeeded");
    let Some(ServerOutcome::Completed {
        spec: s_spec,
        local: s_local,
        remote: s_remote,
    }) = p.server.outcome()
    else {
        panic!("server did not complete: {:?}", p.server.outcome());
    };
    assert_eq!(s_spec, spec);
    assert_eq!(c_local, cr);
    assert_eq!(s_local, sr);
    assert_eq!(c_remote, s_local, "client's remote is the server's local");
    assert_eq!(s_remote, c_local, "server's remote is the client's local");
    assert_eq!(p.client.poll_timeout(), None);
    assert_eq!(p.server.poll_timeout(), None);
}

/// The whole happy path for one spec, read split and finishing order.
fn happy_path(spec_in: TestSpec, chunks: Vec<usize>, client_first: bool) {
    let mut p = Pair::new(spec_in.clone());
    if !chunks.is_empty() {
        p = p.split(chunks);
    }
    let spec = p.start();
    assert_eq!(spec, spec_in, "a valid spec is run unchanged");
    p.advance(Duration::from_secs(10));
    let (cr, sr) = p.finish(&spec, client_first);
    assert_completed(&p, &spec, &cr, &sr);
    assert_eq!(p.client_aborts(), 0);
    assert_eq!(p.server_aborts(), 0);
    assert_eq!(p.client_actions.len(), 2, "{:?}", p.client_actions);
    assert_eq!(p.server_actions.len(), 2, "{:?}", p.server_actions);
    // Exactly the expected frames crossed, in order.
    let names = |b: &[u8]| frames(b).iter().map(Message::name).collect::<Vec<_>>();
    assert_eq!(names(&p.client_sent), ["Hello", "Results"]);
    assert_eq!(names(&p.server_sent), ["Accept", "Start", "Results"]);
}

// ---------------------------------------------------------------------------
// 1. Happy path
// ---------------------------------------------------------------------------

#[test]
fn happy_path_every_direction_stream_count_and_finish_order() {
    for direction in [Direction::Forward, Direction::Reverse, Direction::Bidir] {
        for streams in [1, 4] {
            for client_first in [true, false] {
                happy_path(spec(direction, streams), Vec::new(), client_first);
            }
        }
    }
}

#[test]
fn happy_path_survives_one_byte_reads() {
    for direction in [Direction::Forward, Direction::Reverse, Direction::Bidir] {
        for streams in [1, 4] {
            for client_first in [true, false] {
                happy_path(spec(direction, streams), vec![1], client_first);
            }
        }
    }
}

#[test]
fn happy_path_byte_limited_has_no_client_deadline_and_the_servers_max_time() {
    let s = TestSpec {
        direction: Direction::Bidir,
        streams: 3,
        limit: Limit::Bytes(1_000_001),
        ..TestSpec::default()
    };
    let mut p = Pair::new(s.clone()).one_byte_reads();
    let spec = p.start();
    assert_eq!(p.client.poll_timeout(), None);
    // issue 10: the server bounds every test by --max-time (24 h default).
    assert!(p.server.poll_timeout().is_some());
    p.advance(Duration::from_secs(3600));
    let (cr, sr) = p.finish(&spec, false);
    assert_completed(&p, &spec, &cr, &sr);
}

#[test]
fn accept_carries_clamped_spec_and_notes_to_the_client() {
    let mut s = spec(Direction::Forward, 2);
    s.tcp.window = Some(8 << 20);
    let limits = ServerLimits {
        max_window: 1 << 20,
        ..ServerLimits::default()
    };
    let mut p = Pair::with(s, limits, Admission::Admit);
    let (_, agreed) = p.handshake();
    assert_eq!(agreed.tcp.window, Some(1 << 20));
    let notes = p
        .client_actions
        .iter()
        .find_map(|a| match a {
            ClientAction::OpenStreams { notes, .. } => Some(notes.clone()),
            _ => None,
        })
        .expect("OpenStreams");
    assert_eq!(notes.len(), 1);
    assert!(notes[0].contains("window"), "{notes:?}");
}

// ---------------------------------------------------------------------------
// 2. Refusals
// ---------------------------------------------------------------------------

#[test]
fn busy_server_refuses_with_busy() {
    let mut p = Pair::with(
        TestSpec::default(),
        ServerLimits::default(),
        Admission::Busy { running: 3, max: 3 },
    )
    .one_byte_reads();
    p.shuttle();
    let r = server_refusal(&p.server);
    assert_eq!(r.code, RefuseCode::Busy);
    match client_error(&p.client) {
        SessionError::Refused { code, message } => {
            assert_eq!(*code, RefuseCode::Busy);
            assert_eq!(*message, r.message);
            assert!(message.contains('3'), "{message}");
        }
        e => panic!("expected Refused, got {e:?}"),
    }
    assert_eq!(p.admission_requests, 1);
    assert!(p.client_actions.is_empty(), "{:?}", p.client_actions);
    assert!(p.server_actions.is_empty(), "{:?}", p.server_actions);
    assert_eq!(p.client.poll_timeout(), None);
    assert_eq!(p.server.poll_timeout(), None);
}

// Issue 28: admission (a test slot) only after authentication.

const SERVER_KEY: &[u8] = b"a fleet-wide secret, 32 bytes ok";

/// A pair whose server requires `SERVER_KEY` and whose client proves
/// `client_key` (`None`: the client has no key).
fn keyed_pair(client_key: Option<&[u8]>) -> Pair {
    let key = |b: &[u8]| AuthKey::from_file_contents(b).expect("key");
    let mut p = Pair::new(TestSpec::default());
    p.server = ServerSession::new(ServerLimits::default(), TOKEN, SERVER_SW, p.base)
        .with_auth(Some(ServerAuth::new(key(SERVER_KEY), [1; NONCE_LEN])));
    if let Some(k) = client_key {
        p.client = ClientSession::new(TestSpec::default(), CLIENT_SW, p.base)
            .with_auth(ClientAuth::new(key(k), [2; NONCE_LEN]));
    }
    p
}

#[test]
fn issue_28_admission_is_asked_only_after_the_proof_verifies() {
    let mut p = keyed_pair(Some(SERVER_KEY));
    p.handshake();
    assert_eq!(p.admission_requests, 1);
    let names = |b: &[u8]| frames(b).iter().map(Message::name).collect::<Vec<_>>();
    assert_eq!(names(&p.client_sent), ["AuthInit", "AuthProof", "Hello"]);
    // A wrong key (the client refuses the server's proof), no key (the
    // server refuses the Hello): over without asking for a slot.
    for client_key in [Some(&b"another secret, entirely unknown"[..]), None] {
        let mut p = keyed_pair(client_key);
        p.shuttle();
        assert!(p.server.is_finished(), "{client_key:?}");
        assert_eq!(p.admission_requests, 0, "{client_key:?}");
    }
}

#[test]
fn issue_28_a_session_that_got_only_auth_init_does_not_request_admission() {
    let mut p = keyed_pair(Some(SERVER_KEY));
    let handshake = Duration::from_millis(ServerLimits::default().handshake_timeout_ms);
    // The AuthInit comes late and nothing follows it.
    p.advance(handshake - Duration::from_secs(1));
    let init = p.client.outbox().take();
    p.deliver_to_server(&init);
    assert!(matches!(
        &frames(&p.server.outbox().take())[..],
        [Message::AuthChallenge(_)]
    ));
    assert_eq!(p.admission_requests, 0);
    // The handshake timeout counts from the session's start, not from the
    // last frame: the pre-authentication phase is bounded as a whole.
    assert_eq!(p.server.poll_timeout(), Some(p.base + handshake));
    p.advance(Duration::from_millis(999));
    p.server.handle_timeout(p.now);
    assert!(!p.server.is_finished());
    p.advance(Duration::from_millis(1));
    p.server.handle_timeout(p.now);
    assert!(matches!(
        server_error(&p.server),
        SessionError::Timeout("waiting for the client's hello")
    ));
    p.drain_actions();
    assert_eq!(p.admission_requests, 0);
    assert!(p.server_actions.is_empty(), "{:?}", p.server_actions);
}

#[test]
fn issue_28_frames_after_the_hello_wait_for_the_admission_decision() {
    // A Hello and a stray frame in one read: the stray one is judged in
    // the state the decision leads to (here: refused, so never).
    let mut server = ServerSession::new(ServerLimits::default(), TOKEN, SERVER_SW, Instant::now());
    let mut bytes = wire::to_bytes(&Message::Hello(Hello {
        protocol: PROTOCOL_VERSION,
        software: CLIENT_SW.into(),
        spec: TestSpec::default(),
        server_engine: None,
        heartbeat_ms: None,
        unix_uid: None,
    }));
    bytes.extend(wire::to_bytes(&Message::Start));
    let now = Instant::now();
    server.receive(&bytes, now);
    assert!(!server.is_finished(), "judged before the decision");
    assert_eq!(server.poll_action(), Some(ServerAction::RequestAdmission));
    server.admission(Admission::Busy { running: 1, max: 1 }, now);
    assert_eq!(server_refusal(&server).code, RefuseCode::Busy);
}

#[test]
fn invalid_spec_is_refused_naming_the_field() {
    let limits = ServerLimits {
        max_streams: 8,
        ..ServerLimits::default()
    };
    for (streams, needle) in [(0u16, "at least 1"), (9, "at most 8")] {
        let mut p = Pair::with(
            spec(Direction::Forward, streams),
            limits.clone(),
            Admission::Admit,
        );
        p.shuttle();
        assert_eq!(server_refusal(&p.server).code, RefuseCode::Invalid);
        match client_error(&p.client) {
            SessionError::Refused { code, message } => {
                assert_eq!(*code, RefuseCode::Invalid);
                assert!(message.contains("streams"), "{message}");
                assert!(message.contains(needle), "{message}");
            }
            e => panic!("expected Refused, got {e:?}"),
        }
        assert!(p.client_actions.is_empty() && p.server_actions.is_empty());
    }
}

#[test]
fn protocol_version_mismatch_is_refused_with_version() {
    let mut p = Pair::new(TestSpec::default());
    // Replace the client's Hello with one from a future protocol.
    let real = p.client.outbox().take();
    assert!(matches!(&frames(&real)[..], [Message::Hello(h)] if h.protocol == PROTOCOL_VERSION));
    let hello = wire::to_bytes(&Message::Hello(Hello {
        protocol: 99,
        software: "linerate 99".into(),
        spec: TestSpec::default(),
        server_engine: None,
        heartbeat_ms: None,
        unix_uid: None,
    }));
    p.deliver_to_server(&hello);
    let r = server_refusal(&p.server);
    assert_eq!(r.code, RefuseCode::Version);
    assert!(r.message.contains("99"), "{}", r.message);
    assert_eq!(p.server.client_software(), Some("linerate 99"));
    p.shuttle();
    assert!(matches!(
        client_error(&p.client),
        SessionError::Refused {
            code: RefuseCode::Version,
            ..
        }
    ));
}

#[test]
fn future_frame_version_is_refused_with_version() {
    let mut p = Pair::new(TestSpec::default()).one_byte_reads();
    let mut hello = p.client.outbox().take();
    assert_eq!(hello[2], FRAME_VERSION);
    hello[2] = 2;
    p.deliver_to_server(&hello);
    let r = server_refusal(&p.server);
    assert_eq!(r.code, RefuseCode::Version);
    let sent = p.server.outbox().take();
    match &frames(&sent)[..] {
        [Message::Refuse(on_wire)] => {
            assert_eq!(*on_wire, r);
            assert!(on_wire.message.contains("version 2"), "{}", on_wire.message);
        }
        other => panic!("expected one Refuse frame, got {other:?}"),
    }
    p.deliver_to_client(&sent);
    assert!(matches!(
        client_error(&p.client),
        SessionError::Refused {
            code: RefuseCode::Version,
            ..
        }
    ));
    assert!(p.server_actions.is_empty());
}

// ---------------------------------------------------------------------------
// 3. Peer disconnect in every state
// ---------------------------------------------------------------------------

/// How far to drive a pair before something goes wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    /// Nothing delivered: client awaits Accept, server awaits Hello.
    Fresh,
    /// Hello and Accept crossed: client opening streams, server awaiting them.
    Accepted,
    /// Client reported its streams open; server has none attached yet.
    Opened,
    /// Both running.
    Running,
}

fn pair_at(stage: Stage, spec_in: TestSpec) -> (Pair, Option<(Token, TestSpec)>) {
    let mut p = Pair::new(spec_in);
    if stage == Stage::Fresh {
        return (p, None);
    }
    let (token, spec) = p.handshake();
    if stage >= Stage::Opened {
        p.client.streams_opened(p.now);
    }
    if stage >= Stage::Running {
        p.attach_all(token, &spec);
        p.shuttle();
        assert!(p.client.started().is_some());
    }
    p.drain_actions();
    (p, Some((token, spec)))
}

#[test]
fn client_peer_closed_in_every_state() {
    let cases = [
        (Stage::Fresh, false, "waiting for the server to accept", 0),
        (Stage::Accepted, false, "opening data connections", 1),
        (
            Stage::Opened,
            false,
            "waiting for the server to start the test",
            1,
        ),
        (Stage::Running, false, "running the test", 1),
        (Stage::Running, true, "running the test", 0),
    ];
    for (stage, local_done, state, aborts) in cases {
        let (mut p, agreed) = pair_at(stage, spec(Direction::Bidir, 2));
        if local_done {
            let s = agreed.expect("running has a spec").1;
            p.client.local_finished(results(Side::Client, &s), p.now);
        }
        p.client.peer_closed();
        assert_eq!(
            *client_error(&p.client),
            SessionError::PeerClosed(state),
            "{stage:?}"
        );
        assert_eq!(
            p.client_aborts(),
            aborts,
            "{stage:?} local_done={local_done}"
        );
        assert_eq!(p.client.poll_timeout(), None);
        // Nothing after the end asks for a second abort or changes the outcome.
        p.client.peer_closed();
        p.client.abort("late");
        p.client.handle_timeout(p.now + Duration::from_secs(3600));
        p.client.receive(b"garbage", p.now);
        p.client.streams_failed("late stream error".into());
        assert_eq!(p.client_aborts(), aborts, "{stage:?} second abort");
        assert_eq!(*client_error(&p.client), SessionError::PeerClosed(state));
    }
}

#[test]
fn server_peer_closed_in_every_state() {
    let cases = [
        (Stage::Fresh, false, "waiting for the client's hello", 0),
        (Stage::Accepted, false, "waiting for data connections", 1),
        (Stage::Running, false, "running the test", 1),
        (Stage::Running, true, "running the test", 0),
    ];
    for (stage, local_done, state, aborts) in cases {
        let (mut p, agreed) = pair_at(stage, spec(Direction::Reverse, 4));
        if local_done {
            let s = agreed.expect("running has a spec").1;
            p.server.local_finished(results(Side::Server, &s), p.now);
            let _ = p.server.outbox().take();
        }
        p.server.peer_closed();
        assert_eq!(
            *server_error(&p.server),
            SessionError::PeerClosed(state),
            "{stage:?}"
        );
        assert_eq!(
            p.server_aborts(),
            aborts,
            "{stage:?} local_done={local_done}"
        );
        assert_eq!(p.server.poll_timeout(), None);
        p.server.peer_closed();
        p.server.abort("late");
        p.server.stream_failed("late".into());
        p.server.handle_timeout(p.now + Duration::from_secs(3600));
        p.server.receive(b"garbage", p.now);
        assert_eq!(p.server_aborts(), aborts, "{stage:?} second abort");
        assert_eq!(*server_error(&p.server), SessionError::PeerClosed(state));
        assert!(p.server.outbox().is_empty(), "nothing sent after the end");
    }
}

#[test]
fn late_stream_failure_does_not_overwrite_a_completed_client() {
    let mut p = Pair::new(spec(Direction::Forward, 2));
    let spec = p.start();
    let (cr, sr) = p.finish(&spec, true);
    assert_completed(&p, &spec, &cr, &sr);
    p.client.streams_failed("connection reset".into());
    assert_completed(&p, &spec, &cr, &sr);
    assert_eq!(p.client_aborts(), 0);
}

#[test]
fn client_stream_failure_while_connecting_aborts_streams_once() {
    let (mut p, _) = pair_at(Stage::Accepted, TestSpec::default());
    p.client.streams_failed("connection refused".into());
    assert_eq!(
        *client_error(&p.client),
        SessionError::Stream("connection refused".into())
    );
    assert_eq!(p.client_aborts(), 1);
    p.client.streams_failed("second".into());
    assert_eq!(p.client_aborts(), 1);
}

// ---------------------------------------------------------------------------
// 4. Deadlines
// ---------------------------------------------------------------------------

const NS: Duration = Duration::from_nanos(1);

#[test]
fn client_times_out_at_each_handshake_step() {
    let cases = [
        (Stage::Fresh, "waiting for the server to accept", 0),
        (Stage::Accepted, "opening data connections", 1),
        (Stage::Opened, "waiting for the server to start the test", 1),
    ];
    for (stage, state, aborts) in cases {
        let mut p = Pair::new(TestSpec::default());
        // Let time pass between steps so each deadline is visibly re-armed.
        if stage >= Stage::Accepted {
            p.advance(Duration::from_secs(7));
            p.handshake();
        }
        if stage >= Stage::Opened {
            p.advance(Duration::from_secs(7));
            p.client.streams_opened(p.now);
        }
        let deadline = p.client.poll_timeout().expect("handshake deadline");
        assert_eq!(deadline, p.now + HANDSHAKE_TIMEOUT, "{stage:?}");
        assert_eq!(
            deadline - p.base,
            Duration::from_secs(7) * (stage as u32) + HANDSHAKE_TIMEOUT
        );
        p.client.handle_timeout(deadline - NS);
        assert!(!p.client.is_finished(), "{stage:?} fired early");
        p.now = deadline;
        p.client.handle_timeout(p.now);
        assert_eq!(*client_error(&p.client), SessionError::Timeout(state));
        assert_eq!(p.client_aborts(), aborts, "{stage:?}");
        assert_eq!(p.client.poll_timeout(), None);
    }
}

#[test]
fn server_times_out_at_each_handshake_step() {
    for (stage, state, aborts) in [
        (Stage::Fresh, "waiting for the client's hello", 0),
        (Stage::Accepted, "waiting for data connections", 1),
    ] {
        let mut p = Pair::new(spec(Direction::Bidir, 4));
        if stage >= Stage::Accepted {
            p.advance(Duration::from_secs(4));
            let (token, spec) = p.handshake();
            // Some, but not all, streams attach; they do not re-arm the deadline.
            p.advance(Duration::from_secs(4));
            let first = spec.stream_plan()[0];
            p.server
                .stream_attached(&data_hello(token, first.id, first.sender), p.now)
                .expect("first stream");
        }
        let armed_at = p.base + Duration::from_secs(4) * u32::from(stage >= Stage::Accepted);
        let deadline = p.server.poll_timeout().expect("handshake deadline");
        assert_eq!(deadline, armed_at + HANDSHAKE_TIMEOUT, "{stage:?}");
        p.server.handle_timeout(deadline - NS);
        assert!(!p.server.is_finished(), "{stage:?} fired early");
        p.server.handle_timeout(deadline + Duration::from_millis(5));
        assert_eq!(*server_error(&p.server), SessionError::Timeout(state));
        assert_eq!(p.server_aborts(), aborts, "{stage:?}");
        assert!(p.server.outbox().is_empty(), "a timeout sends nothing");
    }
}

fn timed_spec() -> TestSpec {
    TestSpec {
        direction: Direction::Bidir,
        streams: 2,
        limit: Limit::TimeMs(5_000),
        omit_ms: 2_000,
        ..TestSpec::default()
    }
}

#[test]
fn running_deadline_is_start_plus_time_omit_and_grace() {
    let mut p = Pair::new(timed_spec());
    p.advance(Duration::from_millis(1234));
    p.start();
    let start = p.now;
    let expect = start + Duration::from_millis(7_000) + STALL_GRACE;
    assert_eq!(p.client.started(), Some(start));
    assert_eq!(p.client.poll_timeout(), Some(expect));
    assert_eq!(p.server.poll_timeout(), Some(expect));

    // Streams that never finish: both sides give up at the deadline and stop
    // their streams.
    p.client.handle_timeout(expect - NS);
    p.server.handle_timeout(expect - NS);
    assert!(!p.client.is_finished() && !p.server.is_finished());
    p.now = expect;
    p.client.handle_timeout(p.now);
    p.server.handle_timeout(p.now);
    let stalled = SessionError::Timeout("waiting for the data streams to finish");
    assert_eq!(*client_error(&p.client), stalled);
    assert_eq!(*server_error(&p.server), stalled);
    assert_eq!(p.client_aborts(), 1);
    assert_eq!(p.server_aborts(), 1);
}

#[test]
fn after_local_finished_the_deadline_is_the_results_timeout() {
    for client_side in [true, false] {
        let mut p = Pair::new(timed_spec());
        let spec = p.start();
        p.advance(Duration::from_millis(7_050));
        if client_side {
            p.client.local_finished(results(Side::Client, &spec), p.now);
            let d = p.client.poll_timeout().expect("results deadline");
            assert_eq!(d, p.now + RESULTS_TIMEOUT);
            // The server gets the client's results but never sends its own.
            p.shuttle();
            assert!(!p.client.is_finished());
            p.client.handle_timeout(d - NS);
            assert!(!p.client.is_finished());
            p.client.handle_timeout(d);
            assert_eq!(
                *client_error(&p.client),
                SessionError::Timeout("waiting for the server's results")
            );
            assert_eq!(p.client_aborts(), 0, "streams already ended");
        } else {
            p.server.local_finished(results(Side::Server, &spec), p.now);
            let d = p.server.poll_timeout().expect("results deadline");
            assert_eq!(d, p.now + RESULTS_TIMEOUT);
            p.shuttle();
            p.server.handle_timeout(d - NS);
            assert!(!p.server.is_finished());
            p.server.handle_timeout(d);
            assert_eq!(
                *server_error(&p.server),
                SessionError::Timeout("waiting for the client's results")
            );
            assert_eq!(p.server_aborts(), 0, "streams already ended");
        }
    }
}

// ---------------------------------------------------------------------------
// 5. Malformed and unexpected frames
// ---------------------------------------------------------------------------

fn oversized_header() -> Vec<u8> {
    let mut h = Vec::from(wire::MAGIC);
    h.push(FRAME_VERSION);
    h.push(1); // Hello: limited to MAX_PAYLOAD
    h.extend_from_slice(&(MAX_PAYLOAD as u32 + 1).to_be_bytes());
    h
}

fn frame(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::from(wire::MAGIC);
    f.push(FRAME_VERSION);
    f.push(kind);
    f.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    f.extend_from_slice(payload);
    f
}

#[test]
fn server_refuses_garbage_before_hello() {
    for (bytes, what) in [
        (b"GET / HTTP/1.1\r\n\r\n".to_vec(), "bad frame magic"),
        (oversized_header(), "exceeds"),
        (frame(1, b"{not json"), "malformed Hello"),
        (frame(200, b""), "unknown frame kind"),
    ] {
        let mut p = Pair::new(TestSpec::default()).one_byte_reads();
        let _ = p.client.outbox().take();
        p.deliver_to_server(&bytes);
        let r = server_refusal(&p.server);
        assert_eq!(r.code, RefuseCode::Invalid);
        assert!(r.message.contains(what), "{}", r.message);
        p.shuttle();
        assert!(matches!(
            client_error(&p.client),
            SessionError::Refused {
                code: RefuseCode::Invalid,
                ..
            }
        ));
        assert!(p.server_actions.is_empty() && p.client_actions.is_empty());
    }
}

#[test]
fn server_fails_on_garbage_after_accept() {
    for bytes in [
        b"\x00\x01garbage".to_vec(),
        oversized_header(),
        frame(6, b"[]"),
    ] {
        let (mut p, _) = pair_at(Stage::Accepted, TestSpec::default());
        p.deliver_to_server(&bytes);
        assert!(
            matches!(server_error(&p.server), SessionError::Wire(_)),
            "{:?}",
            p.server.outcome()
        );
        assert_eq!(p.server_aborts(), 1);
    }
}

#[test]
fn client_fails_cleanly_on_malformed_frames() {
    type Check = fn(&SessionError) -> bool;
    let cases: Vec<(Vec<u8>, Check)> = vec![
        (b"\xff\xfe\xfd".to_vec(), |e| {
            matches!(e, SessionError::Wire(WireError::BadMagic([0xff, 0xfe])))
        }),
        (b"XXXXXXXXXXXX".to_vec(), |e| {
            matches!(e, SessionError::Wire(WireError::BadMagic(_)))
        }),
        (oversized_header(), |e| {
            matches!(e, SessionError::Wire(WireError::TooLong(_)))
        }),
        (frame(2, b"{\"spec\":1}"), |e| {
            matches!(
                e,
                SessionError::Wire(WireError::Malformed { kind: "Accept", .. })
            )
        }),
        (frame(5, b"x"), |e| {
            matches!(
                e,
                SessionError::Wire(WireError::Malformed { kind: "Start", .. })
            )
        }),
    ];
    for stage in [Stage::Fresh, Stage::Accepted, Stage::Opened, Stage::Running] {
        for (bytes, check) in &cases {
            let (mut p, _) = pair_at(stage, TestSpec::default());
            p.chunks = vec![1];
            p.deliver_to_client(bytes);
            let e = client_error(&p.client);
            assert!(check(e), "{stage:?}: {e:?}");
            let aborts = usize::from(stage != Stage::Fresh);
            assert_eq!(p.client_aborts(), aborts, "{stage:?}");
        }
    }
}

#[test]
fn unexpected_frames_end_the_session() {
    // Start before Accept.
    let mut p = Pair::new(TestSpec::default());
    p.deliver_to_client(&wire::to_bytes(&Message::Start));
    assert_eq!(
        *client_error(&p.client),
        SessionError::Unexpected {
            message: "Start",
            state: "waiting for the server to accept"
        }
    );
    assert_eq!(p.client_aborts(), 0);

    // Start while the client is still opening its streams.
    let (mut p, _) = pair_at(Stage::Accepted, TestSpec::default());
    p.deliver_to_client(&wire::to_bytes(&Message::Start));
    assert!(matches!(
        client_error(&p.client),
        SessionError::Unexpected {
            message: "Start",
            ..
        }
    ));
    assert_eq!(p.client_aborts(), 1);

    // A second Accept while running; a Results frame twice.
    let (mut p, agreed) = pair_at(Stage::Running, TestSpec::default());
    let (token, s) = agreed.expect("spec");
    let results_frame = wire::to_bytes(&Message::Results(Box::new(results(Side::Server, &s))));
    p.deliver_to_client(&results_frame);
    assert!(!p.client.is_finished(), "first Results is fine");
    p.deliver_to_client(&results_frame);
    assert_eq!(
        *client_error(&p.client),
        SessionError::Unexpected {
            message: "Results",
            state: "running the test"
        }
    );
    assert_eq!(p.client_aborts(), 1);
    let (mut p, _) = pair_at(Stage::Running, TestSpec::default());
    p.deliver_to_client(&wire::to_bytes(&Message::Accept(wire::Accept {
        spec: s.clone(),
        token,
        notes: vec![],
        software: "again".into(),
        udp_ports: vec![],
        server_engine: None,
        heartbeat_ms: None,
        unix_name: None,
    })));
    assert!(matches!(
        client_error(&p.client),
        SessionError::Unexpected {
            message: "Accept",
            ..
        }
    ));

    // A second Hello to the server.
    let (mut p, _) = pair_at(Stage::Accepted, TestSpec::default());
    p.deliver_to_server(&wire::to_bytes(&Message::Hello(Hello {
        protocol: PROTOCOL_VERSION,
        software: "again".into(),
        spec: TestSpec::default(),
        server_engine: None,
        heartbeat_ms: None,
        unix_uid: None,
    })));
    assert_eq!(
        *server_error(&p.server),
        SessionError::Unexpected {
            message: "Hello",
            state: "waiting for data connections"
        }
    );
    assert_eq!(p.server_aborts(), 1);

    // Start or Results sent to a server that has not seen a Hello.
    for msg in [Message::Start, Message::Results(Box::default())] {
        let mut p = Pair::new(TestSpec::default());
        let _ = p.client.outbox().take();
        p.deliver_to_server(&wire::to_bytes(&msg));
        assert!(
            matches!(server_error(&p.server), SessionError::Unexpected { .. }),
            "{:?}",
            p.server.outcome()
        );
        assert_eq!(p.server_aborts(), 0);
    }

    // Results before the data phase.
    let (mut p, _) = pair_at(Stage::Accepted, TestSpec::default());
    p.deliver_to_server(&wire::to_bytes(&Message::Results(Box::default())));
    assert!(matches!(
        server_error(&p.server),
        SessionError::Unexpected {
            message: "Results",
            ..
        }
    ));
}

#[test]
fn frames_after_the_end_are_ignored() {
    let mut p = Pair::new(TestSpec::default());
    let spec = p.start();
    let (cr, sr) = p.finish(&spec, false);
    p.deliver_to_client(b"garbage after the end");
    p.deliver_to_server(&wire::to_bytes(&Message::Start));
    assert_completed(&p, &spec, &cr, &sr);
}

// ---------------------------------------------------------------------------
// 6. stream_attached checks
// ---------------------------------------------------------------------------

#[test]
fn stream_attached_rejects_bad_greetings_and_keeps_waiting() {
    let (mut p, agreed) = pair_at(Stage::Opened, spec(Direction::Bidir, 2));
    let (token, s) = agreed.expect("spec");
    let plan = s.stream_plan();
    assert_eq!(plan.len(), 4);
    let deadline = p.server.poll_timeout();
    let now = p.now;

    let mut wrong = token;
    wrong.0[TOKEN_LEN - 1] ^= 0xff;
    let bad = [
        (data_hello(wrong, 1, Side::Client), "token"),
        (data_hello(token, 0, Side::Client), "not in the test plan"),
        (data_hello(token, 5, Side::Server), "not in the test plan"),
        (data_hello(token, 1, Side::Server), "wrong direction"),
        (data_hello(token, 3, Side::Client), "wrong direction"),
    ];
    let check_bad = |p: &mut Pair| {
        for (h, why) in &bad {
            let e = p.server.stream_attached(h, now).expect_err("rejected");
            assert!(e.contains(why), "{h:?}: {e}");
        }
    };
    check_bad(&mut p);

    // Attach all but the last, with a duplicate in between.
    for sp in &plan[..3] {
        p.server
            .stream_attached(&data_hello(token, sp.id, sp.sender), now)
            .expect("valid");
        let e = p
            .server
            .stream_attached(&data_hello(token, sp.id, sp.sender), now)
            .expect_err("duplicate");
        assert!(e.contains("twice"), "{e}");
        check_bad(&mut p);
    }
    // Still waiting: nothing sent, nothing started, same deadline.
    p.drain_actions();
    assert!(p.server.outbox().is_empty());
    assert!(!p.server.is_finished());
    assert_eq!(count(&p.server_actions, &ServerAction::StartStreams), 0);
    assert_eq!(p.server.poll_timeout(), deadline);

    let last = plan[3];
    p.server
        .stream_attached(&data_hello(token, last.id, last.sender), now)
        .expect("last valid");
    p.shuttle();
    assert_eq!(count(&p.server_actions, &ServerAction::StartStreams), 1);
    assert_eq!(count(&p.client_actions, &ClientAction::StartStreams), 1);

    // Once running, no more data connections are taken.
    let e = p
        .server
        .stream_attached(&data_hello(token, last.id, last.sender), now)
        .expect_err("running");
    assert!(e.contains("not expecting"), "{e}");

    let (cr, sr) = p.finish(&s, true);
    assert_completed(&p, &s, &cr, &sr);
}

#[test]
fn stream_attached_before_hello_is_rejected() {
    let mut p = Pair::new(TestSpec::default());
    let e = p
        .server
        .stream_attached(&data_hello(TOKEN, 1, Side::Client), p.now)
        .expect_err("no test yet");
    assert!(e.contains("not expecting"), "{e}");
    p.shuttle();
    p.handshake();
}

// ---------------------------------------------------------------------------
// 7. Abort
// ---------------------------------------------------------------------------

#[test]
fn client_abort_while_running_reaches_the_server() {
    let (mut p, _) = pair_at(Stage::Running, spec(Direction::Bidir, 4));
    p.client.abort("interrupted");
    assert_eq!(
        *client_error(&p.client),
        SessionError::Aborted("interrupted".into())
    );
    assert_eq!(p.client_aborts(), 1);
    let sent = p.client.outbox().take();
    match &frames(&sent)[..] {
        [Message::Abort(a)] => assert_eq!(a.reason, "interrupted"),
        other => panic!("expected one Abort frame, got {other:?}"),
    }
    p.chunks = vec![1];
    p.deliver_to_server(&sent);
    assert_eq!(
        *server_error(&p.server),
        SessionError::PeerAborted("interrupted".into())
    );
    assert_eq!(p.server_aborts(), 1);
    // Aborting twice queues nothing more.
    p.client.abort("again");
    assert!(p.client.outbox().is_empty());
    assert_eq!(p.client_aborts(), 1);
}

#[test]
fn server_abort_and_stream_failure_reach_the_client() {
    for via_stream_failure in [false, true] {
        let (mut p, _) = pair_at(Stage::Running, TestSpec::default());
        if via_stream_failure {
            p.server.stream_failed("disk on fire".into());
            assert_eq!(
                *server_error(&p.server),
                SessionError::Stream("disk on fire".into())
            );
        } else {
            p.server.abort("disk on fire");
            assert_eq!(
                *server_error(&p.server),
                SessionError::Aborted("disk on fire".into())
            );
        }
        p.shuttle();
        assert_eq!(
            *client_error(&p.client),
            SessionError::PeerAborted("disk on fire".into())
        );
        assert_eq!(p.server_aborts(), 1);
        assert_eq!(p.client_aborts(), 1);
    }
}

#[test]
fn issue_13_stop_early_finishes_both_sides_with_results() {
    let (mut p, started) = pair_at(Stage::Running, spec(Direction::Bidir, 2));
    let (_, spec) = started.expect("running");
    p.advance(Duration::from_secs(2));
    assert!(p.client.stop_early(), "a running test can stop early");
    assert!(!p.client.stop_early(), "once");
    p.shuttle();
    assert!(p.server.stopped_early());
    assert_eq!(
        count(&p.server_actions, &ServerAction::StopStreams),
        1,
        "{:?}",
        p.server_actions
    );
    // Both sides finish as at the limit: results cross, nothing aborted.
    let (cr, sr) = p.finish(&spec, true);
    assert_completed(&p, &spec, &cr, &sr);
    assert!(p.client.stopped_early());
    assert_eq!(p.client_aborts(), 0);
    assert_eq!(p.server_aborts(), 0);
}

#[test]
fn issue_13_stop_early_is_refused_before_the_test_runs() {
    for stage in [Stage::Fresh, Stage::Accepted, Stage::Opened] {
        let (mut p, _) = pair_at(stage, spec(Direction::Forward, 1));
        assert!(!p.client.stop_early(), "{stage:?}: not running yet");
        assert!(!p.client.stopped_early());
    }
}

/// The server's operator stops it mid-test: the client is told with a
/// Stop, stops its streams too, and both sides still exchange what they
/// measured, each knowing the server stopped it.
#[test]
fn issue_28_server_shutdown_stops_the_test_and_both_sides_report() {
    let (mut p, started) = pair_at(Stage::Running, spec(Direction::Forward, 1));
    let (_, spec) = started.expect("running");
    p.advance(Duration::from_secs(2));
    p.server.shutdown("the server is shutting down");
    p.server.shutdown("the server is shutting down");
    p.shuttle();
    assert_eq!(count(&p.server_actions, &ServerAction::StopStreams), 1);
    assert_eq!(
        count(&p.client_actions, &ClientAction::StopStreams),
        1,
        "{:?}",
        p.client_actions
    );
    assert_eq!(p.server.early_stop(), Some(EarlyStop::ByServer));
    assert_eq!(p.client.early_stop(), Some(EarlyStop::ByServer));
    // The client's own Ctrl-C now has nothing left to stop.
    assert!(!p.client.stop_early());
    let (cr, sr) = p.finish(&spec, true);
    assert_completed(&p, &spec, &cr, &sr);
    assert_eq!(p.client_aborts(), 0);
    assert_eq!(p.server_aborts(), 0);
}

/// A test not running yet when the server stops is aborted with the
/// server's reason, which the client gets.
#[test]
fn issue_28_server_shutdown_before_the_test_runs_tells_the_client_why() {
    for stage in [Stage::Accepted, Stage::Opened] {
        let (mut p, _) = pair_at(stage, spec(Direction::Forward, 1));
        p.server.shutdown("the server is shutting down");
        p.shuttle();
        assert_eq!(
            *client_error(&p.client),
            SessionError::PeerAborted("the server is shutting down".into()),
            "{stage:?}"
        );
    }
}

#[test]
fn abort_before_accept_reaches_the_server() {
    let mut p = Pair::new(TestSpec::default());
    p.client.abort("changed my mind");
    p.shuttle();
    // The Hello went first, so the server accepted, then saw the Abort.
    assert_eq!(
        *server_error(&p.server),
        SessionError::PeerAborted("changed my mind".into())
    );
    assert_eq!(p.server_aborts(), 1, "streams may have been expected");
    assert_eq!(p.client_aborts(), 0, "the client never opened any");
}

// ---------------------------------------------------------------------------
// 8. Arbitrary splits
// ---------------------------------------------------------------------------

/// Length of the first frame in `bytes`.
fn frame_len(bytes: &[u8]) -> usize {
    wire::decode(bytes)
        .expect("valid frame")
        .expect("complete frame")
        .1
}

/// Feeds `bytes` to `f` cut at the offsets `cuts` pick (each modulo the length).
fn feed_cut(bytes: &[u8], cuts: &[prop::sample::Index], mut f: impl FnMut(&[u8])) {
    let mut points: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
    points.extend([0, bytes.len()]);
    points.sort_unstable();
    points.dedup();
    for w in points.windows(2) {
        f(&bytes[w[0]..w[1]]);
    }
}

fn direction() -> impl Strategy<Value = Direction> {
    prop_oneof![
        Just(Direction::Forward),
        Just(Direction::Reverse),
        Just(Direction::Bidir)
    ]
}

proptest! {
    /// Any way of cutting the control bytes into reads completes the test.
    #[test]
    fn happy_path_completes_at_any_chunk_boundaries(
        chunks in proptest::collection::vec(1usize..48, 1..12),
        direction in direction(),
        streams in 1u16..=4,
        client_first in any::<bool>(),
    ) {
        happy_path(spec(direction, streams), chunks, client_first);
    }

    /// The happy-path exchange, captured once, then re-fed to fresh sessions
    /// cut at arbitrary byte offsets, with frames that may arrive together
    /// coalesced into one buffer, gives the same outcome and the same bytes.
    #[test]
    fn captured_exchange_replays_at_any_cut_points(
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..16),
        direction in direction(),
        streams in 1u16..=4,
    ) {
        let mut p = Pair::new(spec(direction, streams));
        let agreed = p.start();
        let (cr, sr) = p.finish(&agreed, true);
        assert_completed(&p, &agreed, &cr, &sr);
        let now = p.now;

        // Server: Hello | (streams attach) | Results.
        let hello_len = frame_len(&p.client_sent);
        let (hello, rest) = p.client_sent.split_at(hello_len);
        let mut server = ServerSession::new(ServerLimits::default(), TOKEN, SERVER_SW, now);
        feed_cut(hello, &cuts, |b| server.receive(b, now));
        prop_assert_eq!(server.poll_action(), Some(ServerAction::RequestAdmission));
        server.admission(Admission::Admit, now);
        for sp in agreed.stream_plan() {
            server.stream_attached(&data_hello(TOKEN, sp.id, sp.sender), now).expect("attach");
        }
        feed_cut(rest, &cuts, |b| server.receive(b, now));
        server.local_finished(sr.clone(), now);
        match server.outcome() {
            Some(ServerOutcome::Completed { local, remote, .. }) => {
                prop_assert_eq!(local, &sr);
                prop_assert_eq!(remote, &cr);
            }
            other => prop_assert!(false, "replayed server did not complete: {:?}", other),
        }
        prop_assert_eq!(server.outbox().take(), p.server_sent.clone());

        // Client: Accept | (streams open) | Start and Results together.
        let accept_len = frame_len(&p.server_sent);
        let (accept, rest) = p.server_sent.split_at(accept_len);
        let mut client = ClientSession::new(spec(direction, streams), CLIENT_SW, now);
        feed_cut(accept, &cuts, |b| client.receive(b, now));
        client.streams_opened(now);
        feed_cut(rest, &cuts, |b| client.receive(b, now));
        client.local_finished(cr.clone(), now);
        let (local, remote) = client.outcome().expect("finished").expect("completed");
        prop_assert_eq!(local, &cr);
        prop_assert_eq!(remote, &sr);
        prop_assert_eq!(client.outbox().take(), p.client_sent.clone());
    }

    /// Random bytes in any state never panic and, if they end the session,
    /// end it with an error outcome.
    #[test]
    fn random_bytes_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..200),
        stage in prop_oneof![Just(Stage::Fresh), Just(Stage::Accepted), Just(Stage::Opened), Just(Stage::Running)],
        chunk in 1usize..16,
    ) {
        let (mut p, _) = pair_at(stage, TestSpec::default());
        let _ = p.client.outbox().take();
        p.chunks = vec![chunk];
        p.deliver_to_client(&bytes);
        p.deliver_to_server(&bytes);
        prop_assert!(p.client_aborts() <= 1);
        prop_assert!(p.server_aborts() <= 1);
        if p.client.is_finished() {
            prop_assert!(p.client.outcome().is_some_and(|o| o.is_err()));
        }
        if p.server.is_finished() {
            let completed = matches!(p.server.outcome(), Some(ServerOutcome::Completed { .. }));
            prop_assert!(!completed, "random bytes completed a test");
        }
    }
}

// ---------------------------------------------------------------------------
// UDP (issue 3): ports in the Accept, SendDone both ways
// ---------------------------------------------------------------------------

fn udp_spec(direction: Direction, streams: u16) -> TestSpec {
    TestSpec {
        protocol: linerate_proto::spec::Protocol::Udp,
        direction,
        streams,
        len: 1472,
        udp: Some(linerate_proto::spec::UdpSpec::default()),
        ..TestSpec::default()
    }
}

#[test]
fn issue_3_udp_handshake_carries_ports_and_send_done_both_ways() {
    use linerate_proto::wire::{SendDone, SentCount};
    for direction in [Direction::Forward, Direction::Reverse, Direction::Bidir] {
        let s = udp_spec(direction, 2);
        let mut p = Pair::new(s.clone());
        p.shuttle();
        // The server binds sockets before it can accept.
        let bind = p
            .server_actions
            .iter()
            .find_map(|a| match a {
                ServerAction::BindDatagramSockets { token, spec } => Some((*token, spec.clone())),
                _ => None,
            })
            .expect("server asked to bind datagram sockets");
        assert_eq!(bind.1, s);
        assert!(p.client_actions.is_empty(), "no Accept before the ports");
        let ports: Vec<u16> = (0..s.connection_count() as u16)
            .map(|i| 40000 + i)
            .collect();
        p.server.datagram_sockets_bound(ports.clone(), p.now);
        p.shuttle();
        let got_ports = p
            .client_actions
            .iter()
            .find_map(|a| match a {
                ClientAction::OpenStreams { udp_ports, .. } => Some(udp_ports.clone()),
                _ => None,
            })
            .expect("client asked to open streams");
        assert_eq!(got_ports, ports);
        p.client.streams_opened(p.now);
        p.attach_all(TOKEN, &s);
        p.shuttle();
        assert_eq!(count(&p.client_actions, &ClientAction::StartStreams), 1);
        let done = |stream| SendDone {
            streams: vec![SentCount { stream, issued: 77 }],
        };
        // Each side's senders finish: the peer is told, once.
        p.client.local_senders_finished(done(1).streams);
        p.client.local_senders_finished(done(1).streams);
        p.server.local_senders_finished(done(3).streams);
        p.shuttle();
        assert_eq!(
            count(&p.server_actions, &ServerAction::PeerSendDone(done(1))),
            1
        );
        assert_eq!(
            count(&p.client_actions, &ClientAction::PeerSendDone(done(3))),
            1
        );
        let (cr, sr) = p.finish(&s, true);
        assert_completed(&p, &s, &cr, &sr);
    }
}

#[test]
fn issue_3_udp_bind_failure_refuses_and_tcp_ignores_send_done() {
    let mut p = Pair::new(udp_spec(Direction::Forward, 1));
    p.shuttle();
    p.server.data_sockets_failed("no ports".into());
    p.shuttle();
    assert!(matches!(
        client_error(&p.client),
        SessionError::Refused {
            code: RefuseCode::Internal,
            ..
        }
    ));
    // SendDone in a TCP test is a protocol error.
    let (mut p, _) = pair_at(Stage::Running, TestSpec::default());
    p.deliver_to_server(&wire::to_bytes(&Message::SendDone(
        linerate_proto::wire::SendDone { streams: vec![] },
    )));
    assert!(matches!(
        server_error(&p.server),
        SessionError::Unexpected {
            message: "SendDone",
            ..
        }
    ));
}

// ---------------------------------------------------------------------------
// Request/response tests: clock probes, and crr's start without streams
// ---------------------------------------------------------------------------

fn rr_spec(kind: TestKind) -> TestSpec {
    TestSpec {
        kind,
        rr: Some(RrSpec::default()),
        ..TestSpec::default()
    }
}

#[test]
fn rr_same_host_needs_one_probe_and_gives_offset_zero() {
    let mut p = Pair::new(rr_spec(TestKind::Rr)).one_byte_reads();
    p.client = ClientSession::new(rr_spec(TestKind::Rr), CLIENT_SW, p.base)
        .with_boot_id(Some("boot-1".into()));
    p.server = ServerSession::new(ServerLimits::default(), TOKEN, SERVER_SW, p.base)
        .with_boot_id(Some("boot-1".into()));
    // Even a clock that reads differently cannot matter: same kernel.
    p.server_clock_ahead = 12_345;
    let spec = p.start();
    let c = p.client.clock().expect("offset measured");
    assert_eq!(c.method, ClockMethod::SameHost);
    assert_eq!((c.offset_ns, c.uncertainty_ns, c.probes), (0, 0, 1));
    let (cr, sr) = p.finish(&spec, true);
    assert_completed(&p, &spec, &cr, &sr);
    let names = |b: &[u8]| frames(b).iter().map(Message::name).collect::<Vec<_>>();
    assert_eq!(names(&p.client_sent), ["Hello", "ClockProbe", "Results"]);
    assert_eq!(
        names(&p.server_sent),
        ["Accept", "ClockReply", "Start", "Results"]
    );
}

#[test]
fn rr_other_host_is_probed_and_the_offset_estimated() {
    let mut p = Pair::new(rr_spec(TestKind::Rr));
    p.client = ClientSession::new(rr_spec(TestKind::Rr), CLIENT_SW, p.base)
        .with_boot_id(Some("client-boot".into()));
    p.server_clock_ahead = 5_000_000_000;
    // The server sends no boot id (None never matches).
    p.start();
    let c = *p.client.clock().expect("offset measured");
    assert_eq!(c.method, ClockMethod::Probes);
    assert_eq!(c.probes as usize, linerate_proto::clock::PROBES);
    // The virtual link has no delay: the estimate is exact.
    assert_eq!((c.offset_ns, c.uncertainty_ns), (5_000_000_000, 0));
    let probes = frames(&p.client_sent)
        .iter()
        .filter(|m| matches!(m, Message::ClockProbe(_)))
        .count();
    assert_eq!(probes, linerate_proto::clock::PROBES);
}

#[test]
fn rr_clock_reply_for_no_probe_fails_the_client() {
    let mut p = Pair::new(rr_spec(TestKind::Rr));
    // Hello → Accept only (the probe is queued but not delivered).
    let hello = p.client.outbox().take();
    p.deliver_to_server(&hello);
    let accept = p.server.outbox().take();
    p.deliver_to_client(&accept);
    let bogus = wire::to_bytes(&Message::ClockReply(ClockReply {
        t1: 42,
        t2: 1,
        t3: 1,
        boot_id: None,
    }));
    p.deliver_to_client(&bogus);
    assert!(matches!(
        client_error(&p.client),
        SessionError::Unexpected { .. }
    ));
}

#[test]
fn crr_starts_as_soon_as_it_is_accepted() {
    let spec_in = rr_spec(TestKind::Crr);
    let mut p = Pair::new(spec_in.clone());
    let spec = p.start();
    assert_eq!(spec, spec_in);
    assert!(p.client.clock().is_none(), "crr measures no one-way delay");
    assert!(!p.server.peer_results_received());
    let (cr, sr) = p.finish(&spec, true);
    assert_completed(&p, &spec, &cr, &sr);
    let names = |b: &[u8]| frames(b).iter().map(Message::name).collect::<Vec<_>>();
    assert_eq!(names(&p.server_sent), ["Accept", "Start", "Results"]);
}

#[test]
fn crr_server_sees_the_client_results_before_finishing() {
    let mut p = Pair::new(rr_spec(TestKind::Crr));
    let spec = p.start();
    p.client.local_finished(results(Side::Client, &spec), p.now);
    p.shuttle();
    assert!(p.server.peer_results_received());
    p.server.local_finished(results(Side::Server, &spec), p.now);
    p.shuttle();
    assert!(p.client.is_finished() && p.server.is_finished());
}

#[test]
fn rr_unanswered_clock_probe_times_out_naming_the_step() {
    let mut p = Pair::new(rr_spec(TestKind::Rr));
    let hello = p.client.outbox().take();
    p.deliver_to_server(&hello);
    let accept = p.server.outbox().take();
    p.deliver_to_client(&accept);
    // The probe goes out but no reply ever comes back.
    let probe = p.client.outbox().take();
    assert_eq!(
        frames(&probe).iter().map(Message::name).collect::<Vec<_>>(),
        ["ClockProbe"]
    );
    p.advance(HANDSHAKE_TIMEOUT);
    let now = p.now;
    p.client.handle_timeout(now);
    assert_eq!(
        client_error(&p.client),
        &SessionError::Timeout("measuring the clock offset to the server")
    );
    // No streams were opened, so none are aborted.
    assert_eq!(p.client_aborts(), 0);
}

#[test]
fn clock_probe_before_hello_ends_the_session() {
    let mut p = Pair::new(rr_spec(TestKind::Rr));
    let probe = wire::to_bytes(&Message::ClockProbe(linerate_proto::wire::ClockProbe {
        t1: 1,
    }));
    p.deliver_to_server(&probe);
    assert!(p.server.is_finished());
    assert!(matches!(
        p.server.outcome(),
        Some(ServerOutcome::Failed(SessionError::Unexpected { .. }))
    ));
}

// ---------------------------------------------------------------------------
// Heartbeats (issue 10: a side gives up soon after its peer's control
// connection or path goes away; issue 28: not because a loaded host left
// either side unscheduled for a while)
// ---------------------------------------------------------------------------

const BEAT: Duration = Duration::from_millis(250);

/// A pair whose sides offer heartbeats as the binary's do (`client`,
/// `server`: which of them offers; an older peer offers nothing).
fn heartbeat_pair(spec: TestSpec, client: bool, server: bool) -> Pair {
    let mut p = Pair::new(spec.clone());
    if client {
        p.client = ClientSession::new(spec, CLIENT_SW, p.base).with_heartbeat(BEAT);
    }
    if server {
        p.server = ServerSession::new(ServerLimits::default(), TOKEN, SERVER_SW, p.base)
            .with_heartbeat(BEAT);
    }
    p
}

/// Moves virtual time on in `step`s for `total`, calling both sides back
/// and carrying their bytes across when `deliver`.
fn tick(p: &mut Pair, total: Duration, step: Duration, deliver: (bool, bool)) {
    let end = p.now + total;
    while p.now < end {
        p.advance(step);
        p.client.handle_timeout(p.now);
        p.server.handle_timeout(p.now);
        exchange(p, deliver);
    }
}

/// Carries what both sides wrote across (each way when `deliver`).
fn exchange(p: &mut Pair, deliver: (bool, bool)) {
    p.drain_actions();
    let c = p.client.outbox().take();
    let s = p.server.outbox().take();
    p.client_sent.extend_from_slice(&c);
    p.server_sent.extend_from_slice(&s);
    if deliver.0 {
        p.deliver_to_server(&c);
    }
    if deliver.1 {
        p.deliver_to_client(&s);
    }
}

/// Moves virtual time on by `total` with neither side running (both
/// descheduled, the host suspended); then, as a thread run late does, each
/// side's first call is its timeout check, before it reads what is queued.
fn stall_both(p: &mut Pair, total: Duration) {
    p.advance(total);
    p.server.handle_timeout(p.now);
    p.client.handle_timeout(p.now);
    exchange(p, (true, true));
}

fn beats(bytes: &[u8]) -> usize {
    frames(bytes)
        .iter()
        .filter(|m| **m == Message::Heartbeat)
        .count()
}

#[test]
fn issue_10_heartbeats_are_agreed_and_flow_both_ways_while_a_test_runs() {
    let mut p = heartbeat_pair(timed_spec(), true, true);
    let spec = p.start();
    let hello = frames(&p.client_sent);
    assert!(matches!(&hello[0], Message::Hello(h) if h.heartbeat_ms == Some(250)));
    let accept = frames(&p.server_sent);
    assert!(matches!(&accept[0], Message::Accept(a) if a.heartbeat_ms == Some(250)));
    assert_eq!(beats(&p.client_sent) + beats(&p.server_sent), 0);
    // 5 s of a running test called back every 10 ms: a beat at the first
    // call after Start, then every 250 ms (10, 260, …, 4760 ms: 20 each
    // way), and nobody gives up.
    tick(
        &mut p,
        Duration::from_secs(5),
        Duration::from_millis(10),
        (true, true),
    );
    assert!(!p.client.is_finished() && !p.server.is_finished());
    assert_eq!(beats(&p.client_sent), 20);
    assert_eq!(beats(&p.server_sent), 20);
    let (cr, sr) = p.finish(&spec, true);
    assert_completed(&p, &spec, &cr, &sr);
    // Done: no more beats.
    let before = (beats(&p.client_sent), beats(&p.server_sent));
    tick(
        &mut p,
        Duration::from_secs(2),
        Duration::from_millis(10),
        (true, true),
    );
    assert_eq!(before, (beats(&p.client_sent), beats(&p.server_sent)));
}

#[test]
fn issue_10_a_server_gives_up_on_a_silent_client_after_the_silence_limit() {
    for spec in [timed_spec(), spec(Direction::Reverse, 1)] {
        let mut p = heartbeat_pair(spec, true, true);
        p.start();
        // Called back every 250 ms, the client's last beat leaves at 1 s.
        tick(&mut p, Duration::from_secs(1), BEAT, (true, true));
        let heard = p.now;
        // The client's host vanishes: nothing more reaches the server.
        tick(
            &mut p,
            Duration::from_millis(2990),
            Duration::from_millis(10),
            (false, true),
        );
        assert!(!p.server.is_finished(), "still within the 3 s");
        assert!(p
            .server
            .poll_timeout()
            .is_some_and(|t| t <= heard + Duration::from_secs(3)));
        tick(
            &mut p,
            Duration::from_millis(10),
            Duration::from_millis(10),
            (false, true),
        );
        let SessionError::PeerSilent(why) = server_error(&p.server).clone() else {
            panic!("{:?}", p.server.outcome());
        };
        assert!(
            why.contains("no control bytes from the client for 3000 ms"),
            "{why}"
        );
        assert_eq!(p.server_aborts(), 1, "its senders are stopped");
        assert!(
            matches!(frames(&p.server_sent).last(), Some(Message::Abort(a)) if a.reason.contains("gives up")),
            "the server says why, in case the path comes back"
        );
    }
}

#[test]
fn issue_10_a_client_gives_up_on_a_silent_server_after_the_silence_limit() {
    let mut p = heartbeat_pair(timed_spec(), true, true);
    p.start();
    tick(
        &mut p,
        Duration::from_millis(2990),
        Duration::from_millis(10),
        (true, false),
    );
    assert!(!p.client.is_finished(), "still within the 3 s");
    tick(
        &mut p,
        Duration::from_millis(10),
        Duration::from_millis(10),
        (true, false),
    );
    assert!(matches!(client_error(&p.client), SessionError::PeerSilent(w) if w.contains("server")));
    assert_eq!(p.client_aborts(), 1);
}

#[test]
fn issue_28_a_peer_unscheduled_for_two_seconds_is_not_given_up_on() {
    for spec in [timed_spec(), spec(Direction::Reverse, 1)] {
        let mut p = heartbeat_pair(spec.clone(), true, true);
        p.start();
        tick(&mut p, Duration::from_secs(1), BEAT, (true, true));
        // The client's process gets no CPU for 2 s (a loaded host): it
        // neither beats nor reads, while the server runs on.
        let end = p.now + Duration::from_secs(2);
        while p.now < end {
            p.advance(Duration::from_millis(10));
            p.server.handle_timeout(p.now);
            exchange(&mut p, (false, false));
        }
        assert!(!p.server.is_finished(), "{:?}", p.server.outcome());
        // It runs again: its beats flow, and the test completes.
        tick(&mut p, Duration::from_secs(1), BEAT, (true, true));
        assert!(!p.client.is_finished() && !p.server.is_finished());
        let (cr, sr) = p.finish(&spec, true);
        assert_completed(&p, &spec, &cr, &sr);
    }
}

#[test]
fn issue_28_a_side_that_was_not_running_does_not_blame_its_peer() {
    let spec = timed_spec();
    let mut p = heartbeat_pair(spec.clone(), true, true);
    p.start();
    tick(&mut p, Duration::from_secs(1), BEAT, (true, true));
    // Neither side runs for 10 s (both descheduled, a suspended VM);
    // each first checks its timeouts, with the peer's beat still unread.
    stall_both(&mut p, Duration::from_secs(10));
    assert!(!p.server.is_finished(), "{:?}", p.server.outcome());
    assert!(!p.client.is_finished(), "{:?}", p.client.outcome());
    tick(&mut p, Duration::from_secs(1), BEAT, (true, true));
    let (cr, sr) = p.finish(&spec, true);
    assert_completed(&p, &spec, &cr, &sr);
}

#[test]
fn issue_28_a_vanished_peer_is_still_found_by_a_side_that_stalls() {
    let mut p = heartbeat_pair(timed_spec(), true, true);
    p.start();
    tick(&mut p, Duration::from_secs(1), BEAT, (true, true));
    let heard = p.now;
    // The client vanishes; the server runs, is descheduled for 2 s, runs.
    tick(
        &mut p,
        Duration::from_millis(500),
        Duration::from_millis(10),
        (false, true),
    );
    p.advance(Duration::from_secs(2));
    for _ in 0..1000 {
        if p.server.is_finished() {
            break;
        }
        let step = Duration::from_millis(10);
        tick(&mut p, step, step, (false, true));
    }
    assert!(matches!(
        server_error(&p.server),
        SessionError::PeerSilent(_)
    ));
    // It gave up after 3 s of silence in its own running time: at most
    // the stall later than a side that ran throughout.
    let gave_up = p.now - heard;
    assert!(
        gave_up >= Duration::from_secs(3) && gave_up <= Duration::from_secs(5),
        "{gave_up:?}"
    );
}

#[test]
fn issue_10_older_peers_get_no_heartbeats_and_are_not_timed_out_by_them() {
    for (client, server) in [(true, false), (false, true), (false, false)] {
        let mut p = heartbeat_pair(timed_spec(), client, server);
        p.start();
        let accept = frames(&p.server_sent);
        assert!(matches!(&accept[0], Message::Accept(a) if a.heartbeat_ms.is_none()));
        tick(
            &mut p,
            Duration::from_secs(5),
            Duration::from_millis(50),
            (false, false),
        );
        assert!(!p.client.is_finished() && !p.server.is_finished());
        assert_eq!(beats(&p.client_sent) + beats(&p.server_sent), 0);
        // An older peer never expects the frame: it is refused as before.
        p.deliver_to_server(&wire::to_bytes(&Message::Heartbeat));
        assert!(matches!(
            server_error(&p.server),
            SessionError::Unexpected {
                message: "Heartbeat",
                ..
            }
        ));
    }
}

#[test]
fn issue_10_a_client_refuses_an_absurd_heartbeat_interval() {
    let mut p = heartbeat_pair(timed_spec(), true, false);
    p.shuttle();
    let mut accept = None;
    for m in frames(&p.server_sent) {
        if let Message::Accept(a) = m {
            accept = Some(a);
        }
    }
    let mut a = accept.expect("accepted");
    a.heartbeat_ms = Some(1);
    let mut q = heartbeat_pair(timed_spec(), true, false);
    q.client.outbox().take();
    q.deliver_to_client(&wire::to_bytes(&Message::Accept(a)));
    assert!(matches!(
        client_error(&q.client),
        SessionError::Implausible { what: "Accept", why } if why.contains("heartbeat")
    ));
}

// ---------------------------------------------------------------------------
// --transport unix (issue 28): a random name in the Accept, the client's uid
// in the Hello
// ---------------------------------------------------------------------------

fn unix_spec() -> TestSpec {
    let mut s = TestSpec {
        direction: Direction::Reverse,
        streams: 2,
        ..TestSpec::default()
    };
    s.tcp.unix = true;
    s
}

/// The server binds the listener (for the uid the client announced)
/// before it accepts; the name it chose, not one derived from the token,
/// reaches the client; the test then runs as any other.
#[test]
fn issue_28_unix_listener_is_bound_for_the_announced_uid_and_named_in_the_accept() {
    let s = unix_spec();
    let mut p = Pair::new(s.clone());
    p.client = ClientSession::new(s.clone(), CLIENT_SW, p.now).with_unix_uid(4242);
    p.shuttle();
    let uid = p.server_actions.iter().find_map(|a| match a {
        ServerAction::BindUnixListener { spec, uid } if *spec == s => Some(*uid),
        _ => None,
    });
    assert_eq!(uid, Some(4242), "{:?}", p.server_actions);
    assert!(
        !p.server_actions
            .iter()
            .any(|a| matches!(a, ServerAction::ExpectStreams { .. })),
        "no TCP route for a unix test's token"
    );
    assert!(p.client_actions.is_empty(), "no Accept before the listener");
    let name = wire::unix_data_name(&[0x3c; wire::UNIX_NAME_RANDOM]);
    p.server.unix_listener_bound(name.clone(), p.now);
    p.shuttle();
    let got = p.client_actions.iter().find_map(|a| match a {
        ClientAction::OpenStreams { unix_name, .. } => unix_name.clone(),
        _ => None,
    });
    assert_eq!(got, Some(name));
    p.client.streams_opened(p.now);
    p.attach_all(TOKEN, &s);
    p.shuttle();
    let (cr, sr) = p.finish(&s, true);
    assert_completed(&p, &s, &cr, &sr);
}

/// A unix Hello without a uid (an older client) is refused; an Accept
/// without a valid name (an older or hostile server) is refused by the
/// client.
#[test]
fn issue_28_unix_tests_need_the_uid_and_a_valid_name() {
    let mut p = Pair::new(unix_spec());
    p.shuttle();
    assert!(matches!(
        client_error(&p.client),
        SessionError::Refused {
            code: RefuseCode::Invalid,
            message,
        } if message.contains("announce its uid")
    ));
    for bad in [None, Some("linerate-data-../../x".to_owned())] {
        let s = unix_spec();
        let mut c = ClientSession::new(s.clone(), CLIENT_SW, Instant::now()).with_unix_uid(1);
        let _ = c.outbox().take();
        c.receive(
            &wire::to_bytes(&Message::Accept(Accept {
                spec: s,
                token: TOKEN,
                notes: Vec::new(),
                software: SERVER_SW.into(),
                udp_ports: Vec::new(),
                server_engine: None,
                heartbeat_ms: None,
                unix_name: bad.clone(),
            })),
            Instant::now(),
        );
        assert!(
            matches!(client_error(&c), SessionError::Implausible { why, .. } if why.contains("data socket name")),
            "{bad:?}: {:?}",
            client_error(&c)
        );
    }
}
