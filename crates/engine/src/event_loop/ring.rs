//! The completion-based loop (`--engine uring --flows`): the loop thread's
//! flows share one io_uring instead of an epoll set. Receivers keep one
//! multishot receive each, armed once, that takes the thread's provided
//! buffers (`RingIo::bufs`: one buffer ring per thread, not per flow) and
//! posts a completion per datagram or chunk of stream; senders queue their
//! sends and get a turn again as their completions come back. One
//! `io_uring_enter` per pass submits every flow's requests and waits for
//! completions, or until the earliest due time of the loop's timer heap
//! (the same `Timers` as the readiness loop's, to the nanosecond).
//!
//! The flows' logic is their kind's (`udp::ring`, `tcp::ring`, and rr's
//! flows in `crate::rr`'s `ring_loops` and `udp_ring_loops`): this module
//! only runs the ring, the ready
//! queue, the timers, the side's signals and the stall limit, as
//! `driver` does for epoll (`drive`).

use std::collections::VecDeque;
use std::io;
use std::time::{Duration, Instant};

use io_uring::{cqueue, squeue};

use super::driver::{wake_all, Flow, Timers, Turn};
use crate::engines::uring::buf_ring::BufRing;
pub(crate) use crate::engines::uring::leak;
use crate::engines::uring::{caps, Ring, Uring, TAG_CANCEL};
use crate::engines::EngineKind;
use crate::stream::{Signals, IDLE_LIMIT};
use crate::EngineError;
use linerate_proto::measure::EngineUse;
use linerate_proto::spec::{TestKind, TestSpec};
use linerate_proto::test_type::{self, Workload};

/// Longest wait for a completion: how often an idle loop looks at its
/// signals.
const WAIT: Duration = Duration::from_millis(20);
/// Submission queue entries per loop: a pass queues every ready flow's
/// requests, submitting whenever the queue fills.
const SQ_ENTRIES: u32 = 256;
/// Completion queue entries: a multishot receive posts one per datagram;
/// an overflow is not lost (`IORING_FEAT_NODROP`) but costs a syscall.
const CQ_ENTRIES: u32 = 8192;
/// The buffer group of the loop's provided buffers.
pub(crate) const BGID: u16 = 0;
/// Provided buffer memory per loop thread, whatever its flows: the
/// receivers of a thread take turns with the same buffers, each given
/// back as soon as its completion is read.
pub const RING_BYTES: usize = 4 << 20;
/// Fewest and most buffers per thread (a power of two, as the kernel's
/// buffer ring needs): big datagrams (a GRO super-buffer) get fewer.
const BUFS_MIN: usize = 64;
const BUFS_MAX: usize = 4096;
/// Bounded wait at the end for the kernel's last completions (after
/// cancelling what is in flight): 10 × [`WAIT`].
const EXIT_WAITS: u32 = 10;

/// Why `--engine uring` cannot run `--flows` loops on this host (`None`:
/// it can): io_uring itself, and the provided buffer rings multishot
/// receives take their buffers from.
pub fn unavailable() -> Option<String> {
    match caps() {
        Err(e) => Some(e.to_string()),
        Ok(c) => c.multishot.as_ref().err().map(|why| {
            format!(
                "uring: --flows loops need multishot receives into provided buffer \
                 rings, and {why}"
            )
        }),
    }
}

/// Why `--engine uring --flows` cannot run `spec` (`None`: it can): the
/// kinds of flows that have a completion loop (TCP and UDP streams, rr
/// over TCP and UDP, crr), and this host's io_uring ([`unavailable`]).
/// Never replaced by the epoll loop: the user asked for io_uring.
pub fn refusal(spec: &TestSpec) -> Option<String> {
    let rules = test_type::of(spec);
    let rr = matches!(spec.kind, TestKind::Rr | TestKind::Crr);
    match rules.workload {
        Workload::RequestResponse if !rr => Some(format!(
            "uring: --flows runs streams, rr and crr on io_uring completion loops; {} flows \
             have no completion loop (run them on epoll with --engine syscall)",
            rules.name
        )),
        Workload::UdpStream | Workload::TcpStream | Workload::RequestResponse => unavailable(),
    }
}

/// The ring engine a loop runs for `kind` (`None`: not `uring`).
pub(crate) fn uring(kind: EngineKind) -> Option<Uring> {
    match kind {
        EngineKind::Uring { sqpoll } => Some(Uring { sqpoll }),
        _ => None,
    }
}

