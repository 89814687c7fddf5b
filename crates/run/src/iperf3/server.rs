//! Serving real iperf3 clients on linerate's port.
//!
//! A connection whose first byte is in iperf3's cookie alphabet comes here
//! ([`handle`]). Its 37-byte cookie says what it is: the data connection of
//! an iperf3 test waiting for its streams (routed to that test's thread), or
//! the control connection of a new test: its [`Iperf3ServerSession`] is
//! run on this thread by the one control driver (`control::drive`), as a
//! native test's session is, with this file's `Test` as its side. The streams run on the ordinary
//! runner on the test's engine (the server's `--engine`, else `auto`'s
//! choice for the test, noted in the report; UDP in iperf3's datagram
//! format, [`linerate_iperf3::streams`]); the end of the test is the
//! client's (TEST_END), so senders are stopped, TCP receivers see their
//! read side shut down and UDP receivers read what is queued. Each test is recorded in linerate's report model
//! and printed like a native one, with what was sent to the client beside
//! linerate's exact accounting.

use std::io::Write;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use linerate_engine::engines::auto::{self, Configured};
use linerate_engine::engines::EngineKind;
use linerate_engine::read_ahead::ReadAhead;
use linerate_engine::runner::{DataSocket, SideRun, StreamSetup};
use linerate_engine::{socket, udp};
use linerate_iperf3::json::{Params, Protocol as IProtocol, Results};
use linerate_iperf3::server::{
    Iperf3Limits, Iperf3ServerSession, ServerAction, ServerOutcome, StreamSlot,
};
use linerate_iperf3::streams::{udp_accept, udp_listener, UdpAccepted};
use linerate_iperf3::{code, Cookie, Role, COOKIE_LEN};
use linerate_proto::limits::{RateBudget, ServerLimits};
use linerate_proto::measure::{self, IntervalMeasurement, SideResults};
use linerate_proto::spec::TestSpec;
use linerate_proto::wire::Side;
use linerate_report::model::TestInfo;
use linerate_report::render::{self, Format};

use crate::about::software;
use crate::control::{self, read_exact_by, ControlConn, ControlSide};
use crate::error::Result;
use crate::guard::{self, Guard};
use crate::iperf3::convert::{self as conv, StreamInfo};
use crate::metrics::{JsonLines, Metrics};
use crate::printer::ServerOut;
use crate::test_type::{self, ServerSide, Wire};
use crate::watch::{IdleWatch, RateWatch};

use super::hub::DataConn;
pub use super::hub::Iperf3Hub;

/// How long a stopping server waits for an iperf3 client to read
/// SERVER_TERMINATE and close, within the server's shutdown grace.
const TERMINATE_WAIT: Duration = Duration::from_secs(1);

/// What an iperf3 test needs from the server.
#[derive(Debug)]
pub struct Host<'a> {
    pub limits: &'a ServerLimits,
    /// The server's `--engine`: one engine for every test, or `auto`'s
    /// choice for each test's workload (an iperf3 client cannot ask for an
    /// engine), noted in the report.
    pub engine: Configured,
    pub format: Format,
    pub quiet: bool,
    /// The server's stdout, written off the tests' threads (none when
    /// quiet).
    pub out: Option<&'a ServerOut>,
    pub cpus: &'a [usize],
    pub per_thread_cpu: bool,
    pub test_ended: &'a AtomicBool,
    pub hub: &'a Iperf3Hub,
    /// Connection limits, the server's one admission ([`guard::admit`])
    /// and the throttled log.
    pub guard: &'a Guard,
    pub metrics: &'a Metrics,
    /// `--json-lines FILE`: a record per completed test.
    pub json_lines: Option<&'a JsonLines>,
    /// The server requires `--auth-key`, which iperf3 clients cannot
    /// prove: their tests are refused.
    pub auth_required: bool,
    /// `--max-total-rate`, shared with native tests.
    pub rate_budget: Option<&'a Arc<RateBudget>>,
    /// The server's shutdown signal ([`crate::server::STOPPING`]), where
    /// this server stops on it: a running test's client is then told
    /// SERVER_TERMINATE, as an interrupted iperf3 server tells it.
    pub stop_signal: Option<&'a AtomicBool>,
}

