//! The names of the local transports (`--transport`): parsing and printing.

use std::fmt;
use std::str::FromStr;

/// A local path between two processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// TCP over loopback.
    Tcp,
    /// Unix domain stream socket pair.
    Unix,
    /// Unix domain datagram socket pair: one datagram per message.
    UnixDgram,
    /// Shared memory, the message in ring slots.
    ShmDirect,
    /// Shared memory, the message in a shared region, a descriptor in the ring.
    ShmBulk,
}

impl Transport {
    pub const ALL: &'static [Transport] = &[
        Transport::Tcp,
        Transport::Unix,
        Transport::UnixDgram,
        Transport::ShmDirect,
        Transport::ShmBulk,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Transport::Tcp => "tcp",
            Transport::Unix => "unix",
            Transport::UnixDgram => "unix-dgram",
            Transport::ShmDirect => "shm-direct",
            Transport::ShmBulk => "shm-bulk",
        }
    }

    /// Parses a `--transport` list item; `shm` means both shared-memory
    /// modes.
    pub fn parse_list(s: &str) -> Result<Vec<Transport>, String> {
        let mut out = Vec::new();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let add = match item {
                "shm" => vec![Transport::ShmDirect, Transport::ShmBulk],
                other => vec![Transport::from_str(other)?],
            };
            for t in add {
                if !out.contains(&t) {
                    out.push(t);
                }
            }
        }
        if out.is_empty() {
            return Err("empty transport list".into());
        }
        Ok(out)
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Transport {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Transport::ALL
            .iter()
            .copied()
            .find(|t| t.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown transport {s:?} (tcp, unix, unix-dgram, shm, shm-direct, shm-bulk)"
                )
            })
    }
}
