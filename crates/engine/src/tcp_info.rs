//! `getsockopt(TCP_INFO)` as a checked byte view.
//!
//! The kernel's `struct tcp_info` grows over releases and returns as many
//! bytes as it has; each field is read only if the returned length covers it,
//! so an older kernel yields `None` for newer fields instead of garbage.
//! Offsets are those of `include/uapi/linux/tcp.h`.

use std::os::fd::AsRawFd;

use linerate_proto::measure::TcpInfo;

const BUF: usize = 256;

mod off {
    pub const SND_MSS: usize = 16;
    pub const PMTU: usize = 60;
    pub const RTT: usize = 68;
    pub const RTTVAR: usize = 72;
    pub const SND_CWND: usize = 80;
    pub const TOTAL_RETRANS: usize = 100;
    pub const PACING_RATE: usize = 104;
    pub const DELIVERY_RATE: usize = 160;
    pub const REORD_SEEN: usize = 220;
    pub const SND_WND: usize = 228;
}

/// The bytes the kernel returned.
struct View<'a>(&'a [u8]);

impl View<'_> {
    fn u32(&self, at: usize) -> Option<u32> {
        let b = self.0.get(at..at + 4)?;
        Some(u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&self, at: usize) -> Option<u64> {
        let b = self.0.get(at..at + 8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Some(u64::from_ne_bytes(a))
    }
}

/// Parses the raw `tcp_info` bytes.
pub fn parse(raw: &[u8]) -> Option<TcpInfo> {
    let v = View(raw);
    Some(TcpInfo {
        retransmits: u64::from(v.u32(off::TOTAL_RETRANS)?),
        rtt_us: v.u32(off::RTT)?,
        rttvar_us: v.u32(off::RTTVAR)?,
        snd_cwnd: v.u32(off::SND_CWND)?,
        snd_mss: v.u32(off::SND_MSS)?,
        pmtu: v.u32(off::PMTU)?,
        // ~0 means "no pacing limit" (no fq qdisc, no BBR).
        pacing_rate: v.u64(off::PACING_RATE).filter(|&r| r != u64::MAX && r != 0),
        delivery_rate: v.u64(off::DELIVERY_RATE).filter(|&r| r != 0),
        reord_seen: v.u32(off::REORD_SEEN),
        snd_wnd: v.u32(off::SND_WND),
    })
}

/// Reads TCP_INFO of a connected TCP socket.
pub fn read(sock: &impl AsRawFd) -> Option<TcpInfo> {
    let mut buf = [0u8; BUF];
    let mut len = BUF as libc::socklen_t;
    // SAFETY: buf is valid for `len` bytes and the kernel writes at most `len`.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return None;
    }
    parse(buf.get(..len as usize)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_buffers_yield_none_not_garbage() {
        assert_eq!(parse(&[0u8; 50]), None);
        let info = parse(&[0u8; 104]).expect("pre-4.2 layout has the basics");
        assert_eq!(info.pacing_rate, None);
        assert_eq!(info.delivery_rate, None);
        assert_eq!((info.snd_wnd, info.reord_seen), (None, None));
    }

    #[test]
    fn reads_a_live_loopback_connection() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let c = std::net::TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let info = read(&c).expect("TCP_INFO on a connected socket");
        assert!(info.snd_mss > 0);
        // Every kernel linerate supports (≥5.4) reports the peer's window.
        assert!(info.snd_wnd.is_some_and(|w| w > 0), "{info:?}");
    }
}
