//! Whole messages on a TCP connection: writes and exact-size reads through
//! the engine's TCP I/O, waiting by the connection's discipline and
//! honouring the stop flags.

use std::io::ErrorKind;

use crate::engines::{Engine, Interest, TcpEndpoint, TcpRx, TcpTx};
use crate::stream::{is_timeout, map_err, POLL};
use crate::EngineError;

use crate::wait::Waiter;

/// An engine's writer and reader for TCP, kept from one connection to the
/// next where they allow it.
pub(super) type TcpParts<E> = (<E as Engine>::TcpTx, <E as Engine>::TcpRx);

/// Whole-message reads and writes on one connection, the TCP endpoint
/// `sock`. `'s` is the endpoint's borrow, `'w` the waiter's (a crr flow's
/// waiter outlives each connection it spins on).
pub(super) struct StreamIo<'s, 'w, E: Engine, S: TcpEndpoint> {
    pub(super) sock: &'s S,
    tx: E::TcpTx,
    rx: E::TcpRx,
    pub(super) waiter: Waiter<'w>,
}

impl<'s, 'w, E: Engine, S: TcpEndpoint> StreamIo<'s, 'w, E, S> {
    pub(super) fn new(engine: E, sock: &'s S, waiter: Waiter<'w>) -> Result<Self, EngineError> {
        Ok(StreamIo {
            sock,
            tx: engine.tcp_tx(sock)?,
            rx: engine.tcp_rx(sock, false)?,
            waiter,
        })
    }

    /// Carries on with an engine's reader and writer from an earlier
    /// connection: they take the socket on every call, so a crr flow sets
    /// them up (an io_uring engine: two rings and their registered
    /// buffers) once, not once per connection.
    pub(super) fn with_parts(sock: &'s S, (tx, rx): TcpParts<E>, waiter: Waiter<'w>) -> Self {
        StreamIo {
            sock,
            tx,
            rx,
            waiter,
        }
    }

    /// The exchange is over: the writer takes what has arrived for it
    /// (zero-copy completions), without waiting.
    pub(super) fn collect(&mut self) -> Result<(), EngineError> {
        self.tx.collect(self.sock).map_err(|e| map_err("write", e))
    }

    /// The reader and writer, where they may carry on to the flow's next
    /// connection ([`Engine::TCP_IO_OUTLIVES_SOCKET`]), and the waiter.
    pub(super) fn into_parts(self) -> (Option<TcpParts<E>>, Waiter<'w>) {
        let parts = E::TCP_IO_OUTLIVES_SOCKET.then_some((self.tx, self.rx));
        (parts, self.waiter)
    }

    pub(super) fn write_all(&mut self, mut buf: &[u8]) -> Result<(), EngineError> {
        while !buf.is_empty() {
            match self.tx.write(self.sock, buf, self.waiter.call()) {
                Ok(0) => return Err(EngineError::PeerReset("write returned 0".into())),
                Ok(n) => {
                    buf = &buf[n..];
                    self.waiter.progressed();
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) => {
                    self.waiter
                        .would_block(self.sock, Interest::Send, POLL, None)?;
                }
                Err(e) => return Err(map_err("write", e)),
            }
        }
        Ok(())
    }

    /// Fills `buf`. `Ok(false)`: the peer closed before its first byte (a
    /// clean end between messages); a close inside a message is an error.
    pub(super) fn read_exact(&mut self, buf: &mut [u8]) -> Result<bool, EngineError> {
        let mut got = 0;
        while got < buf.len() {
            match self.rx.read(self.sock, &mut buf[got..], self.waiter.call()) {
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
                        .would_block(self.sock, Interest::Recv, POLL, None)?;
                }
                Err(e) => return Err(map_err("read", e)),
            }
        }
        Ok(true)
    }

    /// Reads to end of stream, which must come without further bytes, into
    /// the first byte of `scratch` (the message buffer: an engine that
    /// registered it reads there without registering another).
    pub(super) fn expect_close(&mut self, scratch: &mut [u8]) -> Result<(), EngineError> {
        let mut own = [0u8; 1];
        let b = match scratch.get_mut(..1) {
            Some(b) => b,
            None => &mut own,
        };
        if self.read_exact(b)? {
            return Err(EngineError::Protocol(
                "peer sent bytes after the last message of the phase".into(),
            ));
        }
        Ok(())
    }
}
