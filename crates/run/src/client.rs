//! The client: wires a [`ClientConfig`] to a control session, the data
//! streams and the reporters.
//!
//! The shared control loop ([`crate::control::drive`]) talks to the
//! session; this file carries out the client's actions (open streams,
//! start, abort) with the test's entry in [`crate::test_type`], and turns
//! the outcome into a report.

use std::collections::VecDeque;
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::error::{Context as _, Result, RunError};
use linerate_engine::engines::EngineKind;
use linerate_engine::runner::{DataSocket, SideRun, StreamSetup};
use linerate_engine::{clock, event_loop, socket};
use linerate_proto::auth::ClientAuth;
use linerate_proto::measure::{IntervalMeasurement, RrFlowMeasurement};
use linerate_proto::session::client::{ClientAction, ClientSession};
use linerate_proto::session::heartbeat::HEARTBEAT_INTERVAL;
use linerate_proto::session::{EarlyStop, SessionError};
use linerate_proto::spec::TestSpec;
use linerate_proto::wire::{RefuseCode, Side, Token};
use linerate_report::build;
use linerate_report::model::{RrPhaseRecord, TestInfo};
use linerate_report::render::Sink;
use linerate_report::Report;

use crate::about::software;
use crate::config::{Beside, ClientConfig, Target};
use crate::control::{self, ControlConn, ControlSide};
use crate::server;
use crate::test_type::{self, ClientSide};

use crate::outcome::INTERRUPTED;

/// The native client: one test against a linerate server (embedded or
/// remote), rendered to `sink`. `boot_id`: this host's, when the server's
/// clock offset may be taken as zero on the same host.
pub fn run_native(
    cfg: &ClientConfig,
    boot_id: Option<String>,
    sink: &mut dyn Sink,
) -> Result<Report, RunError> {
    let embedded;
    let (host, port) = match &cfg.target {
        Target::Remote { host, port } => (host.clone(), *port),
        Target::Embedded => {
            embedded = server::spawn_embedded(cfg.engine, cfg.auth_key.clone())
                .context("starting the embedded server")?;
            ("127.0.0.1".to_string(), embedded.port())
        }
    };
    let addrs = socket::resolve(&host, port).map_err(RunError::from)?;
    let ctrl_sock =
        socket::connect_any(&addrs, &Default::default(), cfg.connect_timeout).map_err(|e| {
            // Refused: the host is there and nothing listens on the port.
            let hint = match &e {
                linerate_engine::EngineError::Io { err, .. }
                    if err.kind() == std::io::ErrorKind::ConnectionRefused =>
                {
                    format!(" (nothing listens there: start `linerate server -p {port}` on {host})")
                }
                _ => String::new(),
            };
            RunError::Context {
                doing: format!("cannot reach a linerate server at {host} port {port}{hint}"),
                source: Box::new(e.into()),
            }
        })?;
    let peer = socket::canonical(ctrl_sock.peer_addr().context("peer address")?);
    let mut ctrl = ControlConn::new(ctrl_sock)?;
    let mut session = ClientSession::new(cfg.spec.clone(), &software(), Instant::now())
        .with_boot_id(boot_id)
        .with_server_engine(cfg.server_engine.clone())
        .with_heartbeat(HEARTBEAT_INTERVAL)
        .with_unix_uid(socket::own_uid())
        .with_beside(match cfg.beside {
            Beside::Probe(t) => Some(t),
            Beside::Alone | Beside::Load(_) => None,
        });
    if let Some(key) = &cfg.auth_key {
        session = session.with_auth(ClientAuth::new(key.clone(), crate::control::nonce()?));
    }
    let mut test = ClientTest {
        cfg,
        engine: cfg.engine,
        peer,
        embedded: matches!(cfg.target, Target::Embedded),
        session,
        sink,
        run: None,
        pending: Vec::new(),
        info: None,
        notes: cfg.engine_note.iter().cloned().collect(),
        start_unix_ms: 0,
        token: None,
        last_interval: None,
        output_closed: false,
        phases: PhaseRecords::default(),
    };
    let driven = control::drive(&mut test, &mut ctrl);
    // The server closes after it released the test's slot: a next test
    // started at once is then never told "busy". After a failure, the
    // Abort just written still reaches the server (`ControlConn::close`).
    ctrl.close(Duration::from_secs(1));
    let result = driven.and_then(|()| test.finish());
    if let Some(run) = &test.run {
        run.abort();
    }
    result
}