impl Host<'_> {
    fn stopping(&self) -> bool {
        self.stop_signal.is_some_and(|s| s.load(Ordering::Relaxed))
    }
}

/// Serves a connection that opened with an iperf3 cookie character;
/// `seq` is its place in the server's accept order, `started` when it was
/// accepted: its whole cookie must arrive within the handshake timeout
/// from then. `first_bytes` (its address's place among the connections
/// not yet saying what they are) goes back once the cookie is read.
pub fn handle(
    mut conn: ReadAhead,
    peer: SocketAddr,
    seq: u64,
    started: Instant,
    first_bytes: guard::SourceSlot,
    host: &Host<'_>,
) {
    let mut buf = [0u8; COOKIE_LEN];
    let read = read_exact_by(&mut conn, &mut buf, started + host.limits.handshake());
    // The cookie says what the connection is: its address's place among
    // the connections not yet saying so goes back.
    drop(first_bytes);
    let cookie = match read {
        Ok(()) => Cookie(buf),
        Err(e) => {
            host.guard.log.log(format_args!(
                "{peer}: iperf3 client sent no cookie: {}",
                e.chain()
            ));
            return;
        }
    };
    let route = host
        .hub
        .routes
        .lock()
        .ok()
        .and_then(|r| r.get(&cookie.0).cloned());
    // No reflection: a test's data connections come from the address that
    // opened its control connection, or not at all.
    let owner = route.as_ref().map(|(owner, _)| *owner);
    if let Some(Err(why)) = owner.map(|o| guard::data_from_owner(o, peer, "iperf3 data connection"))
    {
        host.guard.log.log(format_args!("{why}"));
        return;
    }
    // What the crr pool read past the cookie (an iperf3 client waits for
    // the server after it, so usually nothing).
    let (sock, rest) = conn.into_parts();
    if let Some((_, tx)) = route {
        if !rest.is_empty() {
            // Its data before the test started: refused, not dropped
            // uncounted.
            host.guard.log.log(format_args!(
                "{peer}: iperf3 data connection sent {} bytes before its test started, closing",
                rest.len()
            ));
            return;
        }
        // A data connection of a test setting up; if that test has just
        // gone, dropping the connection closes it.
        let _ = tx.send((seq, sock));
        return;
    }
    run_control(sock, peer, cookie, &rest, started, host);
}

/// Releases the cookie route, the UDP port and the test's admission.
struct Setup<'a> {
    host: &'a Host<'a>,
    cookie: [u8; COOKIE_LEN],
    udp: bool,
    admitted: Option<guard::Admitted<'a>>,
}

impl Setup<'_> {
    fn release_setup(&mut self) {
        if let Ok(mut r) = self.host.hub.routes.lock() {
            r.remove(&self.cookie);
        }
        if std::mem::take(&mut self.udp) {
            self.host.hub.udp_busy.store(false, Ordering::Release);
        }
    }
}

impl Drop for Setup<'_> {
    fn drop(&mut self) {
        // The admission goes with the fields, after the setup.
        self.release_setup();
    }
}

fn limits(host: &Host<'_>) -> Iperf3Limits {
    let l = host.limits;
    Iperf3Limits {
        max_time: Duration::from_millis(l.max_time_ms),
        max_omit: Duration::from_millis(l.max_omit_ms),
        max_streams: u32::from(l.max_streams),
        max_rate_bps: l.max_rate_bps,
        server: l.clone(),
        auth_required: host.auth_required,
    }
}

