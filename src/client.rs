//! The client: wires a [`ClientConfig`] to a control session, the data
//! streams and the reporters.
//!
//! The shared control loop ([`crate::control::drive`]) talks to the
//! session; this file carries out the client's actions (open streams,
//! start, abort) with the test's entry in [`crate::test_type`], and turns
//! the outcome into a report.

use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, Context, Result};
use linerate_engine::engines::EngineKind;
use linerate_engine::runner::{DataSocket, SideRun, StreamSetup};
use linerate_engine::{clock, socket};
use linerate_proto::auth::ClientAuth;
use linerate_proto::measure::{IntervalMeasurement, RrFlowMeasurement};
use linerate_proto::session::client::{ClientAction, ClientSession};
use linerate_proto::session::heartbeat::HEARTBEAT_INTERVAL;
use linerate_proto::session::SessionError;
use linerate_proto::spec::TestSpec;
use linerate_proto::wire::{RefuseCode, Side, Token};
use linerate_report::build;
use linerate_report::model::TestInfo;
use linerate_report::render::{self, Sink};
use linerate_report::Report;

use crate::about::software;
use crate::cli::{ClientConfig, RrConfig, Target};
use crate::control::{self, ControlConn, ControlSide};
use crate::server;
use crate::test_type::{self, ClientSide};

pub use crate::outcome::{ClientError, INTERRUPTED};

/// Runs one test and renders it to stdout. Returns the report.
pub fn run(cfg: &ClientConfig) -> Result<Report, ClientError> {
    let stdout = std::io::stdout();
    let sink = render::sink(cfg.format, Box::new(stdout.lock()));
    let sink = crate::host::iface_sink::wrap(sink, cfg.iface.as_deref(), cfg.format);
    let mut sink = Kept {
        inner: sink,
        report: None,
    };
    let result = run_to(cfg, &mut sink);
    // `--plot`: of the test, or of what an interrupted one measured.
    if let (Some(path), Some(report)) = (&cfg.plot, &sink.report) {
        if matches!(
            &result,
            Ok(_) | Err(ClientError::Interrupted { reported: true })
        ) {
            let svg = linerate_report::plot_extra::intervals_svg(report)
                .with_context(|| format!("plotting {}", path.display()))?;
            std::fs::write(path, svg).with_context(|| format!("writing {}", path.display()))?;
        }
    }
    result
}

/// Runs one test, rendering to `sink`. Returns the report.
pub fn run_to(cfg: &ClientConfig, sink: &mut dyn Sink) -> Result<Report, ClientError> {
    if cfg.iperf3 {
        return crate::iperf3::client::run_to(cfg, sink);
    }
    run_with(cfg, clock::boot_id(), sink)
}

/// A busy server (its previous test still closing) is asked again this
/// often, this many times, by [`run_trial`].
const BUSY_RETRY: Duration = Duration::from_millis(200);
const BUSY_TRIES: u32 = 25;

/// Prints nothing: the caller (a sweep, `--repeat`) prints its own rows.
struct Quiet;

impl Sink for Quiet {
    fn start(&mut self, _: &TestInfo) -> std::io::Result<()> {
        Ok(())
    }
    fn interval(&mut self, _: &linerate_report::model::IntervalRecord) -> std::io::Result<()> {
        Ok(())
    }
    fn finish(&mut self, _: &Report) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs one trial of a series (sweep point, `--repeat` run) silently,
/// asking again while the server is still busy with the previous one.
pub fn run_trial(cfg: &ClientConfig) -> Result<Report, ClientError> {
    let mut tries = 0;
    loop {
        match run_to(cfg, &mut Quiet) {
            Err(ClientError::Refused(m)) if m.contains("busy") && tries < BUSY_TRIES => {
                tries += 1;
                std::thread::sleep(BUSY_RETRY);
            }
            r => return r,
        }
        if INTERRUPTED.load(Ordering::Relaxed) {
            return Err(ClientError::Interrupted { reported: false });
        }
    }
}

/// Runs a request/response test, then writes the files it asked for.
pub fn run_rr(cfg: &RrConfig) -> Result<Report, ClientError> {
    // Without a boot id to compare, the offset is estimated by probes even
    // on one host (how the estimator is checked against the known zero).
    let boot_id = if cfg.probe_clock {
        None
    } else {
        clock::boot_id()
    };
    let stdout = std::io::stdout();
    let sink = render::sink(cfg.client.format, Box::new(stdout.lock()));
    let sink = crate::progress::rr_sink(sink, &cfg.client.spec, cfg.client.format);
    let mut sink = Kept {
        inner: sink,
        report: None,
    };
    let run = match cfg.local {
        Some(t) => crate::rr_local::run(cfg, t, &mut sink),
        None => run_with(&cfg.client, boot_id, &mut sink),
    };
    match run {
        Ok(report) => {
            export(cfg, &report)?;
            Ok(report)
        }
        // Interrupted with a report of what was measured: the files asked
        // for hold that too (issue 13).
        Err(e @ ClientError::Interrupted { reported: true }) => {
            if let Some(report) = &sink.report {
                export(cfg, report)?;
            }
            Err(e)
        }
        Err(e) => Err(e),
    }
}

/// Passes everything on to `inner` and keeps the report it was given.
struct Kept<'a> {
    inner: Box<dyn Sink + 'a>,
    report: Option<Report>,
}

