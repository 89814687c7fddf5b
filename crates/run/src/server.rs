//! The server: accepts connections on one port, tells control connections
//! from data connections (and linerate peers from iperf3 ones) by their first
//! bytes, and runs one control session per test on its own thread (iperf3
//! clients are served by [`crate::iperf3::server`]). What a test leaves
//! behind when it ends is [`report`]; UDP stream attach is [`udp_attach`].
//!
//! Every connection gets a thread with bounded waits, and every test's
//! streams are owned by a [`SideRun`] that is aborted and joined when the
//! session ends, so a misbehaving client costs a thread for at most the
//! session's deadlines and can never stop the server from serving others.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{no_randomness, Context as _, Result, RunError};
use linerate_engine::engines::auto::{self, Configured};
use linerate_engine::engines::EngineKind;
use linerate_engine::rr::{AcceptSpin, CrrHost, CrrPool, CrrServer, Offer};
use linerate_engine::runner::{SideRun, StreamSetup};
use linerate_engine::stream::POLL;
use linerate_engine::{clock, socket};
use linerate_proto::auth::{AuthKey, ServerAuth};
use linerate_proto::limits::RateBudget;
use linerate_proto::limits::ServerLimits;
use linerate_proto::measure::IntervalMeasurement;
use linerate_proto::rr_core::SpinMode;
use linerate_proto::session::server::{ServerAction, ServerOutcome, ServerSession};
use linerate_proto::session::EarlyStop;
use linerate_proto::spec::TestSpec;
use linerate_proto::wire::{
    classify_greeting, DataHello, Greeting, Message, RefuseCode, Side, Token, TOKEN_LEN,
};
use linerate_report::render::Format;

use crate::about::software;
use crate::config::ServerConfig;
use crate::control::{self, read_first_frame, ControlConn, ControlSide};
use crate::iperf3::server::{self as iperf3_server, Iperf3Hub};
use crate::log::log;
use crate::metrics::{JsonLines, Metrics};
use crate::test_type::{self, ServerSide};

mod report;
mod udp_attach;
mod unix_attach;

use crate::guard::{self, Guard, GuardConfig, PreAuthSlot};
use crate::watch::{IdleWatch, RateWatch};
use udp_attach::PendingDatagram;

type DataRoute = Sender<(DataHello, TcpStream)>;

/// Set by the server's SIGINT handler: stop accepting, stop the running
/// tests as at their limit (each client is told and still gets both
/// sides' results), then exit ([`SHUTDOWN_GRACE`] at most).
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
    /// Each connection is one crr transaction, served by the crr pool.
    Crr(Arc<CrrServer>),
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
    let listener = socket::listen(cfg.bind, cfg.port)?;
    let addr = listener.local_addr()?;
    if cfg.auth_key.is_none() && !addr.ip().is_loopback() {
        log!(
            "linerate server: warning: listening on {addr} without --auth-key: anyone who can reach this port can make this host send traffic"
        );
    }
    if cfg.format == Format::Human {
        println!(
            "linerate server listening on {addr} (engine {})",
            cfg.engine
        );
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
        per_thread_cpu: cfg.max_concurrent > 1,
        routes: Mutex::new(HashMap::new()),
        test_ended: AtomicBool::new(false),
        accepted: AtomicU64::new(0),
        iperf3: Iperf3Hub::default(),
        guard: Guard::new(cfg.guard.clone(), cfg.max_concurrent),
        auth_key: cfg.auth_key.clone(),
        metrics: Arc::new(Metrics::default()),
        json_lines: cfg.json_lines.as_deref().map(JsonLines::open).transpose()?,
        rate_budget: cfg.limits.max_total_rate_bps.map(RateBudget::new),
        stops_on_signal: true,
    });
    if let Some(addr) = cfg.metrics {
        let bound = shared.metrics.serve(addr)?;
        log!("linerate server: metrics on http://{bound}/metrics");
    }
    serve(&listener, &shared, cfg.once)
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

