//! The individual checks of `doctor`. Thresholds are the usual advice for
//! 10 Gbit/s-class hosts (e.g. the buffer, backlog, priority, jumbo-frame
//! and pinning advice that UDP receive studies end with); each check's
//! `why` says what the number does to a test of the kind asked about.

use super::check::{Check, Kind, Place, Setting, Status};
use crate::{ethtool, route, sysctl, sysfs};

const MIB: u64 = 1 << 20;

/// A sysctl judged by one numeric field (the last for `min default max`
/// triples) against a per-kind minimum; `None` = fine for that kind.
struct Rule {
    name: &'static str,
    min: fn(Kind) -> Option<u64>,
    why: fn(Kind) -> &'static str,
}

const RULES: &[Rule] = &[
    Rule {
        name: "net.core.rmem_max",
        min: |k| match k {
            Kind::Udp => Some(32 * MIB),
            Kind::Tcp => Some(16 * MIB),
            Kind::Latency => None,
        },
        why: |k| {
            match k {
            Kind::Udp => "caps SO_RCVBUF (linerate -w) for non-root receivers; a UDP receiver needs tens of MB to ride out scheduling gaps at 10 Gbit/s without dropping",
            Kind::Tcp => "caps SO_RCVBUF when -w is given (autotuning uses tcp_rmem instead)",
            Kind::Latency => "receive buffer cap; small messages do not need large buffers",
        }
        },
    },
    Rule {
        name: "net.core.wmem_max",
        min: |k| match k {
            Kind::Udp => Some(4 * MIB),
            Kind::Tcp => Some(16 * MIB),
            Kind::Latency => None,
        },
        why: |k| {
            match k {
            Kind::Udp => "caps SO_SNDBUF (linerate -w): a small send buffer makes a fast sender block or fail sends (SndbufErrors)",
            Kind::Tcp => "caps SO_SNDBUF when -w is given (autotuning uses tcp_wmem instead)",
            Kind::Latency => "send buffer cap; small messages do not need large buffers",
        }
        },
    },
    Rule {
        name: "net.core.rmem_default",
        min: |k| (k == Kind::Udp).then_some(4 * MIB),
        why: |k| {
            match k {
            Kind::Udp => "the receive buffer of every UDP socket that does not ask for one (linerate udp without -w): the default ~208 KiB overflows in under a millisecond at 10 Gbit/s",
            _ => "receive buffer of sockets that do not set one; TCP autotunes from tcp_rmem instead",
        }
        },
    },
    Rule {
        name: "net.ipv4.tcp_rmem",
        min: |k| (k == Kind::Tcp).then_some(32 * MIB),
        why: |k| {
            match k {
            Kind::Tcp => "the third field caps TCP receive autotuning: the window must cover the bandwidth-delay product (10 Gbit/s × 25 ms ≈ 31 MB) or one stream cannot fill the path",
            _ => "TCP receive autotuning limits (min default max); matter for bulk TCP, not for this kind",
        }
        },
    },
    Rule {
        name: "net.ipv4.tcp_wmem",
        min: |k| (k == Kind::Tcp).then_some(32 * MIB),
        why: |k| {
            match k {
            Kind::Tcp => "the third field caps TCP send autotuning: the sender must hold a bandwidth-delay product of unacknowledged data",
            _ => "TCP send autotuning limits (min default max); matter for bulk TCP, not for this kind",
        }
        },
    },
    Rule {
        name: "net.ipv4.udp_mem",
        min: |k| (k == Kind::Udp).then_some(131_072),
        why: |_| {
            "pages all UDP sockets together may hold (min pressure max): above the third field every UDP socket drops (RcvbufErrors) whatever its own buffer"
        },
    },
    Rule {
        name: "net.core.netdev_max_backlog",
        min: |k| (k != Kind::Latency).then_some(10_000),
        why: |k| {
            match k {
            Kind::Latency => "packets queued per CPU before the stack processes them; only bursts of bulk traffic fill it",
            _ => "packets queued per CPU between the driver and the stack; bursts beyond it are dropped before any socket sees them (the default 1000 is short for 10 Gbit/s)",
        }
        },
    },
    Rule {
        name: "net.core.busy_read",
        min: |k| (k == Kind::Latency).then_some(50),
        why: |k| {
            match k {
            Kind::Latency => "µs a blocking read busy-polls the device queue before sleeping: saves the interrupt and wake-up (several µs per message); linerate rr --busy-poll asks for it per socket",
            _ => "busy polling of reads (µs); a latency setting that costs CPU in bulk tests",
        }
        },
    },
    Rule {
        name: "net.core.busy_poll",
        min: |k| (k == Kind::Latency).then_some(50),
        why: |k| {
            match k {
            Kind::Latency => "µs poll/select/epoll busy-poll before sleeping; the same saving as busy_read for event-driven peers",
            _ => "busy polling in poll/select (µs); a latency setting that costs CPU in bulk tests",
        }
        },
    },
    Rule {
        name: "net.core.somaxconn",
        min: |k| (k == Kind::Latency).then_some(4096),
        why: |k| {
            match k {
            Kind::Latency => "listen backlog cap: connection-rate tests (crr) open connections as fast as the server accepts them; a short backlog drops SYNs and adds 1 s retransmits",
            _ => "listen backlog cap; matters for connection-rate (crr) tests",
        }
        },
    },
];

