//! Sockets for control and data connections, and the options tests request.
//!
//! Options that shape the connection (buffer sizes, MSS) are applied before
//! `connect` on the client, because the window scale is fixed at the SYN.

use std::net::{IpAddr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::{AsFd, AsRawFd};
use std::time::Duration;

use linerate_proto::spec::TcpOptions;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::EngineError;

/// Resolves `host:port`; IP literals skip the resolver.
pub fn resolve(host: &str, port: u16) -> Result<Vec<SocketAddr>, EngineError> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let addrs: Vec<_> = (host, port)
        .to_socket_addrs()
        .map_err(|e| EngineError::io(format!("cannot resolve {host}"), e))?
        .collect();
    if addrs.is_empty() {
        return Err(EngineError::NoAddresses { host: host.into() });
    }
    Ok(addrs)
}

/// Connects a TCP socket with `opts` applied first.
pub fn connect(
    addr: SocketAddr,
    opts: &TcpOptions,
    timeout: Duration,
) -> Result<TcpStream, EngineError> {
    connect_from(addr, None, opts, timeout)
}

/// Connects like [`connect`], from `local` (an ephemeral port on it) when
/// given: iperf3's `-B` on a client.
pub fn connect_from(
    addr: SocketAddr,
    local: Option<std::net::IpAddr>,
    opts: &TcpOptions,
    timeout: Duration,
) -> Result<TcpStream, EngineError> {
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))
        .map_err(|e| EngineError::io("socket", e))?;
    if let Some(ip) = local {
        let from = SocketAddr::new(ip, 0);
        sock.bind(&SockAddr::from(from))
            .map_err(|e| EngineError::io(format!("bind to {ip}"), e))?;
    }
    apply_pre_connect(&sock, opts)?;
    sock.connect_timeout(&SockAddr::from(addr), timeout)
        .map_err(|e| connect_error(addr, e))?;
    let stream: TcpStream = sock.into();
    apply_post_connect(&stream, opts)?;
    Ok(stream)
}

/// Connects like [`connect`], with `io` as the socket's read and write
/// timeouts, in fewer calls: the connect blocks, bounded by `SO_SNDTIMEO`
/// (Linux applies it to `connect`), instead of going through `O_NONBLOCK`
/// on and off and a `poll(2)` (five calls per connection that crr, which
/// connects once per transaction, would otherwise pay). A connect still in
/// progress when `io` expires is waited for up to `timeout` in all.
pub fn connect_with_timeouts(
    addr: SocketAddr,
    opts: &TcpOptions,
    io: Duration,
    timeout: Duration,
) -> Result<TcpStream, EngineError> {
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))
        .map_err(|e| EngineError::io("socket", e))?;
    apply_pre_connect(&sock, opts)?;
    sock.set_read_timeout(Some(io))
        .and_then(|()| sock.set_write_timeout(Some(io)))
        .map_err(|e| EngineError::io("socket timeouts", e))?;
    let failed = |e| connect_error(addr, e);
    match sock.connect(&SockAddr::from(addr)) {
        Ok(()) => {}
        Err(e)
            if e.raw_os_error() == Some(libc::EINPROGRESS)
                || e.kind() == std::io::ErrorKind::Interrupted =>
        {
            // Still connecting: wait for the rest of `timeout`.
            let until = std::time::Instant::now() + timeout.saturating_sub(io);
            loop {
                let left = until.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    return Err(failed(std::io::ErrorKind::TimedOut.into()));
                }
                if wait_ready(&sock, libc::POLLOUT, left).map_err(failed)? {
                    break;
                }
            }
            if let Some(e) = sock.take_error().map_err(failed)? {
                return Err(failed(e));
            }
        }
        Err(e) => return Err(failed(e)),
    }
    let stream: TcpStream = sock.into();
    apply_post_connect(&stream, opts)?;
    Ok(stream)
}

