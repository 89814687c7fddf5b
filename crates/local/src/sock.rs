//! Socket transports: TCP over loopback and Unix domain stream sockets
//! (a message is `len` bytes of the byte stream, read until whole) and Unix
//! domain datagram sockets (a message is one datagram).
//!
//! Blocking calls by default. With busy polling (`rr --busy-poll`, as on
//! network rr) the socket is non-blocking: a receive that would block
//! spins on the call within the spin budget ([`crate::wait`]), then sleeps
//! in `poll(2)` until the socket is readable; a send that would block (a
//! full buffer) sleeps in `poll(2)` at once.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixDatagram;

use crate::wait::{Spin, Spinner, WaitStats};
use crate::{Channel, LocalError, Transport};

/// Receive calls between clock reads while spinning (each is a system
/// call, hundreds of ns; as the network engines' busy polling).
const SPIN_CHECK: u32 = 4;

/// Sleeps until `fd` has `events` (or a hang-up or error, which the next
/// call reports).
fn poll_one(fd: RawFd, events: libc::c_short) -> io::Result<()> {
    let mut p = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    // SAFETY: p is one live pollfd record.
    let n = unsafe { libc::poll(&mut p, 1, -1) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(())
}

/// Runs a receive call: as it is without busy polling (a blocking call);
/// with it, spinning while the call would block, then sleeping in
/// `poll(2)` until the socket is readable.
fn receive_call<T>(
    fd: RawFd,
    spin: Option<&mut Spinner>,
    mut call: impl FnMut() -> io::Result<T>,
) -> io::Result<T> {
    let Some(sp) = spin else {
        return call();
    };
    loop {
        match call() {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            r => return r,
        }
        let mut got = None;
        if sp.spin(SPIN_CHECK, || match call() {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => false,
            r => {
                got = Some(r);
                true
            }
        }) {
            if let Some(r) = got {
                return r;
            }
        }
        poll_one(fd, libc::POLLIN)?;
    }
}

/// Runs a send call, sleeping in `poll(2)` while it would block (only a
/// non-blocking socket's call does).
fn send_call<T>(fd: RawFd, mut call: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    loop {
        match call() {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => poll_one(fd, libc::POLLOUT)?,
            r => return r,
        }
    }
}

/// Makes `fd` non-blocking for busy polling (`spin`), and the spinner.
fn busy(fd: RawFd, spin: Option<Spin>) -> Result<Option<Spinner>, LocalError> {
    let Some(spin) = spin else {
        return Ok(None);
    };
    // SAFETY: fcntl on a descriptor the caller owns, plain integers.
    let r = unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        if fl < 0 {
            fl
        } else {
            libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK)
        }
    };
    if r < 0 {
        return Err(LocalError::io("O_NONBLOCK")(io::Error::last_os_error()));
    }
    Ok(Some(Spinner::new(spin)))
}