impl Sink for Kept<'_> {
    fn start(&mut self, info: &TestInfo) -> std::io::Result<()> {
        self.inner.start(info)
    }
    fn interval(&mut self, rec: &linerate_report::model::IntervalRecord) -> std::io::Result<()> {
        self.inner.interval(rec)
    }
    fn rr_phase(&mut self, rec: &linerate_report::model::RrPhaseRecord) -> std::io::Result<()> {
        self.inner.rr_phase(rec)
    }
    fn finish(&mut self, report: &Report) -> std::io::Result<()> {
        self.report = Some(report.clone());
        self.inner.finish(report)
    }
}

fn run_with(
    cfg: &ClientConfig,
    boot_id: Option<String>,
    sink: &mut dyn Sink,
) -> Result<Report, ClientError> {
    let embedded;
    let (host, port) = match &cfg.target {
        Target::Remote { host, port } => (host.clone(), *port),
        Target::Embedded => {
            embedded = server::spawn_embedded(cfg.engine, cfg.auth_key.clone())
                .context("starting the embedded server")?;
            ("127.0.0.1".to_string(), embedded.port())
        }
    };
    let addrs = socket::resolve(&host, port).map_err(anyhow::Error::from)?;
    let ctrl_sock = socket::connect_any(&addrs, &Default::default(), cfg.connect_timeout)
        .with_context(|| format!("cannot reach a linerate server at {host} port {port}"))?;
    let peer = socket::canonical(ctrl_sock.peer_addr().context("peer address")?);
    let mut ctrl = ControlConn::new(ctrl_sock)?;
    let mut session = ClientSession::new(cfg.spec.clone(), &software(), Instant::now())
        .with_boot_id(boot_id)
        .with_server_engine(cfg.server_engine.clone())
        .with_heartbeat(HEARTBEAT_INTERVAL);
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
    };
    let driven = control::drive(&mut test, &mut ctrl);
    if driven.is_ok() && matches!(test.session.outcome(), Some(Ok(_))) {
        // The server closes after it released the test's slot: a next
        // test started at once is then never told "busy".
        ctrl.wait_closed(Duration::from_secs(1));
    }
    let result = driven
        .map_err(ClientError::from)
        .and_then(|()| test.finish());
    if let Some(run) = &test.run {
        run.abort();
    }
    result
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
        Err(anyhow::Error::from(e).context("writing to the control connection"))
    }

    fn turn(&mut self, _: &ControlConn) -> bool {
        if !INTERRUPTED.load(Ordering::Relaxed)
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
        self.sink.interval(&record).context("writing output")
    }

    fn rr_phase(&mut self, flows: Vec<RrFlowMeasurement>) -> Result<()> {
        let (Some(spec), Some(index)) = (self.session.spec(), flows.first().map(|f| f.phase))
        else {
            return Ok(());
        };
        let clock = self.session.clock().copied();
        let Some(rec) = build::phase_record(spec, index, flows, clock) else {
            return Ok(());
        };
        // After a Ctrl-C the remaining phases end at once, with nothing.
        if self.session.stopped_early() && rec.transactions == 0 && rec.lost == 0 {
            return Ok(());
        }
        self.sink.rr_phase(&rec).context("writing output")
    }

    fn idle_wait(&self) -> Duration {
        Duration::from_millis(5)
    }
}

