//! The client: wires a [`ClientConfig`] to a control session, the data
//! streams and the reporters.
//!
//! The control loop is the only place that talks to the session: it writes
//! what the session queued, carries out its actions (open streams, start,
//! abort), feeds it what the control connection delivered and what the
//! streams finished with, and calls it back at its deadlines.

use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, Context, Result};
use linerate_engine::engines::EngineKind;
use linerate_engine::rr::{self, CrrTarget, RrConns, RrParams};
use linerate_engine::runner::{self, CpuScope, DataSocket, RunParams, SideRun, StreamSetup};
use linerate_engine::stream::POLL;
use linerate_engine::{clock, socket, udp};
use linerate_proto::auth::{ClientAuth, NONCE_LEN};
use linerate_proto::measure::Role;
use linerate_proto::session::client::{ClientAction, ClientSession};
use linerate_proto::session::SessionError;
use linerate_proto::spec::{Limit, Protocol, TestKind, TestSpec};
use linerate_proto::wire::{self, DataHello, Message, RefuseCode, Side, Token};
use linerate_report::build;
use linerate_report::model::TestInfo;
use linerate_report::render::{self, Sink};
use linerate_report::Report;

use crate::cli::{ClientConfig, RrConfig, Target};
use crate::control::ControlConn;
use crate::server;

/// Set by the SIGINT handler; the control loop turns it into an Abort.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// A failed test, with the exit status it maps to.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{0}")]
    Refused(String),
    /// The user pressed Ctrl-C; the server was told and nothing is reported.
    #[error("test aborted: interrupted by the user")]
    Interrupted,
    #[error(transparent)]
    Failed(#[from] anyhow::Error),
}

/// Runs one test and renders it to stdout. Returns the report.
pub fn run(cfg: &ClientConfig) -> Result<Report, ClientError> {
    let stdout = std::io::stdout();
    let sink = render::sink(cfg.format, Box::new(stdout.lock()));
    let mut sink = crate::host::iface_sink::wrap(sink, cfg.iface.as_deref(), cfg.format);
    run_to(cfg, sink.as_mut())
}

/// Runs one test, rendering to `sink`. Returns the report.
pub fn run_to(cfg: &ClientConfig, sink: &mut dyn Sink) -> Result<Report, ClientError> {
    run_with(cfg, clock::boot_id(), sink)
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
    let mut sink = render::sink(cfg.client.format, Box::new(stdout.lock()));
    let report = run_with(&cfg.client, boot_id, sink.as_mut())?;
    export(cfg, &report)?;
    Ok(report)
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
    let mut session =
        ClientSession::new(cfg.spec.clone(), &software(), Instant::now()).with_boot_id(boot_id);
    if let Some(key) = &cfg.auth_key {
        session = session.with_auth(ClientAuth::new(key.clone(), nonce()?));
    }
    let mut test = ClientTest {
        cfg,
        engine: cfg.engine,
        peer,
        embedded: matches!(cfg.target, Target::Embedded),
        ctrl: ControlConn::new(ctrl_sock)?,
        session,
        run: None,
        pending: Vec::new(),
        info: None,
        notes: Vec::new(),
        start_unix_ms: 0,
        token: None,
    };
    let result = test.drive(sink);
    if let Some(run) = &test.run {
        run.abort();
    }
    result
}

/// Fresh random bytes for an authentication nonce.
pub fn nonce() -> Result<[u8; NONCE_LEN]> {
    let mut n = [0u8; NONCE_LEN];
    getrandom::fill(&mut n).map_err(|e| anyhow!("no randomness for the auth nonce: {e}"))?;
    Ok(n)
}

pub fn software() -> String {
    format!("linerate {}", env!("CARGO_PKG_VERSION"))
}

struct ClientTest<'a> {
    cfg: &'a ClientConfig,
    engine: EngineKind,
    peer: std::net::SocketAddr,
    embedded: bool,
    ctrl: ControlConn,
    session: ClientSession,
    run: Option<SideRun>,
    /// Data connections opened, waiting for Start.
    pending: Vec<StreamSetup>,
    info: Option<TestInfo>,
    notes: Vec<String>,
    start_unix_ms: u64,
    /// The test's token (crr greets every transaction's connection with it).
    token: Option<Token>,
}