/// The judged field of a sysctl value: the last one (max of a triple).
fn judged(value: &str) -> Option<u64> {
    value.split(' ').next_back()?.parse().ok()
}

/// `value` with its last field replaced by `max`.
fn with_last(value: &str, max: u64) -> String {
    let mut f: Vec<String> = value.split(' ').map(str::to_owned).collect();
    if let Some(l) = f.last_mut() {
        *l = max.to_string();
    }
    f.join(" ")
}

fn rule_check(kind: Kind, r: &Rule, at: &Place) -> Check {
    let value = sysctl::read(r.name);
    let why = (r.why)(kind).to_owned();
    let Some(v) = value.clone() else {
        return Check {
            name: r.name.into(),
            status: Status::Unknown,
            value: None,
            why: format!("{why} (not visible here: absent in this kernel, or global and this is a network namespace other than the initial one)"),
            fix: None,
            apply: None,
        };
    };
    let min = (r.min)(kind);
    let low = match (min, judged(&v)) {
        (Some(min), Some(cur)) => cur < min,
        _ => false,
    };
    let target = min.map(|m| with_last(&v, m));
    let writable = sysctl::writable(r.name);
    let fix = target
        .as_ref()
        .map(|t| at.cmd(sysctl::command(&[(r.name.to_owned(), t.clone())])));
    Check {
        name: r.name.into(),
        status: if low { Status::Warn } else { Status::Ok },
        why: match min {
            Some(m) if low && !writable => format!("{why}; below {m} for this kind of test; read-only to this process (a global value shown in a network namespace, or not root): change it where it is writable"),
            Some(m) if low => format!("{why}; below {m} for this kind of test"),
            Some(m) => format!("{why}; at least {m}"),
            None => why,
        },
        value: Some(v),
        apply: if low && writable {
            target.map(|t| Setting {
                name: r.name.into(),
                value: t,
            })
        } else {
            None
        },
        fix,
    }
}

/// The sysctl checks, plus default qdisc and congestion control (reported,
/// never judged wrong: which is best depends on the path).
pub fn sysctls(kind: Kind, at: &Place) -> Vec<Check> {
    let mut out: Vec<Check> = RULES.iter().map(|r| rule_check(kind, r, at)).collect();
    let qdisc = sysctl::read("net.core.default_qdisc");
    out.push(Check {
        name: "net.core.default_qdisc".into(),
        status: if qdisc.is_some() { Status::Ok } else { Status::Unknown },
        value: qdisc,
        why: match kind {
            Kind::Tcp => "queueing discipline of new interfaces: fq paces each flow and isolates them (what BBR prefers); pfifo_fast is one FIFO per band".into(),
            Kind::Udp => "queueing discipline of new interfaces: a UDP sender faster than the link queues here; fq_codel/fq drop or pace instead of growing the queue".into(),
            Kind::Latency => "queueing discipline of new interfaces: fq_codel keeps queues short under load (rr --under-load)".into(),
        },
        fix: Some(format!(
            "{} (applies to interfaces set up afterwards; {} for an existing one)",
            at.cmd("sysctl -w net.core.default_qdisc=fq"),
            at.cmd("tc qdisc replace dev DEV root fq")
        )),
        apply: None,
    });
    let cc = sysctl::read("net.ipv4.tcp_congestion_control");
    let avail = sysctl::read("net.ipv4.tcp_available_congestion_control").unwrap_or_default();
    out.push(Check {
        name: "net.ipv4.tcp_congestion_control".into(),
        status: if cc.is_some() {
            Status::Ok
        } else {
            Status::Unknown
        },
        value: cc,
        why: format!(
            "default TCP congestion control (linerate tcp -C chooses per test); available: {}",
            if avail.is_empty() {
                "not readable"
            } else {
                &avail
            }
        ),
        fix: Some(at.cmd("sysctl -w net.ipv4.tcp_congestion_control=bbr")),
        apply: None,
    });
    out
}

