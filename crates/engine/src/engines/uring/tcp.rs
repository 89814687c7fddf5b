//! TCP through io_uring: zero-copy sends (`SEND_ZC`) and fixed-buffer reads
//! from the stream's own buffer, registered once.
//!
//! The stream loops hand the engine the same buffer (or a prefix of it) on
//! every call and never write to it while the stream runs, so the engine
//! registers that buffer itself instead of copying into a staging area;
//! before the loop's buffer can change hands ([`TcpTx::finish`], drop), every
//! zero-copy notification has arrived.

use std::io;

use io_uring::{cqueue, opcode, types};

use super::ring::{
    caps, cqe_err, engine_use, register, zc_worth, CancelAfter, Ring, Uring, ZcCount, WAIT,
    ZC_REPORT_USAGE,
};
use crate::engines::{TcpEndpoint, TcpRx, TcpTx, Wait};
use crate::EngineError;

const TAG_IO: u64 = 1;

/// The registered region: start address and length (fixed buffer 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Region {
    at: usize,
    len: usize,
}

impl Region {
    fn holds(self, buf: &[u8]) -> bool {
        let p = buf.as_ptr() as usize;
        p >= self.at && p + buf.len() <= self.at + self.len
    }
}

/// State both directions share: the ring and the registered buffer.
#[derive(Debug)]
struct Fixed {
    ring: Ring,
    region: Option<Region>,
    /// Registration failed once (e.g. the memlock limit): not retried.
    unregistrable: bool,
    notes: Vec<String>,
}

impl Fixed {
    fn new(engine: Uring) -> Result<Self, EngineError> {
        Ok(Fixed {
            ring: Ring::new(engine)?,
            region: None,
            unregistrable: false,
            notes: Vec::new(),
        })
    }

    /// Fixed buffer 0 covering `buf`, registering it when it is new.
    /// `None`: unregistered I/O. The caller has no request in flight that
    /// uses the old region.
    fn index_for(&mut self, buf: &[u8]) -> Option<u16> {
        if self.region.is_some_and(|r| r.holds(buf)) {
            return Some(0);
        }
        if self.unregistrable {
            return None;
        }
        if self.region.take().is_some() {
            let _ = self.ring.ring.submitter().unregister_buffers();
        }
        match register(&self.ring.ring, buf) {
            Ok(()) => {
                self.region = Some(Region {
                    at: buf.as_ptr() as usize,
                    len: buf.len(),
                });
                Some(0)
            }
            Err(e) => {
                self.unregistrable = true;
                self.notes.push(format!("buffers not registered: {e}"));
                None
            }
        }
    }
}

/// A TCP stream's sending ring.
#[derive(Debug)]
pub struct UringTcpTx {
    fixed: Fixed,
    zc: Option<ZcCount>,
    /// Zero-copy sends whose notification has not arrived yet.
    pending: u64,
}

impl UringTcpTx {
    pub(super) fn new(engine: Uring) -> Result<Self, EngineError> {
        let caps = caps()?;
        let mut fixed = Fixed::new(engine)?;
        let zc = if caps.send_zc {
            Some(ZcCount::default())
        } else {
            fixed
                .notes
                .push("this kernel has no IORING_OP_SEND_ZC (Linux 6.0): sends copy".into());
            None
        };
        Ok(UringTcpTx {
            fixed,
            zc,
            pending: 0,
        })
    }

    fn complete(&mut self, c: &cqueue::Entry, res: &mut Option<i32>) {
        if c.user_data() != TAG_IO {
            return;
        }
        if cqueue::notif(c.flags()) {
            self.pending = self.pending.saturating_sub(1);
            if let Some(z) = &mut self.zc {
                z.notified(c.result());
            }
            return;
        }
        if cqueue::more(c.flags()) {
            self.pending += 1;
            if let Some(z) = &mut self.zc {
                z.sends += 1;
            }
        }
        *res = Some(c.result());
    }

    /// Waits (bounded) until every notification has arrived.
    fn settle(&mut self, rounds: u32) -> io::Result<()> {
        let mut none = None;
        for _ in 0..rounds {
            if self.pending == 0 {
                return Ok(());
            }
            self.fixed.ring.submit_wait(1, Some(WAIT))?;
            while let Some(c) = self.fixed.ring.next() {
                self.complete(&c, &mut none);
            }
        }
        if self.pending == 0 {
            Ok(())
        } else {
            Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "{} zero-copy send notifications did not arrive",
                    self.pending
                ),
            ))
        }
    }
}

impl TcpTx for UringTcpTx {
    fn lent(&self) -> bool {
        self.pending > 0
    }

