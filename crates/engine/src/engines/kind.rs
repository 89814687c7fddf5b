//! The engine a side runs, as a value: parsed from `--engine` once and
//! named in reports.

use std::fmt;
use std::str::FromStr;

use super::batch::Batch;
use super::xdp::Xdp;
use crate::EngineError;

/// The engine a side runs: parsed from `--engine` once, carried as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum EngineKind {
    /// One `read`/`write`/`send`/`recv` per buffer or datagram: the engine
    /// that works everywhere, under LD_PRELOAD kernel-bypass libraries too.
    #[default]
    Syscall,
    /// io_uring: registered buffers, multishot receive into a provided
    /// buffer ring, zero-copy sends (`SEND_ZC`) of 10 KiB and more;
    /// `uring:sqpoll` adds a
    /// kernel submission-polling thread.
    Uring { sqpoll: bool },
    /// `MSG_ZEROCOPY` sends with completions read from the error queue;
    /// receives as `syscall`. `zerocopy:sendfile` (TCP streams only)
    /// instead sends with `sendfile(2)` from a memory file holding the
    /// stream's buffer and receives with `splice(2)` into `/dev/null`
    /// ([`sendfile`](super::sendfile)).
    ZeroCopy { sendfile: bool },
    /// `sendmmsg`/`recvmmsg` with UDP GSO/GRO, `writev` of large TCP
    /// writes, optionally `MSG_TRUNC` TCP receives; with its options.
    Batch(Batch),
    /// AF_XDP: UDP datagrams as frames through an AF_XDP socket on the
    /// peer's interface, past the kernel's UDP/IP stack; with its modes.
    /// Never picked by `auto` (it takes over a queue of an interface).
    Xdp(Xdp),
}

/// The name and the options that differ from the engine's defaults, as
/// flags (`batch --no-gso`): what reports name as a side's engine.
impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())?;
        let flags = match self {
            EngineKind::Batch(b) => b.flags().collect(),
            EngineKind::Xdp(x) => x.flags(),
            _ => Vec::new(),
        };
        for flag in flags {
            write!(f, " {flag}")?;
        }
        Ok(())
    }
}

impl FromStr for EngineKind {
    type Err = EngineError;

    fn from_str(s: &str) -> Result<Self, EngineError> {
        Self::ALL
            .iter()
            .copied()
            .find(|k| k.name() == s)
            .ok_or_else(|| EngineError::UnknownEngine {
                name: s.into(),
                known: Self::names(),
            })
    }
}
