//! CPU figures from a side's CPU time: shares of a CPU and of the host,
//! service demand, the busiest thread.

use linerate_proto::measure::{CpuMeasurement, IntervalCpu};

use super::figures::{ns_to_s, percent};
use crate::model::{IntervalCpuRecord, SideCpu};

pub(crate) fn side_cpu(c: &CpuMeasurement, bytes_moved: u64) -> SideCpu {
    let user_s = ns_to_s(c.user_ns);
    let system_s = ns_to_s(c.system_ns);
    let wall_s = ns_to_s(c.wall_ns);
    let used_us = (c.user_ns + c.system_ns) as f64 / 1e3;
    SideCpu {
        scope: c.scope.clone(),
        user_s,
        system_s,
        wall_s,
        percent_of_cpu: if wall_s > 0.0 {
            (user_s + system_s) / wall_s * 100.0
        } else {
            0.0
        },
        host_percent: c
            .host
            .as_ref()
            .filter(|h| h.total_ns > 0)
            .map(|h| h.busy_ns as f64 / h.total_ns as f64 * 100.0),
        host_cpus: c.host.as_ref().map(|h| h.cpus),
        service_demand_us_per_kib: (bytes_moved > 0)
            .then(|| used_us / (bytes_moved as f64 / 1024.0)),
        busiest_thread: c.busiest_thread.clone(),
        busiest_thread_percent: c
            .busiest_thread_ns
            .filter(|_| c.wall_ns > 0)
            .map(|b| percent(b, c.wall_ns)),
    }
}

pub(super) fn interval_cpu(c: &IntervalCpu) -> IntervalCpuRecord {
    IntervalCpuRecord {
        percent_of_cpu: percent(c.user_ns + c.system_ns, c.wall_ns),
        user_percent: percent(c.user_ns, c.wall_ns),
        system_percent: percent(c.system_ns, c.wall_ns),
        busiest_thread: c.busiest_thread.clone(),
        busiest_thread_percent: percent(c.busiest_thread_ns, c.wall_ns),
    }
}
