//! The server: accepts connections on one port, tells control connections
//! from data connections (and linerate peers from iperf3 ones) by their first
//! bytes, and runs one control session per test on its own thread (iperf3
//! clients are served by [`crate::iperf3::server`]). What a test leaves
//! behind when it ends is `report`; UDP stream attach is `udp_attach`.
//!
//! Every connection gets a thread with bounded waits, and every test's
//! streams are owned by a [`SideRun`] that is aborted and joined when the
//! session ends, so a misbehaving client costs a thread for at most the
//! session's deadlines and can never stop the server from serving others.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{no_randomness, Context as _, Result};
use linerate_engine::engines::auto::Configured;
use linerate_engine::engines::EngineKind;
use linerate_engine::rr::CrrServer;
use linerate_engine::runner::{SideRun, StreamSetup};
use linerate_engine::{clock, socket};
use linerate_proto::auth::{AuthKey, ServerAuth};
use linerate_proto::limits::RateBudget;
use linerate_proto::limits::ServerLimits;
use linerate_proto::measure::IntervalMeasurement;
use linerate_proto::session::server::{ServerAction, ServerOutcome, ServerSession};
use linerate_proto::wire::{DataHello, Token, TOKEN_LEN};
use linerate_report::render::Format;

use crate::about::software;
use crate::config::ServerConfig;
use crate::control::{self, ControlConn, ControlSide};
use crate::iperf3::server::Iperf3Hub;
use crate::log::log;
use crate::metrics::{JsonLines, Metrics};
use crate::printer::ServerOut;

mod accept;
mod actions;
mod connection;
mod report;
mod udp_attach;
mod unix_attach;

use accept::serve;

use crate::guard::{self, Guard, GuardConfig, SourceSlot};
use crate::watch::{IdleWatch, RateWatch};
use udp_attach::PendingDatagram;

type DataRoute = Sender<(DataHello, TcpStream)>;

/// Set by the server's SIGINT handler: stop accepting, stop the running
/// tests as at their limit (each client is told and still gets both
/// sides' results), then exit (`SHUTDOWN_GRACE` at most).
pub static STOPPING: AtomicBool = AtomicBool::new(false);

/// How long a stopping server waits for its tests to exchange results.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// What a stopping server tells a client whose test had not started.
pub(crate) const SHUTDOWN_REASON: &str = "the server is shutting down (its operator stopped it)";

/// Where a test's data connections go.
#[derive(Clone)]
enum Route {
    /// To the session's control thread, to attach before Start.
    Streams(DataRoute),
    /// Each connection is one crr transaction, served by the crr pool;
    /// but the test's load streams (`--under-load`), which go to the
    /// session's control thread as `Streams` do.
    Crr(Arc<CrrServer>, DataRoute),
}

/// State shared by the accept loop and the session threads.
struct Shared {
    limits: ServerLimits,
    /// `--threads`: event-loop threads for `--flows` tests.
    flow_threads: Option<u16>,
    engine: Configured,
    cpus: Vec<usize>,
    format: Format,
    /// Quiet: the embedded server prints nothing (its client reports).
    quiet: bool,
    /// Stdout, written off the tests' threads (none when quiet).
    out: Option<ServerOut>,
    /// Client and server share the process: account CPU per thread.
    per_thread_cpu: bool,
    /// Each running test's data route, with the address of its control
    /// connection's peer: data connections from elsewhere are refused.
    routes: Mutex<HashMap<Token, (IpAddr, Route)>>,
    /// Set when an admitted test has ended (for --once).
    test_ended: AtomicBool,
    /// Connections accepted so far: each connection's number is its place
    /// in the accept queue, which is the order an iperf3 client opened its
    /// streams in (their handling threads may run in any order).
    accepted: AtomicU64,
    /// iperf3 tests' cookie routes and UDP port.
    iperf3: Iperf3Hub,
    /// Connection-level limits and the throttled log.
    guard: Guard,
    /// `--auth-key`: clients must prove they hold it.
    auth_key: Option<AuthKey>,
    metrics: Arc<Metrics>,
    /// `--json-lines-file FILE`: a record per completed test.
    json_lines: Option<JsonLines>,
    /// `--max-total-rate`: the bit rate running tests share.
    rate_budget: Option<Arc<RateBudget>>,
    /// This server stops on [`STOPPING`] (the embedded one ends with its
    /// client, which handles Ctrl-C itself).
    stops_on_signal: bool,
}

