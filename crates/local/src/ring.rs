//! A single-producer/single-consumer ring of fixed-size slots in memory
//! shared by two processes: the queue under both shared-memory modes
//! (`direct` puts the message in a slot, `bulk` a descriptor of where the
//! message lies in the shared region).
//!
//! The arithmetic is a sans-IO core ([`Indices`]: free space, slot of an
//! index; tested on plain integers); [`Producer`] and [`Consumer`] apply it
//! to a region of memory whose layout is:
//!
//! ```text
//! offset   0  head     u64  next index the producer writes   (producer stores)
//! offset  64  tail     u64  next index the consumer reads    (consumer stores)
//! offset 128  asleep   u32  1 while the consumer sleeps (the futex word)
//! offset 192  slots × slot_size bytes; a slot: u32 length, 4 spare, payload
//! ```
//!
//! head and tail are on their own cache lines (no false sharing) and count
//! up forever (u64: no wrap in practice); the slot of index i is i mod
//! slots.
//!
//! Memory ordering (why no read is torn):
//! - The producer writes a slot's bytes with plain stores, then publishes
//!   it with `head.store(Release)`; the consumer reads `head` with
//!   `Acquire`, so every byte of a slot below head is visible to it before
//!   it reads the slot.
//! - The consumer reads the slot's bytes, then frees it with
//!   `tail.store(Release)`; the producer reads `tail` with `Acquire` before
//!   reusing a slot, so the consumer's reads happen before the producer's
//!   next writes to it (no torn read of a slot being overwritten).
//! - Sleeping (a lost wake-up is the hazard): the consumer sets
//!   `asleep = 1`, a `SeqCst` fence, then re-reads head; the producer
//!   stores head, a `SeqCst` fence, then reads `asleep`. With both fences,
//!   at least one of them sees the other's store (the store-buffer litmus
//!   test under SC fences): either the consumer sees the new entry and does
//!   not sleep, or the producer sees `asleep` and rings the doorbell.
//! - The doorbell is a futex on the `asleep` word itself (shared, not
//!   `FUTEX_PRIVATE`: the word lives in a segment two processes map). A
//!   futex wake reaches only a thread already queued on the word, so the
//!   producer rings by swapping `asleep` to 0 first and calls `FUTEX_WAKE`
//!   only when the swap took a 1; the consumer sleeps with
//!   `FUTEX_WAIT(asleep, 1)`, which the kernel refuses (`EAGAIN`) once the
//!   word is 0. So a ring that comes before the consumer reaches the kernel
//!   is not lost: the word already says so. Every sleep is preceded by the
//!   fenced store-and-recheck above, so a consumer that wakes for any other
//!   reason (a timeout, a signal, a ring meant for an entry it already
//!   read) just checks again. One futex call per sleep and per ring,
//!   against `poll(2)` on an eventfd, a `read` to clear it and a `write` to
//!   ring it (round 4: measured in docs/design/local.md, shm section).
//!
//! The orderings are model-checked with loom (`loom_model`, built only
//! under `--cfg loom`: `RUSTFLAGS="--cfg loom"
//! CARGO_TARGET_DIR=target/loom cargo test -p linerate-local --release
//! --lib ring::loom_model`). Under that cfg the crate is
//! this module alone and a `View` holds loom's tracked atomics and cells
//! instead of a pointer into a mapping (loom cannot follow memory it did
//! not allocate, nor two processes), and the futex is a loom mutex and
//! condition variable that check the word under the lock, as the kernel
//! does under its hash-bucket lock: [`Producer`] and [`Consumer`] run the
//! same code, and loom reports any slot read that is not ordered after its
//! write (and the write after the previous read), and any interleaving in
//! which the consumer sleeps for good on a queued entry (a deadlock).
//! Weakening either Release store to Relaxed, dropping the consumer's
//! fence, or ringing without clearing the word fails a model. The
//! consumer sets `asleep` with a swap, not a store: C11's fence rule makes
//! a store enough, but loom keeps modification order partial and then let
//! the producer's load after its fence (with a ring of its own before it)
//! miss the consumer's newer store, a deadlock C11 forbids; a read-modify-
//! write is ordered after the value it read in loom as everywhere, which
//! closes that gap in the model at the price of one locked instruction
//! per sleep.

