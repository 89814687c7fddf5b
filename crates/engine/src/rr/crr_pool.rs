//! Serving crr transactions without a thread per connection.
//!
//! A crr client opens a connection per transaction and writes its greeting
//! and request in one call, so by the time the server has accepted the
//! connection they are usually queued. The accepting thread reads them in
//! one `recv(2)` and, when the whole request is there, answers and closes:
//! accept, recv, send, close. A connection that is not a crr transaction
//! goes on to the server's usual handling with the bytes read from it
//! ([`ReadAhead`], which whoever reads it next takes first; until issue 26
//! a `MSG_PEEK` looked first and a read took the same bytes again, one
//! call more per transaction). A connection whose bytes are not all there yet (or
//! whose response does not fit the socket buffer) goes to the pool's one
//! worker thread, which waits for all of its connections in one `poll(2)`
//! and finishes them the same way. No thread is started per connection,
//! and no socket option is set. The worker ends after [`WORKER_IDLE`]
//! without connections, so a server at rest holds no thread for crr.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use linerate_proto::rr_core::{SpinBudget, SpinMode};
use linerate_proto::wire::{self, DataGreeting, Token};

use crate::clock::mono_ns;
use crate::read_ahead::ReadAhead;
use crate::wait::{SPIN_BUDGET, SPIN_CHECK};
use crate::EngineError;

use super::crr::{CrrServer, Ticket};

/// How long a connection may take to send its greeting and request, or to
/// read its response, before the pool drops it.
const PENDING_LIMIT: Duration = Duration::from_secs(10);
/// Request bytes the first `recv` makes room for (crr's default size is
/// 1); the room grows to the largest transaction seen.
const FIRST_REQUEST: usize = 64;
/// How often the worker wakes without events, to expire connections and
/// notice that the pool is gone.
const WORKER_TICK: Duration = Duration::from_millis(100);
/// How long the worker waits without connections before it ends (the
/// next connection that must wait starts it again).
const WORKER_IDLE: Duration = Duration::from_secs(1);

/// What the pool needs from the server that owns it.
pub trait CrrHost: Send + Sync + 'static {
    /// The crr test that `token` names, if one is running and `peer` may
    /// take part in it (else the connection goes the usual way).
    fn crr(&self, token: &Token, peer: SocketAddr) -> Option<Arc<CrrServer>>;
    /// A connection that is not a crr transaction, with the bytes the pool
    /// read from it: the server's usual handling takes it.
    fn not_crr(&self, conn: ReadAhead, peer: SocketAddr);
    /// A crr transaction failed (for the server's log).
    fn failed(&self, peer: SocketAddr, e: &EngineError);
    /// A place among the server's open connections (`--max-connections`),
    /// held while the worker keeps a connection waiting; `None` when there
    /// is none, and the connection is closed.
    fn hold(&self) -> Option<Box<dyn Send>>;
    /// A place among the connections `peer`'s address may keep waiting
    /// before their first bytes say what they are (the server's per-source
    /// cap, issue 28), held while a connection waits for its greeting;
    /// `None` when the address has no room left, and it is closed.
    fn unknown(&self, peer: SocketAddr) -> Option<Box<dyn Send>>;
}

/// What became of an offered connection.
#[derive(Debug)]
pub enum Offer {
    /// A crr transaction: answered, or handed to the pool's worker.
    Taken,
    /// Not a crr transaction (with the bytes read from it): handle it as
    /// usual.
    NotCrr(ReadAhead),
}

/// One connection the pool is looking after.
struct Conn {
    sock: TcpStream,
    peer: SocketAddr,
    since: Instant,
    state: State,
    /// Its place among the server's connections, while it waits.
    held: Option<Box<dyn Send>>,
    /// Its place among its address's connections that have not said which
    /// test they belong to, while it waits for its greeting: without it one
    /// host's silent connections could take every place a crr test's
    /// waiting transactions and other clients need (issue 28).
    unknown: Option<Box<dyn Send>>,
    /// Its greeting named a running crr test and came from its peer.
    known: bool,
}

enum State {
    /// Waiting for the whole greeting and request; `got`: the bytes read
    /// so far (empty, not allocated, until the connection has to wait).
    Greeting { got: Vec<u8> },
    /// The response, partly sent.
    Responding {
        ticket: Ticket,
        resp: Vec<u8>,
        sent: usize,
    },
}

/// What a step on a connection left to do.
enum Step {
    /// Finished (answered, failed or closed by the peer): drop it.
    Done,
    /// Waiting for these `poll(2)` events.
    Wait(libc::c_short),
    /// Not a crr transaction.
    Other,
}