impl Shared {
    fn stopping(&self) -> bool {
        self.stop_signal()
            .is_some_and(|s| s.load(Ordering::Relaxed))
    }

    /// The shutdown signal, where this server stops on it.
    fn stop_signal(&self) -> Option<&'static AtomicBool> {
        self.stops_on_signal.then_some(&STOPPING)
    }
}

/// Runs a server until interrupted (or after one test with --once).
pub fn run(cfg: &ServerConfig) -> Result<()> {
    // A server runs for weeks: what its tests' threads freed must go back.
    linerate_engine::memory::for_server();
    if let Some(path) = &cfg.logfile {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("--logfile {}", path.display()))?;
        linerate_engine::stdio::redirect_to(&file)
            .with_context(|| format!("--logfile {}", path.display()))?;
    }
    // A reader that does not read holds no thread that logs (the accept
    // loop among them): `crate::log`.
    crate::log::start_server_log().context("starting the log thread")?;
    let served = listen_and_serve(cfg);
    // The log is out before the process ends, as the reports are.
    let stopped = STOPPING.load(Ordering::Relaxed) || served.is_err();
    crate::log::finish_server_log(stopped.then_some(SHUTDOWN_GRACE));
    served
}

/// [`run`] once its log goes through its printer.
fn listen_and_serve(cfg: &ServerConfig) -> Result<()> {
    let listener = socket::listen(cfg.bind, cfg.port)?;
    let addr = listener.local_addr()?;
    // Everything the server holds from its start is open before it says
    // it listens: whoever starts a test on that line (a script, a test
    // counting the server's descriptors) finds the port held for iperf3
    // UDP and the JSON-lines file open.
    let iperf3 = Iperf3Hub::holding(addr.port());
    let json_lines = cfg.json_lines.as_deref().map(JsonLines::open).transpose()?;
    // A reader that does not read stops neither the start nor a test.
    let out = ServerOut::spawn(cfg.format).context("starting the output thread")?;
    if cfg.auth_key.is_none() && !addr.ip().is_loopback() {
        log!(
            "linerate server: warning: listening on {addr} without --auth-key: anyone who can reach this port can make this host send traffic"
        );
    }
    if cfg.format == Format::Human {
        out.line(format!(
            "linerate server listening on {addr} (engine {})",
            cfg.engine
        ));
    } else {
        log!("linerate server listening on {addr}");
    }
    // Thousands of flows need thousands of descriptors: the soft limit
    // goes up to the hard one, which negotiation then holds tests to.
    let mut limits = cfg.limits.clone();
    limits.max_fds = linerate_engine::event_loop::fds::raise_to_hard().ok();
    let shared = Arc::new(Shared {
        limits,
        flow_threads: cfg.flow_threads,
        engine: cfg.engine,
        cpus: cfg.cpus.clone(),
        format: cfg.format,
        quiet: false,
        out: Some(out),
        per_thread_cpu: cfg.max_concurrent > 1,
        routes: Mutex::new(HashMap::new()),
        test_ended: AtomicBool::new(false),
        accepted: AtomicU64::new(0),
        iperf3,
        guard: Guard::new(cfg.guard.clone(), cfg.max_concurrent),
        auth_key: cfg.auth_key.clone(),
        metrics: Arc::new(Metrics::default()),
        json_lines,
        rate_budget: cfg.limits.max_total_rate_bps.map(RateBudget::new),
        stops_on_signal: true,
    });
    if let Some(addr) = cfg.metrics {
        let bound = shared.metrics.serve(addr)?;
        log!("linerate server: metrics on http://{bound}/metrics");
    }
    let served = serve(&listener, &shared, cfg.once);
    // The reports are out before the process ends: however long a reader
    // takes, unless the server was stopped, which ends within its grace.
    if let Some(out) = &shared.out {
        out.finish(shared.stopping().then_some(SHUTDOWN_GRACE));
    }
    served
}

/// A server running on a thread of this process, on loopback.
pub struct Embedded {
    addr: SocketAddr,
    shared: Arc<Shared>,
    handle: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Embedded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedded")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Embedded {
    pub fn port(&self) -> u16 {
        self.addr.port()
    }
}