/// How many provided buffers of `size` bytes a loop thread keeps:
/// [`RING_BYTES`] worth, a power of two within [`BUFS_MIN`]..[`BUFS_MAX`].
pub(crate) fn buffers(size: usize) -> u16 {
    let n = (RING_BYTES / size.max(1)).clamp(BUFS_MIN, BUFS_MAX);
    1u16 << (usize::BITS - 1 - n.leading_zeros())
}

/// What a completion loop used: the report's engine record, with the
/// thread's provided buffers (`bufs`: count, size) in words.
pub(crate) fn loop_use(engine: Uring, bufs: Option<(u16, usize)>) -> EngineUse {
    let mut notes = vec!["io_uring completion loop: one ring per event-loop thread".to_string()];
    if let Some((n, size)) = bufs {
        notes.push(format!(
            "{n} provided buffers of {size} bytes per thread ({} KiB whatever its flows), \
             shared by its flows' multishot receives",
            usize::from(n) * size / 1024
        ));
    }
    EngineUse {
        engine: EngineKind::Uring {
            sqpoll: engine.sqpoll,
        }
        .to_string(),
        sqpoll: engine.sqpoll,
        multishot_recv: bufs.is_some(),
        notes,
        ..EngineUse::default()
    }
}

/// A loop's ring, its provided buffers, and its requests in flight.
pub(crate) struct RingIo {
    pub(crate) ring: Ring,
    /// The thread's provided buffers (group [`BGID`]), when its flows
    /// receive.
    pub(crate) bufs: Option<BufRing>,
    /// Requests queued whose last completion has not come.
    pending: usize,
}

/// A completion's request: its flow (position in the loop) and which of
/// the flow's requests it is.
fn tag(flow: usize, op: u8) -> u64 {
    ((flow as u64) << 8) | u64::from(op)
}

fn untag(user_data: u64) -> (usize, u8) {
    ((user_data >> 8) as usize, (user_data & 0xff) as u8)
}

impl RingIo {
    /// A ring for one loop thread, with `bufs` (count, size) provided
    /// buffers when its flows receive.
    fn new(engine: Uring, bufs: Option<(u16, usize)>) -> Result<RingIo, EngineError> {
        let ring = Ring::sized(engine, SQ_ENTRIES, CQ_ENTRIES)?;
        let bufs = match bufs {
            None => None,
            Some((count, size)) => Some(ring.buf_ring(count, size, BGID).map_err(|e| {
                EngineError::EngineUnavailable {
                    engine: EngineKind::Uring {
                        sqpoll: engine.sqpoll,
                    },
                    reason: format!("a provided buffer ring could not be registered: {e}"),
                }
            })?),
        };
        Ok(RingIo {
            ring,
            bufs,
            pending: 0,
        })
    }

    /// Queues `e` as flow `flow`'s request `op`.
    pub(crate) fn push(&mut self, flow: usize, op: u8, e: squeue::Entry) -> io::Result<()> {
        self.ring.push(&e.user_data(tag(flow, op)))?;
        self.pending += 1;
        Ok(())
    }

    /// Queues `entries` (a linked chain) together as flow `flow`'s
    /// requests `op`, so no submission boundary cuts the chain.
    pub(crate) fn push_chain(
        &mut self,
        flow: usize,
        op: u8,
        entries: &mut [squeue::Entry],
    ) -> io::Result<()> {
        for e in entries.iter_mut() {
            *e = e.clone().user_data(tag(flow, op));
        }
        self.ring.push_all(entries)?;
        self.pending += entries.len();
        Ok(())
    }

    /// Asks the kernel to cancel flow `flow`'s request `op`; its last
    /// completion still comes to the flow. The cancel goes with the
    /// loop's next submit (the pass's `io_uring_enter`), together with
    /// the other flows' cancels.
    pub(crate) fn cancel(&mut self, flow: usize, op: u8) -> io::Result<()> {
        self.ring.queue_cancel(tag(flow, op))
    }

    /// Gives a completion's provided buffer back to the kernel.
    fn give_back(&mut self, c: &cqueue::Entry) {
        if let (Some(b), Some(bid)) = (self.bufs.as_mut(), cqueue::buffer_select(c.flags())) {
            b.provide(bid);
        }
    }