/// The MTU of the route to `host` (or of the default route's interface),
/// and the interface the other checks look at.
pub fn route(kind: Kind, host: Option<&str>, at: &Place) -> (Vec<Check>, Option<String>) {
    let (dev, mtu, whose) = match host {
        Some(h) => match route::resolve(h).and_then(route::to) {
            Ok(r) => (r.dev, r.mtu, format!("route to {h} via {}", r.source)),
            Err(e) => {
                let c = Check {
                    name: "route MTU".into(),
                    status: Status::Unknown,
                    value: None,
                    why: format!("{e}"),
                    fix: None,
                    apply: None,
                };
                return (vec![c], None);
            }
        },
        None => {
            let dev = route::default_dev();
            (
                dev.clone(),
                dev.as_deref().and_then(dev_mtu),
                "default route's interface (give HOST to check the route to it)".into(),
            )
        }
    };
    let dev_name = dev.clone().unwrap_or_else(|| "DEV".into());
    let dev_mtu = dev.as_deref().and_then(dev_mtu);
    let advice = mtu_advice(kind, host, (mtu, dev_mtu), &dev_name, at);
    let check = Check {
        name: "route MTU".into(),
        status: advice.status,
        value: mtu.map(|m| format!("{m} ({whose}, interface {dev_name})")),
        why: advice.why,
        fix: advice.fix,
        apply: None,
    };
    (vec![check], dev)
}

/// The MTU of interface `dev`.
fn dev_mtu(dev: &str) -> Option<u32> {
    sysfs::read_u64(format!("/sys/class/net/{dev}/mtu")).and_then(|m| u32::try_from(m).ok())
}

/// Ethernet's standard MTU: a path below it encapsulates (a tunnel, a VPN,
/// an overlay, a cloud network) or is limited by a route, and carries no
/// jumbo frames.
const ETHERNET_MTU: u32 = 1500;
const JUMBO_MTU: u32 = 9000;

/// What the route MTU check says.
#[derive(Debug, PartialEq)]
struct MtuAdvice {
    status: Status,
    why: String,
    fix: Option<String>,
}

/// Advice that fits the path (issue 28): jumbo frames are suggested only
/// where the path could carry them — never where the route (a route MTU or
/// a learned path MTU) is smaller than the interface, or below Ethernet's
/// 1500 — and then with what must match on the other side and every hop.
/// `route_mtu`: the route's (toward `host` if given, else the default
/// interface's); `dev_mtu`: the interface's own.
fn mtu_advice(
    kind: Kind,
    host: Option<&str>,
    (route_mtu, dev_mtu): (Option<u32>, Option<u32>),
    dev: &str,
    at: &Place,
) -> MtuAdvice {
    let Some(mtu) = route_mtu else {
        return MtuAdvice {
            status: Status::Unknown,
            why: "the route's MTU could not be read".into(),
            fix: None,
        };
    };
    let ok = |why: String| MtuAdvice {
        status: Status::Ok,
        why,
        fix: None,
    };
    if kind == Kind::Latency {
        return ok("largest packet on the path; small messages fit any MTU".into());
    }
    if mtu >= JUMBO_MTU {
        return ok("largest packet on the path: jumbo frames already".into());
    }
    let peer = host.unwrap_or("the other side");
    let limited = dev_mtu.is_some_and(|d| mtu < d);
    if limited || mtu < ETHERNET_MTU {
        let by = if limited {
            format!(
                "the route (a route MTU, or a path MTU learned from a hop) carries {mtu} bytes, less than interface {dev}'s {}",
                dev_mtu.unwrap_or(mtu)
            )
        } else {
            format!("{mtu} bytes is below Ethernet's 1500: the path encapsulates (a tunnel, a VPN, an overlay or cloud network)")
        };
        return ok(format!(
            "largest packet on the path to {peer}: {by}; it carries no jumbo frames, and raising {dev}'s MTU would not help (packets larger than the path are dropped or fragmented)"
        ));
    }
    MtuAdvice {
        status: Status::Warn,
        why: format!(
            "largest packet on the path: jumbo frames ({JUMBO_MTU}) carry 6× the payload per packet, so the per-packet cost (interrupts, stack, syscalls for UDP) falls 6×; only where {peer} and every switch and router between carry them: its interface needs the same MTU, and a hop that does not carry them drops the larger packets"
        ),
        fix: Some(format!(
            "if {peer} and every hop carry {JUMBO_MTU}-byte frames: {} (and the same on {peer}'s interface; then check with {})",
            at.cmd(format!("ip link set dev {dev} mtu {JUMBO_MTU}")),
            at.cmd(format!("ping -M do -s {} {}", JUMBO_MTU - 28, host.unwrap_or("PEER")))
        )),
    }
}

