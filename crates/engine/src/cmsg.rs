//! Socket options and control messages of the UDP receive path, shared by
//! every engine that reads datagrams with `recvmsg`-family calls (syscall,
//! batch, uring): the option numbers, the control buffer's size and the one
//! parser that turns a filled control buffer into a
//! [`RecvMeta`](crate::engines::RecvMeta).
//!
//! The parser is safe code over the buffer's bytes, in smoltcp's manner: a
//! [`Cmsg`] view exists only after one length check of its header and data
//! against the buffer, and its fields are read from fixed-size arrays, so no
//! accessor can panic and a short or malformed buffer ends the walk instead
//! of reading past it. Bytes need no alignment, so the same walk serves a
//! stack buffer and an io_uring provided buffer.

use crate::engines::RecvMeta;

// Socket options from include/uapi/asm-generic/socket.h (the values every
// architecture linerate builds for uses).
pub(crate) const SO_SNDBUFFORCE: libc::c_int = 32;
pub(crate) const SO_RCVBUFFORCE: libc::c_int = 33;
pub(crate) const SO_TIMESTAMPNS: libc::c_int = 35;
pub(crate) const SO_RXQ_OVFL: libc::c_int = 40;
pub(crate) const SO_MEMINFO: libc::c_int = 55;

/// Control-message room per received message: a timestamp (32 bytes), the
/// drop counter (24) and the GRO segment size (24) fit with room to spare.
pub(crate) const RECV_CMSG: usize = 128;

/// A control buffer for one received message.
pub(crate) type ControlBuf = [u8; RECV_CMSG];

/// `sizeof(struct cmsghdr)`: the kernel's `size_t` length, then level and
/// type (both `int`).
const HDR: usize = std::mem::size_of::<libc::cmsghdr>();
/// The kernel's `size_t` `cmsg_len`.
const LEN: usize = std::mem::size_of::<libc::size_t>();
/// `CMSG_ALIGN`: each message is padded to a multiple of `sizeof(long)`.
const ALIGN: usize = std::mem::size_of::<libc::c_long>();

/// One control message: its level, type and data, checked to lie within
/// the buffer it was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cmsg<'a> {
    pub level: libc::c_int,
    pub kind: libc::c_int,
    pub data: &'a [u8],
}

impl<'a> Cmsg<'a> {
    /// The message at the start of `buf` and the length it takes with its
    /// padding, or `None` when the header or the data it claims does not fit
    /// (the one length check every field read relies on).
    fn new_checked(buf: &'a [u8]) -> Option<(Self, usize)> {
        let hdr: &[u8; HDR] = buf.first_chunk()?;
        let (len, rest): (&[u8; LEN], &[u8]) = hdr.split_first_chunk()?;
        let len = usize::from_ne_bytes(*len);
        let (level, kind) = rest.split_first_chunk::<4>()?;
        let kind: &[u8; 4] = kind.first_chunk()?;
        if len < HDR {
            return None;
        }
        let msg = Cmsg {
            level: libc::c_int::from_ne_bytes(*level),
            kind: libc::c_int::from_ne_bytes(*kind),
            data: buf.get(HDR..len)?,
        };
        Some((msg, len.checked_next_multiple_of(ALIGN)?))
    }

    /// The data as a native `int`/`u32`, if it holds one.
    fn u32(&self) -> Option<u32> {
        self.data.first_chunk().copied().map(u32::from_ne_bytes)
    }

    /// The data as a `timespec` (two 64-bit fields), in ns, negative
    /// fields read as 0.
    fn timespec_ns(&self) -> Option<u64> {
        let (sec, rest) = self.data.split_first_chunk::<8>()?;
        let nsec: &[u8; 8] = rest.first_chunk()?;
        let (sec, nsec) = (i64::from_ne_bytes(*sec), i64::from_ne_bytes(*nsec));
        Some(
            (sec.max(0) as u64)
                .saturating_mul(1_000_000_000)
                .saturating_add(nsec.max(0) as u64),
        )
    }
}

/// The control messages in a buffer the kernel filled, in order; the walk
/// ends at the buffer's end or at the first malformed header.
#[derive(Debug, Clone)]
pub(crate) struct Cmsgs<'a> {
    rest: &'a [u8],
}

