//! The TCP stream loops, generic over the engine: a sender writes one
//! buffer repeatedly until stopped or its byte count is written, then shuts
//! down its write side; a receiver reads to end of stream. They count
//! progress in the stream's counter and check the side's signals once per
//! call; the engine only moves the bytes.

use std::net::{Shutdown, TcpStream};
use std::time::Duration;

use crate::engines::{with_engine, Engine, EngineKind, TcpRx, TcpTx};
use crate::stream::{is_timeout, map_err, Signals, StreamCounter, StreamEnd, POLL};
use crate::wait::{stream_end, Wait, Waiter};

/// Longest `poll(2)` sleep of a busy-polling stream once its spin budget is
/// spent: the loops look at their flags at least this often.
const SPIN_SLEEP: Duration = POLL;

/// Writes `buf` repeatedly on `sock` with engine `kind` until stopped or
/// `limit` bytes are written, then shuts down the write side so the
/// receiver sees end of stream. `wait`: blocking calls bounded by the
/// socket's timeout, or busy polling (a socket made non-blocking by
/// [`crate::wait::prepare_stream`]).
pub fn send(
    kind: EngineKind,
    sock: &TcpStream,
    buf: &[u8],
    limit: Option<u64>,
    counter: &StreamCounter,
    signals: &Signals,
    wait: Wait,
) -> StreamEnd {
    with_engine!(kind, e => send_with(e, sock, buf, limit, counter, signals, wait))
}

/// Reads `sock` with engine `kind` until end of stream or abort;
/// `skip_copy`: consume the bytes without copying them (`MSG_TRUNC`).
pub fn recv(
    kind: EngineKind,
    sock: &TcpStream,
    buf: &mut [u8],
    counter: &StreamCounter,
    signals: &Signals,
    wait: Wait,
    skip_copy: bool,
) -> StreamEnd {
    with_engine!(kind, e => recv_with(e, sock, buf, counter, signals, wait, skip_copy))
}

fn send_with<E: Engine>(
    engine: E,
    sock: &TcpStream,
    buf: &[u8],
    limit: Option<u64>,
    counter: &StreamCounter,
    signals: &Signals,
    wait: Wait,
) -> StreamEnd {
    let mut io = match engine.tcp_tx(sock) {
        Ok(io) => io,
        Err(e) => return StreamEnd::failed(e),
    };
    let mut waiter = Waiter::new(wait, signals, true);
    let call = waiter.call();
    let mut calls = 0u64;
    let mut remaining = limit.unwrap_or(u64::MAX);
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
        match io.write_repeated(sock, &buf[..n], times, call) {
            Ok(0) => break Err(crate::EngineError::PeerReset("write returned 0".into())),
            Ok(k) => {
                counter.add(k as u64);
                remaining -= k as u64;
                waiter.progressed();
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if is_timeout(&e) => {
                if let Err(e) = waiter.would_block(sock, libc::POLLOUT, SPIN_SLEEP, None) {
                    break stream_end(e);
                }
            }
            Err(e) => break Err(map_err("write", e)),
        }
    };
    StreamEnd {
        calls,
        poll_sleeps: waiter.sleeps(),
        result,
    }
}

fn recv_with<E: Engine>(
    engine: E,
    sock: &TcpStream,
    buf: &mut [u8],
    counter: &StreamCounter,
    signals: &Signals,
    wait: Wait,
    skip_copy: bool,
) -> StreamEnd {
    let mut io = match engine.tcp_rx(sock, skip_copy) {
        Ok(io) => io,
        Err(e) => return StreamEnd::failed(e),
    };
    let mut waiter = Waiter::new(wait, signals, true);
    let call = waiter.call();
    let mut calls = 0u64;
    let result = loop {
        if signals.aborted() {
            break Ok(());
        }
        calls += 1;
        match io.read(sock, buf, call) {
            Ok(0) => break Ok(()),
            Ok(k) => {
                counter.add(k as u64);
                waiter.progressed();
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if is_timeout(&e) => {
                if let Err(e) = waiter.would_block(sock, libc::POLLIN, SPIN_SLEEP, None) {
                    break stream_end(e);
                }
            }
            Err(e) => break Err(map_err("read", e)),
        }
    };
    StreamEnd {
        calls,
        poll_sleeps: waiter.sleeps(),
        result,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_proto::rr_core::SpinMode;
    use std::net::TcpListener;

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").expect("listen");
        let a = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (b, _) = l.accept().expect("accept");
        (a, b)
    }

    #[test]
    fn a_byte_limited_stream_arrives_whole_with_either_wait_policy() {
        for wait in [Wait::Block, Wait::Spin(SpinMode::Shared)] {
            let (tx, rx) = pair();
            if wait != Wait::Block {
                crate::wait::prepare_stream(&tx).expect("busy poll");
                crate::wait::prepare_stream(&rx).expect("busy poll");
            }
            let signals = std::sync::Arc::new(Signals::default());
            let s2 = std::sync::Arc::clone(&signals);
            let reader = std::thread::spawn(move || {
                let c = StreamCounter::default();
                let mut buf = vec![0u8; 1000];
                let end = recv_with(crate::engines::Syscall, &rx, &mut buf, &c, &s2, wait, false);
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
                wait,
            );
            end.result.expect("sent");
            assert_eq!(c.get(), 100_000);
            assert_eq!(reader.join().expect("reader"), 100_000, "{wait:?}");
        }
    }
}