/// Writes to a test's output with `write`, native or iperf3; once the
/// reader has closed it (`closed`), writes nothing more and lets the test's
/// next turn stop it.
pub fn write_unless_closed(
    closed: &mut bool,
    write: impl FnOnce() -> std::io::Result<()>,
) -> Result<()> {
    if *closed {
        return Ok(());
    }
    match write() {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            *closed = true;
            Ok(())
        }
        r => r.context("writing output"),
    }
}

/// The end of a test whose output was closed: a quiet exit with status 0
/// (main: a closed stdout).
pub fn closed_output() -> RunError {
    let closed = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
    RunError::Context {
        doing: "writing output".into(),
        source: Box::new(closed.into()),
    }
}

struct ClientTest<'a, 's> {
    cfg: &'a ClientConfig,
    engine: EngineKind,
    peer: std::net::SocketAddr,
    embedded: bool,
    session: ClientSession,
    sink: &'s mut dyn Sink,
    run: Option<SideRun>,
    /// Data connections opened, waiting for Start.
    pending: Vec<StreamSetup>,
    info: Option<TestInfo>,
    notes: Vec<String>,
    start_unix_ms: u64,
    /// The test's token (crr greets every transaction's connection with it).
    token: Option<Token>,
    /// The interval before the one being relayed (its TCP_INFO totals).
    last_interval: Option<IntervalMeasurement>,
    /// Standard output was closed under us (`linerate … | head -1`): the
    /// reader has what it wanted, so the test stops as for Ctrl-C and ends
    /// quietly (issue 28).
    output_closed: bool,
    /// rr phase records being built beside the control loop.
    phases: PhaseRecords,
}

/// rr phase records built beside the control loop, a thread each. A
/// record sums every flow's histograms: with thousands of flows on a
/// loaded host that took seconds (5,000 flows, two sizes), in which the
/// loop sent no heartbeat and the server gave up on a live client
/// (issue 28). The loop writes each record once it is built, in phase
/// order, and all of them before the final report.
/// A phase whose thread could not be had gets no line (the final report
/// still has it).
#[derive(Default)]
struct PhaseRecords(VecDeque<Option<JoinHandle<Option<RrPhaseRecord>>>>);

impl PhaseRecords {
    fn build(&mut self, job: impl FnOnce() -> Option<RrPhaseRecord> + Send + 'static) {
        let spawned = std::thread::Builder::new()
            .name("linerate-phase".into())
            .spawn(job);
        self.0.push_back(spawned.ok());
    }

    /// The next record in phase order once built (`None` inside when the
    /// phase has none); with `wait`, waits for it. `None`: none left, or
    /// the next is not built yet.
    fn next(&mut self, wait: bool) -> Option<Option<RrPhaseRecord>> {
        let building = self.0.front()?.as_ref();
        if !wait && building.is_some_and(|h| !h.is_finished()) {
            return None;
        }
        // A builder that panicked leaves its phase without a record.
        Some(self.0.pop_front()?.and_then(|h| h.join().ok().flatten()))
    }
}

impl Drop for PhaseRecords {
    /// Leaves no thread behind: a failed test's builders finish first.
    fn drop(&mut self) {
        while self.next(true).is_some() {}
    }
}

impl ControlSide for ClientTest<'_, '_> {
    type Session = ClientSession;

    fn session(&mut self) -> &mut ClientSession {
        &mut self.session
    }

    fn act(&mut self, action: ClientAction, ctrl: &mut ControlConn) -> Result<()> {
        self.carry_out(action, ctrl)
    }

    fn send_failed(&mut self, e: std::io::Error) -> Result<()> {
        // The connection ended: the session says how (not an I/O error
        // here, whose broken pipe main would take for a closed stdout and
        // exit 0 in silence, issue 28).
        self.session.connection_ended(control::ended(&e));
        Ok(())
    }

    fn turn(&mut self, _: &mut ControlConn) -> bool {
        // Output written on another thread tells of a closed stdout after
        // the fact; a test with nothing more to print until its end (rr)
        // learns of it here.
        self.output_closed |= self.sink.closed();
        if !(INTERRUPTED.load(Ordering::Relaxed) || self.output_closed)
            || self.session.is_finished()
            || self.session.stopped_early()
        {
            return false;
        }
        // A running test stops early and still reports what it measured
        // (issue 13): stream tests stop their senders, request/response
        // tests end the phase in progress and skip the rest. A test not yet
        // running is aborted.
        if self.run.is_some() && self.session.stop_early() {
            if let Some(run) = &self.run {
                run.stop();
            }
        } else if self.output_closed {
            // Past its data phase (the printer thread tells of a closed
            // output with the next record, an interval later), the test
            // ends as it would have, quietly: its results are exchanged,
            // so the server records it, and nothing more is printed.
            if self.run.is_some() {
                return false;
            }
            self.session.abort("the client's output was closed");
        } else {
            self.session.abort("interrupted by the user");
        }
        true
    }