/// Serves an iperf3 test's control connection, accepted at `started`
/// (its setup deadline counts from then, as a native session's does).
/// `rest`: what the client sent after its cookie, already read.
fn run_control(
    sock: TcpStream,
    peer: SocketAddr,
    cookie: Cookie,
    rest: &[u8],
    started: Instant,
    host: &Host<'_>,
) {
    if host.auth_required {
        host.metrics.rejected("auth");
    }
    let local_addr = sock.local_addr().map(socket::canonical);
    let mut ctrl = match ControlConn::new(sock) {
        Ok(c) => c,
        Err(e) => {
            host.guard.log.log(format_args!("{peer}: {}", e.chain()));
            return;
        }
    };
    let now = Instant::now();
    let mut session =
        Iperf3ServerSession::new(limits(host), started).with_rate_budget(host.rate_budget.cloned());
    let slot = Setup {
        host,
        cookie: cookie.0,
        udp: false,
        admitted: None,
    };
    session.receive(&cookie.0, now);
    if !rest.is_empty() {
        session.receive(rest, now);
    }
    let (route_tx, route_rx) = mpsc::channel();
    let mut test = Test {
        host,
        peer,
        session,
        slot,
        route_tx,
        route_rx,
        arrived: Vec::new(),
        local_addr: local_addr.ok(),
        udp_listener: None,
        setups: Vec::new(),
        streams: Vec::new(),
        tcp_receivers: Vec::new(),
        congestion: None,
        run: None,
        start_unix_ms: 0,
        started: None,
        stopped: None,
        report: None,
        recorded: None,
        rate_watch: None,
        idle: None,
        engine: None,
        notes: Vec::new(),
        cpus: Vec::new(),
    };
    // The server's side never fails the loop: errors end the session.
    let _ = control::drive(&mut test, &mut ctrl);
    if let Some(run) = &test.run {
        run.abort();
    }
    test.finish();
    // The test's slot goes first: lingering delays no next test.
    drop(test);
    ctrl.close(control::CLOSE_LINGER);
}

struct Test<'a> {
    host: &'a Host<'a>,
    peer: SocketAddr,
    session: Iperf3ServerSession,
    slot: Setup<'a>,
    route_tx: Sender<DataConn>,
    route_rx: Receiver<DataConn>,
    /// TCP data connections arrived, until all have: iperf3 gives streams
    /// their roles in the order the client opened them, which is the
    /// accept order, not the order their threads routed them here.
    arrived: Vec<DataConn>,
    local_addr: Option<SocketAddr>,
    /// UDP: the socket the next stream's connect datagram arrives on.
    udp_listener: Option<UdpSocket>,
    setups: Vec<StreamSetup>,
    streams: Vec<StreamInfo>,
    /// Duplicates of receiving TCP sockets, to end them at TEST_END.
    tcp_receivers: Vec<TcpStream>,
    congestion: Option<String>,
    run: Option<SideRun>,
    start_unix_ms: u64,
    /// When the streams started and when TEST_END stopped them.
    started: Option<Instant>,
    stopped: Option<Instant>,
    report: Option<linerate_report::model::Report>,
    /// The test as linerate's spec and this side's results, for
    /// `--metrics` once the test completes.
    recorded: Option<(TestSpec, SideResults)>,
    /// `--max-rate`/`--max-total-rate`: the client's streams against the
    /// `-b` it asked for, as for a linerate client.
    rate_watch: Option<RateWatch>,
    /// `--idle-timeout`: ends a test on which nothing moves, as for a
    /// linerate client.
    idle: Option<IdleWatch>,
    /// The engine this test runs (chosen once, see [`Self::engine`]).
    engine: Option<EngineKind>,
    /// What this server chose for the client (engine, buffers), for the
    /// report.
    notes: Vec<String>,
    /// The CPUs this test's threads run on ([`test_cpus`]).
    cpus: Vec<usize>,
}

