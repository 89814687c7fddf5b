//! rtnetlink requests this crate needs: the route to a peer (`ip route
//! get`), the neighbour table (`ip neigh`), an interface's index, MAC, MTU
//! and attached XDP program (`ip link`), and detaching a netlink-attached
//! XDP program when asked to replace it. One request per socket, answered
//! synchronously; the calling thread's network namespace is the one asked.

use std::io;
use std::net::IpAddr;

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkMessage, LinkXdp, XdpAttached};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::route::{RouteAddress, RouteAttribute, RouteMessage};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

use crate::error::XdpError;
use linerate_proto::packet::Mac;

/// Sends `msg` and collects the replies: one for a plain request, all
/// parts up to `Done` for a dump, none for an acknowledged change.
fn request(msg: RouteNetlinkMessage, flags: u16) -> Result<Vec<RouteNetlinkMessage>, XdpError> {
    let fail = |e: io::Error| XdpError::Netlink(e.to_string());
    let mut socket = Socket::new(NETLINK_ROUTE).map_err(fail)?;
    socket.bind_auto().map_err(fail)?;
    socket.connect(&SocketAddr::new(0, 0)).map_err(fail)?;
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST | flags;
    let mut req = NetlinkMessage::new(header, NetlinkPayload::from(msg));
    req.finalize();
    let mut buf = vec![0; req.header.length as usize];
    req.serialize(&mut buf);
    socket.send(&buf, 0).map_err(fail)?;

    let mut replies = Vec::new();
    let mut rx = vec![0u8; 64 * 1024];
    loop {
        let size = socket.recv(&mut &mut rx[..], 0).map_err(fail)?;
        let mut offset = 0;
        while offset < size {
            let msg: NetlinkMessage<RouteNetlinkMessage> =
                NetlinkMessage::deserialize(&rx[offset..size])
                    .map_err(|e| XdpError::Netlink(e.to_string()))?;
            let len = msg.header.length as usize;
            match msg.payload {
                NetlinkPayload::Done(_) => return Ok(replies),
                NetlinkPayload::Error(e) if e.code.is_none() => return Ok(replies),
                NetlinkPayload::Error(e) => return Err(XdpError::NetlinkRefused(e.to_io())),
                NetlinkPayload::InnerMessage(m) => {
                    replies.push(m);
                    if flags & NLM_F_DUMP == 0 && flags & NLM_F_ACK == 0 {
                        return Ok(replies);
                    }
                }
                _ => {}
            }
            if len == 0 {
                break;
            }
            offset += len;
        }
    }
}

/// What the kernel's route to a peer says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RouteTo {
    pub ifindex: u32,
    pub source: Option<IpAddr>,
    pub gateway: Option<IpAddr>,
}

fn ip_of(a: &RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(v4) => Some(IpAddr::V4(*v4)),
        RouteAddress::Inet6(v6) => Some(IpAddr::V6(*v6)),
        _ => None,
    }
}

/// `ip route get PEER`.
pub(crate) fn route_to(peer: IpAddr) -> Result<RouteTo, XdpError> {
    let mut msg = RouteMessage::default();
    msg.header.address_family = match peer {
        IpAddr::V4(_) => AddressFamily::Inet,
        IpAddr::V6(_) => AddressFamily::Inet6,
    };
    msg.header.destination_prefix_length = if peer.is_ipv4() { 32 } else { 128 };
    msg.attributes
        .push(RouteAttribute::Destination(peer.into()));
    let replies = request(RouteNetlinkMessage::GetRoute(msg), 0)
        .map_err(|e| XdpError::NoRoute(peer, e.to_string()))?;
    let Some(RouteNetlinkMessage::NewRoute(route)) = replies.into_iter().next() else {
        return Err(XdpError::NoRoute(peer, "the kernel sent no route".into()));
    };
    let mut out = RouteTo {
        ifindex: 0,
        source: None,
        gateway: None,
    };
    for attr in &route.attributes {
        match attr {
            RouteAttribute::Oif(i) => out.ifindex = *i,
            RouteAttribute::PrefSource(a) => out.source = ip_of(a),
            RouteAttribute::Gateway(a) => out.gateway = ip_of(a),
            _ => {}
        }
    }
    if out.ifindex == 0 {
        return Err(XdpError::NoRoute(
            peer,
            "the route names no interface".into(),
        ));
    }
    Ok(out)
}

