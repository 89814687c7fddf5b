//! Client side of the native control protocol.
//!
//! ```text
//!  AwaitAccept --Accept--> Connecting --streams_opened--> AwaitStart --Start--> Running
//!       |     \--Accept (rr)--> Syncing --last ClockReply--/                     |
//!       +--Refuse--> Failed                  local_finished + peer Results --> Done
//! ```
//!
//! Request/response tests first measure the clock offset to the server
//! (`Syncing`, see [`crate::clock`]): the session asks the I/O layer for each
//! probe ([`ClientAction::SendClockProbe`], answered with
//! [`ClientSession::clock_probe`]) and needs the arrival time of every read
//! ([`ClientSession::receive_at`]). A test with no data connections to open
//! up front (crr) goes straight to `AwaitStart`.
//!
//! Any state: peer close, Abort, a malformed or unexpected frame, or a passed
//! deadline ends the session with an error (and asks the I/O layer to stop
//! the data streams if they were started).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::deadline::{DataDeadline, ResultsWait};
use super::exchange::Exchange;
use super::frames::{Inbox, Outbox};
use super::heartbeat::{self, Heartbeat, HEARTBEAT_MS_RANGE};
use super::outcome::{ControlIoError, EarlyStop, Ended, SessionError};
use crate::auth::ClientAuth;
use crate::clock::{self, ClockOffset, ClockSample};
use crate::limits::HANDSHAKE_TIMEOUT;
use crate::measure::SideResults;
use crate::spec::TestSpec;
use crate::test_type::{self, Attach};
use crate::wire::{Abort, Accept, ClockReply, Hello, Message, SendDone, SentCount, Token};
use crate::PROTOCOL_VERSION;

/// What the client's I/O layer must do next.
// One action per test phase: their size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum ClientAction {
    /// Open the data connections of `spec` (each greeted with `token`), then
    /// call [`ClientSession::streams_opened`].
    OpenStreams {
        token: Token,
        spec: TestSpec,
        notes: Vec<String>,
        server_software: String,
        /// UDP: the server's data port of each stream, in plan order.
        udp_ports: Vec<u16>,
        /// `--transport unix`: the server's abstract name for this test's
        /// data connections (checked: [`crate::wire::is_unix_data_name`]).
        unix_name: Option<String>,
    },
    /// Start moving data; Start time is now.
    StartStreams,
    /// Stop the data streams at once; the test has failed.
    AbortStreams,
    /// Read the monotonic clock and pass it to [`ClientSession::clock_probe`]
    /// (then write the outbox at once).
    SendClockProbe,
    /// UDP: the server's senders finished; let the receivers drain and stop.
    PeerSendDone(SendDone),
    /// The server is shutting down and stopped the test before its limit:
    /// stop the senders as if the limit were reached; results are still
    /// exchanged ([`ClientSession::early_stop`]).
    StopStreams,
}

/// Clock probing in progress.
#[derive(Debug)]
struct Sync {
    accept: Accept,
    samples: Vec<ClockSample>,
    /// `t1` of the probe awaiting its reply.
    outstanding: Option<u64>,
}

#[derive(Debug)]
enum State {
    AwaitAccept,
    Syncing(Box<Sync>),
    Connecting,
    AwaitStart,
    Running {
        started: Instant,
        exchange: Exchange,
    },
    Done {
        local: SideResults,
        remote: SideResults,
    },
    Failed(SessionError),
}

impl State {
    fn name(&self) -> &'static str {
        match self {
            State::AwaitAccept => "waiting for the server to accept",
            State::Syncing(_) => "measuring the clock offset to the server",
            State::Connecting => "opening data connections",
            State::AwaitStart => "waiting for the server to start the test",
            State::Running { .. } => "running the test",
            State::Done { .. } => "finished",
            State::Failed(_) => "failed",
        }
    }
}

