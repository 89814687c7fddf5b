//! Socket transports: TCP over loopback and Unix domain stream sockets
//! (a message is `len` bytes of the byte stream, read until whole) and Unix
//! domain datagram sockets (a message is one datagram).

use std::io::{Read, Write};
use std::os::unix::net::UnixDatagram;

use crate::{Channel, LocalError, Transport};

/// A byte-stream channel (TCP or Unix stream).
#[derive(Debug)]
pub struct StreamChan<S> {
    s: S,
    buf: Vec<u8>,
}

impl<S: Read + Write + Send> StreamChan<S> {
    pub fn new(s: S) -> Self {
        StreamChan { s, buf: Vec::new() }
    }
}

impl<S: Read + Write + Send> Channel for StreamChan<S> {
    fn send(&mut self, msg: &[u8]) -> Result<(), LocalError> {
        self.s.write_all(msg).map_err(LocalError::io("send"))
    }

    fn recv(&mut self, len: usize) -> Result<(), LocalError> {
        if self.buf.len() < len {
            self.buf.resize(len, 0);
        }
        self.s
            .read_exact(&mut self.buf[..len])
            .map_err(LocalError::io("receive"))
    }

    fn last(&self, len: usize) -> &[u8] {
        &self.buf[..len]
    }

    fn send_word(&mut self, w: u64) -> Result<(), LocalError> {
        self.s
            .write_all(&w.to_le_bytes())
            .map_err(LocalError::io("send acknowledgement"))
    }

    fn recv_word(&mut self) -> Result<u64, LocalError> {
        let mut b = [0u8; 8];
        self.s
            .read_exact(&mut b)
            .map_err(LocalError::io("receive acknowledgement"))?;
        Ok(u64::from_le_bytes(b))
    }
}

/// A Unix datagram channel: one datagram per message, one per word.
#[derive(Debug)]
pub struct DgramChan {
    s: UnixDatagram,
    buf: Vec<u8>,
}

impl DgramChan {
    pub fn new(s: UnixDatagram) -> Self {
        DgramChan { s, buf: Vec::new() }
    }

    fn recv_exact(&mut self, len: usize, what: &'static str) -> Result<(), LocalError> {
        // One byte more than expected: a longer datagram shows as too long
        // instead of being cut silently.
        if self.buf.len() < len + 1 {
            self.buf.resize(len + 1, 0);
        }
        let n = self.s.recv(&mut self.buf).map_err(LocalError::io(what))?;
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
        match self.s.send(msg) {
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
        self.s
            .send(&w.to_le_bytes())
            .map(drop)
            .map_err(LocalError::io("send acknowledgement"))
    }

    fn recv_word(&mut self) -> Result<u64, LocalError> {
        self.recv_exact(8, "receive acknowledgement")?;
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.buf[..8]);
        Ok(u64::from_le_bytes(b))
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