    fn write<S: TcpEndpoint>(&mut self, sock: &S, buf: &[u8], wait: Wait) -> io::Result<usize> {
        let zc = self.zc.is_some() && zc_worth(buf.len());
        // Only a zero-copy send reads the registered buffer.
        let index = if zc {
            if !self.fixed.region.is_some_and(|r| r.holds(buf)) && self.pending > 0 {
                // A new buffer region: the old one's sends must be done first.
                self.settle(u32::MAX)?;
            }
            self.fixed.index_for(buf)
        } else {
            None
        };
        let flags = libc::MSG_NOSIGNAL
            | match wait {
                Wait::Block => 0,
                Wait::DontWait => libc::MSG_DONTWAIT,
            };
        let fd = types::Fd(sock.as_raw_fd());
        let len = buf.len().min(u32::MAX as usize) as u32;
        let e = if zc {
            opcode::SendZc::new(fd, buf.as_ptr(), len)
                .buf_index(index)
                .flags(flags)
                .zc_flags(ZC_REPORT_USAGE)
                .build()
        } else {
            opcode::Send::new(fd, buf.as_ptr(), len)
                .flags(flags)
                .build()
        };
        self.fixed.ring.push(&e.user_data(TAG_IO))?;
        let mut res = None;
        let mut cancel = CancelAfter::default();
        loop {
            self.fixed.ring.submit_wait(1, Some(WAIT))?;
            while let Some(c) = self.fixed.ring.next() {
                self.complete(&c, &mut res);
            }
            if let Some(r) = res {
                if let (Some(z), false, true) = (&mut self.zc, zc, r >= 0) {
                    z.small += 1;
                }
                return match r {
                    r if r >= 0 => Ok(r as usize),
                    r if r == -libc::ECANCELED || r == -libc::EAGAIN => {
                        Err(io::ErrorKind::WouldBlock.into())
                    }
                    r => Err(cqe_err(r)),
                };
            }
            if cancel.due() {
                // Still blocked after a full wait: cancel, and take the
                // final answer (bytes sent before the cancel still count).
                self.fixed.ring.cancel(TAG_IO)?;
            }
        }
    }

    fn finish<S: TcpEndpoint>(&mut self, _sock: &S) -> io::Result<()> {
        // Notifications come when the peer has acknowledged the data; a
        // live peer does so within a few round trips.
        self.settle(100)
    }
}

impl Drop for UringTcpTx {
    fn drop(&mut self) {
        let _ = self.settle(10);
        if self.pending > 0 {
            self.fixed.notes.push(format!(
                "{} zero-copy notifications had not arrived when the stream ended",
                self.pending
            ));
        }
        crate::engines::record_use(engine_use(
            self.fixed.ring.sqpoll,
            self.fixed.region.is_some(),
            false,
            self.zc,
            std::mem::take(&mut self.fixed.notes),
        ));
    }
}

/// A TCP stream's receiving ring.
#[derive(Debug)]
pub struct UringTcpRx {
    fixed: Fixed,
    /// `--skip-rx-copy`: `RECV` with `MSG_TRUNC`, which consumes the bytes
    /// without copying them (no fixed buffer is read into).
    skip_copy: bool,
}

impl UringTcpRx {
    pub(super) fn new(engine: Uring, skip_copy: bool) -> Result<Self, EngineError> {
        Ok(UringTcpRx {
            fixed: Fixed::new(engine)?,
            skip_copy,
        })
    }
}

impl TcpRx for UringTcpRx {
    fn read<S: TcpEndpoint>(&mut self, sock: &S, buf: &mut [u8], wait: Wait) -> io::Result<usize> {
        let fd = types::Fd(sock.as_raw_fd());
        let len = buf.len().min(u32::MAX as usize) as u32;
        let dontwait = match wait {
            Wait::Block => 0,
            Wait::DontWait => libc::MSG_DONTWAIT,
        };
        let e = match (wait, self.skip_copy) {
            (_, true) => opcode::Recv::new(fd, buf.as_mut_ptr(), len)
                .flags(libc::MSG_TRUNC | dontwait)
                .build(),
            (Wait::Block, false) => match self.fixed.index_for(buf) {
                // A fixed-buffer read; offset -1: a socket has no file position.
                Some(index) => opcode::ReadFixed::new(fd, buf.as_mut_ptr(), len, index)
                    .offset(u64::MAX)
                    .build(),
                None => opcode::Recv::new(fd, buf.as_mut_ptr(), len).build(),
            },
            (Wait::DontWait, false) => opcode::Recv::new(fd, buf.as_mut_ptr(), len)
                .flags(dontwait)
                .build(),
        };
        self.fixed.ring.push(&e.user_data(TAG_IO))?;
        let mut cancel = CancelAfter::default();
        loop {
            self.fixed.ring.submit_wait(1, Some(WAIT))?;
            while let Some(c) = self.fixed.ring.next() {
                if c.user_data() != TAG_IO {
                    continue;
                }
                return match c.result() {
                    r if r >= 0 => Ok(r as usize),
                    r if r == -libc::ECANCELED || r == -libc::EAGAIN => {
                        Err(io::ErrorKind::WouldBlock.into())
                    }
                    r => Err(cqe_err(r)),
                };
            }
            if cancel.due() {
                self.fixed.ring.cancel(TAG_IO)?;
            }
        }
    }
}

impl Drop for UringTcpRx {
    fn drop(&mut self) {
        crate::engines::record_use(engine_use(
            self.fixed.ring.sqpoll,
            self.fixed.region.is_some(),
            false,
            None,
            std::mem::take(&mut self.fixed.notes),
        ));
    }
}