/// Starts a connection to `addr` on a socket that is non-blocking from its
/// creation (a busy-polled crr transaction spins on it rather than sleeping
/// in `connect(2)`, and sets no socket timeouts). `Ok((sock, true))`: it
/// connected at once; `false`: in progress, so wait for `POLLOUT`, then
/// call [`finish_connect`].
pub fn start_connect(
    addr: SocketAddr,
    opts: &TcpOptions,
) -> Result<(TcpStream, bool), EngineError> {
    let sock = Socket::new(
        Domain::for_address(addr),
        Type::STREAM.nonblocking(),
        Some(Protocol::TCP),
    )
    .map_err(|e| EngineError::io("socket", e))?;
    apply_pre_connect(&sock, opts)?;
    let done = match sock.connect(&SockAddr::from(addr)) {
        Ok(()) => true,
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => false,
        Err(e) => return Err(connect_error(addr, e)),
    };
    Ok((sock.into(), done))
}

/// Ends a connection [`start_connect`] began, once `POLLOUT` said so: its
/// outcome, then the post-connect options.
pub fn finish_connect(
    stream: &TcpStream,
    addr: SocketAddr,
    opts: &TcpOptions,
) -> Result<(), EngineError> {
    let failed = |e| connect_error(addr, e);
    if let Some(e) = stream.take_error().map_err(failed)? {
        return Err(failed(e));
    }
    apply_post_connect(stream, opts)
}

/// What a failed `connect` to `addr` reports: `EADDRNOTAVAIL` (no free
/// ephemeral port) as [`EngineError::PortsExhausted`], naming the range
/// and the remedies, the rest as they are.
pub fn connect_error(addr: SocketAddr, e: std::io::Error) -> EngineError {
    if e.raw_os_error() != Some(libc::EADDRNOTAVAIL) {
        return EngineError::io(format!("connect to {addr}"), e);
    }
    let range = std::fs::read_to_string(PORT_RANGE)
        .ok()
        .and_then(|s| port_range(&s))
        .map_or_else(
            || "net.ipv4.ip_local_port_range".to_string(),
            |(lo, hi)| {
                format!(
                    "net.ipv4.ip_local_port_range {lo}-{hi}: {} ports",
                    u32::from(hi.saturating_sub(lo)) + 1
                )
            },
        );
    EngineError::PortsExhausted { addr, range }
}

/// Where the kernel keeps the ephemeral port range (of this network
/// namespace).
const PORT_RANGE: &str = "/proc/sys/net/ipv4/ip_local_port_range";

/// The two numbers of `ip_local_port_range` ("32768\t60999").
fn port_range(s: &str) -> Option<(u16, u16)> {
    let mut it = s.split_whitespace().map(str::parse::<u16>);
    match (it.next(), it.next()) {
        (Some(Ok(lo)), Some(Ok(hi))) if lo <= hi => Some((lo, hi)),
        _ => None,
    }
}

/// Tries each address in turn and returns the first connection.
pub fn connect_any(
    addrs: &[SocketAddr],
    opts: &TcpOptions,
    timeout: Duration,
) -> Result<TcpStream, EngineError> {
    connect_any_from(addrs, None, opts, timeout)
}

