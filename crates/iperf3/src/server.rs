//! Server side of the iperf3 control protocol: what a linerate server does
//! for a real iperf3 client.
//!
//! ```text
//!  AwaitAdmission -admitted-> AwaitCookie -37 B-> AwaitParams -params ok-> Preparing -prepared-> AwaitStreams
//!    |  (busy: FF)        | (bad: FE code)            (sends 09)        (sends 0A)
//!  AwaitStreams -all in-> Running (sends 01 02) -04-> Stopping -stopped-> AwaitClientResults
//!  (sends 0D) -client JSON-> Building -our JSON-> AwaitDone (sent JSON + 0E) -10/EOF-> Done
//! ```
//!
//! The I/O layer carries out [`ServerAction`]s before it writes the
//! session's bytes (so, for example, the UDP socket exists before
//! CREATE_STREAMS reaches the client). Data streams are matched to the test
//! by order, as iperf3 does: TCP connections by their cookie
//! ([`Iperf3ServerSession::tcp_stream`]), UDP ones by arrival of their connect
//! datagram ([`Iperf3ServerSession::udp_stream`]). Every wait has a deadline;
//! a running test's is iperf3's safety timer (`time + omit + 40 s`, or the
//! server's `max_time` for byte- and block-limited tests).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::control::{
    code, server_error_bytes, server_role, stream_id, Cookie, Iperf3Error, Role, State, COOKIE_LEN,
    SAFETY_SLACK,
};
use crate::json::{self, Params, Results, MAX_CLIENT_RESULTS, MAX_PARAMS};
use linerate_proto::limits::{RateBudget, RateReservation, ServerLimits, MIN_TCP_RATE_BPS};
use linerate_proto::measure::SideResults;
use linerate_proto::negotiate;
use linerate_proto::session::server::Admission;
use linerate_proto::session::{ControlIoError, Ended, Outbox, Session};
use linerate_proto::spec::TestSpec;
use linerate_proto::wire::SentCount;

/// The server's limits as they apply to iperf3 tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Iperf3Limits {
    /// Longest `time` accepted, and the safety limit of tests that end by
    /// byte or block count.
    pub max_time: Duration,
    /// Longest omit period accepted.
    pub max_omit: Duration,
    /// Most streams per direction (`-P`).
    pub max_streams: u32,
    /// `--max-rate`: most bit/s of all streams together; `None`: no limit.
    pub max_rate_bps: Option<u64>,
    /// The server's own limits: a test's sizes (`--max-len`,
    /// `--max-window`, `--max-test-memory`), checked by the functions
    /// native negotiation checks them with
    /// ([`linerate_proto::negotiate::check_sizes`]), and its own engine's
    /// refusal ([`ServerLimits::own_engine_refusal`]: an iperf3 client
    /// cannot ask for another engine, so what the engine cannot run is
    /// refused).
    pub server: ServerLimits,
    /// The server requires `--auth-key`, which no iperf3 client can
    /// prove: every test is refused, in iperf3's error channel, before
    /// admission is asked for (so it counts against no limit).
    pub auth_required: bool,
}

impl Default for Iperf3Limits {
    fn default() -> Self {
        Iperf3Limits {
            max_time: Duration::from_secs(86_400),
            max_omit: Duration::from_secs(600),
            max_streams: crate::control::MAX_STREAMS,
            max_rate_bps: None,
            server: ServerLimits::default(),
            auth_required: false,
        }
    }
}

/// A data stream's place in the test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamSlot {
    /// 0-based arrival order.
    pub index: u32,
    /// iperf3's id: 1, 3, 4, …
    pub id: u32,
    /// What the server does on it.
    pub role: Role,
}