    fn run(&mut self) -> Option<&mut SideRun> {
        self.run.as_mut()
    }

    fn interval(&mut self, m: IntervalMeasurement) -> Result<()> {
        let flows = build::flows(self.session.spec().unwrap_or(&TestSpec::default()));
        let record = build::interval_record(Side::Client, &m, self.last_interval.as_ref(), &flows);
        self.last_interval = Some(m);
        self.write_out(|sink| sink.interval(&record))
    }

    fn rr_phase(&mut self, flows: Vec<RrFlowMeasurement>) -> Result<()> {
        let Some(spec) = self.session.spec().cloned() else {
            return Ok(());
        };
        let clock = self.session.clock().copied();
        let stopped_early = self.session.stopped_early();
        self.phases.build(move || {
            let index = flows.first().map(|f| f.phase)?;
            let rec = build::phase_record(&spec, index, flows, clock)?;
            // After a Ctrl-C the remaining phases end at once, with nothing.
            (!(stopped_early && rec.transactions == 0 && rec.lost == 0)).then_some(rec)
        });
        Ok(())
    }

    fn output_ready(&mut self) -> Result<()> {
        self.write_phases(false)
    }

    fn idle_wait(&self) -> Duration {
        Duration::from_millis(5)
    }
}

impl<'a> ClientTest<'a, '_> {
    /// Writes to the output with `write`; once the reader has closed it,
    /// writes nothing more and lets the next turn stop the test.
    fn write_out(
        &mut self,
        write: impl FnOnce(&mut dyn Sink) -> std::io::Result<()>,
    ) -> Result<()> {
        let sink = &mut *self.sink;
        write_unless_closed(&mut self.output_closed, || write(sink))
    }

    /// What the client does for each of its session's actions.
    fn carry_out(&mut self, action: ClientAction, ctrl: &mut ControlConn) -> Result<()> {
        match action {
            ClientAction::OpenStreams {
                token,
                spec,
                notes,
                server_software,
                udp_ports,
                unix_name,
            } => {
                self.notes
                    .extend(notes.into_iter().map(|n| format!("server: {n}")));
                self.token = Some(token);
                let side = ClientSide {
                    unix_name,
                    ..self.side(token)
                };
                let opened =
                    (test_type::of(&spec).attach)(&side, &spec, &udp_ports, &mut self.notes);
                match opened {
                    Ok(streams) => {
                        self.info = Some(self.test_info(&spec, &streams, server_software));
                        self.pending = streams;
                        self.session.streams_opened(Instant::now());
                    }
                    Err(e) => self.session.streams_failed(format!("{}", e.chain())),
                }
            }
            ClientAction::StartStreams => {
                self.start_unix_ms = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64);
                let spec = self.session.spec().cloned().unwrap_or_default();
                if let Some(info) = &mut self.info {
                    info.start_unix_ms = self.start_unix_ms;
                    let info = info.clone();
                    self.write_out(|sink| sink.start(&info))?;
                }
                let pending = std::mem::take(&mut self.pending);
                let token = self
                    .token
                    .ok_or_else(|| RunError::Protocol("test started without a token".into()))?;
                let side = self.side(token);
                self.run = Some((test_type::of(&spec).start_client)(&side, &spec, pending)?);
                if let Beside::Load(started) = &self.cfg.beside {
                    let _ = started.set(token);
                }
            }
            ClientAction::SendClockProbe => {
                self.session.clock_probe(clock::mono_ns());
                ctrl.send(&self.session.outbox().take())
                    .context("writing to the control connection")?;
            }
            ClientAction::PeerSendDone(done) => {
                if let Some(run) = &self.run {
                    let spec = self.session.spec().cloned().unwrap_or_default();
                    run.peer_send_done(&done.streams, ctrl.drain_period(&spec));
                }
            }
            // The server is shutting down: as for our own Ctrl-C.
            ClientAction::StopStreams => {
                if let Some(run) = &self.run {
                    run.stop();
                }
            }
            ClientAction::AbortStreams => {
                self.pending.clear();
                if let Some(run) = &self.run {
                    run.abort();
                }
            }
        }
        Ok(())
    }

    /// This side as the test's entry sees it.
    fn side(&self, token: Token) -> ClientSide<'a> {
        let cfg: &'a ClientConfig = self.cfg;
        ClientSide {
            engine: self.engine,
            wire: test_type::Wire::Native,
            peer: self.peer,
            token: Some(token),
            cpus: &cfg.cpus,
            cpu_scope: test_type::cpu_scope(self.embedded),
            connect_timeout: cfg.connect_timeout,
            clock: self.session.clock().copied(),
            unix_name: None,
        }
    }

    fn test_info(
        &mut self,
        spec: &TestSpec,
        streams: &[StreamSetup],
        server_software: String,
    ) -> TestInfo {
        let first: Option<&TcpStream> = streams.first().and_then(|s| match &s.sock {
            DataSocket::Tcp(t) => Some(t),
            DataSocket::Udp(_) => None,
        });
        if spec.tcp.window.is_some() {
            if let Some((snd, rcv)) = first.map(socket::buffer_sizes) {
                self.notes.push(format!(
                    "client socket buffers: SO_SNDBUF {} bytes, SO_RCVBUF {} bytes (the kernel doubles the request and caps it at wmem_max/rmem_max unless root)",
                    snd.unwrap_or(0),
                    rcv.unwrap_or(0)
                ));
            }
        }
        // What the event loops run (the report's engine).
        let loops = spec
            .flows
            .map(|_| event_loop::engine_for(self.engine, spec.protocol));
        TestInfo {
            congestion_used: first.and_then(socket::congestion),
            server: self.peer.to_string(),
            embedded_server: self.embedded,
            client_software: software(),
            server_software,
            client_engine: loops.unwrap_or(self.engine).to_string(),
            // What the loops will wait with; their results say what they
            // did ([`Self::finish`]).
            client_loop: loops.map(event_loop::loop_kind),
            server_engine_requested: self.cfg.server_engine.clone(),
            client_ld_preload: crate::about::ld_preload(),
            ..TestInfo::from_spec(spec, Side::Client)
        }
    }

    /// Writes the rr phase records built so far, in phase order; with
    /// `all`, waits for the rest too.
    fn write_phases(&mut self, all: bool) -> Result<()> {
        while let Some(rec) = self.phases.next(all) {
            if let Some(rec) = rec {
                self.write_out(|sink| sink.rr_phase(&rec))?;
            }
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<Report, RunError> {
        self.write_phases(true)?;
        match self.session.outcome() {
            Some(Ok((local, remote))) => {
                let spec = self.session.spec().cloned().unwrap_or_default();
                let mut info = self.info.clone().ok_or_else(|| {
                    RunError::Protocol("test finished without starting".to_string())
                })?;
                info.server_engine = remote.engine.clone();
                info.client_loop = local.event_loop.or(info.client_loop);
                info.server_loop = remote.event_loop;
                info.server_ld_preload = remote.ld_preload.clone();
                let mut notes = self.notes.clone();
                let stop = self.session.early_stop();
                let interrupted = stop.is_some();
                if let Some(stop) = stop {
                    let who = match stop {
                        EarlyStop::ByServer => {
                            "the server stopped the test before its limit (it is shutting down)"
                        }
                        EarlyStop::ByClient => "interrupted by the user before the test's limit",
                    };
                    notes.push(format!("{who}: the figures cover the time until then"));
                }
                let entry = test_type::of(&spec);
                let mut report = Report {
                    interrupted,
                    ..(entry.build)(info, &spec, local, remote, notes)
                };
                if interrupted {
                    if let Some(rr) = &mut report.rr {
                        report.notes.push(build::keep_phases_run(rr));
                    }
                }
                self.write_out(|sink| sink.finish(&report))?;
                if self.output_closed {
                    return Err(closed_output());
                }
                if let Some(e) = report
                    .streams
                    .iter()
                    .flat_map(|s| [&s.sender, &s.receiver])
                    .find_map(|e| e.error.as_ref())
                {
                    return Err(RunError::Protocol(format!("a data stream failed: {e}")));
                }
                (entry.check)(&spec, &report)?;
                match stop {
                    Some(EarlyStop::ByServer) => Err(RunError::ServerStopped),
                    Some(EarlyStop::ByClient) => Err(RunError::Interrupted { reported: true }),
                    None => Ok(report),
                }
            }
            Some(Err(SessionError::Refused { code, message })) => {
                let what = match code {
                    RefuseCode::Busy => "server is busy",
                    RefuseCode::Invalid => "server refused the parameters",
                    RefuseCode::Version => "protocol version mismatch",
                    RefuseCode::Internal => "server error",
                    RefuseCode::Auth => "authentication failed",
                };
                Err(RunError::Refused(format!("{what}: {message}")))
            }
            Some(Err(SessionError::Aborted(_))) if INTERRUPTED.load(Ordering::Relaxed) => {
                Err(RunError::Interrupted { reported: false })
            }
            Some(Err(e)) => Err(RunError::Protocol(format!("{e}"))),
            None => Err(RunError::Protocol(
                "test ended in an unknown state".to_string(),
            )),
        }
    }
}
