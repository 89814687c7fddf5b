//! The two ways a data socket waits: blocking calls, or busy polling
//! (non-blocking calls spinning on `EAGAIN` within a [`SpinBudget`], then a
//! `poll(2)` sleep), shared by the rr flows (TCP and UDP, both sides) and
//! the TCP and UDP stream loops (`--busy-poll` on throughput tests).

use std::net::TcpStream;
use std::time::Duration;

use linerate_proto::rr_core::{SpinBudget, SpinMode};

use crate::clock::mono_ns;
use crate::engines::{self, Interest, Readiness, TcpEndpoint, UdpEndpoint};
pub(crate) use crate::socket::{busy_poll_note, prepare_stream};
use crate::stream::{map_err, Idle, Signals, StreamEnd};
use crate::{socket, EngineError};

/// Spins between check points in busy-poll mode (a power of two: the check
/// is a mask). Each spin is a non-blocking `read`/`recv` (hundreds of ns),
/// so a check point (a clock read, tens of ns, and a yield) every few spins
/// costs little, and a peer sharing the CPU waits microseconds, not tens.
pub const SPIN_CHECK: u32 = 4;
/// How long a busy-polling wait spins before it blocks in `poll(2)` until
/// the socket is ready: the same budget as the kernel's `SO_BUSY_POLL`, so a
/// peer that is slow (or descheduled on a crowded host) costs a sleep, not a
/// CPU taken from it.
pub const SPIN_BUDGET: Duration = Duration::from_micros(socket::BUSY_POLL_US as u64);

/// How `spinners` busy-polling threads of a side spin, from the host's
/// CPUs and where this side runs: `cpus`, the CPUs its flows are pinned to
/// round robin (`--cpus`), or else an affinity mask narrower than the host
/// (`taskset`), counts as pinned; see
/// [`linerate_proto::rr_core::spin_mode`]. A caller who narrowed the mask
/// placed this side, most likely apart from its peer (as `bench/run`'s
/// split pinning does); before, a one-CPU mask looked like a CPU shared
/// with the peer and every few spins yielded (a `sched_yield` and a pass
/// through the scheduler, ~5% of the CPU of a UDP round trip). If the peer
/// does share the CPU, the budget's sleeps demote it to yielding.
pub fn side_spin_mode(spinners: u32, cpus: &[usize]) -> SpinMode {
    let host = crate::cpu::host_cpus();
    let pinned = if cpus.is_empty() {
        // The affinity mask itself (a cgroup CPU quota is not a placement).
        let mask = crate::cpu::allowed_cpus().len() as u32;
        (mask > 0 && mask < host).then_some(mask)
    } else {
        let mut distinct = cpus.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        Some(distinct.len() as u32)
    };
    linerate_proto::rr_core::spin_mode(host, spinners, pinned)
}

/// A socket's waiting discipline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Blocking calls (with or without a socket timeout).
    Block,
    /// Non-blocking calls, spinning on `EAGAIN`.
    Spin(SpinMode),
}

/// Busy poll: what one connection's spinning came to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SpinStats {
    /// Waits that slept in `poll(2)`.
    pub(crate) sleeps: u64,
    /// A dedicated-CPU budget found its CPU shared and yielded from then on.
    pub(crate) demoted: bool,
}

/// What one socket's would-block calls do, and what they cost.
pub(crate) struct Waiter<'a> {
    wait: Wait,
    signals: &'a Signals,
    idle: Idle,
    /// Whether waiting longer than the idle limit is an error here.
    stall: bool,
    spins: u32,
    spin: SpinBudget,
}

impl<'a> Waiter<'a> {
    pub(crate) fn new(wait: Wait, signals: &'a Signals, stall: bool) -> Self {
        let mode = match wait {
            Wait::Spin(m) => m,
            Wait::Block => SpinMode::Shared,
        };
        Waiter {
            wait,
            signals,
            idle: Idle(None),
            stall,
            spins: 0,
            spin: SpinBudget::new(mode, SPIN_BUDGET),
        }
    }

    pub(crate) fn aborted(&self) -> Result<(), EngineError> {
        if self.signals.aborted() {
            return Err(EngineError::Aborted);
        }
        Ok(())
    }

    /// A call moved data.
    #[inline]
    pub(crate) fn progressed(&mut self) {
        self.idle.progressed();
        self.spin.done();
    }

    /// How each I/O call waits: blocking (bounded by the socket's timeout,
    /// if any), or not at all when busy polling.
    #[inline]
    pub(crate) fn call(&self) -> engines::Wait {
        match self.wait {
            Wait::Block => engines::Wait::Block,
            Wait::Spin(_) => engines::Wait::DontWait,
        }
    }

    /// How a stream loop that waited with this waiter ended, after `calls`
    /// I/O calls.
    pub(crate) fn end(&self, calls: u64, result: Result<(), EngineError>) -> StreamEnd {
        StreamEnd {
            calls,
            poll_sleeps: self.sleeps(),
            result,
        }
    }

    /// Busy poll only: how many waits slept in `poll(2)`.
    pub(crate) fn sleeps(&self) -> Option<u64> {
        matches!(self.wait, Wait::Spin(_)).then(|| self.spin.sleeps())
    }

    /// Busy poll only: how many waits slept in `poll(2)`, and whether a
    /// dedicated budget turned shared (yielding).
    pub(crate) fn stats(&self) -> Option<SpinStats> {
        matches!(self.wait, Wait::Spin(_)).then(|| SpinStats {
            sleeps: self.spin.sleeps(),
            demoted: self.spin.demoted(),
        })
    }