impl<'a> ClientTest<'a, '_> {
    /// What the client does for each of its session's actions.
    fn carry_out(&mut self, action: ClientAction, ctrl: &mut ControlConn) -> Result<()> {
        match action {
            ClientAction::OpenStreams {
                token,
                spec,
                notes,
                server_software,
                udp_ports,
            } => {
                self.notes
                    .extend(notes.into_iter().map(|n| format!("server: {n}")));
                self.token = Some(token);
                let side = self.side(token);
                let opened =
                    (test_type::of(&spec).attach)(&side, &spec, &udp_ports, &mut self.notes);
                match opened {
                    Ok(streams) => {
                        self.info = Some(self.test_info(&spec, &streams, server_software));
                        self.pending = streams;
                        self.session.streams_opened(Instant::now());
                    }
                    Err(e) => self.session.streams_failed(format!("{e:#}")),
                }
            }
            ClientAction::StartStreams => {
                self.start_unix_ms = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64);
                let spec = self.session.spec().cloned().unwrap_or_default();
                if let Some(info) = &mut self.info {
                    info.start_unix_ms = self.start_unix_ms;
                    self.sink.start(info).context("writing output")?;
                }
                let pending = std::mem::take(&mut self.pending);
                let token = self.token.context("test started without a token")?;
                let side = self.side(token);
                self.run = Some((test_type::of(&spec).start_client)(&side, &spec, pending)?);
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
            peer: self.peer,
            token,
            cpus: &cfg.cpus,
            cpu_scope: test_type::cpu_scope(self.embedded),
            connect_timeout: cfg.connect_timeout,
            clock: self.session.clock().copied(),
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
        TestInfo {
            congestion_used: first.and_then(socket::congestion),
            server: self.peer.to_string(),
            embedded_server: self.embedded,
            client_software: software(),
            server_software,
            client_engine: self.engine.to_string(),
            server_engine_requested: self.cfg.server_engine.clone(),
            client_ld_preload: crate::about::ld_preload(),
            ..TestInfo::from_spec(spec, Side::Client)
        }
    }

    fn finish(&mut self) -> Result<Report, ClientError> {
        match self.session.outcome() {
            Some(Ok((local, remote))) => {
                let spec = self.session.spec().cloned().unwrap_or_default();
                let mut info = self
                    .info
                    .clone()
                    .ok_or_else(|| anyhow!("test finished without starting"))?;
                info.server_engine = remote.engine.clone();
                info.server_ld_preload = remote.ld_preload.clone();
                let mut notes = self.notes.clone();
                let interrupted = self.session.stopped_early();
                if interrupted {
                    notes.push(
                        "interrupted by the user before the test's limit: the figures cover the time until then"
                            .into(),
                    );
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
                self.sink.finish(&report).context("writing output")?;
                if let Some(e) = report
                    .streams
                    .iter()
                    .flat_map(|s| [&s.sender, &s.receiver])
                    .find_map(|e| e.error.as_ref())
                {
                    return Err(anyhow!("a data stream failed: {e}").into());
                }
                (entry.check)(&spec, &report)?;
                if interrupted {
                    return Err(ClientError::Interrupted { reported: true });
                }
                Ok(report)
            }
            Some(Err(SessionError::Refused { code, message })) => {
                let what = match code {
                    RefuseCode::Busy => "server is busy",
                    RefuseCode::Invalid => "server refused the parameters",
                    RefuseCode::Version => "protocol version mismatch",
                    RefuseCode::Internal => "server error",
                    RefuseCode::Auth => "authentication failed",
                };
                Err(ClientError::Refused(format!("{what}: {message}")))
            }
            Some(Err(SessionError::Aborted(_))) if INTERRUPTED.load(Ordering::Relaxed) => {
                Err(ClientError::Interrupted { reported: false })
            }
            Some(Err(e)) => Err(anyhow!("{e}").into()),
            None => Err(anyhow!("test ended in an unknown state").into()),
        }
    }
}

/// Writes the files a request/response test asked for (`--histogram`,
/// `--plot`) from the report.
fn export(cfg: &RrConfig, report: &Report) -> Result<(), ClientError> {
    if let Some(path) = &cfg.histogram {
        let mut f = std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
        );
        render::histogram_csv(report, &mut f)
            .and_then(|()| f.flush())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &cfg.plot {
        let svg = linerate_report::plot_rr::svg(report)
            .with_context(|| format!("plotting {}", path.display()))?;
        std::fs::write(path, svg).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

impl ClientError {
    pub fn exit_code(&self) -> i32 {
        match self {
            ClientError::Refused(_) => 3,
            // 128 + SIGINT, as shells report a process ended by Ctrl-C.
            ClientError::Interrupted { .. } => 130,
            ClientError::Failed(_) => 1,
        }
    }
}