impl Conn {
    /// The connection with the bytes read from it, for the usual handling.
    fn read_ahead(self) -> ReadAhead {
        let got = match self.state {
            State::Greeting { got } => got,
            State::Responding { .. } => Vec::new(),
        };
        ReadAhead::new(self.sock, got)
    }
}

/// Buffers reused across connections.
#[derive(Default)]
struct Scratch {
    /// What the connection sent: greeting, then request.
    got: Vec<u8>,
    resp: Vec<u8>,
}

fn would_block(e: &std::io::Error) -> bool {
    e.kind() == ErrorKind::WouldBlock
}

/// `recv(2)` without waiting.
fn recv_now(sock: &TcpStream, buf: &mut [u8]) -> std::io::Result<usize> {
    // SAFETY: the pointer and length describe `buf`, which outlives the call.
    let n = unsafe {
        libc::recv(
            sock.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_DONTWAIT,
        )
    };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// `send(2)` of a response without waiting (and without `SIGPIPE`).
/// `MSG_MORE` holds back its last, partial segment: the close that
/// follows every response sends it with the FIN, one segment instead of
/// two, so the client reads the response and the server's close from one
/// wakeup (issue 26).
fn send_now(sock: &TcpStream, buf: &[u8]) -> std::io::Result<usize> {
    let flags = libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL | libc::MSG_MORE;
    // SAFETY: the pointer and length describe `buf`, which outlives the call.
    let n = unsafe { libc::send(sock.as_raw_fd(), buf.as_ptr().cast(), buf.len(), flags) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// Sends what is left of a response; `Ok(true)` once all of it is out.
fn send_rest(sock: &TcpStream, resp: &[u8], sent: &mut usize) -> Result<bool, EngineError> {
    while *sent < resp.len() {
        match send_now(sock, &resp[*sent..]) {
            Ok(n) => *sent += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if would_block(&e) => return Ok(false),
            Err(e) => return Err(crate::stream::map_err("send", e)),
        }
    }
    Ok(true)
}

/// Moves `conn` on as far as it can go without waiting.
fn step(conn: &mut Conn, host: &dyn CrrHost, scratch: &mut Scratch) -> Step {
    let r = match &mut conn.state {
        State::Greeting { .. } => greet(conn, host, scratch),
        State::Responding { ticket, resp, sent } => match send_rest(&conn.sock, resp, sent) {
            Ok(true) => {
                ticket.finish(Ok(()));
                Ok(Step::Done)
            }
            Ok(false) => Ok(Step::Wait(libc::POLLOUT)),
            Err(e) => {
                ticket.finish(Err(&e));
                Err(e)
            }
        },
    };
    r.unwrap_or_else(|e| {
        host.failed(conn.peer, &e);
        Step::Done
    })
}

/// The greeting state: one `recv` takes what is queued after the bytes
/// read before; when the greeting and request are all in, answer and send.
/// A connection that waits, or is not a crr transaction, keeps what was
/// read in its state (for the next `recv`, or the usual handling).
fn greet(conn: &mut Conn, host: &dyn CrrHost, scratch: &mut Scratch) -> Result<Step, EngineError> {
    let got = match &mut conn.state {
        State::Greeting { got } => std::mem::take(got),
        State::Responding { .. } => unreachable!("greet is called while greeting"),
    };
    // The buffer keeps the size of the largest transaction seen so far, so
    // one `recv` usually takes greeting and request; bytes read before (a
    // connection that waited) come first.
    let buf = &mut scratch.got;
    let room = wire::HEADER_LEN + wire::DATA_HELLO_LEN + FIRST_REQUEST;
    if buf.len() < got.len() + room {
        buf.resize(got.len() + room, 0);
    }
    let mut have = got.len();
    buf[..have].copy_from_slice(&got);
    loop {
        let n = match recv_now(&conn.sock, &mut buf[have..]) {
            Ok(0) => return Ok(Step::Done), // closed before its request
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) if would_block(&e) => {
                return Ok(keep(conn, got, &buf[..have], Step::Wait(libc::POLLIN)))
            }
            Err(e) => return Err(crate::stream::map_err("recv", e)),
        };
        have += n;
        let full = have == buf.len();
        let (hello, used) = match wire::data_greeting(&buf[..have]) {
            DataGreeting::NeedMore => {
                return Ok(keep(conn, got, &buf[..have], Step::Wait(libc::POLLIN)))
            }
            DataGreeting::Other => return Ok(keep(conn, got, &buf[..have], Step::Other)),
            DataGreeting::Hello(h, used) => (h, used),
        };
        let Some(crr) = host
            .crr(&hello.token, conn.peer)
            .filter(|c| !c.is_load(&hello))
        else {
            // Not a transaction (another test's, or a load stream).
            return Ok(keep(conn, got, &buf[..have], Step::Other));
        };
        // A transaction of a running test from its peer: no longer unknown.
        conn.unknown = None;
        conn.known = true;
        let (req_len, resp_len) = crr.sizes(&hello)?;
        let total = used + req_len;
        if have < total {
            if full {
                // More may be queued: read again with room for the request.
                buf.resize(total.max(buf.len()), 0);
                continue;
            }
            return Ok(keep(conn, got, &buf[..have], Step::Wait(libc::POLLIN)));
        }
        let mut ticket = crr.begin(&hello)?;
        scratch.resp.resize(resp_len, 0);
        if let Err(e) = ticket.answer(&buf[used..total], &mut scratch.resp) {
            ticket.finish(Err(&e));
            return Err(e);
        }
        let mut sent = 0;
        return match send_rest(&conn.sock, &scratch.resp, &mut sent) {
            Ok(true) => {
                ticket.finish(Ok(()));
                Ok(Step::Done)
            }
            Ok(false) => {
                conn.state = State::Responding {
                    ticket,
                    resp: scratch.resp.clone(),
                    sent,
                };
                Ok(Step::Wait(libc::POLLOUT))
            }
            Err(e) => {
                ticket.finish(Err(&e));
                Err(e)
            }
        };
    }
}

/// Keeps `bytes`, what `conn` sent so far, with it (in `got`'s
/// allocation), for its next `recv` or the usual handling; then `step`.
fn keep(conn: &mut Conn, mut got: Vec<u8>, bytes: &[u8], step: Step) -> Step {
    got.clear();
    got.extend_from_slice(bytes);
    conn.state = State::Greeting { got };
    step
}

/// A busy-polled crr test's accepting thread: it spins on its
/// non-blocking listener within the spin budget after each connection, then
/// sleeps in `poll(2)` until the next one (so a server whose client has
/// stopped connecting spins for one budget, not until the test ends).
#[derive(Debug)]
pub struct AcceptSpin {
    budget: SpinBudget,
    spins: u32,
}

impl AcceptSpin {
    pub fn new(mode: SpinMode) -> AcceptSpin {
        AcceptSpin {
            budget: SpinBudget::new(mode, SPIN_BUDGET),
            spins: 0,
        }
    }

    /// How it spins.
    pub fn mode(&self) -> SpinMode {
        self.budget.mode()
    }

    /// A connection was accepted: the next wait starts a fresh budget.
    pub fn accepted(&mut self) {
        self.budget.done();
    }

    /// `accept` on `listener` would block: spin on, or (the budget spent)
    /// sleep until a connection is ready, at most `tick`. True when it
    /// slept: the caller's cue to see whether it should still spin.
    pub fn would_block(&mut self, listener: &impl AsRawFd, tick: Duration) -> bool {
        self.spins = self.spins.wrapping_add(1);
        if self.spins & (SPIN_CHECK - 1) != 0 {
            std::hint::spin_loop();
            return false;
        }
        if self.budget.keep_spinning(mono_ns()) {
            if self.budget.mode() == SpinMode::Shared {
                std::thread::yield_now();
            }
            return false;
        }
        // An error here (EINTR aside, none is expected on a listener) comes
        // back at the next accept, which reports it.
        let _ = crate::socket::wait_readable(listener, tick);
        true
    }
}

/// The pool's worker thread, started on first use.
struct Worker {
    tx: Sender<Conn>,
    /// Written to wake the worker when a connection is handed over.
    wake: UnixStream,
    handle: JoinHandle<()>,
}

/// Serves crr transactions on the accepting thread and one worker thread.
pub struct CrrPool {
    host: Arc<dyn CrrHost>,
    stop: Arc<AtomicBool>,
    /// Shared with the worker, which clears it when it ends idle: a
    /// connection is handed over and the worker decides to end under this
    /// lock, so none is handed to a worker that is ending.
    worker: Arc<Mutex<Option<Worker>>>,
    /// Workers started so far (for tests).
    starts: std::sync::atomic::AtomicUsize,
    /// The accepting thread's buffers.
    scratch: Mutex<Scratch>,
}

impl std::fmt::Debug for CrrPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CrrPool").finish_non_exhaustive()
    }
}