/// The iperf3 server's side as the one control driver runs it: the same
/// loop, waits and deadlines as a linerate client's test.
impl ControlSide for Test<'_> {
    type Session = Iperf3ServerSession;

    fn session(&mut self) -> &mut Iperf3ServerSession {
        &mut self.session
    }

    fn act(&mut self, action: ServerAction, _: &mut ControlConn) -> Result<()> {
        self.carry_out(action);
        Ok(())
    }

    fn send_failed(&mut self, _: std::io::Error) -> Result<()> {
        self.session.peer_closed();
        Ok(())
    }

    fn turn(&mut self, ctrl: &mut ControlConn) -> bool {
        if self.session.is_finished() {
            return false;
        }
        if self.host.stopping() {
            self.terminate(ctrl);
            return true;
        }
        self.poll_streams();
        self.idle_expired()
    }

    fn run(&mut self) -> Option<&mut SideRun> {
        self.run.as_mut()
    }

    /// `--max-rate`/`--max-total-rate`: ends the test when the client's
    /// streams deliver more than the rate it asked for, as for a linerate
    /// client.
    fn interval(&mut self, m: IntervalMeasurement) -> Result<()> {
        if let Some(why) = self.rate_watch.as_mut().and_then(|w| w.observe(&m)) {
            self.rate_watch = None;
            self.host.metrics.limit_hit("max_rate");
            self.session.stream_failed(code::TOTAL_RATE, why);
        }
        Ok(())
    }

    fn idle_wait(&self) -> Duration {
        Duration::from_millis(2)
    }
}

