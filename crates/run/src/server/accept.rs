//! The accept loop: admits a connection past the address filter and the
//! connection limit onto a thread of its own, or hands it to the crr pool
//! while a crr test runs (and spins on the listener while a busy-polled one
//! does). While a `crr --flows` test on T loops runs, T − 1 more threads
//! accept on the same listener, each with a crr pool of its own
//! ([`Acceptors`]), so the connections in flight are accepted and answered
//! on T threads.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::Result;
use crate::guard;
use crate::log::log;
use crate::metrics::Metrics;
use linerate_engine::read_ahead::ReadAhead;
use linerate_engine::rr::{AcceptSpin, CrrHost, CrrPool, CrrServer, Offer};
use linerate_engine::socket;
use linerate_proto::rr_core::SpinMode;
use linerate_proto::wire::Token;

use super::connection::handle_connection;
use super::{Route, Shared, SHUTDOWN_GRACE};

/// Accepts connections, each onto a thread of its own (crr transactions
/// into the pool), until a `--once` test has ended or the server stops;
/// joins the connection threads before it returns.
pub(super) fn serve(listener: &TcpListener, shared: &Arc<Shared>, once: bool) -> Result<()> {
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
    let mut acceptors = Acceptors::default();
    // While a crr test runs the listener defers accepts (issue 26).
    let mut deferring = false;
    loop {
        if once && shared.test_ended.load(Ordering::Acquire) {
            break;
        }
        if shared.stopping() {
            wind_down(&mut sessions);
            break;
        }
        sessions.retain(|h| !h.is_finished());
        acceptors.follow(listener, shared);
        defer_while_crr(listener, &mut deferring, shared);
        let Some((sock, peer)) = accept(listener, &mut spin, shared) else {
            continue;
        };
        let peer = socket::canonical(peer);
        let seq = shared.accepted.fetch_add(1, Ordering::Relaxed);
        let guard = &shared.guard;
        if !permitted(shared, peer) {
            continue;
        }
        let conn = match crr_mode(shared) {
            Some(mode) => {
                spin_listener(listener, &mut spin, mode, shared);
                match crr.offer(sock, peer, spin.as_ref().map(AcceptSpin::mode)) {
                    Offer::Taken => continue,
                    Offer::NotCrr(conn) => conn,
                }
            }
            None => ReadAhead::unread(sock),
        };
        let Some(slot) = conn_slot(guard, &shared.metrics, format_args!("{peer}")) else {
            continue;
        };
        let Some(first_bytes) = first_bytes_slot(shared, peer) else {
            continue;
        };
        let conn_shared = Arc::clone(shared);
        match std::thread::Builder::new()
            .name("linerate-conn".into())
            .spawn(move || {
                let _slot = slot;
                handle_connection(conn, peer, seq, first_bytes, &conn_shared)
            }) {
            Ok(h) => sessions.push(h),
            Err(e) => shared
                .guard
                .log
                .log(format_args!("cannot start a thread for {peer}: {e}")),
        }
    }
    acceptors.end();
    for h in sessions {
        let _ = h.join();
    }
    Ok(())
}

/// Whether the address filter (`--allow`/`--deny`) lets `peer` in; a
/// refusal is counted and logged.
fn permitted(shared: &Shared, peer: SocketAddr) -> bool {
    let guard = &shared.guard;
    if guard.cfg.filter.permits(peer.ip()) {
        return true;
    }
    shared.metrics.rejected("address");
    guard.log.log(format_args!(
        "{peer}: address not allowed (--allow/--deny), closing"
    ));
    false
}

/// The threads that accept beside the accept loop while a `crr --flows`
/// test wants them: as many as its loops less one (the most any running
/// crr test wants). Each ends when fewer are wanted than its place.
#[derive(Default)]
struct Acceptors {
    wanted: Arc<AtomicUsize>,
    threads: Vec<JoinHandle<()>>,
}

/// The most threads that accept beside the accept loop.
const MAX_ACCEPTORS: usize = 63;

