//! The route to a host without netlink: a connected UDP socket tells the
//! source address the kernel picked (`getsockname`) and the route's MTU
//! (`IP_MTU`/`IPV6_MTU`); the default route's interface is in
//! `/proc/net/route`. No packet is sent.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs, UdpSocket};
use std::os::fd::AsRawFd;

/// What the kernel would use to reach a host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub dest: IpAddr,
    pub source: IpAddr,
    /// Interface that owns the source address.
    pub dev: Option<String>,
    /// MTU of the route (the interface MTU or a learned path MTU).
    pub mtu: Option<u32>,
}

/// Failure to find a route.
#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    #[error("cannot resolve {0}: {1}")]
    Resolve(String, std::io::Error),
    #[error("{0}: no address")]
    NoAddress(String),
    #[error("no route to {0}: {1}")]
    NoRoute(IpAddr, std::io::Error),
}

/// Resolves `host` (name or address) to its first address.
pub fn resolve(host: &str) -> Result<IpAddr, RouteError> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(ip);
    }
    (host, 0)
        .to_socket_addrs()
        .map_err(|e| RouteError::Resolve(host.to_owned(), e))?
        .next()
        .map(|a| a.ip())
        .ok_or_else(|| RouteError::NoAddress(host.to_owned()))
}

/// The route to `dest`.
pub fn to(dest: IpAddr) -> Result<Route, RouteError> {
    let bind: SocketAddr = match dest {
        IpAddr::V4(_) => "0.0.0.0:0".parse().unwrap_or_else(|_| unreachable!()),
        IpAddr::V6(_) => "[::]:0".parse().unwrap_or_else(|_| unreachable!()),
    };
    let sock = UdpSocket::bind(bind).map_err(|e| RouteError::NoRoute(dest, e))?;
    sock.connect((dest, 9))
        .map_err(|e| RouteError::NoRoute(dest, e))?;
    let source = sock
        .local_addr()
        .map_err(|e| RouteError::NoRoute(dest, e))?
        .ip();
    let (level, opt) = match dest {
        IpAddr::V4(_) => (libc::IPPROTO_IP, libc::IP_MTU),
        IpAddr::V6(_) => (libc::IPPROTO_IPV6, libc::IPV6_MTU),
    };
    let mut mtu: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `mtu`.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            level,
            opt,
            (&mut mtu as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    Ok(Route {
        dest,
        source,
        dev: crate::addrs::owner_of(source),
        mtu: (rc == 0 && mtu > 0).then_some(mtu as u32),
    })
}

/// The interface of the IPv4 default route (`/proc/net/route`).
pub fn default_dev() -> Option<String> {
    let text = std::fs::read_to_string("/proc/net/route").ok()?;
    text.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() > 2 && f[1] == "00000000").then(|| f[0].to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_to_loopback_is_lo_with_its_mtu() {
        let r = to("127.0.0.1".parse().expect("ip")).expect("route");
        assert_eq!(r.dev.as_deref(), Some("lo"));
        // lo's MTU is 65536, but an IPv4 route's is capped at 65535 (the
        // largest IPv4 packet).
        assert_eq!(r.mtu, Some(65535));
        assert_eq!(resolve("127.0.0.1").expect("ip").to_string(), "127.0.0.1");
    }
}
