//! The ICMP socket: an unprivileged ICMP datagram socket where
//! `net.ipv4.ping_group_range` admits this process's group (the kernel
//! then owns the identifier and filters replies for us), else a raw socket
//! (root or CAP_NET_RAW). TTL / hop limit of each reply comes from a
//! control message (and, on IPv4 raw sockets, from the IP header).

use std::io;
use std::mem::MaybeUninit;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use socket2::{Domain, MsgHdrMut, Protocol, SockAddr, Socket, Type};

use super::icmp;

/// How the echo requests were sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// `SOCK_DGRAM` + `IPPROTO_ICMP`: no privilege needed where
    /// `ping_group_range` allows.
    IcmpDatagram,
    /// `SOCK_RAW`: root or CAP_NET_RAW.
    Raw,
}

/// Why no ICMP socket could be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("ICMP datagram sockets are not allowed for this group (net.ipv4.ping_group_range is {range}) and raw sockets need root or CAP_NET_RAW ({raw})")]
    NotPermitted { range: String, raw: io::Error },
    #[error("cannot open an ICMP socket: {0}")]
    Io(#[from] io::Error),
}

pub struct IcmpSocket {
    sock: Socket,
    pub method: Method,
    v6: bool,
}

impl std::fmt::Debug for IcmpSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IcmpSocket")
            .field("method", &self.method)
            .finish()
    }
}

/// A received echo reply.
#[derive(Debug, Clone, Copy)]
pub struct Received {
    pub reply: icmp::Reply,
    pub ttl: Option<u8>,
    pub from: IpAddr,
}

fn open_one(v6: bool, ty: Type) -> io::Result<Socket> {
    let (domain, proto) = if v6 {
        (Domain::IPV6, Protocol::ICMPV6)
    } else {
        (Domain::IPV4, Protocol::ICMPV4)
    };
    let s = Socket::new(domain, ty, Some(proto))?;
    let (level, opt) = if v6 {
        (libc::IPPROTO_IPV6, libc::IPV6_RECVHOPLIMIT)
    } else {
        (libc::IPPROTO_IP, libc::IP_RECVTTL)
    };
    let one: libc::c_int = 1;
    // SAFETY: setsockopt reads one c_int from a live local.
    let rc = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&s),
            level,
            opt,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(s)
}

impl IcmpSocket {
    /// Opens the socket for `dest`'s family: `force_raw` skips the datagram
    /// socket.
    pub fn open(dest: IpAddr, force_raw: bool) -> Result<IcmpSocket, OpenError> {
        let v6 = dest.is_ipv6();
        if !force_raw {
            match open_one(v6, Type::DGRAM) {
                Ok(sock) => {
                    return Ok(IcmpSocket {
                        sock,
                        method: Method::IcmpDatagram,
                        v6,
                    })
                }
                Err(e) if matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        match open_one(v6, Type::RAW) {
            Ok(sock) => Ok(IcmpSocket {
                sock,
                method: Method::Raw,
                v6,
            }),
            Err(raw) if matches!(raw.raw_os_error(), Some(libc::EACCES | libc::EPERM)) => {
                Err(OpenError::NotPermitted {
                    range: crate::sysctl::read("net.ipv4.ping_group_range")
                        .unwrap_or_else(|| "unreadable".into()),
                    raw,
                })
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Sends one message to `dest`.
    pub fn send(&self, dest: IpAddr, msg: &[u8]) -> io::Result<()> {
        let to = SockAddr::from(SocketAddr::new(dest, 0));
        self.sock.send_to(msg, &to).map(|_| ())
    }

    /// Waits up to `wait` for an echo reply with identifier `id` (raw
    /// sockets see every ICMP message on the host; datagram sockets only
    /// their own, with the kernel's identifier). `Ok(None)`: nothing in
    /// time, or a message that was not ours.
    pub fn recv(
        &self,
        id: u16,
        wait: Duration,
        buf: &mut [MaybeUninit<u8>],
    ) -> io::Result<Option<Received>> {
        self.sock
            .set_read_timeout(Some(wait.max(Duration::from_micros(1))))?;
        let mut control = [MaybeUninit::<u8>::uninit(); 128];
        let mut bufs = [socket2::MaybeUninitSlice::new(buf)];
        let mut from = SockAddr::from(SocketAddr::new(
            if self.v6 {
                IpAddr::from([0u16; 8])
            } else {
                IpAddr::from([0u8; 4])
            },
            0,
        ));
        let (n, control_len) = {
            let mut msg = MsgHdrMut::new()
                .with_addr(&mut from)
                .with_buffers(&mut bufs)
                .with_control(&mut control);
            match self.sock.recvmsg(&mut msg, 0) {
                Ok(n) => (n, msg.control_len()),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Ok(None)
                }
                Err(e) => return Err(e),
            }
        };
        // SAFETY: recvmsg initialised the first `n` bytes of `buf` and the
        // first `control_len` bytes of `control`.
        let (data, control) = unsafe {
            (
                std::slice::from_raw_parts(bufs[0].as_ptr().cast::<u8>(), n),
                std::slice::from_raw_parts(control.as_ptr().cast::<u8>(), control_len),
            )
        };
        let mut ttl = cmsg_ttl(control);
        let icmp_bytes = if self.v6 || self.method == Method::IcmpDatagram {
            data
        } else {
            match icmp::strip_ipv4(data) {
                Some((t, rest)) => {
                    ttl = ttl.or(Some(t));
                    rest
                }
                None => return Ok(None),
            }
        };
        let Some(reply) = icmp::parse_reply(self.v6, icmp_bytes) else {
            return Ok(None);
        };
        if self.method == Method::Raw && reply.id != id {
            return Ok(None);
        }
        let Some(from) = from.as_socket().map(|s| s.ip()) else {
            return Ok(None);
        };
        Ok(Some(Received { reply, ttl, from }))
    }
}

/// The TTL (IPv4 `IP_TTL`) or hop limit (`IPV6_HOPLIMIT`) control message.
fn cmsg_ttl(control: &[u8]) -> Option<u8> {
    let hdr = std::mem::size_of::<libc::cmsghdr>();
    let mut off = 0;
    while off + hdr <= control.len() {
        // SAFETY: `off + hdr` is within `control`; read_unaligned copes with
        // any alignment of the buffer.
        let c: libc::cmsghdr =
            unsafe { std::ptr::read_unaligned(control.as_ptr().add(off).cast()) };
        // size_t in glibc, socklen_t in musl (the static build).
        let len = c.cmsg_len as usize;
        if len < hdr || off + len > control.len() {
            return None;
        }
        let is_ttl = (c.cmsg_level == libc::IPPROTO_IP && c.cmsg_type == libc::IP_TTL)
            || (c.cmsg_level == libc::IPPROTO_IPV6 && c.cmsg_type == libc::IPV6_HOPLIMIT);
        if is_ttl && len >= hdr + 4 {
            // SAFETY: the payload of this message is a c_int inside `control`.
            let v: libc::c_int =
                unsafe { std::ptr::read_unaligned(control.as_ptr().add(off + hdr).cast()) };
            return u8::try_from(v).ok();
        }
        // Messages are aligned to the size of a long.
        let align = std::mem::size_of::<libc::c_long>();
        off += len.div_ceil(align) * align;
    }
    None
}
