//! Issue 10: a reverse sender stops soon after its client's control
//! connection or path goes away: after the heartbeat's silence limit (3 s
//! since issue 28, which made 1 s robust to a loaded host). The client runs in a network
//! namespace; the test freezes it (SIGSTOP: its kernel still acknowledges
//! and receives, so only the missing heartbeats tell) or downs its veth
//! (no FIN, no RST), and measures when the server's side ended: the
//! server's log line, and for UDP the server's veth transmit counter
//! standing still. The server then serves the next test.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use linerate_proto::session::heartbeat::SILENCE_FLOOR;

use crate::helpers::{assert_ok, bin, run_client_in, skip};
use crate::netns::{unavailable, NetPair, ADDR_B};

/// When the server must have given up after the cut: the silence limit
/// (the floor, at the default interval), less the last beat's age at the
/// cut, plus a margin for a loaded host.
fn gave_up_in_time(took: Duration) -> bool {
    took >= SILENCE_FLOOR - Duration::from_millis(500)
        && took < SILENCE_FLOOR + Duration::from_millis(1500)
}

/// A server in a namespace whose log lines are kept with their arrival time.
struct LoggedServer {
    child: Child,
    port: String,
    log: Arc<Mutex<Vec<(Instant, String)>>>,
}

impl LoggedServer {
    fn start(ns: &str) -> LoggedServer {
        let mut child = Command::new("ip")
            .args(["netns", "exec", ns, bin(), "server", "--port", "0"])
            .args(["--bind", ADDR_B])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn server");
        let mut out = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        out.read_line(&mut line).expect("server prints its address");
        let port = line
            .split_whitespace()
            .find_map(|w| w.rsplit_once(':').and_then(|(_, p)| p.parse::<u16>().ok()))
            .unwrap_or_else(|| panic!("no port in {line:?}"))
            .to_string();
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut out, &mut std::io::sink());
        });
        let log = Arc::new(Mutex::new(Vec::new()));
        let keep = Arc::clone(&log);
        let err = child.stderr.take().expect("stderr");
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                keep.lock().expect("log").push((Instant::now(), line));
            }
        });
        LoggedServer { child, port, log }
    }

    /// When the first log line containing `what` arrived after `since`.
    fn logged(&self, what: &str, since: Instant, limit: Duration) -> Option<(Instant, String)> {
        let end = Instant::now() + limit;
        while Instant::now() < end {
            let hit = self
                .log
                .lock()
                .expect("log")
                .iter()
                .find(|(t, l)| *t >= since && l.contains(what))
                .cloned();
            if hit.is_some() {
                return hit;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }
}

impl Drop for LoggedServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Debug, Clone, Copy)]
enum Cut {
    /// SIGSTOP the client process.
    Freeze,
    /// Down the client's veth end.
    LinkDown,
}

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill {sig} {pid}");
}

/// The server's veth packets sent, sampled until they stand still for
/// `still`: the instant of the last change.
fn last_tx_change(ns: &str, still: Duration, limit: Duration) -> Instant {
    let start = Instant::now();
    let mut last = NetPair::counter(ns, "vb", "tx_packets");
    let mut changed = Instant::now();
    while start.elapsed() < limit && changed.elapsed() < still {
        std::thread::sleep(Duration::from_millis(20));
        let now = NetPair::counter(ns, "vb", "tx_packets");
        if now != last {
            last = now;
            changed = Instant::now();
        }
    }
    changed
}

fn reverse_sender_stops(proto: &str, cut: Cut) {
    if let Some(why) = unavailable() {
        return skip(why);
    }
    let tag = format!("hb{}{}", &proto[..1], cut as u8);
    let pair = NetPair::new(&tag, 1500).expect("create namespaces");
    let server = LoggedServer::start(&pair.b);
    let port = server.port.clone();
    // A long, paced reverse test: it would run for 30 s if nothing
    // stopped it.
    let mut args = vec![proto, ADDR_B, "-p", &port, "-R", "-t", "30"];
    args.extend(["-b", "200M"]);
    let mut client = Command::new("ip")
        .args(["netns", "exec", &pair.a, bin()])
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn client");
    std::thread::sleep(Duration::from_millis(1500));
    // `ip netns exec` execs the program: the child's pid is the client's.
    let comm = std::fs::read_to_string(format!("/proc/{}/comm", client.id())).unwrap_or_default();
    assert!(
        matches!(client.try_wait(), Ok(None)),
        "the client ended early: {:?}",
        client.wait_with_output()
    );
    let tx_before = NetPair::counter(&pair.b, "vb", "tx_packets");
    let cut_at = Instant::now();
    match cut {
        Cut::Freeze => {
            assert!(comm.starts_with("linerate"), "pid is {comm:?}");
            signal(client.id(), "-STOP");
        }
        Cut::LinkDown => {
            let ok = Command::new("ip")
                .args(["-n", &pair.a, "link", "set", "va", "down"])
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "link down");
        }
    }
    let (logged_at, line) = server
        .logged(
            "no control bytes from the client",
            cut_at,
            Duration::from_secs(10),
        )
        .unwrap_or_else(|| {
            panic!(
                "{proto} {cut:?}: no heartbeat failure logged; log: {:?}",
                server.log.lock().expect("log")
            )
        });
    let took = logged_at - cut_at;
    eprintln!("{proto} {cut:?}: the server gave up after {took:?}: {line}");
    assert!(gave_up_in_time(took), "{proto} {cut:?}: {took:?}");
    if let (Cut::Freeze, "udp") = (cut, proto) {
        // The client's kernel still takes datagrams: the server's veth
        // counter shows when its sender really stopped.
        let tx_during = NetPair::counter(&pair.b, "vb", "tx_packets") - tx_before;
        let stopped = last_tx_change(&pair.b, Duration::from_millis(700), Duration::from_secs(5));
        let after = stopped.saturating_duration_since(cut_at);
        eprintln!("udp: {tx_during} packets after the freeze, last at {after:?}");
        assert!(
            tx_during > 1000,
            "the sender ran on until the heartbeat ended it"
        );
        assert!(gave_up_in_time(after), "sent until {after:?}");
    }
    let _ = client.kill();
    let _ = client.wait();
    if let Cut::LinkDown = cut {
        let ok = Command::new("ip")
            .args(["-n", &pair.a, "link", "set", "va", "up"])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "link up");
    }
    if let Some(mut e) = client.stderr.take() {
        let mut s = String::new();
        let _ = e.read_to_string(&mut s);
    }
    // The server keeps serving: the next test from the same namespace.
    let next = [proto, ADDR_B, "-p", &port, "-t", "1", "-R"];
    let out = run_client_in(Some(&pair.a), &next, Duration::from_secs(30));
    assert_ok(&out, &next);
}

#[test]
fn issue_10_a_reverse_udp_sender_stops_within_seconds_of_a_frozen_client() {
    reverse_sender_stops("udp", Cut::Freeze);
}

#[test]
fn issue_10_a_reverse_udp_sender_stops_within_seconds_of_its_clients_link_going_down() {
    reverse_sender_stops("udp", Cut::LinkDown);
}

#[test]
fn issue_10_a_reverse_tcp_sender_stops_within_seconds_of_a_frozen_client() {
    reverse_sender_stops("tcp", Cut::Freeze);
}

#[test]
fn issue_10_a_reverse_tcp_sender_stops_within_seconds_of_its_clients_link_going_down() {
    reverse_sender_stops("tcp", Cut::LinkDown);
}
