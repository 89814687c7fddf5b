//! The TCP stream loops, generic over the engine: a sender writes one
//! buffer repeatedly until stopped or its byte count is written, then shuts
//! down its write side; a receiver reads to end of stream. They count
//! progress in the stream's counter and check the side's signals once per
//! call; the engine only moves the bytes.

use std::net::{Shutdown, TcpStream};

use crate::engines::{with_engine, Engine, EngineKind, TcpRx, TcpTx, WaitPolicy};
use crate::stream::{is_timeout, map_err, Idle, Signals, StreamCounter, StreamEnd};
use crate::EngineError;

/// Spinning loops check the idle limit once per this many empty calls
/// (a clock read each time would dominate a spin). A power of two.
const SPIN_IDLE_CHECK: u32 = 1024;

/// Writes `buf` repeatedly on `sock` with engine `kind` until stopped or
/// `limit` bytes are written, then shuts down the write side so the
/// receiver sees end of stream.
pub fn send(
    kind: EngineKind,
    sock: &TcpStream,
    buf: &[u8],
    limit: Option<u64>,
    counter: &StreamCounter,
    signals: &Signals,
) -> StreamEnd {
    with_engine!(kind, e => send_with(e, sock, buf, limit, counter, signals, WaitPolicy::Block))
}

/// Reads `sock` with engine `kind` until end of stream or abort.
pub fn recv(
    kind: EngineKind,
    sock: &TcpStream,
    buf: &mut [u8],
    counter: &StreamCounter,
    signals: &Signals,
) -> StreamEnd {
    with_engine!(kind, e => recv_with(e, sock, buf, counter, signals, WaitPolicy::Block))
}

/// What a loop does when a call timed out or would block: fails after the
/// idle limit; when spinning, looks at the clock only now and then.
struct Stall {
    idle: Idle,
    policy: WaitPolicy,
    misses: u32,
}

impl Stall {
    fn new(policy: WaitPolicy) -> Self {
        Stall {
            idle: Idle(None),
            policy,
            misses: 0,
        }
    }
    #[inline]
    fn progressed(&mut self) {
        self.idle.progressed();
    }
    fn missed(&mut self) -> Result<(), EngineError> {
        if self.policy == WaitPolicy::Spin {
            self.misses = self.misses.wrapping_add(1);
            if self.misses & (SPIN_IDLE_CHECK - 1) != 0 {
                std::hint::spin_loop();
                return Ok(());
            }
        }
        self.idle.timed_out()
    }
}

fn send_with<E: Engine>(
    engine: E,
    sock: &TcpStream,
    buf: &[u8],
    limit: Option<u64>,
    counter: &StreamCounter,
    signals: &Signals,
    policy: WaitPolicy,
) -> StreamEnd {
    let mut io = match engine.tcp_tx(sock) {
        Ok(io) => io,
        Err(e) => {
            return StreamEnd {
                calls: 0,
                result: Err(e),
            }
        }
    };
    let wait = policy.call();
    let mut calls = 0u64;
    let mut remaining = limit.unwrap_or(u64::MAX);
    let mut stall = Stall::new(policy);
    let result = loop {
        if remaining == 0 || signals.stopping() {
            break io
                .finish(sock)
                .and_then(|()| sock.shutdown(Shutdown::Write))
                .map_err(|e| map_err("shutdown", e));
        }
        if signals.aborted() {
            break Ok(());
        }
        let n = buf
            .len()
            .min(usize::try_from(remaining).unwrap_or(usize::MAX));
        calls += 1;
        // Whole buffers the limit still allows: a batching engine may write
        // that many in one call.
        let times = usize::try_from(remaining / buf.len().max(1) as u64)
            .unwrap_or(usize::MAX)
            .max(1);
        match io.write_repeated(sock, &buf[..n], times, wait) {
            Ok(0) => break Err(EngineError::PeerReset("write returned 0".into())),
            Ok(k) => {
                counter.add(k as u64);
                remaining -= k as u64;
                stall.progressed();
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if is_timeout(&e) => {
                if let Err(e) = stall.missed() {
                    break Err(e);
                }
            }
            Err(e) => break Err(map_err("write", e)),
        }
    };
    StreamEnd { calls, result }
}

fn recv_with<E: Engine>(
    engine: E,
    sock: &TcpStream,
    buf: &mut [u8],
    counter: &StreamCounter,
    signals: &Signals,
    policy: WaitPolicy,
) -> StreamEnd {
    let mut io = match engine.tcp_rx(sock) {
        Ok(io) => io,
        Err(e) => {
            return StreamEnd {
                calls: 0,
                result: Err(e),
            }
        }
    };
    let wait = policy.call();
    let mut calls = 0u64;
    let mut stall = Stall::new(policy);
    let result = loop {
        if signals.aborted() {
            break Ok(());
        }
        calls += 1;
        match io.read(sock, buf, wait) {
            Ok(0) => break Ok(()),
            Ok(k) => {
                counter.add(k as u64);
                stall.progressed();
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if is_timeout(&e) => {
                if let Err(e) = stall.missed() {
                    break Err(e);
                }
            }
            Err(e) => break Err(map_err("read", e)),
        }
    };
    StreamEnd { calls, result }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").expect("listen");
        let a = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (b, _) = l.accept().expect("accept");
        (a, b)
    }

    #[test]
    fn a_byte_limited_stream_arrives_whole_with_either_wait_policy() {
        for policy in [WaitPolicy::Block, WaitPolicy::Spin] {
            let (tx, rx) = pair();
            if policy == WaitPolicy::Spin {
                tx.set_nonblocking(true).expect("nonblocking");
                rx.set_nonblocking(true).expect("nonblocking");
            }
            let signals = std::sync::Arc::new(Signals::default());
            let s2 = std::sync::Arc::clone(&signals);
            let reader = std::thread::spawn(move || {
                let c = StreamCounter::default();
                let mut buf = vec![0u8; 1000];
                let end = recv_with(crate::engines::Syscall, &rx, &mut buf, &c, &s2, policy);
                end.result.expect("read to end");
                c.get()
            });
            let c = StreamCounter::default();
            let buf = vec![7u8; 4096];
            let end = send_with(
                crate::engines::Syscall,
                &tx,
                &buf,
                Some(100_000),
                &c,
                &signals,
                policy,
            );
            end.result.expect("sent");
            assert_eq!(c.get(), 100_000);
            assert_eq!(reader.join().expect("reader"), 100_000, "{policy:?}");
        }
    }
}
