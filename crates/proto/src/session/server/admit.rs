//! The handshake on the server: the `--auth-key` exchange, admission,
//! what the client asks of this server's engine, and the negotiation of
//! its test.

use std::time::Instant;

use super::{Admission, ServerAction, ServerSession, State};
use crate::limits::{check_server_engine, SpecError};
use crate::negotiate::{negotiate, Negotiated};
use crate::session::heartbeat;
use crate::spec::TestSpec;
use crate::test_type::{self, Attach};
use crate::wire::{Hello, Message, RefuseCode};

impl ServerSession {
    /// The `--auth-key` exchange before the Hello.
    pub(super) fn authenticate(&mut self, m: Message) {
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
    pub(super) fn admitted(&mut self, h: Hello, now: Instant) {
        if let Some(e) = &h.server_engine {
            if let Err(why) = check_server_engine(e, &self.limits.server_engines) {
                return self.refuse(RefuseCode::Invalid, why.to_string());
            }
            self.server_engine = Some(e.clone());
        }
        if let Some(why) = self.own_engine_refusal(&h) {
            return self.refuse(RefuseCode::Invalid, why);
        }
        self.heartbeat_agreed = h
            .heartbeat_ms
            .zip(self.heartbeat_offer)
            .map(|(c, s)| heartbeat::agree(c, s));
        match self.negotiate(&h.spec) {
            // The server's rate budget is taken by running tests.
            Err(e) if e.field == "total_rate" => self.refuse(RefuseCode::Busy, e.to_string()),
            Err(e) => self.refuse(RefuseCode::Invalid, e.to_string()),
            Ok(n) if test_type::of(&n.spec).attach == Attach::Datagrams => {
                if n.spec.stream_plan().iter().any(|p| p.load) {
                    // rr over UDP under load: its load streams are TCP.
                    self.actions.push_back(ServerAction::ExpectStreams {
                        token: self.token,
                        spec: n.spec.clone(),
                    });
                }
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

    /// Why this server's own `--engine` cannot serve the Hello's test, if
    /// it cannot and the client did not ask for another engine.
    fn own_engine_refusal(&self, h: &Hello) -> Option<String> {
        if h.server_engine.is_some() {
            return None;
        }
        // A test whose server side runs without the server's engine (crr)
        // is served whatever that engine sends with.
        if !test_type::of(&h.spec).server_engine {
            return None;
        }
        let why = self.limits.own_engine_refusal.as_ref()?.of(&h.spec)?;
        Some(format!(
            "server --engine {why}; ask for another engine with \
             --server-engine, or run the server with --engine auto"
        ))
    }

    /// Negotiates the client's proposal, reserving its rate from the
    /// server's budget when there is one.
    pub(super) fn negotiate(&mut self, proposed: &TestSpec) -> Result<Negotiated, SpecError> {
        match &self.rate_budget {
            None => negotiate(proposed, &self.limits),
            Some(b) => b.negotiate(proposed, &self.limits).map(|(n, held)| {
                self.rate_held = Some(held);
                n
            }),
        }
    }
}
