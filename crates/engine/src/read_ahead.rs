//! An accepted connection handed on with the bytes already read from it.
//!
//! While a crr test runs, the server's crr pool reads each new
//! connection's greeting and request in one `recv(2)` (issue 26: before,
//! it peeked first with `MSG_PEEK`, then read the same bytes again, one
//! system call more per transaction). A connection that turns out not to
//! be a crr transaction — a control connection, another test's data
//! connection, an iperf3 peer — goes to the server's usual handling as a
//! [`ReadAhead`]: the socket and those bytes, which come before anything
//! still queued in it. Whoever reads the connection next takes them first
//! ([`ReadAhead::take`]), so none is lost.

use std::net::TcpStream;

/// A connection and the bytes already read from it, not yet consumed.
#[derive(Debug)]
pub struct ReadAhead {
    sock: TcpStream,
    head: Vec<u8>,
    /// How much of `head` has been taken.
    taken: usize,
}

impl ReadAhead {
    /// `sock`, from which `head` was read (its first bytes).
    pub fn new(sock: TcpStream, head: Vec<u8>) -> ReadAhead {
        ReadAhead {
            sock,
            head,
            taken: 0,
        }
    }

    /// `sock`, nothing read from it yet.
    pub fn unread(sock: TcpStream) -> ReadAhead {
        ReadAhead::new(sock, Vec::new())
    }

    /// The connection (its bytes past [`Self::head`]).
    pub fn sock(&self) -> &TcpStream {
        &self.sock
    }

    /// The bytes read ahead and not taken yet: the connection's next ones.
    pub fn head(&self) -> &[u8] {
        &self.head[self.taken..]
    }

    /// Moves the next read-ahead bytes into `buf`, as many as fit; how
    /// many (0 once all are taken: read the socket then).
    pub fn take(&mut self, buf: &mut [u8]) -> usize {
        let head = &self.head[self.taken..];
        let n = head.len().min(buf.len());
        buf[..n].copy_from_slice(&head[..n]);
        self.taken += n;
        n
    }

    /// The socket and the read-ahead bytes not taken yet.
    pub fn into_parts(mut self) -> (TcpStream, Vec<u8>) {
        self.head.drain(..self.taken);
        (self.sock, self.head)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let c = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (s, _) = l.accept().expect("accept");
        (c, s)
    }

    #[test]
    fn issue_26_read_ahead_bytes_come_before_the_sockets() {
        let (mut c, s) = pair();
        c.write_all(b"-socket").expect("write");
        let mut r = ReadAhead::new(s, b"head".to_vec());
        let mut two = [0u8; 2];
        assert_eq!(r.take(&mut two), 2);
        assert_eq!(&two, b"he");
        assert_eq!(r.head(), b"ad");
        let (mut sock, rest) = r.into_parts();
        assert_eq!(rest, b"ad");
        let mut tail = [0u8; 7];
        sock.read_exact(&mut tail).expect("read");
        assert_eq!(&tail, b"-socket");

        let (_c, s) = pair();
        let mut r = ReadAhead::unread(s);
        assert_eq!(r.take(&mut two), 0);
        assert!(r.into_parts().1.is_empty());
    }
}
