//! The TCP stream loops, generic over the engine: a sender writes one
//! buffer repeatedly until stopped or its byte count is written, then shuts
//! down its write side; a receiver reads to end of stream. They count
//! progress in the stream's counter and check the side's signals once per
//! call; the engine only moves the bytes. They run on a TCP endpoint
//! ([`crate::engines::tcp_endpoint`]: the kernel's `TcpStream` today),
//! generic over its type, so they name no kernel socket.
//!
//! A blocking receiver raises its socket's low-water mark (`SO_RCVLOWAT`)
//! to about [`LOWAT_WINDOW`] of the rate it measures (`LowWater`): the
//! kernel then wakes it once per that many bytes instead of once per
//! arriving segment. On loopback and veth the sender's CPU runs the
//! receive path, waking the receiver included (`sock_def_readable`, 12% of
//! a one-stream sender's CPU in `perf`), so fewer wake-ups make the sender
//! faster there; on other paths the receiver makes fewer, larger reads
//! (measured on loopback only).
//!
//! A sender's `TCP_INFO` is read once its data and FIN are acknowledged
//! ([`settle`]): what it had queued at its shutdown is still sent, and
//! resent, after it.

use std::net::Shutdown;
use std::time::{Duration, Instant};

use linerate_proto::measure::{TcpInfo, TCP_SETTLE_CAP};

use crate::clock::mono_ns;
use crate::engines::{with_engine, Engine, EngineKind, Interest, TcpEndpoint, TcpRx, TcpTx};
use crate::stream::{is_timeout, map_err, Signals, StreamCounter, StreamEnd, POLL};
use crate::wait::{stream_end, Wait, Waiter};

/// Longest `poll(2)` sleep of a busy-polling stream once its spin budget is
/// spent: the loops look at their flags at least this often.
const SPIN_SLEEP: Duration = POLL;

/// How much of the measured rate a blocking receiver's low-water mark
/// asks for. A/B on loopback, 2026-11-24, one stream pinned apart, fixed
/// marks, 3 runs each: none 26.9–31.4 Gbit/s, 128 KiB 32.3–37.8, 512 KiB
/// 34.6–42.5; at 40 Gbit/s 100 µs is 500 KB.
pub const LOWAT_WINDOW: Duration = Duration::from_micros(100);
/// Marks below this stay at the kernel's default (1 byte): a slow stream
/// gains nothing from them.
pub const LOWAT_MIN: u64 = 64 << 10;
/// The highest mark (and never more than the read buffer).
pub const LOWAT_MAX: u64 = 512 << 10;
/// Shortest span a rate is measured over.
const LOWAT_SPAN_NS: u64 = 1_000_000;

/// How often [`settle`] looks again.
const SETTLE_POLL: Duration = Duration::from_millis(5);

/// Waits until none of `senders` (their write sides shut down) has data
/// or its FIN unacknowledged ([`TcpEndpoint::fin_unacked`]), so that the
/// retransmit count each one's `TCP_INFO` gives then is final; at most
/// [`TCP_SETTLE_CAP`], no longer once the side aborts ([`end_info`] marks
/// a flow still unacknowledged then).
///
/// Issue 26: a sender shuts down with its send buffer still full (up to
/// `tcp_wmem`'s 4 MiB per flow), and TCP sends and resends that after the
/// shutdown. Read at the shutdown, 1,000 flows whose last megabytes
/// crossed a congested path counted 200 k of the 311 k segments their
/// namespace's `TcpRetransSegs` counted.
pub fn settle<S: TcpEndpoint>(senders: &[&S], signals: &Signals) {
    let until = Instant::now() + TCP_SETTLE_CAP;
    let mut left = senders.to_vec();
    loop {
        left.retain(|s| s.fin_unacked());
        if left.is_empty() || signals.aborted() || Instant::now() >= until {
            return;
        }
        std::thread::sleep(SETTLE_POLL);
    }
}

/// A settled sender's `TCP_INFO` at its end ([`settle`]), marked when
/// what it sent was still unacknowledged ([`TcpInfo::unacked_at_read`]).
pub fn end_info(sock: &impl TcpEndpoint) -> Option<TcpInfo> {
    let unacked = sock.fin_unacked();
    sock.tcp_info().map(|t| TcpInfo {
        unacked_at_read: unacked,
        ..t
    })
}

/// Whether the receivers of a side with `streams` TCP streams, pinned to
/// `cpus` (empty: not pinned), raise their low-water marks: only when each
/// stream thread has a CPU by the rule busy polling uses
/// ([`crate::wait::side_spin_mode`]: the host's CPUs leave one for each
/// stream of both sides, and a side placed by `--cpus` or `taskset` has one
/// per stream there). With more threads than CPUs the mark made things
/// worse: `-P 2` on 2 CPUs, 5 interleaved runs, ran at 33.9 (512 KiB) and
/// 30.1 (128 KiB) Gbit/s median against 37.7 without, the receiving side's
/// CPU up from ~90% to ~115%.
pub fn lowat_fits(streams: usize, cpus: &[usize]) -> bool {
    let streams = u32::try_from(streams).unwrap_or(u32::MAX);
    crate::wait::side_spin_mode(streams, cpus) == linerate_proto::rr_core::SpinMode::Dedicated
}