impl CrrPool {
    pub fn new(host: Arc<dyn CrrHost>) -> CrrPool {
        CrrPool {
            host,
            stop: Arc::new(AtomicBool::new(false)),
            worker: Arc::new(Mutex::new(None)),
            starts: std::sync::atomic::AtomicUsize::new(0),
            scratch: Mutex::new(Scratch::default()),
        }
    }

    /// Offers a connection just accepted while a crr test runs. Runs on
    /// the accepting thread: it never sleeps. With `spin` (a busy-polled
    /// test) it looks again for a request not yet there, within the spin
    /// budget, before handing the connection over: a spinning accept
    /// usually takes a connection before its client has written (on
    /// loopback the handshake ends inside the client's `connect`).
    pub fn offer(&self, sock: TcpStream, peer: SocketAddr, spin: Option<SpinMode>) -> Offer {
        let mut conn = Conn {
            sock,
            peer,
            since: Instant::now(),
            state: State::Greeting { got: Vec::new() },
            held: None,
            unknown: None,
            known: false,
        };
        let Ok(mut scratch) = self.scratch.lock() else {
            return Offer::NotCrr(conn.read_ahead());
        };
        let mut next = step(&mut conn, self.host.as_ref(), &mut scratch);
        if let Some(mode) = spin {
            let mut budget = SpinBudget::new(mode, SPIN_BUDGET);
            let mut spins = 0u32;
            while matches!(next, Step::Wait(libc::POLLIN)) {
                spins = spins.wrapping_add(1);
                if spins & (SPIN_CHECK - 1) == 0 {
                    if !budget.keep_spinning(mono_ns()) {
                        break;
                    }
                    if mode == SpinMode::Shared {
                        std::thread::yield_now();
                    }
                }
                std::hint::spin_loop();
                next = step(&mut conn, self.host.as_ref(), &mut scratch);
            }
        }
        drop(scratch);
        match next {
            Step::Done => Offer::Taken,
            Step::Other => Offer::NotCrr(conn.read_ahead()),
            Step::Wait(_) => match self.hand_over(conn) {
                Ok(()) => Offer::Taken,
                Err(conn) => Offer::NotCrr(conn),
            },
        }
    }

