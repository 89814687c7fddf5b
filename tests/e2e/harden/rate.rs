//! `--max-rate` and `--max-total-rate` on TCP (issue 10): the server paces
//! its own TCP senders to the limit (the kernel's pacing, so the bytes on
//! the wire hold it), refuses clients that ask to send more or unpaced,
//! and shares a total among concurrent tests.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::helpers::{bin, f, json_client, run_client, stderr, Server};

/// Most a test paced to `limit` may show on loopback over `secs`: the
/// kernel sends each connection's first 10 segments unpaced, and a
/// loopback segment is 64 KiB (on Ethernet it is 1448 bytes).
fn loopback_cap(limit: f64, streams: f64, secs: f64) -> f64 {
    limit * 1.02 + streams * 10.0 * 65536.0 * 8.0 / secs
}

fn receiver_bps(r: &serde_json::Value) -> f64 {
    r["sums"]
        .as_array()
        .expect("sums")
        .iter()
        .map(|s| f(&s["receiver_bits_per_second"]))
        .sum()
}

#[test]
fn issue_10_max_rate_paces_the_servers_tcp_senders() {
    let server = Server::start(&["--max-rate", "40M"]);
    let port = server.port_str();
    let args = [
        "tcp",
        "127.0.0.1",
        "-p",
        &port,
        "-R",
        "-P",
        "2",
        "-t",
        "2",
        "--json",
    ];
    let r = json_client(&args);
    assert_eq!(r["test"]["tcp"]["rate"], 20_000_000, "{}", r["test"]);
    let notes = r["notes"].to_string();
    assert!(notes.contains("--max-rate"), "{notes}");
    let bps = receiver_bps(&r);
    // Paced by the kernel (headers count against the rate): at most the
    // limit, and not far below it on loopback.
    assert!(
        (20e6..=loopback_cap(40e6, 2.0, 2.0)).contains(&bps),
        "received {bps:.0} bit/s"
    );
}

#[test]
fn issue_10_max_rate_refuses_tcp_clients_that_would_send_faster() {
    let server = Server::start(&["--max-rate", "40M"]);
    let port = server.port_str();
    for extra in [&[][..], &["-b", "50M"], &["--bidir", "-b", "30M"]] {
        let mut args = vec!["tcp", "127.0.0.1", "-p", &port, "-t", "1"];
        args.extend_from_slice(extra);
        let out = run_client(&args, Duration::from_secs(20));
        assert!(!out.status.success(), "{extra:?} ran");
        let err = stderr(&out);
        assert!(
            err.contains("--max-rate") && err.contains("--rate"),
            "{err}"
        );
    }
    let r = json_client(&[
        "tcp",
        "127.0.0.1",
        "-p",
        &port,
        "-b",
        "15M",
        "-P",
        "2",
        "-t",
        "2",
        "--json",
    ]);
    assert_eq!(r["test"]["tcp"]["rate"], 15_000_000);
    let bps = receiver_bps(&r);
    assert!(
        (15e6..=loopback_cap(30e6, 2.0, 2.0)).contains(&bps),
        "received {bps:.0} bit/s"
    );
}

