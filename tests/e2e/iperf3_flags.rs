//! `linerate iperf3` flags that iperf3 supports and linerate used to
//! refuse (issue 9): `-B` on a client, `--logfile` with `-s`, `-A N,M`,
//! `-n`/`-k` with `-R`/`--bidir` — each against real iperf3 servers (the
//! installed one, Debian's 3.12 in CI, and a newer one where
//! `LINERATE_IPERF3_NEWER` names it, default the 3.21 build at
//! /work/anchors/iperf3/bin/iperf3) and a linerate server; and an iperf3
//! client's TCP `-b` honoured by a linerate server's senders.

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::helpers::{bin, f, run_client, stderr, u, Server};
use crate::iperf3::iperf3;

/// The real iperf3 servers to test against: (label, binary).
fn real_iperf3s() -> Vec<(String, String)> {
    let mut v = Vec::new();
    if iperf3().is_some() {
        v.push(("installed iperf3".to_owned(), "iperf3".to_owned()));
    }
    let newer = std::env::var("LINERATE_IPERF3_NEWER")
        .unwrap_or_else(|_| "/work/anchors/iperf3/bin/iperf3".into());
    if std::path::Path::new(&newer).exists() {
        v.push((format!("iperf3 at {newer}"), newer));
    } else {
        eprintln!("SKIP (newer iperf3): {newer} does not exist (set LINERATE_IPERF3_NEWER)");
    }
    v
}

fn free_port() -> String {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
        .to_string()
}

/// A real iperf3 server (`-s -B 127.0.0.1 EXTRA`), killed on drop.
struct Real {
    child: Child,
    port: String,
}

impl Real {
    fn start(binary: &str, extra: &[&str]) -> Real {
        let port = free_port();
        let child = Command::new(binary)
            .args(["-s", "-B", "127.0.0.1", "-p", &port])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn iperf3 -s");
        // No probe connection (a -1 server would take it for its one
        // test): the clients retry while it is not listening yet.
        std::thread::sleep(Duration::from_millis(300));
        Real { child, port }
    }

    /// Its standard output once it has exited (`-1`).
    fn output(mut self) -> String {
        let t = Instant::now();
        while matches!(self.child.try_wait(), Ok(None)) && t.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut s = String::new();
        if let Some(mut o) = self.child.stdout.take() {
            let _ = o.read_to_string(&mut s);
        }
        s
    }
}