/// A blocking TCP receiver's adaptive low-water mark: the bytes of the last
/// span (≥ 1 ms) set the mark to [`LOWAT_WINDOW`] of their rate, between
/// [`LOWAT_MIN`] and [`LOWAT_MAX`]. A stream that slows down is re-measured
/// on every read while a mark is set, and a read waits at most the socket's
/// timeout ([`POLL`]) with what has arrived, so a mark cannot hold bytes
/// back from the interval counts for longer than that; end of stream wakes
/// the reader at once. The kernel caps the mark at half the receive
/// buffer.
#[derive(Debug)]
struct LowWater {
    max: u64,
    /// The mark set on the socket (0: the kernel's default).
    set: u64,
    since_ns: u64,
    bytes: u64,
    reads: u32,
}

impl LowWater {
    fn new(buf_len: usize) -> Self {
        LowWater {
            max: LOWAT_MAX.min(buf_len as u64),
            set: 0,
            since_ns: mono_ns(),
            bytes: 0,
            reads: 0,
        }
    }

    /// `k` bytes were read. The clock is read on every 16th read, and on
    /// every read while a mark is set (a blocking read then moved at least
    /// [`LOWAT_MIN`] bytes or waited; an io_uring receive may return less).
    #[inline]
    fn on_read(&mut self, sock: &impl TcpEndpoint, k: usize) {
        self.bytes += k as u64;
        self.reads = self.reads.wrapping_add(1);
        if self.set == 0 && !self.reads.is_multiple_of(16) {
            return;
        }
        let now = mono_ns();
        let span = now.saturating_sub(self.since_ns);
        if span < LOWAT_SPAN_NS {
            return;
        }
        let want = mark_for(self.bytes, span, self.max);
        // Only a change of a quarter or more is worth a system call.
        if want.abs_diff(self.set) * 4 > self.set.max(1) {
            // At most a quarter of the receive buffer: a mark whose window
            // needs more makes the kernel grow the buffer and clamp the
            // window to the mark (`tcp_set_rcvlowat`), which a long path
            // would feel. Early on the buffer is small: no mark yet.
            let room = sock.recv_buffer().map_or(0, |b| b / 4);
            let want = if want.min(room) < LOWAT_MIN {
                0
            } else {
                want.min(room)
            };
            if want != self.set && sock.set_recv_lowat(want.max(1)).is_ok() {
                self.set = want;
            }
        }
        self.since_ns = now;
        self.bytes = 0;
    }
}

/// The mark for `bytes` read in `span_ns`: [`LOWAT_WINDOW`] of that rate,
/// 0 (the kernel's default) below [`LOWAT_MIN`], at most `max`.
fn mark_for(bytes: u64, span_ns: u64, max: u64) -> u64 {
    let want = (u128::from(bytes) * LOWAT_WINDOW.as_nanos() / u128::from(span_ns.max(1))) as u64;
    if want < LOWAT_MIN || max < LOWAT_MIN {
        0
    } else {
        want.min(max)
    }
}

/// Writes `buf` repeatedly on endpoint `sock` with engine `kind` until stopped or
/// `limit` bytes are written, then shuts down the write side so the
/// receiver sees end of stream. `wait`: blocking calls bounded by the
/// socket's timeout, or busy polling (a socket made non-blocking by
/// `wait::prepare_stream`). The loop owns `buf`: a zero-copy engine's
/// sends may still be reading it when the loop ends, and then it is never
/// freed (`engines::lent`).
pub fn send<S: TcpEndpoint>(
    kind: EngineKind,
    sock: &S,
    buf: Vec<u8>,
    limit: Option<u64>,
    counter: &StreamCounter,
    signals: &Signals,
    wait: Wait,
) -> StreamEnd {
    with_engine!(kind, e => send_with(e, sock, buf, limit, counter, signals, wait))
}

/// How a TCP receiver reads: `skip_copy` consumes the bytes without
/// copying them (`MSG_TRUNC`); `lowat` lets a blocking receiver raise its
/// socket's low-water mark (`LowWater`, see [`lowat_fits`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct RecvOpts {
    pub skip_copy: bool,
    pub lowat: bool,
}

/// Reads endpoint `sock` with engine `kind` until end of stream or abort.
pub fn recv<S: TcpEndpoint>(
    kind: EngineKind,
    sock: &S,
    buf: &mut [u8],
    counter: &StreamCounter,
    signals: &Signals,
    wait: Wait,
    opts: RecvOpts,
) -> StreamEnd {
    with_engine!(kind, e => recv_with(e, sock, buf, counter, signals, wait, opts))
}

