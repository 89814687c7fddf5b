//! Blocking I/O for control connections: write what a session queued, read
//! what arrived within a short wait, and read a connection's first frame;
//! and the one control loop that drives a session — the client's and the
//! server's alike, native and iperf3 ([`drive`]).

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::error::{fail, no_randomness, Context as _, Result, RunError};
use linerate_engine::read_ahead::ReadAhead;
use linerate_engine::runner::SideRun;
use linerate_engine::{clock, socket};
use linerate_proto::measure::{IntervalMeasurement, RrFlowMeasurement, SideResults};
use linerate_proto::session::{Ended, Session};
use linerate_proto::wire::{self, FrameHeader, Message, HEADER_LEN};

use crate::test_type;

/// How long a server waits for the client to close after its own last
/// frame ([`ControlConn::close`]): a client closes once that frame has
/// arrived, which a lossy path can delay by several retransmissions.
pub const CLOSE_LINGER: Duration = Duration::from_secs(5);

/// A control connection.
#[derive(Debug)]
pub struct ControlConn {
    sock: TcpStream,
    buf: Vec<u8>,
    timeout: Option<Duration>,
}

impl ControlConn {
    pub fn new(sock: TcpStream) -> Result<Self> {
        socket::prepare_control(&sock)?;
        // Bound every write: a peer that stops reading cannot hang us.
        sock.set_write_timeout(Some(Duration::from_secs(10)))
            .context("control write timeout")?;
        Ok(ControlConn {
            sock,
            buf: vec![0; 16 * 1024],
            timeout: None,
        })
    }

    /// The control connection's smoothed RTT and its variation (TCP_INFO).
    pub fn rtt(&self) -> Option<(Duration, Duration)> {
        linerate_engine::tcp_info::read(&self.sock).map(|t| {
            (
                Duration::from_micros(u64::from(t.rtt_us)),
                Duration::from_micros(u64::from(t.rttvar_us)),
            )
        })
    }

    /// The local address of the control connection.
    pub fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.sock.local_addr()
    }

    /// How long UDP receivers keep reading after the peer's senders
    /// finished: the spec's drain period, stretched to cover two round
    /// trips of this path (measured on this connection) for long paths.
    pub fn drain_period(&self, spec: &linerate_proto::spec::TestSpec) -> Duration {
        let base = Duration::from_millis(spec.udp.as_ref().map_or(0, |u| u.drain_ms));
        let path = self
            .rtt()
            .map_or(Duration::ZERO, |(rtt, var)| 2 * rtt + 4 * var);
        base.max(path)
    }

    /// Writes all of `bytes` (nothing when empty).
    pub fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        self.sock.write_all(bytes)
    }

    /// Waits up to `wait` for bytes. `Ok(None)`: nothing yet; `Err`: the
    /// connection ended or failed.
    pub fn recv(&mut self, wait: Duration) -> std::io::Result<Option<&[u8]>> {
        if self.timeout != Some(wait) {
            self.sock.set_read_timeout(Some(wait))?;
            self.timeout = Some(wait);
        }
        match self.sock.read(&mut self.buf) {
            Ok(0) => Err(ErrorKind::UnexpectedEof.into()),
            Ok(n) => Ok(Some(&self.buf[..n])),
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }
}

impl ControlConn {
    /// Waits up to `limit` for the peer to close (reading and dropping
    /// anything else). A client that has its results waits for the
    /// server's close, which comes after the server released the test's
    /// slot: a next test started at once is then never told "busy".
    pub fn wait_closed(&mut self, limit: Duration) {
        let deadline = Instant::now() + limit;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.recv(left.max(Duration::from_millis(1))) {
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => return,
            }
        }
    }

    /// Ends the connection without losing what is still on its way to the
    /// peer: a FIN after the last queued byte, then reading (and dropping)
    /// until the peer closes too, or for at most `limit`.
    ///
    /// A plain close is not enough on a congested path (issue 27: a UDP
    /// test through a tbf with a small queue): the last frame (a server's
    /// results) can still be waiting for retransmission when the side
    /// closes, and a socket closed with unread bytes, or that receives
    /// bytes after its close (the peer's heartbeats, still running until
    /// it has those results), is aborted by the kernel with a RST that
    /// discards the unsent tail — the peer reads "connection reset"
    /// instead of its results.
    pub fn close(mut self, limit: Duration) {
        let _ = self.sock.shutdown(std::net::Shutdown::Write);
        self.wait_closed(limit);
    }
}

