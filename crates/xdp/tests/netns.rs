//! AF_XDP on a real path: two network namespaces this test creates, joined
//! by a veth pair and addressed from 198.18.0.0/15 (RFC 2544's
//! benchmarking range), as tests/e2e/netns.rs builds them. Each test runs
//! its AF_XDP side in a thread that entered a namespace (`setns`), and
//! counts every datagram against a kernel socket on the other side.
//!
//! Needs root (CI runs as root); elsewhere each test prints why it skipped.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

use common::{addr, in_ns, ip, unavailable, Pair, ADDR_A, ADDR_B};
use linerate_xdp::{
    path_to, AttachMode, CopyMode, Program, ProgramOptions, Queue, QueueOptions, UdpFlow, XdpError,
};

/// Datagrams per direction: more than a ring holds, so the rings turn.
const N: u64 = 5000;
/// Every wait is bounded.
const LIMIT: Duration = Duration::from_secs(10);
/// Datagrams a sender may be ahead of what its receiver counted (plus a
/// batch): well under the receiver's rings and a default socket buffer
/// (about 160 of these datagrams fit 208 KiB), so a test machine busy
/// elsewhere delays the datagrams instead of dropping them.
const WINDOW: u64 = 64;
/// Datagrams per AF_XDP send call.
const BATCH: u64 = 32;

