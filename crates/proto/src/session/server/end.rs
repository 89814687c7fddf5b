//! How a session ends: its side's and the client's results, a failed
//! stream, a shutdown or abort, a silent or closed peer, a deadline.

use std::time::{Duration, Instant};

use super::{ServerAction, ServerSession, State};
use crate::measure::SideResults;
use crate::session::deadline::ResultsWait;
use crate::session::heartbeat;
use crate::session::{ControlIoError, EarlyStop, Ended, SessionError};
use crate::wire::{Abort, Message, SentCount};

impl ServerSession {
    /// UDP: every sending stream of this side finished; tell the client how
    /// many sequence numbers each issued (once).
    pub fn local_senders_finished(&mut self, streams: Vec<SentCount>) {
        if let State::Running(x) = &mut self.state {
            x.senders_finished(streams, &mut self.outbox);
        }
    }

    /// This side's streams have all ended.
    pub fn local_finished(&mut self, results: SideResults, now: Instant) {
        if let State::Running(x) = &mut self.state {
            if x.local_finished(results, &mut self.outbox) {
                let recovery =
                    (self.heartbeat.as_mut()).map_or(Duration::ZERO, |hb| hb.streams_ended(now));
                let wait = ResultsWait::new(now, recovery);
                self.deadline = Some(wait.at());
                self.results_wait = Some(wait);
                self.try_complete();
            }
        }
    }

    pub(super) fn try_complete(&mut self) {
        if let State::Running(x) = &mut self.state {
            if let Some((local, remote)) = x.take_both(crate::wire::Side::Server) {
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

    /// Data from the client arrived at `now`: it and the path are alive,
    /// even when this test's streams starve the control connection
    /// ([`heartbeat`]'s doc), and a data phase still receiving is not
    /// stalled (`DataDeadline`).
    pub fn peer_data_arrived(&mut self, now: Instant) {
        if let Some(hb) = &mut self.heartbeat {
            hb.data_arrived(now);
        }
        if let (State::Running(x), Some(d)) = (&self.state, &mut self.data_deadline) {
            if x.streams_running() {
                self.deadline = Some(d.progressed(now));
            }
        }
        self.results_heard(now);
    }

    /// The client was heard at `now` (control bytes, or its data): while
    /// this side waits for its results, the wait moves on
    /// ([`ResultsWait`]).
    pub(super) fn results_heard(&mut self, now: Instant) {
        if let (State::Running(_), Some(w)) = (&self.state, &mut self.results_wait) {
            self.deadline = Some(w.heard(now));
        }
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        let silent = (self.heartbeat.as_mut())
            .and_then(|hb| heartbeat::on_timeout(hb, now, "server", "client", &mut self.outbox));
        if let Some(e) = silent {
            return self.fail(e);
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
            if let Some(why) = self.setup_timeout_words() {
                // The client is there and waiting on this side (its data
                // connections opened, as far as it knows): tell it why the
                // test will not start, not a bare close of the connection.
                self.outbox.push(&Message::Abort(Abort { reason: why }));
            }
            let what = match &self.state {
                State::Running(x) if x.streams_running() => {
                    "waiting for the data streams to finish"
                }
                State::Running(_) => "waiting for the client's results",
                s => s.name(),
            };
            self.fail(ControlIoError::Timeout(what).into());
        }
    }

    /// Why a test being set up timed out, in words for the client; `None`
    /// outside the setup (before the Hello the client may be gone; once
    /// running, the data phase's own rules speak).
    ///
    /// Issue 28: a client that opened 10,000 data connections
    /// (`--flows 5000` per direction) on a host at load 30 waited for the
    /// start while the server had not accepted them all within its
    /// handshake timeout; the server gave up and closed, and the client
    /// printed only "peer closed the control connection".
    fn setup_timeout_words(&self) -> Option<String> {
        let secs = self.limits.handshake().as_secs_f64();
        match &self.state {
            State::AwaitPorts { .. } => Some(format!(
                "the server could not bind its data sockets within {secs} s (its \
                 --handshake-timeout)"
            )),
            State::AwaitStreams { plan, attached } => Some(format!(
                "the server timed out waiting for data connections: {} of {} arrived \
                 within {secs} s (its --handshake-timeout; a loaded host or a test of \
                 many flows may need a longer one)",
                attached.len(),
                plan.len()
            )),
            _ => None,
        }
    }

    /// The peer sent something impossible or not agreed: tell it why
    /// (it may log it) and stop.
    pub(super) fn refuse_peer(&mut self, what: &'static str, why: String) {
        self.outbox.push(&Message::Abort(Abort {
            reason: format!("the server refuses the peer's {what}: {why}"),
        }));
        self.fail(SessionError::Implausible { what, why });
    }

    pub(super) fn fail(&mut self, err: SessionError) {
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