#[cfg(loom)]
use loom::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::io;
#[cfg(not(loom))]
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

/// Bytes before the first slot.
pub const HEADER: usize = 192;
/// Bytes of a slot's own header (the length and 4 spare bytes).
pub const SLOT_HEADER: usize = 8;

const HEAD: usize = 0;
const TAIL: usize = 64;
#[cfg_attr(loom, allow(dead_code))]
const ASLEEP: usize = 128;

/// The ring's index arithmetic, free of memory: what both ends compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Indices {
    pub slots: u32,
}

impl Indices {
    /// Entries queued between `tail` and `head`.
    pub fn len(self, head: u64, tail: u64) -> u64 {
        head.wrapping_sub(tail)
    }

    /// Whether the producer may write index `head`.
    pub fn has_room(self, head: u64, tail: u64) -> bool {
        self.len(head, tail) < u64::from(self.slots)
    }

    /// The slot that index `i` lives in.
    pub fn slot(self, i: u64) -> usize {
        (i % u64::from(self.slots)) as usize
    }
}

/// The shape of one ring: how many slots of how many bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub slots: u32,
    /// Bytes per slot, its 8-byte header included (a multiple of 8).
    pub slot_size: u32,
}

impl Shape {
    /// Bytes of shared memory the ring needs.
    pub fn bytes(self) -> usize {
        HEADER + self.slots as usize * self.slot_size as usize
    }

    /// The largest payload a slot carries.
    pub fn payload(self) -> usize {
        self.slot_size as usize - SLOT_HEADER
    }
}

/// One ring in a region: the base pointer and its shape.
#[cfg(not(loom))]
#[derive(Debug, Clone, Copy)]
struct View {
    base: *mut u8,
    shape: Shape,
}

// SAFETY: a View is a pointer into a shared mapping that outlives it (the
// owner keeps the mapping alive); each side touches only what the protocol
// above gives it, through atomics or slots it owns at the time, so moving
// the view to another thread is sound.
#[cfg(not(loom))]
unsafe impl Send for View {}

#[cfg(not(loom))]
impl View {
    fn atomic_u64(&self, off: usize) -> &AtomicU64 {
        // SAFETY: `off` is 0 or 64, inside the header the creator
        // reserved; the base is 64-byte aligned (page-aligned mapping or
        // an aligned test buffer), so the u64 is aligned; AtomicU64 has the
        // layout of u64 and the memory lives as long as the view.
        unsafe { &*(self.base.add(off) as *const AtomicU64) }
    }

    fn asleep(&self) -> &AtomicU32 {
        // SAFETY: as atomic_u64: offset 128 is inside the header, aligned.
        unsafe { &*(self.base.add(ASLEEP) as *const AtomicU32) }
    }