impl Test<'_> {
    /// The engine of this test's streams (chosen once, when the
    /// parameters are known): the server's `--engine` if given, else
    /// `auto`'s choice for the test's workload (batch for UDP where the
    /// kernel has it), named in the report.
    fn engine(&mut self) -> EngineKind {
        if let Some(kind) = self.engine {
            return kind;
        }
        let kind = match self.host.engine {
            Configured::Fixed(kind) => kind,
            Configured::Auto => {
                let (kind, note) = auto::choose_for(&self.spec());
                self.notes.push(format!("{note} for this iperf3 client"));
                kind
            }
        };
        self.engine = Some(kind);
        kind
    }

    /// The server is stopping: SERVER_TERMINATE goes out while the streams
    /// still run, and they are dropped only once the client has closed (or
    /// after [`TERMINATE_WAIT`]), so it reads "the server has terminated"
    /// rather than a stream's broken pipe.
    fn terminate(&mut self, ctrl: &mut ControlConn) {
        self.session.abort(crate::server::SHUTDOWN_REASON);
        if ctrl.send(&self.session.take_outbox()).is_ok() {
            ctrl.wait_closed(TERMINATE_WAIT);
        }
    }

    /// `--idle-timeout`: ends a test on which nothing moves (live
    /// counters), as for a linerate client; true when it did.
    fn idle_expired(&mut self) -> bool {
        let (Some(run), Some(idle)) = (&self.run, &mut self.idle) else {
            return false;
        };
        let now = Instant::now();
        idle.observe(run.progress(), now);
        let Some(why) = idle.expired(now) else {
            return false;
        };
        self.idle = None;
        self.host.metrics.limit_hit("idle_timeout");
        // IENOMSG: "idle timeout for receiving data".
        self.session.stream_failed(code::NO_MSG, why);
        true
    }

    fn carry_out(&mut self, action: ServerAction) {
        match action {
            // The server's one admission, asked by the session only for a
            // test it may run (never for a keyed server's iperf3 client).
            ServerAction::RequestAdmission => {
                let host = self.host;
                let ip = self.peer.ip();
                let ask = guard::Ask::default();
                let decision =
                    guard::decide(host.guard, host.metrics, ip, ask, &mut self.slot.admitted);
                self.session.admission(decision);
            }
            ServerAction::PrepareStreams => self.prepare(),
            ServerAction::StartStreams => self.start(),
            ServerAction::StopStreams => self.stop(),
            ServerAction::ClientResults(client) => self.respond(&client),
            ServerAction::AbortStreams => {
                self.setups.clear();
                if let Some(run) = &self.run {
                    run.abort();
                }
            }
        }
    }

    fn params(&self) -> Params {
        self.session.params().cloned().unwrap_or_default()
    }

    /// The accepted parameters as linerate's test.
    fn spec(&self) -> TestSpec {
        self.session.spec().cloned().unwrap_or_default()
    }

    fn prepare(&mut self) {
        let p = self.params();
        let now = Instant::now();
        let (cpus, note) = test_cpus(self.host.cpus, p.server_affinity);
        if let Some(note) = note {
            self.host
                .guard
                .log
                .log(format_args!("{}: {note}", self.peer));
            self.notes.push(note);
        }
        self.cpus = cpus;
        if let (Some(m), []) = (p.server_affinity, self.host.cpus) {
            // `-A N,M` on a server without --cpus: iperf3 pins its server
            // to CPU M for the test, and fails where there is none.
            let online = std::thread::available_parallelism().map_or(1, |n| n.get());
            if m as usize >= online {
                return self.session.prepare_failed(
                    code::AFFINITY,
                    22, // EINVAL, what iperf3's sched_setaffinity would fail with
                    format!("-A …,{m}: this host has CPUs 0-{}", online - 1),
                );
            }
        }
        if p.protocol == IProtocol::Tcp {
            if let Ok(mut r) = self.host.hub.routes.lock() {
                r.insert(self.slot.cookie, (self.peer.ip(), self.route_tx.clone()));
            }
            return self.session.streams_prepared(now);
        }
        if self.host.hub.udp_busy.swap(true, Ordering::AcqRel) {
            return self.session.prepare_failed(
                code::STREAM_ACCEPT,
                0,
                "another iperf3 UDP test is opening its streams".into(),
            );
        }
        self.slot.udp = true;
        match self.local_addr.map(udp_listener) {
            Some(Ok(l)) => {
                self.udp_listener = Some(l);
                self.session.streams_prepared(now);
            }
            Some(Err(e)) => {
                self.session
                    .prepare_failed(code::STREAM_ACCEPT, 0, format!("UDP listener: {e}"))
            }
            None => self.session.prepare_failed(
                code::STREAM_ACCEPT,
                0,
                "no local address for the UDP listener".into(),
            ),
        }
    }

    /// Accepts data streams while the session waits for them.
    fn poll_streams(&mut self) {
        while let Ok(conn) = self.route_rx.try_recv() {
            self.arrived.push(conn);
        }
        let p = self.params();
        let all = p.direction.stream_count(p.parallel) as usize;
        if !self.arrived.is_empty() && self.arrived.len() >= all {
            let mut arrived = std::mem::take(&mut self.arrived);
            arrived.sort_by_key(|(seq, _)| *seq);
            for (_, sock) in arrived {
                self.attach_tcp(sock);
            }
        }
        let Some(listener) = self.udp_listener.take() else {
            return;
        };
        match udp_accept(listener, self.peer.ip(), Duration::from_millis(2)) {
            Ok(UdpAccepted::Waiting { listener, stray }) => {
                self.udp_listener = Some(listener);
                if let Some(stray) = stray {
                    self.host.guard.log.log(format_args!("{stray}"));
                }
            }
            Ok(UdpAccepted::Stream { stream, next }) => {
                self.udp_listener = Some(next);
                self.attach_udp(stream);
            }
            Err(e) => self
                .session
                .stream_failed(code::STREAM_ACCEPT, format!("UDP stream: {e}")),
        }
    }

    fn attach_tcp(&mut self, mut sock: TcpStream) {
        let Some(cookie) = self.session.cookie().copied() else {
            return;
        };
        let slot = match self.session.tcp_stream(&cookie, Instant::now()) {
            Ok(s) => s,
            Err(why) => {
                let log = &self.host.guard.log;
                log.log(format_args!("iperf3 data connection refused: {why}"));
                let _ = sock.write_all(&[linerate_iperf3::State::AccessDenied.byte()]);
                return;
            }
        };
        let spec = self.spec();
        let setup = socket::apply_accepted(&sock, &spec.tcp)
            .and_then(|()| socket::set_io_timeout(&sock, linerate_engine::stream::POLL));
        if let Err(e) = setup {
            return self
                .session
                .stream_failed(code::STREAM_ACCEPT, format!("stream {}: {e}", slot.id));
        }
        if let (Role::Sender, Some(bps)) = (slot.role, spec.tcp.rate) {
            if let Err(e) = linerate_engine::tcp_pace::set(&sock, bps) {
                return self
                    .session
                    .stream_failed(code::STREAM_ACCEPT, format!("stream {}: {e}", slot.id));
            }
        }
        if self.congestion.is_none() {
            self.congestion = socket::congestion(&sock);
        }
        if slot.role == Role::Receiver {
            match sock.try_clone() {
                Ok(d) => self.tcp_receivers.push(d),
                Err(e) => {
                    return self
                        .session
                        .stream_failed(code::STREAM_ACCEPT, format!("stream {}: {e}", slot.id))
                }
            }
        }
        self.add(slot, DataSocket::Tcp(sock));
    }

    fn attach_udp(&mut self, sock: UdpSocket) {
        let slot = match self.session.udp_stream(Instant::now()) {
            Ok(s) => s,
            Err(why) => {
                let log = &self.host.guard.log;
                return log.log(format_args!("iperf3 UDP stream refused: {why}"));
            }
        };
        let p = self.params();
        // Its -w as the session agreed it (clamped to --max-window).
        let window = self.spec().udp.and_then(|u| u.window);
        // An unpaced client given no -w outruns the receiver in bursts:
        // deep receive buffers, by linerate's own rule for unpaced tests.
        let deep = (window.is_none() && p.bandwidth == 0 && slot.role == Role::Receiver)
            .then(|| {
                let streams = p.direction.stream_count(p.parallel) as usize;
                linerate_proto::limits::unpaced_udp_window(
                    streams,
                    self.host.limits.max_test_memory,
                )
            })
            .flatten();
        if let Some(w) = window.or(deep) {
            match udp::set_buffers(&sock, w) {
                Ok(note) if deep.is_some() && !self.notes.iter().any(|n| n.contains("-b 0")) => {
                    self.notes.push(format!(
                        "{note}: the iperf3 client sends unpaced (-b 0) without -w, so this \
                         server's receiving sockets get deep buffers, as linerate's own unpaced tests do"
                    ));
                }
                Ok(_) => {}
                Err(e) => {
                    return self
                        .session
                        .stream_failed(code::SET_BUF2, format!("stream {}: {e}", slot.id))
                }
            }
        }
        if let Err(e) = sock.set_write_timeout(Some(linerate_engine::stream::POLL)) {
            return self
                .session
                .stream_failed(code::STREAM_ACCEPT, format!("stream {}: {e}", slot.id));
        }
        if slot.role == Role::Receiver {
            // GRO and timestamps on before the client's first datagram.
            udp::prepare_recv(self.engine(), &sock);
        }
        self.add(slot, DataSocket::Udp(sock));
    }

    fn add(&mut self, slot: StreamSlot, sock: DataSocket) {
        let (sender, role) = match slot.role {
            Role::Sender => (Side::Server, measure::Role::Sender),
            Role::Receiver => (Side::Client, measure::Role::Receiver),
        };
        self.setups.push(StreamSetup {
            id: conv::linerate_id(slot.index),
            sender,
            role,
            bytes: None,
            datagrams: None,
            sock,
        });
        self.streams.push(StreamInfo { slot });
    }

    fn start(&mut self) {
        // Every stream is in: later connections with this cookie are new
        // control connections (told busy), as with iperf3.
        self.slot.release_setup();
        self.udp_listener = None;
        let p = self.params();
        let spec = self.spec();
        self.start_unix_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        self.rate_watch = RateWatch::new(&spec, self.host.limits);
        let setups = std::mem::take(&mut self.setups);
        let now = Instant::now();
        self.idle = IdleWatch::new(&spec, self.host.guard.cfg.idle, now);
        self.started = Some(now);
        // The data phase starts through the test's entry, as a native
        // test's does, in iperf3's wire format.
        let side = ServerSide {
            engine: self.engine(),
            wire: Wire::Iperf3 {
                counters_64bit: p.udp_counters_64bit,
            },
            cpus: &self.cpus,
            cpu_scope: test_type::cpu_scope(self.host.per_thread_cpu),
            crr: None,
            flow_threads: None,
        };
        match (test_type::of(&spec).start_server)(&side, &spec, setups) {
            Ok(run) => self.run = Some(run),
            Err(e) => self
                .session
                .stream_failed(code::STREAM_ACCEPT, format!("{}", e.chain())),
        }
    }

    /// TEST_END: stop every stream now and collect what they measured.
    fn stop(&mut self) {
        self.stopped = Some(Instant::now());
        if let Some(run) = &mut self.run {
            run.stop_senders();
            let measured = self.session.measured().is_some();
            if let Some(r) = super::end_data_phase(run, &self.tcp_receivers, measured) {
                self.session.local_finished(r);
            }
        }
        // The data sockets close with their threads; the duplicates too.
        self.run = None;
        self.tcp_receivers.clear();
        if self.session.measured().is_none() {
            return self
                .session
                .stream_failed(code::STREAM_READ, "streams did not stop within 10 s".into());
        }
        self.session.streams_stopped(Instant::now());
    }

    /// The client's results arrived: build ours and the report, answer.
    fn respond(&mut self, client: &Results) {
        let p = self.params();
        let mut local = self.session.measured().cloned().unwrap_or_default();
        // iperf3 samples every stream when TEST_END arrives.
        let ran = match (self.started, self.stopped) {
            (Some(a), Some(b)) => b.saturating_duration_since(a),
            _ => Duration::ZERO,
        };
        let spec = self.spec();
        let mut remote = match conv::checked_peer_side(&p, &spec, client, Side::Client) {
            Ok(r) => r,
            Err(why) => return self.session.stream_failed(code::RECV_RESULTS, why),
        };
        let mut ours = conv::local_results(&p, &local, &self.streams, self.congestion.clone(), ran);
        // The client's count of datagrams sent is the sender's final count
        // that linerate's exact loss is counted against.
        conv::apply_sender_counts(&mut local, &remote);
        conv::apply_sender_counts(&mut remote, &local);
        let mut notes = vec![format!(
            "iperf3 client{}: its figures are iperf3's own (bytes after the omit period, CPU from its percentages{})",
            p.client_version
                .as_ref()
                .map_or_else(String::new, |v| format!(" {v}")),
            if p.protocol == IProtocol::Udp {
                ", UDP loss and jitter by iperf3's rules"
            } else {
                ""
            }
        )];
        notes.extend(self.notes.iter().cloned());
        notes.extend(self.session.notes().iter().cloned());
        notes.extend(conv::sent_to_client_notes(&p, &ours, &self.streams));
        notes.extend(conv::short_sender_notes(&local, &remote, Side::Server));
        let info = TestInfo {
            server: self.local_addr.map(|a| a.to_string()).unwrap_or_default(),
            client: Some(self.peer.to_string()),
            client_software: format!(
                "iperf3 {}",
                p.client_version.as_deref().unwrap_or("(version not sent)")
            ),
            server_software: software(),
            client_engine: remote.engine.clone(),
            server_engine: local.engine.clone(),
            server_ld_preload: crate::about::ld_preload(),
            start_unix_ms: self.start_unix_ms,
            congestion_used: self.congestion.clone(),
            ..TestInfo::from_spec(&spec, Side::Server)
        };
        let report = (test_type::of(&spec).build)(info, &spec, &remote, &local, notes);
        if p.get_server_output {
            if self.host.format == Format::Json {
                ours.server_output_json = serde_json::to_value(&report).ok();
            } else {
                let mut text = Vec::new();
                let mut sink = render::sink(Format::Human, Box::new(&mut text));
                let _ = sink.start(&report.test).and_then(|()| sink.finish(&report));
                drop(sink);
                ours.server_output_text = Some(String::from_utf8_lossy(&text).into_owned());
            }
        }
        self.report = Some(report);
        self.recorded = Some((spec, local));
        self.session.send_results(&ours, Instant::now());
    }

    fn finish(&mut self) {
        let (host, peer) = (self.host, self.peer);
        // Refusals and failures go through the server's throttled logs, as
        // a linerate client's do: a flood of busy connections costs ten
        // lines a second, not one each (failures on their own allowance).
        let log = &host.guard.log;
        let admitted = self.slot.admitted.is_some();
        match self.session.outcome() {
            Some(ServerOutcome::Completed { .. }) => {
                // As for a linerate client: the metrics, the --json-lines
                // record and the report in the server's format.
                if let (Some(report), Some((spec, local))) = (&self.report, &self.recorded) {
                    let ip = peer.ip().to_string();
                    host.metrics.completed(spec, local, report, &ip);
                    if let Some(j) = host.json_lines {
                        j.append(report);
                    }
                }
                if let (Some(report), Some(out)) = (&self.report, host.out) {
                    out.report(&report.test, report);
                }
            }
            Some(ServerOutcome::Refused(why)) => {
                host.metrics
                    .refused(if admitted { "invalid" } else { "busy" });
                for (flag, limit) in [
                    ("(--max-rate)", "max_rate"),
                    ("--max-total-rate", "max_total_rate"),
                ] {
                    if why.contains(flag) {
                        host.metrics.limit_hit(limit);
                    }
                }
                log.log(format_args!("refused iperf3 client {peer}: {why}"))
            }
            Some(ServerOutcome::Failed(e)) => {
                host.metrics.failed(self.session.spec());
                (host.guard.outcomes).log(format_args!("iperf3 test from {peer} ended: {e}"))
            }
            None => log.log(format_args!("iperf3 test from {peer} ended unexpectedly")),
        }
        let ran = !matches!(
            self.session.outcome(),
            Some(ServerOutcome::Refused(_)) | None
        );
        if admitted && ran {
            host.test_ended.store(true, Ordering::Release);
        }
    }
}

