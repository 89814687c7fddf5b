//! CPU accounting: this process, this thread, and the whole host.
//!
//! Process and thread times come from `getrusage(2)` (microsecond
//! resolution); host time from the first line of `/proc/stat` (USER_HZ ticks,
//! usually 10 ms), so host figures are only meaningful over tests much longer
//! than a tick.

use std::time::Duration;

use linerate_proto::measure::HostCpu;

/// User and system CPU time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTime {
    pub user: Duration,
    pub system: Duration,
}

impl CpuTime {
    pub fn saturating_sub(self, earlier: CpuTime) -> CpuTime {
        CpuTime {
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
        }
    }
}

impl std::ops::Add for CpuTime {
    type Output = CpuTime;
    fn add(self, other: CpuTime) -> CpuTime {
        CpuTime {
            user: self.user + other.user,
            system: self.system + other.system,
        }
    }
}

fn rusage(who: libc::c_int) -> CpuTime {
    // SAFETY: rusage is plain data; getrusage fills it and cannot fail for
    // RUSAGE_SELF/RUSAGE_THREAD with a valid pointer.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(who, &mut ru) };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    CpuTime {
        user: tv(ru.ru_utime),
        system: tv(ru.ru_stime),
    }
}

/// CPU time of the whole process so far.
pub fn process() -> CpuTime {
    rusage(libc::RUSAGE_SELF)
}

/// CPU time of the calling thread so far.
pub fn thread() -> CpuTime {
    rusage(libc::RUSAGE_THREAD)
}

/// A snapshot of the host's aggregate CPU counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostSnapshot {
    busy_ticks: u64,
    total_ticks: u64,
}

/// Parses the aggregate `cpu` line of /proc/stat.
pub fn parse_proc_stat(text: &str) -> Option<HostSnapshot> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal [guest guest_nice]
    // (guest time is already included in user/nice).
    let get = |i: usize| v.get(i).copied().unwrap_or(0);
    let idle = get(3) + get(4);
    let busy = get(0) + get(1) + get(2) + get(5) + get(6) + get(7);
    (v.len() >= 4).then_some(HostSnapshot {
        busy_ticks: busy,
        total_ticks: busy + idle,
    })
}

/// Reads the host counters, or `None` where /proc/stat is unreadable.
pub fn host() -> Option<HostSnapshot> {
    parse_proc_stat(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// Clock ticks (USER_HZ) as nanoseconds.
pub(crate) fn ticks_to_ns(ticks: u64) -> u64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = if hz > 0 { hz as u64 } else { 100 };
    ticks.saturating_mul(1_000_000_000) / hz
}

/// Host CPU between two snapshots, of which `own` (this side's CPU time
/// over the same span, from the precise per-process clock) is part.
/// `/proc/stat` is sampled at the clock tick, so a side that runs in short
/// bursts between ticks (a paced sender, a control loop's wake-ups) can be
/// missed there: the host is never shown less busy than the
/// side alone.
pub fn host_delta(start: HostSnapshot, end: HostSnapshot, own: Duration) -> HostCpu {
    let busy_ns =
        ticks_to_ns(end.busy_ticks.saturating_sub(start.busy_ticks)).max(own.as_nanos() as u64);
    HostCpu {
        cpus: host_cpus(),
        busy_ns,
        total_ns: ticks_to_ns(end.total_ticks.saturating_sub(start.total_ticks)).max(busy_ns),
    }
}

/// CPUs online on the host (what `/proc/stat`'s totals cover), whatever
/// this process's affinity mask.
pub fn host_cpus() -> u32 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n > 0 {
        n as u32
    } else {
        online_cpus()
    }
}

/// CPUs this process may run on now: the online CPUs in its affinity mask
/// (`sched_getaffinity`), fewer under a cgroup CPU quota (std's
/// `available_parallelism` reads both).
pub fn online_cpus() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
}

/// The ids of the CPUs this process may run on (its affinity mask, as
/// `taskset` sets it): `--cpus` may name only these. Empty if the mask
/// cannot be read.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity writes at most its
    // size, and CPU_ISSET reads within it for i < CPU_SETSIZE.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&i| libc::CPU_ISSET(i, &set))
            .collect()
    }
}

/// Sets the calling thread's nice value (Linux: per thread). Lowering it
/// below the current value needs CAP_SYS_NICE.
pub fn set_thread_nice(nice: i32) -> std::io::Result<()> {
    // SAFETY: gettid and setpriority take plain integers.
    let rc = unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice)
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Pins the calling thread to one CPU.
pub fn pin_current_thread(cpu: usize) -> std::io::Result<()> {
    // SAFETY: cpu_set_t is plain data; CPU_SET writes within it for cpu <
    // CPU_SETSIZE, which we check; sched_setaffinity reads it.
    unsafe {
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
        }
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A side's own CPU (precise) is part of the host's: tick-sampled
    /// `/proc/stat` showed `server 4.8% of a CPU … host 0.8% of 2 CPUs`.
    #[test]
    fn issue_28_host_cpu_is_never_below_the_sides_own() {
        let a = HostSnapshot {
            busy_ticks: 100,
            total_ticks: 1000,
        };
        let b = HostSnapshot {
            busy_ticks: 103,
            total_ticks: 1400,
        };
        let ticks = ticks_to_ns(3);
        let h = host_delta(a, b, Duration::ZERO);
        assert_eq!(h.busy_ns, ticks);
        let own = Duration::from_nanos(ticks * 3);
        let h = host_delta(a, b, own);
        assert_eq!(h.busy_ns, ticks * 3);
        assert_eq!(h.total_ns, ticks_to_ns(400));
    }

    #[test]
    fn the_allowed_cpus_are_as_many_as_std_counts_without_a_quota() {
        let ids = allowed_cpus();
        assert!(!ids.is_empty());
        assert!(ids.len() >= online_cpus() as usize, "{ids:?}");
    }

    #[test]
    fn proc_stat_line_parses() {
        let s = "cpu  100 5 50 1000 10 1 2 3 0 0\ncpu0 1 2 3 4\n";
        let h = parse_proc_stat(s).expect("parses");
        assert_eq!(h.busy_ticks, 100 + 5 + 50 + 1 + 2 + 3);
        assert_eq!(h.total_ticks, h.busy_ticks + 1010);
        assert_eq!(parse_proc_stat("intr 1 2"), None);
        assert_eq!(parse_proc_stat("cpu  x y"), None);
    }

    #[test]
    fn process_time_advances_with_work() {
        let a = process();
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let b = process();
        assert!(b.saturating_sub(a).user > Duration::ZERO);
    }
}