    /// Sleeps while the `asleep` word holds `expected`, at most `timeout`
    /// (a ring, a signal or a changed word end it sooner: the caller
    /// checks the ring either way).
    fn futex_wait(&self, expected: u32, timeout: Duration) -> io::Result<()> {
        let ts = libc::timespec {
            // `as _`: musl deprecates naming its time_t (it becomes 64-bit).
            tv_sec: timeout.as_secs().min(i32::MAX as u64) as _,
            tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
        };
        // SAFETY: the word is an aligned u32 in the live mapping (see
        // `asleep`); FUTEX_WAIT reads it and the timespec, and writes
        // nothing. Not FUTEX_PRIVATE: the other process maps the word too.
        let r = unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.asleep().as_ptr(),
                libc::FUTEX_WAIT,
                expected,
                &ts as *const libc::timespec,
                std::ptr::null::<u32>(),
                0u32,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                // The word changed first, a signal, or the timeout.
                Some(libc::EAGAIN | libc::EINTR | libc::ETIMEDOUT) => Ok(()),
                _ => Err(e),
            };
        }
        Ok(())
    }

    /// Wakes the thread sleeping on the `asleep` word, if one is queued.
    fn futex_wake(&self) -> io::Result<()> {
        // SAFETY: as futex_wait; FUTEX_WAKE only uses the address as a key.
        let r = unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.asleep().as_ptr(),
                libc::FUTEX_WAKE,
                1u32,
                std::ptr::null::<libc::timespec>(),
                std::ptr::null::<u32>(),
                0u32,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn slot_ptr(&self, i: u64) -> *mut u8 {
        let slot = Indices {
            slots: self.shape.slots,
        }
        .slot(i);
        // SAFETY: slot < slots, so the offset lies within the region of
        // `shape.bytes()` bytes the creator reserved.
        unsafe { self.base.add(HEADER + slot * self.shape.slot_size as usize) }
    }

    /// Writes `msg` (at most a slot's payload) into the slot of index `i`.
    ///
    /// # Safety
    /// The slot must be the producer's: free (acquired from `tail`) and not
    /// yet published.
    unsafe fn write_slot(&self, i: u64, msg: &[u8]) {
        let p = self.slot_ptr(i);
        // SAFETY: the caller owns the slot; msg.len() ≤ payload (checked
        // by the caller), so header and payload fit the slot; msg is
        // private memory, so the ranges do not overlap.
        unsafe {
            (p as *mut u32).write_unaligned(msg.len() as u32);
            std::ptr::copy_nonoverlapping(msg.as_ptr(), p.add(SLOT_HEADER), msg.len());
        }
    }

    /// Copies the slot of index `i` into `out`; its length (clamped to the
    /// payload and to `out`).
    ///
    /// # Safety
    /// The slot must be the consumer's: published (acquired from `head`)
    /// and not yet freed.
    unsafe fn read_slot(&self, i: u64, out: &mut [u8]) -> usize {
        let p = self.slot_ptr(i);
        // SAFETY: the caller owns the slot; the stored length is clamped
        // to the slot's payload, so the read stays in the slot.
        unsafe {
            let len = (p as *const u32).read_unaligned() as usize;
            let n = len.min(self.shape.payload()).min(out.len());
            std::ptr::copy_nonoverlapping(p.add(SLOT_HEADER), out.as_mut_ptr(), n);
            n
        }
    }
}

/// Under loom: the ring's memory as loom-tracked atomics and cells.
#[cfg(loom)]
#[derive(Debug)]
struct Region {
    head: AtomicU64,
    tail: AtomicU64,
    asleep: AtomicU32,
    /// The futex's queue: the kernel checks the word and queues a waiter
    /// under its hash-bucket lock, and wakes under the same lock.
    bucket: loom::sync::Mutex<()>,
    queue: loom::sync::Condvar,
    /// Per slot: its length and payload bytes.
    slots: Vec<loom::cell::UnsafeCell<(usize, Vec<u8>)>>,
}

#[cfg(loom)]
#[derive(Debug, Clone)]
struct View {
    r: loom::sync::Arc<Region>,
    shape: Shape,
}

#[cfg(loom)]
impl View {
    fn atomic_u64(&self, off: usize) -> &AtomicU64 {
        if off == HEAD {
            &self.r.head
        } else {
            &self.r.tail
        }
    }

    fn asleep(&self) -> &AtomicU32 {
        &self.r.asleep
    }

    /// FUTEX_WAIT without a timeout (loom has no time; a sleep that never
    /// ends is the lost wake-up it looks for, reported as a deadlock).
    fn futex_wait(&self, expected: u32, _timeout: Duration) -> io::Result<()> {
        let g = self.r.bucket.lock().expect("bucket");
        if self.r.asleep.load(Ordering::SeqCst) == expected {
            drop(self.r.queue.wait(g).expect("bucket"));
        }
        Ok(())
    }

    fn futex_wake(&self) -> io::Result<()> {
        let _g = self.r.bucket.lock().expect("bucket");
        self.r.queue.notify_one();
        Ok(())
    }

    fn cell(&self, i: u64) -> &loom::cell::UnsafeCell<(usize, Vec<u8>)> {
        &self.r.slots[Indices {
            slots: self.shape.slots,
        }
        .slot(i)]
    }

    /// As the mapped ring's; loom checks the access is not concurrent
    /// with the consumer's read of the same slot.
    unsafe fn write_slot(&self, i: u64, msg: &[u8]) {
        self.cell(i).with_mut(|p| {
            // SAFETY: loom's cell hands out this pointer only for the
            // closure and panics on an access that races with another.
            let (len, bytes) = unsafe { &mut *p };
            *len = msg.len();
            bytes[..msg.len()].copy_from_slice(msg);
        })
    }

