//! Engines move bytes on one data stream. Each is a pair of loops (send,
//! receive) over an established socket, behind one trait so sessions and the
//! runner never care which engine runs.
//!
//! The loops do no allocation and read no clock while data moves: progress is
//! published through a per-stream atomic counter that the runner samples, and
//! stop/abort requests arrive through shared flags checked once per call.
//! Sockets carry a short I/O timeout ([`POLL`]) so a loop blocked on a stalled
//! peer still notices those flags.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::udp::{self, RecvJob, SendJob, UdpCounters};
use crate::EngineError;

/// I/O timeout of data sockets: how often a blocked loop checks its flags.
pub const POLL: Duration = Duration::from_millis(100);
/// A stream on which nothing moves for this long has failed.
pub const IDLE_LIMIT: Duration = Duration::from_secs(30);

/// Bytes moved on one stream, on its own cache line so streams on different
/// cores do not share one.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct StreamCounter {
    bytes: AtomicU64,
}

impl StreamCounter {
    #[inline]
    pub fn add(&self, n: u64) {
        // Only this stream's thread writes; Relaxed is enough for a sampled total.
        self.bytes.fetch_add(n, Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }
}

/// Requests from the runner to every stream of one side.
#[derive(Debug)]
pub struct Signals {
    /// Senders: finish cleanly now (time is up).
    stop: AtomicBool,
    /// Everyone: the test failed, drop out at once.
    abort: AtomicBool,
    /// UDP receivers: stop at this many ns after Start (`u64::MAX`: not yet
    /// known; set when the peer's senders have finished).
    drain_at_ns: AtomicU64,
}

impl Default for Signals {
    fn default() -> Self {
        Signals {
            stop: AtomicBool::new(false),
            abort: AtomicBool::new(false),
            drain_at_ns: AtomicU64::new(u64::MAX),
        }
    }
}

impl Signals {
    /// UDP receivers stop reading `ns` after Start.
    pub fn drain_at(&self, ns: u64) {
        self.drain_at_ns.store(ns, Ordering::Relaxed);
    }
    #[inline]
    pub fn drain_passed(&self, now_ns: u64) -> bool {
        now_ns >= self.drain_at_ns.load(Ordering::Relaxed)
    }
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }
    pub fn abort(&self) {
        self.abort.store(true, Ordering::Relaxed);
    }
    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
    pub fn aborted(&self) -> bool {
        self.abort.load(Ordering::Relaxed)
    }
}

/// How a stream loop ended.
#[derive(Debug)]
pub struct StreamEnd {
    /// Read or write calls made.
    pub calls: u64,
    pub result: Result<(), EngineError>,
}

/// A way of moving bytes on a TCP stream.
pub trait Engine: Send + Sync + std::fmt::Debug {
    /// Name shown in reports.
    fn name(&self) -> &'static str;
    /// Writes `buf` repeatedly until stopped or `limit` bytes are written,
    /// then shuts down the write side so the receiver sees end of stream.
    fn send(
        &self,
        sock: &TcpStream,
        buf: &[u8],
        limit: Option<u64>,
        counter: &StreamCounter,
        signals: &Signals,
    ) -> StreamEnd;
    /// Reads until end of stream or abort.
    fn recv(
        &self,
        sock: &TcpStream,
        buf: &mut [u8],
        counter: &StreamCounter,
        signals: &Signals,
    ) -> StreamEnd;
    /// Sends paced, numbered datagrams until stopped or the count is issued.
    fn udp_send(
        &self,
        sock: &UdpSocket,
        job: &SendJob,
        counter: &StreamCounter,
        live: &UdpCounters,
        signals: &Signals,
    ) -> (linerate_proto::measure::UdpSend, StreamEnd);
    /// Receives and checks datagrams until the drain deadline or abort.
    fn udp_recv(
        &self,
        sock: &UdpSocket,
        job: &RecvJob,
        counter: &StreamCounter,
        live: &UdpCounters,
        signals: &Signals,
    ) -> (linerate_proto::measure::UdpRecv, StreamEnd);
}

/// Names of the engines this build has, for `--engine` and its help.
pub const ENGINES: &[&str] = &["syscall", "batch"];

