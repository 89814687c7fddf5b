//! A malformed-input barrage against a running server while a real test
//! runs (issue 10): the real test completes, the server keeps serving, and
//! its threads and file descriptors return to their baseline.

use std::io::Write;
use std::net::{TcpStream, UdpSocket};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use linerate_proto::spec::{Direction, Limit, Pace, Protocol, TestSpec, UdpSpec};
use linerate_proto::wire::{self, DataHello, Hello, Message, Side, Token};
use linerate_proto::PROTOCOL_VERSION;

use super::{logged_server, threads_and_fds, Raw};
use crate::helpers::{bin, eventually, run_client, stderr};

/// Deterministic noise (xorshift), so a failure replays.
struct Noise(u64);

impl Noise {
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n)
            .map(|_| {
                self.0 ^= self.0 << 13;
                self.0 ^= self.0 >> 7;
                self.0 ^= self.0 << 17;
                self.0 as u8
            })
            .collect()
    }
}

fn send_and_close(port: u16, bytes: &[u8]) {
    if let Ok(mut c) = TcpStream::connect(("127.0.0.1", port)) {
        let _ = c.write_all(bytes);
    }
}

fn header(kind: u8, len: u32) -> Vec<u8> {
    let mut h = vec![b'L', b'R', 1, kind];
    h.extend_from_slice(&len.to_be_bytes());
    h
}

fn hello(spec: TestSpec) -> Vec<u8> {
    wire::to_bytes(&Message::Hello(Hello {
        protocol: PROTOCOL_VERSION,
        software: "malformed".into(),
        spec,
        server_engine: None,
        heartbeat_ms: None,
        unix_uid: None,
        beside: None,
    }))
}

