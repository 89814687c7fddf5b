//! Interface counters from `/sys/class/net/DEV/statistics` and their change
//! over an interval. These count every packet on the interface (headers
//! included, all traffic), not only a test's.

use serde::{Deserialize, Serialize};

use crate::sysfs;

/// The counters of one interface at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
    pub rx_errors: u64,
    pub tx_errors: u64,
}

/// Reads `dev`'s counters; `None` if the interface does not exist here.
pub fn read(dev: &str) -> Option<Counters> {
    let base = format!("/sys/class/net/{dev}/statistics");
    let get = |name: &str| sysfs::read_u64(format!("{base}/{name}"));
    Some(Counters {
        rx_bytes: get("rx_bytes")?,
        tx_bytes: get("tx_bytes")?,
        rx_packets: get("rx_packets")?,
        tx_packets: get("tx_packets")?,
        rx_dropped: get("rx_dropped")?,
        tx_dropped: get("tx_dropped")?,
        rx_errors: get("rx_errors")?,
        tx_errors: get("tx_errors")?,
    })
}

/// What an interface counted over `seconds`, with the rates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Traffic {
    pub name: String,
    pub seconds: f64,
    /// Counter changes (wire bytes: Ethernet header included, FCS not).
    #[serde(flatten)]
    pub delta: Counters,
    pub rx_bits_per_second: f64,
    pub tx_bits_per_second: f64,
    pub rx_packets_per_second: f64,
    pub tx_packets_per_second: f64,
}

impl Traffic {
    /// The change from `a` to `b` over `seconds`. Counters never go
    /// backwards except when a driver resets them; that reads as 0.
    pub fn between(name: &str, a: &Counters, b: &Counters, seconds: f64) -> Traffic {
        let d = Counters {
            rx_bytes: b.rx_bytes.saturating_sub(a.rx_bytes),
            tx_bytes: b.tx_bytes.saturating_sub(a.tx_bytes),
            rx_packets: b.rx_packets.saturating_sub(a.rx_packets),
            tx_packets: b.tx_packets.saturating_sub(a.tx_packets),
            rx_dropped: b.rx_dropped.saturating_sub(a.rx_dropped),
            tx_dropped: b.tx_dropped.saturating_sub(a.tx_dropped),
            rx_errors: b.rx_errors.saturating_sub(a.rx_errors),
            tx_errors: b.tx_errors.saturating_sub(a.tx_errors),
        };
        let per_s = |v: u64| {
            if seconds > 0.0 {
                v as f64 / seconds
            } else {
                0.0
            }
        };
        Traffic {
            name: name.to_owned(),
            seconds,
            rx_bits_per_second: per_s(d.rx_bytes) * 8.0,
            tx_bits_per_second: per_s(d.tx_bytes) * 8.0,
            rx_packets_per_second: per_s(d.rx_packets),
            tx_packets_per_second: per_s(d.tx_packets),
            delta: d,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_counters_read_and_deltas_subtract() {
        let lo = read("lo").expect("lo exists in every namespace");
        let mut later = lo;
        later.rx_bytes += 1000;
        later.tx_packets += 10;
        let t = Traffic::between("lo", &lo, &later, 2.0);
        assert_eq!(t.delta.rx_bytes, 1000);
        assert_eq!(t.rx_bits_per_second, 4000.0);
        assert_eq!(t.tx_packets_per_second, 5.0);
        // A reset counter reads as no traffic rather than as 2^64.
        let back = Traffic::between("lo", &later, &lo, 1.0);
        assert_eq!(back.delta.rx_bytes, 0);
        assert!(read("no-such-interface0").is_none());
    }
}
