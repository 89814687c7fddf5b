//! Socket options and control messages of the UDP receive path, shared by
//! every engine that reads datagrams with `recvmsg`-family calls: the
//! option numbers, the control buffer and the parser that turns a filled
//! `msghdr` into a [`RecvMeta`](crate::engines::RecvMeta).

// Socket options from include/uapi/asm-generic/socket.h (the values every
// architecture linerate builds for uses).
pub(crate) const SO_SNDBUFFORCE: libc::c_int = 32;
pub(crate) const SO_RCVBUFFORCE: libc::c_int = 33;
pub(crate) const SO_TIMESTAMPNS: libc::c_int = 35;
pub(crate) const SO_RXQ_OVFL: libc::c_int = 40;
pub(crate) const SO_MEMINFO: libc::c_int = 55;

/// Room for the control messages a receive asks for: SO_RXQ_OVFL (a u32)
/// and SO_TIMESTAMPNS (a timespec), each with its header, 8-byte aligned.
pub(crate) type ControlBuf = [u64; 8];

/// What the kernel attached to one received datagram.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RecvCmsgs {
    /// The socket's cumulative drop counter (SO_RXQ_OVFL).
    pub drops: Option<u32>,
    /// Arrival time, CLOCK_REALTIME ns (SO_TIMESTAMPNS).
    pub stamp_ns: Option<u64>,
}

/// Walks the control messages of a `msghdr` the kernel filled.
///
/// # Safety
/// `msg` must come from a successful `recvmsg`/`recvmmsg` whose
/// `msg_control` points to a live buffer of `msg_controllen` bytes.
pub(crate) unsafe fn parse(msg: &libc::msghdr) -> RecvCmsgs {
    let mut out = RecvCmsgs::default();
    // SAFETY: the CMSG macros walk the control buffer the kernel filled,
    // bounded by msg_controllen (the caller's contract); each payload is
    // read unaligned at the size its type defines.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET {
                match (*c).cmsg_type {
                    SO_RXQ_OVFL => {
                        out.drops =
                            Some(std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<u32>()));
                    }
                    SO_TIMESTAMPNS => {
                        let ts =
                            std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::timespec>());
                        out.stamp_ns = Some(
                            (ts.tv_sec.max(0) as u64)
                                .saturating_mul(1_000_000_000)
                                .saturating_add(ts.tv_nsec.max(0) as u64),
                        );
                    }
                    _ => {}
                }
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
    out
}
