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
        // Only the end's reading after a shutdown knows (`crate::tcp::end_info`).
        unacked_at_read: false,
    })
}

/// `tcpi_state` values (`include/net/tcp_states.h`) of a connection whose
/// FIN is sent and not yet acknowledged: after `shutdown(SHUT_WR)`
/// (`FIN_WAIT1`), or with the peer's FIN in first (`LAST_ACK`), or both
/// FINs crossing (`CLOSING`). The FIN follows the last byte of data, so in
/// any other state after a shutdown every segment this side sent is
/// acknowledged (or the connection is gone) and no more can be resent.
const FIN_UNACKED: [u8; 3] = [4, 9, 11];

/// Whether `raw` (a `tcp_info`) is of a connection whose FIN, or data
/// before it, still awaits its acknowledgement (`FIN_UNACKED`): its
/// `tcpi_total_retrans` may still grow.
pub fn fin_unacked_in(raw: &[u8]) -> bool {
    raw.first().is_some_and(|s| FIN_UNACKED.contains(s))
}

/// Whether the connection of `sock`, its write side shut down, still has
/// its FIN (or data before it) unacknowledged ([`fin_unacked_in`]); false
/// when TCP_INFO cannot be read.
pub fn fin_unacked(sock: &impl AsRawFd) -> bool {
    raw(sock).is_some_and(|(buf, len)| fin_unacked_in(&buf[..len]))
}

/// Reads TCP_INFO of a connected TCP socket.
pub fn read(sock: &impl AsRawFd) -> Option<TcpInfo> {
    let (buf, len) = raw(sock)?;
    parse(&buf[..len])
}

/// The raw `tcp_info` of `sock` and how many of its bytes the kernel
/// filled.
fn raw(sock: &impl AsRawFd) -> Option<([u8; BUF], usize)> {
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
    Some((buf, (len as usize).min(BUF)))
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

    /// Issue 26: only the states with a FIN sent and unacknowledged say
    /// the retransmit count may still grow.
    #[test]
    fn issue_26_only_a_fin_in_flight_leaves_the_count_open() {
        let state = |s: u8| {
            let mut raw = [0u8; 104];
            raw[0] = s;
            fin_unacked_in(&raw)
        };
        // FIN_WAIT1, LAST_ACK, CLOSING.
        assert!(state(4) && state(9) && state(11));
        // ESTABLISHED, FIN_WAIT2, TIME_WAIT, CLOSE, CLOSE_WAIT.
        assert!(![1, 5, 6, 7, 8].into_iter().any(state));
        assert!(!fin_unacked_in(&[]));
    }

    /// After a shutdown, the FIN waits while the receiver's window is
    /// full, and is acknowledged once the receiver reads.
    #[test]
    fn issue_26_a_shut_down_sender_waits_for_its_fin_ack() {
        use std::io::{Read, Write};
        let (mut tx, mut rx) = crate::test_pair::tcp_pair();
        socket2::SockRef::from(&rx)
            .set_recv_buffer_size(16 << 10)
            .expect("SO_RCVBUF");
        tx.set_nonblocking(true).expect("non-blocking");
        let buf = [0u8; 16 << 10];
        let mut sent = 0;
        while sent < 256 << 10 {
            match tx.write(&buf) {
                Ok(n) => sent += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("write: {e}"),
            }
        }
        tx.shutdown(std::net::Shutdown::Write).expect("shutdown");
        assert!(fin_unacked(&tx), "the receiver has read nothing yet");
        let mut sink = vec![0u8; 64 << 10];
        while rx.read(&mut sink).expect("read") > 0 {}
        let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while fin_unacked(&tx) {
            assert!(std::time::Instant::now() < until, "FIN never acknowledged");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
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