impl Acceptors {
    /// Starts or ends acceptors to match the running crr tests.
    fn follow(&mut self, listener: &TcpListener, shared: &Arc<Shared>) {
        let want = crr_accepting(shared).saturating_sub(1).min(MAX_ACCEPTORS);
        self.wanted.store(want, Ordering::Release);
        self.threads.retain(|h| !h.is_finished());
        while self.threads.len() < want {
            let place = self.threads.len();
            let (Ok(listener), wanted) = (listener.try_clone(), Arc::clone(&self.wanted)) else {
                return;
            };
            let shared = Arc::clone(shared);
            match std::thread::Builder::new()
                .name("linerate-accept".into())
                .spawn(move || accept_crr(&listener, &shared, &wanted, place))
            {
                Ok(h) => self.threads.push(h),
                Err(e) => {
                    log!("linerate server: cannot start an accepting thread: {e}");
                    return;
                }
            }
        }
    }

    /// Ends them all (the accept loop is ending).
    fn end(self) {
        self.wanted.store(0, Ordering::Release);
        for h in self.threads {
            let _ = h.join();
        }
    }
}

/// An acceptor at `place` (from 0): accepts on its copy of the listener
/// while more than `place` are wanted, answers crr transactions through a
/// crr pool of its own and hands anything else to the usual handling.
fn accept_crr(listener: &TcpListener, shared: &Arc<Shared>, wanted: &AtomicUsize, place: usize) {
    let routes = Arc::new(CrrRoutes(Arc::clone(shared)));
    let crr = CrrPool::new(Arc::clone(&routes) as Arc<dyn CrrHost>);
    while wanted.load(Ordering::Acquire) > place && !shared.stopping() {
        let (sock, peer) = match listener.accept() {
            Ok(x) => x,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                // The listener is shared: a busy-polled test's accept loop
                // may have made it non-blocking.
                let _ = socket::wait_readable(listener, ACCEPT_TICK);
                continue;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::TimedOut | std::io::ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            Err(e) => {
                // As the accept loop does: per-connection failures
                // (EMFILE…) must not spin this thread.
                shared.guard.log.log(format_args!("accept: {e}"));
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let peer = socket::canonical(peer);
        if !permitted(shared, peer) {
            continue;
        }
        if let Offer::NotCrr(conn) = crr.offer(sock, peer, None) {
            routes.not_crr(conn, peer);
        }
    }
    // Its pool may still hold connections waiting for their requests (the
    // last ones it accepted may be the next test's): dropped, they would
    // close unanswered. They are answered or expire, and the worker ends.
    while !crr.drained() && !shared.stopping() {
        std::thread::sleep(ACCEPT_TICK);
    }
}

/// One accept: a connection, or `None` after a tick without one (a
/// spinning listener may go back to blocking then) or an error, logged
/// and backed off from.
fn accept(
    listener: &TcpListener,
    spin: &mut Option<AcceptSpin>,
    shared: &Shared,
) -> Option<(TcpStream, SocketAddr)> {
    match listener.accept() {
        Ok(x) => {
            if let Some(s) = spin.as_mut() {
                s.accepted();
            }
            Some(x)
        }
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && spin.is_some() => {
            let slept = spin
                .as_mut()
                .is_some_and(|s| s.would_block(listener, ACCEPT_TICK));
            if slept && crr_spin(shared).is_none() {
                spin_listener(listener, spin, None, shared);
            }
            None
        }
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock
                    | std::io::ErrorKind::TimedOut
                    | std::io::ErrorKind::Interrupted
            ) =>
        {
            None
        }
        Err(e) => {
            // Per-connection failures (e.g. ECONNABORTED, EMFILE) must
            // not take the server down; back off briefly.
            shared.guard.log.log(format_args!("accept: {e}"));
            std::thread::sleep(Duration::from_millis(50));
            None
        }
    }
}

/// The server is stopping: its running tests get [`SHUTDOWN_GRACE`] to
/// exchange results; what did not finish in time ends with the process.
fn wind_down(sessions: &mut Vec<JoinHandle<()>>) {
    log!("linerate server: stopping: running tests end now, their clients get what was measured");
    let until = Instant::now() + SHUTDOWN_GRACE;
    while Instant::now() < until && sessions.iter().any(|h| !h.is_finished()) {
        std::thread::sleep(ACCEPT_TICK);
    }
    // What did not finish in time ends with the process.
    sessions.retain(|h| !h.is_finished());
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
        if let Route::Crr(c, _) = r {
            mode = Some(mode.flatten().or_else(|| c.spin_mode()));
        }
    }
    mode
}

