//! Interface status: what `/sys/class/net/DEV`, getifaddrs and the ethtool
//! ioctl say about each interface. A value the driver does not report is
//! `None` (shown as "not reported"), never a guess.

use serde::{Deserialize, Serialize};

use crate::counters::{self, Counters};
use crate::ethtool::{self, Offloads};
use crate::{addrs, sysfs};

/// One interface's status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interface {
    pub name: String,
    /// `operstate`: up, down, unknown (loopback and some virtual devices),
    /// lowerlayerdown, …
    pub state: String,
    /// Carrier present (link up); `None` when the interface is down.
    pub carrier: Option<bool>,
    /// Link speed in Mbit/s, where the driver reports one.
    pub speed_mbps: Option<u64>,
    /// `full` or `half`, where the driver reports it.
    pub duplex: Option<String>,
    pub mtu: Option<u32>,
    /// Hardware address (`None` for devices without one).
    pub mac: Option<String>,
    /// Addresses with prefix length (`198.18.0.1/24`).
    pub addresses: Vec<String>,
    /// Driver: the bound device driver, or ethtool's name for virtual ones.
    pub driver: Option<String>,
    pub offloads: Offloads,
    pub rx_queues: u32,
    pub tx_queues: u32,
    pub tx_queue_len: Option<u64>,
    /// NUMA node of the device (`None`: virtual, or no NUMA).
    pub numa_node: Option<i64>,
    pub counters: Option<Counters>,
}

/// Names of the interfaces in this namespace, sorted.
pub fn names() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("/sys/class/net")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Whether `dev` exists in this network namespace.
pub fn exists(dev: &str) -> bool {
    !dev.is_empty()
        && !dev.contains('/')
        && std::path::Path::new(&format!("/sys/class/net/{dev}")).exists()
}

fn queue_count(dev: &str, prefix: &str) -> u32 {
    std::fs::read_dir(format!("/sys/class/net/{dev}/queues"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
                .count() as u32
        })
        .unwrap_or(0)
}

/// The driver bound to the device (`/sys/class/net/DEV/device/driver`).
fn bound_driver(dev: &str) -> Option<String> {
    let link = std::fs::read_link(format!("/sys/class/net/{dev}/device/driver")).ok()?;
    Some(link.file_name()?.to_string_lossy().into_owned())
}

/// The status of `dev`, or `None` if it does not exist here.
pub fn status(dev: &str) -> Option<Interface> {
    if !exists(dev) {
        return None;
    }
    let base = format!("/sys/class/net/{dev}");
    let get = |f: &str| sysfs::read(format!("{base}/{f}"));
    // `speed` reads -1 (or fails with EINVAL) when the driver has no link
    // speed to report: both mean "not reported".
    let speed = sysfs::read_i64(format!("{base}/speed")).filter(|&s| s > 0);
    let addresses = addrs::all()
        .into_iter()
        .filter(|a| a.dev == dev)
        .map(|a| a.to_string())
        .collect();
    Some(Interface {
        name: dev.to_owned(),
        state: get("operstate").unwrap_or_else(|| "unknown".into()),
        carrier: sysfs::read_u64(format!("{base}/carrier")).map(|c| c == 1),
        speed_mbps: speed.map(|s| s as u64),
        duplex: get("duplex").filter(|d| d != "unknown"),
        mtu: sysfs::read_u64(format!("{base}/mtu")).map(|m| m as u32),
        mac: get("address").filter(|m| !m.is_empty() && m != "00:00:00:00:00:00"),
        addresses,
        driver: bound_driver(dev).or_else(|| ethtool::driver(dev)),
        offloads: ethtool::offloads(dev),
        rx_queues: queue_count(dev, "rx-"),
        tx_queues: queue_count(dev, "tx-"),
        tx_queue_len: sysfs::read_u64(format!("{base}/tx_queue_len")),
        numa_node: sysfs::read_i64(format!("{base}/device/numa_node")).filter(|&n| n >= 0),
        counters: counters::read(dev),
    })
}

/// Every interface's status.
pub fn all() -> Vec<Interface> {
    names().iter().filter_map(|n| status(n)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_status() {
        let lo = status("lo").expect("lo");
        assert_eq!(lo.mtu, Some(65536));
        assert!(lo.addresses.iter().any(|a| a == "127.0.0.1/8"));
        assert!(lo.counters.is_some());
        assert!(lo.rx_queues >= 1 && lo.tx_queues >= 1, "{lo:?}");
        assert!(all().iter().any(|i| i.name == "lo"));
        assert!(status("../lo").is_none() && status("nope0").is_none());
    }
}
