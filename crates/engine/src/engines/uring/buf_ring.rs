//! A provided buffer ring (`IORING_REGISTER_PBUF_RING`): buffers the kernel
//! picks from for each datagram a multishot receive completes, given back
//! one by one once read.

use std::io;
use std::sync::atomic::{AtomicU16, Ordering};

use io_uring::{types, IoUring};

/// A provided buffer ring: `entries` buffers of `size` bytes that the
/// kernel picks from for each received datagram.
pub(crate) struct BufRing {
    /// The ring of `io_uring_buf` entries, page-aligned as the kernel needs.
    entries: *mut types::BufRingEntry,
    layout: std::alloc::Layout,
    data: Vec<u8>,
    size: usize,
    mask: u16,
    tail: u16,
    bgid: u16,
}

// SAFETY: the raw pointer is this value's own allocation, used only by the
// thread that owns the value (the kernel reads it through the ring).
unsafe impl Send for BufRing {}

impl BufRing {
    /// Allocates `entries` (a power of two) buffers of `size` bytes,
    /// registers them with `ring` as group `bgid` and provides them all.
    pub(crate) fn new(ring: &IoUring, entries: u16, size: usize, bgid: u16) -> io::Result<Self> {
        let layout = std::alloc::Layout::from_size_align(
            usize::from(entries) * std::mem::size_of::<types::BufRingEntry>(),
            4096,
        )
        .map_err(io::Error::other)?;
        // SAFETY: a non-zero size, page alignment; freed in Drop with the
        // same layout.
        let mem = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<types::BufRingEntry>();
        if mem.is_null() {
            return Err(io::ErrorKind::OutOfMemory.into());
        }
        let mut r = BufRing {
            entries: mem,
            layout,
            data: vec![0u8; usize::from(entries) * size],
            size,
            mask: entries - 1,
            tail: 0,
            bgid,
        };
        // SAFETY: the ring memory lives until Drop, which the owner runs
        // only after unregistering it or dropping the io_uring.
        unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(mem as u64, entries, bgid, 0)
        }?;
        for bid in 0..entries {
            r.provide(bid);
        }
        Ok(r)
    }

    /// Gives buffer `bid` (back) to the kernel.
    pub(crate) fn provide(&mut self, bid: u16) {
        let at = usize::from(bid) * self.size;
        // SAFETY: the index is masked into the ring; the entry is ours to
        // write until the tail below publishes it.
        let e = unsafe { &mut *self.entries.add(usize::from(self.tail & self.mask)) };
        e.set_addr(self.data[at..].as_ptr() as u64);
        e.set_len(self.size as u32);
        e.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
        // SAFETY: the tail field overlays entry 0's reserved field (the
        // kernel ABI); the release store publishes the entry written above.
        unsafe {
            let tail = types::BufRingEntry::tail(self.entries).cast::<AtomicU16>();
            (*tail).store(self.tail, Ordering::Release);
        }
    }

    /// Buffer `bid`'s first `len` bytes.
    pub(crate) fn get(&self, bid: u16, len: usize) -> &[u8] {
        let at = usize::from(bid) * self.size;
        &self.data[at..at + len.min(self.size)]
    }

    pub(crate) fn unregister(self, ring: &IoUring) {
        let _ = ring.submitter().unregister_buf_ring(self.bgid);
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: allocated in new() with this layout.
        unsafe { std::alloc::dealloc(self.entries.cast(), self.layout) };
    }
}