/// Looks up an engine by name and checks the kernel can run it.
pub fn by_name(name: &str) -> Result<&'static dyn Engine, EngineError> {
    match name {
        "syscall" => Ok(&SyscallEngine),
        "batch" => Ok(&crate::engines::batch::BatchEngine {
            gso: crate::engines::batch::Toggle::Auto,
            gro: crate::engines::batch::Toggle::Auto,
            skip_rx_copy: false,
        }),
        other => Err(EngineError::Unsupported(format!(
            "unknown engine {other:?}; this build has: {}",
            ENGINES.join(", ")
        ))),
    }
}

/// Plain blocking `write(2)`/`read(2)`, one call per buffer.
#[derive(Debug, Clone, Copy, Default)]
pub struct SyscallEngine;

/// Tracks how long a loop has gone without progress; reads the clock only
/// when an I/O call timed out.
pub(crate) struct Idle(pub(crate) Option<Instant>);

impl Idle {
    pub(crate) fn progressed(&mut self) {
        self.0 = None;
    }
    pub(crate) fn timed_out(&mut self) -> Result<(), EngineError> {
        let since = *self.0.get_or_insert_with(Instant::now);
        if since.elapsed() >= IDLE_LIMIT {
            return Err(EngineError::Stalled(IDLE_LIMIT.as_secs()));
        }
        Ok(())
    }
}

pub(crate) fn is_timeout(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

pub(crate) fn map_err(what: &str, e: std::io::Error) -> EngineError {
    match e.kind() {
        ErrorKind::BrokenPipe | ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted => {
            EngineError::PeerReset(format!("{what}: {e}"))
        }
        _ => EngineError::io(what, e),
    }
}

impl Engine for SyscallEngine {
    fn name(&self) -> &'static str {
        "syscall"
    }

    fn udp_send(
        &self,
        sock: &UdpSocket,
        job: &SendJob,
        counter: &StreamCounter,
        live: &UdpCounters,
        signals: &Signals,
    ) -> (linerate_proto::measure::UdpSend, StreamEnd) {
        udp::send_loop(sock, job, counter, live, signals)
    }

    fn udp_recv(
        &self,
        sock: &UdpSocket,
        job: &RecvJob,
        counter: &StreamCounter,
        live: &UdpCounters,
        signals: &Signals,
    ) -> (linerate_proto::measure::UdpRecv, StreamEnd) {
        udp::recv_loop(sock, job, counter, live, signals)
    }

    fn send(
        &self,
        sock: &TcpStream,
        buf: &[u8],
        limit: Option<u64>,
        counter: &StreamCounter,
        signals: &Signals,
    ) -> StreamEnd {
        let mut calls = 0u64;
        let mut remaining = limit.unwrap_or(u64::MAX);
        let mut idle = Idle(None);
        let mut w = sock;
        let result = loop {
            if remaining == 0 || signals.stopping() {
                break sock
                    .shutdown(Shutdown::Write)
                    .map_err(|e| map_err("shutdown", e));
            }
            if signals.aborted() {
                break Ok(());
            }
            let n = buf
                .len()
                .min(usize::try_from(remaining).unwrap_or(usize::MAX));
            calls += 1;
            match w.write(&buf[..n]) {
                Ok(0) => break Err(EngineError::PeerReset("write returned 0".into())),
                Ok(k) => {
                    counter.add(k as u64);
                    remaining -= k as u64;
                    idle.progressed();
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) => {
                    if let Err(e) = idle.timed_out() {
                        break Err(e);
                    }
                }
                Err(e) => break Err(map_err("write", e)),
            }
        };
        StreamEnd { calls, result }
    }

    fn recv(
        &self,
        sock: &TcpStream,
        buf: &mut [u8],
        counter: &StreamCounter,
        signals: &Signals,
    ) -> StreamEnd {
        let mut calls = 0u64;
        let mut idle = Idle(None);
        let mut r = sock;
        let result = loop {
            if signals.aborted() {
                break Ok(());
            }
            calls += 1;
            match r.read(buf) {
                Ok(0) => break Ok(()),
                Ok(k) => {
                    counter.add(k as u64);
                    idle.progressed();
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) => {
                    if let Err(e) = idle.timed_out() {
                        break Err(e);
                    }
                }
                Err(e) => break Err(map_err("read", e)),
            }
        };
        StreamEnd { calls, result }
    }
}