/// GRO/GSO/TSO/LRO of `dev`, judged for `kind`.
pub fn offloads(kind: Kind, dev: &str, at: &Place) -> Vec<Check> {
    let o = ethtool::offloads(dev);
    // (name, ethtool -K keyword, state, wanted state for this kind, why)
    type Row = (
        &'static str,
        &'static str,
        Option<bool>,
        Option<bool>,
        &'static str,
    );
    let rows: [Row; 4] = [
        ("gro", "gro", o.gro, (kind != Kind::Latency).then_some(true),
         "generic receive offload merges received segments before the stack: one pass through the stack per ~64 KB instead of per packet (UDP too, for sockets with UDP_GRO)"),
        ("gso", "gso", o.gso, (kind != Kind::Latency).then_some(true),
         "generic segmentation offload: the stack handles ~64 KB at a time and splits late (UDP_SEGMENT needs it)"),
        ("tso", "tso", o.tso, (kind == Kind::Tcp).then_some(true),
         "TCP segmentation in the NIC: one descriptor per ~64 KB of TCP payload"),
        ("lro", "lro", o.lro, (kind == Kind::Latency).then_some(false),
         "large receive offload merges segments in the NIC, holding them back to merge; it adds latency and breaks forwarding"),
    ];
    rows.into_iter()
        .map(|(name, kw, state, want, why)| {
            let status = match (state, want) {
                (None, _) => Status::Unknown,
                (Some(s), Some(w)) if s != w => Status::Warn,
                _ => Status::Ok,
            };
            let target = want.or(state.map(|s| !s)).unwrap_or(true);
            Check {
                name: format!("{dev} offload {name}"),
                status,
                value: state.map(|s| if s { "on" } else { "off" }.to_owned()),
                why: why.to_owned(),
                fix: Some(at.cmd(format!(
                    "ethtool -K {dev} {kw} {}",
                    if target { "on" } else { "off" }
                ))),
                apply: None,
            }
        })
        .collect()
}

/// The NIC's NUMA node and that node's CPUs.
pub fn numa(dev: &str, at: &Place) -> Check {
    let node =
        sysfs::read_i64(format!("/sys/class/net/{dev}/device/numa_node")).filter(|&n| n >= 0);
    let cpus = node.and_then(|n| sysfs::read(format!("/sys/devices/system/node/node{n}/cpulist")));
    Check {
        name: format!("{dev} NUMA node"),
        status: if node.is_some() {
            Status::Ok
        } else {
            Status::Unknown
        },
        value: node.map(|n| {
            format!(
                "{n} (CPUs {})",
                cpus.clone().unwrap_or_else(|| "not reported".into())
            )
        }),
        why: if node.is_some() {
            "threads on the NIC's own NUMA node avoid crossing the interconnect for every packet"
                .into()
        } else {
            "the interface reports no NUMA node (virtual device, or a host without NUMA)".into()
        },
        fix: Some(at.cmd(format!(
            "linerate … --cpus {}",
            cpus.unwrap_or_else(|| "LIST".into())
        ))),
        apply: None,
    }
}