/// Reads exactly `buf.len()` bytes of the stream.
fn read_full<S: Read>(
    s: &mut S,
    fd: RawFd,
    mut spin: Option<&mut Spinner>,
    buf: &mut [u8],
) -> io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        match receive_call(fd, spin.as_deref_mut(), || s.read(&mut buf[got..])) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Writes all of `msg` to the stream.
fn write_full<S: Write>(s: &mut S, fd: RawFd, msg: &[u8]) -> io::Result<()> {
    let mut sent = 0;
    while sent < msg.len() {
        match send_call(fd, || s.write(&msg[sent..])) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => sent += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A byte-stream channel (TCP or Unix stream).
#[derive(Debug)]
pub struct StreamChan<S> {
    s: S,
    buf: Vec<u8>,
    /// Busy polling: the spinning state (the socket is non-blocking).
    spin: Option<Spinner>,
}

impl<S: Read + Write + AsRawFd + Send> StreamChan<S> {
    /// Blocking calls, or busy polling with `spin`.
    pub fn new(s: S, spin: Option<Spin>) -> Result<Self, LocalError> {
        let spin = busy(s.as_raw_fd(), spin)?;
        Ok(StreamChan {
            s,
            buf: Vec::new(),
            spin,
        })
    }
}

impl<S: Read + Write + AsRawFd + Send> Channel for StreamChan<S> {
    fn send(&mut self, msg: &[u8]) -> Result<(), LocalError> {
        let fd = self.s.as_raw_fd();
        write_full(&mut self.s, fd, msg).map_err(LocalError::io("send"))
    }

    fn recv(&mut self, len: usize) -> Result<(), LocalError> {
        if self.buf.len() < len {
            self.buf.resize(len, 0);
        }
        let fd = self.s.as_raw_fd();
        read_full(&mut self.s, fd, self.spin.as_mut(), &mut self.buf[..len])
            .map_err(LocalError::io("receive"))
    }

    fn last(&self, len: usize) -> &[u8] {
        &self.buf[..len]
    }

    fn send_word(&mut self, w: u64) -> Result<(), LocalError> {
        let fd = self.s.as_raw_fd();
        write_full(&mut self.s, fd, &w.to_le_bytes())
            .map_err(LocalError::io("send acknowledgement"))
    }

    fn recv_word(&mut self) -> Result<u64, LocalError> {
        let mut b = [0u8; 8];
        let fd = self.s.as_raw_fd();
        read_full(&mut self.s, fd, self.spin.as_mut(), &mut b)
            .map_err(LocalError::io("receive acknowledgement"))?;
        Ok(u64::from_le_bytes(b))
    }

    fn wait_stats(&self) -> Option<WaitStats> {
        self.spin.as_ref().map(Spinner::stats)
    }
}

/// A Unix datagram channel: one datagram per message, one per word.
#[derive(Debug)]
pub struct DgramChan {
    s: UnixDatagram,
    buf: Vec<u8>,
    spin: Option<Spinner>,
}

impl DgramChan {
    /// Blocking calls, or busy polling with `spin`.
    pub fn new(s: UnixDatagram, spin: Option<Spin>) -> Result<Self, LocalError> {
        let spin = busy(s.as_raw_fd(), spin)?;
        Ok(DgramChan {
            s,
            buf: Vec::new(),
            spin,
        })
    }

    fn recv_exact(&mut self, len: usize, what: &'static str) -> Result<(), LocalError> {
        // One byte more than expected: a longer datagram shows as too long
        // instead of being cut silently.
        if self.buf.len() < len + 1 {
            self.buf.resize(len + 1, 0);
        }
        let (s, buf) = (&self.s, &mut self.buf);
        let n = receive_call(s.as_raw_fd(), self.spin.as_mut(), || s.recv(buf))
            .map_err(LocalError::io(what))?;
        if n == 0 && len != 0 {
            return Err(LocalError::PeerGone(what));
        }
        if n != len {
            return Err(LocalError::Protocol(format!(
                "{what}: a {n}-byte datagram where {len} bytes were expected"
            )));
        }
        Ok(())
    }
}

impl Channel for DgramChan {
    fn send(&mut self, msg: &[u8]) -> Result<(), LocalError> {
        match send_call(self.s.as_raw_fd(), || self.s.send(msg)) {
            Ok(_) => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EMSGSIZE) => Err(LocalError::TooLong {
                transport: Transport::UnixDgram,
                len: msg.len(),
                limit: 0,
                why: "the kernel refused the datagram (EMSGSIZE)",
            }),
            Err(e) => Err(LocalError::io("send")(e)),
        }
    }

    fn recv(&mut self, len: usize) -> Result<(), LocalError> {
        self.recv_exact(len, "receive")
    }

    fn last(&self, len: usize) -> &[u8] {
        &self.buf[..len]
    }

    fn send_word(&mut self, w: u64) -> Result<(), LocalError> {
        send_call(self.s.as_raw_fd(), || self.s.send(&w.to_le_bytes()))
            .map(drop)
            .map_err(LocalError::io("send acknowledgement"))
    }

    fn recv_word(&mut self) -> Result<u64, LocalError> {
        self.recv_exact(8, "receive acknowledgement")?;
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.buf[..8]);
        Ok(u64::from_le_bytes(b))
    }

    fn wait_stats(&self) -> Option<WaitStats> {
        self.spin.as_ref().map(Spinner::stats)
    }
}

/// The largest datagram a fresh Unix datagram pair carries on this
/// kernel, measured: sends of growing size until the kernel refuses
/// (`EMSGSIZE`); a datagram's size is bounded by the send buffer.
pub fn dgram_limit(sizes: &[usize]) -> Result<usize, LocalError> {
    let (a, b) = UnixDatagram::pair().map_err(LocalError::io("socketpair"))?;
    a.set_nonblocking(true)
        .map_err(LocalError::io("socketpair"))?;
    let mut sorted = sizes.to_vec();
    sorted.sort_unstable();
    let mut ok = 0;
    let mut rx = vec![0u8; sorted.last().copied().unwrap_or(0) + 1];
    for s in sorted {
        let msg = vec![0u8; s];
        match a.send(&msg) {
            Ok(_) => {
                b.recv(&mut rx).map_err(LocalError::io("socketpair"))?;
                ok = s;
            }
            Err(_) => break,
        }
    }
    Ok(ok)
}
