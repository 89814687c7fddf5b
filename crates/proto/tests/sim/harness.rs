//! The simulated pair and the helpers every topic shares.

use std::time::{Duration, Instant};

use linerate_proto::limits::ServerLimits;
use linerate_proto::measure::{
    CpuMeasurement, HostCpu, IntervalMeasurement, IntervalStream, SideResults, StreamMeasurement,
    TcpInfo,
};
use linerate_proto::session::client::{ClientAction, ClientSession};
use linerate_proto::session::server::{Admission, ServerAction, ServerOutcome, ServerSession};
use linerate_proto::session::SessionError;
use linerate_proto::spec::{Direction, Limit, TestSpec};
use linerate_proto::wire::{self, DataHello, Message, Refuse, Side, Token};

pub(crate) const TOKEN: Token = Token([
    0x6c, 0x72, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e,
]);
pub(crate) const CLIENT_SW: &str = "linerate-sim client";
pub(crate) const SERVER_SW: &str = "linerate-sim server";

/// A client and a server session joined by a simulated control connection.
pub(crate) struct Pair {
    pub(crate) client: ClientSession,
    pub(crate) server: ServerSession,
    /// The one real instant; everything else is `base + offset`.
    pub(crate) base: Instant,
    /// Virtual now.
    pub(crate) now: Instant,
    /// Chunk sizes used, cyclically, to cut bytes on their way across;
    /// empty means "deliver each outbox in one read".
    pub(crate) chunks: Vec<usize>,
    pub(crate) cursor: usize,
    /// Every action each side has emitted so far, in order.
    pub(crate) client_actions: Vec<ClientAction>,
    /// The server's actions but its admission requests, which the pair
    /// answers with `admission` and counts in `admission_requests`.
    pub(crate) server_actions: Vec<ServerAction>,
    pub(crate) admission: Admission,
    pub(crate) admission_requests: usize,
    /// Bytes each side has written, for decoding in tests.
    pub(crate) client_sent: Vec<u8>,
    pub(crate) server_sent: Vec<u8>,
    /// The server's monotonic clock minus the client's, ns (clock probes).
    pub(crate) server_clock_ahead: u64,
}

impl Pair {
    pub(crate) fn new(spec: TestSpec) -> Self {
        Self::with(spec, ServerLimits::default(), Admission::Admit)
    }