/// [`connect_any`] from `local` when given (only addresses of its family
/// are tried then).
pub fn connect_any_from(
    addrs: &[SocketAddr],
    local: Option<std::net::IpAddr>,
    opts: &TcpOptions,
    timeout: Duration,
) -> Result<TcpStream, EngineError> {
    let mut last = None;
    let family = |a: &SocketAddr| local.is_none_or(|l| l.is_ipv4() == a.is_ipv4());
    for &a in addrs.iter().filter(|a| family(a)) {
        match connect_from(a, local, opts, timeout) {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or(EngineError::NothingToConnect))
}

/// SO_SNDBUF and SO_RCVBUF, when a window was requested.
fn set_window(sock: &Socket, window: Option<u32>) -> Result<(), EngineError> {
    if let Some(w) = window {
        sock.set_send_buffer_size(w as usize)
            .map_err(|e| EngineError::io("SO_SNDBUF", e))?;
        sock.set_recv_buffer_size(w as usize)
            .map_err(|e| EngineError::io("SO_RCVBUF", e))?;
    }
    Ok(())
}

fn apply_pre_connect(sock: &Socket, opts: &TcpOptions) -> Result<(), EngineError> {
    set_window(sock, opts.window)?;
    if opts.linger0 {
        sock.set_linger(Some(Duration::ZERO))
            .map_err(|e| EngineError::io("SO_LINGER 0", e))?;
    }
    if let Some(mss) = opts.mss {
        sock.set_mss(mss)
            .map_err(|e| EngineError::io(format!("TCP_MAXSEG {mss}"), e))?;
    }
    Ok(())
}

/// Applies the options a socket takes once connected (`TCP_NODELAY`,
/// congestion); they take as well on a socket still connecting.
pub fn apply_post_connect(stream: &TcpStream, opts: &TcpOptions) -> Result<(), EngineError> {
    stream
        .set_nodelay(opts.no_delay)
        .map_err(|e| EngineError::io("TCP_NODELAY", e))?;
    if let Some(cc) = &opts.congestion {
        set_congestion(stream, cc)?;
    }
    Ok(())
}

/// [`apply_post_connect`] on a socket this process has just made, whose
/// options are the kernel's defaults: `TCP_NODELAY` is set only when
/// asked (Nagle is on by default), one `setsockopt` less per crr
/// transaction.
pub fn apply_post_connect_fresh(stream: &TcpStream, opts: &TcpOptions) -> Result<(), EngineError> {
    if opts.no_delay {
        stream
            .set_nodelay(true)
            .map_err(|e| EngineError::io("TCP_NODELAY", e))?;
    }
    if let Some(cc) = &opts.congestion {
        set_congestion(stream, cc)?;
    }
    Ok(())
}

/// Applies `opts` to a socket the server accepted.
pub fn apply_accepted(stream: &TcpStream, opts: &TcpOptions) -> Result<(), EngineError> {
    let sock = socket2::SockRef::from(stream);
    set_window(&sock, opts.window)?;
    if let Some(mss) = opts.mss {
        // On an established socket this only lowers what we send.
        let _ = sock.set_mss(mss);
    }
    apply_post_connect(stream, opts)
}

/// Sets TCP_CONGESTION; an unknown algorithm is an error naming the ones
/// this kernel offers.
pub fn set_congestion(stream: &TcpStream, name: &str) -> Result<(), EngineError> {
    // SAFETY: the pointer and length describe `name`'s bytes.
    let rc = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    if rc != 0 {
        let err = std::io::Error::last_os_error();
        let avail = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
            .unwrap_or_default();
        return Err(EngineError::CongestionControl {
            name: name.into(),
            source: err,
            available: avail.trim().into(),
        });
    }
    Ok(())
}

/// Reads TCP_CONGESTION.
pub fn congestion(stream: &TcpStream) -> Option<String> {
    let mut buf = [0u8; 32];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: buf is valid for len bytes.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return None;
    }
    let b = buf.get(..len as usize)?;
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8(b[..end].to_vec()).ok()
}

/// Actual (kernel-doubled) send and receive buffer sizes.
pub fn buffer_sizes(stream: &TcpStream) -> (Option<usize>, Option<usize>) {
    let s = socket2::SockRef::from(stream);
    (s.send_buffer_size().ok(), s.recv_buffer_size().ok())
}

/// Listens on `bind:port`. Without `bind`, listens on `[::]` accepting IPv4
/// too, or on `0.0.0.0` where IPv6 is unavailable.
pub fn listen(bind: Option<IpAddr>, port: u16) -> Result<TcpListener, EngineError> {
    let make = |addr: SocketAddr, dual: bool| -> std::io::Result<TcpListener> {
        let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        if dual {
            s.set_only_v6(false)?;
        }
        s.set_reuse_address(true)?;
        s.bind(&SockAddr::from(addr))?;
        s.listen(1024)?;
        Ok(s.into())
    };
    match bind {
        Some(ip) => make(SocketAddr::new(ip, port), false)
            .map_err(|e| EngineError::io(format!("listen on {}", SocketAddr::new(ip, port)), e)),
        None => make(
            SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port),
            true,
        )
        .or_else(|_| make(SocketAddr::from(([0, 0, 0, 0], port)), false))
        .map_err(|e| EngineError::io(format!("listen on port {port}"), e)),
    }
}