impl ClientTest<'_> {
    fn drive(&mut self, sink: &mut dyn Sink) -> Result<Report, ClientError> {
        loop {
            while let Some(action) = self.session.poll_action() {
                self.act(action, sink)?;
            }
            self.ctrl
                .send(&self.session.outbox().take())
                .context("writing to the control connection")?;
            if let Some(run) = &mut self.run {
                if let Some(counts) = run.senders_done() {
                    self.session.local_senders_finished(counts);
                }
                while let Some(m) = run.next_interval() {
                    let flows = build::flows(self.session.spec().unwrap_or(&TestSpec::default()));
                    sink.interval(&build::interval_record(Side::Client, &m, &flows))
                        .context("writing output")?;
                }
                if let Some(results) = run.try_finish() {
                    self.session.local_finished(results, Instant::now());
                    continue;
                }
            }
            if self.session.is_finished() {
                break;
            }
            if INTERRUPTED.load(Ordering::Relaxed) {
                self.session.abort("interrupted by the user");
                continue;
            }
            let wait = Duration::from_millis(match (&self.run, self.session.spec()) {
                // Request/response tests have no interval records to pass
                // on: wake rarely, so this thread disturbs the flows less.
                (Some(_), Some(s)) if s.kind != TestKind::Stream => 100,
                (Some(_), _) => 20,
                (None, _) => 5,
            });
            match self.ctrl.recv(wait) {
                Ok(Some(bytes)) => {
                    // Clock probes need the arrival time; read it first.
                    let t = clock::mono_ns();
                    self.session.receive_at(bytes, Instant::now(), t);
                }
                Ok(None) => {}
                Err(_) => self.session.peer_closed(),
            }
            self.session.handle_timeout(Instant::now());
        }
        // Flush a final Abort, if any; the peer may already be gone.
        let _ = self.ctrl.send(&self.session.outbox().take());
        if matches!(self.session.outcome(), Some(Ok(_))) {
            self.ctrl.wait_closed(Duration::from_secs(1));
        }
        self.finish(sink)
    }

    fn act(&mut self, action: ClientAction, sink: &mut dyn Sink) -> Result<(), ClientError> {
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
                let opened = match spec.protocol {
                    Protocol::Tcp => self.open_streams(token, &spec),
                    Protocol::Udp => self.open_udp_streams(token, &spec, &udp_ports),
                };
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
                let start = Instant::now();
                self.start_unix_ms = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64);
                let spec = self.session.spec().cloned().unwrap_or_default();
                if let Some(info) = &mut self.info {
                    info.start_unix_ms = self.start_unix_ms;
                    sink.start(info).context("writing output")?;
                }
                let pending = std::mem::take(&mut self.pending);
                self.run = Some(match spec.kind {
                    TestKind::Stream => runner::start(
                        self.engine,
                        pending,
                        run_params(&spec, &self.cfg.cpus, self.embedded),
                        start,
                    ),
                    TestKind::Rr | TestKind::Crr => self.start_rr(&spec, pending)?,
                });
            }
            ClientAction::SendClockProbe => {
                self.session.clock_probe(clock::mono_ns());
                self.ctrl
                    .send(&self.session.outbox().take())
                    .context("writing to the control connection")?;
            }
            ClientAction::PeerSendDone(done) => {
                if let Some(run) = &self.run {
                    let spec = self.session.spec().cloned().unwrap_or_default();
                    run.peer_send_done(&done.streams, self.ctrl.drain_period(&spec));
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

    /// Starts the request/response flows (rr: on the connections opened
    /// for each phase; crr: a connection per transaction).
    fn start_rr(&mut self, spec: &TestSpec, pending: Vec<StreamSetup>) -> Result<SideRun> {
        let scope = if self.embedded {
            CpuScope::Threads
        } else {
            CpuScope::Process
        };
        let params =
            RrParams::from_spec(spec, &self.cfg.cpus, scope, self.session.clock().copied())
                .context("request/response test without its parameters")?;
        Ok(match spec.kind {
            TestKind::Crr => {
                let target = CrrTarget {
                    addr: self.peer,
                    tcp: spec.tcp.clone(),
                    token: self.token.context("crr test without a token")?,
                    spec: spec.clone(),
                };
                rr::start_client(self.engine, RrConns::default(), Some(target), params)
            }
            _ => {
                let conns = RrConns::sort(spec, pending).map_err(anyhow::Error::from)?;
                rr::start_client(self.engine, conns, None, params)
            }
        })
    }

    fn open_streams(&self, token: Token, spec: &TestSpec) -> Result<Vec<StreamSetup>> {
        let mut streams = Vec::new();
        for p in spec.stream_plan() {
            let sock = socket::connect(self.peer, &spec.tcp, self.cfg.connect_timeout)
                .with_context(|| format!("opening data connection {}", p.id))?;
            let hello = wire::to_bytes(&Message::DataHello(DataHello {
                token,
                stream: p.id,
                sender: p.sender,
            }));
            (&sock)
                .write_all(&hello)
                .with_context(|| format!("greeting data connection {}", p.id))?;
            socket::set_io_timeout(&sock, POLL)?;
            streams.push(StreamSetup {
                id: p.id,
                sender: p.sender,
                role: if p.sender == Side::Client {
                    Role::Sender
                } else {
                    Role::Receiver
                },
                bytes: p.bytes,
                datagrams: None,
                sock: DataSocket::Tcp(sock),
            });
        }
        Ok(streams)
    }

    /// UDP: a socket connected to each of the server's data ports, each
    /// attached with the greeting handshake.
    fn open_udp_streams(
        &mut self,
        token: Token,
        spec: &TestSpec,
        ports: &[u16],
    ) -> Result<Vec<StreamSetup>> {
        let plan = spec.stream_plan();
        if ports.len() != plan.len() {
            anyhow::bail!(
                "the server sent {} UDP ports for {} streams",
                ports.len(),
                plan.len()
            );
        }
        let window = spec.udp.as_ref().and_then(|u| u.window);
        let mut streams = Vec::new();
        for (p, &port) in plan.iter().zip(ports) {
            let to = std::net::SocketAddr::new(self.peer.ip(), port);
            let sock = udp::connect(to).with_context(|| format!("UDP stream {}", p.id))?;
            if let Some(w) = window {
                let note = udp::set_buffers(&sock, w)?;
                if p.id == 1 {
                    self.notes.push(format!("client: {note}"));
                }
            }
            let hello = wire::to_bytes(&Message::DataHello(DataHello {
                token,
                stream: p.id,
                sender: p.sender,
            }));
            udp::greet(&sock, &hello)
                .with_context(|| format!("attaching UDP stream {} to {to}", p.id))?;
            sock.set_write_timeout(Some(POLL))
                .context("UDP write timeout")?;
            streams.push(StreamSetup {
                id: p.id,
                sender: p.sender,
                role: if p.sender == Side::Client {
                    Role::Sender
                } else {
                    Role::Receiver
                },
                bytes: None,
                datagrams: p.datagrams,
                sock: DataSocket::Udp(sock),
            });
        }
        Ok(streams)
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
            client_engine: self.engine.name().into(),
            ..TestInfo::from_spec(spec, Side::Client)
        }
    }

    fn finish(&mut self, sink: &mut dyn Sink) -> Result<Report, ClientError> {
        match self.session.outcome() {
            Some(Ok((local, remote))) => {
                let spec = self.session.spec().cloned().unwrap_or_default();
                let mut info = self
                    .info
                    .clone()
                    .ok_or_else(|| anyhow!("test finished without starting"))?;
                info.server_engine = remote.engine.clone();
                let report = build::build(info, &spec, local, remote, self.notes.clone());
                sink.finish(&report).context("writing output")?;
                if let Some(e) = report
                    .streams
                    .iter()
                    .flat_map(|s| [&s.sender, &s.receiver])
                    .find_map(|e| e.error.as_ref())
                {
                    return Err(anyhow!("a data stream failed: {e}").into());
                }
                if spec.protocol == Protocol::Tcp {
                    check_totals(&spec, &report)?;
                }
                check_rr(&report)?;
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
                Err(ClientError::Interrupted)
            }
            Some(Err(e)) => Err(anyhow!("{e}").into()),
            None => Err(anyhow!("test ended in an unknown state").into()),
        }
    }
}