/// The client's control-connection state machine.
#[derive(Debug)]
pub struct ClientSession {
    state: State,
    /// The spec proposed; the Accept must match it ([`crate::check`]).
    asked: TestSpec,
    /// `--server-engine`: the engine asked of the server; its Accept must
    /// echo it.
    asked_engine: Option<String>,
    /// Our software string, for a rewritten Hello.
    software: String,
    /// `--auth-key`: our half of the exchange, and the Hello held back
    /// until the server has proved the key.
    auth: Option<(ClientAuth, Outbox)>,
    spec: Option<TestSpec>,
    inbox: Inbox,
    outbox: Outbox,
    actions: VecDeque<ClientAction>,
    deadline: Option<Instant>,
    /// The running test's data-phase deadline, while it has a planned end.
    data_deadline: Option<DataDeadline>,
    /// The wait for the server's results, once this side's streams ended.
    results_wait: Option<ResultsWait>,
    /// This host's boot id, compared with the server's.
    boot_id: Option<String>,
    /// Arrival time (monotonic ns) of the bytes being received.
    rx_ns: Option<u64>,
    clock: Option<ClockOffset>,
    /// Who stopped the test before its limit: this side
    /// ([`Self::stop_early`]) or the server (a Stop frame).
    stopped_early: Option<EarlyStop>,
    /// Heartbeats: the interval offered in the Hello (ms), the one the
    /// server's Accept agreed to, and their state while the test runs.
    heartbeat_offer: Option<u32>,
    heartbeat_agreed: Option<u32>,
    heartbeat: Option<Heartbeat>,
    /// `--transport unix`: this process's uid, announced in the Hello.
    unix_uid: Option<u32>,
    /// The token of the running test this one runs beside, announced in
    /// the Hello ([`Hello::beside`]).
    beside: Option<Token>,
}

impl ClientSession {
    /// Starts a session proposing `spec`; the Hello is queued at once.
    pub fn new(spec: TestSpec, software: &str, now: Instant) -> Self {
        let mut session = ClientSession {
            software: software.to_owned(),
            asked: spec,
            asked_engine: None,
            auth: None,
            state: State::AwaitAccept,
            spec: None,
            inbox: Inbox::default(),
            outbox: Outbox::default(),
            actions: VecDeque::new(),
            deadline: Some(now + HANDSHAKE_TIMEOUT),
            data_deadline: None,
            results_wait: None,
            boot_id: None,
            rx_ns: None,
            clock: None,
            stopped_early: None,
            heartbeat_offer: None,
            heartbeat_agreed: None,
            heartbeat: None,
            unix_uid: None,
            beside: None,
        };
        session.queue_hello();
        session
    }

    /// Queues the Hello (again, replacing what was queued) from what this
    /// session offers.
    fn queue_hello(&mut self) {
        self.outbox = Outbox::default();
        self.outbox.push(&Message::Hello(Hello {
            protocol: PROTOCOL_VERSION,
            software: self.software.clone(),
            spec: self.asked.clone(),
            server_engine: self.asked_engine.clone(),
            heartbeat_ms: self.heartbeat_offer,
            unix_uid: self.unix_uid,
            beside: self.beside,
        }));
    }

    /// Runs this test beside the client's running test whose token is
    /// `token` ([`Hello::beside`]: a probe admitted as part of that test).
    /// Call before [`Self::with_auth`]: it rewrites the queued Hello.
    pub fn with_beside(mut self, token: Option<Token>) -> Self {
        if token.is_some() {
            self.beside = token;
            self.queue_hello();
        }
        self
    }

    /// `--transport unix`: announces this process's `uid`, the only one
    /// the server takes the test's Unix data connections from. Call before
    /// [`Self::with_auth`]: it rewrites the queued Hello.
    pub fn with_unix_uid(mut self, uid: u32) -> Self {
        if self.asked.tcp.unix {
            self.unix_uid = Some(uid);
            self.queue_hello();
        }
        self
    }

    /// Asks the server to run its side with `engine` (`--server-engine`).
    /// Call before [`Self::with_auth`]: it rewrites the queued Hello.
    pub fn with_server_engine(mut self, engine: Option<String>) -> Self {
        if engine.is_some() {
            self.asked_engine = engine;
            self.queue_hello();
        }
        self
    }

    /// Offers heartbeats every `interval` while the test runs
    /// ([`heartbeat`]); used when the server's Accept agrees. Call before
    /// [`Self::with_auth`]: it rewrites the queued Hello.
    pub fn with_heartbeat(mut self, interval: std::time::Duration) -> Self {
        self.heartbeat_offer = Some(u32::try_from(interval.as_millis()).unwrap_or(u32::MAX));
        self.queue_hello();
        self
    }

