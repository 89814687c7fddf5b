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
//!
//! This file holds the session's types and its frame handling; the
//! handshake is in `admit`, the data sockets and streams up to the start
//! in `attach`, and every way a session ends in `end`.

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use super::deadline::{DataDeadline, ResultsWait};
use super::exchange::Exchange;
use super::frames::{Inbox, Outbox};
use super::heartbeat::Heartbeat;
use super::outcome::{EarlyStop, SessionError};
use crate::auth::ServerAuth;
use crate::limits::ServerLimits;
use crate::limits::{RateBudget, RateReservation};
use crate::measure::SideResults;
use crate::spec::{StreamPlan, TestSpec};
use crate::test_type::{self, Attach};
use crate::wire::{
    Abort, ClockReply, Hello, Message, Refuse, RefuseCode, SendDone, Token, WireError,
};
use crate::PROTOCOL_VERSION;

mod admit;
mod attach;
mod end;

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
    /// UDP: bind one data socket per stream of `spec`'s plan (but its
    /// load streams, TCP connections routed by `ExpectStreams`), then call
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
    /// The running test's data-phase deadline, while it has a planned end
    /// (moved on while the client's data arrives, within `--max-time`).
    data_deadline: Option<DataDeadline>,
    /// The wait for the client's results, once this side's streams ended.
    results_wait: Option<ResultsWait>,
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
        let first_deadline = now + limits.handshake();
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
            data_deadline: None,
            results_wait: None,
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
    /// from clients that offer them ([`heartbeat`](super::heartbeat)).
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
        if !bytes.is_empty() {
            self.results_heard(now);
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
                if self
                    .spec
                    .as_ref()
                    .is_some_and(|s| test_type::of(s).attach == Attach::Datagrams) =>
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
}

/// Whether `spec` is a probe that may run beside another test
/// ([`Hello::beside`]): request/response transactions, one at a time per
/// flow, with no bulk load of their own.
fn is_probe(spec: &TestSpec) -> bool {
    crate::test_type::of(spec).probe && spec.rr.as_ref().is_some_and(|r| r.under_load == 0)
}