    pub(crate) fn with(spec: TestSpec, limits: ServerLimits, admission: Admission) -> Self {
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
    pub(crate) fn client_ns(&self) -> u64 {
        1_000_000_000 + (self.now - self.base).as_nanos() as u64
    }

    pub(crate) fn server_ns(&self) -> u64 {
        self.client_ns() + self.server_clock_ahead
    }

    /// Cuts every delivery into pieces of these sizes (cyclically).
    pub(crate) fn split(mut self, chunks: Vec<usize>) -> Self {
        assert!(chunks.iter().all(|&c| c > 0), "chunk sizes must be > 0");
        self.chunks = chunks;
        self
    }

    pub(crate) fn one_byte_reads(self) -> Self {
        self.split(vec![1])
    }

    pub(crate) fn advance(&mut self, d: Duration) {
        self.now += d;
    }

    /// Splits `bytes` into the reads the receiver will see.
    pub(crate) fn reads(&mut self, bytes: &[u8]) -> Vec<Vec<u8>> {
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
    pub(crate) fn deliver_to_server(&mut self, bytes: &[u8]) {
        for read in self.reads(bytes) {
            let t = self.server_ns();
            self.server.receive_at(&read, self.now, t);
        }
        self.drain_actions();
    }

    /// Delivers `bytes` to the client as if the server had written them.
    pub(crate) fn deliver_to_client(&mut self, bytes: &[u8]) {
        for read in self.reads(bytes) {
            let t = self.client_ns();
            self.client.receive_at(&read, self.now, t);
        }
        self.drain_actions();
    }

    /// Moves outbox bytes both ways until both outboxes stay empty.
    pub(crate) fn shuttle(&mut self) {
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

    pub(crate) fn drain_actions(&mut self) {
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

    pub(crate) fn client_aborts(&mut self) -> usize {
        self.drain_actions();
        count(&self.client_actions, &ClientAction::AbortStreams)
    }

    pub(crate) fn server_aborts(&mut self) -> usize {
        self.drain_actions();
        count(&self.server_actions, &ServerAction::AbortStreams)
    }

    /// Hello → Accept. Checks both sides' actions and returns the token and
    /// spec the client was told to open streams with.
    pub(crate) fn handshake(&mut self) -> (Token, TestSpec) {
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
    pub(crate) fn attach_all(&mut self, token: Token, spec: &TestSpec) {
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
    pub(crate) fn start(&mut self) -> TestSpec {
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
    pub(crate) fn finish(
        &mut self,
        spec: &TestSpec,
        client_first: bool,
    ) -> (SideResults, SideResults) {
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

pub(crate) fn count<T: PartialEq>(v: &[T], x: &T) -> usize {
    v.iter().filter(|a| *a == x).count()
}

pub(crate) fn data_hello(token: Token, stream: u32, sender: Side) -> DataHello {
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
pub(crate) fn results(side: Side, spec: &TestSpec) -> SideResults {
    let salt = match side {
        Side::Client => 1,
        Side::Server => 2,
    };
    let plan = spec.stream_plan();
    SideResults {
        engine: format!("{side:?}-sim-engine"),
        event_loop: None,
        streams: plan
            .iter()
            .map(|p| StreamMeasurement {
                id: p.id,
                sender: Some(p.sender),
                bytes: p.bytes.unwrap_or(1_000_000 * u64::from(p.id)) + salt,
                // Equal on both sides: the receiver's warm-up is cut at
                // the sender's offset (`tcp_warmup`), so distinct ones
                // would not come out as sent.
                omitted_bytes: 3,
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
                    unacked_at_read: false,
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

pub(crate) fn spec(direction: Direction, streams: u16) -> TestSpec {
    TestSpec {
        direction,
        streams,
        ..TestSpec::default()
    }
}

pub(crate) fn client_error(c: &ClientSession) -> &SessionError {
    match c.outcome() {
        Some(Err(e)) => e,
        other => panic!("expected the client to have failed, got {other:?}"),
    }
}

pub(crate) fn server_error(s: &ServerSession) -> &SessionError {
    match s.outcome() {
        Some(ServerOutcome::Failed(e)) => e,
        other => panic!("expected the server to have failed, got {other:?}"),
    }
}

pub(crate) fn server_refusal(s: &ServerSession) -> Refuse {
    match s.outcome() {
        Some(ServerOutcome::Refused(r)) => r.clone(),
        other => panic!("expected the server to have refused, got {other:?}"),
    }
}

/// Decodes every frame in `bytes`, which must be whole frames.
pub(crate) fn frames(mut bytes: &[u8]) -> Vec<Message> {
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
pub(crate) fn assert_completed(p: &Pair, spec: &TestSpec, cr: &SideResults, sr: &SideResults) {
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
pub(crate) fn happy_path(spec_in: TestSpec, chunks: Vec<usize>, client_first: bool) {
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

/// How far to drive a pair before something goes wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Stage {
    /// Nothing delivered: client awaits Accept, server awaits Hello.
    Fresh,
    /// Hello and Accept crossed: client opening streams, server awaiting them.
    Accepted,
    /// Client reported its streams open; server has none attached yet.
    Opened,
    /// Both running.
    Running,
}

pub(crate) fn pair_at(stage: Stage, spec_in: TestSpec) -> (Pair, Option<(Token, TestSpec)>) {
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

/// A bidirectional two-stream test of 5 s with 2 s omitted: the timed
/// spec the deadline and heartbeat tests run.
pub(crate) fn timed_spec() -> TestSpec {
    TestSpec {
        direction: Direction::Bidir,
        streams: 2,
        limit: Limit::TimeMs(5_000),
        omit_ms: 2_000,
        ..TestSpec::default()
    }
}