/// What the I/O layer must do next.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerAction {
    /// Decide whether there is room for this test (the server's one
    /// admission, as for a native session's
    /// [`linerate_proto::session::server::ServerAction::RequestAdmission`]) and
    /// answer with [`Iperf3ServerSession::admission`]. Nothing is read
    /// before: a busy server answers ACCESS_DENIED without the cookie.
    RequestAdmission,
    /// Parameters accepted: route TCP data connections bearing this test's
    /// cookie here, or bind the UDP socket on the port; then call
    /// [`Iperf3ServerSession::streams_prepared`] (or `prepare_failed`).
    PrepareStreams,
    /// All streams are in and TEST_START/TEST_RUNNING are queued: move data.
    StartStreams,
    /// The client sent TEST_END: stop the streams, take the final figures,
    /// close the data sockets, then call `streams_stopped`.
    StopStreams,
    /// The client's results arrived: build ours and call `send_results`.
    ClientResults(Box<Results>),
    /// The test ended early: drop the streams.
    AbortStreams,
}

#[derive(Debug)]
enum Phase {
    AwaitAdmission,
    AwaitCookie,
    AwaitParams,
    Preparing,
    AwaitStreams { attached: u32 },
    Running,
    Stopping,
    AwaitClientResults,
    Building,
    AwaitDone,
    Done,
    Refused(String),
    Failed(Iperf3Error),
}

impl Phase {
    fn name(&self) -> &'static str {
        match self {
            Phase::AwaitAdmission => "waiting for admission",
            Phase::AwaitCookie => "waiting for the cookie",
            Phase::AwaitParams => "waiting for the parameters",
            Phase::Preparing => "preparing the data streams",
            Phase::AwaitStreams { .. } => "waiting for the data streams",
            Phase::Running => "running the test",
            Phase::Stopping => "stopping the streams",
            Phase::AwaitClientResults => "waiting for the client's results",
            Phase::Building => "building the results",
            Phase::AwaitDone => "waiting for IPERF_DONE",
            Phase::Done => "finished",
            Phase::Refused(_) => "refused",
            Phase::Failed(_) => "failed",
        }
    }

    /// Streams may exist (and must be dropped if the test fails).
    fn has_streams(&self) -> bool {
        matches!(
            self,
            Phase::Preparing | Phase::AwaitStreams { .. } | Phase::Running | Phase::Stopping
        )
    }
}