/// Reads exactly one native frame from a new connection, within `limit`:
/// the bytes read ahead first ([`ReadAhead`], the crr pool's), then the
/// socket. Returns the decoded message and its raw bytes; reads nothing
/// past it from the socket (read-ahead bytes past it stay in `conn`).
pub fn read_first_frame(conn: &mut ReadAhead, limit: Duration) -> Result<(Message, Vec<u8>)> {
    let deadline = Instant::now() + limit;
    let mut raw = vec![0u8; HEADER_LEN];
    read_exact_by(conn, &mut raw, deadline)?;
    let header = FrameHeader::new_checked(&raw[..])
        .ok_or_else(|| RunError::Protocol("short header".into()))?;
    header.validate()?;
    let len = header.payload_len() as usize;
    // Before any handshake a frame is small (a Hello or a greeting), and
    // memory follows the bytes that arrive, not the length declared.
    if len > wire::MAX_PAYLOAD {
        fail!(
            Protocol,
            "first frame declares {len} bytes, more than the {} a handshake frame may have",
            wire::MAX_PAYLOAD
        );
    }
    let mut chunk = [0u8; 4096];
    while raw.len() < HEADER_LEN + len {
        let want = (HEADER_LEN + len - raw.len()).min(chunk.len());
        read_exact_by(conn, &mut chunk[..want], deadline)?;
        raw.extend_from_slice(&chunk[..want]);
    }
    match wire::decode(&raw)? {
        Some((msg, _)) => Ok((msg, raw)),
        None => fail!(Protocol, "incomplete frame"),
    }
}