/// Waits (bounded) until the receiver has counted up to `WINDOW` behind
/// `sent`, running `meanwhile` while it waits.
fn wait_for_window(sent: u64, seen: &AtomicU64, start: Instant, mut meanwhile: impl FnMut()) {
    while sent.saturating_sub(seen.load(Ordering::Relaxed)) > WINDOW && start.elapsed() < LIMIT {
        meanwhile();
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// Copy mode (veth has no zero-copy); `need_wakeup` as asked.
fn copy_opts() -> QueueOptions {
    QueueOptions {
        copy: CopyMode::Copy,
        ..QueueOptions::default()
    }
}

/// Sends datagrams 0..N from an AF_XDP queue on `va` to `dst`.
fn send_n(dst: SocketAddr, opts: QueueOptions, seen: &AtomicU64) -> Result<(), XdpError> {
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
        wait_for_window(next, seen, start, || {
            queue.complete();
        });
        let batch: Vec<[u8; 8]> = (next..(next + BATCH).min(N))
            .map(u64::to_be_bytes)
            .collect();
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
fn count_kernel(sock: &UdpSocket, seen_count: &AtomicU64) -> u64 {
    sock.set_read_timeout(Some(Duration::from_millis(500)))
        .expect("timeout");
    let mut seen = HashSet::new();
    let mut buf = [0u8; 64];
    let start = Instant::now();
    while (seen.len() as u64) < N && start.elapsed() < LIMIT {
        if let Ok(8) = sock.recv(&mut buf) {
            seen.insert(u64::from_be_bytes(buf[..8].try_into().expect("8 bytes")));
            seen_count.store(seen.len() as u64, Ordering::Relaxed);
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
        let seen = Arc::new(AtomicU64::new(0));
        let seen_rx = Arc::clone(&seen);
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let receiver = std::thread::spawn(move || {
            in_ns(&b, move || {
                let sock = UdpSocket::bind(addr(ADDR_B, port)).expect("bind");
                let _ = ready_tx.send(());
                count_kernel(&sock, &seen_rx)
            })
        });
        ready_rx.recv_timeout(LIMIT).expect("receiver bound");
        let opts = QueueOptions {
            need_wakeup,
            ..copy_opts()
        };
        in_ns(&pair.a, move || send_n(addr(ADDR_B, port), opts, &seen)).expect("AF_XDP send");
        let got = receiver.join().expect("receiver");
        assert_eq!(got, N, "need_wakeup {need_wakeup}: kernel socket counted");
    }
}

/// Attaches in `mode` on `vb`, receives datagrams 0..N sent by a kernel
/// socket in `a` to port `port`; returns how many distinct arrived.
fn receive_n(pair: &Pair, mode: AttachMode, port: u16) -> Result<u64, XdpError> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let b = pair.b.clone();
    let seen_count = Arc::new(AtomicU64::new(0));
    let seen_rx = Arc::clone(&seen_count);
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
                seen_rx.store(seen.len() as u64, Ordering::Relaxed);
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
            let start = Instant::now();
            for i in 0..N {
                wait_for_window(i, &seen_count, start, || {});
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

#[test]
fn issue_25_tcp_and_other_udp_keep_working_while_attached() {
    if let Some(why) = unavailable() {
        println!("skipped: {why}");
        return;
    }
    let pair = Pair::new("tcp").expect("namespaces");
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let b = pair.b.clone();
    let server = std::thread::spawn(move || {
        in_ns(&b, move || {
            let opts = ProgramOptions::default();
            let mut prog = Program::attach("vb", &opts).expect("attach");
            let queue = Queue::open("vb", 0, &copy_opts()).expect("queue");
            prog.register(&queue).expect("register");
            prog.allow(addr(ADDR_B, 9201)).expect("allow");
            let tcp = TcpListener::bind(addr(ADDR_B, 9202)).expect("tcp bind");
            let udp = UdpSocket::bind(addr(ADDR_B, 9203)).expect("udp bind");
            udp.set_read_timeout(Some(LIMIT)).expect("timeout");
            let _ = ready_tx.send(());
            let (mut conn, _) = tcp.accept().expect("accept");
            let mut buf = vec![0u8; 1 << 20];
            conn.read_exact(&mut buf).expect("read 1 MiB over TCP");
            conn.write_all(b"ok").expect("reply");
            let mut d = [0u8; 16];
            let got = udp.recv(&mut d).expect("UDP to another port");
            assert_eq!(&d[..got], b"other port");
            // The program stays attached until the client is done.
            let _ = done_rx.recv_timeout(LIMIT);
            assert!(Pair::has_xdp_here("vb"), "attached throughout");
        })
    });
    ready_rx.recv_timeout(LIMIT).expect("server ready");
    in_ns(&pair.a, move || {
        let mut conn = TcpStream::connect(addr(ADDR_B, 9202)).expect("connect");
        conn.write_all(&vec![7u8; 1 << 20]).expect("write");
        let mut ok = [0u8; 2];
        conn.read_exact(&mut ok).expect("reply");
        assert_eq!(&ok, b"ok");
        let udp = UdpSocket::bind(addr(ADDR_A, 0)).expect("bind");
        udp.send_to(b"other port", addr(ADDR_B, 9203))
            .expect("send");
    });
    let _ = done_tx.send(());
    server.join().expect("server");
    assert!(!Pair::has_xdp(&pair.b, "vb"), "detached on drop");
}

impl Pair {
    /// `has_xdp` from a thread already in the namespace.
    fn has_xdp_here(dev: &str) -> bool {
        linerate_xdp::link_by_name(dev).is_ok_and(|l| l.xdp.is_some())
    }
}

/// Set in the child process of the SIGKILL and capability tests: the
/// namespace to attach in (`.`: the one the child was started in). The
/// child is this test binary, run with `--exact` on
/// `child_attaches_and_waits`.
const CHILD_NS: &str = "LINERATE_XDP_TEST_CHILD_NS";

/// Not a test on its own: the child of `issue_25_sigkill_leaves_no_program`
/// and of the capability test (a no-op unless its variable is set).
#[test]
fn child_attaches_and_waits() {
    let Ok(ns) = std::env::var(CHILD_NS) else {
        return;
    };
    let attach = || {
        Program::attach("vb", &ProgramOptions::default()).map(|p| {
            println!("attached");
            let _ = std::io::stdout().flush();
            // Held until the parent kills this process.
            std::thread::sleep(LIMIT);
            drop(p);
        })
    };
    // Entering a namespace needs CAP_SYS_ADMIN, which the capability test
    // drops: there `ip netns exec` put the child in it already.
    let attached = if ns == "." {
        attach()
    } else {
        in_ns(&ns, attach)
    };
    if let Err(e) = attached {
        println!("refused: {e}");
    }
}

/// Runs `child_attaches_and_waits` in a child process for namespace `ns`
/// (see [`CHILD_NS`]), under `wrap` (a command prefix ending in a shell's
/// `-c`, e.g. capsh) when given.
fn child(ns: &str, wrap: &[&str]) -> std::process::Child {
    let exe = std::env::current_exe().expect("test binary");
    let exe = exe.to_string_lossy().into_owned();
    let args = [
        &exe,
        "--exact",
        "child_attaches_and_waits",
        "--nocapture",
        "-q",
    ];
    let mut cmd = match wrap.split_first() {
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg(args.join(" "));
            c
        }
        None => {
            let mut c = Command::new(args[0]);
            c.args(&args[1..]);
            c
        }
    };
    cmd.env(CHILD_NS, ns)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn child")
}

/// The child's first line starting with `attached` or `refused`.
fn child_says(child: &mut std::process::Child) -> String {
    use std::io::BufRead;
    let out = child.stdout.take().expect("piped");
    std::io::BufReader::new(out)
        .lines()
        .map_while(Result::ok)
        .find(|l| l.starts_with("attached") || l.starts_with("refused"))
        .unwrap_or_default()
}

#[test]
fn issue_25_sigkill_leaves_no_program() {
    if let Some(why) = unavailable() {
        println!("skipped: {why}");
        return;
    }
    let pair = Pair::new("kill").expect("namespaces");
    let mut c = child(&pair.b, &[]);
    assert_eq!(child_says(&mut c), "attached");
    assert!(Pair::has_xdp(&pair.b, "vb"), "attached by the child");
    // SIGKILL: no destructor runs; the kernel releases the BPF link with
    // the process's last descriptor.
    c.kill().expect("SIGKILL");
    c.wait().expect("reap");
    let start = Instant::now();
    while Pair::has_xdp(&pair.b, "vb") && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !Pair::has_xdp(&pair.b, "vb"),
        "no XDP program after SIGKILL"
    );
}

#[test]
fn issue_25_refuses_without_capabilities() {
    if let Some(why) = unavailable() {
        println!("skipped: {why}");
        return;
    }
    if Command::new("capsh").arg("--help").output().is_err() {
        println!("skipped: capsh (libcap2-bin) is not installed");
        return;
    }
    let pair = Pair::new("cap").expect("namespaces");
    let drop = "--drop=cap_net_raw,cap_net_admin,cap_bpf,cap_sys_admin";
    let wrap = ["ip", "netns", "exec", &pair.b, "capsh", drop, "--", "-c"];
    let mut c = child(".", &wrap);
    let said = child_says(&mut c);
    let _ = c.kill();
    let _ = c.wait();
    assert!(
        said.starts_with("refused: AF_XDP needs CAP_NET_RAW, CAP_NET_ADMIN, CAP_BPF"),
        "{said}"
    );
    assert!(said.contains("setcap"), "says how to get them: {said}");
    assert!(!Pair::has_xdp(&pair.b, "vb"));
}

#[test]
fn issue_25_attach_refused_when_a_program_is_there() {
    if let Some(why) = unavailable() {
        println!("skipped: {why}");
        return;
    }
    let pair = Pair::new("busy").expect("namespaces");
    // Ours, through a BPF link: a second attach is refused, with the id.
    in_ns(&pair.b, || {
        let first = Program::attach("vb", &ProgramOptions::default()).expect("first");
        let second = Program::attach("vb", &ProgramOptions::default());
        assert!(
            matches!(
                second,
                Err(XdpError::AlreadyAttached { mode: "native", .. })
            ),
            "{second:?}"
        );
        // Asked to replace: a link held elsewhere cannot be, still refused.
        let replace = ProgramOptions {
            replace: true,
            ..ProgramOptions::default()
        };
        assert!(matches!(
            Program::attach("vb", &replace),
            Err(XdpError::AlreadyAttached { .. })
        ));
        drop(first);
    });
    // Someone else's, attached over netlink by `ip`.
    let obj = std::env::temp_dir().join(format!("lx{}-redirect.o", std::process::id()));
    std::fs::write(&obj, linerate_xdp::OBJECT).expect("write object");
    let obj_s = obj.to_string_lossy().into_owned();
    let attached = ip(&[
        "-n",
        &pair.b,
        "link",
        "set",
        "dev",
        "vb",
        "xdpgeneric",
        "obj",
        &obj_s,
        "sec",
        "xdp",
    ]);
    let _ = std::fs::remove_file(&obj);
    if let Err(e) = attached {
        println!("skipped the netlink case: {e}");
        return;
    }
    in_ns(&pair.b, || {
        let refused = Program::attach("vb", &ProgramOptions::default());
        let msg = refused
            .as_ref()
            .map(|_| String::new())
            .unwrap_or_else(|e| e.to_string());
        assert!(msg.contains("already runs XDP program id"), "{msg}");
        assert!(msg.contains("(generic)"), "{msg}");
        let replace = ProgramOptions {
            replace: true,
            ..ProgramOptions::default()
        };
        let prog = Program::attach("vb", &replace).expect("replaced when asked");
        assert!(Pair::has_xdp_here("vb"));
        drop(prog);
    });
    assert!(
        !Pair::has_xdp(&pair.b, "vb"),
        "ours gone, and the replaced one too"
    );
}

#[test]
fn issue_25_refuses_loopback_and_zero_copy_on_veth() {
    if let Some(why) = unavailable() {
        println!("skipped: {why}");
        return;
    }
    let pair = Pair::new("lo").expect("namespaces");
    in_ns(&pair.a, || {
        let e = Program::attach("lo", &ProgramOptions::default()).expect_err("loopback");
        assert!(matches!(e, XdpError::Loopback(_)), "{e}");
        let e = Queue::open("lo", 0, &copy_opts()).expect_err("loopback");
        assert!(e.to_string().contains("veth pair"), "{e}");
        let e = Queue::open("nosuch0", 0, &copy_opts()).expect_err("no interface");
        assert!(matches!(e, XdpError::NoInterface(_)), "{e}");
        // veth has no AF_XDP zero-copy: asked for it (the default), the
        // bind is refused with the way out, not silently copied.
        match Queue::open("va", 0, &QueueOptions::default()) {
            Err(e @ XdpError::Bind { .. }) => {
                assert!(e.to_string().contains("ask for copy mode"), "{e}")
            }
            Err(e) => panic!("zero-copy on veth: {e}"),
            Ok(_) => println!("this kernel's veth takes zero-copy"),
        }
        // A queue the interface does not have.
        let e = Queue::open("va", 7, &copy_opts()).expect_err("queue 7");
        println!("queue 7: {e}");
        assert!(matches!(e, XdpError::Bind { .. }), "{e}");
    });
}

#[test]
fn issue_25_a_queue_reopens_right_after_close() {
    if let Some(why) = unavailable() {
        println!("skipped: {why}");
        return;
    }
    let pair = Pair::new("reopen").expect("namespaces");
    // The kernel lets go of a closed socket's queue in deferred work: the
    // next bind must wait for it, not fail with EBUSY.
    in_ns(&pair.a, || {
        for _ in 0..5 {
            drop(Queue::open("va", 0, &copy_opts()).expect("reopen"));
        }
    });
}

#[test]
fn issue_25_readiness_says_what_veth_and_loopback_allow() {
    if let Some(why) = unavailable() {
        println!("skipped: {why}");
        return;
    }
    let pair = Pair::new("ready").expect("namespaces");
    in_ns(&pair.a, || {
        let va = linerate_xdp::readiness("va");
        println!("{va:?}");
        assert!(va.usable, "{va:?}");
        if va.zero_copy.is_some() {
            assert_eq!(va.native, Some(true), "veth redirects natively");
            assert_eq!(va.zero_copy, Some(false), "veth has no zero-copy");
        }
        let lo = linerate_xdp::readiness("lo");
        assert!(!lo.usable);
        assert!(lo.notes.iter().any(|n| n.contains("loopback")), "{lo:?}");
        let attached = Program::attach("va", &ProgramOptions::default()).expect("attach");
        let busy = linerate_xdp::readiness("va");
        assert!(!busy.usable);
        assert!(
            busy.notes.iter().any(|n| n.contains("already runs")),
            "{busy:?}"
        );
        drop(attached);
    });
}

/// What `-P N` over `xdp` relies on (issue 25): across a veth pair with
/// two queues per end, a frame an AF_XDP socket sends on queue i arrives
/// on the peer's receive queue i (veth hands the skb's queue mapping to
/// the peer's queue of that index), where the peer's socket bound to
/// queue i gets it; and `queue_count` reads the two queues. Natively
/// attached, that is; in generic mode veth records no receive queue and
/// every frame arrives on queue 0. Each datagram says which queue sent it.
#[test]
fn issue_25_a_frame_sent_on_queue_i_arrives_on_the_peers_queue_i() {
    if let Some(why) = unavailable() {
        println!("skipped: {why}");
        return;
    }
    let pair = Pair::with_queues("mq", 2).expect("namespaces");
    let per_queue = 500u64;
    for (mode, port) in [(AttachMode::Native, 9301), (AttachMode::Generic, 9302)] {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let b = pair.b.clone();
        let rx = std::thread::spawn(move || {
            in_ns(&b, move || -> Result<[[u64; 2]; 2], XdpError> {
                assert_eq!(linerate_xdp::queue_count("vb").ok(), Some(2));
                let opts = ProgramOptions {
                    mode,
                    replace: false,
                };
                let mut prog = Program::attach("vb", &opts)?;
                let mut queues = [
                    Queue::open("vb", 0, &copy_opts())?,
                    Queue::open("vb", 1, &copy_opts())?,
                ];
                for q in &queues {
                    prog.register(q)?;
                }
                prog.allow(addr(ADDR_B, port))?;
                let _ = ready_tx.send(());
                // got[receiving queue][sending queue]
                let mut got = [[0u64; 2]; 2];
                let start = Instant::now();
                let total = |g: &[[u64; 2]; 2]| g.iter().flatten().sum::<u64>();
                while total(&got) < 2 * per_queue && start.elapsed() < LIMIT {
                    for (i, q) in queues.iter_mut().enumerate() {
                        q.recv(64, |d| {
                            if d.dst.port() == port && d.payload.len() == 9 {
                                got[i][usize::from(d.payload[8] & 1)] += 1;
                            }
                        });
                    }
                    if done_rx.try_recv().is_ok() {
                        break;
                    }
                    std::thread::sleep(Duration::from_micros(100));
                }
                Ok(got)
            })
        });
        ready_rx.recv_timeout(LIMIT).expect("receiver ready");
        in_ns(&pair.a, move || {
            assert_eq!(linerate_xdp::queue_count("va").ok(), Some(2));
            let dst = addr(ADDR_B, port);
            let path = path_to(dst.ip(), Duration::from_secs(3)).expect("path");
            for qid in 0..2u8 {
                let mut queue = Queue::open("va", u32::from(qid), &copy_opts()).expect("open");
                let flow = UdpFlow {
                    src_mac: path.src_mac,
                    dst_mac: path.dst_mac,
                    src: SocketAddr::new(path.source, 41000 + u16::from(qid)),
                    dst,
                };
                let start = Instant::now();
                let mut next = 0u64;
                while next < per_queue && start.elapsed() < LIMIT {
                    let mut d = [0u8; 9];
                    d[..8].copy_from_slice(&next.to_be_bytes());
                    d[8] = qid;
                    next += queue.send(&flow, &[&d[..]]).expect("send") as u64;
                    // Paced: the receiver's rings never fill.
                    std::thread::sleep(Duration::from_micros(50));
                }
                while queue.in_flight() > 0 && start.elapsed() < LIMIT {
                    queue.complete();
                }
            }
        });
        let got = rx.join().expect("receiver thread").expect("AF_XDP receive");
        let _ = done_tx.send(());
        println!("{mode}: got[rx queue][tx queue] = {got:?}");
        match mode {
            AttachMode::Native => {
                assert_eq!(got[0], [per_queue, 0], "{mode}: receive queue 0 {got:?}");
                assert_eq!(got[1], [0, per_queue], "{mode}: receive queue 1 {got:?}");
            }
            // Without a native program veth takes the frame in through
            // netif_rx, which records no receive queue: generic XDP sees
            // every frame on queue 0 (Linux 6.18: [[500, 500], [0, 0]]).
            // Every datagram still arrives on a queue with a socket.
            AttachMode::Generic => {
                let total: u64 = got.iter().flatten().sum();
                assert_eq!(total, 2 * per_queue, "{mode}: {got:?}");
            }
        }
    }
}
