//! Client side of the iperf3 control protocol: what a linerate client does
//! against a real iperf3 server.
//!
//! ```text
//!  (sends cookie) AwaitParamExchange -09-> (sends params) AwaitCreateStreams
//!  -0A-> CreateStreams action; streams_created() -> AwaitTestStart -01-> -02-> Running
//!  end_test(results) (sends 04) -> AwaitExchange -0D-> (sends results) AwaitServerResults
//!  or stop() (sends 04) -> AwaitExchange -0D-> SendResults action -> AwaitLocalResults
//!     results(local) (sends them) -> AwaitServerResults
//!  -server JSON-> AwaitDisplay -0E-> (sends 10) Done
//! ```
//!
//! Refusals come as ACCESS_DENIED (busy), SERVER_ERROR (`FE` + code +
//! errno; servers up to 3.18 may close after the code) or SERVER_TERMINATE;
//! a close before the results is an error too, because iperf3 servers up to
//! 3.19 report a bad parameter by closing.

use std::time::Instant;

use crate::control::{stream_id, Cookie, Iperf3Error, State, STEP_TIMEOUT};
use crate::json::{self, Params, Results, MAX_RESULTS};
use linerate_proto::measure::SideResults;
use linerate_proto::session::{ControlIoError, Ended, Outbox, Session};
use linerate_proto::spec::TestSpec;
use linerate_proto::wire::SentCount;

/// What the client's I/O layer must do next.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientAction {
    /// CREATE_STREAMS: open the data streams one after another (each TCP
    /// connection sends the cookie; each UDP socket completes its connect
    /// handshake before the next starts), then call `streams_created`.
    CreateStreams,
    /// TEST_START: start the stream clocks and the end-of-test timer.
    TestStart,
    /// TEST_RUNNING: start sending and counting.
    TestRunning,
    /// EXCHANGE_RESULTS after [`Iperf3ClientSession::stop`]: the server has
    /// stopped its senders; end the receivers, collect this side's results
    /// and pass them to [`Iperf3ClientSession::results`].
    SendResults,
}

#[derive(Debug)]
enum Phase {
    AwaitParamExchange,
    AwaitCreateStreams,
    CreatingStreams,
    AwaitTestStart,
    AwaitRunning,
    Running,
    AwaitExchange,
    /// EXCHANGE_RESULTS arrived; the I/O layer is collecting our results.
    AwaitLocalResults,
    AwaitServerResults,
    AwaitDisplay,
    /// Read FE; the code and errno follow.
    ServerError,
    Done,
    Failed(Iperf3Error),
}

impl Phase {
    fn name(&self) -> &'static str {
        match self {
            Phase::AwaitParamExchange => "waiting for PARAM_EXCHANGE",
            Phase::AwaitCreateStreams => "waiting for CREATE_STREAMS",
            Phase::CreatingStreams => "creating the data streams",
            Phase::AwaitTestStart => "waiting for TEST_START",
            Phase::AwaitRunning => "waiting for TEST_RUNNING",
            Phase::Running => "running the test",
            Phase::AwaitExchange => "waiting for EXCHANGE_RESULTS",
            Phase::AwaitLocalResults => "collecting this side's results",
            Phase::AwaitServerResults => "waiting for the server's results",
            Phase::AwaitDisplay => "waiting for DISPLAY_RESULTS",
            Phase::ServerError => "reading a server error",
            Phase::Done => "finished",
            Phase::Failed(_) => "failed",
        }
    }
}

