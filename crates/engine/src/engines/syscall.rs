//! The plain syscall engine: one `send`/`recvmsg` per datagram and one
//! `write`/`read` per buffer. It works everywhere, LD_PRELOAD kernel-bypass
//! libraries included, and is the baseline every other engine is compared
//! with.

use std::io;
use std::net::UdpSocket;
use std::os::fd::AsRawFd;

use super::endpoint::KernelUdp;
use super::tcp_endpoint::TcpEndpoint;
use super::traits::{
    Engine, RecvMeta, RecvSlots, TcpRx, TcpTx, TxBatch, UdpRx, UdpTx, Wait, RECV_BUF,
};
use crate::cmsg::{self, ControlBuf, RECV_CMSG};
use crate::EngineError;

/// Datagrams per send call: one, so every datagram is stamped with the
/// clock read just before its own `send` (as precise as the sender can be).
const UDP_TX_BATCH: usize = 1;

/// The plain syscall engine.
#[derive(Debug, Clone, Copy, Default)]
pub struct Syscall;

impl Engine for Syscall {
    type UdpEndpoint = KernelUdp;
    type UdpTx = SyscallUdpTx;
    type UdpRx = SyscallUdpRx;
    type TcpTx = SyscallTcp;
    type TcpRx = SyscallTcpRx;
    const TCP_IO_OUTLIVES_SOCKET: bool = true;

    fn udp_endpoint(self, sock: UdpSocket) -> Result<KernelUdp, EngineError> {
        Ok(KernelUdp::new(sock))
    }
    fn udp_tx(self, _ep: &KernelUdp, _len: usize) -> Result<SyscallUdpTx, EngineError> {
        Ok(SyscallUdpTx)
    }
    fn udp_rx(self, ep: &KernelUdp, len: usize) -> Result<SyscallUdpRx, EngineError> {
        let asked = |opt| crate::socket::get_int(ep, libc::SOL_SOCKET, opt).is_ok_and(|v| v != 0);
        Ok(SyscallUdpRx {
            slot: RECV_BUF.max(len + 1),
            control: [0; RECV_CMSG],
            // Neither control message asked for (rr's sockets): `recv`.
            plain: !asked(cmsg::SO_TIMESTAMPNS) && !asked(cmsg::SO_RXQ_OVFL),
        })
    }
    fn tcp_tx<S: TcpEndpoint>(self, _sock: &S) -> Result<SyscallTcp, EngineError> {
        Ok(SyscallTcp)
    }
    fn tcp_rx<S: TcpEndpoint>(
        self,
        _sock: &S,
        skip_copy: bool,
    ) -> Result<SyscallTcpRx, EngineError> {
        Ok(SyscallTcpRx { skip_copy })
    }
}

fn flags(wait: Wait) -> libc::c_int {
    match wait {
        Wait::Block => 0,
        Wait::DontWait => libc::MSG_DONTWAIT,
    }
}

