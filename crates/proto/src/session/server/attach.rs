//! From the Accept to the start: the data sockets the I/O layer binds
//! (UDP's, the Unix listener) and the Accept that carries them, the data
//! connections attached against the plan, and the start of the test.

use std::collections::BTreeSet;
use std::time::Instant;

use super::{ServerAction, ServerSession, State};
use crate::limits::ServerLimits;
use crate::negotiate::Negotiated;
use crate::session::exchange::Exchange;
use crate::session::heartbeat::Heartbeat;
use crate::session::{DataDeadline, SessionError};
use crate::spec::{StreamPlan, TestSpec};
use crate::wire::{Accept, DataHello, Message, Refuse, RefuseCode};

impl ServerSession {
    /// Waits for the I/O layer's data sockets before the Accept.
    pub(super) fn await_ports(&mut self, n: Negotiated, now: Instant) {
        self.state = State::AwaitPorts { notes: n.notes };
        self.spec = Some(n.spec);
        self.deadline = Some(now + self.limits.handshake());
    }

    pub(super) fn await_streams(&mut self, plan: Vec<StreamPlan>, now: Instant) {
        self.state = State::AwaitStreams {
            plan,
            attached: BTreeSet::new(),
        };
        self.deadline = Some(now + self.limits.handshake());
    }

    pub(super) fn send_accept(
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

    /// UDP: the data sockets are bound; `ports` in plan order, one per
    /// planned stream but the load streams (TCP connections). Sends the
    /// Accept that carries them.
    pub fn datagram_sockets_bound(&mut self, ports: Vec<u16>, now: Instant) {
        let Some((notes, spec)) = self.data_sockets_ready() else {
            return;
        };
        let plan = spec.stream_plan();
        let datagrams = plan.iter().filter(|p| !p.load).count();
        if ports.len() != datagrams {
            let msg = format!("bound {} data sockets for {datagrams} streams", ports.len(),);
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
    pub(super) fn data_sockets_ready(&mut self) -> Option<(Vec<String>, TestSpec)> {
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

    pub(super) fn start(&mut self, now: Instant) {
        self.outbox.push(&Message::Start);
        self.actions.push_back(ServerAction::StartStreams);
        // Byte- and count-limited tests have no planned end: --max-time
        // bounds them too, whatever the client does. (Timed tests were
        // checked against it in negotiation.)
        let cap = now + max_time_allowance(self.spec.as_ref(), &self.limits);
        self.data_deadline = (self.spec.as_ref())
            .and_then(|s| DataDeadline::new(s, now))
            .map(|d| d.capped(cap));
        self.at_max_time = self.data_deadline.is_none();
        self.deadline = Some(self.data_deadline.map_or(cap, |d| d.at()));
        let omit = self.spec.as_ref().is_some_and(|s| s.omit_ms > 0);
        self.state = State::Running(Exchange::new(omit));
        self.heartbeat = self.heartbeat_agreed.map(|ms| Heartbeat::new(ms, now));
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
