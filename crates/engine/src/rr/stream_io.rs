//! Whole messages on a TCP connection: writes and exact-size reads that
//! wait by the connection's discipline and honour the stop flags.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;

use crate::stream::{is_timeout, map_err, POLL};
use crate::EngineError;

use super::wait::Waiter;

/// Whole-message reads and writes on one connection.
pub(super) struct StreamIo<'a> {
    pub(super) sock: &'a TcpStream,
    pub(super) waiter: Waiter<'a>,
}

impl<'a> StreamIo<'a> {
    pub(super) fn new(sock: &'a TcpStream, waiter: Waiter<'a>) -> Self {
        StreamIo { sock, waiter }
    }

    pub(super) fn write_all(&mut self, mut buf: &[u8]) -> Result<(), EngineError> {
        let mut w = self.sock;
        while !buf.is_empty() {
            match w.write(buf) {
                Ok(0) => return Err(EngineError::PeerReset("write returned 0".into())),
                Ok(n) => {
                    buf = &buf[n..];
                    self.waiter.progressed();
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) => {
                    self.waiter
                        .would_block(self.sock, libc::POLLOUT, POLL, None)?;
                }
                Err(e) => return Err(map_err("write", e)),
            }
        }
        Ok(())
    }

    /// Fills `buf`. `Ok(false)`: the peer closed before its first byte (a
    /// clean end between messages); a close inside a message is an error.
    pub(super) fn read_exact(&mut self, buf: &mut [u8]) -> Result<bool, EngineError> {
        let mut r = self.sock;
        let mut got = 0;
        while got < buf.len() {
            match r.read(&mut buf[got..]) {
                Ok(0) if got == 0 => return Ok(false),
                Ok(0) => {
                    return Err(EngineError::PeerReset(format!(
                        "connection closed {got} bytes into a {}-byte message",
                        buf.len()
                    )))
                }
                Ok(n) => {
                    got += n;
                    self.waiter.progressed();
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) => {
                    self.waiter
                        .would_block(self.sock, libc::POLLIN, POLL, None)?;
                }
                Err(e) => return Err(map_err("read", e)),
            }
        }
        Ok(true)
    }

    /// Reads to end of stream, which must come without further bytes.
    pub(super) fn expect_close(&mut self) -> Result<(), EngineError> {
        let mut b = [0u8; 1];
        if self.read_exact(&mut b)? {
            return Err(EngineError::Protocol(
                "peer sent bytes after the last message of the phase".into(),
            ));
        }
        Ok(())
    }
}