impl Drop for Embedded {
    fn drop(&mut self) {
        // The server exits after its one test — or now, if the client gave
        // up or was refused before a test ran; joining makes sure its
        // threads and sockets are gone before the process reports.
        self.shared.test_ended.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Starts a one-test server on 127.0.0.1 with an ephemeral port.
pub fn spawn_embedded(engine: EngineKind, auth_key: Option<AuthKey>) -> Result<Embedded> {
    let listener = socket::listen(Some([127, 0, 0, 1].into()), 0)?;
    let addr = listener.local_addr()?;
    let shared = Arc::new(Shared {
        flow_threads: None,
        limits: ServerLimits {
            server_engines: crate::config::engine_offers(None)?,
            ..ServerLimits::default()
        },
        engine: Configured::Fixed(engine),
        cpus: Vec::new(),
        format: Format::Human,
        quiet: true,
        out: None,
        per_thread_cpu: true,
        routes: Mutex::new(HashMap::new()),
        test_ended: AtomicBool::new(false),
        accepted: AtomicU64::new(0),
        iperf3: Iperf3Hub::default(),
        guard: Guard::new(GuardConfig::default(), 1),
        auth_key,
        metrics: Arc::new(Metrics::default()),
        json_lines: None,
        rate_budget: None,
        stops_on_signal: false,
    });
    let server = Arc::clone(&shared);
    let handle = std::thread::Builder::new()
        .name("linerate-embedded-server".into())
        .spawn(move || {
            if let Err(e) = serve(&listener, &server, true) {
                log!("linerate: embedded server: {}", e.chain());
            }
        })
        .context("spawning the embedded server")?;
    Ok(Embedded {
        addr,
        shared,
        handle: Some(handle),
    })
}

fn new_token() -> Result<Token> {
    let mut t = [0u8; TOKEN_LEN];
    getrandom::fill(&mut t).map_err(|e| no_randomness("the test token", e))?;
    Ok(Token(t))
}

/// Releases the data route and the test's admission however the session
/// ends.
struct Held<'a> {
    shared: &'a Shared,
    token: Token,
    admitted: Option<guard::Admitted<'a>>,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if let Ok(mut r) = self.shared.routes.lock() {
            r.remove(&self.token);
        }
        // The admission goes with the fields, after the route.
    }
}

/// Serves one control connection; `started`: when it was accepted (its
/// handshake deadline counts from then), `first`: its first frame.
fn run_control(
    sock: TcpStream,
    peer: SocketAddr,
    started: Instant,
    first: &[u8],
    pre_auth: SourceSlot,
    shared: &Shared,
) {
    let token = match new_token() {
        Ok(t) => t,
        Err(e) => {
            log!("linerate server: {}", e.chain());
            return;
        }
    };
    // Releases the route; takes the test slot once admitted.
    let slot = Held {
        shared,
        token,
        admitted: None,
    };
    let local_addr = sock
        .local_addr()
        .map(|a| socket::canonical(a).to_string())
        .unwrap_or_default();
    guard::keep_alive(&sock);
    let mut ctrl = match ControlConn::new(sock) {
        Ok(c) => c,
        Err(e) => {
            log!("linerate server: {peer}: {}", e.chain());
            return;
        }
    };
    // With a key, no nonce means no test (never a test without the key).
    let auth = match &shared.auth_key {
        None => None,
        Some(k) => match crate::control::nonce() {
            Ok(n) => Some(ServerAuth::new(k.clone(), n)),
            Err(e) => {
                log!("linerate server: {}", e.chain());
                return;
            }
        },
    };
    let mut session = ServerSession::new(shared.limits.clone(), token, &software(), started)
        .with_boot_id(clock::boot_id())
        .with_auth(auth)
        .with_rate_budget(shared.rate_budget.clone())
        .with_heartbeat(linerate_proto::session::heartbeat::HEARTBEAT_INTERVAL);
    session.receive_at(first, Instant::now(), clock::mono_ns());
    let (route_tx, route_rx) = mpsc::channel();
    let mut test = ServerTest {
        shared,
        session,
        route_tx,
        route_rx,
        attached: Vec::new(),
        udp_pending: Vec::new(),
        notes: Vec::new(),
        run: None,
        start_unix_ms: 0,
        crr: None,
        slot: Some(slot),
        admitted: false,
        pre_auth: Some(pre_auth),
        local_addr,
        peer_ip: peer.ip(),
        idle: None,
        rate_watch: None,
        unix: None,
        shutting_down: false,
    };
    // The server's side never fails the loop: errors end the session.
    let _ = control::drive(&mut test, &mut ctrl);
    if let Some(run) = &test.run {
        run.abort();
    }
    report::report(&test, peer);
    // `--once` serves one test: a refused one (busy, parameters out of the
    // limits, version) does not count (issue 13).
    let refused = matches!(test.session.outcome(), Some(ServerOutcome::Refused(_)));
    let ended = test.admitted && !refused;
    // The test's slots go first: lingering delays no next test (and a
    // `--once` server exits only after it).
    drop(test);
    ctrl.close(control::CLOSE_LINGER);
    if ended {
        shared.test_ended.store(true, Ordering::Release);
    }
}