/// `--transport unix`: the abstract-namespace address `name` (no file;
/// it lives in the network namespace and goes when its listener closes).
pub fn unix_abstract(name: &str) -> Result<std::os::unix::net::SocketAddr, EngineError> {
    use std::os::linux::net::SocketAddrExt;
    std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
        .map_err(|e| EngineError::io("Unix socket name", e))
}

/// The uid of the process that connected (or, for a connecting socket,
/// listened) at the other end of `sock`: `SO_PEERCRED`, set by the kernel
/// at connect time, so the peer cannot forge it.
pub fn unix_peer_uid(sock: &std::os::unix::net::UnixStream) -> Result<u32, EngineError> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes of the sizes given;
    // the descriptor is open for the call (borrowed from `sock`).
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut cred).cast(),
            &raw mut len,
        )
    };
    if rc != 0 {
        return Err(EngineError::io(
            "SO_PEERCRED",
            std::io::Error::last_os_error(),
        ));
    }
    Ok(cred.uid)
}

/// This process's real uid: what a `--transport unix` client announces,
/// and what the server's [`unix_peer_uid`] then sees.
pub fn own_uid() -> u32 {
    // SAFETY: getuid has no failure mode.
    unsafe { libc::getuid() }
}

/// A connected Unix stream socket as the stream loops' socket type.
/// `TcpStream` is only an owned descriptor with `read`/`write`/`shutdown`
/// and the `SO_RCVTIMEO`/`SO_SNDTIMEO` timeouts, all of which a Unix
/// stream socket has: the loops and the syscall engine run on it
/// unchanged. What is TCP's alone is not asked of it (`TCP_INFO` reads
/// fail and are reported as absent; `--transport unix` refuses the TCP
/// options and every engine but syscall).
pub fn unix_as_stream(sock: std::os::unix::net::UnixStream) -> TcpStream {
    TcpStream::from(std::os::fd::OwnedFd::from(sock))
}

/// Read and write timeouts, so blocked loops can notice stop requests.
pub fn set_io_timeout(stream: &TcpStream, t: Duration) -> Result<(), EngineError> {
    stream
        .set_read_timeout(Some(t))
        .and_then(|()| stream.set_write_timeout(Some(t)))
        .map_err(|e| EngineError::io("socket timeouts", e))
}

/// Bounds every blocking `accept(2)` on `listener` by `t` (`SO_RCVTIMEO`,
/// which accept honours: it then fails with `EAGAIN`). An accept loop that
/// must look up now and then (has the test ended?) blocks in accept itself
/// instead of a `poll(2)` before each accept: one syscall per connection
/// fewer (issue 8: crr serves a connection per transaction).
pub fn set_accept_timeout(listener: &TcpListener, t: Duration) -> Result<(), EngineError> {
    socket2::SockRef::from(listener)
        .set_read_timeout(Some(t))
        .map_err(|e| EngineError::io("SO_RCVTIMEO on the listener", e))
}

/// Makes `listener` accept a connection only once its first bytes are
/// there (`TCP_DEFER_ACCEPT`, `on`) or at once again (off). While a crr
/// test runs the server defers: a transaction's connection is accepted
/// with its request in, and answered there and then, rather than woken
/// for before its client has written and then waited for. Every peer of
/// the server speaks first; one that does not is accepted after about a
/// second (the kernel's SYN-ACK retransmission) instead of at once.
pub fn set_defer_accept(listener: &TcpListener, on: bool) -> Result<(), EngineError> {
    set_int(
        listener,
        libc::IPPROTO_TCP,
        libc::TCP_DEFER_ACCEPT,
        i32::from(on),
    )
    .map_err(|e| EngineError::io("TCP_DEFER_ACCEPT on the listener", e))
}

