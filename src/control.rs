//! Blocking I/O for control connections: write what a session queued, read
//! what arrived within a short wait, and read a connection's first frame.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use linerate_engine::socket;
use linerate_proto::wire::{self, FrameHeader, Message, HEADER_LEN};

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
}

/// Reads exactly one native frame from a new connection, within `limit`.
/// Returns the decoded message and its raw bytes; reads nothing past it.
pub fn read_first_frame(sock: &TcpStream, limit: Duration) -> Result<(Message, Vec<u8>)> {
    let deadline = Instant::now() + limit;
    let mut raw = vec![0u8; HEADER_LEN];
    read_exact_by(sock, &mut raw, deadline)?;
    let header = FrameHeader::new_checked(&raw[..]).context("short header")?;
    header.validate()?;
    let len = header.payload_len() as usize;
    // Before any handshake a frame is small (a Hello or a greeting), and
    // memory follows the bytes that arrive, not the length declared.
    if len > wire::MAX_PAYLOAD {
        bail!(
            "first frame declares {len} bytes, more than the {} a handshake frame may have",
            wire::MAX_PAYLOAD
        );
    }
    let mut chunk = [0u8; 4096];
    while raw.len() < HEADER_LEN + len {
        let want = (HEADER_LEN + len - raw.len()).min(chunk.len());
        read_exact_by(sock, &mut chunk[..want], deadline)?;
        raw.extend_from_slice(&chunk[..want]);
    }
    match wire::decode(&raw)? {
        Some((msg, _)) => Ok((msg, raw)),
        None => bail!("incomplete frame"),
    }
}

fn read_exact_by(mut sock: &TcpStream, mut buf: &mut [u8], deadline: Instant) -> Result<()> {
    while !buf.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            bail!("timed out waiting for the peer's first frame");
        }
        sock.set_read_timeout(Some(left))?;
        match sock.read(buf) {
            Ok(0) => bail!("peer closed the connection"),
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