struct ServerTest<'a> {
    shared: &'a Shared,
    session: ServerSession,
    route_tx: DataRoute,
    route_rx: Receiver<(DataHello, TcpStream)>,
    attached: Vec<StreamSetup>,
    /// UDP: the data socket of each planned stream, until Start.
    udp_pending: Vec<PendingDatagram>,
    /// What this side changed or could not do, for its own report.
    notes: Vec<String>,
    run: Option<SideRun>,
    start_unix_ms: u64,
    /// The crr side, when this is a crr test.
    crr: Option<Arc<CrrServer>>,
    /// This server's address on the control connection.
    local_addr: String,
    /// This test's admission and data route, released as soon as the
    /// session ends (before its last frame goes out, so a client that
    /// starts its next test at once is not told the server is busy).
    slot: Option<Held<'a>>,
    /// The session was admitted as a test of its own (took a test slot;
    /// not a probe beside another test).
    admitted: bool,
    /// This connection's place among its address's connections before
    /// admission, until its session asks for admission.
    pre_auth: Option<SourceSlot>,
    /// The control connection's peer: the only address test traffic goes to.
    peer_ip: IpAddr,
    /// Running stream and msg tests: ends a test on which nothing moves.
    idle: Option<IdleWatch>,
    /// Holds a client to the rate it agreed to under a server rate limit.
    rate_watch: Option<RateWatch>,
    /// `--transport unix`: the test's Unix data listener until Start.
    unix: Option<unix_attach::UnixData>,
    /// The session was told the server is shutting down ([`STOPPING`]).
    shutting_down: bool,
}

impl ControlSide for ServerTest<'_> {
    type Session = ServerSession;

    fn session(&mut self) -> &mut ServerSession {
        &mut self.session
    }

    fn act(&mut self, action: ServerAction, ctrl: &mut ControlConn) -> Result<()> {
        self.carry_out(action, ctrl);
        Ok(())
    }

    fn send_failed(&mut self, _: std::io::Error) -> Result<()> {
        self.session.peer_closed();
        Ok(())
    }

    fn actions_done(&mut self) {
        if self.session.is_finished() {
            self.slot = None;
        }
    }

    fn turn(&mut self, _: &mut ControlConn) -> bool {
        if !self.shutting_down && self.shared.stopping() {
            self.shutting_down = true;
            self.session.shutdown(SHUTDOWN_REASON);
            return true;
        }
        while let Ok((hello, sock)) = self.route_rx.try_recv() {
            self.attach(hello, sock);
        }
        if let Some(u) = &mut self.unix {
            let (greeted, problems) = u.poll(Instant::now());
            for p in problems {
                self.shared.guard.log.log(format_args!("{p}"));
            }
            for (hello, sock) in greeted {
                self.attach(hello, socket::unix_as_stream(sock));
            }
        }
        if let Some(crr) = &self.crr {
            // A crr side ends when the client has finished its
            // transactions, which its results say.
            if self.session.peer_results_received() {
                crr.client_finished();
            }
        }
        if self.run.is_none() && !self.udp_pending.is_empty() {
            self.poll_greetings();
        }
        if let (Some(idle), Some(run)) = (&mut self.idle, &self.run) {
            idle.observe(run.progress(), Instant::now());
        }
        if let Some(why) = self.idle.as_ref().and_then(|w| w.expired(Instant::now())) {
            self.idle = None;
            self.shared.metrics.limit_hit("idle_timeout");
            self.session.stream_failed(why);
            return true;
        }
        false
    }

    fn run(&mut self) -> Option<&mut SideRun> {
        self.run.as_mut()
    }

    fn interval(&mut self, m: IntervalMeasurement) -> Result<()> {
        // Interval records travel in the side's results; the live copies
        // only feed the rate watch.
        if let Some(why) = self.rate_watch.as_mut().and_then(|w| w.observe(&m)) {
            self.rate_watch = None;
            self.shared.metrics.limit_hit("max_rate");
            self.session.stream_failed(why);
        }
        Ok(())
    }

    fn idle_wait(&self) -> Duration {
        Duration::from_millis(2)
    }
}
