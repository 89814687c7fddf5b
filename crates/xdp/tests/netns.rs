//! AF_XDP on a real path: two network namespaces this test creates, joined
//! by a veth pair and addressed from 198.18.0.0/15 (RFC 2544's
//! benchmarking range), as tests/e2e/netns.rs builds them. Each test runs
//! its AF_XDP side in a thread that entered a namespace (`setns`), and
//! counts every datagram against a kernel socket on the other side.
//!
//! Needs root (CI runs as root); elsewhere each test prints why it skipped.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use linerate_xdp::{
    path_to, AttachMode, CopyMode, Program, ProgramOptions, Queue, QueueOptions, UdpFlow,
    XdpError,
};

const ADDR_A: &str = "198.18.0.1";
const ADDR_B: &str = "198.18.0.2";
/// Datagrams per direction: more than a ring holds, so the rings turn.
const N: u64 = 5000;
/// Every wait is bounded.
const LIMIT: Duration = Duration::from_secs(10);

fn ip(args: &[&str]) -> Result<String, String> {
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
fn unavailable() -> Option<String> {
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
struct Pair {
    a: String,
    b: String,
}

impl Pair {
    fn new(tag: &str) -> Result<Pair, String> {
        let base = format!("lx{}{tag}", std::process::id());
        let pair = Pair {
            a: format!("{base}a"),
            b: format!("{base}b"),
        };
        ip(&["netns", "add", &pair.a])?;
        ip(&["netns", "add", &pair.b])?;
        ip(&[
            "-n", &pair.a, "link", "add", "va", "type", "veth", "peer", "name", "vb", "netns",
            &pair.b,
        ])?;
        for (ns, dev, addr) in [(&pair.a, "va", ADDR_A), (&pair.b, "vb", ADDR_B)] {
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
            ip(&["-n", ns, "addr", "add", &format!("{addr}/30"), "dev", dev])?;
            ip(&["-n", ns, "link", "set", dev, "up"])?;
        }
        Ok(pair)
    }

    /// Whether `dev` in `ns` shows an XDP program (`ip link show`).
    fn has_xdp(ns: &str, dev: &str) -> bool {
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
fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
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

fn addr(ip: &str, port: u16) -> SocketAddr {
    SocketAddr::new(ip.parse::<IpAddr>().expect("address"), port)
}

/// Copy mode (veth has no zero-copy); `need_wakeup` as asked.
fn copy_opts() -> QueueOptions {
    QueueOptions {
        copy: CopyMode::Copy,
        ..QueueOptions::default()
    }
}

/// Sends datagrams 0..N from an AF_XDP queue on `va` to `dst`.
fn send_n(dst: SocketAddr, opts: QueueOptions) -> Result<(), XdpError> {
    let path = path_to(dst.ip(), Duration::from_secs(3))?;
    assert_eq!(path.link.name, "va");
    let mut queue = Queue::open("va", 0, &opts)?;
    let flow = UdpFlow {
        src_mac: path.src_mac,
        dst_mac: path.dst_mac,
        src: SocketAddr::new(path.source, 40000),
        dst,
    };
    let start = Instant::now();
    let mut next = 0u64;
    while next < N && start.elapsed() < LIMIT {
        let batch: Vec<[u8; 8]> = (next..(next + 64).min(N)).map(u64::to_be_bytes).collect();
        let refs: Vec<&[u8]> = batch.iter().map(|b| &b[..]).collect();
        next += queue.send(&flow, &refs)? as u64;
    }
    while queue.in_flight() > 0 && start.elapsed() < LIMIT {
        queue.complete();
    }
    assert_eq!(next, N, "sent within {LIMIT:?}");
    assert_eq!(queue.in_flight(), 0, "all completed");
    let stats = queue.stats()?;
    assert_eq!(stats.tx_invalid_descs, 0, "{stats:?}");
    Ok(())
}

/// Counts distinct datagrams 0..N arriving at a kernel socket.
fn count_kernel(sock: &UdpSocket) -> u64 {
    sock.set_read_timeout(Some(Duration::from_millis(500)))
        .expect("timeout");
    let mut seen = HashSet::new();
    let mut buf = [0u8; 64];
    let start = Instant::now();
    while (seen.len() as u64) < N && start.elapsed() < LIMIT {
        if let Ok(8) = sock.recv(&mut buf) {
            seen.insert(u64::from_be_bytes(buf[..8].try_into().expect("8 bytes")));
        }
    }
    seen.len() as u64
}

#[test]
fn issue_25_af_xdp_sender_reaches_a_kernel_socket() {
    if let Some(why) = unavailable() {
        println!("skipped: {why}");
        return;
    }
    let pair = Pair::new("tx").expect("namespaces");
    for need_wakeup in [true, false] {
        let port = if need_wakeup { 9001 } else { 9002 };
        let b = pair.b.clone();
        let receiver = std::thread::spawn(move || {
            in_ns(&b, move || {
                let sock = UdpSocket::bind(addr(ADDR_B, port)).expect("bind");
                // Sized for N datagrams arriving faster than read.
                socket2::SockRef::from(&sock)
                    .set_recv_buffer_size(8 << 20)
                    .expect("rcvbuf");
                count_kernel(&sock)
            })
        });
        std::thread::sleep(Duration::from_millis(100));
        let opts = QueueOptions {
            need_wakeup,
            ..copy_opts()
        };
        in_ns(&pair.a, move || send_n(addr(ADDR_B, port), opts)).expect("AF_XDP send");
        let got = receiver.join().expect("receiver");
        assert_eq!(got, N, "need_wakeup {need_wakeup}: kernel socket counted");
    }
}

/// Attaches in `mode` on `vb`, receives datagrams 0..N sent by a kernel
/// socket in `a` to port `port`; returns how many distinct arrived.
fn receive_n(pair: &Pair, mode: AttachMode, port: u16) -> Result<u64, XdpError> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let b = pair.b.clone();
    let rx = std::thread::spawn(move || {
        in_ns(&b, move || -> Result<u64, XdpError> {
            let opts = ProgramOptions {
                mode,
                replace: false,
            };
            let mut prog = Program::attach("vb", &opts)?;
            let mut queue = Queue::open("vb", 0, &copy_opts())?;
            prog.register(&queue)?;
            prog.allow(addr(ADDR_B, port))?;
            let _ = ready_tx.send(());
            let mut seen = HashSet::new();
            let start = Instant::now();
            while (seen.len() as u64) < N && start.elapsed() < LIMIT {
                let n = queue.recv(64, |d| {
                    if d.dst.port() == port && d.payload.len() == 8 {
                        seen.insert(u64::from_be_bytes(d.payload.try_into().expect("8")));
                    }
                });
                if n == 0 {
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
            let stats = queue.stats()?;
            println!("{mode} receive: {stats:?} {:?}", queue.counters());
            Ok(seen.len() as u64)
        })
    });
    if ready_rx.recv_timeout(LIMIT).is_ok() {
        in_ns(&pair.a, move || {
            let sock = UdpSocket::bind(addr(ADDR_A, 0)).expect("bind");
            for i in 0..N {
                // Paced a little: the RX ring holds 2048.
                if i % 256 == 255 {
                    std::thread::sleep(Duration::from_millis(2));
                }
                sock.send_to(&i.to_be_bytes(), addr(ADDR_B, port))
                    .expect("send");
            }
        });
    }
    rx.join().expect("receiver thread")
}

#[test]
fn issue_25_kernel_sender_reaches_an_af_xdp_receiver() {
    if let Some(why) = unavailable() {
        println!("skipped: {why}");
        return;
    }
    let pair = Pair::new("rx").expect("namespaces");
    for (mode, port) in [(AttachMode::Native, 9101), (AttachMode::Generic, 9102)] {
        let got = receive_n(&pair, mode, port).expect("AF_XDP receive");
        assert_eq!(got, N, "{mode} mode: AF_XDP receiver counted");
        assert!(!Pair::has_xdp(&pair.b, "vb"), "detached after {mode}");
    }
}