/// How many threads should accept now: the most any running crr test
/// wants (1 without one).
fn crr_accepting(shared: &Shared) -> usize {
    let Ok(routes) = shared.routes.lock() else {
        return 1;
    };
    routes
        .values()
        .filter_map(|(_, r)| match r {
            Route::Crr(c, _) => Some(c.accepting()),
            Route::Streams(_) => None,
        })
        .max()
        .unwrap_or(1)
}

/// How the accepting thread should spin now: `None` unless a busy-polled
/// crr test runs.
fn crr_spin(shared: &Shared) -> Option<SpinMode> {
    crr_mode(shared).flatten()
}

/// Makes the listener defer each accept to its connection's first bytes
/// ([`socket::set_defer_accept`]) while a crr test runs, and stop after;
/// a refusal is logged (crr then goes on, answering more transactions on
/// the pool's worker).
fn defer_while_crr(listener: &TcpListener, deferring: &mut bool, shared: &Shared) {
    let want = crr_mode(shared).is_some();
    if want == *deferring {
        return;
    }
    match socket::set_defer_accept(listener, want) {
        Ok(()) => *deferring = want,
        Err(e) => {
            shared.guard.log.log(format_args!("crr: {e}"));
            // Not tried again for every connection.
            *deferring = want;
        }
    }
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

/// The crr test `token` names, for a transaction's connection from
/// `peer`: only from the address that opened the test's control
/// connection ([`guard::data_from_owner`], every data connection's rule);
/// any other goes the usual way ([`super::connection`]), which refuses
/// and logs it.
fn crr_route(
    routes: &Mutex<HashMap<Token, (IpAddr, Route)>>,
    token: &Token,
    peer: SocketAddr,
) -> Option<Arc<CrrServer>> {
    match routes.lock().ok()?.get(token) {
        Some((owner, Route::Crr(c, _))) if guard::data_from_owner(*owner, peer, "").is_ok() => {
            Some(Arc::clone(c))
        }
        _ => None,
    }
}

/// A connection's place among `--max-connections` ([`guard::ConnSlots`]),
/// or a refusal counted, and logged through the throttle, alike for every
/// connection the server holds: the accept loop's, the crr pool's waiting
/// transactions and the connections it hands back. `who`: the connection,
/// in the log line.
fn conn_slot(
    guard: &guard::Guard,
    metrics: &Metrics,
    who: std::fmt::Arguments<'_>,
) -> Option<guard::ConnSlot> {
    let slot = guard.slots.try_take();
    if slot.is_none() {
        metrics.rejected("max_connections");
        metrics.limit_hit("max_connections");
        guard.log.log(format_args!(
            "{who}: {} connections already open (--max-connections), closing",
            guard.cfg.max_connections
        ));
    }
    slot
}

/// `peer`'s place among the connections one address may hold before their
/// first bytes say what they are ([`guard::first_bytes_per_source`]), or a
/// refusal (counted, logged): one host's silent connections cannot take
/// every connection thread for a handshake time.
fn first_bytes_slot(shared: &Shared, peer: SocketAddr) -> Option<guard::SourceSlot> {
    let places = &shared.guard.first_bytes;
    let slot = places.try_take(peer.ip());
    if slot.is_none() {
        shared.metrics.rejected("first_bytes_per_source");
        shared.metrics.limit_hit("first_bytes_per_source");
        shared.guard.log.log(format_args!(
            "{}: {} connections that have not said what they are yet (the most one address may have), closing another",
            peer.ip(),
            places.max()
        ));
    }
    slot
}

/// The server's side of the crr pool: its routes, its usual connection
/// handling, its log.
struct CrrRoutes(Arc<Shared>);

impl CrrHost for CrrRoutes {
    fn crr(&self, token: &Token, peer: SocketAddr) -> Option<Arc<CrrServer>> {
        crr_route(&self.0.routes, token, peer)
    }

    fn not_crr(&self, conn: ReadAhead, peer: SocketAddr) {
        let shared = Arc::clone(&self.0);
        let seq = shared.accepted.fetch_add(1, Ordering::Relaxed);
        let Some(slot) = conn_slot(&shared.guard, &shared.metrics, format_args!("{peer}")) else {
            return;
        };
        let Some(first_bytes) = first_bytes_slot(&shared, peer) else {
            return;
        };
        if let Err(e) = std::thread::Builder::new()
            .name("linerate-conn".into())
            .spawn(move || {
                let _slot = slot;
                handle_connection(conn, peer, seq, first_bytes, &shared)
            })
        {
            self.0
                .guard
                .log
                .log(format_args!("cannot start a thread for {peer}: {e}"));
        }
    }

    fn hold(&self) -> Option<Box<dyn Send>> {
        let (guard, metrics) = (&self.0.guard, &self.0.metrics);
        let slot = conn_slot(guard, metrics, format_args!("crr: a waiting transaction"))?;
        Some(Box::new(slot))
    }

    fn unknown(&self, peer: SocketAddr) -> Option<Box<dyn Send>> {
        let place = first_bytes_slot(&self.0, peer)?;
        Some(Box::new(place))
    }

    fn failed(&self, peer: SocketAddr, e: &linerate_engine::EngineError) {
        self.0
            .guard
            .log
            .log(format_args!("{peer}: crr transaction: {e}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 24: `--max-connections` turned connections away in three
    /// copies (the accept loop, the crr pool's waiting transactions, the
    /// connections the pool hands back), and the last neither counted the
    /// limit nor logged it. One function now, counted alike.
    #[test]
    fn issue_24_every_connection_the_server_holds_counts_against_one_cap() {
        let cfg = guard::GuardConfig {
            max_connections: 1,
            ..guard::GuardConfig::default()
        };
        let g = guard::Guard::new(cfg, 1);
        let m = Metrics::default();
        let held = conn_slot(&g, &m, format_args!("first")).expect("room for one");
        assert!(conn_slot(&g, &m, format_args!("second")).is_none());
        let text = m.text();
        assert!(
            text.contains("limit=\"max_connections\"} 1"),
            "the refusal is counted as the limit hit: {text}"
        );
        drop(held);
        assert!(conn_slot(&g, &m, format_args!("third")).is_some());
    }
    use linerate_proto::spec::{TestKind, TestSpec};

    /// Issue 24: a crr transaction's connection taken by the crr pool
    /// (`server --busy-poll`, or crr served while others run) found its
    /// test by token alone, skipping the address check every other data
    /// connection passes; from another address it now goes the usual way,
    /// which refuses and logs it.
    #[test]
    fn issue_24_crr_pool_connections_pass_the_data_address_rule() {
        let spec = TestSpec {
            kind: TestKind::Crr,
            rr: Some(linerate_proto::spec::RrSpec::default()),
            ..TestSpec::default()
        };
        let crr = CrrServer::new(spec.rr_plan().expect("crr plan"));
        let token = Token([7; linerate_proto::wire::TOKEN_LEN]);
        let owner: IpAddr = "127.0.0.1".parse().expect("ip");
        let session = std::sync::mpsc::channel().0;
        let routes = Mutex::new(HashMap::from([(token, (owner, Route::Crr(crr, session)))]));
        let from = |a: &str| a.parse::<SocketAddr>().expect("addr");
        assert!(crr_route(&routes, &token, from("127.0.0.1:4000")).is_some());
        assert!(crr_route(&routes, &token, from("127.0.0.2:4000")).is_none());
    }
}