    /// A call on `sock` would block (or its timeout expired): spin, sleep
    /// until `interest` can be met (at most `poll`), or fail (abort,
    /// stall). Returns true when `deadline_ns` (monotonic) has passed; the
    /// clock is read only at check points, and only when there is a
    /// deadline or a spin budget to look at.
    pub(crate) fn would_block(
        &mut self,
        sock: &impl Readiness,
        interest: Interest,
        poll: Duration,
        deadline_ns: Option<u64>,
    ) -> Result<bool, EngineError> {
        if let Wait::Spin(_) = self.wait {
            self.spins = self.spins.wrapping_add(1);
            if self.spins & (SPIN_CHECK - 1) != 0 {
                std::hint::spin_loop();
                return Ok(false);
            }
        }
        self.aborted()?;
        let now = match (self.wait, deadline_ns) {
            (Wait::Block, None) => 0,
            _ => mono_ns(),
        };
        if deadline_ns.is_some_and(|d| now >= d) {
            return Ok(true);
        }
        if let Wait::Spin(_) = self.wait {
            if self.spin.keep_spinning(now) {
                // The budget's mode, not the one asked for: a dedicated
                // budget turns shared when its CPU proves shared.
                if self.spin.mode() == SpinMode::Shared {
                    // A peer queued on this CPU runs at once.
                    std::thread::yield_now();
                }
                return Ok(false);
            }
            // The budget is spent: sleep until the socket is ready.
            sock.wait_ready(interest, poll)
                .map_err(|e| map_err("poll", e))?;
            self.aborted()?;
        }
        if self.stall {
            self.idle.timed_out()?;
        }
        Ok(false)
    }
}

/// Asks for `SO_BUSY_POLL` and `SO_PREFER_BUSY_POLL` on `sock` without a
/// note: a busy-polled crr flow's connections after its first, whose
/// [`busy_poll_note`] already said what the kernel answers (formatting it
/// again would allocate per transaction).
pub(crate) fn busy_poll_quietly(sock: &impl std::os::fd::AsRawFd) {
    let _ = socket::set_busy_poll(sock, socket::BUSY_POLL_US);
    let _ = socket::set_prefer_busy_poll(sock);
}

/// Connects to `addr` busy polling (a crr transaction under `--busy-poll`):
/// a non-blocking connect, then `POLLOUT` polled without waiting, spinning
/// by `waiter`'s budget between looks (and sleeping in `poll(2)` once it is
/// spent, as every busy-polled wait does), for at most `timeout`.
pub(crate) fn connect_spinning(
    addr: std::net::SocketAddr,
    opts: &linerate_proto::spec::TcpOptions,
    waiter: &mut Waiter<'_>,
    timeout: Duration,
) -> Result<TcpStream, EngineError> {
    let (sock, done) = socket::start_connect(addr, opts)?;
    if !done {
        let deadline = mono_ns().saturating_add(timeout.as_nanos() as u64);
        let failed = |e| EngineError::io(format!("connect to {addr}"), e);
        while !socket::wait_ready(&sock, libc::POLLOUT, Duration::ZERO).map_err(failed)? {
            if waiter.would_block(&sock, Interest::Send, crate::stream::POLL, Some(deadline))? {
                return Err(failed(std::io::ErrorKind::TimedOut.into()));
            }
        }
    }
    waiter.progressed();
    socket::finish_connect(&sock, addr, opts)?;
    Ok(sock)
}

/// Ends a stream loop on a failed wait: an abort is the side's doing and
/// ends the loop cleanly (the runner says the stream was aborted), as the
/// loops' own abort checks do.
pub(crate) fn stream_end(e: EngineError) -> Result<(), EngineError> {
    match e {
        EngineError::Aborted => Ok(()),
        e => Err(e),
    }
}

/// Prepares a TCP connection for a phase. Blocking mode: no socket
/// timeouts (each blocking read with `SO_RCVTIMEO` arms a kernel timer; the
/// side's watcher unblocks a stuck flow instead). Busy-poll mode:
/// non-blocking, plus `SO_BUSY_POLL`. Returns the discipline and, in
/// busy-poll mode, what the kernel said.
pub(crate) fn prepare_tcp(
    sock: &impl TcpEndpoint,
    spin: Option<SpinMode>,
) -> Result<(Wait, Option<String>), EngineError> {
    let Some(mode) = spin else {
        sock.set_io_timeout(None)
            .map_err(|e| EngineError::io("clearing socket timeouts", e))?;
        return Ok((Wait::Block, None));
    };
    sock.set_nonblocking(true)
        .map_err(|e| EngineError::io("O_NONBLOCK", e))?;
    Ok((Wait::Spin(mode), Some(busy_poll_note(sock))))
}

/// Prepares a UDP endpoint for a phase: a receive timeout of `poll`
/// (blocking) or busy polling.
pub(crate) fn prepare_udp(
    ep: &impl UdpEndpoint,
    spin: Option<SpinMode>,
    poll: Duration,
) -> Result<(Wait, Option<String>), EngineError> {
    let Some(mode) = spin else {
        ep.set_recv_timeout(poll)
            .map_err(|e| EngineError::io("UDP receive timeout", e))?;
        return Ok((Wait::Block, None));
    };
    Ok((Wait::Spin(mode), Some(ep.busy_poll()?)))
}
