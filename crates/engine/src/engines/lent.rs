//! Memory lent to the kernel that must outlive its loan.
//!
//! io_uring requests and zero-copy sends (`SEND_ZC`, `MSG_ZEROCOPY`) hand
//! the kernel a pointer into the process's memory: the kernel reads or
//! writes it until the request completes (for a zero-copy TCP send, until
//! the peer acknowledged the bytes, retransmissions included). A loop that
//! ends while such a loan is still out, after its bounded wait, must not
//! free that memory: the allocator would hand it out again while the
//! kernel receives into it or sends it (other data of this process on the
//! wire). [`leak`] keeps it, for the life of the process.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// Leaves `memory` to the process, never freed: the kernel may still read
/// or write it. A bounded loss, once per loop that ends this way. Says so
/// on stderr once per process.
pub(crate) fn leak<T>(memory: T) {
    // First: nothing below may free it (a panic would drop `memory`).
    std::mem::forget(memory);
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Ordering::Relaxed) {
        // Not `eprintln!`: a closed stderr must not panic this thread.
        let _ = writeln!(
            std::io::stderr(),
            "linerate: the kernel still held memory lent to it (io_uring requests or \
             zero-copy sends not completed) after the bounded wait at their end; that \
             memory is left allocated, not freed"
        );
    }
}