/// The CPU frequency governors in use.
pub fn governor(kind: Kind) -> Check {
    let mut govs: Vec<String> = std::fs::read_dir("/sys/devices/system/cpu")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| sysfs::read(e.path().join("cpufreq/scaling_governor")))
                .collect()
        })
        .unwrap_or_default();
    govs.sort();
    govs.dedup();
    let why = match kind {
        Kind::Latency => "a CPU that clocks down between messages takes tens of µs to come back up: round trips grow and vary",
        _ => "a power-saving governor lowers the clock under partial load and with it the rate one core can drive",
    };
    if govs.is_empty() {
        return Check {
            name: "cpu governor".into(),
            status: Status::Unknown,
            value: None,
            why: format!("{why} (no cpufreq here: a VM, or frequency set by firmware)"),
            fix: None,
            apply: None,
        };
    }
    let ok = govs.iter().all(|g| g == "performance");
    Check {
        name: "cpu governor".into(),
        status: if ok { Status::Ok } else { Status::Warn },
        value: Some(govs.join(",")),
        why: why.into(),
        fix: Some("cpupower frequency-set -g performance".into()),
        apply: None,
    }
}

/// Whether irqbalance runs (it moves interrupts while a test runs).
pub fn irqbalance(kind: Kind) -> Check {
    let running = std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .bytes()
                        .all(|b| b.is_ascii_digit())
                })
                .any(|e| sysfs::read(e.path().join("comm")).as_deref() == Some("irqbalance"))
        })
        .unwrap_or(false);
    let matters = kind != Kind::Tcp;
    Check {
        name: "irqbalance".into(),
        status: if running && matters { Status::Warn } else { Status::Ok },
        value: Some(if running { "running" } else { "not running" }.into()),
        why: "irqbalance moves NIC interrupts between CPUs every few seconds: a pinned receiver (--cpus) may find its interrupts moved mid-test; pin them instead (/proc/irq/N/smp_affinity_list)".into(),
        fix: Some(if running { "systemctl stop irqbalance" } else { "systemctl start irqbalance" }.into()),
        apply: None,
    }
}

/// getrlimit's resource argument: glibc's enum type, musl's int (the static
/// build, deploy/build-static.sh).
#[cfg(target_env = "gnu")]
type RlimitResource = libc::__rlimit_resource_t;
#[cfg(not(target_env = "gnu"))]
type RlimitResource = libc::c_int;

fn rlimit(res: RlimitResource) -> Option<(u64, u64)> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one struct rlimit.
    (unsafe { libc::getrlimit(res, &mut r) } == 0).then_some((r.rlim_cur, r.rlim_max))
}

fn show_limit(v: u64) -> String {
    if v == libc::RLIM_INFINITY {
        "unlimited".into()
    } else {
        v.to_string()
    }
}

/// RLIMIT_NICE (may --priority raise priority) and RLIMIT_MEMLOCK.
pub fn rlimits(kind: Kind) -> Vec<Check> {
    // SAFETY: geteuid has no failure mode.
    let root = unsafe { libc::geteuid() } == 0;
    let nice = rlimit(libc::RLIMIT_NICE);
    let memlock = rlimit(libc::RLIMIT_MEMLOCK);
    let nice_ok = root || nice.is_some_and(|(cur, _)| cur >= 40);
    let lock_ok =
        root || memlock.is_some_and(|(cur, _)| cur == libc::RLIM_INFINITY || cur >= 64 * MIB);
    vec![
        Check {
            name: "RLIMIT_NICE".into(),
            status: match nice {
                None => Status::Unknown,
                Some(_) if !nice_ok && kind == Kind::Udp => Status::Warn,
                Some(_) => Status::Ok,
            },
            value: nice.map(|(c, m)| format!("{} (hard {}){}", show_limit(c), show_limit(m), if root { ", running as root" } else { "" })),
            why: "lowest nice value allowed is 20 − limit: linerate udp --priority -20 (a receiver the scheduler does not preempt) needs 40, or root".into(),
            fix: Some("ulimit -e 40 (raise the hard limit in /etc/security/limits.conf: USER - nice -20)".into()),
            apply: None,
        },
        Check {
            name: "RLIMIT_MEMLOCK".into(),
            status: match memlock {
                None => Status::Unknown,
                Some(_) if !lock_ok => Status::Warn,
                Some(_) => Status::Ok,
            },
            value: memlock.map(|(c, m)| format!("{} (hard {}){}", show_limit(c), show_limit(m), if root { ", running as root" } else { "" })),
            why: "bytes of pinned memory: io_uring rings and registered buffers, zero-copy and kernel-bypass engines pin their buffers".into(),
            fix: Some("ulimit -l unlimited (raise the hard limit in /etc/security/limits.conf: USER - memlock unlimited)".into()),
            apply: None,
        },
    ]
}