    /// True when no connection waits in the pool (its worker, which ends
    /// after `WORKER_IDLE` without any, has ended): dropping the pool
    /// now closes none.
    pub fn drained(&self) -> bool {
        self.worker.lock().map_or(true, |w| w.is_none())
    }

    /// Gives a waiting connection to the worker (starting it if need be);
    /// the connection back, with what was read from it, if there is no
    /// worker. Over `--max-connections` it is closed instead: waiting
    /// connections hold descriptors as threads do.
    fn hand_over(&self, mut conn: Conn) -> Result<(), ReadAhead> {
        let Some(held) = self.host.hold() else {
            return Ok(());
        };
        conn.held = Some(held);
        if !conn.known {
            let Some(place) = self.host.unknown(conn.peer) else {
                return Ok(());
            };
            conn.unknown = Some(place);
        }
        let Ok(mut w) = self.worker.lock() else {
            return Err(conn.read_ahead());
        };
        if w.is_none() {
            *w = self.start_worker();
        }
        let Some(worker) = w.as_ref() else {
            return Err(conn.read_ahead());
        };
        worker.tx.send(conn).map_err(|e| e.0.read_ahead())?;
        // A full wake-up socket already has a wake-up queued.
        let _ = (&worker.wake).write(&[1]);
        Ok(())
    }

    fn start_worker(&self) -> Option<Worker> {
        let (wake, wake_rx) = UnixStream::pair().ok()?;
        wake.set_nonblocking(true).ok()?;
        wake_rx.set_nonblocking(true).ok()?;
        let (tx, rx) = mpsc::channel();
        let host = Arc::clone(&self.host);
        let stop = Arc::clone(&self.stop);
        let slot = Arc::clone(&self.worker);
        let handle = std::thread::Builder::new()
            .name("linerate-crr".into())
            .spawn(move || work(host.as_ref(), &rx, &wake_rx, &stop, &slot))
            .ok()?;
        self.starts.fetch_add(1, Ordering::Relaxed);
        Some(Worker { tx, wake, handle })
    }
}

impl Drop for CrrPool {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(w) = self.worker.lock().ok().and_then(|mut w| w.take()) {
            let _ = (&w.wake).write(&[1]);
            let _ = w.handle.join();
        }
    }
}