/// How the session ended.
#[derive(Debug, PartialEq)]
pub enum ClientOutcome<'a> {
    Completed { server: &'a Results },
    Failed(&'a Iperf3Error),
}

/// The client's iperf3 control-connection state machine.
#[derive(Debug)]
pub struct Iperf3ClientSession {
    phase: Phase,
    params: Params,
    /// The test in linerate's terms (the caller's, else [`crate::spec_of`]).
    spec: TestSpec,
    /// What this side's streams measured, once they have ended.
    measured: Option<SideResults>,
    cookie: Cookie,
    inbox: Vec<u8>,
    outbox: Outbox,
    actions: std::collections::VecDeque<ClientAction>,
    deadline: Option<Instant>,
    local: Option<Results>,
    server: Option<Results>,
}

impl Iperf3ClientSession {
    /// Starts a test: the cookie is the first thing sent, in one write.
    pub fn new(params: Params, cookie: Cookie, now: Instant) -> Self {
        Iperf3ClientSession {
            phase: Phase::AwaitParamExchange,
            spec: crate::spec_of(&params),
            measured: None,
            params,
            cookie,
            inbox: Vec::new(),
            outbox: Outbox::from_bytes(cookie.0.to_vec()),
            actions: Default::default(),
            deadline: Some(now + STEP_TIMEOUT),
            local: None,
            server: None,
        }
    }

    /// The linerate test these parameters were made from (its interval,
    /// priority and other options iperf3's parameters do not carry).
    pub fn with_spec(mut self, spec: TestSpec) -> Self {
        self.spec = spec;
        self
    }

    pub fn spec(&self) -> &TestSpec {
        &self.spec
    }

    /// What this side's streams measured, once they have ended.
    pub fn measured(&self) -> Option<&SideResults> {
        self.measured.as_ref()
    }

    /// This side's streams have ended; the first results count.
    pub fn local_finished(&mut self, results: SideResults) {
        self.measured.get_or_insert(results);
    }

    pub fn params(&self) -> &Params {
        &self.params
    }

    pub fn cookie(&self) -> &Cookie {
        &self.cookie
    }

    pub fn take_outbox(&mut self) -> Vec<u8> {
        std::mem::take(self.outbox.raw())
    }

    pub fn poll_action(&mut self) -> Option<ClientAction> {
        self.actions.pop_front()
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        self.deadline
    }

    pub fn is_finished(&self) -> bool {
        matches!(self.phase, Phase::Done | Phase::Failed(_))
    }

    /// True between TEST_RUNNING and the client's TEST_END.
    pub fn is_running(&self) -> bool {
        matches!(self.phase, Phase::Running)
    }

    pub fn outcome(&self) -> Option<ClientOutcome<'_>> {
        match &self.phase {
            Phase::Done => Some(ClientOutcome::Completed {
                server: self.server.as_ref()?,
            }),
            Phase::Failed(e) => Some(ClientOutcome::Failed(e)),
            _ => None,
        }
    }

    /// The stream ids of this test, in creation order.
    pub fn stream_ids(&self) -> Vec<u32> {
        let n = self.params.direction.stream_count(self.params.parallel);
        (0..n).map(stream_id).collect()
    }

    /// Feeds bytes read from the control connection.
    pub fn receive(&mut self, bytes: &[u8], now: Instant) {
        if self.is_finished() {
            return;
        }
        self.inbox.extend_from_slice(bytes);
        while !self.is_finished() && self.step(now) {}
    }

    fn step(&mut self, now: Instant) -> bool {
        match self.phase {
            Phase::AwaitServerResults => match json::take_message(&mut self.inbox, MAX_RESULTS) {
                Ok(None) => false,
                Ok(Some(body)) => {
                    self.server_results(&body, now);
                    true
                }
                Err(e) => {
                    self.fail(e);
                    true
                }
            },
            Phase::ServerError => {
                let Some(w) = self.inbox.get(..8) else {
                    return false;
                };
                let code = i32::from_be_bytes([w[0], w[1], w[2], w[3]]);
                let errno = i32::from_be_bytes([w[4], w[5], w[6], w[7]]);
                self.fail(Iperf3Error::ServerError {
                    code,
                    errno: Some(errno),
                });
                true
            }
            // TEST_START may arrive before the streams are all open; it
            // waits until they are. Whatever follows EXCHANGE_RESULTS waits
            // for our results.
            Phase::CreatingStreams | Phase::AwaitLocalResults | Phase::Done | Phase::Failed(_) => {
                false
            }
            _ => {
                if self.inbox.is_empty() {
                    return false;
                }
                let b = self.inbox.remove(0);
                self.state_byte(State::from_byte(b), now);
                true
            }
        }
    }

    fn state_byte(&mut self, s: State, now: Instant) {
        match (&self.phase, s) {
            (_, State::AccessDenied) => self.fail(Iperf3Error::AccessDenied),
            (_, State::ServerError) => {
                self.phase = Phase::ServerError;
            }
            (_, State::ServerTerminate) => self.fail(Iperf3Error::ServerTerminated),
            (Phase::AwaitParamExchange, State::ParamExchange) => {
                json::put_message(&json::params_json(&self.params), self.outbox.raw());
                self.phase = Phase::AwaitCreateStreams;
                self.deadline = Some(now + STEP_TIMEOUT);
            }
            (Phase::AwaitCreateStreams, State::CreateStreams) => {
                self.actions.push_back(ClientAction::CreateStreams);
                self.phase = Phase::CreatingStreams;
                self.deadline = None;
            }
            (Phase::AwaitTestStart, State::TestStart) => {
                self.actions.push_back(ClientAction::TestStart);
                self.phase = Phase::AwaitRunning;
            }
            (Phase::AwaitRunning, State::TestRunning) => {
                self.actions.push_back(ClientAction::TestRunning);
                self.phase = Phase::Running;
                // The test's length is the I/O layer's to keep.
                self.deadline = None;
            }
            (Phase::AwaitExchange, State::ExchangeResults) => {
                match &self.local {
                    Some(r) => {
                        json::put_message(&json::results_json(r), self.outbox.raw());
                        self.phase = Phase::AwaitServerResults;
                    }
                    None => {
                        self.actions.push_back(ClientAction::SendResults);
                        self.phase = Phase::AwaitLocalResults;
                    }
                }
                self.deadline = Some(now + STEP_TIMEOUT);
            }
            (Phase::AwaitDisplay, State::DisplayResults) => {
                self.outbox.raw().push(State::IperfDone.byte());
                self.phase = Phase::Done;
                self.deadline = None;
            }
            // A client ignores an IPERF_DONE.
            (_, State::IperfDone) => {}
            (_, State::Unknown(v)) => self.fail(Iperf3Error::UnknownState(v)),
            (phase, got) => {
                let state = phase.name();
                self.fail(Iperf3Error::Unexpected { got, state });
            }
        }
    }

    fn server_results(&mut self, body: &[u8], now: Instant) {
        let r = match json::parse_results(body) {
            Ok(r) => r,
            Err(e) => return self.fail(e),
        };
        let ids = self.stream_ids();
        if let Some(s) = r.streams.iter().find(|s| !ids.contains(&s.id)) {
            return self.fail(Iperf3Error::UnknownStream(s.id.into()));
        }
        self.server = Some(r);
        self.phase = Phase::AwaitDisplay;
        self.deadline = Some(now + STEP_TIMEOUT);
    }

    /// Every data stream is open: wait for TEST_START.
    pub fn streams_created(&mut self, now: Instant) {
        if matches!(self.phase, Phase::CreatingStreams) {
            self.phase = Phase::AwaitTestStart;
            self.deadline = Some(now + STEP_TIMEOUT);
            while !self.is_finished() && self.step(now) {}
        }
    }

    /// The client decided the test is over (time, bytes or blocks): sends
    /// TEST_END; `local` goes out when the server asks for it.
    pub fn end_test(&mut self, local: Results, now: Instant) {
        if matches!(self.phase, Phase::Running | Phase::AwaitRunning) {
            self.outbox.raw().push(State::TestEnd.byte());
            self.local = Some(local);
            self.phase = Phase::AwaitExchange;
            self.deadline = Some(now + STEP_TIMEOUT);
            while !self.is_finished() && self.step(now) {}
        }
    }

    /// The client decided the test is over: sends TEST_END now, and asks
    /// for this side's results ([`ClientAction::SendResults`]) only once
    /// the server has stopped its own senders (EXCHANGE_RESULTS), so this
    /// side's receivers can count everything the server sent.
    pub fn stop(&mut self, now: Instant) {
        if matches!(self.phase, Phase::Running | Phase::AwaitRunning) {
            self.outbox.raw().push(State::TestEnd.byte());
            self.local = None;
            self.phase = Phase::AwaitExchange;
            self.deadline = Some(now + STEP_TIMEOUT);
            while !self.is_finished() && self.step(now) {}
        }
    }

    /// This side's results, asked for by [`ClientAction::SendResults`].
    pub fn results(&mut self, local: Results, now: Instant) {
        if matches!(self.phase, Phase::AwaitLocalResults) {
            json::put_message(&json::results_json(&local), self.outbox.raw());
            self.local = Some(local);
            self.phase = Phase::AwaitServerResults;
            self.deadline = Some(now + STEP_TIMEOUT);
            while !self.is_finished() && self.step(now) {}
        }
    }

    /// Interrupted (Ctrl-C): CLIENT_TERMINATE, as iperf3 sends.
    pub fn abort(&mut self, reason: &str) {
        if !self.is_finished() {
            self.outbox.raw().push(State::ClientTerminate.byte());
            self.fail(Iperf3Error::Aborted(reason.to_owned()));
        }
    }

    /// The control connection reached end of file.
    pub fn peer_closed(&mut self) {
        self.connection_ended(Ended::Closed);
    }

    /// The control connection reached end of file or failed.
    pub fn connection_ended(&mut self, how: Ended) {
        if self.is_finished() {
            return;
        }
        if let Phase::ServerError = self.phase {
            // Servers up to 3.18 send only the code for an authentication
            // failure, then close.
            if let Some(w) = self.inbox.get(..4) {
                let code = i32::from_be_bytes([w[0], w[1], w[2], w[3]]);
                return self.fail(Iperf3Error::ServerError { code, errno: None });
            }
        }
        let state = self.phase.name();
        self.fail(how.error(state).into());
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        if self.deadline.is_some_and(|d| now >= d) && !self.is_finished() {
            let what = self.phase.name();
            self.fail(ControlIoError::Timeout(what).into());
        }
    }

    fn fail(&mut self, err: Iperf3Error) {
        self.phase = Phase::Failed(err);
        self.deadline = None;
    }
}

/// The control driver runs this session as it runs the native ones.
impl Session for Iperf3ClientSession {
    type Action = ClientAction;
    fn poll_action(&mut self) -> Option<ClientAction> {
        Iperf3ClientSession::poll_action(self)
    }
    fn outbox(&mut self) -> &mut Outbox {
        &mut self.outbox
    }
    fn spec(&self) -> Option<&TestSpec> {
        Some(&self.spec)
    }
    fn is_finished(&self) -> bool {
        Iperf3ClientSession::is_finished(self)
    }
    fn receive_at(&mut self, bytes: &[u8], now: Instant, _clock_ns: u64) {
        self.receive(bytes, now)
    }
    /// iperf3 has no message for it: this side's results carry its counts.
    fn local_senders_finished(&mut self, _: Vec<SentCount>) {}
    fn local_finished(&mut self, results: SideResults, _: Instant) {
        Iperf3ClientSession::local_finished(self, results)
    }
    fn connection_ended(&mut self, how: Ended) {
        Iperf3ClientSession::connection_ended(self, how)
    }
    fn handle_timeout(&mut self, now: Instant) {
        Iperf3ClientSession::handle_timeout(self, now)
    }
}
