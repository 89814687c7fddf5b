//! What an interface's driver says it can do for XDP, from the kernel's
//! `netdev` generic-netlink family (Linux 6.3 and later; `ynl --family
//! netdev --do dev-get`): native XDP, redirect, AF_XDP zero-copy. Read,
//! never tried: attaching a program to find out would reconfigure some
//! NICs' rings (a link flap) on a host someone else may be using.

use netlink_sys::{protocols::NETLINK_GENERIC, Socket, SocketAddr};

/// `enum netdev_xdp_act` bits (include/uapi/linux/netdev.h).
pub(crate) const XDP_ACT_REDIRECT: u64 = 1 << 1;
pub(crate) const XDP_ACT_XSK_ZEROCOPY: u64 = 1 << 3;

const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const NETDEV_CMD_DEV_GET: u8 = 1;
const NETDEV_A_DEV_IFINDEX: u16 = 1;
const NETDEV_A_DEV_XDP_FEATURES: u16 = 3;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 1;

/// One generic-netlink request: header, genl header, attributes.
fn message(family: u16, cmd: u8, attrs: &[(u16, &[u8])]) -> Vec<u8> {
    let mut m = vec![0u8; 16];
    m.extend_from_slice(&[cmd, 1, 0, 0]);
    for (kind, data) in attrs {
        let len = 4 + data.len();
        m.extend_from_slice(&(len as u16).to_ne_bytes());
        m.extend_from_slice(&kind.to_ne_bytes());
        m.extend_from_slice(data);
        m.resize(m.len().next_multiple_of(4), 0);
    }
    let total = m.len() as u32;
    m[0..4].copy_from_slice(&total.to_ne_bytes());
    m[4..6].copy_from_slice(&family.to_ne_bytes());
    m[6..8].copy_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    m
}

/// The attributes of the first reply, as (type, value) pairs; `None` on
/// an error reply or a malformed one.
fn attributes(reply: &[u8]) -> Option<Vec<(u16, &[u8])>> {
    let len = u32::from_ne_bytes(reply.get(0..4)?.try_into().ok()?) as usize;
    let kind = u16::from_ne_bytes(reply.get(4..6)?.try_into().ok()?);
    if kind == NLMSG_ERROR {
        return None;
    }
    let body = reply.get(20..len.min(reply.len()))?;
    let mut out = Vec::new();
    let mut at = 0;
    while at + 4 <= body.len() {
        let alen = usize::from(u16::from_ne_bytes([body[at], body[at + 1]]));
        let akind = u16::from_ne_bytes([body[at + 2], body[at + 3]]) & 0x3fff;
        if alen < 4 || at + alen > body.len() {
            break;
        }
        out.push((akind, &body[at + 4..at + alen]));
        at += alen.next_multiple_of(4);
    }
    Some(out)
}

fn ask(socket: &Socket, req: &[u8], buf: &mut Vec<u8>) -> Option<usize> {
    socket.send(req, 0).ok()?;
    buf.resize(16 * 1024, 0);
    socket.recv(&mut &mut buf[..], 0).ok()
}

/// The driver's XDP feature bits (`XDP_ACT_*`) for interface `ifindex`,
/// or `None` where the kernel does not report them.
pub(crate) fn xdp_features(ifindex: u32) -> Option<u64> {
    let mut socket = Socket::new(NETLINK_GENERIC).ok()?;
    socket.bind_auto().ok()?;
    socket.connect(&SocketAddr::new(0, 0)).ok()?;
    let mut buf = Vec::new();
    let req = message(
        GENL_ID_CTRL,
        CTRL_CMD_GETFAMILY,
        &[(CTRL_ATTR_FAMILY_NAME, b"netdev\0")],
    );
    let n = ask(&socket, &req, &mut buf)?;
    let family = attributes(&buf[..n])?
        .into_iter()
        .find(|(k, _)| *k == CTRL_ATTR_FAMILY_ID)
        .and_then(|(_, v)| Some(u16::from_ne_bytes(v.get(0..2)?.try_into().ok()?)))?;
    let req = message(
        family,
        NETDEV_CMD_DEV_GET,
        &[(NETDEV_A_DEV_IFINDEX, &ifindex.to_ne_bytes())],
    );
    let n = ask(&socket, &req, &mut buf)?;
    attributes(&buf[..n])?
        .into_iter()
        .find(|(k, _)| *k == NETDEV_A_DEV_XDP_FEATURES)
        .and_then(|(_, v)| Some(u64::from_ne_bytes(v.get(0..8)?.try_into().ok()?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_padded_and_replies_parse() {
        let m = message(GENL_ID_CTRL, CTRL_CMD_GETFAMILY, &[(2, b"netdev\0")]);
        assert_eq!(m.len(), 16 + 4 + 12);
        assert_eq!(
            u32::from_ne_bytes(m[0..4].try_into().unwrap_or_default()),
            32
        );
        // A reply is the same shape: header, genl header, attributes.
        let attrs = attributes(&m).unwrap_or_default();
        assert_eq!(attrs, [(2, &b"netdev\0"[..])]);
        assert!(attributes(&m[..3]).is_none());
    }
}
