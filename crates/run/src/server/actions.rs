//! What the server does for each of its session's actions: admission,
//! the test's data routes and sockets, which engine runs it, starting,
//! stopping and aborting its streams, and attaching its data connections.

use std::net::TcpStream;
use std::sync::Arc;
use std::time::Instant;

use crate::control::ControlConn;
use crate::error::RunError;
use crate::guard;
use crate::test_type::{self, ServerSide};
use crate::watch::{IdleWatch, RateWatch};
use linerate_engine::engines::{auto, EngineKind};
use linerate_engine::rr::CrrServer;
use linerate_engine::socket;
use linerate_engine::stream::POLL;
use linerate_proto::session::server::ServerAction;
use linerate_proto::session::EarlyStop;
use linerate_proto::spec::TestSpec;
use linerate_proto::wire::{DataHello, Side, Token};

use super::{unix_attach, Route, ServerTest};

impl ServerTest<'_> {
    /// This test's engine: the one the client asked for with
    /// `--server-engine` (checked when its Hello was negotiated), else the
    /// server's own (`auto`: its rule for this test); asked for by name,
    /// an engine runs with its defaults.
    pub(super) fn engine(&self) -> EngineKind {
        let Some(spec) = self.session.spec() else {
            return EngineKind::Syscall;
        };
        // Unix stream sockets: read/write only (the client refuses the
        // other engines for itself; the server's own may be any).
        if spec.tcp.unix {
            return EngineKind::Syscall;
        }
        let own = self.shared.engine.for_test(spec);
        match self.session.server_engine() {
            // The rule for this test, among the engines this server offers.
            Some(crate::config::AUTO) => {
                let offers = &self.shared.limits.server_engines;
                auto::choose_with(auto::Workload::of(spec), |k| {
                    match offers.iter().find(|o| o.name == k.name()) {
                        Some(o) => o.refused.clone().map_or(Ok(()), Err),
                        None => Err("not offered by this server".into()),
                    }
                })
                .kind
            }
            Some(name) if name != own.name() => name.parse().unwrap_or(own),
            _ => own,
        }
    }

    /// What the server does for each of its session's actions.
    pub(super) fn carry_out(&mut self, action: ServerAction, ctrl: &ControlConn) {
        match action {
            ServerAction::RequestAdmission => self.request_admission(),
            ServerAction::ExpectStreams { token, spec } => self.expect_streams(token, &spec),
            ServerAction::BindUnixListener { spec, uid } => {
                match unix_attach::UnixData::bind(uid, spec.connection_count()) {
                    Ok((u, name)) => {
                        self.unix = Some(u);
                        self.session.unix_listener_bound(name, Instant::now());
                    }
                    Err(e) => self.session.data_sockets_failed(format!("{}", e.chain())),
                }
            }
            ServerAction::StartStreams => self.start_streams(),
            ServerAction::BindDatagramSockets { spec, .. } => {
                match self.bind_datagrams(&spec, ctrl) {
                    Ok(ports) => self.session.datagram_sockets_bound(ports, Instant::now()),
                    Err(e) => self.session.data_sockets_failed(format!("{}", e.chain())),
                }
            }
            ServerAction::PeerSendDone(done) => {
                if let Some(run) = &self.run {
                    let spec = self.session.spec().cloned().unwrap_or_default();
                    run.peer_send_done(&done.streams, ctrl.drain_period(&spec));
                }
            }
            ServerAction::StopStreams => self.stop_streams(),
            ServerAction::AbortStreams => {
                self.attached.clear();
                if let Some(run) = &self.run {
                    run.abort();
                }
            }
        }
    }

    /// Takes a test slot, or is refused one (busy, this address's share).
    fn request_admission(&mut self) {
        self.pre_auth = None;
        // The slot's guard lives until the session has finished,
        // which it has not while it waits for this answer.
        let Some(slot) = self.slot.as_mut() else {
            return;
        };
        let shared = self.shared;
        let ask = guard::Ask {
            token: Some(slot.token),
            beside: self.session.beside(),
        };
        let decision = guard::decide(
            &shared.guard,
            &shared.metrics,
            self.peer_ip,
            ask,
            &mut slot.admitted,
        );
        // A probe beside a test is part of it: its end is not the end
        // `--once` waits for.
        self.admitted = slot.admitted.as_ref().is_some_and(|a| !a.is_beside());
        self.session.admission(decision, Instant::now());
    }

    /// Opens the test's data route: its connections attach to this session,
    /// or (crr) each is one transaction for the crr pool.
    fn expect_streams(&mut self, token: Token, spec: &TestSpec) {
        let per_transaction =
            test_type::of(spec).rules.attach == linerate_proto::test_type::Attach::PerTransaction;
        // crr --flows: the server accepts on as many threads as it has
        // loops for the test (its --threads, else the client's).
        let accepting = spec.flows.map_or(1, |f| {
            usize::from(self.shared.flow_threads.unwrap_or(f.threads))
        });
        let route = match spec
            .rr_plan()
            .map(|plan| CrrServer::accepted_on(plan, accepting))
        {
            Some(crr) if per_transaction => {
                self.crr = Some(Arc::clone(&crr));
                Route::Crr(crr, self.route_tx.clone())
            }
            _ => Route::Streams(self.route_tx.clone()),
        };
        if let Ok(mut r) = self.shared.routes.lock() {
            r.insert(token, (self.peer_ip, route));
        }
    }

    /// Every stream attached: the test starts on this side.
    fn start_streams(&mut self) {
        // Every stream attached: the name goes now.
        self.unix = None;
        let spec = self.session.spec().cloned().unwrap_or_default();
        for p in std::mem::take(&mut self.udp_pending) {
            if let Err(e) = p.sock.set_write_timeout(Some(POLL)) {
                self.session
                    .stream_failed(format!("stream {}: {e}", p.plan.id));
                return;
            }
            self.attached
                .push(test_type::server_udp_stream(&p.plan, p.sock));
        }
        self.start_unix_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let attached = std::mem::take(&mut self.attached);
        let side = ServerSide {
            engine: self.engine(),
            wire: test_type::Wire::Native,
            cpus: &self.shared.cpus,
            cpu_scope: test_type::cpu_scope(self.shared.per_thread_cpu),
            crr: self.crr.as_ref(),
            flow_threads: self.shared.flow_threads,
        };
        let entry = test_type::of(&spec);
        self.idle = IdleWatch::new(&spec, self.shared.guard.cfg.idle, Instant::now());
        self.rate_watch = RateWatch::new(&spec, &self.shared.limits);
        match (entry.start_server)(&side, &spec, attached) {
            Ok(run) => {
                if let Some(note) =
                    linerate_engine::rr::loops::server_flows_note(side.engine, &spec)
                {
                    self.shared
                        .guard
                        .log
                        .log(format_args!("{}: {note}", self.peer_ip));
                }
                self.run = Some(run)
            }
            Err(e) => self.session.stream_failed(format!(
                "server cannot start the {} test: {}",
                entry.rules.name,
                e.chain()
            )),
        }
    }

    /// The test ends before its limit; the report says who stopped it.
    fn stop_streams(&mut self) {
        if let Some(run) = &self.run {
            run.stop();
        }
        let who = match self.session.early_stop() {
            Some(EarlyStop::ByServer) => "the server stopped the test before its limit (its operator stopped the server)",
            _ => "the client stopped the test before its limit (its user interrupted it, or its output was closed)",
        };
        self.notes
            .push(format!("{who}; the figures cover the time until then"));
    }

    pub(super) fn attach(&mut self, hello: DataHello, sock: TcpStream) {
        let spec: TestSpec = self.session.spec().cloned().unwrap_or_default();
        match self.session.stream_attached(&hello, Instant::now()) {
            Ok(plan) => {
                // A Unix socket has none of the TCP options (negotiation
                // refused them), only the timeouts.
                let setup = if spec.tcp.unix {
                    Ok(())
                } else {
                    socket::apply_accepted(&sock, &spec.tcp)
                }
                .and_then(|()| socket::set_io_timeout(&sock, POLL))
                .map_err(RunError::from)
                .and_then(|()| test_type::pace_sender(&sock, &spec, plan.sender, Side::Server));
                if let Err(e) = setup {
                    self.session
                        .stream_failed(format!("stream {}: {e}", plan.id));
                    return;
                }
                self.attached
                    .push(test_type::server_tcp_stream(&plan, sock));
            }
            Err(why) => self
                .shared
                .guard
                .log
                .log(format_args!("rejected a data connection: {why}")),
        }
    }
}
