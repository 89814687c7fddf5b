//! The clock the data path and clock probes read, and the host's boot id.
//!
//! Every latency timestamp is `CLOCK_MONOTONIC` in nanoseconds: never
//! stepped (unlike `CLOCK_REALTIME`), read through the vDSO without a
//! system call, and shared by every process on one kernel, so that the
//! client's and the server's readings compare directly on one host (see
//! `linerate_proto::clock`).

/// `CLOCK_MONOTONIC` now, in nanoseconds.
#[inline]
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write; CLOCK_MONOTONIC always exists
    // on Linux, so the call cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// This kernel's boot id (a random UUID per boot), if readable. Two
/// processes with the same boot id share one monotonic clock.
pub fn boot_id() -> Option<String> {
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let id = id.trim();
    (!id.is_empty()).then(|| id.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_and_in_step_with_std() {
        let a = mono_ns();
        let s = std::time::Instant::now();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let std_ns = s.elapsed().as_nanos() as u64;
        let b = mono_ns();
        assert!(b > a);
        // std's Instant reads the same clock, so its span nests inside ours.
        assert!((b - a) >= std_ns, "{} < {std_ns}", b - a);
    }

    #[test]
    fn boot_id_is_stable() {
        assert_eq!(boot_id(), boot_id());
    }
}