    /// At the end: cancels what is still in flight and waits (bounded)
    /// for the last completions; then unregisters the buffers. Returns
    /// whether every request completed: when not, the kernel may still
    /// read or write what they point at, and the provided buffers are
    /// left to the process here (their ring's memory is never freed).
    fn close(mut self) -> bool {
        if self.pending > 0 && self.ring.cancel_all().is_ok() {
            for _ in 0..exit_waits() {
                if self.pending == 0 || self.ring.submit_wait(1, Some(WAIT)).is_err() {
                    break;
                }
                while let Some(c) = self.ring.next() {
                    if c.user_data() != TAG_CANCEL && !cqueue::more(c.flags()) {
                        self.pending = self.pending.saturating_sub(1);
                    }
                    self.give_back(&c);
                }
            }
        }
        let settled = self.pending == 0;
        if let Some(b) = self.bufs.take() {
            if settled {
                self.ring.drop_buf_ring(b);
            } else {
                leak(b);
            }
        }
        settled
    }
}

/// How many [`WAIT`]s [`RingIo::close`] waits for the last completions:
/// [`EXIT_WAITS`], or none where a test asks (to take the path where
/// requests are still in flight at the end).
fn exit_waits() -> u32 {
    #[cfg(test)]
    if tests::NO_EXIT_WAIT.with(std::cell::Cell::get) {
        return 0;
    }
    EXIT_WAITS
}

/// A flow the completion loop drives: it queues its requests on its
/// turns and hears back from each of their completions (its end, failure
/// and progress are its [`Flow`]'s, as on epoll).
pub(crate) trait RingFlow: Flow {
    /// What the flows of one loop share.
    type Shared;
    /// Queues what the flow can, without waiting; `me` is its position
    /// (the tag of its requests).
    fn turn(&mut self, me: usize, io: &mut RingIo, sh: &mut Self::Shared) -> Turn;
    /// One of its requests (`op`) completed (or posted one more result).
    fn complete(
        &mut self,
        me: usize,
        op: u8,
        c: &cqueue::Entry,
        io: &mut RingIo,
        sh: &mut Self::Shared,
    ) -> Turn;
    /// The side's time is up: true when that ended the flow now.
    fn stop(&mut self, _me: usize, _io: &mut RingIo, _sh: &mut Self::Shared) -> bool {
        false
    }
    /// The ring closed with requests still in flight: gives up to the
    /// process, with [`leak`], every piece of the flow's memory they may
    /// still read or write (its send buffers, the buffers its receives
    /// fill), before the flow ends or is dropped.
    fn leak_in_flight(&mut self);
    /// As [`Self::leak_in_flight`], for what the loop's flows share (a
    /// buffer every sender sends, a receive's message header).
    fn leak_shared(shared: &mut Self::Shared);
}

/// The loop's ready queue, due times and open flows.
struct Sched {
    done: Vec<bool>,
    open: usize,
    queued: Vec<bool>,
    ready: VecDeque<usize>,
    timers: Timers,
}

impl Sched {
    /// Flow `i`'s turn or completion came to `t`.
    fn apply(&mut self, i: usize, t: Turn) {
        match t {
            Turn::Again if !self.queued[i] => {
                self.queued[i] = true;
                self.ready.push_back(i);
            }
            Turn::Again | Turn::Wait => {}
            Turn::Until(due) | Turn::Watch(due) => self.timers.arm(i, due),
            Turn::Done => {
                if !self.done[i] {
                    self.done[i] = true;
                    self.open -= 1;
                }
            }
        }
    }

    fn wake_all(&mut self) {
        wake_all(&self.done, &mut self.queued, &mut self.ready);
    }
}

/// Why the loop gave up on the flows still open.
enum GaveUp {
    Enter(io::Error),
    Stalled,
}

impl GaveUp {
    fn error(&self) -> EngineError {
        match self {
            GaveUp::Enter(e) => {
                EngineError::io("io_uring_enter", io::Error::new(e.kind(), e.to_string()))
            }
            GaveUp::Stalled => EngineError::Stalled(IDLE_LIMIT.as_secs()),
        }
    }
}