/// Fills `buf` from `conn` by `deadline` (its bytes read ahead first, then
/// its socket): one deadline for the whole read, however the peer spreads
/// its bytes (a byte just inside each read's timeout does not extend it).
pub fn read_exact_by(conn: &mut ReadAhead, buf: &mut [u8], deadline: Instant) -> Result<()> {
    let n = conn.take(buf);
    let mut buf = &mut buf[n..];
    let mut sock = conn.sock();
    while !buf.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            fail!(Protocol, "timed out (--handshake-timeout)");
        }
        sock.set_read_timeout(Some(left))?;
        match sock.read(buf) {
            Ok(0) => fail!(Protocol, "peer closed the connection"),
            Ok(n) => buf = &mut buf[n..],
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// One side of a test as the control loop sees it: its session, what it
/// does for each of the session's actions, and its data phase.
pub trait ControlSide {
    type Session: Session;
    fn session(&mut self) -> &mut Self::Session;
    /// Carries out one of the session's actions.
    fn act(
        &mut self,
        action: <Self::Session as Session>::Action,
        ctrl: &mut ControlConn,
    ) -> Result<()>;
    /// Writing to the control connection failed: an error for the client,
    /// a vanished peer for the server.
    fn send_failed(&mut self, e: std::io::Error) -> Result<()>;
    /// Called after the actions, before the outbox is written.
    fn actions_done(&mut self) {}
    /// Side-specific work on every turn (the server attaches the data
    /// connections routed to it, an iperf3 client ends its test); true
    /// when the session was moved on here.
    fn turn(&mut self, _ctrl: &mut ControlConn) -> bool {
        false
    }
    /// The data phase, once started.
    fn run(&mut self) -> Option<&mut SideRun>;
    /// An interval record of this side, as it happens.
    fn interval(&mut self, m: IntervalMeasurement) -> Result<()>;
    /// rr/crr: this side's flows' measurements of a phase that ended.
    fn rr_phase(&mut self, _flows: Vec<RrFlowMeasurement>) -> Result<()> {
        Ok(())
    }
    /// Writes output made ready beside the loop since the last turn (the
    /// client's rr phase records).
    fn output_ready(&mut self) -> Result<()> {
        Ok(())
    }
    /// How long to wait for the peer before the data phase.
    fn idle_wait(&self) -> Duration;
}

/// Drives `side`'s session until it has finished: actions before bytes (a
/// server's data route must exist before the Accept that lets the client
/// open data connections goes out), then the outbox, the data phase's
/// progress, and what the peer sent — with every wait bounded and every
/// deadline called back. Leaves a final frame (an Abort) written if it can.
pub fn drive<S: ControlSide>(side: &mut S, ctrl: &mut ControlConn) -> Result<()> {
    // What this side has received, the beats its senders' receivers sent
    // back, and the transactions its rr/crr flows completed (each a
    // request or a response from the peer): growth is the peer alive
    // (`peer_data_arrived`), however little control traffic the test has.
    let mut received = 0;
    loop {
        while let Some(action) = side.session().poll_action() {
            side.act(action, ctrl)?;
        }
        side.actions_done();
        let bytes = side.session().outbox().take();
        if let Err(e) = ctrl.send(&bytes) {
            // A peer that gave up wrote why (an Abort) before it closed:
            // that, not the failed write, is the test's outcome.
            if let Ok(Some(bytes)) = ctrl.recv(Duration::from_millis(1)) {
                side.session()
                    .receive_at(bytes, Instant::now(), clock::mono_ns());
            }
            side.send_failed(e)?;
        }
        if side.turn(ctrl) {
            continue;
        }
        if let Some(counts) = side.run().and_then(|r| r.senders_done()) {
            side.session().local_senders_finished(counts);
        }
        if let Some(p) = side.run().map(|r| r.progress()) {
            let now = p.received_bytes + p.received_datagrams + p.peer_beats + p.transactions;
            if now > received {
                received = now;
                side.session().peer_data_arrived(Instant::now());
            }
        }
        while let Some(m) = side.run().and_then(|r| r.next_interval()) {
            side.interval(m)?;
        }
        while let Some(p) = side.run().and_then(|r| r.next_phase()) {
            side.rr_phase(p)?;
        }
        side.output_ready()?;
        if let Some(results) = side.run().and_then(|r| r.try_finish()) {
            side.session()
                .local_finished(completed(results), Instant::now());
            continue;
        }
        if side.session().is_finished() {
            break;
        }
        let running = side.run().is_some();
        let wait = match side.session().spec() {
            Some(spec) if running => test_type::of(spec).wake,
            _ => side.idle_wait(),
        };
        match ctrl.recv(wait) {
            Ok(Some(bytes)) => {
                // Clock probes need the arrival time; read it first.
                let t = clock::mono_ns();
                side.session().receive_at(bytes, Instant::now(), t);
            }
            Ok(None) => {}
            Err(e) => side.session().connection_ended(ended(&e)),
        }
        // Called at least every `wait` (≤ 100 ms while a test runs): a
        // longer gap, this thread descheduled on a loaded host, is not
        // counted as the peer's silence (`heartbeat::Heartbeat::awake`).
        side.session().handle_timeout(Instant::now());
    }
    // Flush a final Abort, if any; the peer may already be gone.
    let bytes = side.session().outbox().take();
    let _ = ctrl.send(&bytes);
    Ok(())
}

/// How the control connection ended, from the error [`ControlConn::recv`]
/// returned: end of file is the peer's close, a reset is said as one.
pub(crate) fn ended(e: &std::io::Error) -> Ended {
    match e.kind() {
        ErrorKind::UnexpectedEof => Ended::Closed,
        ErrorKind::ConnectionReset => Ended::Reset,
        _ => Ended::Failed(e.to_string()),
    }
}

/// A side's results as its data phase left them, completed with what the
/// host knows: the process's LD_PRELOAD and whether the data's interface
/// splits GSO runs (the report's packet-rate note).
pub fn completed(mut results: SideResults) -> SideResults {
    results.ld_preload = crate::about::ld_preload();
    if let Some(i) = results
        .kernel_udp
        .as_mut()
        .and_then(|k| k.interface.as_mut())
    {
        i.driver = linerate_host::ethtool::driver(&i.name);
    }
    results
}

/// Fresh random bytes for an authentication nonce.
pub fn nonce() -> Result<[u8; linerate_proto::auth::NONCE_LEN]> {
    let mut n = [0u8; linerate_proto::auth::NONCE_LEN];
    getrandom::fill(&mut n).map_err(|e| no_randomness("the auth nonce", e))?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// Issue 26: the crr pool reads a connection's first bytes before it
    /// knows what the connection is; a control connection it hands on
    /// keeps them, and its first frame is read from them, then from the
    /// socket, whole.
    #[test]
    fn issue_26_the_first_frame_is_read_from_the_bytes_read_ahead_then_the_socket() {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let mut c = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (s, _) = l.accept().expect("accept");
        let frame = wire::to_bytes(&Message::Start);
        // The first byte of what the peer sent next.
        let next = wire::MAGIC[0];
        for cut in [1, HEADER_LEN - 1, frame.len()] {
            // What the pool read: the frame's first `cut` bytes (all of
            // it, and the next frame's first byte, at the last cut).
            let mut head = frame[..cut].to_vec();
            if cut == frame.len() {
                head.push(next);
            }
            c.write_all(&frame[cut..]).expect("write");
            let mut conn = ReadAhead::new(s.try_clone().expect("clone"), head);
            let (msg, raw) = read_first_frame(&mut conn, Duration::from_secs(5)).expect("frame");
            assert!(matches!(msg, Message::Start), "{cut}: {msg:?}");
            assert_eq!(raw, frame, "{cut}");
            let rest: &[u8] = if cut == frame.len() { &[next] } else { &[] };
            assert_eq!(conn.head(), rest, "{cut}: read ahead past the frame, kept");
        }
    }
}
