//! Both ends of a transport's channels, made in one process; the far ends
//! go to a child process as inherited descriptors.
//!
//! Nothing has a name in the file system (socket pairs, a loopback TCP
//! connection, memfd segments): when either process exits, the
//! kernel drops what it held, and the survivor sees a hang-up.

use crate::shm::{self, Layout};
use crate::sock::{DgramChan, StreamChan};
use crate::wait::Spin;
use crate::{Channel, LocalError, Transport};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::{UnixDatagram, UnixStream};

/// How channels are shaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Bytes per direct shared-memory slot, its 8-byte header included.
    pub slot_size: u32,
    /// Bytes of each bulk channel's shared region (the largest message).
    pub region: usize,
    /// How a receiver spins before it sleeps (shared memory; sockets
    /// with `busy_poll`).
    pub spin: Spin,
    /// Sockets too spin (non-blocking) before they sleep in `poll(2)`
    /// (`rr --busy-poll`); otherwise they block.
    pub busy_poll: bool,
    /// Bytes per reverse-ring slot (see [`Layout::ack_slot`]).
    pub ack_slot: u32,
}

impl Options {
    /// The sockets' spinning: only with busy polling.
    fn sock_spin(&self) -> Option<Spin> {
        self.busy_poll.then_some(self.spin)
    }

    pub fn layout(&self, t: Transport) -> Layout {
        Layout {
            bulk: t == Transport::ShmBulk,
            slot_size: self.slot_size,
            region: if t == Transport::ShmBulk {
                self.region
            } else {
                0
            },
            ack_slot: self.ack_slot,
        }
    }
}

/// This process's ends of `conns` channels and the far ends' descriptors,
/// in order. `ctl` is the control socket to the far process (shared memory
/// watches it for the peer's exit).
#[allow(clippy::type_complexity)]
pub fn create(
    t: Transport,
    conns: usize,
    opts: &Options,
    ctl: &OwnedFd,
) -> Result<(Vec<Box<dyn Channel>>, Vec<OwnedFd>), LocalError> {
    let mut near: Vec<Box<dyn Channel>> = Vec::new();
    let mut far = Vec::new();
    let listener = match t {
        Transport::Tcp => Some(
            TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                .map_err(LocalError::io("listen on loopback"))?,
        ),
        _ => None,
    };
    for _ in 0..conns {
        match t {
            Transport::Tcp => {
                let l = listener
                    .as_ref()
                    .ok_or(LocalError::Protocol("no listener".into()))?;
                let addr = l
                    .local_addr()
                    .map_err(LocalError::io("listen on loopback"))?;
                let a = TcpStream::connect(addr).map_err(LocalError::io("connect on loopback"))?;
                let from = a
                    .local_addr()
                    .map_err(LocalError::io("connect on loopback"))?;
                let b = accept_from(l, from)?;
                // Acknowledgements are small: send each at once.
                a.set_nodelay(true).map_err(LocalError::io("TCP_NODELAY"))?;
                b.set_nodelay(true).map_err(LocalError::io("TCP_NODELAY"))?;
                near.push(Box::new(StreamChan::new(a, opts.sock_spin())?));
                far.push(b.into());
            }
            Transport::Unix => {
                let (a, b) = UnixStream::pair().map_err(LocalError::io("socketpair"))?;
                near.push(Box::new(StreamChan::new(a, opts.sock_spin())?));
                far.push(b.into());
            }
            Transport::UnixDgram => {
                let (a, b) = UnixDatagram::pair().map_err(LocalError::io("socketpair"))?;
                near.push(Box::new(DgramChan::new(a, opts.sock_spin())?));
                far.push(b.into());
            }
            Transport::ShmDirect | Transport::ShmBulk => {
                let ctl = ctl.try_clone().map_err(LocalError::io("dup"))?;
                let (chan, f) = shm::create(opts.layout(t), ctl, opts.spin)?;
                near.push(Box::new(chan));
                far.push(f);
            }
        }
    }
    Ok((near, far))
}