/// isolcpus / nohz_full: CPUs kept free of other work.
pub fn isolation(kind: Kind) -> Check {
    let isolated = sysfs::read("/sys/devices/system/cpu/isolated").unwrap_or_default();
    let nohz = sysfs::read("/sys/devices/system/cpu/nohz_full");
    let value = format!(
        "isolated: {}; nohz_full: {}",
        if isolated.is_empty() {
            "none"
        } else {
            &isolated
        },
        match nohz.as_deref() {
            None => "not built in",
            Some("" | "(null)") => "none",
            Some(n) => n,
        }
    );
    Check {
        name: "isolcpus/nohz_full".into(),
        status: if kind == Kind::Latency && isolated.is_empty() { Status::Warn } else { Status::Ok },
        value: Some(value),
        why: "CPUs isolated from the scheduler (isolcpus) and from the timer tick (nohz_full) run only what is pinned there: the p99.9 of a latency test stops showing other processes".into(),
        fix: Some("add isolcpus=2,3 nohz_full=2,3 to the kernel command line, reboot, then linerate … --cpus 2,3".into()),
        apply: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue_28_jumbo_frames_are_suggested_only_where_the_path_carries_them() {
        let here = Place::default();
        let tcp = |route, dev| mtu_advice(Kind::Tcp, Some("h"), (route, dev), "eth0", &here);
        // A route or learned path MTU below the interface's: the path
        // would not carry them, raising the interface would not help.
        for (route, dev) in [(Some(1400), Some(1500)), (Some(1400), Some(1400))] {
            let a = tcp(route, dev);
            assert_eq!((a.status, &a.fix), (Status::Ok, &None), "{a:?}");
            assert!(a.why.contains("carries no jumbo frames"), "{a:?}");
        }
        assert!(tcp(Some(1500), Some(9000))
            .why
            .contains("less than interface eth0's 9000"));
        // A plain Ethernet path: suggested, with what must match.
        let a = tcp(Some(1500), Some(1500));
        assert_eq!(a.status, Status::Warn);
        let fix = a.fix.expect("fix");
        assert!(
            fix.starts_with(
                "if h and every hop carry 9000-byte frames: ip link set dev eth0 mtu 9000"
            ),
            "{fix}"
        );
        assert!(fix.contains("ping -M do -s 8972 h"), "{fix}");
        assert!(a.why.contains("every switch and router"), "{}", a.why);
        assert_eq!(tcp(Some(9000), Some(9000)).status, Status::Ok);
        let lat = mtu_advice(Kind::Latency, None, (Some(1500), Some(1500)), "eth0", &here);
        assert_eq!((lat.status, lat.fix), (Status::Ok, None));
        let none = mtu_advice(Kind::Udp, None, (Some(1500), Some(1500)), "eth0", &here);
        assert!(none.fix.expect("fix").contains("the other side"));
        // In a namespace both commands of the line run there.
        let ns = Place::netns("lab-a");
        let fix = mtu_advice(Kind::Tcp, Some("h"), (Some(1500), Some(1500)), "eth0", &ns)
            .fix
            .expect("fix");
        assert!(
            fix.contains(": ip netns exec lab-a ip link set dev eth0 mtu 9000 ("),
            "{fix}"
        );
        assert!(
            fix.contains("with ip netns exec lab-a ping -M do -s 8972 h)"),
            "{fix}"
        );
    }

    #[test]
    fn judged_field_and_replacement() {
        assert_eq!(judged("4096 131072 6291456"), Some(6291456));
        assert_eq!(judged("212992"), Some(212992));
        assert_eq!(judged("pfifo_fast"), None);
        assert_eq!(
            with_last("4096 131072 6291456", 33554432),
            "4096 131072 33554432"
        );
        assert_eq!(with_last("1000", 10000), "10000");
    }
}