/// Prepares a control connection: no Nagle (frames are small and each one
/// moves the state machine).
pub fn prepare_control(stream: &TcpStream) -> Result<(), EngineError> {
    stream
        .set_nodelay(true)
        .map_err(|e| EngineError::io("TCP_NODELAY on control", e))
}

/// Maps IPv4-mapped IPv6 addresses back to IPv4 for display.
pub fn canonical(addr: SocketAddr) -> SocketAddr {
    match addr {
        SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(IpAddr::V4(v4), v6.port()),
            None => addr,
        },
        v4 => v4,
    }
}

/// Waits until `sock` is readable (for a listener: a connection is ready to
/// accept), up to `timeout`. Returns false on timeout.
pub fn wait_readable(sock: &impl AsRawFd, timeout: Duration) -> std::io::Result<bool> {
    wait_ready(sock, libc::POLLIN, timeout)
}

/// Waits until `sock` reports one of `events` (`POLLIN`, `POLLOUT`) or an
/// error or hang-up, up to `timeout`. Returns false on timeout or signal.
pub fn wait_ready(
    sock: &impl AsRawFd,
    events: libc::c_short,
    timeout: Duration,
) -> std::io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd: sock.as_raw_fd(),
        events,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
    // SAFETY: one valid pollfd.
    let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
    match rc {
        r if r < 0 => {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                Ok(false)
            } else {
                Err(e)
            }
        }
        0 => Ok(false),
        _ => Ok(true),
    }
}

/// How long the kernel may busy-poll the device queue on a blocking read
/// (`SO_BUSY_POLL`), in µs, when a test asks for busy polling.
pub const BUSY_POLL_US: u32 = 50;

/// `SO_PREFER_BUSY_POLL` (Linux 5.11; the asm-generic value, as the other
/// option numbers this crate defines): the kernel's interrupt deferral
/// leaves the device queue to busy-polling sockets.
const SO_PREFER_BUSY_POLL: libc::c_int = 69;

/// Sets `SO_PREFER_BUSY_POLL`. Needs `CAP_NET_ADMIN`; a kernel before 5.11
/// refuses it as an unknown option.
pub fn set_prefer_busy_poll(sock: &impl AsRawFd) -> std::io::Result<()> {
    set_int(sock, libc::SOL_SOCKET, SO_PREFER_BUSY_POLL, 1)
}

/// Sets `SO_BUSY_POLL` to `usec`. Raising it above the system default
/// (`net.core.busy_read`) needs `CAP_NET_ADMIN`; the error says so.
pub fn set_busy_poll(sock: &impl AsRawFd, usec: u32) -> std::io::Result<()> {
    set_int(
        sock,
        libc::SOL_SOCKET,
        libc::SO_BUSY_POLL,
        usec as libc::c_int,
    )
}

/// What the kernel said to `SO_BUSY_POLL` and `SO_PREFER_BUSY_POLL` on
/// `sock` (both asked for; either may be refused without privilege).
pub(crate) fn busy_poll_note(sock: &impl AsRawFd) -> String {
    let busy = match set_busy_poll(sock, BUSY_POLL_US) {
        Ok(()) => format!("SO_BUSY_POLL {} µs accepted by the kernel", BUSY_POLL_US),
        Err(e) => format!(
            "SO_BUSY_POLL refused by the kernel ({e}); spinning on non-blocking sockets only"
        ),
    };
    match set_prefer_busy_poll(sock) {
        Ok(()) => format!("{busy}; SO_PREFER_BUSY_POLL on"),
        Err(e) => format!("{busy}; SO_PREFER_BUSY_POLL refused ({e})"),
    }
}