/// The CPUs an iperf3 test's threads run on, and a note where the client's
/// wish was set aside. The operator's `--cpus` win: a client's `-A …,M`
/// (iperf3 pins its server to CPU M) may pick one of them, or any CPU on a
/// server without `--cpus`; a CPU outside the operator's is ignored.
fn test_cpus(operator: &[usize], asked: Option<u32>) -> (Vec<usize>, Option<String>) {
    match asked.map(|m| m as usize) {
        None => (operator.to_vec(), None),
        Some(m) if operator.is_empty() || operator.contains(&m) => (vec![m], None),
        Some(m) => (
            operator.to_vec(),
            Some(format!(
                "the iperf3 client asked for server CPU {m} (-A …,{m}); ignored: the server runs \
                 tests on its --cpus {}",
                operator
                    .iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            )),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An iperf3 client's `-A` never takes a test off the operator's
    /// `--cpus`: it may choose among them, anything else is ignored with a
    /// note.
    #[test]
    fn issue_28_iperf3_affinity_stays_within_the_operators_cpus() {
        assert_eq!(test_cpus(&[2, 3], None), (vec![2, 3], None));
        assert_eq!(test_cpus(&[2, 3], Some(3)), (vec![3], None));
        let (cpus, note) = test_cpus(&[2, 3], Some(0));
        assert_eq!(cpus, vec![2, 3]);
        let note = note.expect("a note");
        assert!(
            note.contains("ignored") && note.contains("--cpus 2,3"),
            "{note}"
        );
        // Without --cpus, the client's CPU is taken, as iperf3's server does.
        assert_eq!(test_cpus(&[], Some(1)), (vec![1], None));
        assert_eq!(test_cpus(&[], None), (vec![], None));
    }
}
