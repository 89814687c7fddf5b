//! Network namespaces for the AF_XDP tests and the veth example: two
//! namespaces joined by a veth pair, addressed from 198.18.0.0/15 (RFC
//! 2544's benchmarking range) as tests/e2e/netns.rs builds them, and a way
//! to run code on a thread inside one (`setns`). Shared by
//! `tests/netns.rs` and `examples/veth_pps.rs` through `#[path]`.

#![allow(dead_code)]

use std::net::{IpAddr, SocketAddr};
use std::process::Command;

pub const ADDR_A: &str = "198.18.0.1";
pub const ADDR_B: &str = "198.18.0.2";
pub fn ip(args: &[&str]) -> Result<String, String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Why these tests cannot run here, if they cannot.
pub fn unavailable() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("needs root to create network namespaces and attach XDP".into());
    }
    if Command::new("ip").arg("-V").output().is_err() {
        return Some("the `ip` command (iproute2) is not installed".into());
    }
    None
}

/// Namespaces `a` (198.18.0.1 on `va`) and `b` (198.18.0.2 on `vb`),
/// deleted on drop.
pub struct Pair {
    pub a: String,
    pub b: String,
}

impl Pair {
    pub fn new(tag: &str) -> Result<Pair, String> {
        Pair::with_queues(tag, 1)
    }

    /// The pair with `queues` receive and transmit queues on each end
    /// (`numrxqueues`/`numtxqueues`).
    pub fn with_queues(tag: &str, queues: u32) -> Result<Pair, String> {
        let base = format!("lx{}{tag}", std::process::id());
        let pair = Pair {
            a: format!("{base}a"),
            b: format!("{base}b"),
        };
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
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
            ip(&["-n", ns, "addr", "add", &format!("{addr}/30"), "dev", dev])?;
            ip(&["-n", ns, "link", "set", dev, "up"])?;
        }
        Ok(pair)
    }

    /// Whether `dev` in `ns` shows an XDP program (`ip link show`).
    pub fn has_xdp(ns: &str, dev: &str) -> bool {
        ip(&["-n", ns, "link", "show", dev]).is_ok_and(|s| s.contains("prog/xdp"))
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.a]);
        let _ = ip(&["netns", "del", &self.b]);
    }
}

/// Runs `f` on a thread inside namespace `ns`.
pub fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).expect("open the namespace");
        use std::os::fd::AsRawFd;
        // SAFETY: setns on this thread only, with a namespace descriptor.
        let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns {path}: {}", std::io::Error::last_os_error());
        f()
    })
    .join()
    .expect("namespace thread")
}

pub fn addr(ip: &str, port: u16) -> SocketAddr {
    SocketAddr::new(ip.parse::<IpAddr>().expect("address"), port)
}
