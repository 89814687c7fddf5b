//! A flow's kernel socket on `xdp`: the socket the control plane attached
//! holds the flow's port, and what passed the XDP program before the flow
//! was redirected lands there. Those datagrams are older than any on the
//! RX ring, so they are read first, until the socket is found empty; and
//! one can still land after that (it passed the program just before the
//! redirect and was microseconds behind in the stack: an rr phase's first
//! request), so a wait that sees the socket readable has it read again
//! (issue 25: the request was left unanswered).
//!
//! It is read with `recvmmsg` ([`MmsgRx`], as the `batch` engine reads),
//! as many datagrams per call as the receive slots hold: where a flow's
//! datagrams arrive on a queue without an AF_XDP socket (a NIC's flow
//! not steered to one), every one of them comes this way.

use std::cell::{Cell, RefCell};
use std::io;
use std::net::UdpSocket;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use crate::engines::batch::mmsg::MmsgRx;
use crate::engines::RecvSlots;

/// The kernel socket and what was received from it (module docs).
#[derive(Debug)]
pub(super) struct KernelSocket {
    pub(super) sock: UdpSocket,
    /// `recvmmsg`'s control buffers, for up to `batch` datagrams a call.
    rx: RefCell<MmsgRx>,
    /// Found empty since it was last seen readable.
    drained: Cell<bool>,
    /// Datagrams received from it (the report's `via_kernel`).
    received: Cell<u64>,
}

impl KernelSocket {
    /// Reading up to `batch` datagrams a call.
    pub(super) fn new(sock: UdpSocket, batch: usize) -> KernelSocket {
        KernelSocket {
            sock,
            rx: RefCell::new(MmsgRx::new(batch)),
            drained: Cell::new(false),
            received: Cell::new(0),
        }
    }

    /// Datagrams received from it so far.
    pub(super) fn received(&self) -> u64 {
        self.received.get()
    }

    /// What the socket holds, into `slots` (one `recvmmsg`, up to the
    /// slots' count and the batch it was made for), unless it was found
    /// empty (and not seen readable since): how many datagrams.
    pub(super) fn take(&self, slots: &mut RecvSlots) -> io::Result<usize> {
        if self.drained.get() {
            return Ok(0);
        }
        let (bufs, meta) = slots.parts_mut();
        match self.rx.borrow_mut().recv(&self.sock, bufs, meta, true) {
            Ok(n) => {
                self.received.set(self.received.get() + n as u64);
                Ok(n)
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                self.drained.set(true);
                Ok(0)
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
        let kernel = KernelSocket::new(sock, 8);
        let mut slots = RecvSlots::new(8, 64);
        assert_eq!(kernel.take(&mut slots).expect("take"), 0, "empty at first");

        // The late datagram, in the window after the socket was found empty.
        peer.send(b"late request").expect("send");
        let woke = kernel
            .wait(ring.as_raw_fd(), Duration::from_secs(5))
            .expect("wait");
        assert!(woke, "the wait sees the kernel socket readable");
        let got = kernel.take(&mut slots).expect("take");
        assert_eq!(got, 1, "the late datagram is read");
        let (buf, meta) = slots.get(0);
        assert_eq!(&buf[..meta.len], b"late request");
        assert_eq!(kernel.received(), 1, "counted via the kernel socket");
        // And found empty again after it.
        assert_eq!(kernel.take(&mut slots).expect("take"), 0);
        assert_eq!(kernel.received(), 1);
    }

    /// A wait woken by the ring alone leaves an empty kernel socket unread
    /// (no recv call per wake-up once it was found empty).
    #[test]
    fn issue_25_a_ring_wake_up_does_not_reread_an_empty_kernel_socket() {
        let (sock, _peer) = pair();
        let (ring, ring_peer) = pair();
        let kernel = KernelSocket::new(sock, 8);
        let mut slots = RecvSlots::new(8, 64);
        assert_eq!(kernel.take(&mut slots).expect("take"), 0);
        ring_peer.send(b"x").expect("send");
        assert!(kernel
            .wait(ring.as_raw_fd(), Duration::from_secs(5))
            .expect("wait"));
        assert!(kernel.drained.get(), "still known empty");
        assert_eq!(kernel.received(), 0);
    }

    /// Issue 25: a flow whose datagrams all reach the kernel socket (a
    /// queue without an AF_XDP socket) is read a batch per call, in order,
    /// each counted, not one datagram per call.
    #[test]
    fn issue_25_the_kernel_socket_is_read_a_batch_per_call() {
        let (sock, peer) = pair();
        let kernel = KernelSocket::new(sock, 8);
        for i in 0..10u8 {
            peer.send(&[i; 3]).expect("send");
        }
        let mut slots = RecvSlots::new(8, 64);
        assert_eq!(kernel.take(&mut slots).expect("take"), 8, "a full batch");
        for i in 0..8 {
            let (buf, meta) = slots.get(i);
            assert_eq!(
                (&buf[..meta.len], meta.truncated),
                (&[i as u8; 3][..], false)
            );
        }
        assert_eq!(kernel.take(&mut slots).expect("take"), 2, "the rest");
        assert_eq!(slots.get(1).0[..3], [9u8; 3]);
        assert_eq!(kernel.received(), 10);
        assert_eq!(kernel.take(&mut slots).expect("take"), 0);
    }
}
