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

/// Sets the allocator up for a process that serves tests for a long time
/// (issue 28). Call it before the first thread is started.
///
/// - One arena: every thread allocates from the main arena, since each
///   per-thread arena keeps pages that `malloc_trim` does not give back
///   (after 20 mixed tests, 29.6 MiB with trimming alone, 16.2 with two
///   arenas, 14.4 with one).
/// - A fixed mmap threshold (128 KiB, glibc's default starting point): a
///   buffer that large (a stream's, a window's) is mapped and unmapped
///   whole. Left dynamic, glibc raises the threshold to the size of each
///   mapped block freed, so the next tests' buffers land on the heap, where
///   they fragment it and stay (release build, 100 mixed tests: 2.7–4.8
///   MiB of anonymous memory kept idle, 0.7–0.8 MiB with the fixed one).
///
/// Both cost per test, not per packet: the data loops allocate their
/// buffers once. Measured with `bench/ab` (one arena against glibc's
/// default): no difference beyond the run-to-run spread, on a loaded
/// 2-CPU host (bench/README.md, "Server memory").
pub fn for_server() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets allocator parameters; called at start,
    // before other threads allocate.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 << 10);
    }
}