#[test]
fn issue_10_max_total_rate_is_shared_by_concurrent_tests() {
    let server = Server::start(&["--max-concurrent", "2", "--max-total-rate", "30M"]);
    let port = server.port_str();
    // A reverse test takes the whole budget (clamped to it) for 3 s.
    let first = Command::new(bin())
        .args(["tcp", "127.0.0.1", "-p", &port, "-R", "-t", "3", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    std::thread::sleep(Duration::from_millis(1000));
    let out = run_client(
        &["tcp", "127.0.0.1", "-p", &port, "-b", "5M", "-t", "1"],
        Duration::from_secs(20),
    );
    let err = stderr(&out);
    assert!(
        !out.status.success(),
        "ran beside a test holding the budget"
    );
    assert!(
        err.contains("--max-total-rate") && err.contains("in use by running tests"),
        "{err}"
    );
    let first = first.wait_with_output().expect("first test");
    assert!(first.status.success(), "{}", stderr(&first));
    let r: serde_json::Value = serde_json::from_slice(&first.stdout).expect("json");
    assert_eq!(r["test"]["tcp"]["rate"], 30_000_000);
    let bps = receiver_bps(&r);
    assert!(
        bps <= loopback_cap(30e6, 1.0, 3.0),
        "received {bps:.0} bit/s"
    );
    // Its share is back once it ended.
    json_client(&[
        "tcp",
        "127.0.0.1",
        "-p",
        &port,
        "-b",
        "5M",
        "-t",
        "1",
        "--json",
    ]);
}

#[test]
fn issue_10_a_client_sending_above_its_agreed_rate_is_ended() {
    use linerate_proto::spec::{Limit, TcpOptions, TestSpec};
    use linerate_proto::wire::{DataHello, Message, Side};
    use std::io::Write;

    let (server, log) = super::logged_server(&["--max-rate", "8M"]);
    let mut raw = super::Raw::connect(server.port);
    // Agrees to 4 Mbit/s, then writes as fast as loopback takes it.
    raw.hello(TestSpec {
        limit: Limit::TimeMs(10_000),
        tcp: TcpOptions {
            rate: Some(4_000_000),
            ..TcpOptions::default()
        },
        ..TestSpec::default()
    });
    let a = match raw.recv(Duration::from_secs(10)) {
        Some(Message::Accept(a)) => a,
        other => panic!("expected an Accept, got {other:?}"),
    };
    let mut data = std::net::TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    let mut hello = Vec::new();
    DataHello {
        token: a.token,
        stream: 1,
        sender: Side::Client,
    }
    .encode(&mut hello);
    data.write_all(&hello).expect("greet");
    assert!(matches!(
        raw.recv(Duration::from_secs(5)),
        Some(Message::Start)
    ));
    data.set_write_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let t0 = std::time::Instant::now();
    let buf = vec![0u8; 1 << 16];
    let writer = std::thread::spawn(move || {
        while t0.elapsed() < Duration::from_secs(8) {
            match data.write(&buf) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
                Err(_) => break,
            }
        }
    });
    let ended = loop {
        match raw.recv(Duration::from_secs(8)) {
            Some(Message::Abort(a)) => break Some(a.reason),
            Some(_) => continue,
            None => break None,
        }
    };
    let took = t0.elapsed();
    let _ = writer.join();
    // The server logs the failure once the session has ended.
    crate::helpers::eventually(Duration::from_secs(3), || {
        log.lock()
            .is_ok_and(|l| l.contains("agreed to (--max-rate)"))
    });
    let log = log.lock().map(|l| l.clone()).unwrap_or_default();
    let why = ended.unwrap_or_else(|| panic!("no Abort after {took:?}; server log:\n{log}"));
    assert!(
        why.contains("--max-rate") && why.contains("agreed"),
        "{why}"
    );
    // Caught at the first interval record (1 s) or soon after.
    assert!(took < Duration::from_secs(6), "took {took:?}");
    assert!(log.contains("agreed to (--max-rate)"), "{log}");
}

#[test]
fn issue_10_max_rate_applies_to_iperf3_clients() {
    let Some(iperf3) = crate::iperf3::iperf3() else {
        return;
    };
    let (server, log) = super::logged_server(&["--max-rate", "20M"]);
    let port = server.port_str();
    let run = |extra: &[&str]| {
        Command::new("timeout")
            .args(["30", iperf3, "-c", "127.0.0.1", "-p", &port, "-t", "1"])
            .args(extra)
            .output()
            .expect("iperf3")
    };
    // TCP's default is unpaced: refused with iperf3's own error code.
    let out = run(&[]);
    assert!(!out.status.success(), "an unpaced iperf3 test ran");
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    assert!(said.contains("bandwidth"), "{said}");
    let out = run(&["-b", "8M", "-P", "2"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let log = log.lock().map(|l| l.clone()).unwrap_or_default();
    assert!(log.contains("--max-rate"), "{log}");
}

/// An iperf3 TCP `-b` below 8 bit/s was dropped (the kernel paces whole
/// bytes per second) and the test ran unpaced past `--max-rate`: it is
/// refused in iperf3's error channel, forward and reverse.
#[test]
fn issue_28_iperf3_tcp_rate_below_8_bits_is_refused_under_max_rate() {
    let Some(iperf3) = crate::iperf3::iperf3() else {
        return;
    };
    let (server, log) = super::logged_server(&["--max-rate", "10M"]);
    let port = server.port_str();
    for extra in [&["-b", "1"][..], &["-b", "7", "-R"]] {
        let out = Command::new("timeout")
            .args(["30", iperf3, "-c", "127.0.0.1", "-p", &port, "-t", "2"])
            .args(extra)
            .output()
            .expect("iperf3");
        let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
        assert!(!out.status.success(), "{extra:?} ran: {said}");
        assert!(said.contains("not implemented"), "{extra:?}: {said}");
    }
    let log = log.lock().map(|l| l.clone()).unwrap_or_default();
    assert!(log.contains("-b 8 or more"), "{log}");
}

#[test]
fn issue_10_max_total_rate_is_shared_with_iperf3_clients() {
    let Some(iperf3) = crate::iperf3::iperf3() else {
        return;
    };
    let server = Server::start(&["--max-concurrent", "3", "--max-total-rate", "100M"]);
    let port = server.port_str();
    let iperf = |secs: &str, extra: &[&str]| {
        let mut c = Command::new("timeout");
        c.args(["30", iperf3, "-c", "127.0.0.1", "-p", &port, "-t", secs])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    };
    // An iperf3 client holds 60 of the 100 Mbit/s for 6 s, from the
    // moment its stream connected (the server admitted it): on a busy host
    // that takes longer than any fixed sleep, and the refusals below need
    // it running throughout.
    let mut first = iperf("6", &["-u", "-b", "60M", "--forceflush"])
        .spawn()
        .expect("iperf3");
    let mut said = BufReader::new(first.stdout.take().expect("stdout"));
    let mut head = String::new();
    while !head.contains("connected") && said.read_line(&mut head).unwrap_or(0) > 0 {}
    assert!(
        head.contains("connected"),
        "the first test did not start: {head}"
    );
    let rest = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = said.read_to_string(&mut s);
        s
    });
    // …so neither another iperf3 client nor a linerate one gets 60 more,
    // and an unpaced iperf3 test (TCP's default) is refused too.
    for extra in [
        &["-u", "-b", "60M"][..],
        &["-R", "-b", "30M", "-P", "2"],
        &[],
    ] {
        let out = iperf("1", extra).output().expect("iperf3");
        let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
        assert!(!out.status.success(), "{extra:?} ran: {said}");
        assert!(said.contains("bandwidth"), "{extra:?}: {said}");
    }
    let out = run_client(
        &["udp", "127.0.0.1", "-p", &port, "-b", "60M", "-t", "1"],
        Duration::from_secs(20),
    );
    let err = stderr(&out);
    assert!(!out.status.success(), "a linerate test ran beside it");
    assert!(
        err.contains("--max-total-rate") && err.contains("in use by running tests"),
        "{err}"
    );
    assert!(
        first.try_wait().is_ok_and(|s| s.is_none()),
        "the refusals above ran after the first test ended"
    );
    let status = first.wait().expect("first");
    let rest = rest.join().unwrap_or_default();
    assert!(status.success(), "{head}{rest}");
    // Its share is back once it ended (the server gives it back when its
    // streams end, before the results that let the client exit): the
    // same test runs now.
    let out = iperf("1", &["-R", "-b", "30M", "-P", "2"])
        .output()
        .expect("iperf3");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        stderr(&out)
    );
}
