//! Handing memory that a finished test freed back to the kernel.
//!
//! glibc's allocator gives each thread that allocates an arena of its own
//! and keeps those arenas (and the free pages in them) after the thread
//! ends, so a long-running server grows by every test's stream threads and
//! never shrinks (issue 28: 15.7 MiB after a bench run, where iperf3 held
//! 4.7 MiB). `malloc_trim(0)` returns the free pages of every arena,
//! main heap included; other C libraries have nothing to trim here.

/// Returns the allocator's free pages to the kernel. Call it when a test
/// has ended and its threads are joined: it walks every arena, so it is
/// for once per test, never per packet.
pub fn release_freed() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only takes the allocator's own locks and may be
    // called from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Makes every thread allocate from the one main arena, for a process that
/// serves tests for a long time: each per-thread arena keeps pages that
/// `malloc_trim` does not give back (measured, issue 28: after 20 mixed
/// tests, 29.6 MiB with trimming alone, 16.2 with two arenas, 14.4 with
/// one). The data loops are built not to allocate per packet, so the one
/// lock should cost nothing; the bench has not yet measured it (a cell
/// slower with many streams would point here). Call it before the first
/// thread is started.
pub fn one_arena() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets an allocator parameter; called at start,
    // before other threads allocate.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}