/// `send(2)` of one buffer on a connected socket.
fn send(fd: &impl AsRawFd, buf: &[u8], wait: Wait) -> io::Result<usize> {
    // SAFETY: buf is valid for buf.len() bytes for the call's duration.
    let n = unsafe {
        libc::send(
            fd.as_raw_fd(),
            buf.as_ptr().cast(),
            buf.len(),
            flags(wait) | libc::MSG_NOSIGNAL,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// UDP sending state of the syscall engine: none.
#[derive(Debug)]
pub struct SyscallUdpTx;

impl UdpTx<KernelUdp> for SyscallUdpTx {
    fn max_batch(&self) -> usize {
        UDP_TX_BATCH
    }

    fn send_batch(&mut self, ep: &KernelUdp, batch: TxBatch<'_>, wait: Wait) -> io::Result<usize> {
        let sock = ep.socket();
        let mut sent = 0;
        for d in batch.datagrams() {
            let r = match wait {
                Wait::Block => sock.send(d),
                Wait::DontWait => send(sock, d, wait),
            };
            match r {
                Ok(n) if n == d.len() => sent += 1,
                Ok(n) if sent == 0 => {
                    return Err(io::Error::new(
                        io::ErrorKind::WriteZero,
                        format!("UDP send wrote {n} of {} bytes", d.len()),
                    ))
                }
                Err(e) if sent == 0 => return Err(e),
                // The rest is offered again; its error shows then.
                Ok(_) | Err(_) => break,
            }
        }
        Ok(sent)
    }
}

/// UDP receiving state of the syscall engine: the control-message buffer.
#[derive(Debug)]
pub struct SyscallUdpRx {
    /// Bytes per receive slot: one more than the test's datagrams, so a
    /// longer one shows as truncated.
    slot: usize,
    control: ControlBuf,
    /// No control messages to read: `recv` with `MSG_TRUNC`, which spares
    /// the kernel copying in a `msghdr` and an iovec (~4% of a busy-polled
    /// UDP round trip's CPU per side in `perf`: `copy_msghdr_from_user`,
    /// `import_iovec`).
    plain: bool,
}

impl UdpRx<KernelUdp> for SyscallUdpRx {
    fn slots(&self) -> RecvSlots {
        RecvSlots::new(1, self.slot)
    }

    fn recv_batch(
        &mut self,
        ep: &KernelUdp,
        slots: &mut RecvSlots,
        wait: Wait,
    ) -> io::Result<usize> {
        let sock = ep.socket();
        let (buf, meta) = slots.slot_mut(0);
        if self.plain {
            // SAFETY: buf is valid for buf.len() writable bytes.
            let n = unsafe {
                libc::recv(
                    sock.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    flags(wait) | libc::MSG_TRUNC,
                )
            };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            // With MSG_TRUNC a datagram's real length comes back.
            let n = n as usize;
            *meta = RecvMeta {
                len: n.min(buf.len()),
                truncated: n > buf.len(),
                stamp_ns: None,
                drops: None,
                segment: None,
            };
            return Ok(1);
        }
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: msghdr is plain data; we point it at live buffers below.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = self.control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&self.control) as _;
        // SAFETY: every pointer in msg refers to a buffer that outlives the call.
        let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, flags(wait)) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        // usize on glibc, u32 on musl.
        #[allow(clippy::unnecessary_cast)]
        let clen = (msg.msg_controllen as usize).min(RECV_CMSG);
        *meta = RecvMeta {
            len: n as usize,
            truncated: msg.msg_flags & libc::MSG_TRUNC != 0,
            ..cmsg::parse(&self.control[..clen])
        };
        Ok(1)
    }
}

/// TCP state of the syscall engine: none.
#[derive(Debug)]
pub struct SyscallTcp;

impl TcpTx for SyscallTcp {
    fn write<S: TcpEndpoint>(&mut self, sock: &S, buf: &[u8], wait: Wait) -> io::Result<usize> {
        // What std's `TcpStream::write` does: `send(MSG_NOSIGNAL)`.
        send(sock, buf, wait)
    }
}

/// Reading a TCP stream: `recv`, or `recv(MSG_TRUNC)` when the receiver
/// skips the copy.
#[derive(Debug)]
pub struct SyscallTcpRx {
    pub(crate) skip_copy: bool,
}

impl TcpRx for SyscallTcpRx {
    fn read<S: TcpEndpoint>(&mut self, sock: &S, buf: &mut [u8], wait: Wait) -> io::Result<usize> {
        if self.skip_copy {
            return recv_discard(sock, buf, wait == Wait::DontWait);
        }
        // Blocking, what std's `TcpStream::read` does: `recv` without flags.
        // SAFETY: buf is valid for buf.len() writable bytes for the call.
        let n = unsafe {
            libc::recv(
                sock.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                flags(wait),
            )
        };
        byte_count(n)
    }
}

/// Receives up to `buf.len()` bytes of a TCP stream with `MSG_TRUNC`: the
/// kernel consumes them without copying (`buf` is left as it was). Returns
/// the bytes consumed; 0 at end of stream.
pub fn recv_discard(sock: &impl AsRawFd, buf: &mut [u8], dontwait: bool) -> io::Result<usize> {
    let flags = libc::MSG_TRUNC | if dontwait { libc::MSG_DONTWAIT } else { 0 };
    // SAFETY: buf is live and writable for its length for the call (the
    // kernel does not write to it with MSG_TRUNC on TCP, but may as well).
    let rc = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), flags) };
    byte_count(rc)
}

/// A byte-moving call's return: the count, or the error it set.
fn byte_count(rc: isize) -> io::Result<usize> {
    usize::try_from(rc).map_err(|_| io::Error::last_os_error())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};

    /// Without control messages the receive is a plain `recv`; a datagram
    /// longer than its slot still shows as truncated, and each arrives whole.
    #[test]
    fn issue_8_plain_udp_receive_sees_lengths_and_truncation() {
        let (tx, rx) = crate::test_pair::udp_pair();
        let rx = KernelUdp::new(rx);
        let mut io = Syscall.udp_rx(&rx, 100).expect("rx");
        assert!(io.plain, "no control messages asked for");
        // A short slot, so a datagram can outgrow it.
        let mut slots = RecvSlots::new(1, 100);
        let long = [9u8; 110];
        for d in [&[1u8; 64][..], &long[..]] {
            tx.send(d).expect("send");
            assert_eq!(
                io.recv_batch(&rx, &mut slots, Wait::Block).expect("recv"),
                1
            );
            let (data, m) = slots.get(0);
            assert_eq!(m.truncated, d.len() > 100, "{} bytes", d.len());
            assert_eq!(m.len, d.len().min(100));
            assert_eq!(data.len(), m.len);
        }
        // With a timestamp asked for, the msghdr path (and its stamp).
        crate::socket::set_int(&rx, libc::SOL_SOCKET, cmsg::SO_TIMESTAMPNS, 1).expect("ts");
        let mut io = Syscall.udp_rx(&rx, 100).expect("rx");
        assert!(!io.plain);
        tx.send(&[2u8; 64]).expect("send");
        io.recv_batch(&rx, &mut slots, Wait::Block).expect("recv");
        assert!(slots.get(0).1.stamp_ns.is_some());
    }

    #[test]
    fn issue_8_msg_trunc_consumes_tcp_data_without_copying() {
        let l = TcpListener::bind("127.0.0.1:0").expect("listen");
        let mut tx = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (rx, _) = l.accept().expect("accept");
        let t = std::thread::spawn(move || {
            tx.write_all(&[0x55; 100_000]).expect("write");
        });
        let mut buf = vec![0xAA; 16384];
        let mut total = 0;
        while total < 100_000 {
            let n = recv_discard(&rx, &mut buf, false).expect("recv");
            assert!(n > 0, "stream ended early at {total}");
            total += n;
        }
        t.join().expect("writer");
        assert_eq!(total, 100_000);
        assert!(buf.iter().all(|&b| b == 0xAA), "nothing was copied");
        assert_eq!(recv_discard(&rx, &mut buf, false).expect("eof"), 0);
    }
}
