//! Server side of the native control protocol.
//!
//! ```text
//!  AwaitHello --Hello--> AwaitAdmission --admitted--> AwaitStreams --all attached--> Running --both results--> Done
//!      |                      |      \--UDP, unix--> AwaitPorts --bound--/
//!      |                      \--busy / bad spec--> Refused (Refuse frame sent)
//!      \--bad version / no key / bad proof--> Refused
//! ```
//!
//! Admission (a test slot, the per-minute count) is asked for only once
//! the client is who it must be: its Hello arrived after a verified proof
//! (or the server has no key). The session then emits
//! [`ServerAction::RequestAdmission`] and waits for the I/O layer's
//! decision ([`ServerSession::admission`]); a client that never proves the
//! key costs no slot, and the handshake timeout counted from the session's
//! start bounds its whole pre-admission phase.
//!
//! Data connections are matched to a session by the I/O layer (by token) and
//! reported with [`ServerSession::stream_attached`], which checks the stream id
//! and direction against the plan. A test with no connections to attach up
//! front (crr) starts as soon as it is accepted. For UDP the I/O layer first
//! binds one socket per stream ([`ServerAction::BindDatagramSockets`]) and
//! reports the ports ([`ServerSession::datagram_sockets_bound`]); they travel
//! in the Accept, and the client's greeting datagrams on them attach the
//! streams. `--transport unix` goes the same way: the I/O layer binds the
//! test's Unix listener at a random name ([`ServerAction::BindUnixListener`],
//! [`ServerSession::unix_listener_bound`]) that travels in the Accept, and
//! takes connections on it only from the uid the client's Hello announced.
//! During a UDP test each side announces the end of its senders
//! with `SendDone`, which the peer's I/O layer turns into the receivers'
//! drain.
//!
//! Clock probes (request/response tests) are answered while waiting for the
//! data connections and while running; they need the arrival time of the
//! bytes, given with [`ServerSession::receive_at`].

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::exchange::Exchange;
use super::heartbeat::{self, Heartbeat};
use super::{data_deadline, EarlyStop, Inbox, Outbox, SessionError, RESULTS_TIMEOUT};
use crate::auth::ServerAuth;
use crate::limits::{check_server_engine, RateBudget, RateReservation};
use crate::limits::{ServerLimits, SpecError};
use crate::measure::SideResults;
use crate::negotiate::{negotiate, Negotiated};
use crate::spec::Protocol;
use crate::spec::TestKind;
use crate::spec::{StreamPlan, TestSpec};
use crate::wire::{
    Abort, Accept, ClockReply, DataHello, Hello, Message, Refuse, RefuseCode, SendDone, SentCount,
    Token, WireError,
};
use crate::PROTOCOL_VERSION;

/// Whether the server has room for this test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    Admit,
    /// `running` tests are in progress and the server allows `max`.
    Busy {
        running: usize,
        max: usize,
    },
    /// A server limit on this client (e.g. tests per minute), in words.
    Limited(String),
}

/// What the server's I/O layer must do next.
// One action per test phase: their size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum ServerAction {
    /// The client authenticated (or no key is needed) and asks for a
    /// test: decide whether there is room for it and answer with
    /// [`ServerSession::admission`]. Nothing is reserved before this.
    RequestAdmission,
    /// Route data connections greeted with `token` to this session.
    ExpectStreams { token: Token, spec: TestSpec },
    /// UDP: bind one data socket per stream of `spec`'s plan, then call
    /// [`ServerSession::datagram_sockets_bound`] with their ports (or
    /// [`ServerSession::data_sockets_failed`]).
    BindDatagramSockets { token: Token, spec: TestSpec },
    /// `--transport unix`: listen for `spec`'s data connections at a fresh
    /// random name ([`crate::wire::unix_data_name`]), taking connections
    /// only from processes of `uid` (`SO_PEERCRED`), then call
    /// [`ServerSession::unix_listener_bound`] with the name (or
    /// [`ServerSession::data_sockets_failed`]).
    BindUnixListener { spec: TestSpec, uid: u32 },
    /// UDP: the client's senders finished; let the receivers drain and stop.
    PeerSendDone(SendDone),
    /// All streams attached and Start sent: start moving data now.
    StartStreams,
    /// Stop and close the data streams; the test has failed.
    AbortStreams,
    /// The test is to finish now (the client asked, or this server is
    /// shutting down: [`ServerSession::early_stop`] says which): stop the
    /// senders as if the test's limit were reached; the test ends and
    /// results are exchanged as usual.
    StopStreams,
}