/// Prepares a stream test's socket for busy polling: non-blocking, plus
/// `SO_BUSY_POLL` and `SO_PREFER_BUSY_POLL`. The socket keeps its I/O
/// timeout, which a blocking `poll(2)` sleep does not use. Returns what the
/// kernel said.
pub(crate) fn prepare_stream(sock: &(impl AsFd + AsRawFd)) -> Result<String, EngineError> {
    socket2::SockRef::from(sock)
        .set_nonblocking(true)
        .map_err(|e| EngineError::io("O_NONBLOCK", e))?;
    Ok(busy_poll_note(sock))
}

/// `setsockopt(level, opt, &value)` with an int value.
pub(crate) fn set_int(
    sock: &impl AsRawFd,
    level: libc::c_int,
    opt: libc::c_int,
    value: libc::c_int,
) -> std::io::Result<()> {
    // SAFETY: a valid fd and a pointer to an int that lives across the call,
    // with its exact size.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            opt,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// `getsockopt(level, opt)` of an int value.
pub fn get_int(
    sock: &impl AsRawFd,
    level: libc::c_int,
    opt: libc::c_int,
) -> std::io::Result<libc::c_int> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: a valid fd; v and len live across the call, len its size.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            level,
            opt,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        Ok(v)
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::ErrorKind;
    use std::time::Instant;

    /// The server's accept loop blocks in `accept` itself (no `poll(2)`
    /// before it): a connection is accepted at once, and with none the
    /// call gives up after the timeout, so the loop can look up.
    #[test]
    fn issue_8_accept_is_bounded_by_the_listener_timeout() {
        let l = listen(Some([127, 0, 0, 1].into()), 0).expect("listen");
        set_accept_timeout(&l, Duration::from_millis(100)).expect("timeout");
        let t = Instant::now();
        let e = l.accept().expect_err("no connection yet");
        assert!(
            matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
            "{e}"
        );
        assert!(
            t.elapsed() >= Duration::from_millis(90),
            "{:?}",
            t.elapsed()
        );
        let _c = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (s, _) = l.accept().expect("accepted");
        // Accepted sockets inherit the timeout: every server path sets its
        // own before it reads (this pins that the inheritance is real).
        assert_eq!(
            s.read_timeout().expect("read timeout"),
            Some(Duration::from_millis(100))
        );
    }

    #[test]
    fn issue_26_no_free_local_port_names_the_range_and_the_remedies() {
        assert_eq!(port_range("40000\t40010\n"), Some((40000, 40010)));
        assert_eq!(port_range("9 1"), None);
        assert_eq!(port_range(""), None);
        let addr: SocketAddr = "127.0.0.1:5201".parse().expect("addr");
        let e = connect_error(addr, std::io::Error::from_raw_os_error(libc::EADDRNOTAVAIL));
        assert!(matches!(e, EngineError::PortsExhausted { .. }), "{e:?}");
        let msg = e.to_string();
        for want in [
            "127.0.0.1:5201",
            "ip_local_port_range",
            "TIME_WAIT",
            "--linger0",
            "--flows",
        ] {
            assert!(msg.contains(want), "{want}: {msg}");
        }
        // Other failures say what they are.
        let e = connect_error(addr, std::io::Error::from_raw_os_error(libc::ECONNREFUSED));
        assert!(matches!(e, EngineError::Io { .. }), "{e:?}");
    }

    #[test]
    fn issue_26_linger0_sets_so_linger_zero_on_the_client() {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let opts = TcpOptions {
            linger0: true,
            ..TcpOptions::default()
        };
        let addr = l.local_addr().expect("addr");
        let s = connect(addr, &opts, Duration::from_secs(5)).expect("connect");
        let linger = |s: &TcpStream| socket2::SockRef::from(s).linger().expect("SO_LINGER");
        assert_eq!(linger(&s), Some(Duration::ZERO));
        let s = connect(addr, &TcpOptions::default(), Duration::from_secs(5)).expect("connect");
        assert_eq!(linger(&s), None);
    }
}
