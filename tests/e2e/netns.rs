//! Real network paths for the tests: two network namespaces joined by a
//! veth pair, or through a router namespace, addressed from 198.18.0.0/15
//! (RFC 2544's benchmarking range), and the `tc` a test shapes them with.
//! Shared by the e2e binary and the `alone` binary (tests/alone).
//!
//! Needs root (CI runs as root); elsewhere each test skips, and the skips
//! are listed with their reasons after the test summary (helpers::skip).

use std::process::Command;

use crate::helpers::{skip, Server};

/// Two namespaces `a` (client, 198.18.0.1) and `b` (server, 198.18.0.2)
/// joined by veth `va` ↔ `vb`. Deleted on drop.
pub struct NetPair {
    pub a: String,
    pub b: String,
}

pub const ADDR_A: &str = "198.18.0.1";
pub const ADDR_B: &str = "198.18.0.2";

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Runs `tc ARGS` inside namespace `ns`.
pub fn tc(ns: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "tc"])
        .args(args)
        .output()
        .map_err(|e| format!("tc (iproute2): {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "tc {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Waits until each `(namespace, device)` is up as the kernel's link
/// watcher sees it (`operstate` "up"). Until then the device transmits
/// through the no-op qdisc, which drops every packet uncounted; the watcher
/// runs as deferred work, so on a loaded host it came late enough that a
/// test's first packets never left (a ping test saw 0 packets sent on its
/// veth). At most 10 s.
fn wait_up(devs: &[(&String, &str)]) -> Result<(), String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    for (ns, dev) in devs {
        loop {
            let out = Command::new("ip")
                .args(["netns", "exec", ns, "cat"])
                .arg(format!("/sys/class/net/{dev}/operstate"))
                .output()
                .map_err(|e| format!("ip netns exec: {e}"))?;
            let state = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            if state == "up" {
                break;
            }
            if std::time::Instant::now() > deadline {
                return Err(format!("{dev} in {ns} is not up after 10 s ({state})"));
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    Ok(())
}

/// Why namespace tests cannot run here, if they cannot.
pub fn unavailable() -> Option<String> {
    let uid = Command::new("id").arg("-u").output().ok()?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return Some("needs root to create network namespaces".into());
    }
    if Command::new("ip").arg("-V").output().is_err() {
        return Some("the `ip` command (iproute2) is not installed".into());
    }
    None
}

impl NetPair {
    /// Creates the pair with `mtu` on both veth ends.
    pub fn new(tag: &str, mtu: u32) -> Result<NetPair, String> {
        NetPair::with_queues(tag, mtu, 1)
    }

    /// The pair with `queues` receive and transmit queues on each veth end
    /// (`numrxqueues`/`numtxqueues`; 1 is veth's default).
    pub fn with_queues(tag: &str, mtu: u32, queues: u32) -> Result<NetPair, String> {
        let base = format!("lr{}{tag}", std::process::id());
        let pair = NetPair {
            a: format!("{base}a"),
            b: format!("{base}b"),
        };
        let mtu = mtu.to_string();
        ip(&["netns", "add", &pair.a])?;
        ip(&["netns", "add", &pair.b])?;
        let q = queues.to_string();
        ip(&[
            "-n",
            &pair.a,
            "link",
            "add",
            "va",
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
            "type",
            "veth",
            "peer",
            "name",
            "vb",
            "netns",
            &pair.b,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
        ])?;
        for (ns, dev, addr) in [(&pair.a, "va", ADDR_A), (&pair.b, "vb", ADDR_B)] {
            // No IPv6 on the pair: its router solicitations and MLD reports
            // (sent 0–4 s after the link comes up) would move the interface
            // counters that tests compare with linerate's (a heartbeat test
            // saw vb "send" 900 ms after the server stopped). Best effort: a
            // kernel without IPv6 sends none anyway.
            let _ = Command::new("ip")
                .args(["netns", "exec", ns, "sysctl", "-qw"])
                .arg(format!("net.ipv6.conf.{dev}.disable_ipv6=1"))
                .status();
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
            ip(&["-n", ns, "link", "set", dev, "mtu", &mtu])?;
            ip(&["-n", ns, "addr", "add", &format!("{addr}/30"), "dev", dev])?;
            ip(&["-n", ns, "link", "set", dev, "up"])?;
        }
        wait_up(&[(&pair.a, "va"), (&pair.b, "vb")])?;
        Ok(pair)
    }

    /// Reads a counter of `dev` in namespace `ns` (e.g. `rx_bytes`).
    pub fn counter(ns: &str, dev: &str, name: &str) -> u64 {
        let out = Command::new("ip")
            .args([
                "netns",
                "exec",
                ns,
                "cat",
                &format!("/sys/class/net/{dev}/statistics/{name}"),
            ])
            .output()
            .expect("read counter");
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("counter {dev}/{name} in {ns}: {out:?}"))
    }
}

impl Drop for NetPair {
    fn drop(&mut self) {
        // Deleting a namespace deletes its veth end (and so the pair).
        let _ = ip(&["netns", "del", &self.a]);
        let _ = ip(&["netns", "del", &self.b]);
    }
}

/// A routed path: client namespace `a` (198.18.0.1) — router `r`
/// (198.18.0.2 | 198.18.0.5) — server namespace `b` (198.18.0.6), two
/// veth pairs (`va`–`ra`, `rb`–`vb`), forwarding on in `r`. The router's
/// egress towards the server (`rb`) is where a test puts its bottleneck
/// (`tc(&path.r, …)`), so neither end's own qdisc shapes its sockets.
/// Deleted on drop.
pub struct Routed {
    pub a: String,
    pub r: String,
    pub b: String,
}

pub const ROUTED_SERVER: &str = "198.18.0.6";

impl Routed {
    pub fn new(tag: &str) -> Result<Routed, String> {
        let base = format!("lr{}{tag}", std::process::id());
        let p = Routed {
            a: format!("{base}a"),
            r: format!("{base}r"),
            b: format!("{base}b"),
        };
        for ns in [&p.a, &p.r, &p.b] {
            ip(&["netns", "add", ns])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        ip(&[
            "-n", &p.a, "link", "add", "va", "type", "veth", "peer", "name", "ra", "netns", &p.r,
        ])?;
        ip(&[
            "-n", &p.b, "link", "add", "vb", "type", "veth", "peer", "name", "rb", "netns", &p.r,
        ])?;
        for (ns, dev, addr) in [
            (&p.a, "va", "198.18.0.1/30"),
            (&p.r, "ra", "198.18.0.2/30"),
            (&p.r, "rb", "198.18.0.5/30"),
            (&p.b, "vb", "198.18.0.6/30"),
        ] {
            // As in `NetPair::new`: no IPv6 chatter on the links.
            let _ = Command::new("ip")
                .args(["netns", "exec", ns, "sysctl", "-qw"])
                .arg(format!("net.ipv6.conf.{dev}.disable_ipv6=1"))
                .status();
            ip(&["-n", ns, "addr", "add", addr, "dev", dev])?;
            ip(&["-n", ns, "link", "set", dev, "up"])?;
        }
        wait_up(&[(&p.a, "va"), (&p.r, "ra"), (&p.r, "rb"), (&p.b, "vb")])?;
        ip(&["-n", &p.a, "route", "add", "default", "via", "198.18.0.2"])?;
        ip(&["-n", &p.b, "route", "add", "default", "via", "198.18.0.5"])?;
        let fwd = Command::new("ip")
            .args([
                "netns",
                "exec",
                &p.r,
                "sysctl",
                "-qw",
                "net.ipv4.ip_forward=1",
            ])
            .status()
            .map_err(|e| format!("sysctl: {e}"))?;
        if !fwd.success() {
            return Err("cannot enable forwarding in the router namespace".into());
        }
        Ok(p)
    }
}

impl Routed {
    /// The router's interface and qdisc counters, as `ip -s link` and
    /// `tc -s qdisc` print them inside its namespace (totals since it was
    /// made), for a failure message: a drop on the emulated router (a
    /// veth's RX or TX dropped, a qdisc's dropped) shows there, beside the
    /// tbf drops a test's trials above the rate cause by design.
    pub fn counters(&self) -> String {
        let show = |cmd: &[&str]| {
            let text = match Command::new("ip")
                .args(["netns", "exec", &self.r])
                .args(cmd)
                .output()
            {
                Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).into_owned(),
                Ok(o) => String::from_utf8_lossy(&o.stderr).into_owned(),
                Err(e) => e.to_string(),
            };
            format!("$ {}\n{}", cmd.join(" "), text.trim_end())
        };
        format!(
            "router namespace {}:\n{}\n{}",
            self.r,
            show(&["ip", "-s", "link", "show"]),
            show(&["tc", "-s", "qdisc", "show"])
        )
    }
}

impl Drop for Routed {
    fn drop(&mut self) {
        for ns in [&self.a, &self.r, &self.b] {
            let _ = ip(&["netns", "del", ns]);
        }
    }
}

/// `tc qdisc VERB dev DEV root tbf …`: a bucket of ten full frames (a
/// host stalled for a few ms by other load sends a short burst), a queue
/// of `limit` bytes.
pub fn tbf<'a>(verb: &'a str, dev: &'a str, rate: &'a str, limit: &'a str) -> Vec<&'a str> {
    vec![
        "qdisc", verb, "dev", dev, "root", "tbf", "rate", rate, "burst", "15000", "limit", limit,
    ]
}

/// The rate-limited router: tbf at `rate` on the router's egress both
/// ways, with a queue of `limit` bytes, and a default server in `b`;
/// `None` (skipped, said) where namespaces are unavailable.
pub fn shaped(tag: &str, rate: &str, limit: &str) -> Option<(Routed, Server)> {
    if let Some(why) = unavailable() {
        skip(why);
        return None;
    }
    let path = Routed::new(tag).expect("create namespaces");
    // Both ways: the router's egress to the server and to the client.
    for dev in ["rb", "ra"] {
        tc(&path.r, &tbf("add", dev, rate, limit)).expect("tbf");
    }
    let server = Server::start_in(Some(&path.b), ROUTED_SERVER, &[]);
    Some((path, server))
}
