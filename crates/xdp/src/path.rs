//! The way out to a peer, as an AF_XDP sender needs it: the interface the
//! kernel's route leaves by, the source address it would pick, and the
//! next hop's MAC from the neighbour table, resolved first when missing
//! (one empty datagram through the kernel makes it ARP or solicit).

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use crate::error::XdpError;
use crate::netlink::{self, LinkInfo};
use linerate_proto::packet::Mac;

/// Everything a frame to the peer needs besides ports and payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Path {
    pub peer: IpAddr,
    /// The interface the route leaves by.
    pub link: LinkInfo,
    /// The source address the kernel would pick.
    pub source: IpAddr,
    /// The gateway, or the peer itself when it is on link.
    pub next_hop: IpAddr,
    pub src_mac: Mac,
    pub dst_mac: Mac,
}

/// How often the neighbour table is read while resolution runs.
const POLL: Duration = Duration::from_millis(10);

/// The path to `peer` in this thread's network namespace, waiting up to
/// `resolve` for the next hop's MAC when the table has none yet.
pub fn path_to(peer: IpAddr, resolve: Duration) -> Result<Path, XdpError> {
    let route = netlink::route_to(peer)?;
    let link = netlink::link(route.ifindex)?;
    if link.loopback {
        return Err(XdpError::Loopback(link.name));
    }
    let source = match route.source {
        Some(s) => s,
        None => kernel_source(peer)?,
    };
    let next_hop = route.gateway.unwrap_or(peer);
    let src_mac = link
        .mac
        .ok_or_else(|| XdpError::NoRoute(peer, format!("{} has no Ethernet address", link.name)))?;
    let dst_mac = resolve_neighbour(&link, source, peer, next_hop, resolve)?;
    Ok(Path {
        peer,
        link,
        source,
        next_hop,
        src_mac,
        dst_mac,
    })
}

/// The source address of a connected UDP socket (no packet sent).
fn kernel_source(peer: IpAddr) -> Result<IpAddr, XdpError> {
    let fail = |e: std::io::Error| XdpError::NoRoute(peer, e.to_string());
    let any = SocketAddr::new(linerate_proto::packet::unspecified_like(peer), 0);
    let sock = UdpSocket::bind(any).map_err(fail)?;
    sock.connect((peer, 9)).map_err(fail)?;
    Ok(sock.local_addr().map_err(fail)?.ip())
}

/// The MAC of `hop`, sending one empty datagram to `peer`'s discard port
/// through the kernel when the table has no entry, then re-reading it.
fn resolve_neighbour(
    link: &LinkInfo,
    source: IpAddr,
    peer: IpAddr,
    hop: IpAddr,
    wait: Duration,
) -> Result<Mac, XdpError> {
    if let Some(mac) = netlink::neighbour(link.ifindex, hop)? {
        return Ok(mac);
    }
    // Resolution is the kernel's: any datagram routed to the peer starts
    // it. Best effort; the table tells whether it worked.
    if let Ok(sock) = UdpSocket::bind(SocketAddr::new(source, 0)) {
        let _ = sock.send_to(&[], (peer, 9));
    }
    let start = Instant::now();
    loop {
        if let Some(mac) = netlink::neighbour(link.ifindex, hop)? {
            return Ok(mac);
        }
        if start.elapsed() >= wait {
            return Err(XdpError::Neighbour {
                hop,
                iface: link.name.clone(),
                waited_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
            });
        }
        std::thread::sleep(POLL);
    }
}