/// A completed TCP test must have moved every byte it wrote: anything else
/// is a bug or a broken path, and the numbers would be wrong.
fn check_totals(spec: &TestSpec, report: &Report) -> Result<()> {
    for s in &report.streams {
        if s.sender.bytes != s.receiver.bytes {
            return Err(anyhow!(
                "stream {}: sender wrote {} bytes but receiver read {}",
                s.id,
                s.sender.bytes,
                s.receiver.bytes
            ));
        }
    }
    if let Limit::Bytes(total) = spec.limit {
        for f in &report.sums {
            if f.receiver_bytes != total {
                return Err(anyhow!(
                    "{}: {} bytes arrived, {total} requested",
                    f.flow.arrow(),
                    f.receiver_bytes
                ));
            }
        }
    }
    Ok(())
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

/// A completed request/response test: no flow failed, and both sides
/// counted the same transactions and bytes in every phase.
fn check_rr(report: &Report) -> Result<()> {
    let Some(rr) = &report.rr else {
        return Ok(());
    };
    for p in &rr.phases {
        let what = format!(
            "{}-byte requests{}",
            p.request_size,
            if p.loaded { " under load" } else { "" }
        );
        if let Some(e) = p.errors.first() {
            return Err(anyhow!("{what}: {e}"));
        }
        // UDP may lose datagrams (counted in `lost`): the server then
        // answered at least what the client completed, never fewer.
        let udp = report.test.protocol == "udp";
        let counts_agree = if udp {
            p.server_transactions >= p.transactions
                && p.server_transactions <= p.transactions + p.lost
        } else {
            p.transactions == p.server_transactions
        };
        if !counts_agree {
            return Err(anyhow!(
                "{what}: the client completed {} transactions ({} lost) but the server answered {}",
                p.transactions,
                p.lost,
                p.server_transactions
            ));
        }
        if !udp
            && (p.client_sent_bytes != p.server_received_bytes
                || p.server_sent_bytes != p.client_received_bytes)
        {
            return Err(anyhow!(
                "{what}: byte counts differ (requests {} sent, {} received; responses {} sent, {} received)",
                p.client_sent_bytes,
                p.server_received_bytes,
                p.server_sent_bytes,
                p.client_received_bytes
            ));
        }
    }
    Ok(())
}

/// Runner parameters of a side from the agreed spec.
pub fn run_params(spec: &TestSpec, cpus: &[usize], embedded: bool) -> RunParams {
    RunParams {
        udp: spec.udp.as_ref().map(|u| runner::UdpParams {
            millipps: u.millipps(spec.len),
            burst: u.burst,
            verify: u.verify,
            faults: u.faults.clone(),
            priority: u.priority,
        }),
        len: spec.len as usize,
        time: match spec.limit {
            Limit::TimeMs(ms) => Some(Duration::from_millis(ms)),
            Limit::Bytes(_) | Limit::Datagrams(_) => None,
        },
        omit: Duration::from_millis(spec.omit_ms),
        interval: Duration::from_millis(spec.interval_ms),
        cpus: cpus.to_vec(),
        cpu_scope: if embedded {
            CpuScope::Threads
        } else {
            CpuScope::Process
        },
    }
}

impl ClientError {
    pub fn exit_code(&self) -> i32 {
        match self {
            ClientError::Refused(_) => 3,
            // 128 + SIGINT, as shells report a process ended by Ctrl-C.
            ClientError::Interrupted => 130,
            ClientError::Failed(_) => 1,
        }
    }
}
