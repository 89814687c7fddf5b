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

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use linerate_proto::spec::TestSpec;
use linerate_proto::wire::{self, Hello, Message};
use linerate_proto::PROTOCOL_VERSION;

pub use crate::helpers::logged_server;
use crate::helpers::proc_status_kib;

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