    /// Authenticates with a pre-shared key before the Hello
    /// ([`crate::auth`]).
    pub fn with_auth(mut self, auth: ClientAuth) -> Self {
        let hello = std::mem::take(&mut self.outbox);
        self.outbox.push(&Message::AuthInit(auth.init()));
        self.auth = Some((auth, hello));
        self
    }

    /// Sets this host's boot id: a server with the same one shares the
    /// clock, so the offset is exactly zero.
    pub fn with_boot_id(mut self, boot_id: Option<String>) -> Self {
        self.boot_id = boot_id;
        self
    }

    /// The clock offset to the server, once measured (rr tests).
    pub fn clock(&self) -> Option<&ClockOffset> {
        self.clock.as_ref()
    }

    /// Bytes to write to the control connection.
    pub fn outbox(&mut self) -> &mut Outbox {
        &mut self.outbox
    }

    pub fn poll_action(&mut self) -> Option<ClientAction> {
        self.actions.pop_front()
    }

    /// The next instant at which [`Self::handle_timeout`] must be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match (self.deadline, self.heartbeat.as_ref().map(Heartbeat::next)) {
            (Some(d), Some(h)) => Some(d.min(h)),
            (d, h) => d.or(h),
        }
    }

    /// The agreed spec, once the server accepted.
    pub fn spec(&self) -> Option<&TestSpec> {
        self.spec.as_ref()
    }

    pub fn is_finished(&self) -> bool {
        matches!(self.state, State::Done { .. } | State::Failed(_))
    }

    /// The outcome once finished: both sides' results, or why there are none.
    pub fn outcome(&self) -> Option<Result<(&SideResults, &SideResults), &SessionError>> {
        match &self.state {
            State::Done { local, remote } => Some(Ok((local, remote))),
            State::Failed(e) => Some(Err(e)),
            _ => None,
        }
    }

    /// Feeds bytes read from the control connection that arrived at
    /// `clock_ns` (monotonic clock, ns; clock probes need it).
    pub fn receive_at(&mut self, bytes: &[u8], now: Instant, clock_ns: u64) {
        self.rx_ns = Some(clock_ns);
        self.receive(bytes, now);
        self.rx_ns = None;
    }

    /// Queues the next clock probe, sent at `t1` (monotonic clock, ns).
    pub fn clock_probe(&mut self, t1: u64) {
        if let State::Syncing(sync) = &mut self.state {
            if sync.outstanding.is_none() {
                sync.outstanding = Some(t1);
                self.outbox
                    .push(&Message::ClockProbe(crate::wire::ClockProbe { t1 }));
            }
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
        loop {
            match self.inbox.next() {
                Ok(Some(msg)) => self.handle(msg, now),
                Ok(None) => break,
                Err(e) => {
                    self.fail(e.into());
                    break;
                }
            }
            if self.is_finished() {
                break;
            }
        }
    }

    fn handle(&mut self, msg: Message, now: Instant) {
        match (&mut self.state, msg) {
            (State::AwaitAccept, Message::AuthChallenge(c)) => self.on_auth_challenge(&c),
            (State::AwaitAccept, Message::Accept(a)) => self.on_accept(a, now),
            (State::Syncing(_), Message::ClockReply(r)) => self.on_clock_reply(r, now),
            (State::AwaitAccept, Message::Refuse(r)) => self.fail(SessionError::Refused {
                code: r.code,
                message: r.message,
            }),
            (State::AwaitStart, Message::Start) => {
                self.data_deadline = self.spec.as_ref().and_then(|s| DataDeadline::new(s, now));
                self.deadline = self.data_deadline.map(|d| d.at());
                let omit = self.spec.as_ref().is_some_and(|s| s.omit_ms > 0);
                self.state = State::Running {
                    started: now,
                    exchange: Exchange::new(omit),
                };
                self.heartbeat = self.heartbeat_agreed.map(|ms| Heartbeat::new(ms, now));
                self.actions.push_back(ClientAction::StartStreams);
            }
            // Its arrival already counted (receive); nothing else to do.
            (State::Running { .. }, Message::Heartbeat) if self.heartbeat.is_some() => {}
            (State::Running { exchange, .. }, Message::Results(r)) if !exchange.has_remote() => {
                let spec = self.spec.as_ref().unwrap_or(&self.asked);
                if let Err(why) = crate::check::check_results(spec, &r) {
                    return self.refuse_peer("Results", why);
                }
                let State::Running { exchange, .. } = &mut self.state else {
                    return;
                };
                exchange.remote_arrived(*r);
                self.try_complete();
            }
            // The server is shutting down: finish now, as for our own
            // Ctrl-C (ignored once this side stopped or finished).
            (State::Running { exchange, .. }, Message::Stop) => {
                if exchange.streams_running() && self.stopped_early.is_none() {
                    self.stopped_early = Some(EarlyStop::ByServer);
                    self.actions.push_back(ClientAction::StopStreams);
                }
            }
            (State::Running { .. }, Message::SendDone(d))
                if self
                    .spec
                    .as_ref()
                    .is_some_and(|s| test_type::of(s).attach == Attach::Datagrams) =>
            {
                self.actions.push_back(ClientAction::PeerSendDone(d));
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

    /// The server asks for proof of the key: answer it and send the hello
    /// held back, or hang up if the server's own proof fails.
    fn on_auth_challenge(&mut self, c: &crate::auth::AuthChallenge) {
        let Some((auth, hello)) = self.auth.take() else {
            return self.fail(SessionError::Unexpected {
                message: "AuthChallenge (this client has no key)",
                state: "waiting for the server to accept",
            });
        };
        match auth.on_challenge(c) {
            Ok(proof) => {
                self.outbox.push(&Message::AuthProof(proof));
                self.outbox.append(hello);
            }
            Err(e) => {
                // Tell the server why we hang up, for its log.
                self.outbox.push(&Message::Abort(Abort {
                    reason: format!("the client refuses the server: {e}"),
                }));
                self.fail(SessionError::Refused {
                    code: crate::wire::RefuseCode::Auth,
                    message: e.to_string(),
                })
            }
        }
    }

    /// The server accepted: check what it agreed to, then measure the clock
    /// (rr) or open the data connections.
    fn on_accept(&mut self, a: Accept, now: Instant) {
        if let Err(why) = crate::check::check_accept(&self.asked, &a.spec) {
            return self.refuse_peer("Accept", why);
        }
        if let Some(e) = self
            .asked_engine
            .as_ref()
            .filter(|e| a.server_engine.as_ref() != Some(*e))
        {
            let why = format!(
                "the server did not take --server-engine {e} (it answered {}; a server without --server-engine support ignores it)",
                a.server_engine.as_deref().unwrap_or("nothing")
            );
            return self.refuse_peer("Accept", why);
        }
        if let (Some(_), Some(ms)) = (self.heartbeat_offer, a.heartbeat_ms) {
            if !HEARTBEAT_MS_RANGE.contains(&ms) {
                let why = format!(
                    "heartbeat interval {ms} ms is outside {}..={} ms",
                    HEARTBEAT_MS_RANGE.start(),
                    HEARTBEAT_MS_RANGE.end()
                );
                return self.refuse_peer("Accept", why);
            }
            self.heartbeat_agreed = Some(ms);
        }
        if a.spec.tcp.unix
            && !a
                .unix_name
                .as_deref()
                .is_some_and(crate::wire::is_unix_data_name)
        {
            let why = "--transport unix: the server sent no valid data socket name \
                       (an older server: upgrade it)"
                .to_owned();
            return self.refuse_peer("Accept", why);
        }
        self.spec = Some(a.spec.clone());

        self.deadline = Some(now + HANDSHAKE_TIMEOUT);
        if crate::test_type::of(&a.spec).one_way {
            self.state = State::Syncing(Box::new(Sync {
                accept: a,
                samples: Vec::new(),
                outstanding: None,
            }));
            self.actions.push_back(ClientAction::SendClockProbe);
        } else {
            self.open_streams(a, now);
        }
    }

    /// One clock probe answered: keep the sample, and once there are enough
    /// (or both ends share a kernel) settle the offset and open the streams.
    fn on_clock_reply(&mut self, r: ClockReply, now: Instant) {
        let State::Syncing(sync) = &mut self.state else {
            return;
        };
        if sync.outstanding != Some(r.t1) {
            return self.fail(SessionError::Unexpected {
                message: "ClockReply (for no probe)",
                state: "measuring the clock offset to the server",
            });
        }
        let Some(t4) = self.rx_ns else {
            return self.fail(SessionError::Unexpected {
                message: "ClockReply (without an arrival time)",
                state: "measuring the clock offset to the server",
            });
        };
        let ClockReply {
            t1,
            t2,
            t3,
            boot_id,
        } = r;
        sync.samples.push(ClockSample { t1, t2, t3, t4 });
        sync.outstanding = None;
        let same_host = boot_id.is_some() && boot_id == self.boot_id;
        let clock = if same_host {
            Some(ClockOffset::same_host(sync.samples.len() as u32))
        } else if sync.samples.len() >= clock::PROBES {
            ClockOffset::estimate(&sync.samples)
        } else {
            self.actions.push_back(ClientAction::SendClockProbe);
            return;
        };
        self.clock = clock;
        let State::Syncing(sync) = std::mem::replace(&mut self.state, State::Connecting) else {
            unreachable!("matched Syncing above");
        };
        self.open_streams(sync.accept, now);
    }

    fn open_streams(&mut self, a: Accept, now: Instant) {
        // With nothing to open up front, the server starts at once.
        let none = a.spec.connection_count() == 0;
        self.actions.push_back(ClientAction::OpenStreams {
            token: a.token,
            spec: a.spec,
            notes: a.notes,
            server_software: a.software,
            udp_ports: a.udp_ports,
            unix_name: a.unix_name,
        });
        self.state = if none {
            State::AwaitStart
        } else {
            State::Connecting
        };
        self.deadline = Some(now + HANDSHAKE_TIMEOUT);
    }

    /// All data connections are open and greeted.
    pub fn streams_opened(&mut self, now: Instant) {
        if matches!(self.state, State::Connecting) {
            self.state = State::AwaitStart;
            self.deadline = Some(now + HANDSHAKE_TIMEOUT);
        }
    }

    /// Opening the data connections failed.
    pub fn streams_failed(&mut self, why: String) {
        // A late report (e.g. streams dying after AbortStreams, or after the
        // test completed) must not overwrite the outcome already reached.
        if !self.is_finished() {
            // Tell the server why, so it logs the cause instead of a hang-up.
            self.outbox.push(&Message::Abort(Abort {
                reason: format!("client could not set up its streams: {why}"),
            }));
            self.fail(SessionError::Stream(why));
        }
    }

    /// UDP: every sending stream of this side finished; tell the server how
    /// many sequence numbers each issued (once).
    pub fn local_senders_finished(&mut self, streams: Vec<SentCount>) {
        if let State::Running { exchange, .. } = &mut self.state {
            exchange.senders_finished(streams, &mut self.outbox);
        }
    }

    /// This side's streams have all ended; `results` is what it measured.
    pub fn local_finished(&mut self, results: SideResults, now: Instant) {
        if let State::Running { exchange, .. } = &mut self.state {
            if exchange.local_finished(results, &mut self.outbox) {
                let recovery =
                    (self.heartbeat.as_mut()).map_or(Duration::ZERO, |hb| hb.streams_ended(now));
                let wait = ResultsWait::new(now, recovery);
                self.deadline = Some(wait.at());
                self.results_wait = Some(wait);
                self.try_complete();
            }
        }
    }

    fn try_complete(&mut self) {
        if let State::Running { exchange, .. } = &mut self.state {
            if let Some((local, remote)) = exchange.take_both(crate::wire::Side::Client) {
                self.state = State::Done { local, remote };
                self.deadline = None;
                self.heartbeat = None;
            }
        }
    }

    /// The user interrupted a running test: ask the server to finish now as
    /// if the test's limit were reached, so both sides still exchange what
    /// they measured. The caller stops this side's senders. Returns false
    /// (and does nothing) when the test is not running or this side has
    /// already finished: then [`Self::abort`] is the way out.
    pub fn stop_early(&mut self) -> bool {
        match &self.state {
            State::Running { exchange, .. }
                if exchange.streams_running() && self.stopped_early.is_none() =>
            {
                self.outbox.push(&Message::Stop);
                self.stopped_early = Some(EarlyStop::ByClient);
                true
            }
            _ => false,
        }
    }

    /// True once the test was stopped before its limit: by
    /// [`Self::stop_early`], or by the server shutting down.
    pub fn stopped_early(&self) -> bool {
        self.stopped_early.is_some()
    }

    /// Who stopped the test before its limit, if anyone did.
    pub fn early_stop(&self) -> Option<EarlyStop> {
        self.stopped_early
    }

    /// The user interrupted the test: tell the server and stop.
    pub fn abort(&mut self, reason: &str) {
        if !self.is_finished() {
            self.outbox.push(&Message::Abort(Abort {
                reason: reason.to_owned(),
            }));
            self.fail(SessionError::Aborted(reason.to_owned()));
        }
    }

    /// The control connection reached end of file.
    pub fn peer_closed(&mut self) {
        self.connection_ended(Ended::Closed);
    }

    /// The control connection reached end of file or failed.
    pub fn connection_ended(&mut self, how: Ended) {
        if !self.is_finished() {
            let state = self.state.name();
            self.fail(how.error(state).into());
        }
    }

    /// Data from the server arrived at `now`: it and the path are alive,
    /// even when this test's streams starve the control connection
    /// ([`heartbeat`]'s doc), and a data phase still receiving is not
    /// stalled (`DataDeadline`).
    pub fn peer_data_arrived(&mut self, now: Instant) {
        if let Some(hb) = &mut self.heartbeat {
            hb.data_arrived(now);
        }
        if let (State::Running { exchange, .. }, Some(d)) = (&self.state, &mut self.data_deadline) {
            if exchange.streams_running() {
                self.deadline = Some(d.progressed(now));
            }
        }
        self.results_heard(now);
    }

    /// The server was heard at `now` (control bytes, or its data): while
    /// this side waits for its results, the wait moves on
    /// ([`ResultsWait`]).
    fn results_heard(&mut self, now: Instant) {
        if let (State::Running { .. }, Some(w)) = (&self.state, &mut self.results_wait) {
            self.deadline = Some(w.heard(now));
        }
    }

    /// Call when `now` has reached [`Self::poll_timeout`].
    pub fn handle_timeout(&mut self, now: Instant) {
        let silent = (self.heartbeat.as_mut())
            .and_then(|hb| heartbeat::on_timeout(hb, now, "client", "server", &mut self.outbox));
        if let Some(e) = silent {
            return self.fail(e);
        }
        if self.deadline.is_some_and(|d| now >= d) && !self.is_finished() {
            let what = match &self.state {
                State::Running { exchange, .. } if exchange.streams_running() => {
                    "waiting for the data streams to finish"
                }
                State::Running { .. } => "waiting for the server's results",
                s => s.name(),
            };
            self.fail(ControlIoError::Timeout(what).into());
        }
    }

    /// Ends the session; streams that may exist are told to stop.
    /// The peer sent something impossible or not agreed: tell it why
    /// (it may log it) and stop.
    fn refuse_peer(&mut self, what: &'static str, why: String) {
        self.outbox.push(&Message::Abort(Abort {
            reason: format!("the client refuses the peer's {what}: {why}"),
        }));
        self.fail(SessionError::Implausible { what, why });
    }

    fn fail(&mut self, err: SessionError) {
        let streams_may_run = match &self.state {
            State::Connecting | State::AwaitStart => true,
            State::Running { exchange, .. } => exchange.streams_running(),
            _ => false,
        };
        if streams_may_run {
            self.actions.push_back(ClientAction::AbortStreams);
        }
        self.state = State::Failed(err);
        self.deadline = None;
        self.heartbeat = None;
    }

    /// Start instant of the data phase, once running.
    pub fn started(&self) -> Option<Instant> {
        match &self.state {
            State::Running { started, .. } => Some(*started),
            _ => None,
        }
    }
}
