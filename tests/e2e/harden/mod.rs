//! Server hardening (issue 10): the faults an attacker's review found, each
//! reproduced against the real binary — reflection, memory before the
//! handshake, held test slots, hostile servers, injected text — plus the
//! raw-protocol peer those tests use.

mod auth;
mod faults;
mod fleet;
mod heartbeat;
mod iperf3_udp;
mod local_users;
mod malformed;
mod rate;
mod soak;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use linerate_proto::spec::TestSpec;
use linerate_proto::wire::{self, Hello, Message};
use linerate_proto::PROTOCOL_VERSION;

use crate::helpers::{bin, proc_status_kib, Server};

/// A hand-driven control connection: sends and reads frames exactly as
/// the test says, which a real client never would.
pub struct Raw {
    pub sock: TcpStream,
    inbox: Vec<u8>,
}

impl Raw {
    pub fn connect(port: u16) -> Raw {
        Raw::from_stream(TcpStream::connect(("127.0.0.1", port)).expect("connect"))
    }

    pub fn from_stream(sock: TcpStream) -> Raw {
        Raw {
            sock,
            inbox: Vec::new(),
        }
    }

    pub fn send(&mut self, m: &Message) {
        self.sock.write_all(&wire::to_bytes(m)).expect("send");
    }

    pub fn hello(&mut self, spec: TestSpec) {
        self.send(&Message::Hello(Hello {
            protocol: PROTOCOL_VERSION,
            software: "raw test peer".into(),
            spec,
            server_engine: None,
            heartbeat_ms: None,
            unix_uid: None,
            beside: None,
        }));
    }

    /// The next frame within `limit`, or `None` (timeout or closed).
    pub fn recv(&mut self, limit: Duration) -> Option<Message> {
        let deadline = Instant::now() + limit;
        loop {
            if let Ok(Some((m, used))) = wire::decode(&self.inbox) {
                self.inbox.drain(..used);
                return Some(m);
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            self.sock
                .set_read_timeout(Some(left.max(Duration::from_millis(1))))
                .ok()?;
            let mut buf = [0u8; 65536];
            match self.sock.read(&mut buf) {
                Ok(0) => return None,
                Ok(n) => self.inbox.extend_from_slice(&buf[..n]),
                Err(_) => return None,
            }
        }
    }
}

/// A server whose stderr is kept for the test to read.
pub fn logged_server(extra: &[&str]) -> (Server, Arc<Mutex<String>>) {
    let mut child = Command::new(bin())
        .args(["server", "--port", "0", "--bind", "127.0.0.1"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn server");
    let log = Arc::new(Mutex::new(String::new()));
    if let Some(err) = child.stderr.take() {
        let log = Arc::clone(&log);
        std::thread::spawn(move || {
            let mut r = BufReader::new(err);
            let mut line = Vec::new();
            while r.read_until(b'\n', &mut line).unwrap_or(0) > 0 {
                if let Ok(mut l) = log.lock() {
                    l.push_str(&String::from_utf8_lossy(&line));
                }
                line.clear();
            }
        });
    }
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    let mut reader = BufReader::new(stdout);
    reader.read_line(&mut line).expect("address line");
    // Keep draining stdout (reports) so the server never blocks on it.
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut reader, &mut std::io::sink());
    });
    let port = line
        .split_whitespace()
        .find_map(|w| w.rsplit_once(':').and_then(|(_, p)| p.parse().ok()))
        .unwrap_or_else(|| panic!("no port in {line:?}"));
    (
        Server {
            child,
            port,
            log: Arc::clone(&log),
        },
        log,
    )
}

/// Threads and open file descriptors of process `pid`.
pub fn threads_and_fds(pid: u32) -> (usize, usize) {
    let count = |dir: String| std::fs::read_dir(dir).map_or(0, |d| d.count());
    (
        count(format!("/proc/{pid}/task")),
        count(format!("/proc/{pid}/fd")),
    )
}

/// Resident memory of `pid` in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    proc_status_kib(pid, "VmRSS")
}

/// A TCP connection to `port` on 127.0.0.1 from `local` (another loopback
/// address: a second host without a namespace).
pub fn connect_from(local: &str, port: u16) -> TcpStream {
    let local: SocketAddr = format!("{local}:0").parse().expect("addr");
    let s =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    s.bind(&local.into()).expect("bind");
    let to: SocketAddr = ([127, 0, 0, 1], port).into();
    s.connect(&to.into()).expect("connect");
    s.into()
}