/// Runs `flows` on one ring until each has ended or the side aborts;
/// `bufs` (count, size): the thread's provided buffers, when its flows
/// receive. Returns whether every request completed before the ring
/// closed; when not, what they may still touch was leaked
/// ([`RingFlow::leak_in_flight`]), never freed.
pub(crate) fn drive<F: RingFlow>(
    engine: Uring,
    flows: &mut [F],
    shared: &mut F::Shared,
    bufs: Option<(u16, usize)>,
    signals: &Signals,
) -> bool {
    let done: Vec<bool> = flows.iter().map(Flow::ended).collect();
    let mut io = match RingIo::new(engine, bufs) {
        Ok(io) => io,
        Err(e) => {
            let why = e.to_string();
            for (f, _) in flows.iter_mut().zip(&done).filter(|(_, d)| !**d) {
                f.fail(EngineError::Protocol(why.clone()));
            }
            return true;
        }
    };
    let queued: Vec<bool> = done.iter().map(|d| !d).collect();
    let mut s = Sched {
        open: done.iter().filter(|d| !**d).count(),
        ready: (0..flows.len()).filter(|&i| queued[i]).collect(),
        queued,
        done,
        timers: Timers::new(flows.len()),
    };
    let mut stopped = false;
    let mut drain_at = signals.drain_deadline();
    let mut idle_since: Option<Instant> = None;
    let mut gave_up = None;
    'run: while s.open > 0 && !signals.aborted() {
        if signals.drain_deadline() != drain_at {
            drain_at = signals.drain_deadline();
            s.wake_all();
        }
        while let Some(i) = s.timers.pop_due(Instant::now()) {
            s.apply(i, Turn::Again);
        }
        let mut progressed = false;
        for _ in 0..s.ready.len().max(1) {
            if signals.aborted() {
                break 'run;
            }
            if signals.stopping() && !stopped {
                stopped = true;
                for (i, f) in flows.iter_mut().enumerate() {
                    if !s.done[i] && f.stop(i, &mut io, shared) {
                        s.apply(i, Turn::Done);
                    }
                }
                s.wake_all();
            }
            let Some(i) = s.ready.pop_front() else { break };
            s.queued[i] = false;
            if s.done[i] {
                continue;
            }
            let before = flows[i].progress();
            let t = flows[i].turn(i, &mut io, shared);
            s.apply(i, t);
            progressed |= flows[i].progress() != before;
        }
        // Submit every queued request; wait for a completion unless flows
        // are ready, at most until the earliest due time.
        let timeout = match s.timers.next() {
            _ if !s.ready.is_empty() => None,
            Some(due) => Some(due.saturating_duration_since(Instant::now()).min(WAIT)),
            None => Some(WAIT),
        };
        if let Err(e) = io.ring.submit_wait(1, timeout) {
            gave_up = Some(GaveUp::Enter(e));
            break;
        }
        let mut woke = 0;
        while let Some(c) = io.ring.next() {
            if c.user_data() == TAG_CANCEL {
                continue;
            }
            woke += 1;
            if !cqueue::more(c.flags()) {
                io.pending = io.pending.saturating_sub(1);
            }
            let (i, op) = untag(c.user_data());
            if i >= flows.len() || s.done[i] {
                io.give_back(&c);
                continue;
            }
            let before = flows[i].progress();
            let t = flows[i].complete(i, op, &c, &mut io, shared);
            s.apply(i, t);
            progressed |= flows[i].progress() != before;
        }
        if progressed || woke > 0 || !F::STALLS {
            idle_since = None;
        } else if s.ready.is_empty()
            && idle_since.get_or_insert_with(Instant::now).elapsed() >= IDLE_LIMIT
        {
            gave_up = Some(GaveUp::Stalled);
            break;
        }
    }
    finish(io, flows, shared, &s.done, gave_up)
}

