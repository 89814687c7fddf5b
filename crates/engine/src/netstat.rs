//! The kernel's own counters for UDP tests: `/proc/net/snmp` (`Udp:` line)
//! of the process's network namespace, and the drop counters of the
//! interface that owns a local address (`/sys/class/net/DEV/statistics`).
//!
//! These are reported *beside* linerate's counted loss, never instead of it:
//! they cover every socket in the namespace and every packet on the
//! interface, not only the test's.

use std::net::IpAddr;

use linerate_proto::measure::{InterfaceDrops, KernelUdp, UdpSnmp};

/// Raw `Udp:` counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SnmpUdp {
    in_datagrams: u64,
    no_ports: u64,
    in_errors: u64,
    out_datagrams: u64,
    rcvbuf_errors: u64,
    sndbuf_errors: u64,
    in_csum_errors: u64,
}

/// Parses the `Udp:` header and value lines of /proc/net/snmp.
pub fn parse_snmp(text: &str) -> Option<SnmpUdp> {
    let mut lines = text.lines().filter(|l| l.starts_with("Udp: "));
    let names: Vec<&str> = lines.next()?.split_whitespace().skip(1).collect();
    let values: Vec<u64> = lines
        .next()?
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().ok())
        .collect::<Option<_>>()?;
    let get = |name: &str| -> Option<u64> {
        let i = names.iter().position(|n| *n == name)?;
        values.get(i).copied()
    };
    Some(SnmpUdp {
        in_datagrams: get("InDatagrams")?,
        no_ports: get("NoPorts")?,
        in_errors: get("InErrors")?,
        out_datagrams: get("OutDatagrams")?,
        rcvbuf_errors: get("RcvbufErrors")?,
        sndbuf_errors: get("SndbufErrors")?,
        in_csum_errors: get("InCsumErrors").unwrap_or(0),
    })
}

pub fn read_snmp() -> Option<SnmpUdp> {
    parse_snmp(&std::fs::read_to_string("/proc/net/snmp").ok()?)
}

fn snmp_delta(a: SnmpUdp, b: SnmpUdp) -> UdpSnmp {
    UdpSnmp {
        in_datagrams: b.in_datagrams.saturating_sub(a.in_datagrams),
        out_datagrams: b.out_datagrams.saturating_sub(a.out_datagrams),
        no_ports: b.no_ports.saturating_sub(a.no_ports),
        in_errors: b.in_errors.saturating_sub(a.in_errors),
        rcvbuf_errors: b.rcvbuf_errors.saturating_sub(a.rcvbuf_errors),
        sndbuf_errors: b.sndbuf_errors.saturating_sub(a.sndbuf_errors),
        in_csum_errors: b.in_csum_errors.saturating_sub(a.in_csum_errors),
    }
}

/// The interface that has `ip` assigned (via getifaddrs).
pub fn interface_of(ip: IpAddr) -> Option<String> {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we free below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return None;
    }
    let mut found = None;
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: ifa_addr points to a sockaddr of the family it names.
        let addr = unsafe {
            match i32::from((*ifa.ifa_addr).sa_family) {
                libc::AF_INET => {
                    let sin = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                    Some(IpAddr::from(
                        u32::from_be(sin.sin_addr.s_addr).to_be_bytes(),
                    ))
                }
                libc::AF_INET6 => {
                    let sin6 = &*(ifa.ifa_addr as *const libc::sockaddr_in6);
                    Some(IpAddr::from(sin6.sin6_addr.s6_addr))
                }
                _ => None,
            }
        };
        if addr == Some(ip) {
            // SAFETY: ifa_name is a NUL-terminated string owned by the list.
            let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) };
            found = Some(name.to_string_lossy().into_owned());
            break;
        }
    }
    // SAFETY: `head` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    if found.is_none() && ip.is_loopback() {
        // 127.0.0.0/8 is routed to `lo` though only 127.0.0.1 is listed.
        return Some("lo".into());
    }
    found
}

fn iface_counter(dev: &str, name: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/sys/class/net/{dev}/statistics/{name}"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// A snapshot of the kernel's counters at the start of a test.
#[derive(Debug, Clone, Default)]
pub struct KernelSnapshot {
    snmp: Option<SnmpUdp>,
    iface: Option<(String, u64, u64)>,
    unmeasured: Vec<String>,
}

/// Takes the start snapshot for a test whose data uses local address `ip`.
pub fn snapshot(ip: Option<IpAddr>) -> KernelSnapshot {
    let mut s = KernelSnapshot {
        snmp: read_snmp(),
        ..KernelSnapshot::default()
    };
    if s.snmp.is_none() {
        s.unmeasured
            .push("/proc/net/snmp has no readable Udp counters".into());
    }
    match ip.and_then(interface_of) {
        Some(dev) => match (
            iface_counter(&dev, "rx_dropped"),
            iface_counter(&dev, "tx_dropped"),
        ) {
            (Some(rx), Some(tx)) => s.iface = Some((dev, rx, tx)),
            _ => s
                .unmeasured
                .push(format!("interface {dev}: drop counters unreadable in /sys")),
        },
        None => s.unmeasured.push(format!(
            "interface drops: no local interface found for {}",
            ip.map_or("the data address".into(), |i| i.to_string())
        )),
    }
    s
}

/// The counters' change since `start`.
pub fn delta(start: &KernelSnapshot) -> KernelUdp {
    let mut unmeasured = start.unmeasured.clone();
    let snmp = match (start.snmp, read_snmp()) {
        (Some(a), Some(b)) => Some(snmp_delta(a, b)),
        _ => None,
    };
    let interface = start.iface.as_ref().and_then(|(dev, rx0, tx0)| {
        let rx = iface_counter(dev, "rx_dropped");
        let tx = iface_counter(dev, "tx_dropped");
        match (rx, tx) {
            (Some(rx), Some(tx)) => Some(InterfaceDrops {
                name: dev.clone(),
                rx_dropped: rx.saturating_sub(*rx0),
                tx_dropped: tx.saturating_sub(*tx0),
                // Named by the caller (host insight reads drivers).
                driver: None,
            }),
            _ => {
                unmeasured.push(format!("interface {dev} vanished during the test"));
                None
            }
        }
    });
    KernelUdp {
        snmp,
        interface,
        unmeasured,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snmp_udp_line_parses() {
        let text = "Ip: Forwarding DefaultTTL\nIp: 1 64\n\
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\n\
Udp: 10 2 3 40 5 6 7 0 0\n\
UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\n\
UdpLite: 0 0 0 0 0 0 0 0 0\n";
        let s = parse_snmp(text).expect("parses");
        assert_eq!(s.in_datagrams, 10);
        assert_eq!(s.rcvbuf_errors, 5);
        assert_eq!(s.sndbuf_errors, 6);
        assert_eq!(parse_snmp("Udp: A B\nUdp: x y\n"), None);
        assert!(read_snmp().is_some(), "this kernel has /proc/net/snmp");
    }

    #[test]
    fn loopback_address_is_on_lo() {
        assert_eq!(
            interface_of("127.0.0.1".parse().expect("ip")).as_deref(),
            Some("lo")
        );
    }
}