/// The link-layer address of `ip` on interface `ifindex`, when the
/// neighbour table has a usable entry.
pub(crate) fn neighbour(ifindex: u32, ip: IpAddr) -> Result<Option<Mac>, XdpError> {
    let mut msg = NeighbourMessage::default();
    msg.header.family = match ip {
        IpAddr::V4(_) => AddressFamily::Inet,
        IpAddr::V6(_) => AddressFamily::Inet6,
    };
    let replies = request(RouteNetlinkMessage::GetNeighbour(msg), NLM_F_DUMP)?;
    for reply in replies {
        let RouteNetlinkMessage::NewNeighbour(n) = reply else {
            continue;
        };
        let usable = !matches!(
            n.header.state,
            NeighbourState::Incomplete | NeighbourState::Failed | NeighbourState::None
        );
        if n.header.ifindex != ifindex || !usable {
            continue;
        }
        let mut dest = None;
        let mut mac = None;
        for attr in &n.attributes {
            match attr {
                NeighbourAttribute::Destination(NeighbourAddress::Inet(a)) => {
                    dest = Some(IpAddr::V4(*a))
                }
                NeighbourAttribute::Destination(NeighbourAddress::Inet6(a)) => {
                    dest = Some(IpAddr::V6(*a))
                }
                NeighbourAttribute::LinkLayerAddress(l) if l.len() == 6 => {
                    let mut m = [0; 6];
                    m.copy_from_slice(l);
                    mac = Some(m);
                }
                _ => {}
            }
        }
        if dest == Some(ip) && mac.is_some() {
            return Ok(mac);
        }
    }
    Ok(None)
}

/// An XDP program the kernel reports on an interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttachedProgram {
    pub prog_id: u32,
    /// "native", "generic", "offloaded" or "several".
    pub mode: &'static str,
}

/// What `ip link show DEV` tells this crate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkInfo {
    pub ifindex: u32,
    pub name: String,
    pub mac: Option<Mac>,
    pub mtu: Option<u32>,
    pub loopback: bool,
    /// Number of receive queues (`IFLA_NUM_RX_QUEUES`).
    pub rx_queues: Option<u32>,
    pub xdp: Option<AttachedProgram>,
}

/// `ip link show` for the interface with index `ifindex`.
pub fn link(ifindex: u32) -> Result<LinkInfo, XdpError> {
    let mut msg = LinkMessage::default();
    msg.header.index = ifindex;
    let replies = request(RouteNetlinkMessage::GetLink(msg), 0)?;
    let Some(RouteNetlinkMessage::NewLink(l)) = replies.into_iter().next() else {
        return Err(XdpError::NoInterface(format!("index {ifindex}")));
    };
    let mut info = LinkInfo {
        ifindex,
        name: String::new(),
        mac: None,
        mtu: None,
        loopback: l.header.flags.contains(LinkFlags::Loopback),
        rx_queues: None,
        xdp: None,
    };
    for attr in &l.attributes {
        match attr {
            LinkAttribute::IfName(n) => info.name = n.clone(),
            LinkAttribute::Address(a) if a.len() == 6 => {
                let mut m = [0; 6];
                m.copy_from_slice(a);
                info.mac = Some(m);
            }
            LinkAttribute::Mtu(m) => info.mtu = Some(*m),
            LinkAttribute::NumRxQueues(q) => info.rx_queues = Some(*q),
            LinkAttribute::Xdp(x) => info.xdp = attached(x),
            _ => {}
        }
    }
    Ok(info)
}

fn attached(xdp: &[LinkXdp]) -> Option<AttachedProgram> {
    let mut mode = None;
    let mut prog_id = 0;
    for x in xdp {
        match x {
            LinkXdp::Attached(XdpAttached::None) => return None,
            LinkXdp::Attached(XdpAttached::Driver) => mode = Some("native"),
            LinkXdp::Attached(XdpAttached::SocketBuffer) => mode = Some("generic"),
            LinkXdp::Attached(XdpAttached::Hardware) => mode = Some("offloaded"),
            LinkXdp::Attached(_) => mode = Some("several"),
            LinkXdp::ProgId(id) => prog_id = *id,
            _ => {}
        }
    }
    mode.map(|mode| AttachedProgram { prog_id, mode })
}

/// `ip link show NAME`.
pub fn link_by_name(name: &str) -> Result<LinkInfo, XdpError> {
    let c = std::ffi::CString::new(name).map_err(|_| XdpError::NoInterface(name.to_owned()))?;
    // SAFETY: `c` is a valid NUL-terminated string for the call's length.
    let ifindex = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if ifindex == 0 {
        return Err(XdpError::NoInterface(name.to_owned()));
    }
    link(ifindex)
}

/// Detaches a netlink-attached XDP program (`ip link set DEV xdp off`) in
/// the mode given by `flags` (XDP_FLAGS_*). A program held by a BPF link
/// cannot be detached this way: the kernel answers EBUSY.
pub(crate) fn detach(ifindex: u32, flags: u32) -> Result<(), XdpError> {
    let mut msg = LinkMessage::default();
    msg.header.index = ifindex;
    msg.attributes.push(LinkAttribute::Xdp(vec![
        LinkXdp::Fd(-1),
        LinkXdp::Flags(flags),
    ]));
    request(RouteNetlinkMessage::SetLink(msg), NLM_F_ACK).map(drop)
}