    unsafe fn read_slot(&self, i: u64, out: &mut [u8]) -> usize {
        self.cell(i).with(|p| {
            // SAFETY: as in write_slot.
            let (len, bytes) = unsafe { &*p };
            let n = (*len).min(out.len());
            out[..n].copy_from_slice(&bytes[..n]);
            n
        })
    }
}

/// Under loom: a fresh ring of `shape` in loom-tracked memory.
#[cfg(loom)]
pub fn model(shape: Shape) -> (Producer, Consumer) {
    let v = View {
        r: loom::sync::Arc::new(Region {
            head: AtomicU64::new(0),
            tail: AtomicU64::new(0),
            asleep: AtomicU32::new(0),
            bucket: loom::sync::Mutex::new(()),
            queue: loom::sync::Condvar::new(),
            slots: (0..shape.slots)
                .map(|_| loom::cell::UnsafeCell::new((0, vec![0; shape.payload()])))
                .collect(),
        }),
        shape,
    };
    (
        Producer {
            v: v.clone(),
            head: 0,
        },
        Consumer { v, tail: 0 },
    )
}

/// The writing end of a ring.
#[derive(Debug)]
pub struct Producer {
    v: View,
    /// The next index to write (the producer's own copy of head).
    head: u64,
}

/// The reading end of a ring.
#[derive(Debug)]
pub struct Consumer {
    v: View,
    /// The next index to read (the consumer's own copy of tail).
    tail: u64,
}

/// A message longer than a slot's payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLong {
    pub len: usize,
    pub limit: usize,
}

/// Zeroes the ring's header (a fresh ring: empty, consumer awake).
///
/// # Safety
/// `base` must point to at least `shape.bytes()` writable bytes, 64-byte
/// aligned, that no one else uses yet.
#[cfg(not(loom))]
pub unsafe fn init(base: *mut u8, shape: Shape) {
    debug_assert!(shape.slot_size as usize >= SLOT_HEADER && shape.slot_size.is_multiple_of(8));
    debug_assert!((base as usize).is_multiple_of(64));
    // SAFETY: the caller guarantees HEADER writable bytes at base.
    unsafe { std::ptr::write_bytes(base, 0, HEADER) };
}

/// The two ends of the ring at `base`.
///
/// # Safety
/// `base` must point to a ring set up by [`init`] with this `shape`, that
/// stays mapped while the ends live; at most one producer and one consumer
/// may exist for it at a time (across processes).
#[cfg(not(loom))]
pub unsafe fn ends(base: *mut u8, shape: Shape) -> (Producer, Consumer) {
    let v = View { base, shape };
    let head = v.atomic_u64(HEAD).load(Ordering::Acquire);
    let tail = v.atomic_u64(TAIL).load(Ordering::Acquire);
    (Producer { v, head }, Consumer { v, tail })
}

impl Producer {
    /// The largest payload a slot carries.
    pub fn payload_limit(&self) -> usize {
        self.v.shape.payload()
    }

    /// Queues `msg` if there is room: `Ok(false)` when the ring is full
    /// (the caller waits and retries), an error when `msg` cannot fit a
    /// slot at all.
    pub fn try_push(&mut self, msg: &[u8]) -> Result<bool, TooLong> {
        let limit = self.payload_limit();
        if msg.len() > limit {
            return Err(TooLong {
                len: msg.len(),
                limit,
            });
        }
        let tail = self.v.atomic_u64(TAIL).load(Ordering::Acquire);
        let ix = Indices {
            slots: self.v.shape.slots,
        };
        if !ix.has_room(self.head, tail) {
            return Ok(false);
        }
        // SAFETY: the slot at head is free (has_room after acquiring tail:
        // the consumer is done with it) and the consumer does not read it
        // until the Release store of head below; msg fits (checked above).
        unsafe { self.v.write_slot(self.head, msg) };
        self.head += 1;
        self.v.atomic_u64(HEAD).store(self.head, Ordering::Release);
        Ok(true)
    }

    /// After a push: rings the consumer's doorbell if it sleeps or is about
    /// to (see the module's ordering notes); true when it rang. The load
    /// first: while the consumer is awake (spinning or busy) a push costs
    /// no write to its cache line and no system call.
    pub fn wake_consumer(&self) -> io::Result<bool> {
        fence(Ordering::SeqCst);
        let w = self.v.asleep();
        if w.load(Ordering::Relaxed) == 0 || w.swap(0, Ordering::Relaxed) == 0 {
            return Ok(false);
        }
        self.v.futex_wake()?;
        Ok(true)
    }
}