/// How the session ended.
#[derive(Debug, PartialEq)]
pub enum ServerOutcome<'a> {
    /// Results exchanged.
    Completed {
        params: &'a Params,
        client: &'a Results,
    },
    /// Busy (ACCESS_DENIED) or parameters refused (SERVER_ERROR sent).
    Refused(&'a str),
    Failed(&'a Iperf3Error),
}

/// The server's iperf3 control-connection state machine.
#[derive(Debug)]
pub struct Iperf3ServerSession {
    phase: Phase,
    limits: Iperf3Limits,
    inbox: Vec<u8>,
    outbox: Outbox,
    actions: VecDeque<ServerAction>,
    deadline: Option<Instant>,
    cookie: Option<Cookie>,
    params: Option<Params>,
    /// The accepted parameters as linerate's test ([`crate::spec_of`]).
    spec: Option<TestSpec>,
    /// What this side's streams measured, once they have ended.
    measured: Option<SideResults>,
    notes: Vec<String>,
    client_results: Option<Results>,
    /// `--max-total-rate`: the budget shared with the server's other tests
    /// (native and iperf3), and this test's share, given back when the
    /// session is dropped.
    rate_budget: Option<Arc<RateBudget>>,
    rate_held: Option<RateReservation>,
}

impl Iperf3ServerSession {
    /// A session for a control connection whose first byte looked like an
    /// iperf3 cookie. A server that requires a key refuses at once with
    /// SERVER_ERROR (IEAUTHTEST: "test authorization failed"), without
    /// asking for admission; otherwise the session asks for it
    /// ([`ServerAction::RequestAdmission`]) before it reads anything.
    /// `now`: when the connection was accepted; its cookie and parameters
    /// are due within the server's handshake time (`--handshake-timeout`,
    /// [`ServerLimits::handshake`]) of it, as a native session's Hello is.
    pub fn new(limits: Iperf3Limits, now: Instant) -> Self {
        let deadline = Some(now + limits.server.handshake());
        let mut s = Iperf3ServerSession {
            phase: Phase::AwaitAdmission,
            limits,
            inbox: Vec::new(),
            outbox: Outbox::default(),
            actions: VecDeque::new(),
            deadline,
            cookie: None,
            params: None,
            spec: None,
            measured: None,
            notes: Vec::new(),
            client_results: None,
            rate_budget: None,
            rate_held: None,
        };
        if s.limits.auth_required {
            s.refuse(
                code::AUTH,
                "this server requires --auth-key, which iperf3 clients cannot present (use a linerate client)"
                    .into(),
            );
            return s;
        }
        s.actions.push_back(ServerAction::RequestAdmission);
        s
    }

    /// The server's admission decided ([`ServerAction::RequestAdmission`]):
    /// a busy server answers ACCESS_DENIED at once, as iperf3 does;
    /// otherwise the cookie (perhaps already in) is read.
    pub fn admission(&mut self, decision: Admission) {
        if !matches!(self.phase, Phase::AwaitAdmission) {
            return;
        }
        let refusal = match decision {
            Admission::Admit => None,
            Admission::Busy { running, max } => Some(format!(
                "busy: {running} test(s) running, the server allows {max} at a time"
            )),
            Admission::Limited(why) => Some(why),
        };
        match refusal {
            Some(why) => {
                self.outbox.raw().push(State::AccessDenied.byte());
                self.phase = Phase::Refused(why);
                self.deadline = None;
            }
            None => {
                self.phase = Phase::AwaitCookie;
                while !self.is_finished() && self.step() {}
            }
        }
    }

    /// Shares `--max-total-rate` with the server's other tests: the test's
    /// rate is reserved from `budget` while this session lives.
    pub fn with_rate_budget(mut self, budget: Option<Arc<RateBudget>>) -> Self {
        self.rate_budget = budget;
        self
    }

    /// Takes the bytes to write to the control connection.
    pub fn take_outbox(&mut self) -> Vec<u8> {
        std::mem::take(self.outbox.raw())
    }

    pub fn poll_action(&mut self) -> Option<ServerAction> {
        self.actions.pop_front()
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        self.deadline
    }

    pub fn cookie(&self) -> Option<&Cookie> {
        self.cookie.as_ref()
    }

    /// The accepted parameters (from PrepareStreams on).
    pub fn params(&self) -> Option<&Params> {
        self.params.as_ref()
    }

    /// The accepted parameters as linerate's test.
    pub fn spec(&self) -> Option<&TestSpec> {
        self.spec.as_ref()
    }

    /// What this side's streams measured, once they have ended.
    pub fn measured(&self) -> Option<&SideResults> {
        self.measured.as_ref()
    }

    /// This side's streams have ended; the first results count.
    pub fn local_finished(&mut self, results: SideResults) {
        self.measured.get_or_insert(results);
        // This side's streams have ended: its share of --max-total-rate
        // goes back now, not when the connection closes. An iperf3 client
        // exits before that (it cannot wait for the server's close as a
        // linerate client does), and a test it starts right after must
        // not be told the bandwidth is in use.
        self.rate_held = None;
    }

    /// What was odd about the parameters (values real clients never send).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    pub fn is_finished(&self) -> bool {
        matches!(
            self.phase,
            Phase::Done | Phase::Refused(_) | Phase::Failed(_)
        )
    }

    /// True while the data streams run (between TEST_RUNNING and TEST_END).
    pub fn is_running(&self) -> bool {
        matches!(self.phase, Phase::Running)
    }

    pub fn outcome(&self) -> Option<ServerOutcome<'_>> {
        match &self.phase {
            Phase::Done => Some(ServerOutcome::Completed {
                params: self.params.as_ref()?,
                client: self.client_results.as_ref()?,
            }),
            Phase::Refused(why) => Some(ServerOutcome::Refused(why)),
            Phase::Failed(e) => Some(ServerOutcome::Failed(e)),
            _ => None,
        }
    }

    /// The number of data streams the test has.
    pub fn stream_count(&self) -> u32 {
        self.params
            .as_ref()
            .map_or(0, |p| p.direction.stream_count(p.parallel))
    }

    /// Feeds bytes read from the control connection. No deadline counts
    /// from a read (a step's is set when the step begins), so `_now` is
    /// only the [`Session`] interface's.
    pub fn receive(&mut self, bytes: &[u8], _now: Instant) {
        if self.is_finished() {
            return;
        }
        self.inbox.extend_from_slice(bytes);
        while !self.is_finished() && self.step() {}
    }

    /// Handles what the inbox holds for the current phase; false when it
    /// needs more bytes (or the phase takes none).
    fn step(&mut self) -> bool {
        match self.phase {
            Phase::AwaitCookie => {
                let Some(c) = Cookie::from_wire(&self.inbox) else {
                    return false;
                };
                self.inbox.drain(..COOKIE_LEN);
                self.cookie = Some(c);
                self.outbox.raw().push(State::ParamExchange.byte());
                // The parameters are due by the deadline the cookie was
                // (one handshake time from the accept, as a native
                // session's Hello): spreading them out buys no time.
                self.phase = Phase::AwaitParams;
                true
            }
            Phase::AwaitParams => match json::take_message(&mut self.inbox, MAX_PARAMS) {
                Ok(None) => false,
                Ok(Some(body)) => {
                    self.params_received(&body);
                    true
                }
                Err(e) => {
                    self.refuse(code::RECV_PARAMS, format!("parameters: {e}"));
                    true
                }
            },
            Phase::AwaitClientResults => {
                match json::take_message(&mut self.inbox, MAX_CLIENT_RESULTS) {
                    Ok(None) => false,
                    Ok(Some(body)) => {
                        self.client_results_received(&body);
                        true
                    }
                    Err(e) => {
                        self.error(code::RECV_RESULTS, e);
                        true
                    }
                }
            }
            Phase::AwaitAdmission => false,
            Phase::AwaitStreams { .. }
            | Phase::Preparing
            | Phase::Running
            | Phase::Stopping
            | Phase::Building
            | Phase::AwaitDone => {
                if self.inbox.is_empty() {
                    return false;
                }
                let b = self.inbox.remove(0);
                self.state_byte(State::from_byte(b));
                true
            }
            Phase::Done | Phase::Refused(_) | Phase::Failed(_) => false,
        }
    }

    fn state_byte(&mut self, s: State) {
        match (&self.phase, s) {
            (Phase::AwaitDone, _) => {
                // IPERF_DONE, or anything after our results: the test is over.
                self.phase = Phase::Done;
                self.deadline = None;
            }
            // iperf3 servers ignore a TEST_START from the client.
            (_, State::TestStart) => {}
            (Phase::Running, State::TestEnd) => {
                self.actions.push_back(ServerAction::StopStreams);
                self.phase = Phase::Stopping;
                self.deadline = None;
            }
            (_, State::ClientTerminate) => self.fail(Iperf3Error::ClientTerminated),
            (phase, got) => {
                let err = match got {
                    State::Unknown(v) => Iperf3Error::UnknownState(v),
                    got => Iperf3Error::Unexpected {
                        got,
                        state: phase.name(),
                    },
                };
                self.error(code::MESSAGE, err);
            }
        }
    }

    fn params_received(&mut self, body: &[u8]) {
        let parsed = match json::parse_params(body) {
            Ok(p) => p,
            Err(e) => return self.refuse(e.code, format!("parameters: {e}")),
        };
        let p = parsed.params;
        self.notes = parsed.notes;
        if !p.unsupported.is_empty() {
            return self.refuse(
                code::UNIMPLEMENTED,
                format!(
                    "iperf3 option(s) not supported by linerate: {}",
                    p.unsupported.join(", ")
                ),
            );
        }
        let engine_refusal = self.limits.server.own_engine_refusal.as_ref();
        if let Some(why) = engine_refusal.and_then(|r| r.of(&crate::spec_of(&p))) {
            let why = format!(
                "server --engine {why} (an iperf3 client cannot ask for another \
                 engine; run the server with --engine auto)"
            );
            return self.refuse(code::UNIMPLEMENTED, why);
        }
        if p.parallel > self.limits.max_streams {
            return self.refuse(
                code::NUM_STREAMS,
                format!(
                    "{} streams per direction asked, the server allows {}",
                    p.parallel, self.limits.max_streams
                ),
            );
        }
        if p.protocol == json::Protocol::Tcp && (1..MIN_TCP_RATE_BPS).contains(&p.bandwidth) {
            // Refused, not rounded up or left unpaced: linerate paces TCP
            // with the kernel, in whole bytes per second, as for its own
            // `tcp --rate` (iperf3 has no error code for a rate; it has
            // for an option it cannot serve).
            return self.refuse(
                code::UNIMPLEMENTED,
                format!(
                    "TCP -b {} asked: linerate paces TCP in whole bytes per second, so \
                     {MIN_TCP_RATE_BPS} bit/s is the least (pass -b {MIN_TCP_RATE_BPS} or more)",
                    p.bandwidth
                ),
            );
        }
        if let Some(max) = self.limits.max_rate_bps {
            // An iperf3 client takes no clamp: a test past the limit, or
            // unpaced (-b 0, TCP's default), is refused; it can ask for -b.
            let n = u64::from(p.direction.stream_count(p.parallel));
            let total = p.bandwidth.saturating_mul(n);
            if p.bandwidth == 0 || total > max {
                return self.refuse(
                    code::TOTAL_RATE,
                    format!(
                        "{} bit/s in all asked ({n} streams at -b {}), the server allows at most {max} (--max-rate): pass -b {} or less",
                        if p.bandwidth == 0 { "unpaced".to_owned() } else { total.to_string() },
                        p.bandwidth,
                        max / n.max(1)
                    ),
                );
            }
        }
        let secs = |d: Duration| d.as_secs_f64();
        if Duration::from_secs(p.time.into()) > self.limits.max_time {
            return self.refuse(
                code::MAX_SERVER_DURATION,
                format!(
                    "-t {} asked, the server allows at most {} s",
                    p.time,
                    secs(self.limits.max_time)
                ),
            );
        }
        if Duration::from_secs(p.omit.into()) > self.limits.max_omit {
            return self.refuse(
                code::OMIT,
                format!(
                    "-O {} asked, the server allows at most {} s",
                    p.omit,
                    secs(self.limits.max_omit)
                ),
            );
        }
        let spec = match self.sized_spec(&p) {
            Ok(spec) => spec,
            Err((code, why)) => return self.refuse(code, why),
        };
        if let Some(budget) = &self.rate_budget {
            // As with --max-rate: no clamp an iperf3 client would know of,
            // so a test that does not fit what is left is refused.
            let n = u64::from(p.direction.stream_count(p.parallel));
            let total = p.bandwidth.saturating_mul(n);
            let held = if p.bandwidth == 0 {
                Err(format!(
                    "unpaced (-b 0, TCP's default) asked, this server shares its rate among its tests (--max-total-rate): pass -b {} or less",
                    budget.total_bps() / n.max(1)
                ))
            } else {
                budget.reserve(total).map_err(|free| {
                    format!(
                        "{total} bit/s in all asked ({n} streams at -b {}), {free}",
                        p.bandwidth
                    )
                })
            };
            match held {
                Ok(r) => self.rate_held = Some(r),
                Err(why) => return self.refuse(code::TOTAL_RATE, why),
            }
        }
        self.spec = Some(spec);
        self.params = Some(p);
        self.actions.push_back(ServerAction::PrepareStreams);
        self.phase = Phase::Preparing;
        self.deadline = None;
    }

    /// The client's parameters as the test's spec, held to the server's
    /// size limits by the functions native negotiation holds a spec to (a
    /// window clamped with a note); `Err`: the iperf3 error code and why.
    fn sized_spec(&mut self, p: &Params) -> Result<TestSpec, (i32, String)> {
        let mut spec = crate::spec_of(p);
        let mut notes = Vec::new();
        if let Err(e) = negotiate::check_sizes(&mut spec, &self.limits.server, &mut notes) {
            let code = match e.field {
                "len" => code::BLOCK_SIZE,
                _ => code::BUF_SIZE,
            };
            return Err((code, e.to_string()));
        }
        self.notes.extend(notes);
        Ok(spec)
    }

    /// The data listener is ready: tells the client to open its streams,
    /// all of them within one step's time.
    pub fn streams_prepared(&mut self, now: Instant) {
        if matches!(self.phase, Phase::Preparing) {
            self.outbox.raw().push(State::CreateStreams.byte());
            self.phase = Phase::AwaitStreams { attached: 0 };
            self.deadline = Some(now + self.limits.server.handshake());
        }
    }

    /// The data listener could not be set up (`code` as iperf3 would send).
    pub fn prepare_failed(&mut self, code: i32, errno: i32, why: String) {
        if matches!(self.phase, Phase::Preparing) {
            self.outbox
                .raw()
                .extend_from_slice(&server_error_bytes(code, errno));
            self.phase = Phase::Refused(why);
            self.deadline = None;
        }
    }

    /// A TCP connection sent `cookie` as its first 37 bytes. `Ok`: keep it
    /// as the next stream; `Err`: answer it ACCESS_DENIED and close it (the
    /// test goes on, as in iperf3).
    pub fn tcp_stream(&mut self, cookie: &Cookie, now: Instant) -> Result<StreamSlot, String> {
        match &self.cookie {
            Some(c) if c.matches(cookie) => self.attach(now),
            _ => Err("data connection with another test's cookie".into()),
        }
    }

    /// A UDP connect datagram arrived (any content: iperf3 servers of every
    /// version ignore it); the I/O layer replies once this returns `Ok`.
    pub fn udp_stream(&mut self, now: Instant) -> Result<StreamSlot, String> {
        self.attach(now)
    }

    fn attach(&mut self, now: Instant) -> Result<StreamSlot, String> {
        let total = self.stream_count();
        let Phase::AwaitStreams { attached } = &mut self.phase else {
            return Err(format!(
                "not expecting data streams while {}",
                self.phase.name()
            ));
        };
        let index = *attached;
        if index >= total {
            return Err("more data streams than the test has".into());
        }
        *attached += 1;
        let p = self.params.as_ref().ok_or("no parameters")?;
        let slot = StreamSlot {
            index,
            id: stream_id(index),
            role: server_role(p.direction, p.parallel, index),
        };
        if index + 1 == total {
            self.outbox.raw().push(State::TestStart.byte());
            self.outbox.raw().push(State::TestRunning.byte());
            self.actions.push_back(ServerAction::StartStreams);
            self.phase = Phase::Running;
            let time = match p.time {
                0 => self.limits.max_time,
                t => Duration::from_secs(t.into()),
            };
            self.deadline = Some(now + time + Duration::from_secs(p.omit.into()) + SAFETY_SLACK);
        }
        // Otherwise the deadline set when the streams were asked for
        // stands: one for the whole setup, so a client that opens its
        // streams one by one just inside a step's time cannot hold the
        // test slot for streams × step (issue 28).
        Ok(slot)
    }

    /// The streams are stopped and closed: asks for the client's results.
    pub fn streams_stopped(&mut self, now: Instant) {
        if matches!(self.phase, Phase::Stopping) {
            self.outbox.raw().push(State::ExchangeResults.byte());
            self.phase = Phase::AwaitClientResults;
            self.deadline = Some(now + self.limits.server.handshake());
            // The client may already have sent them.
            while !self.is_finished() && self.step() {}
        }
    }

    fn client_results_received(&mut self, body: &[u8]) {
        let r = match json::parse_results(body) {
            Ok(r) => r,
            Err(e) => return self.error(code::RECV_RESULTS, e),
        };
        let total = self.stream_count();
        let ids: Vec<u32> = (0..total).map(stream_id).collect();
        if let Some(s) = r.streams.iter().find(|s| !ids.contains(&s.id)) {
            return self.error(code::STREAM_ID, Iperf3Error::UnknownStream(s.id.into()));
        }
        self.actions
            .push_back(ServerAction::ClientResults(Box::new(r.clone())));
        self.client_results = Some(r);
        self.phase = Phase::Building;
        self.deadline = None;
    }

    /// Sends the server's results and DISPLAY_RESULTS.
    pub fn send_results(&mut self, results: &Results, now: Instant) {
        if matches!(self.phase, Phase::Building) {
            json::put_message(&json::results_json(results), self.outbox.raw());
            self.outbox.raw().push(State::DisplayResults.byte());
            self.phase = Phase::AwaitDone;
            self.deadline = Some(now + self.limits.server.handshake());
            while !self.is_finished() && self.step() {}
        }
    }

    /// A data stream failed: tell the client (SERVER_ERROR, as iperf3 ≥3.21
    /// does) and stop.
    pub fn stream_failed(&mut self, code: i32, why: String) {
        if !self.is_finished() {
            self.error(code, Iperf3Error::Aborted(why));
        }
    }

    /// The server is shutting down: SERVER_TERMINATE, as iperf3 sends on a
    /// signal.
    pub fn abort(&mut self, reason: &str) {
        if !self.is_finished() {
            self.outbox.raw().push(State::ServerTerminate.byte());
            self.fail(Iperf3Error::Aborted(reason.to_owned()));
        }
    }

    /// The control connection reached end of file.
    pub fn peer_closed(&mut self) {
        self.connection_ended(Ended::Closed);
    }

    /// The control connection reached end of file or failed.
    pub fn connection_ended(&mut self, how: Ended) {
        match self.phase {
            // After our results, a close is how a 3.21 client says goodbye
            // (a reset too: a client closing with bytes unread).
            Phase::AwaitDone => {
                self.phase = Phase::Done;
                self.deadline = None;
            }
            _ if self.is_finished() => {}
            _ => {
                let state = self.phase.name();
                self.fail(how.error(state).into());
            }
        }
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        let due = matches!(self.deadline, Some(d) if now >= d);
        if !due || self.is_finished() {
            return;
        }
        match self.phase {
            Phase::AwaitDone => {
                // Results were delivered; a client that does not say
                // goodbye does not make the test fail.
                self.phase = Phase::Done;
                self.deadline = None;
            }
            // iperf3 3.21's safety timer (code 160).
            Phase::Running => self.error(160, ControlIoError::Timeout("running the test").into()),
            _ => {
                let what = self.phase.name();
                self.error(code::MESSAGE, ControlIoError::Timeout(what).into());
            }
        }
    }

    /// Refuses the test before any stream exists (SERVER_ERROR, as ≥3.20).
    fn refuse(&mut self, code: i32, why: String) {
        self.outbox
            .raw()
            .extend_from_slice(&server_error_bytes(code, 0));
        self.phase = Phase::Refused(why);
        self.deadline = None;
    }

    fn error(&mut self, code: i32, err: Iperf3Error) {
        self.outbox
            .raw()
            .extend_from_slice(&server_error_bytes(code, 0));
        self.fail(err);
    }

    fn fail(&mut self, err: Iperf3Error) {
        if self.phase.has_streams() {
            self.actions.push_back(ServerAction::AbortStreams);
        }
        self.phase = Phase::Failed(err);
        self.deadline = None;
    }
}

/// The control driver runs this session as it runs the native ones.
impl Session for Iperf3ServerSession {
    type Action = ServerAction;
    fn poll_action(&mut self) -> Option<ServerAction> {
        Iperf3ServerSession::poll_action(self)
    }
    fn outbox(&mut self) -> &mut Outbox {
        &mut self.outbox
    }
    fn spec(&self) -> Option<&TestSpec> {
        self.spec.as_ref()
    }
    fn is_finished(&self) -> bool {
        Iperf3ServerSession::is_finished(self)
    }
    fn receive_at(&mut self, bytes: &[u8], now: Instant, _clock_ns: u64) {
        self.receive(bytes, now)
    }
    /// iperf3 has no message for it: the client's results carry its counts.
    fn local_senders_finished(&mut self, _: Vec<SentCount>) {}
    fn local_finished(&mut self, results: SideResults, _: Instant) {
        Iperf3ServerSession::local_finished(self, results)
    }
    fn connection_ended(&mut self, how: Ended) {
        Iperf3ServerSession::connection_ended(self, how)
    }
    fn handle_timeout(&mut self, now: Instant) {
        Iperf3ServerSession::handle_timeout(self, now)
    }
}