/// Walks `ctrl`: the first `msg_controllen` bytes of a control buffer.
pub(crate) fn cmsgs(ctrl: &[u8]) -> Cmsgs<'_> {
    Cmsgs { rest: ctrl }
}

impl<'a> Iterator for Cmsgs<'a> {
    type Item = Cmsg<'a>;

    fn next(&mut self) -> Option<Cmsg<'a>> {
        let Some((msg, step)) = Cmsg::new_checked(self.rest) else {
            self.rest = &[];
            return None;
        };
        // The last message's padding may lie past the buffer's end.
        self.rest = self.rest.get(step..).unwrap_or(&[]);
        Some(msg)
    }
}

/// Reads the control messages of one receive (`SO_TIMESTAMPNS`,
/// `SO_RXQ_OVFL`, `UDP_GRO`) into a [`RecvMeta`] whose `len` and
/// `truncated` the caller fills.
pub(crate) fn parse(ctrl: &[u8]) -> RecvMeta {
    let mut m = RecvMeta::default();
    for c in cmsgs(ctrl) {
        match (c.level, c.kind) {
            (libc::SOL_SOCKET, SO_TIMESTAMPNS) => {
                if let Some(ns) = c.timespec_ns() {
                    m.stamp_ns = Some(ns);
                }
            }
            (libc::SOL_SOCKET, SO_RXQ_OVFL) => m.drops = c.u32(),
            // The kernel passes the segment size as an int.
            (libc::SOL_UDP, libc::UDP_GRO) => m.segment = c.u32().map(|v| v as usize),
            _ => {}
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A control message as the kernel lays it out: header, data, padding.
    fn cmsg(level: i32, kind: i32, data: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&(HDR + data.len()).to_ne_bytes());
        v.extend_from_slice(&level.to_ne_bytes());
        v.extend_from_slice(&kind.to_ne_bytes());
        v.extend_from_slice(data);
        v.resize((v.len() + ALIGN - 1) & !(ALIGN - 1), 0);
        v
    }

    #[test]
    fn reads_stamp_drops_and_gro_segment() {
        let mut ts = 3i64.to_ne_bytes().to_vec();
        ts.extend_from_slice(&5i64.to_ne_bytes());
        let mut ctrl = cmsg(libc::SOL_SOCKET, SO_TIMESTAMPNS, &ts);
        ctrl.extend(cmsg(libc::SOL_SOCKET, SO_RXQ_OVFL, &7u32.to_ne_bytes()));
        ctrl.extend(cmsg(libc::SOL_UDP, libc::UDP_GRO, &1472i32.to_ne_bytes()));
        let m = parse(&ctrl);
        assert_eq!(m.stamp_ns, Some(3_000_000_005));
        assert_eq!((m.drops, m.segment), (Some(7), Some(1472)));
        // The last message's padding may be cut off by msg_controllen.
        let cut = &ctrl[..ctrl.len() - 4];
        assert_eq!(parse(cut).segment, Some(1472));
    }

    #[test]
    fn cmsg_walk_stops_at_a_malformed_header() {
        let mut ctrl = [0u8; 64];
        // A header claiming 200 bytes in a 64-byte buffer.
        ctrl[..8].copy_from_slice(&200usize.to_ne_bytes());
        ctrl[8..12].copy_from_slice(&libc::SOL_UDP.to_ne_bytes());
        ctrl[12..16].copy_from_slice(&libc::UDP_GRO.to_ne_bytes());
        assert_eq!(parse(&ctrl), RecvMeta::default());
        // A zero length must not loop forever.
        assert_eq!(parse(&[0u8; 64]), RecvMeta::default());
        // Lengths that overflow when padded, and a header cut short.
        ctrl[..8].copy_from_slice(&usize::MAX.to_ne_bytes());
        assert_eq!(parse(&ctrl), RecvMeta::default());
        assert_eq!(cmsgs(&ctrl[..HDR - 1]).count(), 0);
        // A short payload is no value.
        let short = cmsg(libc::SOL_SOCKET, SO_TIMESTAMPNS, &[1, 2, 3]);
        assert_eq!(parse(&short), RecvMeta::default());
    }
}