/// Connections a loopback listener drops, at most, while it looks for
/// its own process's (a bound on the loop; each would be another local
/// process's connection).
const MAX_STRANGERS: usize = 1024;

/// The connection from `from` on `l`: the loopback port is open to every
/// process on the host, so another user's connection could be first in
/// the queue and take the far end. Others are closed. Ours is already
/// queued (its connect returned), so this never waits for it.
fn accept_from(l: &TcpListener, from: SocketAddr) -> Result<TcpStream, LocalError> {
    for _ in 0..=MAX_STRANGERS {
        let (s, peer) = l.accept().map_err(LocalError::io("accept on loopback"))?;
        if peer == from {
            return Ok(s);
        }
    }
    Err(LocalError::Protocol(format!(
        "{MAX_STRANGERS} connections from other processes on the loopback listener, none ours"
    )))
}

/// The far ends, from the descriptors [`create`] made (in its order).
pub fn open(
    t: Transport,
    fds: Vec<OwnedFd>,
    opts: &Options,
    ctl: &OwnedFd,
) -> Result<Vec<Box<dyn Channel>>, LocalError> {
    let mut out: Vec<Box<dyn Channel>> = Vec::new();
    for fd in fds {
        match t {
            Transport::Tcp => out.push(Box::new(StreamChan::new(
                TcpStream::from(fd),
                opts.sock_spin(),
            )?)),
            Transport::Unix => out.push(Box::new(StreamChan::new(
                UnixStream::from(fd),
                opts.sock_spin(),
            )?)),
            Transport::UnixDgram => out.push(Box::new(DgramChan::new(
                UnixDatagram::from(fd),
                opts.sock_spin(),
            )?)),
            Transport::ShmDirect | Transport::ShmBulk => {
                let ctl = ctl.try_clone().map_err(LocalError::io("dup"))?;
                out.push(Box::new(shm::open(opts.layout(t), fd, ctl, opts.spin)?));
            }
        }
    }
    Ok(out)
}

/// Lets `fd` survive `exec` (clears `FD_CLOEXEC`), for a child to inherit.
/// The caller closes its copy after spawning.
pub fn inheritable(fd: &OwnedFd) -> Result<(), LocalError> {
    // SAFETY: fcntl on a descriptor we own, with an integer argument.
    let r = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, 0) };
    if r < 0 {
        return Err(LocalError::io("fcntl(F_SETFD)")(
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// Takes ownership of descriptors inherited from the parent, by number,
/// after checking each is open; marks them close-on-exec again.
pub fn adopt(numbers: &[RawFd]) -> Result<Vec<OwnedFd>, LocalError> {
    let mut out = Vec::new();
    for &n in numbers {
        // SAFETY: fcntl with plain integers; it only tells whether n is an
        // open descriptor (and sets its close-on-exec flag).
        if n < 3 || unsafe { libc::fcntl(n, libc::F_SETFD, libc::FD_CLOEXEC) } < 0 {
            return Err(LocalError::Protocol(format!(
                "descriptor {n} was not inherited"
            )));
        }
        if numbers.iter().filter(|&&m| m == n).count() > 1 {
            return Err(LocalError::Protocol(format!("descriptor {n} listed twice")));
        }
        // SAFETY: n is open (checked above), listed once, and was passed
        // to this process for it alone to own; nothing else refers to n.
        out.push(unsafe { OwnedFd::from_raw_fd(n) });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Another process's connection first in the listener's queue is not
    /// taken for ours (it would have received the test's messages).
    #[test]
    fn issue_28_the_loopback_listener_takes_only_our_connection() {
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("listen");
        let addr = l.local_addr().expect("addr");
        let stranger = TcpStream::connect(addr).expect("stranger");
        let ours = TcpStream::connect(addr).expect("ours");
        let b = accept_from(&l, ours.local_addr().expect("addr")).expect("accept");
        assert_eq!(
            b.peer_addr().expect("peer"),
            ours.local_addr().expect("addr")
        );
        assert_ne!(
            b.peer_addr().expect("peer"),
            stranger.local_addr().expect("addr")
        );
    }
}