#[test]
fn issue_10_malformed_input_barrage_while_a_real_test_runs() {
    let (mut server, log) = logged_server(&["--max-concurrent", "4", "--handshake-timeout", "2s"]);
    let port = server.port;
    let pid = server.child.id();
    std::thread::sleep(Duration::from_millis(200));
    let (threads0, fds0) = threads_and_fds(pid);
    let real = Command::new(bin())
        .args([
            "tcp",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-t",
            "4",
            "-P",
            "2",
        ])
        .args(["--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("real client");
    std::thread::sleep(Duration::from_millis(500));
    let mut noise = Noise(0x9e37_79b9_7f4a_7c15);

    send_bad_frames(port, &mut noise);
    probe_limits(port);
    udp_garbage(port, &mut noise);
    let loris = slow_loris(port);
    // 1,000 connections that never speak (the server holds at most
    // --max-connections of them, each until its handshake time).
    let silent: Vec<_> = (0..1000)
        .filter_map(|_| TcpStream::connect(("127.0.0.1", port)).ok())
        .collect();

    let out = real.wait_with_output().expect("real client");
    assert!(
        out.status.success(),
        "the real test failed: {}",
        stderr(&out)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json report");
    crate::helpers::assert_streams_balanced(&report);
    assert!(
        loris.join().unwrap_or(false),
        "the slow loris was not cut off"
    );
    drop(silent);
    assert!(server.alive());
    // Everything the barrage cost is given back.
    let back = eventually(Duration::from_secs(10), || {
        threads_and_fds(pid) == (threads0, fds0)
    });
    assert!(
        back,
        "threads/fds {:?}, baseline {:?}",
        threads_and_fds(pid),
        (threads0, fds0)
    );
    let ok = run_client(
        &[
            "udp",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-t",
            "0.3",
            "--pps",
            "1000",
        ],
        Duration::from_secs(30),
    );
    assert!(ok.status.success(), "{}", stderr(&ok));
    let log = log.lock().map(|l| l.clone()).unwrap_or_default();
    assert!(
        log.lines().count() < 200,
        "{} log lines for the barrage",
        log.lines().count()
    );
}

/// Truncated, oversized, wrong-magic, wrong-version and unknown frames, a
/// data connection of no test, and random bytes: each on its own connection.
fn send_bad_frames(port: u16, noise: &mut Noise) {
    // Truncated, oversized, wrong magic, wrong version, unknown kind.
    let mut truncated = hello(TestSpec::default());
    truncated.truncate(truncated.len() / 2);
    send_and_close(port, &truncated);
    send_and_close(port, &header(1, 1 << 20));
    send_and_close(port, &header(6, 16 << 20));
    send_and_close(port, b"XX\x01\x01\0\0\0\0");
    send_and_close(port, b"LR\x09\x01\0\0\0\0");
    send_and_close(port, b"LR\x01\xee\0\0\0\0");
    // A data connection with a token of no test.
    send_and_close(
        port,
        &wire::to_bytes(&Message::DataHello(DataHello {
            token: Token([0xaa; wire::TOKEN_LEN]),
            stream: 1,
            sender: Side::Client,
        })),
    );
    // Random bytes, and random bytes after a valid magic.
    for i in 0..100 {
        let mut b = noise.bytes(1 + i * 7);
        if i % 2 == 0 {
            b[0] = b'L';
        }
        send_and_close(port, &b);
    }
}

/// Hellos at and just past each limit: the first accepted, the second refused.
fn probe_limits(port: u16) {
    // Parameters at and past the limits.
    for (spec, ok) in [
        (
            TestSpec {
                streams: 128,
                limit: Limit::TimeMs(100),
                ..TestSpec::default()
            },
            true,
        ),
        (
            TestSpec {
                streams: 129,
                ..TestSpec::default()
            },
            false,
        ),
        (
            TestSpec {
                len: 16 << 20,
                ..TestSpec::default()
            },
            true,
        ),
        (
            TestSpec {
                len: (16 << 20) + 1,
                ..TestSpec::default()
            },
            false,
        ),
        (
            TestSpec {
                interval_ms: 9,
                ..TestSpec::default()
            },
            false,
        ),
        (
            TestSpec {
                limit: Limit::TimeMs(100 * 86_400_000),
                ..TestSpec::default()
            },
            false,
        ),
    ] {
        // The previous accepted probe's slot is freed when the server sees
        // its connection close, which a loaded machine may do later than
        // the next probe arrives: a busy refusal is retried, not judged.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let mut raw = Raw::connect(port);
            raw.sock.write_all(&hello(spec.clone())).expect("hello");
            match raw.recv(Duration::from_secs(5)) {
                Some(Message::Accept(_)) => assert!(ok, "accepted {spec:?}"),
                Some(Message::Refuse(r))
                    if r.code == wire::RefuseCode::Busy && Instant::now() < deadline =>
                {
                    drop(raw);
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
                Some(Message::Refuse(r)) => assert!(!ok, "refused {spec:?}: {}", r.message),
                other => panic!("{spec:?}: {other:?}"),
            }
            break;
        }
    }
}

/// Random datagrams at a UDP test's data port from two addresses, before
/// and instead of greetings.
fn udp_garbage(port: u16, noise: &mut Noise) {
    // UDP garbage at a test's data ports, before and instead of greetings.
    let mut raw = Raw::connect(port);
    raw.hello(TestSpec {
        protocol: Protocol::Udp,
        direction: Direction::Reverse,
        limit: Limit::TimeMs(1000),
        len: 200,
        udp: Some(UdpSpec {
            pace: Pace::MilliPps(100_000),
            ..UdpSpec::default()
        }),
        ..TestSpec::default()
    });
    let Some(Message::Accept(a)) = raw.recv(Duration::from_secs(5)) else {
        panic!("no UDP accept");
    };
    for from in ["127.0.0.1:0", "127.0.0.2:0"] {
        let s = UdpSocket::bind(from).expect("udp");
        for i in 0..200 {
            let _ = s.send_to(&noise.bytes(i % 90), ("127.0.0.1", a.udp_ports[0]));
        }
    }
    drop(raw);
}

/// A valid Hello sent one byte per 300 ms on its own thread; the handle
/// returns whether the server cut it off.
fn slow_loris(port: u16) -> std::thread::JoinHandle<bool> {
    // Slow loris: a valid Hello, one byte per 300 ms; the server must cut
    // it off at its handshake time (2 s), long before the Hello is whole.
    std::thread::spawn(move || {
        let bytes = hello(TestSpec::default());
        let Ok(mut c) = TcpStream::connect(("127.0.0.1", port)) else {
            return false;
        };
        let t = Instant::now();
        for b in bytes {
            if c.write_all(&[b]).is_err() {
                return true;
            }
            if t.elapsed() > Duration::from_secs(6) {
                return false;
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        false
    })
}