/// Closes the loop's ring; then leaks what its requests still in flight
/// may touch, before the flows given up on end (and free their state).
fn finish<F: RingFlow>(
    io: RingIo,
    flows: &mut [F],
    shared: &mut F::Shared,
    done: &[bool],
    gave_up: Option<GaveUp>,
) -> bool {
    let settled = io.close();
    if !settled {
        flows.iter_mut().for_each(F::leak_in_flight);
        F::leak_shared(shared);
    }
    if let Some(why) = gave_up {
        for (f, _) in flows.iter_mut().zip(done).filter(|(_, d)| !**d) {
            f.fail(why.error());
        }
    }
    settled
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::cell::Cell;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;

    use io_uring::{opcode, types};

    thread_local! {
        /// This thread's loops wait for no completion at their end.
        pub(super) static NO_EXIT_WAIT: Cell<bool> = const { Cell::new(false) };
    }

    /// A flow whose requests cannot complete: a receive into its own
    /// buffer and a multishot receive into the thread's provided buffers,
    /// on a socket nobody sends to; it ends as soon as they are queued.
    struct Waits {
        sock: UdpSocket,
        buf: Option<Vec<u8>>,
        queued: bool,
        leaked: bool,
    }

    impl Flow for Waits {
        fn ended(&self) -> bool {
            false
        }

        fn fail(&mut self, _: EngineError) {}

        fn progress(&self) -> u64 {
            0
        }
    }

    impl RingFlow for Waits {
        /// Set when the loop leaked what its flows share.
        type Shared = bool;

        fn turn(&mut self, me: usize, io: &mut RingIo, _: &mut bool) -> Turn {
            let fd = types::Fd(self.sock.as_raw_fd());
            if let (false, Some(buf)) = (self.queued, self.buf.as_mut()) {
                let e = opcode::Recv::new(fd, buf.as_mut_ptr(), buf.len() as u32).build();
                io.push(me, 1, e).expect("queue a receive");
                io.push(me, 2, opcode::RecvMulti::new(fd, BGID).build())
                    .expect("arm a multishot receive");
                self.queued = true;
            }
            Turn::Done
        }

        fn complete(
            &mut self,
            _: usize,
            _: u8,
            _: &cqueue::Entry,
            _: &mut RingIo,
            _: &mut bool,
        ) -> Turn {
            Turn::Wait
        }

        fn leak_in_flight(&mut self) {
            self.leaked = true;
            if let Some(b) = self.buf.take() {
                leak(b);
            }
        }

        fn leak_shared(shared: &mut bool) {
            *shared = true;
        }
    }

    /// Drives one [`Waits`] flow; returns what `drive` said, whether the
    /// flow and the shared part were leaked, and the flow's address.
    fn drive_waits(no_exit_wait: bool) -> (bool, bool, bool, std::net::SocketAddr) {
        let sock = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let at = sock.local_addr().expect("address");
        let mut flows = [Waits {
            sock,
            buf: Some(vec![0; 2048]),
            queued: false,
            leaked: false,
        }];
        let mut shared = false;
        NO_EXIT_WAIT.with(|w| w.set(no_exit_wait));
        let engine = Uring { sqpoll: false };
        let settled = drive(
            engine,
            &mut flows,
            &mut shared,
            Some((64, 2048)),
            &Signals::default(),
        );
        NO_EXIT_WAIT.with(|w| w.set(false));
        let [f] = flows;
        assert!(f.queued, "the flow's requests were queued");
        (settled, f.leaked, shared, at)
    }

    #[test]
    fn issue_26_a_ring_closed_with_requests_in_flight_leaks_what_they_touch() {
        if let Some(why) = unavailable() {
            eprintln!("skipped: {why}");
            return;
        }
        // The cancel is answered within the bounded wait: all freed.
        let (settled, leaked, shared, _) = drive_waits(false);
        assert!(settled && !leaked && !shared);
        // No wait at the end: the requests are still in flight when the
        // ring closes, and their memory is left to the process.
        let (settled, leaked, shared, at) = drive_waits(true);
        assert!(!settled, "drive said every request completed");
        assert!(leaked && shared, "the flow's and shared memory were leaked");
        // A datagram for the receive the kernel may still hold: it lands
        // in leaked memory, never in memory handed out again.
        let peer = UdpSocket::bind("127.0.0.1:0").expect("bind");
        for _ in 0..4 {
            let _ = peer.send_to(&[7; 1000], at);
            let _ = vec![0u8; 2048];
        }
        std::thread::sleep(Duration::from_millis(20));
    }

    #[test]
    fn issue_26_a_threads_buffers_are_a_bounded_power_of_two() {
        for size in [1, 100, 1_600, 65_536 + 200, 1 << 30] {
            let n = usize::from(buffers(size));
            assert!(n.is_power_of_two(), "{size}: {n}");
            assert!((BUFS_MIN..=BUFS_MAX).contains(&n), "{size}: {n}");
        }
        // 1,472-byte datagrams: 2,048 buffers, 3.3 MB per thread.
        assert_eq!(buffers(1_473 + 16 + 128), 2_048);
    }

    #[test]
    fn issue_26_tags_name_the_flow_and_its_request() {
        assert_eq!(untag(tag(70_000, 3)), (70_000, 3));
        assert_ne!(tag(u32::MAX as usize, 255), TAG_CANCEL);
    }
}