fn send_with<E: Engine, S: TcpEndpoint>(
    engine: E,
    sock: &S,
    buf: Vec<u8>,
    limit: Option<u64>,
    counter: &StreamCounter,
    signals: &Signals,
    wait: Wait,
) -> StreamEnd {
    // This loop writes `buf` (or a prefix of it) unchanged on every call.
    let mut io = match engine.tcp_tx_stream(sock, &buf) {
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
                if let Err(e) = waiter.would_block(sock, Interest::Send, SPIN_SLEEP, None) {
                    break stream_end(e);
                }
            }
            Err(e) => break Err(map_err("write", e)),
        }
    };
    let lent = io.lent();
    drop(io);
    if lent {
        crate::engines::lent::leak(buf);
    }
    waiter.end(calls, result)
}

fn recv_with<E: Engine, S: TcpEndpoint>(
    engine: E,
    sock: &S,
    buf: &mut [u8],
    counter: &StreamCounter,
    signals: &Signals,
    wait: Wait,
    opts: RecvOpts,
) -> StreamEnd {
    // This loop never looks at the bytes it reads.
    let mut io = match engine.tcp_rx_stream(sock, opts.skip_copy) {
        Ok(io) => io,
        Err(e) => return StreamEnd::failed(e),
    };
    let mut waiter = Waiter::new(wait, signals, true);
    let call = waiter.call();
    // Busy polling never sleeps on the socket: no mark.
    let mut lowat = (opts.lowat && wait == Wait::Block).then(|| LowWater::new(buf.len()));
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
                if let Some(l) = &mut lowat {
                    l.on_read(sock, k);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if is_timeout(&e) => {
                if let Err(e) = waiter.would_block(sock, Interest::Recv, SPIN_SLEEP, None) {
                    break stream_end(e);
                }
            }
            Err(e) => break Err(map_err("read", e)),
        }
    };
    waiter.end(calls, result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_proto::rr_core::SpinMode;

    use crate::test_pair::tcp_pair as pair;

    #[test]
    fn issue_8_the_low_water_mark_follows_the_rate_within_its_bounds() {
        let ms = 1_000_000;
        // 40 Gbit/s: 100 µs is 500 kB.
        assert_eq!(mark_for(5_000_000, ms, LOWAT_MAX), 500_000);
        assert_eq!(mark_for(50_000_000, ms, LOWAT_MAX), LOWAT_MAX);
        // 1 Gbit/s: 12.5 kB, not worth a mark.
        assert_eq!(mark_for(125_000, ms, LOWAT_MAX), 0);
        // Never more than the read buffer, none with a small buffer.
        assert_eq!(mark_for(5_000_000, ms, 128 << 10), 128 << 10);
        assert_eq!(mark_for(5_000_000, ms, 4096), 0);
        assert_eq!(mark_for(5_000_000, 0, LOWAT_MAX), LOWAT_MAX);
    }

    /// A receiver whose mark is up still gets every byte, the tail below
    /// the mark included, when the sender closes.
    #[test]
    fn issue_8_a_raised_low_water_mark_keeps_the_tail() {
        let (tx, rx) = pair();
        rx.set_recv_lowat(256 << 10).expect("SO_RCVLOWAT");
        let signals = std::sync::Arc::new(Signals::default());
        let s2 = std::sync::Arc::clone(&signals);
        let reader = std::thread::spawn(move || {
            let c = StreamCounter::default();
            let mut buf = vec![0u8; 1 << 20];
            let opts = RecvOpts {
                skip_copy: false,
                lowat: true,
            };
            let end = recv_with(
                crate::engines::Syscall,
                &rx,
                &mut buf,
                &c,
                &s2,
                Wait::Block,
                opts,
            );
            end.result.expect("read to end");
            c.get()
        });
        let c = StreamCounter::default();
        let buf = vec![7u8; 64 << 10];
        let limit = 3 * (1 << 20) + 12_345;
        let end = send_with(
            crate::engines::Syscall,
            &tx,
            buf,
            Some(limit),
            &c,
            &signals,
            Wait::Block,
        );
        end.result.expect("sent");
        assert_eq!(reader.join().expect("reader"), limit);
    }

    #[test]
    fn a_byte_limited_stream_arrives_whole_with_either_wait_policy() {
        for wait in [Wait::Block, Wait::Spin(SpinMode::Shared)] {
            let (tx, rx) = crate::test_pair::tcp_pair_for(wait);
            let signals = std::sync::Arc::new(Signals::default());
            let s2 = std::sync::Arc::clone(&signals);
            let reader = std::thread::spawn(move || {
                let c = StreamCounter::default();
                let mut buf = vec![0u8; 1000];
                let opts = RecvOpts {
                    skip_copy: false,
                    lowat: true,
                };
                let end = recv_with(crate::engines::Syscall, &rx, &mut buf, &c, &s2, wait, opts);
                end.result.expect("read to end");
                c.get()
            });
            let c = StreamCounter::default();
            let buf = vec![7u8; 4096];
            let end = send_with(
                crate::engines::Syscall,
                &tx,
                buf,
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