impl Drop for Real {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `linerate iperf3 -c 127.0.0.1 -p PORT ARGS -J`, retried while the
/// server is between tests; the parsed document.
fn dropin(port: &str, args: &[&str]) -> Value {
    let mut all = vec!["iperf3", "-c", "127.0.0.1", "-p", port];
    all.extend_from_slice(args);
    all.push("-J");
    let mut last = String::new();
    for _ in 0..20 {
        let out = run_client(&all, Duration::from_secs(40));
        if out.status.success() {
            return serde_json::from_slice(&out.stdout).expect("JSON");
        }
        last = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("{all:?}: {last}");
}

#[test]
fn issue_9_dropin_client_binds_its_local_address_with_b() {
    for (label, binary) in real_iperf3s() {
        for udp in [false, true] {
            let server = Real::start(&binary, &["-1", "-J"]);
            let mut args = vec!["-B", "127.0.0.9", "-t", "1"];
            if udp {
                args.push("-u");
            }
            let doc = dropin(&server.port, &args);
            for c in doc["start"]["connected"].as_array().expect("connected") {
                assert_eq!(c["local_host"], "127.0.0.9", "{label} udp={udp}: {c}");
            }
            // The server saw the connection come from there.
            let theirs: Value = serde_json::from_str(&server.output()).expect("server -J");
            let from = &theirs["start"]["accepted_connection"]["host"];
            assert_eq!(from, "127.0.0.9", "{label} udp={udp}: {theirs}");
        }
    }
    // And a linerate server, which sees the same address.
    let server = Server::start(&[]);
    let doc = dropin(
        &server.port_str(),
        &["-B", "127.0.0.9", "-t", "1", "-P", "2"],
    );
    for c in doc["start"]["connected"].as_array().expect("connected") {
        assert_eq!(c["local_host"], "127.0.0.9", "{c}");
    }
}

/// The CPUs a process (or any of its threads) is allowed, polled while
/// `during` runs.
fn affinities_seen(pid: u32, during: impl FnOnce()) -> Vec<String> {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (s2, st2) = (seen.clone(), stop.clone());
    let poller = std::thread::spawn(move || {
        while !st2.load(std::sync::atomic::Ordering::Relaxed) {
            let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
                .map(|d| d.flatten().map(|e| e.path()).collect::<Vec<_>>())
                .unwrap_or_default();
            for t in tasks {
                let status = std::fs::read_to_string(t.join("status")).unwrap_or_default();
                if let Some(l) = status.lines().find(|l| l.starts_with("Cpus_allowed_list:")) {
                    let v = l["Cpus_allowed_list:".len()..].trim().to_owned();
                    let mut s = s2.lock().expect("seen");
                    if !s.contains(&v) {
                        s.push(v);
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    during();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = poller.join();
    let v = seen.lock().expect("seen").clone();
    v
}

#[test]
fn issue_9_dropin_affinity_n_m_asks_the_server_to_pin_itself() {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        eprintln!("SKIP: needs 2 CPUs for -A 0,1");
        return;
    }
    for (label, binary) in real_iperf3s() {
        let server = Real::start(&binary, &[]);
        let pid = server.child.id();
        let seen = affinities_seen(pid, || {
            dropin(&server.port, &["-A", "0,1", "-t", "2"]);
        });
        assert!(
            seen.iter().any(|c| c == "1"),
            "{label}: server_affinity 1 was not applied: {seen:?}"
        );
    }
    // A linerate server pins the test's stream threads to that CPU.
    let server = Server::start(&[]);
    let seen = affinities_seen(server.child.id(), || {
        dropin(&server.port_str(), &["-A", "0,1", "-t", "2"]);
    });
    assert!(seen.iter().any(|c| c == "1"), "linerate server: {seen:?}");
    // A CPU the server does not have is refused with iperf3's error.
    let out = run_client(
        &[
            "iperf3",
            "-c",
            "127.0.0.1",
            "-p",
            &server.port_str(),
            "-A",
            "0,1000",
            "-t",
            "1",
        ],
        Duration::from_secs(20),
    );
    assert!(!out.status.success());
}

#[test]
fn issue_9_dropin_server_logfile_takes_all_its_output() {
    let Some(iperf3) = iperf3() else { return };
    let dir = std::env::temp_dir().join(format!("linerate-logfile-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let log = dir.join("server.log");
    let _ = std::fs::remove_file(&log);
    let port = free_port();
    let server = Command::new(bin())
        .args(["iperf3", "-s", "-1", "-p", &port, "--logfile"])
        .arg(&log)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let t = Instant::now();
    let mut out = None;
    while t.elapsed() < Duration::from_secs(20) {
        let o = Command::new("timeout")
            .args(["20", iperf3, "-c", "127.0.0.1", "-p", &port, "-t", "1"])
            .output()
            .expect("iperf3");
        if o.status.success() {
            out = Some(o);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        out.is_some(),
        "iperf3 never ran against the -s --logfile server"
    );
    let done = server.wait_with_output().expect("server exits after -1");
    assert!(done.status.success(), "{}", stderr(&done));
    assert!(
        done.stdout.is_empty() && done.stderr.is_empty(),
        "printed instead of logged: {:?} {}",
        String::from_utf8_lossy(&done.stdout),
        stderr(&done)
    );
    let text = std::fs::read_to_string(&log).expect("log file");
    assert!(text.contains("linerate server listening"), "{text}");
    assert!(text.contains("receiver"), "the test's report: {text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Bytes received in all by the client of a `-J` document (every
/// direction the client received in).
fn client_received(doc: &Value) -> u64 {
    let e = &doc["end"];
    if e["sum_received_bidir_reverse"].is_object() {
        u(&e["sum_received_bidir_reverse"]["bytes"])
    } else {
        u(&e["sum_received"]["bytes"])
    }
}

#[test]
fn issue_9_dropin_bytes_and_blocks_end_reverse_and_bidir_tests() {
    let linerate = Server::start(&[]);
    let mut servers: Vec<(String, Option<Real>, String)> = real_iperf3s()
        .into_iter()
        .map(|(label, b)| {
            let r = Real::start(&b, &[]);
            let port = r.port.clone();
            (label, Some(r), port)
        })
        .collect();
    servers.push(("linerate server".into(), None, linerate.port_str()));
    let n: u64 = 20 << 20;
    for (label, _keep, port) in &servers {
        // -R -n: the client ends once it received 20 MiB; the server sent
        // up to its TEST_END, a little more.
        let doc = dropin(port, &["-R", "-n", "20M", "-P", "2"]);
        let got = client_received(&doc);
        assert!(got >= n, "{label}: -R -n 20M received {got}");
        // --bidir -n: whichever direction moved 20 MiB first ends it.
        let doc = dropin(port, &["--bidir", "-n", "20M"]);
        let sent = u(&doc["end"]["sum_sent"]["bytes"]);
        assert!(sent >= n || client_received(&doc) >= n, "{label}: {doc}");
        // UDP -R -k: blocks are datagrams.
        let doc = dropin(port, &["-u", "-R", "-k", "500", "-b", "20M", "-l", "1000"]);
        let packets = u(&doc["end"]["sum"]["packets"]);
        let lost = u(&doc["end"]["sum"]["lost_packets"]);
        assert!(
            packets - lost >= 500,
            "{label}: {packets} packets, {lost} lost"
        );
        let secs = f(&doc["end"]["sum"]["seconds"]);
        assert!(
            secs < 5.0,
            "{label}: 500 datagrams at 20 Mbit/s took {secs} s"
        );
    }
}

#[test]
fn issue_9_an_iperf3_clients_tcp_bitrate_paces_the_linerate_servers_senders() {
    let Some(iperf3) = iperf3() else { return };
    let server = Server::start(&[]);
    let port = server.port_str();
    let out = Command::new("timeout")
        .args([
            "30",
            iperf3,
            "-c",
            "127.0.0.1",
            "-p",
            &port,
            "-t",
            "3",
            "-R",
        ])
        .args(["-b", "20M", "-J"])
        .output()
        .expect("iperf3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let bps = f(&doc["end"]["sum_received"]["bits_per_second"]);
    // The kernel paces (SO_MAX_PACING_RATE); its first 10 segments leave
    // unpaced (64 KiB each on loopback), hence the slack over 3 s.
    let cap = 20e6 * 1.05 + 10.0 * 65536.0 * 8.0 / 3.0;
    assert!(
        bps > 20e6 * 0.8 && bps < cap,
        "received {bps:.0} bit/s for -b 20M"
    );
}