/// The worker: one `poll(2)` over the wake-up socket and every waiting
/// connection, each moved on when it is ready; dropped after
/// [`PENDING_LIMIT`]. Ends when the pool is dropped, or after
/// [`WORKER_IDLE`] without connections.
fn work(
    host: &dyn CrrHost,
    rx: &Receiver<Conn>,
    wake: &UnixStream,
    stop: &AtomicBool,
    slot: &Mutex<Option<Worker>>,
) {
    let mut conns: Vec<(Conn, libc::c_short)> = Vec::new();
    let mut fds: Vec<libc::pollfd> = Vec::new();
    let mut scratch = Scratch::default();
    let mut drain = [0u8; 64];
    let mut idle_since = Instant::now();
    while !stop.load(Ordering::Acquire) {
        while let Ok(c) = rx.try_recv() {
            conns.push((c, libc::POLLIN));
        }
        if !conns.is_empty() {
            idle_since = Instant::now();
        } else if idle_since.elapsed() >= WORKER_IDLE && retire(rx, slot, &mut conns) {
            return;
        }
        fds.clear();
        fds.push(libc::pollfd {
            fd: wake.as_fd().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        fds.extend(conns.iter().map(|(c, events)| libc::pollfd {
            fd: c.sock.as_raw_fd(),
            events: *events,
            revents: 0,
        }));
        // SAFETY: `fds` is a valid array of `fds.len()` pollfds.
        let rc = unsafe {
            libc::poll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                WORKER_TICK.as_millis() as libc::c_int,
            )
        };
        if rc < 0 {
            // EINTR; anything else would repeat, so back off a tick.
            if std::io::Error::last_os_error().kind() != ErrorKind::Interrupted {
                std::thread::sleep(WORKER_TICK);
            }
            continue;
        }
        if fds[0].revents != 0 {
            while matches!((&*wake).read(&mut drain), Ok(n) if n > 0) {}
        }
        // Back to front, so removing one leaves the others' indices.
        for i in (0..conns.len()).rev() {
            let ready = fds[i + 1].revents != 0;
            let expired = conns[i].0.since.elapsed() >= PENDING_LIMIT;
            if !ready && !expired {
                continue;
            }
            let s = if ready {
                step(&mut conns[i].0, host, &mut scratch)
            } else {
                Step::Wait(0)
            };
            match s {
                Step::Wait(events) if !expired => conns[i].1 = events,
                Step::Wait(_) => {
                    let (c, _) = conns.swap_remove(i);
                    expire(c, host);
                }
                Step::Done => {
                    conns.swap_remove(i);
                }
                Step::Other => {
                    let (mut c, _) = conns.swap_remove(i);
                    // Its place goes back before the usual handling takes one.
                    drop(c.held.take());
                    let peer = c.peer;
                    host.not_crr(c.read_ahead(), peer);
                }
            }
        }
    }
}

/// Ends an idle worker: under the pool's lock, so that nothing is handed
/// over meanwhile, takes what is still queued (and goes on if there was
/// any) or clears the pool's worker (the next wait starts a new one).
fn retire(
    rx: &Receiver<Conn>,
    slot: &Mutex<Option<Worker>>,
    conns: &mut Vec<(Conn, libc::c_short)>,
) -> bool {
    let Ok(mut w) = slot.lock() else {
        return false;
    };
    conns.extend(rx.try_iter().map(|c| (c, libc::POLLIN)));
    if !conns.is_empty() {
        return false;
    }
    // Dropping our own handle detaches this thread, which returns next.
    *w = None;
    true
}

/// Drops a connection that took too long, failing its transaction if it
/// had one.
fn expire(c: Conn, host: &dyn CrrHost) {
    let e = EngineError::Stalled(PENDING_LIMIT.as_secs());
    if let State::Responding { mut ticket, .. } = c.state {
        ticket.finish(Err(&e));
    }
    host.failed(c.peer, &e);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::sync::atomic::AtomicUsize;

    use linerate_proto::rr::{RequestRepr, ResponseRepr, RrHeader};
    use linerate_proto::rr_core::RrPlan;
    use linerate_proto::spec::{RrLimit, RrPhase};
    use linerate_proto::wire::{DataHello, Message, Side, TOKEN_LEN};

    const REQ: u32 = 100;
    const RESP: u32 = 200;

    struct Host {
        crr: Arc<CrrServer>,
        token: Token,
        others: Mutex<Vec<ReadAhead>>,
        failures: AtomicUsize,
        /// Connections the pool holds now, and the most it may.
        held: Arc<AtomicUsize>,
        cap: usize,
        /// Of those, the ones waiting for their greeting, and the most the
        /// (one) client address may have.
        unknown: Arc<AtomicUsize>,
        unknown_cap: usize,
    }

    /// Takes one of `cap` places counted in `count`.
    fn take(count: &Arc<AtomicUsize>, cap: usize) -> Option<Box<dyn Send>> {
        if count.fetch_add(1, Ordering::AcqRel) >= cap {
            count.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(Box::new(Held(Arc::clone(count))))
    }

    impl CrrHost for Host {
        fn crr(&self, token: &Token, _: SocketAddr) -> Option<Arc<CrrServer>> {
            (*token == self.token).then(|| Arc::clone(&self.crr))
        }
        fn not_crr(&self, conn: ReadAhead, _: SocketAddr) {
            self.others.lock().expect("lock").push(conn);
        }
        fn failed(&self, _: SocketAddr, _: &EngineError) {
            self.failures.fetch_add(1, Ordering::Relaxed);
        }
        fn hold(&self) -> Option<Box<dyn Send>> {
            take(&self.held, self.cap)
        }
        fn unknown(&self, _: SocketAddr) -> Option<Box<dyn Send>> {
            take(&self.unknown, self.unknown_cap)
        }
    }

    /// One of the test host's places; given back when dropped.
    struct Held(Arc<AtomicUsize>);

    impl Drop for Held {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::AcqRel);
        }
    }

    fn plan() -> RrPlan {
        RrPlan {
            phases: vec![RrPhase {
                index: 0,
                request: REQ,
                response: RESP,
                loaded: false,
            }],
            flows: 2,
            limit: RrLimit::Count(1),
            batch: 1,
            busy_poll: false,
            load_streams: 0,
            load_len: 0,
            gap_ns: 0,
        }
    }

    /// One crr transaction from the client's end; `split` sends the
    /// request after a pause, so the pool's worker must finish it.
    fn transaction(addr: SocketAddr, token: Token, flow: u32, seq: u64, split: bool) {
        let (mut greeting, req) = greeting_and_request(token, flow, seq);
        let mut sock = TcpStream::connect(addr).expect("connect");
        sock.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        if split {
            sock.write_all(&greeting).expect("greeting");
            std::thread::sleep(Duration::from_millis(30));
            sock.write_all(&req).expect("request");
        } else {
            greeting.extend_from_slice(&req);
            sock.write_all(&greeting).expect("greeting and request");
        }
        let mut resp = vec![0u8; RESP as usize];
        sock.read_exact(&mut resp).expect("response");
        let r = ResponseRepr::parse(&RrHeader::new_checked(&resp[..]).expect("header"))
            .expect("response header");
        assert_eq!((r.flow, r.sequence), (flow, seq));
        let mut rest = Vec::new();
        sock.read_to_end(&mut rest).expect("the server closes");
        assert!(rest.is_empty());
    }

    /// The first `n` bytes the peer of `conn` sent: those the pool read,
    /// then the socket's.
    fn first_bytes(conn: ReadAhead, n: usize) -> Vec<u8> {
        let (mut sock, mut got) = conn.into_parts();
        assert!(got.len() <= n, "read {} bytes of {n}", got.len());
        let have = got.len();
        got.resize(n, 0);
        sock.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        sock.read_exact(&mut got[have..]).expect("the rest");
        got
    }

    /// A listener, and a pool serving the crr test that `token` names.
    fn serving(token: Token) -> (TcpListener, SocketAddr, Arc<Host>, CrrPool) {
        serving_capped(token, usize::MAX)
    }

    /// [`serving`] with at most `cap` connections held.
    fn serving_capped(token: Token, cap: usize) -> (TcpListener, SocketAddr, Arc<Host>, CrrPool) {
        serving_with(token, cap, usize::MAX)
    }

    /// [`serving_capped`] with at most `unknown_cap` held before their
    /// greeting.
    fn serving_with(
        token: Token,
        cap: usize,
        unknown_cap: usize,
    ) -> (TcpListener, SocketAddr, Arc<Host>, CrrPool) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let host = Arc::new(Host {
            crr: CrrServer::new(plan()),
            token,
            others: Mutex::new(Vec::new()),
            failures: AtomicUsize::new(0),
            held: Arc::default(),
            cap,
            unknown: Arc::default(),
            unknown_cap,
        });
        let pool = CrrPool::new(Arc::clone(&host) as Arc<dyn CrrHost>);
        (listener, addr, host, pool)
    }

    #[test]
    fn issue_8_crr_pool_answers_on_the_accepting_thread_and_one_worker() {
        let token = Token([9; TOKEN_LEN]);
        let (listener, addr, host, pool) = serving(token);
        const N: u64 = 30;
        let client = std::thread::spawn(move || {
            for i in 0..N {
                transaction(addr, token, (i % 2) as u32, i, i % 5 == 0);
            }
            // Not a crr transaction: handed on with the bytes read from it.
            let mut other = TcpStream::connect(addr).expect("connect");
            other
                .write_all(&wire::to_bytes(&Message::Start))
                .expect("write");
            other
        });
        let mut taken = 0;
        for _ in 0..=N {
            let (sock, peer) = listener.accept().expect("accept");
            // Give the foreign connection's bytes time to arrive, so it is
            // judged here rather than by the worker.
            if taken == N {
                std::thread::sleep(Duration::from_millis(50));
            }
            match pool.offer(sock, peer, None) {
                Offer::Taken => taken += 1,
                Offer::NotCrr(s) => host.not_crr(s, peer),
            }
        }
        let _other = client.join().expect("client");
        assert_eq!(taken, N);
        // The split transactions went through the worker.
        assert!(pool.starts.load(Ordering::Relaxed) >= 1);
        let counted: u64 = host.crr.measurements().iter().map(|m| m.transactions).sum();
        assert_eq!(counted, N);
        // Idle, the worker ends (a server at rest holds no crr thread),
        // and the next connection that must wait starts another.
        let t = Instant::now();
        while pool.worker.lock().expect("lock").is_some() {
            assert!(
                t.elapsed() < WORKER_IDLE * 10,
                "the idle worker did not end"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let starts = pool.starts.load(Ordering::Relaxed);
        let again = std::thread::spawn(move || transaction(addr, token, 0, N, true));
        let (sock, peer) = listener.accept().expect("accept");
        assert!(matches!(pool.offer(sock, peer, None), Offer::Taken));
        again.join().expect("a transaction after the worker ended");
        assert_eq!(pool.starts.load(Ordering::Relaxed), starts + 1);
        assert_eq!(host.failures.load(Ordering::Relaxed), 0);
        let mut others = host.others.lock().expect("lock");
        assert_eq!(others.len(), 1);
        let start = wire::to_bytes(&Message::Start);
        let first = first_bytes(others.remove(0), start.len());
        assert_eq!(first, start, "none of its bytes lost");
    }

    #[test]
    fn issue_8_crr_pool_spinning_for_a_request_answers_every_transaction() {
        let token = Token([7; TOKEN_LEN]);
        let (listener, addr, host, pool) = serving(token);
        const N: u64 = 20;
        // Requests written at once (answered while spinning, or by the
        // worker if this thread was slow) and after a pause longer than
        // the budget (the worker's).
        let client = std::thread::spawn(move || {
            for i in 0..N {
                transaction(addr, token, (i % 2) as u32, i, i % 4 == 0);
            }
        });
        for i in 0..N {
            let (sock, peer) = listener.accept().expect("accept");
            let mode = [SpinMode::Dedicated, SpinMode::Shared][i as usize % 2];
            assert!(matches!(pool.offer(sock, peer, Some(mode)), Offer::Taken));
        }
        client.join().expect("client");
        let counted: u64 = host.crr.measurements().iter().map(|m| m.transactions).sum();
        assert_eq!(counted, N);
        assert_eq!(host.failures.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn issue_8_crr_pool_hands_back_connections_of_other_tests() {
        let (listener, addr, _host, pool) = serving(Token([1; TOKEN_LEN]));
        let mut c = TcpStream::connect(addr).expect("connect");
        let mut hello = Vec::new();
        DataHello {
            token: Token([2; TOKEN_LEN]),
            stream: 1,
            sender: Side::Client,
        }
        .encode(&mut hello);
        c.write_all(&hello).expect("write");
        let (sock, peer) = listener.accept().expect("accept");
        std::thread::sleep(Duration::from_millis(50));
        match pool.offer(sock, peer, None) {
            Offer::NotCrr(conn) => assert_eq!(first_bytes(conn, hello.len()), hello),
            Offer::Taken => panic!("a stream test's data connection was taken as crr"),
        }
    }

    /// Issue 26: the pool reads a new connection's greeting and request
    /// in one `recv`, so it has read the first bytes of a connection that
    /// turns out not to be a crr transaction (another test's data
    /// connection, greeting and data sent at once; a control connection;
    /// one greeting by halves, which the worker judges) before handing it
    /// on: they go with it, and with the socket's bytes make exactly what
    /// the peer sent. With a peek and a read (before) nothing was read.
    #[test]
    fn issue_26_a_connection_handed_on_keeps_the_bytes_the_pool_read() {
        let (listener, addr, host, pool) = serving(Token([1; TOKEN_LEN]));
        let mut other = Vec::new();
        DataHello {
            token: Token([2; TOKEN_LEN]),
            stream: 1,
            sender: Side::Client,
        }
        .encode(&mut other);
        other.extend((0..300u32).map(|i| i as u8)); // past the first recv's room
        let control = wire::to_bytes(&Message::Start);
        for sent in [&other, &control] {
            let mut c = TcpStream::connect(addr).expect("connect");
            c.write_all(sent).expect("write");
            let (sock, peer) = listener.accept().expect("accept");
            std::thread::sleep(Duration::from_millis(50));
            match pool.offer(sock, peer, None) {
                Offer::NotCrr(conn) => {
                    assert!(!conn.head().is_empty(), "the pool read nothing");
                    assert_eq!(&first_bytes(conn, sent.len()), sent);
                }
                Offer::Taken => panic!("taken as crr"),
            }
        }
        // The greeting in two writes: the first half waits with the
        // worker, which reads the second and hands the connection on.
        let mut c = TcpStream::connect(addr).expect("connect");
        c.write_all(&other[..10]).expect("write");
        let (sock, peer) = listener.accept().expect("accept");
        std::thread::sleep(Duration::from_millis(50));
        assert!(matches!(pool.offer(sock, peer, None), Offer::Taken));
        c.write_all(&other[10..]).expect("write");
        let t = Instant::now();
        while host.others.lock().expect("lock").is_empty() {
            assert!(t.elapsed() < Duration::from_secs(5), "never handed on");
            std::thread::sleep(Duration::from_millis(10));
        }
        let conn = host.others.lock().expect("lock").remove(0);
        assert_eq!(first_bytes(conn, other.len()), other);
    }

    #[test]
    fn issue_28_waiting_crr_connections_count_against_the_connection_cap() {
        let token = Token([7; TOKEN_LEN]);
        let (listener, addr, host, pool) = serving_capped(token, 2);
        // Five connections that never send: only two may wait.
        let clients: Vec<TcpStream> = (0..5)
            .map(|_| TcpStream::connect(addr).expect("connect"))
            .collect();
        for _ in 0..5 {
            let (sock, peer) = listener.accept().expect("accept");
            assert!(matches!(pool.offer(sock, peer, None), Offer::Taken));
        }
        assert_eq!(host.held.load(Ordering::Acquire), 2);
        let closed = clients
            .iter()
            .filter(|c| {
                c.set_read_timeout(Some(Duration::from_millis(500)))
                    .expect("timeout");
                // End of file: closed; a timeout: still waiting.
                matches!((&**c).read(&mut [0u8; 1]), Ok(0))
            })
            .count();
        assert_eq!(closed, 3, "the three over the cap are closed");
        drop(clients);
        drop(pool);
        assert_eq!(host.held.load(Ordering::Acquire), 0, "places given back");
    }

    /// The crr test's greeting and request, for a connection written by
    /// hand.
    fn greeting_and_request(token: Token, flow: u32, seq: u64) -> (Vec<u8>, Vec<u8>) {
        let mut greeting = Vec::new();
        DataHello {
            token,
            stream: plan().conn_id(0, flow),
            sender: Side::Client,
        }
        .encode(&mut greeting);
        let mut req = vec![0u8; REQ as usize];
        RequestRepr {
            flow,
            sequence: seq,
            sent_ns: None,
        }
        .emit(&mut req);
        (greeting, req)
    }

    /// Issue 28: connections waiting in the pool for their greeting hold a
    /// place of their address's per-source cap (one host's silent
    /// connections could otherwise take every place during a crr test);
    /// a transaction whose greeting is in holds none while it waits for
    /// its request.
    #[test]
    fn issue_28_connections_waiting_for_their_greeting_hold_their_addresss_places() {
        let token = Token([5; TOKEN_LEN]);
        let (listener, addr, host, pool) = serving_with(token, usize::MAX, 2);
        let silent: Vec<TcpStream> = (0..4)
            .map(|_| TcpStream::connect(addr).expect("connect"))
            .collect();
        for _ in 0..4 {
            let (sock, peer) = listener.accept().expect("accept");
            assert!(matches!(pool.offer(sock, peer, None), Offer::Taken));
        }
        assert_eq!(host.unknown.load(Ordering::Acquire), 2);
        assert_eq!(host.held.load(Ordering::Acquire), 2, "two closed");
        // A transaction whose request comes later: its greeting is in when
        // the pool first reads it, so it waits without an unknown place.
        let (greeting, req) = greeting_and_request(token, 1, 0);
        let mut late = TcpStream::connect(addr).expect("connect");
        late.write_all(&greeting).expect("greeting");
        let (sock, peer) = listener.accept().expect("accept");
        std::thread::sleep(Duration::from_millis(50));
        assert!(matches!(pool.offer(sock, peer, None), Offer::Taken));
        assert_eq!(host.held.load(Ordering::Acquire), 3);
        assert_eq!(host.unknown.load(Ordering::Acquire), 2);
        late.write_all(&req).expect("request");
        late.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let mut resp = vec![0u8; RESP as usize];
        late.read_exact(&mut resp).expect("answered");
        drop(silent);
        drop(pool);
        assert_eq!(host.unknown.load(Ordering::Acquire), 0, "places given back");
        assert_eq!(host.held.load(Ordering::Acquire), 0);
    }
}
