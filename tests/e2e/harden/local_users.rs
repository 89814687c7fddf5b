//! Another local user (issue 28): a `--transport unix` test's data socket
//! and the iperf3 UDP listener are out of its reach. The other user is
//! this test binary run again as `nobody` (`setpriv`), on the ignored
//! [`as_another_user`] entry; that needs root, and without it each test
//! skips with its reason (listed after the test summary).

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::os::linux::net::SocketAddrExt;
use std::process::Command;
use std::time::{Duration, Instant};

use linerate_proto::spec::{Direction, TestSpec};
use linerate_proto::wire::{self, DataHello, Hello, Message, Side};
use linerate_proto::PROTOCOL_VERSION;

use super::{logged_server, Raw};
use crate::helpers::{assert_ok, run_client, skip};

/// What the other user's process is asked to do (see [`as_another_user`]).
const TASK_ENV: &str = "LINERATE_E2E_OTHER_USER_TASK";

/// Why the other-user tests cannot run here, if they cannot.
fn cannot_switch_user() -> Option<&'static str> {
    // SAFETY: geteuid has no failure mode.
    if unsafe { libc::geteuid() } != 0 {
        return Some("needs root to run a process as nobody");
    }
    let setpriv = Command::new("setpriv").arg("--version").output();
    if !setpriv.is_ok_and(|o| o.status.success()) {
        return Some("needs setpriv (util-linux)");
    }
    None
}

/// Runs `task` as `nobody` in this test binary; its one-line answer.
fn run_as_nobody(task: &str) -> String {
    let exe = std::env::current_exe().expect("test binary");
    let out = Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
        .arg(exe)
        .args([
            "--exact",
            "harden::local_users::as_another_user",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(TASK_ENV, task)
        .output()
        .expect("run as nobody");
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .find_map(|l| l.split_once("other user: ").map(|(_, a)| a))
        .unwrap_or_else(|| {
            panic!(
                "no answer from the other user: {stdout}{}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
        .to_owned()
}

/// The other user's side: `unix NAME HEXFRAME` connects to the abstract
/// socket NAME, sends the frame and counts what it reads in 3 s; `udp
/// ADDR` tries to bind ADDR with SO_REUSEADDR, then with SO_REUSEPORT.
#[test]
#[ignore = "the other user's process in the issue_28 local-user tests, not a test of its own"]
fn as_another_user() {
    let Ok(task) = std::env::var(TASK_ENV) else {
        return;
    };
    let words: Vec<&str> = task.split_whitespace().collect();
    let answer = match words.as_slice() {
        ["unix", name, frame] => unix_probe(name, &unhex(frame)),
        ["udp", addr] => udp_probe(addr.parse().expect("address")),
        _ => format!("unknown task {task:?}"),
    };
    println!("other user: {answer}");
}

fn unix_probe(name: &str, frame: &[u8]) -> String {
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name).expect("name");
    let mut s = match std::os::unix::net::UnixStream::connect_addr(&addr) {
        Ok(s) => s,
        Err(e) => return format!("connect failed: {e}"),
    };
    let _ = s.write_all(frame);
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let (mut got, deadline) = (0usize, Instant::now() + Duration::from_secs(3));
    let mut buf = vec![0u8; 1 << 16];
    while Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => break,
        }
    }
    format!("received {got} bytes")
}

fn udp_probe(addr: SocketAddr) -> String {
    use socket2::{Domain, Protocol, Socket, Type};
    let mut answers = Vec::new();
    for (what, reuse_port) in [("SO_REUSEADDR", false), ("SO_REUSEPORT", true)] {
        let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))
            .expect("socket");
        let set = if reuse_port {
            s.set_reuse_port(true)
        } else {
            s.set_reuse_address(true)
        };
        set.expect("setsockopt");
        let bound = s.bind(&addr.into());
        answers.push(format!(
            "{what} {}",
            if bound.is_ok() { "bound" } else { "refused" }
        ));
    }
    answers.join(", ")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// A reverse `--transport unix` test whose client stalls after the Accept:
/// `nobody`, given the listener's name and even the token, connects and
/// greets as the stream; it gets no byte of the stream, the server logs
/// why, and real unix tests still run. The name is not the token's.
#[test]
fn issue_28_another_user_gets_nothing_from_a_unix_test() {
    if let Some(why) = cannot_switch_user() {
        return skip(why);
    }
    let (server, log) = logged_server(&[]);
    let mut raw = Raw::connect(server.port);
    let mut spec = TestSpec {
        direction: Direction::Reverse,
        ..TestSpec::default()
    };
    spec.tcp.unix = true;
    raw.send(&Message::Hello(Hello {
        protocol: PROTOCOL_VERSION,
        software: "raw test peer".into(),
        spec,
        server_engine: None,
        heartbeat_ms: None,
        unix_uid: Some(linerate_engine::socket::own_uid()),
        beside: None,
    }));
    let accept = match raw.recv(Duration::from_secs(10)) {
        Some(Message::Accept(a)) => a,
        other => panic!("expected an Accept, got {other:?}"),
    };
    let name = accept.unix_name.expect("the Accept names the Unix socket");
    assert!(wire::is_unix_data_name(&name), "{name}");
    assert!(
        !name.contains(&hex(&accept.token.0)),
        "{name} shows the token"
    );
    let mut frame = Vec::new();
    DataHello {
        token: accept.token,
        stream: 1,
        sender: Side::Server,
    }
    .encode(&mut frame);
    let answer = run_as_nobody(&format!("unix {name} {}", hex(&frame)));
    assert_eq!(answer, "received 0 bytes");
    // The server logs the refusal as it closes the connection: on a busy
    // host that line can come after the other user has read the close.
    let logged = || log.lock().map(|l| l.clone()).unwrap_or_default();
    let said = crate::helpers::eventually(Duration::from_secs(5), || {
        logged().contains("not the client's")
    });
    assert!(said, "{}", logged());
    drop(raw);
    let port = server.port_str();
    let args = [
        "tcp",
        "127.0.0.1",
        "-p",
        &port,
        "--transport",
        "unix",
        "-n",
        "8M",
    ];
    assert_ok(&run_client(&args, Duration::from_secs(30)), &args);
}

/// The iperf3 server's UDP listener: no other user binds its address (by
/// SO_REUSEADDR, which would take the next stream's connect datagram, nor
/// by SO_REUSEPORT, which the kernel keeps to the listener's uid).
#[test]
fn issue_28_another_user_cannot_bind_the_iperf3_udp_listener() {
    if let Some(why) = cannot_switch_user() {
        return skip(why);
    }
    let listener = linerate_iperf3::streams::udp_listener("127.0.0.1:0".parse().expect("addr"))
        .expect("listener");
    let addr = listener.local_addr().expect("address");
    let answer = run_as_nobody(&format!("udp {addr}"));
    assert_eq!(answer, "SO_REUSEADDR refused, SO_REUSEPORT refused");
}