impl Consumer {
    /// Copies the oldest entry into `out` and frees its slot; its length,
    /// or `None` when the ring is empty. An entry longer than `out` is
    /// truncated to `out`'s length (callers size `out` to the payload).
    pub fn try_pop(&mut self, out: &mut [u8]) -> Option<usize> {
        let head = self.v.atomic_u64(HEAD).load(Ordering::Acquire);
        if head == self.tail {
            return None;
        }
        // SAFETY: the slot below head was published by the producer's
        // Release store, acquired above; it stays untouched by the producer
        // until our Release store of tail below.
        let n = unsafe { self.v.read_slot(self.tail, out) };
        self.tail += 1;
        self.v.atomic_u64(TAIL).store(self.tail, Ordering::Release);
        Some(n)
    }

    /// Whether an entry is queued.
    pub fn ready(&self) -> bool {
        self.v.atomic_u64(HEAD).load(Ordering::Acquire) != self.tail
    }

    /// About to sleep on the doorbell: marks the consumer asleep and says
    /// whether it may (nothing arrived meanwhile). On `false` it is awake
    /// again and should read the ring.
    pub fn prepare_sleep(&self) -> bool {
        // A swap where C11 needs only a store (see the module's notes on
        // loom); on the sleep path only, where it costs nothing measurable.
        self.v.asleep().swap(1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        if self.ready() {
            self.v.asleep().store(0, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// Woken (or giving up on sleeping): clears the mark.
    pub fn awake(&self) {
        self.v.asleep().store(0, Ordering::Relaxed);
    }

    /// Sleeps until the producer rings, at most `timeout` (a signal or a
    /// ring meant for an entry already read may end it sooner); true when
    /// an entry is queued. Returns at once when one is.
    pub fn sleep(&self, timeout: Duration) -> io::Result<bool> {
        if !self.prepare_sleep() {
            return Ok(true);
        }
        let r = self.v.futex_wait(1, timeout);
        self.awake();
        r?;
        Ok(self.ready())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    /// A 64-byte aligned heap buffer standing in for the shared mapping.
    #[repr(C, align(64))]
    struct Line([u8; 64]);

    fn region(shape: Shape) -> Vec<Line> {
        (0..shape.bytes().div_ceil(64))
            .map(|_| Line([0; 64]))
            .collect()
    }

    fn ring(buf: &mut [Line], shape: Shape) -> (Producer, Consumer) {
        let base = buf.as_mut_ptr() as *mut u8;
        // SAFETY: buf holds shape.bytes() bytes, 64-byte aligned, owned
        // by the test and alive for the ring's use.
        unsafe {
            init(base, shape);
            ends(base, shape)
        }
    }

    #[test]
    fn indices_wrap_and_fill() {
        let ix = Indices { slots: 4 };
        assert!(ix.has_room(3, 0));
        assert!(!ix.has_room(4, 0));
        assert_eq!(ix.slot(5), 1);
        assert_eq!(ix.len(u64::MAX, u64::MAX - 2), 2);
    }

    #[test]
    fn a_message_longer_than_a_slot_is_refused_naming_the_limit() {
        let shape = Shape {
            slots: 4,
            slot_size: 64,
        };
        let mut buf = region(shape);
        let (mut p, _c) = ring(&mut buf, shape);
        assert_eq!(p.try_push(&[0; 57]), Err(TooLong { len: 57, limit: 56 }));
        assert_eq!(p.try_push(&[0; 56]), Ok(true));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Push(Vec<u8>),
        Pop,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..=24).prop_map(Op::Push),
            Just(Op::Pop),
        ]
    }

    proptest! {
        /// Model-based: the ring behaves as a bounded VecDeque of messages.
        #[test]
        fn ring_matches_a_bounded_queue(slots in 1u32..6, ops in proptest::collection::vec(op(), 0..200)) {
            let shape = Shape { slots, slot_size: 32 };
            let mut buf = region(shape);
            let (mut p, mut c) = ring(&mut buf, shape);
            let mut model: VecDeque<Vec<u8>> = VecDeque::new();
            let mut out = [0u8; 24];
            for o in ops {
                match o {
                    Op::Push(m) => {
                        let pushed = p.try_push(&m).expect("fits a slot");
                        prop_assert_eq!(pushed, model.len() < slots as usize);
                        if pushed { model.push_back(m); }
                    }
                    Op::Pop => {
                        let got = c.try_pop(&mut out).map(|n| out[..n].to_vec());
                        prop_assert_eq!(got, model.pop_front());
                    }
                }
                prop_assert_eq!(c.ready(), !model.is_empty());
            }
        }
    }

    /// Two threads, many messages whose every byte derives from their
    /// number: any torn or reordered read shows as a mismatch.
    #[test]
    fn no_torn_reads_across_threads() {
        let shape = Shape {
            slots: 8,
            slot_size: 72,
        };
        let mut buf = region(shape);
        let (mut p, mut c) = ring(&mut buf, shape);
        const N: u64 = 200_000;
        std::thread::scope(|s| {
            s.spawn(move || {
                for i in 0..N {
                    let len = (i % 65) as usize;
                    let m: Vec<u8> = (0..len).map(|k| (i as u8).wrapping_add(k as u8)).collect();
                    // Yield, not spin: on a small or busy host the two
                    // threads may share a CPU, where a spin lasts a tick.
                    while !p.try_push(&m).expect("fits") {
                        std::thread::yield_now();
                    }
                }
            });
            let mut out = [0u8; 64];
            for i in 0..N {
                let n = loop {
                    if let Some(n) = c.try_pop(&mut out) {
                        break n;
                    }
                    std::thread::yield_now();
                };
                assert_eq!(n, (i % 65) as usize, "message {i}");
                for (k, b) in out[..n].iter().enumerate() {
                    assert_eq!(*b, (i as u8).wrapping_add(k as u8), "message {i} byte {k}");
                }
            }
        });
    }
}

/// The ring's orderings under loom's model checker: every interleaving and
/// every value a load may see under the C11 model, within loom's bounds.
#[cfg(all(test, loom))]
mod loom_model {
    use super::*;
    use loom::thread;

    /// Message `i` of length 1 + i % 3, every byte derived from i.
    fn message(i: u8) -> Vec<u8> {
        (0..1 + i % 3)
            .map(|k| i.wrapping_mul(7).wrapping_add(k))
            .collect()
    }

    /// Slots are reused (3 messages through 2 slots): loom fails the test
    /// if a slot is read before its write is visible, or written again
    /// while the consumer may still read it (its cells check every
    /// access against the happens-before the atomics establish).
    #[test]
    fn slots_are_published_and_freed_in_order() {
        loom::model(|| {
            let shape = Shape {
                slots: 2,
                slot_size: 16,
            };
            let (mut p, mut c) = model(shape);
            let t = thread::spawn(move || {
                for i in 0..3u8 {
                    while !p.try_push(&message(i)).expect("fits") {
                        thread::yield_now();
                    }
                }
            });
            let mut out = [0u8; 8];
            for i in 0..3u8 {
                let n = loop {
                    if let Some(n) = c.try_pop(&mut out) {
                        break n;
                    }
                    thread::yield_now();
                };
                assert_eq!(&out[..n], &message(i)[..], "message {i}");
            }
            t.join().expect("producer");
        });
    }

    /// No lost wake-up: the consumer sleeps whenever the ring is empty,
    /// the producer rings after each push; a consumer asleep for good on a
    /// queued entry is a deadlock, which loom reports. Two messages: the
    /// second push may meet the consumer re-arming after a ring meant for
    /// the first (a stale ring) or still awake from it.
    #[test]
    fn a_sleeping_consumer_is_always_woken() {
        loom::model(|| {
            let shape = Shape {
                slots: 2,
                slot_size: 16,
            };
            let (mut p, mut c) = model(shape);
            let t = thread::spawn(move || {
                for i in 0..2u8 {
                    assert!(p.try_push(&[i]).expect("fits"));
                    p.wake_consumer().expect("ring");
                }
            });
            let mut out = [0u8; 8];
            for i in 0..2u8 {
                let n = loop {
                    if let Some(n) = c.try_pop(&mut out) {
                        break n;
                    }
                    c.sleep(Duration::from_secs(1)).expect("sleep");
                };
                assert_eq!(&out[..n], &[i], "message {i}");
            }
            t.join().expect("producer");
        });
    }
}