#[derive(Debug)]
enum State {
    AwaitHello,
    /// The Hello, until the I/O layer's admission decision.
    AwaitAdmission(Box<Hello>),
    AwaitPorts {
        notes: Vec<String>,
    },
    AwaitStreams {
        plan: Vec<StreamPlan>,
        attached: BTreeSet<u32>,
    },
    Running(Exchange),
    Done {
        local: SideResults,
        remote: SideResults,
    },
    /// Refused the client (busy, invalid spec, version); not an error of ours.
    Refused(Refuse),
    Failed(SessionError),
}

impl State {
    fn name(&self) -> &'static str {
        match self {
            State::AwaitHello => "waiting for the client's hello",
            State::AwaitAdmission(_) => "waiting for admission",
            State::AwaitPorts { .. } => "binding data sockets",
            State::AwaitStreams { .. } => "waiting for data connections",
            State::Running(_) => "running the test",
            State::Done { .. } => "finished",
            State::Refused(_) => "refused",
            State::Failed(_) => "failed",
        }
    }
}

/// How a server session ended.
#[derive(Debug, PartialEq)]
pub enum ServerOutcome<'a> {
    Completed {
        spec: &'a TestSpec,
        local: &'a SideResults,
        remote: &'a SideResults,
    },
    Refused(&'a Refuse),
    Failed(&'a SessionError),
}

/// The server's control-connection state machine.
#[derive(Debug)]
pub struct ServerSession {
    state: State,
    limits: ServerLimits,
    token: Token,
    software: String,
    spec: Option<TestSpec>,
    client_software: Option<String>,
    /// The engine the client asked this side to use (`--server-engine`),
    /// once checked against `limits.server_engines`.
    server_engine: Option<String>,
    inbox: Inbox,
    outbox: Outbox,
    actions: VecDeque<ServerAction>,
    deadline: Option<Instant>,
    boot_id: Option<String>,
    /// Arrival time (monotonic ns) of the bytes being received.
    rx_ns: Option<u64>,
    /// The running test's deadline is `--max-time`'s, not its own plan's.
    at_max_time: bool,
    /// `--auth-key`: the Hello is refused until the client proved the key.
    auth: Option<ServerAuth>,
    /// Who stopped the test before its limit, if anyone did.
    stopped_early: Option<EarlyStop>,
    /// `--max-total-rate`: the budget this test reserves its rate from,
    /// and its reservation (given back when the session is dropped).
    rate_budget: Option<Arc<RateBudget>>,
    rate_held: Option<RateReservation>,
    /// Heartbeats: the interval this server offers, the one agreed with
    /// the client's Hello (sent in the Accept), and their state while the
    /// test runs.
    heartbeat_offer: Option<std::time::Duration>,
    heartbeat_agreed: Option<u32>,
    heartbeat: Option<Heartbeat>,
}

impl ServerSession {
    /// A session for a new control connection. `token` must be random and
    /// unique among the server's sessions. `now`: when the connection was
    /// accepted; authentication and the Hello must be done within the
    /// handshake timeout of it, however the client spreads its frames.
    pub fn new(limits: ServerLimits, token: Token, software: &str, now: Instant) -> Self {
        let first_deadline = now + handshake(&limits);
        ServerSession {
            state: State::AwaitHello,
            limits,
            token,
            software: software.to_owned(),
            spec: None,
            client_software: None,
            server_engine: None,
            inbox: Inbox::default(),
            outbox: Outbox::default(),
            actions: VecDeque::new(),
            deadline: Some(first_deadline),
            boot_id: None,
            rx_ns: None,
            at_max_time: false,
            auth: None,
            stopped_early: None,
            rate_budget: None,
            rate_held: None,
            heartbeat_offer: None,
            heartbeat_agreed: None,
            heartbeat: None,
        }
    }

    /// Takes heartbeats every `interval` (or the client's longer one)
    /// from clients that offer them ([`heartbeat`]).
    pub fn with_heartbeat(mut self, interval: std::time::Duration) -> Self {
        self.heartbeat_offer = Some(interval);
        self
    }

    /// Shares `--max-total-rate` with the server's other tests: the test's
    /// agreed rate is reserved from `budget` while this session lives.
    pub fn with_rate_budget(mut self, budget: Option<Arc<RateBudget>>) -> Self {
        self.rate_budget = budget;
        self
    }

    /// Negotiates the client's proposal, reserving its rate from the
    /// server's budget when there is one.
    fn negotiate(&mut self, proposed: &TestSpec) -> Result<Negotiated, SpecError> {
        match &self.rate_budget {
            None => negotiate(proposed, &self.limits),
            Some(b) => b.negotiate(proposed, &self.limits).map(|(n, held)| {
                self.rate_held = Some(held);
                n
            }),
        }
    }

    /// Requires pre-shared-key authentication before the Hello
    /// ([`crate::auth`]); `None`: this server has no key.
    pub fn with_auth(mut self, auth: Option<ServerAuth>) -> Self {
        self.auth = auth;
        self
    }

    /// True when the test was stopped before its limit (by the client or
    /// by this server's shutdown); the results cover the time until then.
    pub fn stopped_early(&self) -> bool {
        self.stopped_early.is_some()
    }

    /// Who stopped the test before its limit, if anyone did.
    pub fn early_stop(&self) -> Option<EarlyStop> {
        self.stopped_early
    }

    /// Sets this host's boot id, sent with clock replies.
    pub fn with_boot_id(mut self, boot_id: Option<String>) -> Self {
        self.boot_id = boot_id;
        self
    }

    /// Feeds bytes that arrived at `clock_ns` (monotonic clock, ns).
    pub fn receive_at(&mut self, bytes: &[u8], now: Instant, clock_ns: u64) {
        self.rx_ns = Some(clock_ns);
        self.receive(bytes, now);
        self.rx_ns = None;
    }

    /// True once the client's results arrived (a crr server ends its side then:
    /// the client has closed every connection).
    pub fn peer_results_received(&self) -> bool {
        matches!(&self.state, State::Running(x) if x.has_remote())
    }

    pub fn outbox(&mut self) -> &mut Outbox {
        &mut self.outbox
    }

    pub fn poll_action(&mut self) -> Option<ServerAction> {
        self.actions.pop_front()
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        match (self.deadline, self.heartbeat.as_ref().map(Heartbeat::next)) {
            (Some(d), Some(h)) => Some(d.min(h)),
            (d, h) => d.or(h),
        }
    }

    pub fn spec(&self) -> Option<&TestSpec> {
        self.spec.as_ref()
    }

    /// The engine the client asked this side to use, when it asked and
    /// this server agreed (see [`crate::limits::check_server_engine`]).
    pub fn server_engine(&self) -> Option<&str> {
        self.server_engine.as_deref()
    }

    /// The client's running test that the Hello waiting for admission
    /// runs beside ([`Hello::beside`]), for the I/O layer's admission.
    pub fn beside(&self) -> Option<Token> {
        match &self.state {
            State::AwaitAdmission(h) => h.beside,
            _ => None,
        }
    }

    /// The peer's software string from its Hello.
    pub fn client_software(&self) -> Option<&str> {
        self.client_software.as_deref()
    }

    pub fn is_finished(&self) -> bool {
        matches!(
            self.state,
            State::Done { .. } | State::Refused(_) | State::Failed(_)
        )
    }

    pub fn outcome(&self) -> Option<ServerOutcome<'_>> {
        match &self.state {
            State::Done { local, remote } => Some(ServerOutcome::Completed {
                spec: self.spec.as_ref()?,
                local,
                remote,
            }),
            State::Refused(r) => Some(ServerOutcome::Refused(r)),
            State::Failed(e) => Some(ServerOutcome::Failed(e)),
            _ => None,
        }
    }

    /// Feeds bytes read from the control connection.
    pub fn receive(&mut self, bytes: &[u8], now: Instant) {
        if self.is_finished() {
            return;
        }
        if let Some(hb) = &mut self.heartbeat {
            hb.awake(now);
            if !bytes.is_empty() {
                hb.heard(now);
            }
        }
        self.inbox.extend(bytes);
        self.process_inbox();
    }

    /// Handles the frames received so far; those after a Hello wait in
    /// the inbox until the admission decision.
    fn process_inbox(&mut self) {
        loop {
            if matches!(self.state, State::AwaitAdmission(_)) {
                break;
            }
            match self.inbox.next() {
                Ok(Some(msg)) => self.handle(msg),
                Ok(None) => break,
                Err(e) => {
                    self.wire_error(e);
                    break;
                }
            }
            if self.is_finished() {
                break;
            }
        }
    }

    fn wire_error(&mut self, e: WireError) {
        // Before the test is set up, answer in words the client can print
        // (a newer client speaking another frame version gets `Version`).
        if matches!(self.state, State::AwaitHello) {
            let code = match e {
                WireError::UnsupportedVersion(_) => RefuseCode::Version,
                _ => RefuseCode::Invalid,
            };
            self.refuse(code, e.to_string());
        } else {
            self.fail(e.into());
        }
    }

    fn refuse(&mut self, code: RefuseCode, message: String) {
        let r = Refuse { code, message };
        self.outbox.push(&Message::Refuse(r.clone()));
        self.state = State::Refused(r);
        self.deadline = None;
    }

    fn handle(&mut self, msg: Message) {
        match (&mut self.state, msg) {
            (State::AwaitHello, m @ (Message::AuthInit(_) | Message::AuthProof(_))) => {
                self.authenticate(m)
            }
            (State::AwaitHello, Message::Hello(_))
                if self.auth.as_ref().is_some_and(|a| !a.verified()) =>
            {
                self.refuse(
                    RefuseCode::Auth,
                    "this server requires a pre-shared key: run the client with --auth-key FILE"
                        .into(),
                )
            }
            (State::AwaitHello, Message::Hello(h)) => {
                self.client_software = Some(h.software.clone());
                if h.protocol != PROTOCOL_VERSION {
                    return self.refuse(
                        RefuseCode::Version,
                        format!(
                            "client speaks protocol version {}, this server speaks {} ({})",
                            h.protocol, PROTOCOL_VERSION, self.software
                        ),
                    );
                }
                if h.beside.is_some() && !is_probe(&h.spec) {
                    return self.refuse(
                        RefuseCode::Invalid,
                        "only request/response probes (rr, without --under-load) may run \
                         beside another test"
                            .into(),
                    );
                }
                self.state = State::AwaitAdmission(Box::new(h));
                self.actions.push_back(ServerAction::RequestAdmission);
            }
            (State::AwaitStreams { .. } | State::Running(_), Message::ClockProbe(p)) => {
                // Receive and send times are the same reading: the reply
                // leaves right after, and the gap only widens the client's
                // bound (see crate::clock), it cannot bias the estimate.
                let Some(t) = self.rx_ns else {
                    return self.fail(SessionError::Unexpected {
                        message: "ClockProbe (without an arrival time)",
                        state: "running",
                    });
                };
                self.outbox.push(&Message::ClockReply(ClockReply {
                    t1: p.t1,
                    t2: t,
                    t3: t,
                    boot_id: self.boot_id.clone(),
                }));
            }
            (State::Running(x), Message::Results(r)) if !x.has_remote() => {
                if let Some(Err(why)) = self
                    .spec
                    .as_ref()
                    .map(|s| crate::check::check_results(s, &r))
                {
                    return self.refuse_peer("Results", why);
                }
                let State::Running(x) = &mut self.state else {
                    return;
                };
                x.remote_arrived(*r);
                self.try_complete();
            }
            // Its arrival already counted (receive); nothing else to do.
            (State::Running(_), Message::Heartbeat) if self.heartbeat.is_some() => {}
            (State::Running(x), Message::Stop) => {
                if x.streams_running() && self.stopped_early.is_none() {
                    self.stopped_early = Some(EarlyStop::ByClient);
                    self.actions.push_back(ServerAction::StopStreams);
                }
            }
            (State::Running(_), Message::SendDone(d))
                if self.spec.as_ref().map(|s| s.protocol) == Some(Protocol::Udp) =>
            {
                self.actions.push_back(ServerAction::PeerSendDone(d));
            }
            (_, Message::Abort(Abort { reason })) => self.fail(SessionError::PeerAborted(reason)),
            (state, other) => {
                let state = state.name();
                self.fail(SessionError::Unexpected {
                    message: other.name(),
                    state,
                })
            }
        }
    }

    /// The `--auth-key` exchange before the Hello.
    fn authenticate(&mut self, m: Message) {
        let Some(auth) = &mut self.auth else {
            return self.refuse(
                RefuseCode::Auth,
                "this server has no pre-shared key: run the client without --auth-key".into(),
            );
        };
        match m {
            Message::AuthInit(i) if !auth.challenged() => {
                let c = auth.on_init(&i);
                self.outbox.push(&Message::AuthChallenge(c));
            }
            Message::AuthProof(p) if auth.challenged() && !auth.verified() => {
                if let Err(e) = auth.on_proof(&p) {
                    self.refuse(RefuseCode::Auth, e.to_string());
                }
            }
            other => self.refuse(
                RefuseCode::Auth,
                format!("unexpected {} in the authentication exchange", other.name()),
            ),
        }
    }

    /// The I/O layer's answer to [`ServerAction::RequestAdmission`]: a
    /// busy or limited server refuses the test; an admitted one goes on
    /// with the Hello. Ignored in any other state.
    pub fn admission(&mut self, decision: Admission, now: Instant) {
        let h = match std::mem::replace(&mut self.state, State::AwaitHello) {
            State::AwaitAdmission(h) => h,
            other => {
                self.state = other;
                return;
            }
        };
        match decision {
            Admission::Admit => self.admitted(*h, now),
            Admission::Busy { running, max } => self.refuse(
                RefuseCode::Busy,
                format!("{running} test(s) running, it allows {max} at a time"),
            ),
            Admission::Limited(why) => self.refuse(RefuseCode::Busy, why),
        }
        // Frames that came after the Hello, if any.
        if !self.is_finished() {
            self.process_inbox();
        }
    }

    /// An admitted Hello: checks what the client asks of this server and
    /// negotiates its test.
    fn admitted(&mut self, h: Hello, now: Instant) {
        if let Some(e) = &h.server_engine {
            if let Err(why) = check_server_engine(e, &self.limits.server_engines) {
                return self.refuse(RefuseCode::Invalid, why.to_string());
            }
            self.server_engine = Some(e.clone());
        }
        if let Some(why) = &self.limits.own_engine_tcp_streams_only {
            let served = matches!(
                (h.spec.kind, h.spec.protocol),
                (TestKind::Stream, Protocol::Tcp) | (TestKind::Crr, _)
            );
            if !served && h.server_engine.is_none() {
                return self.refuse(
                    RefuseCode::Invalid,
                    format!(
                        "server --engine {why}; ask for another engine with \
                         --server-engine, or run the server with --engine auto"
                    ),
                );
            }
        }
        if let Some(why) = &self.limits.own_engine_udp_streams_only {
            let served = (h.spec.kind, h.spec.protocol) == (TestKind::Stream, Protocol::Udp);
            if !served && h.server_engine.is_none() {
                return self.refuse(
                    RefuseCode::Invalid,
                    format!(
                        "server --engine {why}; ask for another engine with \
                         --server-engine, or run the server with --engine auto"
                    ),
                );
            }
        }
        self.heartbeat_agreed = h
            .heartbeat_ms
            .zip(self.heartbeat_offer)
            .map(|(c, s)| heartbeat::agree(c, s));
        match self.negotiate(&h.spec) {
            // The server's rate budget is taken by running tests.
            Err(e) if e.field == "total_rate" => self.refuse(RefuseCode::Busy, e.to_string()),
            Err(e) => self.refuse(RefuseCode::Invalid, e.to_string()),
            Ok(n) if n.spec.protocol == Protocol::Udp => {
                self.actions.push_back(ServerAction::BindDatagramSockets {
                    token: self.token,
                    spec: n.spec.clone(),
                });
                self.await_ports(n, now);
            }
            Ok(n) if n.spec.tcp.unix => {
                let Some(uid) = h.unix_uid else {
                    return self.refuse(
                        RefuseCode::Invalid,
                        "--transport unix needs the client to announce its uid \
                         (a client older than this server: upgrade it)"
                            .into(),
                    );
                };
                self.actions.push_back(ServerAction::BindUnixListener {
                    spec: n.spec.clone(),
                    uid,
                });
                self.await_ports(n, now);
            }
            Ok(n) => {
                self.send_accept(n.spec.clone(), n.notes, Vec::new(), None);
                self.actions.push_back(ServerAction::ExpectStreams {
                    token: self.token,
                    spec: n.spec.clone(),
                });
                let plan = n.spec.stream_plan();
                self.spec = Some(n.spec);
                if plan.is_empty() {
                    self.start(now);
                } else {
                    self.await_streams(plan, now);
                }
            }
        }
    }

    /// Waits for the I/O layer's data sockets before the Accept.
    fn await_ports(&mut self, n: Negotiated, now: Instant) {
        self.state = State::AwaitPorts { notes: n.notes };
        self.spec = Some(n.spec);
        self.deadline = Some(now + handshake(&self.limits));
    }

    fn await_streams(&mut self, plan: Vec<StreamPlan>, now: Instant) {
        self.state = State::AwaitStreams {
            plan,
            attached: BTreeSet::new(),
        };
        self.deadline = Some(now + handshake(&self.limits));
    }

    fn send_accept(
        &mut self,
        spec: TestSpec,
        notes: Vec<String>,
        udp_ports: Vec<u16>,
        unix_name: Option<String>,
    ) {
        self.outbox.push(&Message::Accept(Accept {
            spec,
            token: self.token,
            notes,
            software: self.software.clone(),
            udp_ports,
            server_engine: self.server_engine.clone(),
            heartbeat_ms: self.heartbeat_agreed,
            unix_name,
        }));
    }

    /// UDP: the data sockets are bound; `ports` in plan order. Sends the
    /// Accept that carries them.
    pub fn datagram_sockets_bound(&mut self, ports: Vec<u16>, now: Instant) {
        let Some((notes, spec)) = self.data_sockets_ready() else {
            return;
        };
        let plan = spec.stream_plan();
        if ports.len() != plan.len() {
            let msg = format!(
                "bound {} data sockets for {} streams",
                ports.len(),
                plan.len()
            );
            self.outbox.push(&Message::Refuse(Refuse {
                code: RefuseCode::Internal,
                message: msg.clone(),
            }));
            return self.fail(SessionError::Stream(msg));
        }
        self.send_accept(spec, notes, ports, None);
        self.await_streams(plan, now);
    }

    /// `--transport unix`: the test's listener is bound at `name`. Sends
    /// the Accept that carries it.
    pub fn unix_listener_bound(&mut self, name: String, now: Instant) {
        let Some((notes, spec)) = self.data_sockets_ready() else {
            return;
        };
        let plan = spec.stream_plan();
        self.send_accept(spec, notes, Vec::new(), Some(name));
        self.await_streams(plan, now);
    }

    /// The notes and spec of a session waiting for its data sockets; `None`
    /// in any other state (a late or repeated call does nothing).
    fn data_sockets_ready(&mut self) -> Option<(Vec<String>, TestSpec)> {
        let State::AwaitPorts { notes } = &mut self.state else {
            return None;
        };
        let notes = std::mem::take(notes);
        Some((notes, self.spec.clone()?))
    }

    /// The data sockets (UDP's, or the Unix listener) could not be bound;
    /// refuse the test.
    pub fn data_sockets_failed(&mut self, why: String) {
        if matches!(self.state, State::AwaitPorts { .. }) {
            self.refuse(
                RefuseCode::Internal,
                format!("server cannot open its data sockets: {why}"),
            );
        }
    }

    /// UDP: every sending stream of this side finished; tell the client how
    /// many sequence numbers each issued (once).
    pub fn local_senders_finished(&mut self, streams: Vec<SentCount>) {
        if let State::Running(x) = &mut self.state {
            x.senders_finished(streams, &mut self.outbox);
        }
    }

    /// A data connection greeted with this session's token arrived. Returns
    /// `Ok(plan)` if the I/O layer should keep it, `Err(reason)` to close it.
    pub fn stream_attached(
        &mut self,
        hello: &DataHello,
        now: Instant,
    ) -> Result<StreamPlan, String> {
        if hello.token != self.token {
            return Err("token does not belong to this test".into());
        }
        let State::AwaitStreams { plan, attached } = &mut self.state else {
            return Err(format!(
                "not expecting data connections while {}",
                self.state.name()
            ));
        };
        let Some(p) = plan.iter().find(|p| p.id == hello.stream).copied() else {
            return Err(format!("stream {} is not in the test plan", hello.stream));
        };
        if p.sender != hello.sender {
            return Err(format!("stream {} has the wrong direction", hello.stream));
        }
        if !attached.insert(p.id) {
            return Err(format!("stream {} attached twice", p.id));
        }
        if attached.len() == plan.len() {
            self.start(now);
        }
        Ok(p)
    }

    fn start(&mut self, now: Instant) {
        self.outbox.push(&Message::Start);
        self.actions.push_back(ServerAction::StartStreams);
        // Byte- and count-limited tests have no planned end: --max-time
        // bounds them too, whatever the client does. (Timed tests were
        // checked against it in negotiation.)
        let cap = now + max_time_allowance(self.spec.as_ref(), &self.limits);
        let planned = self.spec.as_ref().and_then(|s| data_deadline(s, now));
        self.at_max_time = planned.is_none();
        self.deadline = Some(planned.unwrap_or(cap));
        self.state = State::Running(Exchange::default());
        self.heartbeat = self.heartbeat_agreed.map(|ms| Heartbeat::new(ms, now));
    }

    /// This side's streams have all ended.
    pub fn local_finished(&mut self, results: SideResults, now: Instant) {
        if let State::Running(x) = &mut self.state {
            if x.local_finished(results, &mut self.outbox) {
                let recovery =
                    (self.heartbeat.as_mut()).map_or(Duration::ZERO, |hb| hb.streams_ended(now));
                self.deadline = Some(now + RESULTS_TIMEOUT + recovery);
                self.try_complete();
            }
        }
    }

    fn try_complete(&mut self) {
        if let State::Running(x) = &mut self.state {
            if let Some((local, remote)) = x.take_both() {
                self.state = State::Done { local, remote };
                self.deadline = None;
                self.heartbeat = None;
            }
        }
    }

    /// A local data stream failed hard; tell the client and stop.
    pub fn stream_failed(&mut self, why: String) {
        if !self.is_finished() {
            self.outbox.push(&Message::Abort(Abort {
                reason: why.clone(),
            }));
            self.fail(SessionError::Stream(why));
        }
    }

    /// The server is shutting down (its operator stopped it). A running
    /// test is stopped as if its limit were reached: the client is told
    /// with a Stop, stops its senders too, and both sides still exchange
    /// what they measured (the I/O layer bounds how long it waits for
    /// that). A test not running yet is aborted with `reason`, which the
    /// client prints. Does nothing once finished or already stopping.
    pub fn shutdown(&mut self, reason: &str) {
        match &self.state {
            State::Running(x) if x.streams_running() => {
                if self.stopped_early.is_none() {
                    self.stopped_early = Some(EarlyStop::ByServer);
                    self.outbox.push(&Message::Stop);
                    self.actions.push_back(ServerAction::StopStreams);
                }
            }
            // Its side finished: the results exchange ends it soon.
            State::Running(_) => {}
            _ => self.abort(reason),
        }
    }

    /// Ends the session now, telling the client `reason`.
    pub fn abort(&mut self, reason: &str) {
        if !self.is_finished() {
            self.outbox.push(&Message::Abort(Abort {
                reason: reason.to_owned(),
            }));
            self.fail(SessionError::Aborted(reason.to_owned()));
        }
    }

    pub fn peer_closed(&mut self) {
        if !self.is_finished() {
            let state = self.state.name();
            self.fail(SessionError::PeerClosed(state));
        }
    }

    /// Data from the client arrived at `now`: it and the path are alive,
    /// even when this test's streams starve the control connection
    /// ([`heartbeat`]'s doc).
    pub fn peer_data_arrived(&mut self, now: Instant) {
        if let Some(hb) = &mut self.heartbeat {
            hb.heard(now);
        }
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        if let Some(hb) = &mut self.heartbeat {
            hb.awake(now);
            if hb.peer_silent(now) {
                let why = heartbeat::silence_reason(hb, "client");
                // Written in case the path comes back; the client then
                // prints why its server left.
                self.outbox.push(&Message::Abort(Abort {
                    reason: format!("the server gives up: {why}"),
                }));
                return self.fail(SessionError::PeerSilent(why));
            }
            if hb.beat_due(now) {
                self.outbox.push(&Message::Heartbeat);
            }
        }
        if self.deadline.is_some_and(|d| now >= d)
            && self.at_max_time
            && matches!(&self.state, State::Running(x) if x.streams_running())
        {
            // Tell the client why its test ends, in the server's terms.
            let why = format!(
                "the test ran past this server's limit of {} s (--max-time)",
                self.limits.max_time_ms / 1000
            );
            return self.stream_failed(why);
        }
        if self.deadline.is_some_and(|d| now >= d) && !self.is_finished() {
            let what = match &self.state {
                State::Running(x) if x.streams_running() => {
                    "waiting for the data streams to finish"
                }
                State::Running(_) => "waiting for the client's results",
                s => s.name(),
            };
            self.fail(SessionError::Timeout(what));
        }
    }

    /// The peer sent something impossible or not agreed: tell it why
    /// (it may log it) and stop.
    fn refuse_peer(&mut self, what: &'static str, why: String) {
        self.outbox.push(&Message::Abort(Abort {
            reason: format!("the server refuses the peer's {what}: {why}"),
        }));
        self.fail(SessionError::Implausible { what, why });
    }

    fn fail(&mut self, err: SessionError) {
        let streams_may_run = match &self.state {
            State::AwaitPorts { .. } | State::AwaitStreams { .. } => true,
            State::Running(x) => x.streams_running(),
            _ => false,
        };
        if streams_may_run {
            self.actions.push_back(ServerAction::AbortStreams);
        }
        self.state = State::Failed(err);
        self.deadline = None;
        self.heartbeat = None;
    }
}

/// How long a running test may last on this server, whatever its limit:
/// `--max-time`, plus its own warm-up and drain, plus a second.
fn max_time_allowance(spec: Option<&TestSpec>, limits: &ServerLimits) -> std::time::Duration {
    let extra = spec.map_or(0, |s| {
        s.omit_ms
            .saturating_add(s.udp.as_ref().map_or(0, |u| u.drain_ms))
    });
    std::time::Duration::from_millis(
        limits
            .max_time_ms
            .saturating_add(extra)
            .saturating_add(1000),
    )
}

/// The server's time limit for each handshake step (`--handshake-timeout`).
fn handshake(limits: &ServerLimits) -> std::time::Duration {
    std::time::Duration::from_millis(limits.handshake_timeout_ms)
}

/// Whether `spec` is a probe that may run beside another test
/// ([`Hello::beside`]): request/response transactions, one at a time per
/// flow, with no bulk load of their own.
fn is_probe(spec: &TestSpec) -> bool {
    spec.kind == TestKind::Rr && spec.rr.as_ref().is_some_and(|r| r.under_load == 0)
}