fn serve(listener: &TcpListener, shared: &Arc<Shared>, once: bool) -> Result<()> {
    let mut sessions: Vec<JoinHandle<()>> = Vec::new();
    // crr transactions are answered here or on the pool's one worker, not
    // on a thread of their own (issue 8).
    let crr = CrrPool::new(Arc::new(CrrRoutes(Arc::clone(shared))));
    // Accept blocks for at most this long, so the loop notices the end of
    // a --once test; no poll(2) before each accept (crr accepts one
    // connection per transaction).
    socket::set_accept_timeout(listener, ACCEPT_TICK)?;
    // While a busy-polled crr test runs, the listener is non-blocking and
    // this thread spins on it (issue 8).
    let mut spin: Option<AcceptSpin> = None;
    loop {
        if once && shared.test_ended.load(Ordering::Acquire) {
            break;
        }
        if shared.stopping() {
            log!("linerate server: stopping: running tests end now, their clients get what was measured");
            let until = Instant::now() + SHUTDOWN_GRACE;
            while Instant::now() < until && sessions.iter().any(|h| !h.is_finished()) {
                std::thread::sleep(ACCEPT_TICK);
            }
            // What did not finish in time ends with the process.
            sessions.retain(|h| !h.is_finished());
            break;
        }
        sessions.retain(|h| !h.is_finished());
        let (sock, peer) = match listener.accept() {
            Ok(x) => {
                if let Some(s) = spin.as_mut() {
                    s.accepted();
                }
                x
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && spin.is_some() => {
                let slept = spin
                    .as_mut()
                    .is_some_and(|s| s.would_block(listener, ACCEPT_TICK));
                if slept && crr_spin(shared).is_none() {
                    spin_listener(listener, &mut spin, None, shared);
                }
                continue;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            Err(e) => {
                // Per-connection failures (e.g. ECONNABORTED, EMFILE) must
                // not take the server down; back off briefly.
                shared.guard.log.log(format_args!("accept: {e}"));
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let peer = socket::canonical(peer);
        let seq = shared.accepted.fetch_add(1, Ordering::Relaxed);
        let guard = &shared.guard;
        if !guard.cfg.filter.permits(peer.ip()) {
            shared.metrics.rejected("address");
            guard.log.log(format_args!(
                "{peer}: address not allowed (--allow/--deny), closing"
            ));
            continue;
        }
        let sock = match crr_mode(shared) {
            Some(mode) => {
                spin_listener(listener, &mut spin, mode, shared);
                match crr.offer(sock, peer, spin.as_ref().map(AcceptSpin::mode)) {
                    Offer::Taken => continue,
                    Offer::NotCrr(sock) => sock,
                }
            }
            None => sock,
        };
        let Some(slot) = guard.slots.try_take() else {
            shared.metrics.rejected("max_connections");
            shared.metrics.limit_hit("max_connections");
            guard.log.log(format_args!(
                "{peer}: {} connections already open (--max-connections), closing",
                guard.cfg.max_connections
            ));
            continue;
        };
        let conn_shared = Arc::clone(shared);
        match std::thread::Builder::new()
            .name("linerate-conn".into())
            .spawn(move || {
                let _slot = slot;
                handle_connection(sock, peer, seq, &conn_shared)
            }) {
            Ok(h) => sessions.push(h),
            Err(e) => shared
                .guard
                .log
                .log(format_args!("cannot start a thread for {peer}: {e}")),
        }
    }
    for h in sessions {
        let _ = h.join();
    }
    Ok(())
}

/// How long a blocking accept waits, so the loop notices the end of a
/// `--once` test (and a spinning one looks at its routes again).
const ACCEPT_TICK: Duration = Duration::from_millis(100);

/// Whether a crr test is running (its connections go to the pool): `None`
/// if not, else how the accepting thread spins (`Some(None)`: it blocks; a
/// busy-polled test's way wins over a blocking one's).
fn crr_mode(shared: &Shared) -> Option<Option<SpinMode>> {
    let routes = shared.routes.lock().ok()?;
    let mut mode = None;
    for (_, r) in routes.values() {
        if let Route::Crr(c) = r {
            mode = Some(mode.flatten().or_else(|| c.spin_mode()));
        }
    }
    mode
}

/// How the accepting thread should spin now: `None` unless a busy-polled
/// crr test runs.
fn crr_spin(shared: &Shared) -> Option<SpinMode> {
    crr_mode(shared).flatten()
}

/// Makes the listener spin (`want`: non-blocking, with an [`AcceptSpin`])
/// or block again, if it does not already. A listener that cannot be made
/// non-blocking keeps blocking (logged): the test then runs slower, and
/// its server side still reports it was asked to spin.
fn spin_listener(
    listener: &TcpListener,
    spin: &mut Option<AcceptSpin>,
    want: Option<SpinMode>,
    shared: &Shared,
) {
    if spin.as_ref().map(AcceptSpin::mode).is_some() == want.is_some() {
        return;
    }
    match listener.set_nonblocking(want.is_some()) {
        Ok(()) => *spin = want.map(AcceptSpin::new),
        Err(e) => shared
            .guard
            .log
            .log(format_args!("busy-polled crr: listener O_NONBLOCK: {e}")),
    }
}

/// The server's side of the crr pool: its routes, its usual connection
/// handling, its log.
struct CrrRoutes(Arc<Shared>);

impl CrrHost for CrrRoutes {
    fn crr(&self, token: &Token) -> Option<Arc<CrrServer>> {
        match self.0.routes.lock().ok()?.get(token) {
            Some((_, Route::Crr(c))) => Some(Arc::clone(c)),
            _ => None,
        }
    }

    fn not_crr(&self, sock: TcpStream, peer: SocketAddr) {
        let shared = Arc::clone(&self.0);
        let seq = shared.accepted.fetch_add(1, Ordering::Relaxed);
        let Some(slot) = shared.guard.slots.try_take() else {
            shared.metrics.rejected("max_connections");
            return;
        };
        if let Err(e) = std::thread::Builder::new()
            .name("linerate-conn".into())
            .spawn(move || {
                let _slot = slot;
                handle_connection(sock, peer, seq, &shared)
            })
        {
            log!("linerate server: cannot start a thread for {peer}: {e}");
        }
    }

    fn hold(&self) -> Option<Box<dyn Send>> {
        let guard = &self.0.guard;
        let slot = guard.slots.try_take();
        if slot.is_none() {
            self.0.metrics.rejected("max_connections");
            self.0.metrics.limit_hit("max_connections");
            guard.log.log(format_args!(
                "crr: {} connections already open (--max-connections), closing a waiting transaction",
                guard.cfg.max_connections
            ));
        }
        Some(Box::new(slot?))
    }

    fn failed(&self, peer: SocketAddr, e: &linerate_engine::EngineError) {
        self.0
            .guard
            .log
            .log(format_args!("{peer}: crr transaction: {e}"));
    }
}

/// `seq`: the connection's place in the accept order.
fn handle_connection(sock: TcpStream, peer: SocketAddr, seq: u64, shared: &Shared) {
    // The handshake timeout bounds everything before admission, from here:
    // the first frame, the key's exchange and the Hello together.
    let started = Instant::now();
    let log = &shared.guard.log;
    let greeting_timeout = shared.guard.cfg.handshake;
    if let Err(e) = sock.set_read_timeout(Some(greeting_timeout)) {
        log.log(format_args!("{peer}: {e}"));
        return;
    }
    let mut first = [0u8; 1];
    let greeting = match sock.peek(&mut first) {
        Ok(0) => return,
        Ok(_) => classify_greeting(&first),
        Err(e) => {
            log.log(format_args!("{peer}: no greeting: {e}"));
            return;
        }
    };
    match greeting {
        Greeting::Native => {}
        Greeting::Iperf3 => {
            let host = iperf3_server::Host {
                limits: &shared.limits,
                engine: shared.engine,
                format: shared.format,
                quiet: shared.quiet,
                cpus: &shared.cpus,
                per_thread_cpu: shared.per_thread_cpu,
                test_ended: &shared.test_ended,
                hub: &shared.iperf3,
                guard: &shared.guard,
                metrics: &shared.metrics,
                json_lines: shared.json_lines.as_ref(),
                auth_required: shared.auth_key.is_some(),
                rate_budget: shared.rate_budget.as_ref(),
                stop_signal: shared.stop_signal(),
            };
            iperf3_server::handle(sock, peer, seq, started, &host);
            // The test's threads are joined: what they freed goes back.
            linerate_engine::memory::release_freed();
            return;
        }
        Greeting::Unknown | Greeting::NeedMore => {
            log.log(format_args!(
                "{peer}: not a linerate or iperf3 peer (first byte {:#04x}), closing",
                first[0]
            ));
            return;
        }
    }
    let left = greeting_timeout.saturating_sub(started.elapsed());
    let (msg, raw) = match read_first_frame(&sock, left) {
        Ok(x) => x,
        Err(e) => {
            log.log(format_args!("{peer}: bad first frame: {}", e.chain()));
            // Answer a Hello-shaped mistake in words the client can print.
            let _ = reply_refusal(&sock, RefuseCode::Invalid, &e.to_string());
            return;
        }
    };
    match msg {
        Message::Hello(_) | Message::AuthInit(_) => {
            if let Some(pre_auth) = take_pre_auth(&sock, peer, shared) {
                run_control(sock, peer, started, &raw, pre_auth, shared);
                // The test and its stream threads are gone (joined when
                // its run dropped): what they freed goes back.
                linerate_engine::memory::release_freed();
            }
        }
        Message::DataHello(h) => {
            let route = shared
                .routes
                .lock()
                .ok()
                .and_then(|r| r.get(&h.token).cloned());
            match route {
                // No reflection: a test's data connections come from the
                // address that opened its control connection, or not at all.
                Some((owner, _)) if owner != peer.ip() => log.log(format_args!(
                    "{peer}: data connection for a test of {owner}, closing"
                )),
                Some((_, Route::Streams(tx))) => {
                    let _ = tx.send((h, sock));
                }
                Some((_, Route::Crr(crr))) => {
                    if let Err(e) = crr.serve(&h, sock) {
                        log.log(format_args!("{peer}: crr transaction: {e}"));
                    }
                }
                None => log.log(format_args!(
                    "{peer}: data connection for no running test, closing"
                )),
            }
        }
        other => log.log(format_args!(
            "{peer}: unexpected first frame {}, closing",
            other.name()
        )),
    }
}

fn reply_refusal(mut sock: &TcpStream, code: RefuseCode, why: &str) -> std::io::Result<()> {
    use std::io::Write;
    let msg = Message::Refuse(linerate_proto::wire::Refuse {
        code,
        message: why.to_owned(),
    });
    sock.write_all(&linerate_proto::wire::to_bytes(&msg))
}

/// A place among the control connections `peer`'s address has before
/// admission ([`guard::PreAuth`]), or a refusal: one host cannot hold the
/// server's connection threads with handshakes it never completes.
fn take_pre_auth(sock: &TcpStream, peer: SocketAddr, shared: &Shared) -> Option<PreAuthSlot> {
    let pre_auth = &shared.guard.pre_auth;
    let slot = pre_auth.try_take(peer.ip());
    if slot.is_none() {
        shared.metrics.limit_hit("pre_auth_per_source");
        let max = pre_auth.max();
        shared.guard.log.log(format_args!(
            "{}: {max} connections not authenticated yet (the most one address may have), closing another",
            peer.ip()
        ));
        let _ = reply_refusal(
            sock,
            RefuseCode::Busy,
            &format!(
                "{max} connections from {} are not authenticated yet, this server allows {max} at a time; try again when they are done",
                peer.ip()
            ),
        );
    }
    slot
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
    pre_auth: PreAuthSlot,
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
    pre_auth: Option<PreAuthSlot>,
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

impl ServerTest<'_> {
    /// This test's engine: the one the client asked for with
    /// `--server-engine` (checked when its Hello was negotiated), else the
    /// server's own (`auto`: its rule for this test); asked for by name,
    /// an engine runs with its defaults.
    fn engine(&self) -> EngineKind {
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
    fn carry_out(&mut self, action: ServerAction, ctrl: &ControlConn) {
        match action {
            ServerAction::RequestAdmission => {
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
                // A probe beside a test is part of it: its end is not the
                // end `--once` waits for.
                self.admitted = slot.admitted.as_ref().is_some_and(|a| !a.is_beside());
                self.session.admission(decision, Instant::now());
            }
            ServerAction::ExpectStreams { token, spec } => {
                let per_transaction = test_type::of(&spec).connection_per_transaction;
                let route = match spec.rr_plan().map(CrrServer::new) {
                    Some(crr) if per_transaction => {
                        self.crr = Some(Arc::clone(&crr));
                        Route::Crr(crr)
                    }
                    _ => Route::Streams(self.route_tx.clone()),
                };
                if let Ok(mut r) = self.shared.routes.lock() {
                    r.insert(token, (self.peer_ip, route));
                }
            }
            ServerAction::BindUnixListener { spec, uid } => {
                match unix_attach::UnixData::bind(uid, spec.connection_count()) {
                    Ok((u, name)) => {
                        self.unix = Some(u);
                        self.session.unix_listener_bound(name, Instant::now());
                    }
                    Err(e) => self.session.data_sockets_failed(format!("{}", e.chain())),
                }
            }
            ServerAction::StartStreams => {
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
                    cpus: &self.shared.cpus,
                    cpu_scope: test_type::cpu_scope(self.shared.per_thread_cpu),
                    crr: self.crr.as_ref(),
                    flow_threads: self.shared.flow_threads,
                };
                let entry = test_type::of(&spec);
                self.idle = IdleWatch::new(&spec, self.shared.guard.cfg.idle, Instant::now());
                let capped =
                    self.shared.limits.max_rate_bps.is_some() || self.shared.rate_budget.is_some();
                self.rate_watch = RateWatch::new(&spec, capped);
                match (entry.start_server)(&side, &spec, attached) {
                    Ok(run) => self.run = Some(run),
                    Err(e) => self.session.stream_failed(format!(
                        "server cannot start the {} test: {}",
                        entry.name,
                        e.chain()
                    )),
                }
            }
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
            ServerAction::StopStreams => {
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
            ServerAction::AbortStreams => {
                self.attached.clear();
                if let Some(run) = &self.run {
                    run.abort();
                }
            }
        }
    }

    fn attach(&mut self, hello: DataHello, sock: TcpStream) {
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
