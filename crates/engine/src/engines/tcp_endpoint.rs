//! The TCP endpoint: what an engine's byte streams move through, in place
//! of naming the kernel's `TcpStream`.
//!
//! An endpoint is one connected byte stream as the TCP loops see it: the
//! stream loops ([`crate::tcp`]) and rr's whole-message I/O. The engine's
//! I/O objects ([`super::TcpTx`], [`super::TcpRx`]) move the bytes, each
//! call given the endpoint; outside those data calls the loops use only
//! the endpoint's few methods, none of them per buffer:
//! - [`TcpEndpoint::shutdown`]: the sender's end of stream, rr's end of
//!   phase;
//! - [`Readiness::wait_ready`]: where a busy-polling loop sleeps once its
//!   spin budget is spent;
//! - [`TcpEndpoint::set_nonblocking`], [`TcpEndpoint::set_io_timeout`]:
//!   how blocking calls wait (rr's phases; engines whose calls depend on
//!   the blocking mode, `splice` through a pipe);
//! - [`TcpEndpoint::recv_buffer`], [`TcpEndpoint::set_recv_lowat`]: a
//!   blocking receiver's low-water mark;
//! - [`TcpEndpoint::tcp_info`]: the sender's `TCP_INFO` at its end, read
//!   once [`TcpEndpoint::fin_unacked`] says its retransmits are final
//!   ([`crate::tcp::settle`]).
//!
//! The engines here all make system calls on the kernel socket (a write,
//! a `sendfile`, an io_uring request naming the fd), so an endpoint gives
//! its descriptor (`AsFd`, `AsRawFd`); a kernel-bypass TCP engine would
//! bring its own endpoint and ignore it.
//!
//! The kernel's [`TcpStream`] is the endpoint of every engine here: the
//! control plane connects or accepts it and hands it to the loops, which
//! are generic over the endpoint type and monomorphised (the engines' TCP
//! calls are generic methods): no indirect call, nothing added per buffer.
//! Methods take `&self`, as the stream's do: a watcher thread may shut a
//! stuck flow's connection down while its loop is in a call.

use std::io;
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsFd, AsRawFd};
use std::time::Duration;

use linerate_proto::measure::TcpInfo;

use super::endpoint::{poll_events, Interest, Readiness};
use crate::{socket, tcp_info};

/// One connected TCP byte stream, as the TCP loops see it (module docs).
pub trait TcpEndpoint: Readiness + AsFd + AsRawFd {
    /// Shuts down the write side (the peer reads end of stream), the read
    /// side or both.
    fn shutdown(&self, how: Shutdown) -> io::Result<()>;
    /// Makes calls return `WouldBlock` at once instead of waiting (or
    /// waiting again).
    fn set_nonblocking(&self, nonblocking: bool) -> io::Result<()>;
    /// A blocking call gives up with `WouldBlock` after `timeout` (`None`:
    /// it waits as long as it takes), reads and writes alike.
    fn set_io_timeout(&self, timeout: Option<Duration>) -> io::Result<()>;
    /// The receive buffer's size in bytes (`None`: not known).
    fn recv_buffer(&self) -> Option<u64>;
    /// Wakes a blocking read only once `bytes` have arrived (or end of
    /// stream, or the receive timeout): `SO_RCVLOWAT`.
    fn set_recv_lowat(&self, bytes: u64) -> io::Result<()>;
    /// The connection's `TCP_INFO` (`None`: not known).
    fn tcp_info(&self) -> Option<TcpInfo>;
    /// After this side shut its write side down: whether what it sent,
    /// its FIN included, still awaits acknowledgement, so its
    /// retransmit count may still grow (false: not known).
    fn fin_unacked(&self) -> bool;
}

impl Readiness for TcpStream {
    fn wait_ready(&self, interest: Interest, timeout: Duration) -> io::Result<bool> {
        socket::wait_ready(self, poll_events(interest), timeout)
    }
}

impl TcpEndpoint for TcpStream {
    fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        TcpStream::shutdown(self, how)
    }

    fn set_nonblocking(&self, nonblocking: bool) -> io::Result<()> {
        TcpStream::set_nonblocking(self, nonblocking)
    }

    fn set_io_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.set_read_timeout(timeout)
            .and_then(|()| self.set_write_timeout(timeout))
    }

    fn recv_buffer(&self) -> Option<u64> {
        socket2::SockRef::from(self)
            .recv_buffer_size()
            .ok()
            .map(|b| b as u64)
    }

    fn set_recv_lowat(&self, bytes: u64) -> io::Result<()> {
        let v = bytes.min(i32::MAX as u64) as libc::c_int;
        socket::set_int(self, libc::SOL_SOCKET, libc::SO_RCVLOWAT, v)
    }

    fn tcp_info(&self) -> Option<TcpInfo> {
        tcp_info::read(self)
    }

    fn fin_unacked(&self) -> bool {
        tcp_info::fin_unacked(self)
    }
}
