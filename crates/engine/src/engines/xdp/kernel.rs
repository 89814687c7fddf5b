//! A flow's kernel socket on `xdp`: the socket the control plane attached
//! holds the flow's port, and what passed the XDP program before the flow
//! was redirected lands there. Those datagrams are older than any on the
//! RX ring, so they are read first, until the socket is found empty; and
//! one can still land after that (it passed the program just before the
//! redirect and was microseconds behind in the stack: an rr phase's first
//! request), so a wait that sees the socket readable has it read again
//! (issue 25: the request was left unanswered).

use std::cell::Cell;
use std::io;
use std::net::UdpSocket;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

/// The kernel socket and what was received from it (module docs).
#[derive(Debug)]
pub(super) struct KernelSocket {
    pub(super) sock: UdpSocket,
    /// Found empty since it was last seen readable.
    drained: Cell<bool>,
    /// Datagrams received from it (the report's `via_kernel`).
    received: Cell<u64>,
}

impl KernelSocket {
    pub(super) fn new(sock: UdpSocket) -> KernelSocket {
        KernelSocket {
            sock,
            drained: Cell::new(false),
            received: Cell::new(0),
        }
    }

    /// Datagrams received from it so far.
    pub(super) fn received(&self) -> u64 {
        self.received.get()
    }

    /// One datagram into `buf` unless the socket was found empty (and not
    /// seen readable since): its length, or `None`.
    pub(super) fn take(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        if self.drained.get() {
            return Ok(None);
        }
        match self.sock.recv(buf) {
            Ok(len) => {
                self.received.set(self.received.get() + 1);
                Ok(Some(len))
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                self.drained.set(true);
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Sleeps until the AF_XDP socket `ring` or this socket is readable,
    /// or `timeout` passes; whether either is. This socket seen readable
    /// is read again by [`KernelSocket::take`] (module docs).
    pub(super) fn wait(&self, ring: RawFd, timeout: Duration) -> io::Result<bool> {
        let mut fds = [ring, self.sock.as_raw_fd()].map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        });
        let ms = timeout.as_millis().clamp(1, i32::MAX as u128) as libc::c_int;
        // SAFETY: two valid pollfds.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
        match rc {
            r if r < 0 => {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    Ok(false)
                } else {
                    Err(e)
                }
            }
            0 => Ok(false),
            _ => {
                if fds[1].revents & libc::POLLIN != 0 {
                    self.drained.set(false);
                }
                Ok(true)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connected pair on loopback: (the flow's kernel socket, its peer).
    fn pair() -> (UdpSocket, UdpSocket) {
        let a = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let b = UdpSocket::bind("127.0.0.1:0").expect("bind");
        a.connect(b.local_addr().expect("addr")).expect("connect");
        b.connect(a.local_addr().expect("addr")).expect("connect");
        a.set_nonblocking(true).expect("nonblocking");
        (a, b)
    }

    /// The race fixed in ae5c564: the reader finds the kernel socket empty
    /// and goes on to the ring; then a datagram that passed the XDP program
    /// just before the flow was redirected lands on the kernel socket. The
    /// reader's next wait must see it and the next read return it (counted
    /// as received from the kernel), not leave it there for ever (an rr
    /// phase's first request went unanswered). The ring here is an idle
    /// socket: nothing else wakes the wait.
    #[test]
    fn issue_25_a_datagram_landing_on_the_kernel_socket_after_it_was_found_empty_is_read() {
        let (sock, peer) = pair();
        let (ring, _ring_peer) = pair();
        let kernel = KernelSocket::new(sock);
        let mut buf = [0u8; 64];
        assert_eq!(kernel.take(&mut buf).expect("take"), None, "empty at first");

        // The late datagram, in the window after the socket was found empty.
        peer.send(b"late request").expect("send");
        let woke = kernel
            .wait(ring.as_raw_fd(), Duration::from_secs(5))
            .expect("wait");
        assert!(woke, "the wait sees the kernel socket readable");
        let got = kernel.take(&mut buf).expect("take");
        assert_eq!(got, Some(12), "the late datagram is read");
        assert_eq!(&buf[..12], b"late request");
        assert_eq!(kernel.received(), 1, "counted via the kernel socket");
        // And found empty again after it.
        assert_eq!(kernel.take(&mut buf).expect("take"), None);
        assert_eq!(kernel.received(), 1);
    }

    /// A wait woken by the ring alone leaves an empty kernel socket unread
    /// (no recv call per wake-up once it was found empty).
    #[test]
    fn issue_25_a_ring_wake_up_does_not_reread_an_empty_kernel_socket() {
        let (sock, _peer) = pair();
        let (ring, ring_peer) = pair();
        let kernel = KernelSocket::new(sock);
        let mut buf = [0u8; 64];
        assert_eq!(kernel.take(&mut buf).expect("take"), None);
        ring_peer.send(b"x").expect("send");
        assert!(kernel
            .wait(ring.as_raw_fd(), Duration::from_secs(5))
            .expect("wait"));
        assert!(kernel.drained.get(), "still known empty");
        assert_eq!(kernel.received(), 0);
    }
}
